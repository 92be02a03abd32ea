"""Transformations and control flow inside an exported Program, run by the standalone kiln-run.

Two Programs, each exported once: Transforms (float32: grad, vmap of grad, jacfwd, scan, while_loop) and
ControlFlow (float64: cond, switch, static fori_loop, map, reverse and length-only scan, their gradients, a
hessian through all of them, custom_jvp/custom_vjp, jacrev, hessian, value_and_grad with has_aux, vmap of cond,
and grad/vmap of a Program kernel, a kernel built from grad of a kernel, a kernel inside scan and its grad).
Results are checked against plain Python / numpy and central finite differences in float64."""
import itertools
import re

import numpy as np
import pytest

import kiln
import kiln.numpy as knp
from kiln import Program, lax

from kiln_tools import run_kiln_run
from references import numerical_grad, numerical_hessian

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
    expected = numerical_grad(lambda w: np.mean(np.tanh(X.astype(np.float64) @ w) ** 2), W)
    np.testing.assert_allclose(g, expected, rtol=1e-3, atol=1e-5)
    (per,) = _run(tmp_path, "per_example_grads", X)
    for i in range(2):
        e = numerical_grad(lambda w: np.mean(np.tanh(X[i:i + 1].astype(np.float64) @ w) ** 2), W)
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

    np.testing.assert_allclose(g, numerical_grad(final_sum, W), rtol=1e-3, atol=1e-5)
    path = tmp_path / "t.vmfb"
    out = run_kiln_run(f"--module={path}", "--function=count_down", "--input=i32=5").stdout
    assert "32" in out


# ---------------------------------------------------------------------------------------------------------------------
# Every control-flow form and transformation in one float64 Program (one compile, one .vmfb), each public function
# run by the standalone kiln-run and checked against plain Python / numpy and central finite differences.

RNG = np.random.default_rng(11)
V = np.array([0.3, -1.2, 2.0])
XS = RNG.standard_normal((4, 3))
W64 = RNG.standard_normal((3, 2)) * 0.5
K = np.int32(0)


@kiln.custom_jvp
def _softplus(x):
    return knp.log(1 + knp.exp(x))


@_softplus.defjvp
def _softplus_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return _softplus(x), t * (1 - 1 / (1 + knp.exp(x)))


@kiln.custom_vjp
def _clip_gradient(x):
    return x


_clip_gradient.defvjp(lambda x: (x, None), lambda residuals, g: (knp.clip(g, -1.0, 1.0),))

_BRANCHES = [lambda v: v, lambda v: v * 2.0, lambda v: knp.sin(v)]


def _fori(x):
    return lax.fori_loop(0, 3, lambda i, c: knp.tanh(c * x) * (i + 1), x)


def _composed(x, k):
    """cond, switch, a static fori_loop, a reverse scan and map, chained."""
    y = lax.cond(knp.sum(x) > 0, lambda v: knp.tanh(v) * v, lambda v: knp.exp(v), x)
    y = lax.switch(k, _BRANCHES, y)
    y = _fori(y) + x
    c, ys = lax.scan(lambda c, v: (c * v, c + v), 1.0, y, reverse=True)
    return knp.sum(lax.map(lambda r: r * r, ys)) + c


def _kernel_loss(w, x):
    return knp.sum(knp.tanh(x @ w) ** 2)


class ControlFlow(Program, export_name="control_flow"):
    _w = W64

    # -- control flow: values
    def branches(self, x=Program.like(V), k=Program.like(K)):
        return (lax.cond(knp.sum(x) > 0, lambda v: knp.tanh(v) * v, lambda v: knp.exp(v), x),
                lax.switch(k, _BRANCHES, x))

    def loops(self, x=Program.like(V), xs=Program.like(XS)):
        rev_c, rev_ys = lax.scan(lambda c, r: (c * 0.5 + r, knp.sum(c * r)), x, xs, reverse=True)
        len_c, len_ys = lax.scan(lambda c, _: (c * 0.5 + x, knp.sin(c)), x, None, length=5)
        return _fori(x), lax.map(lambda r: knp.sum(r * r) + r[0], xs), rev_c, rev_ys, len_c, len_ys

    # -- control flow: gradients
    def loop_grads(self, x=Program.like(V), xs=Program.like(XS)):
        g_fori = kiln.grad(lambda v: knp.sum(_fori(v)))(x)
        g_rev = kiln.grad(lambda a: knp.sum(lax.scan(lambda c, r: (knp.tanh(c * r), knp.sum(c * r)), x, a,
                                                     reverse=True)[1]))(xs)
        g_len = kiln.grad(lambda v: knp.sum(lax.scan(lambda c, _: (knp.sin(c) * v, c), v, None, length=4)[0]))(x)
        return g_fori, g_rev, g_len

    def composed(self, x=Program.like(V), k=Program.like(K)):
        return _composed(x, k), kiln.grad(_composed)(x, k)

    def composed_hessian(self, x=Program.like(V), k=Program.like(K)):
        return kiln.hessian(_composed)(x, k)

    # -- transformations
    def custom_rules(self, x=Program.like(V)):
        return kiln.grad(lambda v: knp.sum(_softplus(v)) + knp.sum(_clip_gradient(v) * 5.0))(x)

    def jacobians(self, x=Program.like(V)):
        return (kiln.jacrev(lambda v: knp.sin(v) * v[0])(x),
                kiln.hessian(lambda v: knp.sum(knp.sin(v)) * v[0])(x))

    def value_aux(self, x=Program.like(V)):
        (value, aux), g = kiln.value_and_grad(lambda v: (knp.sum(v ** 3), v * 2.0), has_aux=True)(x)
        return value, aux, g

    def vmap_cond(self, x=Program.like(V), xs=Program.like(XS)):
        scalar = kiln.vmap(lambda s: lax.cond(s > 0, lambda u: u * 2.0, lambda u: -u, s))(x)
        rows = kiln.vmap(lambda r: lax.cond(knp.sum(r) > 0, lambda u: knp.exp(u), lambda u: u * r[0], r))(xs)
        return scalar, rows

    # -- transformations of Program kernels
    _loss = Program.kernel(_kernel_loss)
    _loss_grad = Program.kernel(kiln.grad(_loss))

    def kernel_transforms(self, xs=Program.like(XS)):
        g = kiln.grad(self._loss)(self._w, xs)
        per_row = kiln.vmap(self._loss, in_axes=(None, 0))(self._w, knp.expand_dims(xs, 1))
        return g, per_row, self._loss_grad(self._w, xs)

    def kernel_in_scan(self, xs=Program.like(XS)):
        def total(w):
            return lax.scan(lambda c, r: (c + self._loss(w, knp.expand_dims(r, 0)), c), 0.0, xs)

        value, partial = total(self._w)
        return value, partial, kiln.grad(lambda w: total(w)[0])(self._w)


@pytest.fixture(scope="module")
def control_flow(tmp_path_factory):
    """Exports ControlFlow once; returns call(function, *inputs) -> list of results, run by kiln-run."""
    workdir = tmp_path_factory.mktemp("control_flow")
    path = workdir / "control_flow.vmfb"
    Program.get_compiled_artifact(ControlFlow).save(path)
    listing = run_kiln_run(f"--module={path}", "--list").stdout
    n_results = {m.group(1): m.group(2).count(",") + 1
                 for m in re.finditer(r"^\s+(\w+)\(.*\) -> \((.*)\)$", listing, re.MULTILINE)}
    assert set(n_results) == set(ControlFlow._kiln_public), listing
    calls = itertools.count()

    def call(function, *inputs):
        n = next(calls)
        args = []
        for k, x in enumerate(inputs):
            np.save(workdir / f"{n}_in{k}.npy", x)
            args.append(f"--input=@{workdir / f'{n}_in{k}.npy'}")
        outs = [workdir / f"{n}_out{k}.npy" for k in range(n_results[function])]
        run_kiln_run(f"--module={path}", f"--function={function}", *args, *[f"--output=@{o}" for o in outs])
        return [np.load(o) for o in outs]

    return call


def _close(got, want, rtol=1e-10, atol=1e-12):
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


def _grad_close(got, want):
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-8)


# plain Python / numpy references


def _branch_ref(x, k):
    return [x, x * 2.0, np.sin(x)][min(max(int(k), 0), 2)]


def _fori_ref(x):
    c = x
    for i in range(3):
        c = np.tanh(c * x) * (i + 1)
    return c


def _composed_ref(x, k):
    y = np.tanh(x) * x if np.sum(x) > 0 else np.exp(x)
    y = _fori_ref(_branch_ref(y, k)) + x
    c, ys = 1.0, np.zeros_like(y)
    for t in reversed(range(y.size)):
        c, ys[t] = c * y[t], c + y[t]
    return np.sum([r * r for r in ys]) + c


def _kernel_loss_ref(w, x):
    return np.sum(np.tanh(x @ w) ** 2)


def test_cond_and_switch_in_kiln_run(control_flow):
    for x in (V, -V):
        for k in (-2, 0, 1, 2, 7):
            cond, switch = control_flow("branches", x, np.int32(k))
            _close(cond, np.tanh(x) * x if np.sum(x) > 0 else np.exp(x))
            _close(switch, _branch_ref(x, k))


def test_loops_in_kiln_run(control_flow):
    fori, mapped, rev_c, rev_ys, len_c, len_ys = control_flow("loops", V, XS)
    _close(fori, _fori_ref(V))
    _close(mapped, [np.sum(r * r) + r[0] for r in XS])
    c, ys = V.copy(), np.zeros(len(XS))
    for t in reversed(range(len(XS))):
        c, ys[t] = c * 0.5 + XS[t], np.sum(c * XS[t])
    _close(rev_c, c)
    _close(rev_ys, ys)
    c, ys = V.copy(), []
    for _ in range(5):
        c, y = c * 0.5 + V, np.sin(c)
        ys.append(y)
    _close(len_c, c)
    _close(len_ys, ys)


def test_loop_gradients_in_kiln_run(control_flow):
    g_fori, g_rev, g_len = control_flow("loop_grads", V, XS)
    _grad_close(g_fori, numerical_grad(lambda v: np.sum(_fori_ref(v)), V))

    def rev_total(a):
        c, total = V, 0.0
        for t in reversed(range(len(a))):
            c, total = np.tanh(c * a[t]), total + np.sum(c * a[t])
        return total

    _grad_close(g_rev, numerical_grad(rev_total, XS))

    def len_total(v):
        c = v
        for _ in range(4):
            c = np.sin(c) * v
        return np.sum(c)

    _grad_close(g_len, numerical_grad(len_total, V))


@pytest.mark.parametrize("x,k", [(V, 2), (V, 1), (-V, 0)], ids=["true_sin", "true_double", "false_identity"])
def test_composed_control_flow_gradient_and_hessian_in_kiln_run(control_flow, x, k):
    value, g = control_flow("composed", x, np.int32(k))
    _close(value, _composed_ref(x, k))
    _grad_close(g, numerical_grad(lambda v: _composed_ref(v, k), x))
    (h,) = control_flow("composed_hessian", x, np.int32(k))
    np.testing.assert_allclose(h, numerical_hessian(lambda v: _composed_ref(v, k), x), rtol=1e-5, atol=1e-5)
    _close(h, h.T)


def test_custom_rules_in_kiln_run(control_flow):
    (g,) = control_flow("custom_rules", V)
    # softplus' custom JVP gives the sigmoid; clip_gradient's custom VJP clips the cotangent 5 to 1
    _close(g, 1 / (1 + np.exp(-V)) + 1.0)


def test_jacrev_hessian_and_value_and_grad_with_aux_in_kiln_run(control_flow):
    jac, hess = control_flow("jacobians", V)
    want_jac = np.diag(np.cos(V) * V[0])
    want_jac[:, 0] += np.sin(V)
    _close(jac, want_jac)
    want_hess = np.diag(-np.sin(V) * V[0])
    want_hess[0, :] += np.cos(V)
    want_hess[:, 0] += np.cos(V)
    _close(hess, want_hess)
    np.testing.assert_allclose(hess, numerical_hessian(lambda v: np.sum(np.sin(v)) * v[0], V), rtol=1e-6, atol=1e-6)
    value, aux, g = control_flow("value_aux", V)
    _close(value, np.sum(V ** 3))
    _close(aux, 2 * V)
    _close(g, 3 * V ** 2)


def test_vmap_of_cond_in_kiln_run(control_flow):
    x = np.array([0.5, -2.0, 0.0])
    scalar, rows = control_flow("vmap_cond", x, XS)
    _close(scalar, [2 * s if s > 0 else -s for s in x])
    assert {bool(np.sum(r) > 0) for r in XS} == {True, False}  # both branches are taken
    _close(rows, [np.exp(r) if np.sum(r) > 0 else r * r[0] for r in XS])


def test_transforms_of_a_kernel_in_kiln_run(control_flow):
    g, per_row, kernel_of_grad = control_flow("kernel_transforms", XS)
    want = numerical_grad(lambda w: _kernel_loss_ref(w, XS), W64)
    _grad_close(g, want)
    _close(per_row, [_kernel_loss_ref(W64, r[None]) for r in XS])
    _grad_close(kernel_of_grad, want)


def test_kernel_inside_scan_and_its_gradient_in_kiln_run(control_flow):
    value, partial, g = control_flow("kernel_in_scan", XS)
    losses = [_kernel_loss_ref(W64, r[None]) for r in XS]
    _close(value, np.sum(losses))
    _close(partial, np.concatenate([[0.0], np.cumsum(losses)[:-1]]))
    _grad_close(g, numerical_grad(lambda w: _kernel_loss_ref(w, XS), W64))
