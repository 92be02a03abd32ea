"""An HMM's forward-backward pass in log space with lax.scan: the log likelihood, the posterior state
marginals, and the gradient of the log likelihood with respect to the emission logits."""
import kiln as jax
import kiln.numpy as jnp
from kiln import lax, random
from kiln.scipy.special import logsumexp

STATES, SYMBOLS, T = 3, 4, 12


def log_normalize(logits, axis=-1):
    return logits - logsumexp(logits, axis=axis, keepdims=True)


def forward_backward(params, observations):
    log_init = log_normalize(params["init"])
    log_trans = log_normalize(params["trans"])
    log_emit = log_normalize(params["emit"])
    emissions = log_emit[:, observations].T

    def forward(carry, e):
        alpha = logsumexp(carry[:, None] + log_trans, axis=0) + e
        return alpha, alpha

    alpha0 = log_init + emissions[0]
    _, alphas = lax.scan(forward, alpha0, emissions[1:])
    alphas = jnp.concatenate([alpha0[None], alphas])

    def backward(carry, e):
        beta = logsumexp(log_trans + (e + carry)[None, :], axis=1)
        return beta, beta

    _, betas = lax.scan(backward, jnp.zeros(STATES), emissions[1:], reverse=True)
    betas = jnp.concatenate([betas, jnp.zeros((1, STATES))])
    log_likelihood = logsumexp(alphas[-1])
    return log_likelihood, jnp.exp(alphas + betas - log_likelihood)


def init_params(key):
    k1, k2, k3 = random.split(key, 3)
    return {"init": random.normal(k1, (STATES,)), "trans": random.normal(k2, (STATES, STATES)) + 2 * jnp.eye(STATES),
            "emit": random.normal(k3, (STATES, SYMBOLS))}


def main(key):
    k_params, k_obs = random.split(key)
    params = init_params(k_params)
    observations = random.randint(k_obs, (T,), 0, SYMBOLS)
    log_likelihood, marginals = jax.jit(forward_backward)(params, observations)
    grad_emit = jax.jit(jax.grad(lambda p, o: forward_backward(p, o)[0]))(params, observations)["emit"]
    return {"log_likelihood": log_likelihood, "marginals": marginals, "grad_emit": grad_emit}


def export(key):
    k_params, k_obs = random.split(key)
    return forward_backward, (init_params(k_params), random.randint(k_obs, (T,), 0, SYMBOLS))
