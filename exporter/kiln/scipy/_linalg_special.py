"""More of scipy.linalg's special matrices: dft, pascal, invpascal, invhilbert (static sizes: numpy arrays
with scipy's dtypes, like hilbert) and fiedler_companion (gathered from a's entries with a static index
map, so it traces, batches over leading axes and differentiates)."""
from __future__ import annotations

import math

import numpy as np

from ._special_matrices import _from_indices, _size, _vector

__all__ = ["dft", "pascal", "invpascal", "invhilbert", "fiedler_companion"]

_KINDS = ("symmetric", "lower", "upper")


def dft(n, scale=None):
    """scipy.linalg.dft: the n x n discrete Fourier transform matrix exp(-2 pi i jk / n) (complex128), divided
    by sqrt(n) with scale='sqrtn' or by n with scale='n'."""
    n = _size("dft", n)
    if scale not in (None, "sqrtn", "n"):
        raise ValueError(f"scipy.linalg.dft: scale must be None, 'sqrtn' or 'n', got {scale!r}")
    jk = np.outer(np.arange(n), np.arange(n)) % max(n, 1)
    m = np.exp(-2j * np.pi * jk / max(n, 1))
    return m / {None: 1, "sqrtn": math.sqrt(n), "n": n}[scale] if n else m


def _kind(fn: str, kind):
    if kind not in _KINDS:
        raise ValueError(f"scipy.linalg.{fn}: kind must be 'symmetric', 'lower' or 'upper', got {kind!r}")


def _exact(fn: str, values, n: int, limit: int, dtype):
    """Python-integer entries as scipy's integer dtype; scipy's object arrays past `limit` are not kiln arrays."""
    if n > limit:
        raise ValueError(f"scipy.linalg.{fn}: exact=True needs n <= {limit} (larger exact results are Python "
                         f"integers in an object array, which kiln has no dtype for), got {n}; use exact=False")
    return np.array(values, dtype=dtype).reshape(n, n)


def _lower_pascal(n: int):
    return [[math.comb(i, j) for j in range(n)] for i in range(n)]


def pascal(n, kind="symmetric", exact=True):
    """scipy.linalg.pascal: binomial coefficients, entry (i, j) = C(i + j, i) (kind='symmetric'), or the
    lower/upper triangular factor C(i, j) / C(j, i). exact=True: uint64 (n <= 34); else float64."""
    n, _ = _size("pascal", n), _kind("pascal", kind)
    lower = _lower_pascal(n)
    if kind == "symmetric":
        entries = [[math.comb(i + j, i) for j in range(n)] for i in range(n)]
    else:
        entries = lower if kind == "lower" else [list(row) for row in zip(*lower)]
    if exact:
        return _exact("pascal", entries, n, 34, np.uint64)
    return np.array(entries, dtype=np.float64).reshape(n, n)


def invpascal(n, kind="symmetric", exact=True):
    """scipy.linalg.invpascal: the inverse of pascal(n, kind), an integer matrix (int64 with exact=True,
    n <= 34; float64 otherwise), from exact integer sums."""
    n, _ = _size("invpascal", n), _kind("invpascal", kind)
    if kind == "symmetric":
        entries = [[0] * n for _ in range(n)]
        for i in range(n):
            for j in range(i + 1):
                v = sum(math.comb(i + k, k) * math.comb(i + k, i + k - j) for k in range(n - i))
                entries[i][j] = entries[j][i] = (-1) ** (i - j) * v
    else:
        lower = [[(-1) ** (i - j) * c for j, c in enumerate(row)] for i, row in enumerate(_lower_pascal(n))]
        entries = lower if kind == "lower" else [list(row) for row in zip(*lower)]
    if exact:
        return _exact("invpascal", entries, n, 34, np.int64)
    return np.array(entries, dtype=np.float64).reshape(n, n)


def invhilbert(n, exact=False):
    """scipy.linalg.invhilbert: the inverse of hilbert(n), an integer matrix: float64, or int64 with
    exact=True (n <= 14), from exact integer formulas."""
    n = _size("invhilbert", n)
    entries = [[0] * n for _ in range(n)]
    for i in range(n):
        for j in range(i + 1):
            s = i + j
            entries[i][j] = entries[j][i] = ((-1) ** s * (s + 1) * math.comb(n + i, n - j - 1)
                                             * math.comb(n + j, n - i - 1) * math.comb(s, i) ** 2)
    if exact:
        return _exact("invhilbert", entries, n, 14, np.int64)
    return np.array(entries, dtype=np.float64).reshape(n, n)


def _fiedler_companion_indices(n: int):
    """Where each entry of the n x n Fiedler companion matrix comes from in [0, 1, -a[1]/a[0], ...]: 0 is
    a zero, 1 a one and k + 1 the entry -a[k] / a[0] (scipy's layout)."""
    c = np.zeros((n, n), dtype=np.intp)
    c[range(3, n, 2), range(1, n - 2, 2)] = 1
    c[range(2, n, 2), range(1, n - 1, 2)] = np.arange(3, n + 1, 2) + 1
    c[range(0, n - 2, 2), range(2, n, 2)] = 1
    c[range(0, n - 1, 2), range(1, n, 2)] = np.arange(2, n + 1, 2) + 1
    c[0, 0], c[1, 0] = 2, 1
    return c


def fiedler_companion(a):
    """scipy.linalg.fiedler_companion: Fiedler's pentadiagonal companion matrix of the polynomial with
    coefficients a (highest power first), whose eigenvalues are its roots. Leading axes of a are a batch;
    a zero leading coefficient gives inf/NaN (scipy raises; under jit nothing can)."""
    from .. import numpy as knp

    a = _vector("fiedler_companion", a, "a")
    a = a.astype(np.float64) if a.dtype.kind in "iub" else a
    size = a.shape[-1]
    if size < 2:
        return knp.zeros(a.shape[:-1] + (0,), a.dtype)
    scaled = -a[..., 1:] / a[..., :1]
    if size == 2:
        return knp.expand_dims(scaled, -1)
    n = size - 1
    values = knp.concatenate([knp.zeros(a.shape[:-1] + (1,), a.dtype), knp.ones(a.shape[:-1] + (1,), a.dtype),
                              scaled], axis=-1)
    return _from_indices(values, _fiedler_companion_indices(n))
