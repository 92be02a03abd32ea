"""Accuracy of the IR math library against numpy on dense grids, extremes, NaN and infinities."""
import numpy as np
import pytest

from conftest import Batch, Case
from kiln.lax import prims

SPECIALS = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0]


def _f32_grid(lo_bits, hi_bits, step):
    return np.arange(lo_bits, hi_bits, step, dtype=np.int64).astype(np.uint32).view(np.float32)


def _grid(dtype, fn):
    if dtype == np.float32:
        positive = _f32_grid(0, 0x7F800000, 613)
    else:
        positive = np.concatenate([np.geomspace(1e-310, 1e308, 400_000), np.linspace(0, 50, 100_000)])
    grid = np.concatenate([positive, -positive, np.array(SPECIALS)]).astype(dtype)
    tiny = np.finfo(dtype).smallest_subnormal
    extra = {
        "exp": [88.72, 88.73, -87.3, -103.9, -104.0, 709.78, 709.79, -708.4, -745.1, -745.2, tiny],
        "log": [tiny, np.finfo(dtype).max, np.finfo(dtype).tiny, 1 + np.finfo(dtype).eps],
        "tanh": [0.62, 0.63, 9.0, 20.0, 1e-30, tiny],
    }[fn]
    grid = np.concatenate([grid, np.array(extra, dtype=np.float64).astype(dtype)])
    if fn == "exp":
        grid = grid[~(np.abs(grid) > 800)] if dtype == np.float64 else grid[~(np.abs(grid) > 120)]
        grid = np.concatenate([grid, np.array([np.inf, -np.inf, np.nan, 1e30, -1e30], dtype)])
    return grid


def _ulps(got, want):
    """Distance in units in the last place (both finite), via the ordered integer representation."""
    itype = np.int32 if got.dtype == np.float32 else np.int64
    def ordered(x):
        bits = x.view(itype).astype(np.int64)
        return np.where(bits < 0, np.iinfo(itype).min - bits, bits)
    return np.abs(ordered(got) - ordered(want))


FUNCS = {"exp": 2, "log": 2, "tanh": 3}
CASES = {}
for dtype in (np.float32, np.float64):
    for fn in FUNCS:
        x = _grid(dtype, fn)
        CASES[f"{fn}-{np.dtype(dtype).name}"] = Case(lambda a, fn=fn: [getattr(prims, fn).bind(a)], [x])
POW_X = np.array([0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5, 3.7, -3.7, np.inf, -np.inf, np.nan, 1e-30, 1e30, 7.0, 1e-40], np.float64)
POW_Y = np.array([0.0, -0.0, 1.0, -1.0, 2.0, 3.0, -3.0, 0.5, -0.5, 2.5, np.inf, -np.inf, np.nan, 31.0, -31.0, 1e10, 100.5], np.float64)
PX, PY = np.meshgrid(POW_X, POW_Y)
RNG = np.random.default_rng(4)
for dtype in (np.float32, np.float64):
    rx = np.abs(RNG.standard_normal(20000)) * 10
    ry = RNG.standard_normal(20000) * 5
    CASES[f"pow-{np.dtype(dtype).name}"] = Case(
        lambda a, b: [prims.pow.bind(a, b)], [np.concatenate([PX.ravel(), rx]).astype(dtype), np.concatenate([PY.ravel(), ry]).astype(dtype)]
    )


@pytest.fixture(scope="module")
def batch():
    return Batch(CASES)


@pytest.mark.parametrize("name", sorted(k for k in CASES if not k.startswith("pow")))
def test_accuracy_in_ulps(batch, name):
    fn, dtype_name = name.split("-")
    dtype = np.dtype(dtype_name)
    (got,), _ = batch.run(name)
    x = batch.cases[name].args[0]
    with np.errstate(all="ignore"):
        want = getattr(np, fn)(x.astype(np.float64)).astype(dtype) if dtype == np.float32 else getattr(np, fn)(x)
    assert np.array_equal(np.isnan(got), np.isnan(want)), x[np.isnan(got) != np.isnan(want)][:10]
    inf = np.isinf(want)
    assert np.array_equal(got[inf], want[inf])
    finite = ~np.isnan(want) & ~inf
    ulps = _ulps(got[finite], want[finite])
    worst = int(np.argmax(ulps))
    assert ulps.max() <= FUNCS[fn], f"{name}: {ulps.max()} ulp at x={x[finite][worst]!r}: got {got[finite][worst]!r}, want {want[finite][worst]!r}"


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_pow_special_values_and_accuracy(batch, dtype):
    (got,), _ = batch.run(f"pow-{dtype}")
    x, y = batch.cases[f"pow-{dtype}"].args
    with np.errstate(all="ignore"):
        want = np.power(x.astype(np.float64), y.astype(np.float64)).astype(dtype)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    same_inf = np.isinf(want)
    assert np.array_equal(got[same_inf], want[same_inf])
    finite = ~np.isnan(want) & ~same_inf
    assert np.array_equal(np.signbit(got[finite]), np.signbit(want[finite]))
    rel = np.abs(got[finite].astype(np.float64) - want[finite]) / np.maximum(np.abs(want[finite].astype(np.float64)), np.finfo(dtype).tiny)
    assert rel.max() <= (2e-7 if dtype == "float32" else 1e-13)


def test_no_libm_imports(batch):
    assert batch.compiled.image.relocs is not None
    asm = batch.compiled.assembly()
    assert "call" not in " ".join(l for l in asm.splitlines() if "exp" in l or "log" in l)
