"""A namedtuple registered with register_pytree_node flattens through its registered functions, not field by field:
an optimizer state in the style of an optimizers library (a namedtuple whose flatten keeps the parameters' treedef
as static data) works as a jit argument and result, a fori_loop carry, a grad argument, and a Program global run
by the standalone kiln-run. Checked against a momentum optimizer written in numpy (float64, exact gradients)."""
from collections import namedtuple

import numpy as np

import kiln
import kiln.numpy as knp
from kiln import Program, lax
from kiln.core.pytree import treedef_flatten_up_to

from kiln_tools import run_kiln_run

# An optimizer library in the stax/optimizers style: the state is a namedtuple holding the flat (value, velocity)
# slots and, as static data, the treedef of the parameters; its registered flatten exposes only the slots.
MomentumState = namedtuple("MomentumState", "slots layout")
kiln.register_pytree_node(MomentumState, lambda s: ((s.slots,), s.layout),
                          lambda layout, children: MomentumState(children[0], layout))

STEP, MASS = 0.1, 0.9


def momentum_init(params):
    leaves, layout = kiln.tree_flatten(params)
    return MomentumState(tuple((p, knp.zeros_like(p)) for p in leaves), layout)


def momentum_update(grads, state):
    slots = []
    for (p, v), g in zip(state.slots, treedef_flatten_up_to(state.layout, grads)):
        v = MASS * v + g
        slots.append((p - STEP * v, v))
    return MomentumState(tuple(slots), state.layout)


def momentum_params(state):
    return kiln.tree_unflatten(state.layout, [p for p, _ in state.slots])


RNG = np.random.default_rng(5)
X = RNG.standard_normal((6, 3))
Y = RNG.standard_normal((6, 2))
PARAMS = {"w": RNG.standard_normal((3, 2)) * 0.3, "b": np.zeros(2)}


def _loss(params, x, y):
    return knp.mean((x @ params["w"] + params["b"] - y) ** 2)


def _train_step(state, x, y):
    return momentum_update(kiln.grad(_loss)(momentum_params(state), x, y), state)


def _numpy_training(steps):
    """Momentum SGD on the least-squares loss with its exact gradient, in float64."""
    w, b = PARAMS["w"].copy(), PARAMS["b"].copy()
    vw, vb = np.zeros_like(w), np.zeros_like(b)
    for _ in range(steps):
        r = X @ w + b - Y
        gw, gb = 2 * X.T @ r / r.size, 2 * r.sum(0) / r.size
        vw, vb = MASS * vw + gw, MASS * vb + gb
        w, b = w - STEP * vw, b - STEP * vb
    return {"w": w, "b": b}


def _check_params(got, want):
    assert set(got) == {"w", "b"}
    for k in want:
        assert np.asarray(got[k]).dtype == np.float64
        np.testing.assert_allclose(got[k], want[k], rtol=1e-12, atol=1e-12)


def test_registered_namedtuple_uses_its_flatten():
    state = momentum_init(PARAMS)
    leaves, treedef = kiln.tree_flatten(state)
    assert treedef.kind == "custom" and len(leaves) == 4  # the slots' arrays; the layout is static
    rebuilt = kiln.tree_unflatten(treedef, leaves)
    assert type(rebuilt) is MomentumState and rebuilt.layout == state.layout
    doubled = kiln.tree_map(lambda a: a * 2, state)
    assert type(doubled) is MomentumState
    np.testing.assert_array_equal(doubled.slots[1][0], PARAMS["w"] * 2)


def test_optimizer_state_eager_and_under_jit():
    want = _numpy_training(3)
    state = momentum_init(PARAMS)
    for _ in range(3):
        state = _train_step(state, X, Y)
    _check_params(momentum_params(state), want)

    step = kiln.jit(_train_step)
    state = momentum_init(PARAMS)
    for _ in range(3):
        state = step(state, X, Y)  # the state is both the argument and the result
    assert type(state) is MomentumState
    _check_params(momentum_params(state), want)


def test_optimizer_state_as_loop_carry_and_grad_argument():
    want = _numpy_training(4)

    def train(state, x, y):
        return lax.fori_loop(0, 4, lambda i, s: _train_step(s, x, y), state)

    for fn in (train, kiln.jit(train)):
        _check_params(momentum_params(fn(momentum_init(PARAMS), X, Y)), want)

    # grad with respect to a state: the cotangent has the state's structure
    g = kiln.jit(kiln.grad(lambda s: _loss(momentum_params(s), X, Y)))(momentum_init(PARAMS))
    assert type(g) is MomentumState
    r = X @ PARAMS["w"] + PARAMS["b"] - Y
    np.testing.assert_allclose(g.slots[1][0], 2 * X.T @ r / r.size, rtol=1e-12)  # slots follow sorted keys b, w
    np.testing.assert_array_equal(g.slots[1][1], np.zeros((3, 2)))


class Trainer(Program):
    _state = momentum_init(PARAMS)

    def step(self, x=Program.like(X), y=Program.like(Y)):
        self._state = _train_step(self._state, x, y)
        return momentum_params(self._state)


def test_optimizer_state_as_program_global(tmp_path):
    t = Trainer()
    t.step(X, Y)
    _check_params(t.step(X, Y), _numpy_training(2))

    path = tmp_path / "trainer.vmfb"
    Program.get_compiled_artifact(Trainer).save(path)
    np.save(tmp_path / "x.npy", X)
    np.save(tmp_path / "y.npy", Y)
    run_kiln_run(f"--module={path}", "--function=step", f"--input=@{tmp_path / 'x.npy'}",
                 f"--input=@{tmp_path / 'y.npy'}", f"--output=@{tmp_path / 'b.npy'}", f"--output=@{tmp_path / 'w.npy'}")
    _check_params({k: np.load(tmp_path / f"{k}.npy") for k in "bw"}, _numpy_training(1))
