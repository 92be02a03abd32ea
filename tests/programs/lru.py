"""A linear recurrent unit (Orvieto et al. 2023, "Resurrecting recurrent neural networks"): a complex
diagonal recurrence h_t = lambda * h_t-1 + B x_t with lambda = exp(-exp(nu) + i exp(theta)), computed for
all steps at once by lax.associative_scan with a binary operator on (complex) pairs, the real part of C h
plus a skip term, a GELU MLP, vmap over a batch, and a regression step by value_and_grad through complex
parameters built from real ones (lax.complex, jnp.exp of complex, jnp.real)."""
import kiln as jax
import kiln.numpy as jnp
from kiln import lax, random

D_IN, D_STATE, LENGTH, BATCH = 3, 4, 12, 5


def init_params(key):
    k = random.split(key, 6)
    r = random.uniform(k[0], (D_STATE,), minval=0.5, maxval=0.95)
    return {"nu_log": jnp.log(-jnp.log(r)),
            "theta_log": jnp.log(random.uniform(k[1], (D_STATE,), maxval=jnp.pi / 4) + 1e-3),
            "B_re": random.normal(k[2], (D_STATE, D_IN)) / jnp.sqrt(2 * D_IN),
            "B_im": random.normal(k[3], (D_STATE, D_IN)) / jnp.sqrt(2 * D_IN),
            "C_re": random.normal(k[4], (1, D_STATE)) / jnp.sqrt(D_STATE),
            "C_im": random.normal(k[5], (1, D_STATE)) / jnp.sqrt(D_STATE),
            "D": jnp.ones((1, D_IN), jnp.float32) * 0.1}


def binary_operator(e1, e2):
    a1, b1 = e1
    a2, b2 = e2
    return a1 * a2, a2 * b1 + b2


def lru_layer(params, xs):
    lam = jnp.exp(lax.complex(-jnp.exp(params["nu_log"]), jnp.exp(params["theta_log"])))
    gamma = jnp.sqrt(1 - jnp.abs(lam) ** 2)
    b = lax.complex(params["B_re"], params["B_im"]) * gamma[:, None]
    c = lax.complex(params["C_re"], params["C_im"])
    bu = jax.vmap(lambda x: b @ x.astype(jnp.complex64))(xs)
    lams = jnp.broadcast_to(lam, (xs.shape[0], D_STATE))
    _, hs = lax.associative_scan(binary_operator, (lams, bu))
    ys = jax.vmap(lambda h, x: jnp.real(c @ h) + params["D"] @ x)(hs, xs)
    return jax.nn.gelu(ys[:, 0])


def loss(params, xs, targets):
    preds = jax.vmap(lru_layer, in_axes=(None, 0))(params, xs)
    return jnp.mean((preds - targets) ** 2)


@jax.jit
def step(params, xs, targets):
    value, grads = jax.value_and_grad(loss)(params, xs, targets)
    return jax.tree_util.tree_map(lambda p, g: p - 0.1 * g, params, grads), value


def make_data(key):
    xs = random.normal(key, (BATCH, LENGTH, D_IN))
    targets = jnp.cumsum(xs[..., 0], axis=1) * 0.3  # a running sum: the recurrence's job
    return xs, targets


def main(key):
    k_params, k_data = random.split(key)
    params = init_params(k_params)
    xs, targets = make_data(k_data)
    losses = []
    for _ in range(4):
        params, value = step(params, xs, targets)
        losses.append(value)
    return {"losses": jnp.stack(losses), "nu_log": params["nu_log"], "C_im": params["C_im"],
            "outputs": lru_layer(params, xs[0])}


def export(key):
    k_params, k_data = random.split(key)
    return step, (init_params(k_params), *make_data(k_data))
