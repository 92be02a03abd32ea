"""scipy.linalg's special matrices over kiln arrays: toeplitz, hankel, circulant (batched over leading
axes, as scipy >= 1.15 and JAX), leslie, companion, fiedler, convolution_matrix (built by gathering the
entries with static index arrays, so they trace), and hilbert, helmert, hadamard (static sizes only:
numpy arrays)."""
from __future__ import annotations

import operator

import numpy as np

from .. import numpy as knp

__all__ = ["toeplitz", "hankel", "circulant", "hilbert", "helmert", "hadamard", "leslie", "companion", "fiedler",
           "convolution_matrix"]


def _vector(fn: str, x, name: str, *, batched: bool = True):
    x = knp.asarray(x)
    if x.ndim == 0:
        x = knp.reshape(x, (1,))
    if not batched and x.ndim != 1:
        raise ValueError(f"scipy.linalg.{fn}: argument {name} must be 1-D, got shape {x.shape}")
    return x


def _from_indices(values, indices):
    """values[..., indices] for a static index array: a gather along the last axis."""
    flat = knp.take(values, np.asarray(indices).ravel(), axis=-1)
    return knp.reshape(flat, values.shape[:-1] + np.shape(indices))


def toeplitz(c, r=None):
    """scipy.linalg.toeplitz: first column c, first row r (default c; r[0] is ignored): entry (i, j) is
    c[i - j] below the diagonal and r[j - i] above. Leading axes of c and r are a batch."""
    c = _vector("toeplitz", c, "c")
    r = c if r is None else _vector("toeplitz", r, "r")
    m, n = c.shape[-1], r.shape[-1]
    batch = knp.broadcast_shapes(c.shape[:-1], r.shape[:-1])
    c, r = knp.broadcast_to(c, batch + (m,)), knp.broadcast_to(r, batch + (n,))
    values = knp.concatenate([knp.flip(c, axis=-1), r[..., 1:]], axis=-1)
    i, j = np.indices((m, n))
    return _from_indices(values, m - 1 - i + j)


def hankel(c, r=None):
    """scipy.linalg.hankel: first column c, last row r (default zeros; r[0] is ignored): entry (i, j) is
    c[i + j] while i + j < len(c), then r[i + j - len(c) + 1]. Leading axes are a batch."""
    c = _vector("hankel", c, "c")
    r = knp.zeros_like(c) if r is None else _vector("hankel", r, "r")
    m, n = c.shape[-1], r.shape[-1]
    batch = knp.broadcast_shapes(c.shape[:-1], r.shape[:-1])
    c, r = knp.broadcast_to(c, batch + (m,)), knp.broadcast_to(r, batch + (n,))
    values = knp.concatenate([c, r[..., 1:]], axis=-1)
    i, j = np.indices((m, n))
    return _from_indices(values, i + j)


def circulant(c):
    """scipy.linalg.circulant: entry (i, j) is c[(i - j) mod n]; leading axes of c are a batch."""
    c = _vector("circulant", c, "c")
    n = c.shape[-1]
    i, j = np.indices((n, n))
    return _from_indices(c, (i - j) % n)


def _size(fn: str, n) -> int:
    try:
        n = operator.index(n)
    except TypeError:
        raise TypeError(f"scipy.linalg.{fn}: argument n must be an integer, got {n!r}") from None
    if n < 0:
        raise ValueError(f"scipy.linalg.{fn}: argument n must be non-negative, got {n}")
    return n


def hilbert(n):
    """scipy.linalg.hilbert: entries 1 / (i + j + 1) (float64)."""
    n = _size("hilbert", n)
    i, j = np.indices((n, n))
    return 1.0 / (i + j + 1)


def helmert(n, full=False):
    """scipy.linalg.helmert: the (n - 1) x n Helmert matrix (n x n with full=True; its first row is
    1/sqrt(n)), whose rows are orthonormal and orthogonal to the ones vector."""
    n = _size("helmert", n)
    rows = np.tril(np.ones((n, n)), -1) - np.diag(np.arange(n))
    scale = np.arange(n) * np.arange(1, n + 1)
    scale[0] = n
    out = rows / np.sqrt(scale)[:, None]
    out[0] = 1 / np.sqrt(n)
    return out if full else out[1:]


def hadamard(n, dtype=int):
    """scipy.linalg.hadamard: the n x n Sylvester Hadamard matrix (n a power of 2), built by doubling."""
    n = _size("hadamard", n)
    if n < 1 or n & (n - 1):
        raise ValueError(f"scipy.linalg.hadamard: n must be a positive power of 2, got {n}")
    h = np.ones((1, 1), dtype=dtype)
    while h.shape[0] < n:
        h = np.block([[h, h], [h, -h]])
    return h


def leslie(f, s):
    """scipy.linalg.leslie: fecundities f (n) in the first row, survival rates s (n - 1) on the
    subdiagonal. Leading axes are a batch."""
    f, s = _vector("leslie", f, "f"), _vector("leslie", s, "s")
    n = f.shape[-1]
    if s.shape[-1] != n - 1:
        raise ValueError(f"scipy.linalg.leslie: s must have one element fewer than f, got shapes {s.shape} and "
                         f"{f.shape}")
    if n < 1:
        raise ValueError("scipy.linalg.leslie: f must have at least one element")
    dtype = np.promote_types(f.dtype, s.dtype)
    batch = knp.broadcast_shapes(f.shape[:-1], s.shape[:-1])
    f, s = knp.broadcast_to(f, batch + (n,)).astype(dtype), knp.broadcast_to(s, batch + (n - 1,)).astype(dtype)
    below = knp.pad(knp.expand_dims(s, -1) * np.eye(n - 1, dtype=dtype), [(0, 0)] * len(batch) + [(1, 0), (0, 1)])
    return below + knp.expand_dims(f, -2) * np.eye(n, dtype=dtype)[0][:, None]


def companion(a):
    """scipy.linalg.companion: the companion matrix of the polynomial with coefficients a (highest power
    first, a[0] != 0): first row -a[1:] / a[0], ones on the subdiagonal. Leading axes are a batch."""
    a = _vector("companion", a, "a")
    n = a.shape[-1]
    if n < 2:
        raise ValueError(f"scipy.linalg.companion: the length of a must be at least 2, got {n}")
    a = a.astype(np.float64) if a.dtype.kind in "iub" else a
    first = -a[..., 1:] / a[..., :1]
    ones = np.pad(np.eye(n - 2, n - 1, dtype=a.dtype), [(1, 0), (0, 0)])
    return ones + knp.expand_dims(first, -2) * np.eye(n - 1, dtype=a.dtype)[0][:, None]


def fiedler(a):
    """scipy.linalg.fiedler: the symmetric matrix |a[i] - a[j]|. Leading axes are a batch."""
    a = _vector("fiedler", a, "a")
    return knp.abs(knp.expand_dims(a, -1) - knp.expand_dims(a, -2))


def convolution_matrix(a, n, mode="full"):
    """scipy.linalg.convolution_matrix: A with A @ v == numpy.convolve(a, v, mode) for v of length n."""
    a = _vector("convolution_matrix", a, "a", batched=False)
    n = _size("convolution_matrix", n)
    m = a.shape[-1]
    if m == 0 or n == 0:
        raise ValueError("scipy.linalg.convolution_matrix: a and n must be non-empty")
    if mode not in ("full", "same", "valid"):
        raise ValueError(f"scipy.linalg.convolution_matrix: mode must be 'full', 'same' or 'valid', got {mode!r}")
    rows = m + n - 1
    i, j = np.indices((rows, n))
    k = i - j
    inside = (k >= 0) & (k < m)
    padded = knp.concatenate([a, knp.zeros((1,), a.dtype)])
    full = _from_indices(padded, np.where(inside, k, m))
    if mode == "full":
        return full
    if mode == "same":
        size, start = max(m, n), (rows - max(m, n)) // 2
    else:
        size, start = max(m, n) - min(m, n) + 1, min(m, n) - 1
    return full[start:start + size]
