"""An LSTM run over a sequence with lax.scan, trained for a few steps of gradient descent to predict the
next value of a noisy sine wave."""
import kiln as jax
import kiln.numpy as jnp
from kiln import lax, random

HIDDEN, T = 8, 20


def init_params(key):
    k1, k2, k3 = random.split(key, 3)
    return {"w": random.normal(k1, (1 + HIDDEN, 4 * HIDDEN)) * 0.2, "b": jnp.zeros(4 * HIDDEN),
            "out": random.normal(k2, (HIDDEN,)) * 0.2, "out_b": random.normal(k3, ()) * 0.01}


def lstm_cell(params, carry, x):
    h, c = carry
    gates = jnp.concatenate([x[None], h]) @ params["w"] + params["b"]
    i, f, g, o = jnp.split(gates, 4)
    c = jax.nn.sigmoid(f + 1.0) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
    h = jax.nn.sigmoid(o) * jnp.tanh(c)
    return (h, c), h @ params["out"] + params["out_b"]


def loss(params, inputs, targets):
    init = (jnp.zeros(HIDDEN), jnp.zeros(HIDDEN))
    _, predictions = lax.scan(lambda carry, x: lstm_cell(params, carry, x), init, inputs)
    return jnp.mean((predictions - targets) ** 2)


@jax.jit
def train_step(params, inputs, targets):
    value, grads = jax.value_and_grad(loss)(params, inputs, targets)
    return jax.tree_util.tree_map(lambda p, g: p - 0.3 * g, params, grads), value


def make_data(key):
    t = jnp.linspace(0.0, 4 * jnp.pi, T + 1)
    wave = jnp.sin(t) + 0.05 * random.normal(key, (T + 1,))
    return wave[:-1], wave[1:]


def main(key):
    k_params, k_data = random.split(key)
    params = init_params(k_params)
    inputs, targets = make_data(k_data)
    losses = []
    for _ in range(5):
        params, value = train_step(params, inputs, targets)
        losses.append(value)
    return {"losses": jnp.stack(losses), "w": params["w"]}


def export(key):
    k_params, k_data = random.split(key)
    return train_step, (init_params(k_params),) + tuple(make_data(k_data))
