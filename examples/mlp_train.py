"""Exporting a training step: an MLP classifier trained with Adam, all state in globals.

The Program holds the parameters AND the optimizer state (Adam's first and
second moments and the step count) as mutable globals, so `train_step` is a
complete update: an application (or `kiln-run --globals-in/--globals-out`)
calls it in a loop with no Python, checkpoints the globals by name and
restores them into a fresh context to resume.

    python examples/mlp_train.py            # trains, prints the loss, writes mlp_train.vmfb
    kiln-run --module=mlp_train.vmfb --list

Model: 2 -> 16 -> 16 -> 3, tanh hidden layers, softmax cross-entropy (log-sum-exp
stabilized with the row max) against one-hot labels, full-batch Adam. The data
set is three Gaussian blobs in 2-D made here with a fixed seed.
"""
import os
import sys

import numpy as np

import kiln
import kiln.numpy as knp
from kiln import Program

N_PER_CLASS = 100
N_CLASSES = 3
N = N_PER_CLASS * N_CLASSES
SIZES = (2, 16, 16, N_CLASSES)

# Adam hyperparameters (shared with the numpy reference, mlp_train_reference.py).
LEARNING_RATE = 0.01
BETA1 = 0.9
BETA2 = 0.999
EPSILON = 1e-8

CENTERS = np.array([[-1.0, -0.6], [1.0, -0.6], [0.0, 1.0]])


def make_dataset(seed: int = 0):
    """Three Gaussian blobs: x (N, 2) float32, labels (N,) int32, one-hot y (N, 3) float32."""
    rng = np.random.default_rng(seed)
    labels = np.repeat(np.arange(N_CLASSES), N_PER_CLASS)
    x = CENTERS[labels] + 0.45 * rng.standard_normal((N, 2))
    perm = rng.permutation(N)
    x, labels = x[perm].astype(np.float32), labels[perm].astype(np.int32)
    y = np.eye(N_CLASSES, dtype=np.float32)[labels]
    return x, labels, y


def init_params(seed: int = 1):
    """Glorot-style normal weights, zero biases (float32)."""
    rng = np.random.default_rng(seed)
    params = {}
    for i, (fan_in, fan_out) in enumerate(zip(SIZES[:-1], SIZES[1:]), start=1):
        scale = np.sqrt(2.0 / (fan_in + fan_out))
        params[f"w{i}"] = (scale * rng.standard_normal((fan_in, fan_out))).astype(np.float32)
        params[f"b{i}"] = np.zeros((fan_out,), np.float32)
    return params


def logits_fn(p, x):
    h1 = knp.tanh(x @ p["w1"] + p["b1"])
    h2 = knp.tanh(h1 @ p["w2"] + p["b2"])
    return h2 @ p["w3"] + p["b3"]


def log_softmax(z):
    zmax = kiln.stop_gradient(knp.max(z, axis=1, keepdims=True))
    shifted = z - zmax
    return shifted - knp.log(knp.sum(knp.exp(shifted), axis=1, keepdims=True))


def loss_fn(p, x, y):
    """Mean softmax cross-entropy of one-hot labels y."""
    return -knp.mean(knp.sum(y * log_softmax(logits_fn(p, x)), axis=1))


example_x, example_labels, example_y = make_dataset()
params = init_params()


def zeros_like_params():
    # A fresh tree each time: a leaf exported twice is ONE global (an alias),
    # so the two moments must not share arrays.
    return {k: np.zeros_like(v) for k, v in params.items()}


class MLPTrain(Program, export_name="mlp_train"):
    _params = params
    _m = Program.export_global(zeros_like_params(), initialize=False)  # Adam first moment
    _v = Program.export_global(zeros_like_params(), initialize=False)  # Adam second moment
    _step = Program.export_global(np.int32(0))           # Adam step count

    def train_step(self, x=Program.like(example_x), y=Program.like(example_y)):
        """One full-batch Adam step; returns the loss before the update."""
        loss, g = kiln.value_and_grad(loss_fn)(self._params, x, y)
        step = self._step + 1
        t = knp.astype(step, np.float32)
        m = kiln.tree_map(lambda m, g: BETA1 * m + (1 - BETA1) * g, self._m, g)
        v = kiln.tree_map(lambda v, g: BETA2 * v + (1 - BETA2) * (g * g), self._v, g)
        mhat_scale = 1 / (1 - knp.power(np.float32(BETA1), t))
        vhat_scale = 1 / (1 - knp.power(np.float32(BETA2), t))
        self._params = kiln.tree_map(
            lambda p, m, v: p - LEARNING_RATE * (m * mhat_scale) / (knp.sqrt(v * vhat_scale) + EPSILON),
            self._params, m, v)
        self._m = m
        self._v = v
        self._step = step
        return loss

    def loss(self, x=Program.like(example_x), y=Program.like(example_y)):
        return loss_fn(self._params, x, y)

    def predict(self, x=Program.like(example_x)):
        """Class probabilities (softmax of the logits)."""
        return knp.exp(log_softmax(logits_fn(self._params, x)))

    def accuracy(self, x=Program.like(example_x), y=Program.like(example_y)):
        """Fraction of rows whose largest logit is the labelled class (ties count as right)."""
        z = logits_fn(self._params, x)
        hit = knp.sum(y * (z >= knp.max(z, axis=1, keepdims=True)), axis=1)
        return knp.mean(knp.minimum(hit, np.float32(1)))

    def get_params(self):
        return self._params

    def set_params(self, p=Program.like(params)):
        """Replaces the parameters and restarts the optimizer."""
        self._params = p
        self._m = kiln.tree_map(knp.zeros_like, p)
        self._v = kiln.tree_map(knp.zeros_like, p)
        self._step = np.int32(0)

    def step_count(self):
        return self._step


def main(argv):
    out = argv[1] if len(argv) > 1 else "mlp_train.vmfb"
    m = MLPTrain()
    print(f"accuracy before: {float(m.accuracy(example_x, example_y)):.3f}")
    for i in range(200):
        loss = m.train_step(example_x, example_y)
        if i % 20 == 0 or i == 199:
            print(f"step {i:3d}  loss {float(loss):.5f}")
    print(f"accuracy after:  {float(m.accuracy(example_x, example_y)):.3f}")
    # The exported module starts from the initial parameters, not the trained ones.
    Program.get_compiled_artifact(m).save(out)
    print(f"wrote {os.path.abspath(out)}")


if __name__ == "__main__":
    main(sys.argv)
