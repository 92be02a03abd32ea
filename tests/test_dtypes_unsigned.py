"""uint16, uint32 and uint64 as kiln dtypes, end to end: numpy's semantics eagerly, under kiln.jit and
exported through the standalone kiln-run (arithmetic that wraps, division and remainder by zero,
logical right shifts, bitwise ops, comparisons, conversions to and from every dtype, reductions,
sort/argsort, promotion), and the names kiln.numpy gives them."""
import ml_dtypes
import numpy as np
import pytest

import kiln
import kiln.numpy as knp
from kiln_tools import check_like_numpy, eager_and_jit, eager_jit_and_kiln_run, kiln_run_exported, run_kiln_run

UNSIGNED = [np.uint16, np.uint32, np.uint64]
BF16 = np.dtype(ml_dtypes.bfloat16)
EVERY = [np.float32, np.float64, np.float16, BF16, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16,
         np.uint32, np.uint64, np.bool_]
ids = lambda d: np.dtype(d).name  # noqa: E731


def edge_values(dtype, n=24, seed=0):
    """Values across the whole range of an unsigned dtype: 0, 1, the top, the top bit, and random ones."""
    info = np.iinfo(dtype)
    rng = np.random.default_rng(seed)
    fixed = np.array([0, 1, 2, 3, info.max, info.max - 1, info.max // 2, info.max // 2 + 1], dtype)
    return np.concatenate([fixed, rng.integers(0, info.max, n - fixed.size, dtype=dtype, endpoint=True)])


def arithmetic(x, y):
    return x + y, x - y, x * y, -x, x + 1, x * 3, 7 - x, abs(x), knp.sign(x), x ** 3


def arithmetic_np(x, y):
    with np.errstate(all="ignore"):
        return x + y, x - y, x * y, -x, x + 1, x * 3, 7 - x, abs(x), np.sign(x), x ** 3


@pytest.mark.parametrize("dtype", UNSIGNED, ids=ids)
def test_wrapping_arithmetic(dtype, tmp_path):
    x, y = edge_values(dtype, seed=1), edge_values(dtype, seed=2)[::-1].copy()
    eager_jit_and_kiln_run(arithmetic, arithmetic_np, x, y, tmp_path=tmp_path)


def division(x, y):
    return x // y, x % y, knp.floor_divide(x, 7), knp.remainder(x, 10), knp.fmod(x, y), knp.divmod(x, y)[0]


def division_np(x, y):
    with np.errstate(all="ignore"):
        return x // y, x % y, np.floor_divide(x, 7), np.remainder(x, 10), np.fmod(x, y), np.divmod(x, y)[0]


@pytest.mark.filterwarnings("ignore:divide by zero")  # numpy's warning, eagerly
@pytest.mark.parametrize("dtype", UNSIGNED, ids=ids)
def test_division_and_remainder(dtype, tmp_path):
    """Unsigned division; by zero gives 0 as numpy does (numpy warns)."""
    x, y = edge_values(dtype, seed=3), edge_values(dtype, seed=4)
    y[5] = y[9] = 0
    y[6] = 1
    eager_jit_and_kiln_run(division, division_np, x, y, tmp_path=tmp_path)


def bits(x, s):
    return x >> s, x << s, x & s, x | s, x ^ s, ~x, knp.right_shift(x, 3), knp.left_shift(x, 1), knp.invert(s)


def bits_np(x, s):
    return x >> s, x << s, x & s, x | s, x ^ s, ~x, np.right_shift(x, 3), np.left_shift(x, 1), np.invert(s)


@pytest.mark.parametrize("dtype", UNSIGNED, ids=ids)
def test_shifts_and_bitwise(dtype, tmp_path):
    """Right shifts are logical (the top bit does not spread); a count of the width or more gives 0."""
    x = edge_values(dtype, seed=5)
    width = np.dtype(dtype).itemsize * 8
    s = np.arange(x.size, dtype=dtype) % (width + 3)
    s[-1] = np.iinfo(dtype).max
    eager_jit_and_kiln_run(bits, bits_np, x, s, tmp_path=tmp_path)


def compare(x, y):
    return (x < y, x <= y, x > y, x >= y, x == y, x != y, knp.maximum(x, y), knp.minimum(x, y),
            knp.where(x > y, x, y), knp.clip(x, 5, 1000))


def compare_np(x, y):
    return (x < y, x <= y, x > y, x >= y, x == y, x != y, np.maximum(x, y), np.minimum(x, y),
            np.where(x > y, x, y), np.clip(x, 5, 1000))


@pytest.mark.parametrize("dtype", UNSIGNED, ids=ids)
def test_comparisons_are_unsigned(dtype, tmp_path):
    """Values with the top bit set are large, not negative."""
    x, y = edge_values(dtype, seed=6), edge_values(dtype, seed=7)
    y[:8] = x[:8][::-1]
    eager_jit_and_kiln_run(compare, compare_np, x, y, tmp_path=tmp_path)


def _in_range(values: np.ndarray, src, dst) -> np.ndarray:
    """`values` (float64) made exactly representable in src and, where dst is an integer, within dst's range
    (numpy leaves out-of-range float -> int casts undefined)."""
    v = values.astype(src).astype(np.float64)
    v = v[np.isfinite(v)]
    if np.dtype(src).kind in "fV" and np.dtype(dst).kind in "iu":
        info = np.iinfo(dst)
        v = v[(v >= float(info.min)) & (v < float(info.max))]
    return v.astype(src)


@pytest.mark.parametrize("src,dst", [(s, d) for s in EVERY for d in EVERY if s in UNSIGNED or d in UNSIGNED],
                         ids=lambda d: np.dtype(d).name)
def test_conversions_every_pair(src, dst):
    """astype between every pair of dtypes that involves an unsigned one, exactly as numpy (floats
    convert within dst's range; integer narrowing wraps; uint64 above 2**63 converts to float exactly)."""
    raw = np.array([0, 1, 2, 7.5, 100, 127, 128, 255, 256, 1000.25, 32767, 40000, 65535, 65536, 2**31 - 1, 2**31,
                    2**32 - 1, 2**32, 2**53, 2**63, 2**64 - 2**11, 3.0e19, 1e30])
    if np.dtype(src).kind in "iub":
        with np.errstate(all="ignore"):
            x = np.array([int(v) % (2**64) for v in raw[raw < 2**64]], np.uint64).astype(src)
    else:
        with np.errstate(all="ignore"):
            x = _in_range(raw, src, dst)
    with np.errstate(all="ignore"):
        want = x.astype(dst)
    check_like_numpy(kiln.jit(lambda a: a.astype(dst))(x), want, tol=1e-7 if np.dtype(dst).itemsize >= 4 else None)
    check_like_numpy(knp.astype(x, dst), want)


@pytest.mark.parametrize("dtype", UNSIGNED, ids=ids)
def test_conversions_through_kiln_run(dtype, tmp_path):
    x = edge_values(dtype, seed=8)
    f = np.array([0.0, 0.5, 1.5, 255.9, 65535.0, 4294967295.0, 1.8e19], np.float64)
    f = f[f < float(np.iinfo(dtype).max)]

    def conv(x, f, n):
        return (x.astype(np.float64), x.astype(np.float32), x.astype(np.int64), x.astype(np.int8), x.astype(np.uint8),
                f.astype(dtype), n.astype(dtype), x.astype(np.bool_), x.astype(np.float16))
    n = np.array([-1, -2, 5, -128, 127], np.int8)
    with np.errstate(all="ignore"):
        want = conv(x, f, n)
    got = kiln_run_exported(conv, x, f, n, tmp_path=tmp_path)
    check_like_numpy(got, want, tol=1e-7)


def reductions(x):
    return (knp.sum(x), knp.prod(x[:5]), knp.max(x), knp.min(x), knp.argmax(x), knp.argmin(x), knp.cumsum(x),
            knp.sum(x.reshape(4, -1), axis=1), knp.max(x.reshape(4, -1), axis=0), knp.mean(x), knp.any(x), knp.all(x),
            knp.cumprod(x[:4]))


def reductions_np(x):
    with np.errstate(all="ignore"):
        return (np.sum(x), np.prod(x[:5]), np.max(x), np.min(x), np.argmax(x), np.argmin(x), np.cumsum(x),
                np.sum(x.reshape(4, -1), axis=1), np.max(x.reshape(4, -1), axis=0), np.mean(x), np.any(x), np.all(x),
                np.cumprod(x[:4]))


@pytest.mark.parametrize("dtype", UNSIGNED, ids=ids)
def test_reductions(dtype, tmp_path):
    """Sums and products accumulate in uint64 as numpy's do (wrapping); max/min/argmax are unsigned."""
    x = edge_values(dtype, seed=9)
    eager_jit_and_kiln_run(reductions, reductions_np, x, tmp_path=tmp_path, tol=1e-12)


def sorting(x):
    return knp.sort(x), knp.argsort(x), knp.sort(x.reshape(4, -1), axis=0), knp.argsort(x.reshape(4, -1), axis=1)


def sorting_np(x):
    return (np.sort(x), np.argsort(x, kind="stable"), np.sort(x.reshape(4, -1), axis=0),
            np.argsort(x.reshape(4, -1), axis=1, kind="stable"))


@pytest.mark.parametrize("dtype", UNSIGNED, ids=ids)
def test_sort_and_argsort(dtype, tmp_path):
    x = edge_values(dtype, seed=10)
    x[10:13] = x[2]  # ties: stable
    eager_jit_and_kiln_run(sorting, sorting_np, x, tmp_path=tmp_path)


@pytest.mark.parametrize("other", EVERY, ids=ids)
@pytest.mark.parametrize("dtype", UNSIGNED, ids=ids)
def test_promotion_against_numpy(dtype, other):
    """Array-array promotion is numpy's (uint64 with a signed integer gives float64; uint32 with int32 gives
    int64), except that bfloat16 follows JAX (integers with bfloat16 give bfloat16)."""
    a, b = np.ones(3, dtype), np.ones(3, other)
    want = (a + b).dtype if np.dtype(other) != BF16 else BF16
    for x, y in ((a, b), (b, a)):
        assert knp.add(x, y).dtype == want
        assert kiln.jit(lambda p, q: p * q)(x, y).dtype == want


@pytest.mark.parametrize("dtype", UNSIGNED, ids=ids)
def test_python_scalars_are_weak(dtype):
    """A Python int keeps the unsigned dtype; one out of its range is numpy's OverflowError."""
    x = np.array([1, 2], dtype)
    for f in (lambda v: v + 1, lambda v: v * 2, lambda v: v // 2):
        for got in (f(knp.asarray(x)), kiln.jit(f)(x)):
            assert got.dtype == dtype
    big = int(np.iinfo(dtype).max)
    got = kiln.jit(lambda v: v + big)(x)
    np.testing.assert_array_equal(got, x + big)  # wraps as numpy
    assert got.dtype == dtype
    for bad in (-1, big + 1):
        with pytest.raises(OverflowError):
            knp.add(x, bad)
        with pytest.raises(OverflowError):
            kiln.jit(lambda v: v + bad)(x)
    f = kiln.jit(lambda v: v * 0.5)(x)  # a Python float: float32 under jit, as JAX
    assert f.dtype == np.float32


def test_names_and_introspection():
    for name in ("uint16", "uint32", "uint64"):
        assert getattr(knp, name) is getattr(np, name)
        assert knp.iinfo(getattr(knp, name)).max == np.iinfo(name).max
        assert knp.issubdtype(getattr(knp, name), knp.unsignedinteger)
        assert knp.zeros(2, name).dtype == name and knp.arange(3, dtype=name).dtype == name
        assert kiln.jit(lambda: knp.ones((2,), name))().dtype == name
    assert knp.iinfo(np.zeros(2, np.uint32)).bits == 32
    with pytest.raises(AttributeError, match="does not support the dtype longdouble"):
        knp.longdouble  # noqa: B018


def test_kiln_run_reads_writes_and_prints(tmp_path):
    """kiln-run takes uint16/32/64 inline and as .npy, writes them as .npy and prints them as numpy does."""
    from kiln import Program

    class Mix(Program, export_name="mix"):
        def run(self, a=Program.like(np.zeros(3, np.uint16)), b=Program.like(np.zeros(2, np.uint32)),
                c=Program.like(np.zeros(2, np.uint64))):
            return a + 1, b * 2, c ^ np.uint64(2**63)

    path = tmp_path / "mix.vmfb"
    Program.get_compiled_artifact(Mix).save(path)
    out = run_kiln_run(f"--module={path}", "--function=run", "--input=3xu16=0,7,65535",
                       "--input=2xu32=3,4294967295", "--input=2xu64=1,18446744073709551615").stdout
    assert out == ("result[0]: 3xu16\n[1 8 0]\nresult[1]: 2xu32\n[         6 4294967294]\n"
                   "result[2]: 2xu64\n[9223372036854775809 9223372036854775807]\n")
    c = np.array([5, 2**64 - 1], np.uint64)
    np.save(tmp_path / "c.npy", c)
    run_kiln_run(f"--module={path}", "--function=run", "--input=3xu16=1", "--input=2xu32=2",
                 f"--input=@{tmp_path / 'c.npy'}", *[f"--output=@{tmp_path / f'o{i}.npy'}" for i in range(3)])
    outs = [np.load(tmp_path / f"o{i}.npy") for i in range(3)]
    assert [o.dtype for o in outs] == [np.uint16, np.uint32, np.uint64]
    np.testing.assert_array_equal(outs[2], c ^ np.uint64(2**63))
    bad = run_kiln_run(f"--module={path}", "--function=run", "--input=3xu16=-1", "--input=2xu32=2",
                       "--input=2xu64=1", check=False)
    assert bad.returncode == 1 and "out of range for u16" in bad.stderr
    printed = [str(x) for x in (np.array([1, 8, 0], np.uint16), np.array([6, 4294967294], np.uint32),
                                np.array([9223372036854775809, 9223372036854775807], np.uint64))]
    assert out.splitlines()[1::2] == printed


def test_unsigned_global_in_a_program():
    """A uint32 global that a function updates (the shape of a PRNG key stored in a Program)."""
    from kiln import Program

    class Counter(Program, export_name="counter"):
        _state = Program.export_global(np.array([0xFFFFFFFE, 7], np.uint32), mutable=True)

        def step(self):
            self._state = self._state + np.uint32(1)
            return self._state

    m = Counter()
    np.testing.assert_array_equal(m.step(), np.array([0xFFFFFFFF, 8], np.uint32))
    got = m.step()
    assert got.dtype == np.uint32
    np.testing.assert_array_equal(got, np.array([0, 9], np.uint32))


def test_eager_and_jit_matmul_and_dot():
    x = (np.arange(12, dtype=np.uint32).reshape(3, 4) * np.uint32(0x10001))
    y = np.arange(8, dtype=np.uint32).reshape(4, 2) + np.uint32(2**31)
    with np.errstate(all="ignore"):
        eager_and_jit(lambda a, b: (a @ b, knp.dot(a[0], b[:, 0])), lambda a, b: (a @ b, np.dot(a[0], b[:, 0])), x, y)
