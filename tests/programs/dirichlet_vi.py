"""Variational inference for a Dirichlet-multinomial model with reparameterized gradients through
random.gamma (JAX differentiates gamma samples implicitly in their shape parameter): a Dirichlet posterior
approximation q(theta; exp(log_alpha)) drawn as normalized gammas, the ELBO with jax.scipy.special's gammaln
and digamma (the Dirichlet entropy in closed form) and jax.scipy.stats.dirichlet.logpdf, random.dirichlet and
random.beta draws, and Adagrad from example_libraries.optimizers on the log concentrations."""
import kiln as jax
import kiln.numpy as jnp
from kiln import random
from kiln.example_libraries import optimizers
from kiln.scipy.special import digamma, gammaln
from kiln.scipy.stats import dirichlet

K, SAMPLES = 4, 8
PRIOR = 1.5


def log_beta(alpha):
    return jnp.sum(gammaln(alpha), axis=-1) - gammaln(jnp.sum(alpha, axis=-1))


def dirichlet_entropy(alpha):
    a0 = jnp.sum(alpha)
    return log_beta(alpha) + (a0 - K) * digamma(a0) - jnp.sum((alpha - 1) * digamma(alpha))


def elbo(log_alpha, counts, key):
    alpha = jnp.exp(log_alpha)
    g = random.gamma(key, alpha, shape=(SAMPLES, K))
    theta = g / jnp.sum(g, axis=-1, keepdims=True)
    log_lik = jnp.sum(counts * jnp.log(theta), axis=-1)
    log_prior = jax.vmap(lambda t: dirichlet.logpdf(t, jnp.full((K,), PRIOR)))(theta)
    return jnp.mean(log_lik + log_prior) + dirichlet_entropy(alpha)


opt_init, opt_update, get_params = optimizers.adagrad(0.3)


@jax.jit
def step(i, opt_state, counts, key):
    value, g = jax.value_and_grad(elbo)(get_params(opt_state), counts, key)
    return opt_update(i, -g, opt_state), value


def main(key):
    k_data, k_train, k_draw = random.split(key, 3)
    truth = random.dirichlet(k_data, jnp.array([4.0, 2.0, 1.0, 0.5]))
    counts = jnp.round(40 * truth)
    opt_state = opt_init(jnp.zeros(K, jnp.float32))
    values = []
    for i, k in enumerate(random.split(k_train, 6)):
        opt_state, value = step(i, opt_state, counts, k)
        values.append(value)
    alpha = jnp.exp(get_params(opt_state))
    k1, k2 = random.split(k_draw)
    return {"elbo": jnp.stack(values), "alpha": alpha, "truth": truth, "draws": random.dirichlet(k1, alpha, (3,)),
            "beta": random.beta(k2, alpha[0], alpha[1], (4,)), "entropy": dirichlet_entropy(alpha),
            "exact_grad": jax.grad(lambda a: dirichlet_entropy(jnp.exp(a)))(get_params(opt_state))}


def export(key):
    k_data, k_train = random.split(key)
    counts = jnp.round(40 * random.dirichlet(k_data, jnp.array([4.0, 2.0, 1.0, 0.5])))
    return jax.value_and_grad(elbo), (jnp.zeros(K, jnp.float32), counts, k_train)
