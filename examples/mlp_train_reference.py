"""An independent numpy implementation of examples/mlp_train.py's model and optimizer.

Forward pass, softmax cross-entropy, hand-written backpropagation and Adam, in
plain numpy (no kiln): the reference the tests compare the compiled training
step against. It mirrors mlp_train.py's definitions (2 -> 16 -> 16 -> 3, tanh,
mean cross-entropy of one-hot labels, Adam with bias correction) but shares no
code with it; the data set and initial parameters are passed in.

    params, losses = train(params, x, y, steps=200)
"""
from __future__ import annotations

import numpy as np

LEARNING_RATE = 0.01
BETA1 = 0.9
BETA2 = 0.999
EPSILON = 1e-8


def forward(p, x):
    """Returns logits and the activations backprop needs."""
    a1 = x @ p["w1"] + p["b1"]
    h1 = np.tanh(a1)
    a2 = h1 @ p["w2"] + p["b2"]
    h2 = np.tanh(a2)
    z = h2 @ p["w3"] + p["b3"]
    return z, (h1, h2)


def log_softmax(z):
    s = z - z.max(axis=1, keepdims=True)
    return s - np.log(np.exp(s).sum(axis=1, keepdims=True))


def loss_and_grads(p, x, y):
    """Mean softmax cross-entropy and its gradient with respect to every parameter."""
    n = x.shape[0]
    z, (h1, h2) = forward(p, x)
    logp = log_softmax(z)
    loss = -(y * logp).sum(axis=1).mean()
    # d loss / d z = (softmax(z) * rowsum(y) - y) / n; rows of y sum to one.
    dz = (np.exp(logp) * y.sum(axis=1, keepdims=True) - y) / n
    g = {"w3": h2.T @ dz, "b3": dz.sum(axis=0)}
    da2 = (dz @ p["w3"].T) * (1 - h2 * h2)
    g["w2"] = h1.T @ da2
    g["b2"] = da2.sum(axis=0)
    da1 = (da2 @ p["w2"].T) * (1 - h1 * h1)
    g["w1"] = x.T @ da1
    g["b1"] = da1.sum(axis=0)
    return loss, g


class Adam:
    def __init__(self, params, lr=LEARNING_RATE, b1=BETA1, b2=BETA2, eps=EPSILON):
        self.lr, self.b1, self.b2, self.eps = lr, b1, b2, eps
        self.m = {k: np.zeros_like(v) for k, v in params.items()}
        self.v = {k: np.zeros_like(v) for k, v in params.items()}
        self.t = 0

    def update(self, params, grads):
        self.t += 1
        out = {}
        for k, p in params.items():
            g = grads[k]
            self.m[k] = self.b1 * self.m[k] + (1 - self.b1) * g
            self.v[k] = self.b2 * self.v[k] + (1 - self.b2) * g * g
            mhat = self.m[k] / (1 - self.b1 ** self.t)
            vhat = self.v[k] / (1 - self.b2 ** self.t)
            out[k] = p - self.lr * mhat / (np.sqrt(vhat) + self.eps)
        return out


def train(params, x, y, steps, dtype=np.float64):
    """`steps` full-batch Adam steps from `params`; returns (params, losses, adam)."""
    p = {k: np.asarray(v, dtype) for k, v in params.items()}
    x, y = np.asarray(x, dtype), np.asarray(y, dtype)
    adam = Adam(p)
    losses = []
    for _ in range(steps):
        loss, g = loss_and_grads(p, x, y)
        losses.append(float(loss))
        p = adam.update(p, g)
    return p, np.array(losses), adam


def predict(params, x):
    """Class probabilities."""
    z, _ = forward(params, np.asarray(x, np.float64) if np.asarray(x).dtype != np.float32 else x)
    return np.exp(log_softmax(z))
