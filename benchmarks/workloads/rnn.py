"""A tanh RNN unrolled by lax.scan: h = tanh(h @ Wh + x_t @ Wx + b) for T steps.

Each step is two small matmuls and an elementwise epilogue, so per-step
overhead (the loop in the VM, dispatch latency) weighs as much as the math.
Results are the final state and the stacked per-step states. numpy runs the
same loop in Python.
"""
import numpy as np

from .base import Size, Workload


def make_inputs(p, rng):
    t, b, i, h = p["steps"], p["batch"], p["input"], p["hidden"]
    h0 = np.zeros((b, h), np.float32)
    xs = rng.standard_normal((t, b, i), dtype=np.float32)
    wh = rng.standard_normal((h, h), dtype=np.float32) / np.float32(np.sqrt(h))
    wx = rng.standard_normal((i, h), dtype=np.float32) / np.float32(np.sqrt(i))
    bias = rng.standard_normal(h, dtype=np.float32) * np.float32(0.1)
    return h0, xs, wh, wx, bias


def fn(ops, h0, xs, wh, wx, bias):
    def step(h, x):
        h = ops.np.tanh(h @ wh + x @ wx + bias)
        return h, h

    final, hs = ops.scan(step, h0, xs)
    return final, hs


WORKLOADS = [
    Workload(
        name="rnn_scan",
        description="tanh RNN over T steps with lax.scan (batch B, input I, hidden H)",
        make_inputs=make_inputs,
        fn=fn,
        sizes=(Size("T100-B32-I128-H256", {"steps": 100, "batch": 32, "input": 128, "hidden": 256}),),
        quick_sizes=(Size("T3-B2-I3-H4", {"steps": 3, "batch": 2, "input": 3, "hidden": 4}),),
        tolerance=1e-4,
        needs=("scan",),
    )
]
