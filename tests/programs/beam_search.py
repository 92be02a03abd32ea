"""Decoding from a small GRU language model, as sequence-to-sequence JAX code does it: beam search in
lax.scan with lax.top_k over the flattened (beam x vocab) scores, backpointers gathered with
jnp.take_along_axis, finished beams masked with jnp.where and -inf, a lax.switch over the decoding rule
(greedy / temperature sampling with random.categorical / nucleus-style top-k sampling with random.choice and
p=), the GRU written with jnp.split gates, and the vocabulary histogram by jnp.unique(size=, fill_value=)."""
import kiln as jax
import kiln.numpy as jnp
from kiln import lax, random

VOCAB, HIDDEN, BEAMS, STEPS, EOS = 7, 10, 3, 6, 5


def init_params(key):
    k = random.split(key, 4)
    return {"embed": random.normal(k[0], (VOCAB, HIDDEN)) * 0.5,
            "w": random.normal(k[1], (HIDDEN, 3 * HIDDEN)) / jnp.sqrt(HIDDEN),
            "u": random.normal(k[2], (HIDDEN, 3 * HIDDEN)) / jnp.sqrt(HIDDEN),
            "out": random.normal(k[3], (HIDDEN, VOCAB)) / jnp.sqrt(HIDDEN)}


def gru(params, h, token):
    x = params["embed"][token]
    xr, xz, xn = jnp.split(x @ params["w"], 3, axis=-1)
    hr, hz, hn = jnp.split(h @ params["u"], 3, axis=-1)
    r, z = jax.nn.sigmoid(xr + hr), jax.nn.sigmoid(xz + hz)
    n = jnp.tanh(xn + r * hn)
    h = (1 - z) * n + z * h
    return h, jax.nn.log_softmax(h @ params["out"])


@jax.jit
def beam_search(params, start):
    h0 = jnp.zeros((BEAMS, HIDDEN), jnp.float32)
    tokens0 = jnp.full((BEAMS,), start, jnp.int32)
    scores0 = jnp.array([0.0] + [-jnp.inf] * (BEAMS - 1), jnp.float32)

    def step(carry, _):
        h, tokens, scores, done = carry
        h, logp = gru(params, h, tokens)
        # a finished beam only extends by EOS, at no cost
        logp = jnp.where(done[:, None], jnp.where(jnp.arange(VOCAB) == EOS, 0.0, -jnp.inf), logp)
        total = (scores[:, None] + logp).reshape(-1)
        best, flat = lax.top_k(total, BEAMS)
        parent, token = flat // VOCAB, flat % VOCAB
        h = jnp.take_along_axis(h, parent[:, None], axis=0)
        done = jnp.take_along_axis(done, parent, axis=0) | (token == EOS)
        return (h, token, best, done), (token, parent)

    (_, _, scores, done), (tokens, parents) = lax.scan(step, (h0, tokens0, scores0, jnp.zeros(BEAMS, bool)), None,
                                                       length=STEPS)

    def backtrack(beam, t):
        token = tokens[t, beam]
        return parents[t, beam], token

    _, best_reversed = lax.scan(backtrack, jnp.int32(0), jnp.arange(STEPS - 1, -1, -1))
    return scores, done, best_reversed[::-1]


def sample(params, key, rule):
    def step(carry, key):
        h, token = carry
        h, logp = gru(params, h, token)
        token = lax.switch(rule, [
            lambda k: jnp.argmax(logp).astype(jnp.int32),
            lambda k: random.categorical(k, logp / 0.7).astype(jnp.int32),
            lambda k: random.choice(k, VOCAB, p=jnp.exp(logp) * (logp >= lax.top_k(logp, 3)[0][-1])
                                    / jnp.sum(jnp.exp(logp) * (logp >= lax.top_k(logp, 3)[0][-1]))).astype(jnp.int32),
        ], key)
        return (h, token), token

    _, tokens = lax.scan(step, (jnp.zeros(HIDDEN, jnp.float32), jnp.int32(1)), random.split(key, STEPS))
    return tokens


def main(key):
    k_params, k_sample = random.split(key)
    params = init_params(k_params)
    scores, done, best = beam_search(params, 2)
    sampler = jax.jit(sample)
    samples = jnp.stack([sampler(params, k, rule) for k, rule in zip(random.split(k_sample, 3), range(3))])
    values, counts = jnp.unique(samples, return_counts=True, size=VOCAB, fill_value=-1)
    return {"scores": scores, "done": done, "best": best, "samples": samples, "values": values, "counts": counts}


def export(key):
    k_params, _ = random.split(key)
    return beam_search, (init_params(k_params), jnp.int32(3))
