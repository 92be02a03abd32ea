"""Out-of-range indices. Known at trace time (Python ints, numpy arrays), they raise IndexError in x[i] and take,
under jit with the source line of the indexing expression. Traced, they follow JAX's documented rules, checked
against numpy references written from those rules: reads clamp (x[i], x.at[i].get(), lax.dynamic_slice windows),
take and take_along_axis read fill_value in their default mode "fill" (NaN, or an integer's extreme), and
x.at[i].set/add drops the update. Eagerly (traced by vmap), under jit, and in a Program run by the standalone
kiln-run. x.at[i] applies its mode to concrete indices exactly as to traced ones (JAX does the same)."""
import re

import numpy as np
import pytest

import kiln
import kiln.numpy as knp
from kiln import Program, lax

from kiln_tools import run_kiln_run

X = np.arange(5.0) + 10.0
XI = np.arange(5, dtype=np.int32) - 2
INDICES = np.array([-100, -6, -5, -1, 0, 3, 4, 5, 7, 100], np.int32)

# ------------------------------------------------------------------ known at trace time: IndexError with the line

CONCRETE = {
    "x[7]": lambda x: x[7],
    "x[-6]": lambda x: x[-6],
    "2-d x[1, 3]": lambda x: x.reshape(5, 1)[1, 3],
    "x[array]": lambda x: x[np.array([1, 9])],
    "x[list]": lambda x: x[[1, -9]],
    "take": lambda x: knp.take(x, 9),
    "take array": lambda x: knp.take(x, np.array([0, -9])),
    "take_along_axis": lambda x: knp.take_along_axis(x, np.array([0, 9]), 0),
}


@pytest.mark.parametrize("name", CONCRETE)
def test_concrete_out_of_range_index_raises_with_the_line(name):
    f = CONCRETE[name]
    with pytest.raises(IndexError, match="out of bounds"):
        f(X)
    with pytest.raises(IndexError, match="out of bounds") as info:
        kiln.jit(f)(X)
    where = re.search(r"test_out_of_range\.py:(\d+)", str(info.value))
    assert where and int(where.group(1)) == f.__code__.co_firstlineno, str(info.value)


# ------------------------------------------------------------------ traced: JAX's rules, against numpy references


def _position(i, n):
    """JAX's normalization: a negative index counts from the end once."""
    return i + n if i < 0 else i


def _clamp_read(x, i):
    return x[min(max(_position(int(i), len(x)), 0), len(x) - 1)]


def _fill_value(dtype):
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return np.nan
    return np.iinfo(dtype).min if dtype.kind == "i" else np.iinfo(dtype).max


def _fill_read(x, i):
    j = _position(int(i), len(x))
    return x[j] if 0 <= j < len(x) else x.dtype.type(_fill_value(x.dtype))


def _drop_update(x, i, v, add=False):
    out = x.copy()
    j = _position(int(i), len(x))
    if 0 <= j < len(x):
        out[j] = out[j] + v if add else v
    return out


def _window(x, i, size):
    s = min(max(_position(int(i), len(x)), 0), len(x) - size)
    return x[s:s + size]


TRACED = {  # name: (kiln function of (x, i), numpy reference of (x, i))
    "x[i]": (lambda x, i: x[i], _clamp_read),
    "x[[i, 1]]": (lambda x, i: x[knp.stack([i, i * 0 + 1])], lambda x, i: np.array([_clamp_read(x, i), x[1]])),
    "2-d x[i, 0]": (lambda x, i: x.reshape(5, 1)[i, 0], _clamp_read),
    "at.get": (lambda x, i: knp.at(x)[i].get(), _clamp_read),
    "at.get fill": (lambda x, i: knp.at(x)[i].get(mode="fill"), _fill_read),
    "at.get fill_value": (lambda x, i: knp.at(x)[i].get(mode="fill", fill_value=7),
                          lambda x, i: _fill_read(x, i) if 0 <= _position(int(i), len(x)) < len(x) else x.dtype.type(7)),
    "take": (lambda x, i: knp.take(x, i), _fill_read),
    # numpy's and JAX's take clip: negative indices are 0, not counted from the end (take_along_axis counts)
    "take clip": (lambda x, i: knp.take(x, i, mode="clip"), lambda x, i: x[min(max(int(i), 0), len(x) - 1)]),
    "take wrap": (lambda x, i: knp.take(x, i, mode="wrap"), lambda x, i: x[int(i) % len(x)]),
    "take_along_axis": (lambda x, i: knp.take_along_axis(x, knp.stack([i, -i]), 0),
                        lambda x, i: np.array([_fill_read(x, i), _fill_read(x, -i)])),
    "take_along_axis clip": (lambda x, i: knp.take_along_axis(x, knp.stack([i]), 0, mode="clip"),
                             lambda x, i: np.array([_clamp_read(x, i)])),
    "dynamic_slice": (lambda x, i: lax.dynamic_slice(x, (i,), (2,)), lambda x, i: _window(x, i, 2)),
    "dynamic_index_in_dim": (lambda x, i: lax.dynamic_index_in_dim(x, i, keepdims=False), _clamp_read),
    "at.set": (lambda x, i: knp.at(x)[i].set(-1), lambda x, i: _drop_update(x, i, -1)),
    "at.add [i, 0]": (lambda x, i: knp.at(x)[knp.stack([i, i * 0])].add(3),
                      lambda x, i: _drop_update(_drop_update(x, i, 3, add=True), 0, 3, add=True)),
    "at.set 2-d row": (lambda x, i: knp.at(x.reshape(5, 1))[i].set(-1), lambda x, i: _drop_update(x, i, -1).reshape(5, 1)),
}


def _check(got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, got.dtype, want.shape, want.dtype)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("x", [X, XI], ids=["float64", "int32"])
@pytest.mark.parametrize("name", TRACED)
def test_traced_out_of_range_indices_follow_jax(name, x):
    f, ref = TRACED[name]
    want = [ref(x, i) for i in INDICES]
    jitted = kiln.jit(f)
    for i, w in zip(INDICES, want):
        _check(jitted(x, i), w)
    # eagerly, the index is traced by vmap
    _check(kiln.vmap(f, in_axes=(None, 0))(x, INDICES), np.stack(want))


_AT_MODES = [None, "drop", "fill", "clip", "promise_in_bounds"]
_AT_UFUNCS = {"add": np.add, "multiply": np.multiply, "min": np.minimum, "max": np.maximum}


def _at_ref(x, idx, op, mode, v=3, wrap=True):
    """JAX's x.at[idx].op(v, mode=mode) (x.at[idx].get(mode=mode) for op "get") from its docstrings' rules: a
    negative index counts from the end once; what is still out of range is clamped in mode "clip" (and read
    clamped with None/"promise_in_bounds"), read as the fill value ("fill"/"drop") or dropped by an update."""
    idx = np.asarray(idx)
    pos = np.where(idx < 0, idx + len(x), idx) if wrap else idx  # wrap_negative_indices=False: out of range
    valid = (pos >= 0) & (pos < len(x))
    clamped = np.clip(pos, 0, len(x) - 1)
    if op == "get":
        if mode in ("fill", "drop"):
            return np.where(valid, x[clamped], x.dtype.type(_fill_value(x.dtype)))
        return x[clamped]
    pos = clamped.ravel() if mode == "clip" else pos[valid].ravel()
    out = x.copy()
    if op == "set":
        out[pos] = v
    else:
        _AT_UFUNCS[op].at(out, pos, x.dtype.type(v))
    return out


@pytest.mark.parametrize("op", ["get", "set", "add", "multiply", "min", "max"])
def test_at_applies_its_mode_to_concrete_indices_as_to_traced_ones(op):
    """JAX applies .at[]'s mode to concrete out-of-range indices too: eagerly (Python ints and numpy arrays) and
    traced (by vmap), every mode gives the same numbers, negative indices wrapping once first."""
    def at(x, i, mode, wrap=True):
        ref = knp.at(x)[i]
        if op == "get":
            return ref.get(mode=mode, wrap_negative_indices=wrap)
        return getattr(ref, op)(3, mode=mode, wrap_negative_indices=wrap)

    for x in (X, XI):
        for mode in _AT_MODES:
            for i in INDICES:
                _check(at(x, int(i), mode), _at_ref(x, i, op, mode))  # a Python int, eagerly
            _check(at(x, INDICES, mode), _at_ref(x, INDICES, op, mode))  # a numpy array
            traced = kiln.vmap(lambda i, m=mode: at(x, i, m))(INDICES)
            _check(traced, np.stack([_at_ref(x, i, op, mode) for i in INDICES]))
        # JAX's wrap_negative_indices=False: a negative index is out of range, concrete or traced
        _check(at(x, INDICES, mode, wrap=False), _at_ref(x, INDICES, op, mode, wrap=False))
    traced = kiln.vmap(lambda i: [at(XI, i, m, wrap=False) for m in _AT_MODES])(INDICES)
    for m, got in zip(_AT_MODES, traced):
        _check(got, np.stack([_at_ref(XI, i, op, m, wrap=False) for i in INDICES]))
    with pytest.raises(ValueError, match=f"at\\[\\]\\.{op}: mode must be None, 'drop', 'fill', 'clip' or 'promise_in_bounds', got 'wrap'"):
        at(X, 0, "wrap")


def test_gradients_of_out_of_range_reads_and_updates_are_zero():
    g = kiln.jit(kiln.grad(lambda x, i: knp.sum(knp.take(x, knp.stack([i, i * 0 + 1])) * 2.0)))
    _check(g(X, np.int32(7)), np.array([0.0, 2.0, 0.0, 0.0, 0.0]))
    _check(g(X, np.int32(-2)), np.array([0.0, 2.0, 0.0, 2.0, 0.0]))
    for update in ("set", "add"):
        g = kiln.jit(kiln.grad(lambda v, x, i: knp.sum(getattr(knp.at(x)[i], update)(v) * 2.0)))
        _check(g(np.float64(1.5), X, np.int32(7)), np.float64(0.0))  # dropped
        _check(g(np.float64(1.5), X, np.int32(-3)), np.float64(2.0))


CONCRETE_AT = np.array([-100, 7, -1, 2])


class Indexing(Program):
    def reads(self, x=Program.like(X), i=Program.like(np.int32(0))):
        return (x[i], knp.take(x, i), knp.at(x)[i].get(mode="fill"), lax.dynamic_slice(x, (i,), (2,)),
                knp.at(x)[CONCRETE_AT].get(mode="fill"))  # concrete indices: the mode applies as to traced ones

    def updates(self, x=Program.like(X), i=Program.like(np.int32(0))):
        return (knp.at(x)[i].set(-1.0), knp.at(x)[knp.stack([i, i * 0])].add(3.0),
                knp.at(x)[CONCRETE_AT].add(3.0, mode="clip"), knp.at(x)[7].set(3.0))


def test_out_of_range_in_kiln_run(tmp_path):
    path = tmp_path / "indexing.vmfb"
    Program.get_compiled_artifact(Indexing).save(path)
    np.save(tmp_path / "x.npy", X)
    for i in (-7, -1, 4, 5, 100):
        outs = {}
        for function, n in (("reads", 5), ("updates", 4)):
            files = [tmp_path / f"{function}{k}.npy" for k in range(n)]
            run_kiln_run(f"--module={path}", f"--function={function}", f"--input=@{tmp_path / 'x.npy'}",
                         f"--input=i32={i}", *[f"--output=@{o}" for o in files])
            outs[function] = [np.load(o) for o in files]
        _check(outs["reads"][0], _clamp_read(X, i))
        _check(outs["reads"][1], _fill_read(X, i))
        _check(outs["reads"][2], _fill_read(X, i))
        _check(outs["reads"][3], _window(X, i, 2))
        _check(outs["updates"][0], _drop_update(X, i, -1.0))
        _check(outs["updates"][1], _drop_update(_drop_update(X, i, 3.0, add=True), 0, 3.0, add=True))
        _check(outs["reads"][4], _at_ref(X, CONCRETE_AT, "get", "fill"))
        _check(outs["updates"][2], _at_ref(X, CONCRETE_AT, "add", "clip"))
        _check(outs["updates"][3], X)  # dropped


@pytest.mark.parametrize("index", [-7, -2, -1, 0, 3, 4, 5, 100])
def test_take_clip_clamps_negative_indices_like_numpy(index):
    """mode='clip' clamps to [0, n-1]: a negative index is 0 (numpy's rule, and JAX's), not counted from
    the end, eagerly and with a traced index."""
    x = np.arange(5.0, dtype=np.float32)
    want = np.take(x, index, mode="clip")
    assert float(knp.take(x, index, mode="clip")) == want
    assert float(kiln.jit(lambda i: knp.take(x, i, mode="clip"))(np.int32(index))) == want
    many = np.array([index, 1, -index], np.int32)
    np.testing.assert_array_equal(kiln.jit(lambda i: knp.take(x, i, mode="clip"))(many),
                                  np.take(x, many, mode="clip"))
