"""An MLP classifier on three Gaussian blobs, trained with the optimizers library's Adam under jit."""
import kiln as jax
import kiln.numpy as jnp
from kiln import random

import optimizers

SIZES = (2, 16, 16, 3)
N = 96


def make_data(key):
    k_labels, k_noise = random.split(key)
    labels = random.randint(k_labels, (N,), 0, 3)
    centers = jnp.array([[-1.0, -0.6], [1.0, -0.6], [0.0, 1.0]])
    x = centers[labels] + 0.45 * random.normal(k_noise, (N, 2))
    return x, labels


def init_params(key):
    params = []
    for k, (m, n) in zip(random.split(key, len(SIZES) - 1), zip(SIZES[:-1], SIZES[1:])):
        params.append((random.normal(k, (m, n)) * jnp.sqrt(2.0 / (m + n)), jnp.zeros(n)))
    return params


def predict(params, x):
    for w, b in params[:-1]:
        x = jnp.tanh(x @ w + b)
    w, b = params[-1]
    return x @ w + b


def loss(params, x, labels):
    logits = predict(params, x)
    logp = logits - jax.nn.logsumexp(logits, axis=1, keepdims=True)
    return -jnp.mean(jnp.take_along_axis(logp, labels[:, None], axis=1))


def main(key):
    k_data, k_init = random.split(key)
    x, labels = make_data(k_data)
    opt_init, opt_update, get_params = optimizers.adam(0.02)

    @jax.jit
    def step(i, opt_state):
        value, grads = jax.value_and_grad(loss)(get_params(opt_state), x, labels)
        return opt_update(i, grads, opt_state), value

    opt_state = opt_init(init_params(k_init))
    losses = []
    for i in range(25):
        opt_state, value = step(i, opt_state)
        losses.append(value)
    params = get_params(opt_state)
    accuracy = jnp.mean(jnp.argmax(predict(params, x), axis=1) == labels)
    return {"losses": jnp.stack(losses), "w_out": params[-1][0], "accuracy": accuracy}


def export(key):
    """The function to export and its example arguments: one Adam step of the whole state."""
    k_data, k_init = random.split(key)
    x, labels = make_data(k_data)
    opt_init, opt_update, get_params = optimizers.adam(0.02)

    def step(opt_state, x, labels):
        value, grads = jax.value_and_grad(loss)(get_params(opt_state), x, labels)
        return opt_update(0, grads, opt_state), value

    return step, (opt_init(init_params(k_init)), x, labels)
