"""Transformations and control flow inside an exported Program, run by the standalone kiln-run."""
import numpy as np

import kiln
import kiln.numpy as knp
from kiln import Program, lax

from kiln_tools import run_kiln_run

W = np.array([[0.3, -0.2], [0.1, 0.4], [-0.5, 0.2]], np.float32)
X = np.array([[1.0, 2.0, -1.0], [0.5, -0.5, 0.25]], np.float32)


def _loss(w, x):
    return knp.mean(knp.tanh(x @ w) ** 2)


class Transforms(Program):
    _w = W

    def grad_w(self, x=Program.like(X)):
        return kiln.grad(_loss)(self._w, x)

    def per_example_grads(self, x=Program.like(X)):
        return kiln.vmap(kiln.grad(_loss), in_axes=(None, 0))(self._w, knp.expand_dims(x, 1))

    def jacobian(self, x=Program.like(X)):
        return kiln.jacfwd(lambda v: knp.tanh(v @ self._w))(x)

    def rnn(self, xs=Program.like(X)):
        def step(h, x):
            h = knp.tanh(h + x @ self._w)
            return h, knp.sum(h)
        h, ys = lax.scan(step, knp.zeros((2,), np.float32), xs)
        return h, ys, kiln.grad(lambda w: knp.sum(lax.scan(lambda c, x: (knp.tanh(c + x @ w), 0.0), knp.zeros((2,), np.float32), xs)[0]))(self._w)

    def count_down(self, n=Program.like(np.int32(0))):
        return lax.while_loop(lambda c: c[0] > 0, lambda c: (c[0] - 1, c[1] * 2.0), (n, np.float32(1)))[1]


def _numerical_grad(f, w, eps=1e-3):
    g = np.zeros_like(w, dtype=np.float64)
    for i in range(w.size):
        up, down = w.astype(np.float64), w.astype(np.float64)
        up.flat[i] += eps
        down.flat[i] -= eps
        g.flat[i] = (f(up) - f(down)) / (2 * eps)
    return g


def _run(tmp_path, function, *inputs):
    path = tmp_path / "t.vmfb"
    if not path.exists():
        Program.get_compiled_artifact(Transforms).save(path)
    args = []
    for k, x in enumerate(inputs):
        np.save(tmp_path / f"in{k}.npy", x)
        args.append(f"--input=@{tmp_path / f'in{k}.npy'}")
    n_out = {"rnn": 3}.get(function, 1)
    outs = [f"--output=@{tmp_path / f'out{k}.npy'}" for k in range(n_out)]
    run_kiln_run(f"--module={path}", f"--function={function}", *args, *outs)
    return [np.load(tmp_path / f"out{k}.npy") for k in range(n_out)]


def test_grad_and_vmap_in_kiln_run(tmp_path):
    (g,) = _run(tmp_path, "grad_w", X)
    expected = _numerical_grad(lambda w: np.mean(np.tanh(X.astype(np.float64) @ w) ** 2), W)
    np.testing.assert_allclose(g, expected, rtol=1e-3, atol=1e-5)
    (per,) = _run(tmp_path, "per_example_grads", X)
    for i in range(2):
        e = _numerical_grad(lambda w: np.mean(np.tanh(X[i:i + 1].astype(np.float64) @ w) ** 2), W)
        np.testing.assert_allclose(per[i], e, rtol=1e-3, atol=1e-5)
    (jac,) = _run(tmp_path, "jacobian", X)
    d = 1 - np.tanh(X @ W) ** 2
    expected_jac = np.einsum("ab,jb,ai->abij", d, W, np.eye(2))
    np.testing.assert_allclose(jac, expected_jac, rtol=1e-5, atol=1e-6)


def test_scan_and_while_in_kiln_run(tmp_path):
    h, ys, g = _run(tmp_path, "rnn", X)
    hh = np.zeros(2)
    expected_ys = []
    for x in X:
        hh = np.tanh(hh + x @ W)
        expected_ys.append(hh.sum())
    np.testing.assert_allclose(h, hh, rtol=1e-5)
    np.testing.assert_allclose(ys, expected_ys, rtol=1e-5)

    def final_sum(w):
        c = np.zeros(2)
        for x in X.astype(np.float64):
            c = np.tanh(c + x @ w)
        return c.sum()

    np.testing.assert_allclose(g, _numerical_grad(final_sum, W), rtol=1e-3, atol=1e-5)
    path = tmp_path / "t.vmfb"
    out = run_kiln_run(f"--module={path}", "--function=count_down", "--input=i32=5").stdout
    assert "32" in out
