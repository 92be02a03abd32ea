"""The JAX examples' mnist_classifier.py in miniature: a network built with example_libraries.stax
(serial, Dense, Relu, Dropout-free, LogSoftmax, plus a small Conv/Flatten front end), initialized by
init_random_params with a batch shape of -1, trained by optimizers.momentum with a jit-ed update taking
the step count, and accuracy by jnp.argmax; plus optimizers.sgd with a piecewise_constant schedule."""
import itertools

import kiln as jax
import kiln.numpy as jnp
from kiln import random
from kiln.example_libraries import optimizers, stax
from kiln.example_libraries.stax import Conv, Dense, Flatten, LogSoftmax, Relu, Tanh

CLASSES, BATCH = 4, 8

init_random_params, predict = stax.serial(
    Conv(3, (3, 3), padding="SAME"), Relu, Flatten,
    Dense(16), Tanh,
    Dense(CLASSES), LogSoftmax)


def loss(params, batch):
    inputs, targets = batch
    preds = predict(params, inputs)
    return -jnp.mean(jnp.sum(preds * targets, axis=1))


def accuracy(params, batch):
    inputs, targets = batch
    return jnp.mean(jnp.argmax(predict(params, inputs), axis=1) == jnp.argmax(targets, axis=1))


def make_batch(key):
    k1, k2 = random.split(key)
    labels = random.randint(k1, (BATCH,), 0, CLASSES)
    images = random.normal(k2, (BATCH, 6, 6, 1)) + labels[:, None, None, None].astype(jnp.float32)
    return images, jax.nn.one_hot(labels, CLASSES)


def main(key):
    k_params, k_data = random.split(key)
    batch = make_batch(k_data)
    _, init_params = init_random_params(k_params, (-1, 6, 6, 1))
    opt_init, opt_update, get_params = optimizers.momentum(0.05, mass=0.9)

    @jax.jit
    def update(i, opt_state, batch):
        params = get_params(opt_state)
        return opt_update(i, jax.grad(loss)(params, batch), opt_state)

    opt_state = opt_init(init_params)
    itercount = itertools.count()
    losses = []
    for _ in range(4):
        opt_state = update(next(itercount), opt_state, batch)
        losses.append(loss(get_params(opt_state), batch))
    params = get_params(opt_state)

    sgd_init, sgd_update, sgd_params = optimizers.sgd(
        optimizers.piecewise_constant([2], [0.1, 0.01]))
    state = sgd_init(params)
    for i in range(3):
        state = sgd_update(i, jax.grad(loss)(sgd_params(state), batch), state)
    return {"losses": jnp.stack(losses), "accuracy": accuracy(params, batch),
            "dense": params[3][0], "sgd_dense": sgd_params(state)[3][0],
            "norm": optimizers.l2_norm(params)}


def export(key):
    k_params, k_data = random.split(key)
    _, params = init_random_params(k_params, (-1, 6, 6, 1))
    return jax.value_and_grad(loss), (params, make_batch(k_data))
