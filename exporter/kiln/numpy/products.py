"""Products: matmul (with batch dimensions), dot, tensordot, einsum, and numpy's trace/diagonal/diag."""
from __future__ import annotations

import numpy as np

from ..core import dtypes
from ..lax import complex_prims, prims
from ..lax import structural_prims as sp
from ..lax.api import canonicalize_precision, dot_operand_dtypes
from ._base import asarray, aval, broadcast_shapes, broadcast_to, convert, promote
from .shape import reshape


def _dot_options(where: str, operands, precision, preferred_element_type):
    """(operands promoted and converted to the dtype they are multiplied in, a function that gives the product
    its result dtype): JAX's precision= (checked; kiln computes in full precision) and preferred_element_type=
    (the result dtype: int8 -> int32 and bfloat16 -> float32 accumulate in it)."""
    canonicalize_precision(precision, where)
    xs = promote(*[asarray(o) for o in operands])
    if preferred_element_type is None or not xs:
        return xs, lambda out: out
    operand_dtype, out_dtype = dot_operand_dtypes(where, aval(xs[0]).dtype, aval(xs[0]).dtype, preferred_element_type)
    xs = [convert(x, operand_dtype) for x in xs]
    return xs, lambda out: convert(out, out_dtype)


def matmul(x1, x2, *, precision=None, preferred_element_type=None):
    """numpy.matmul: 1-D operands are promoted to matrices, batch dimensions broadcast; precision= and
    preferred_element_type= as jax.numpy's (_dot_options)."""
    (a, b), finish = _dot_options("matmul", (x1, x2), precision, preferred_element_type)
    return finish(_matmul(a, b))


def _matmul(a, b):
    sa, sb = aval(a).shape, aval(b).shape
    if not sa or not sb:
        raise ValueError("matmul: input operand does not have enough dimensions (0-d operands are not allowed)")
    a2 = reshape(a, (1,) + sa) if len(sa) == 1 else a
    b2 = reshape(b, sb + (1,)) if len(sb) == 1 else b
    sa2, sb2 = aval(a2).shape, aval(b2).shape
    if sa2[-1] != sb2[-2]:
        raise ValueError(f"matmul: mismatch in core dimension: {sa} @ {sb} ({sa2[-1]} != {sb2[-2]})")
    batch = broadcast_shapes(sa2[:-2], sb2[:-2], where="matmul")
    a3 = broadcast_to(a2, batch + sa2[-2:])
    b3 = broadcast_to(b2, batch + sb2[-2:])
    nb = len(batch)
    dims = (((nb + 1,), (nb,)), (tuple(range(nb)), tuple(range(nb))))
    out = prims.dot_general.bind(a3, b3, dimension_numbers=dims)
    out_shape = batch + (sa2[-2],) * (len(sa) > 1) + (sb2[-1],) * (len(sb) > 1)
    return reshape(out, out_shape)


def dot(a, b, *, precision=None, preferred_element_type=None):
    """numpy.dot: scalar product, matrix product, or contraction of a's last axis with b's second-to-last."""
    (x, y), finish = _dot_options("dot", (a, b), precision, preferred_element_type)
    return finish(_dot(x, y))


def _dot(x, y):
    sx, sy = aval(x).shape, aval(y).shape
    if not sx or not sy:
        from .elementwise import multiply

        return multiply(x, y)
    if len(sy) <= 2:
        return _matmul(x, y)
    cy = len(sy) - 2
    if sx[-1] != sy[cy]:
        raise ValueError(f"dot: shapes {sx} and {sy} not aligned: {sx[-1]} (dim {len(sx) - 1}) != {sy[cy]} (dim {cy})")
    return prims.dot_general.bind(x, y, dimension_numbers=(((len(sx) - 1,), (cy,)), ((), ())))


def _contract(x, y, x_axes, y_axes):
    return prims.dot_general.bind(x, y, dimension_numbers=((tuple(x_axes), tuple(y_axes)), ((), ())))


def vdot(a, b):
    """numpy.vdot: the dot product of the flattened arrays, the first conjugated when complex."""
    x, y = promote(asarray(a), asarray(b))
    x, y = reshape(x, (-1,)), reshape(y, (-1,))
    if dtypes.is_complex(aval(x).dtype):
        x = complex_prims.conj(x)
    if aval(x).shape != aval(y).shape:
        raise ValueError(f"vdot: vectors have different lengths {aval(x).shape[0]} and {aval(y).shape[0]}")
    return _contract(x, y, (0,), (0,))


def inner(a, b, *, precision=None, preferred_element_type=None):
    """numpy.inner: contraction over the last axes."""
    (x, y), finish = _dot_options("inner", (a, b), precision, preferred_element_type)
    sx, sy = aval(x).shape, aval(y).shape
    if not sx or not sy:
        from .elementwise import multiply

        return finish(multiply(x, y))
    if sx[-1] != sy[-1]:
        raise ValueError(f"inner: shapes {sx} and {sy} not aligned: last dimensions differ ({sx[-1]} != {sy[-1]})")
    return finish(_contract(x, y, (len(sx) - 1,), (len(sy) - 1,)))


def outer(a, b):
    from .elementwise import multiply

    x, y = reshape(asarray(a), (-1,)), reshape(asarray(b), (-1,))
    return multiply(reshape(x, (-1, 1)), reshape(y, (1, -1)))


def tensordot(a, b, axes=2, *, precision=None, preferred_element_type=None):
    """numpy.tensordot: axes is an int (last axes of a with first axes of b) or a pair of axis lists."""
    (x, y), finish = _dot_options("tensordot", (a, b), precision, preferred_element_type)
    sx, sy = aval(x).shape, aval(y).shape
    if isinstance(axes, (int,)) or (hasattr(axes, "__index__") and not isinstance(axes, (tuple, list))):
        n = int(axes)
        if n < 0 or n > len(sx) or n > len(sy):
            raise ValueError(f"tensordot: axes={n} is out of range for shapes {sx} and {sy}")
        xa, ya = list(range(len(sx) - n, len(sx))), list(range(n))
    else:
        xa, ya = axes
        xa = [xa] if isinstance(xa, int) else list(xa)
        ya = [ya] if isinstance(ya, int) else list(ya)
        if len(xa) != len(ya):
            raise ValueError("tensordot: shape-mismatch for sum (different numbers of axes)")
        xa = [int(i) % len(sx) for i in xa]
        ya = [int(i) % len(sy) for i in ya]
    for i, j in zip(xa, ya):
        if sx[i] != sy[j]:
            raise ValueError(f"tensordot: shape-mismatch for sum: axis {i} of {sx} vs axis {j} of {sy}")
    return finish(_contract(x, y, xa, ya))


def diagonal(a, offset=0, axis1=0, axis2=1):
    """numpy.diagonal: the diagonal as the last axis (a gather with static indices)."""
    from .shape import moveaxis

    x = asarray(a)
    nd = aval(x).ndim
    if nd < 2:
        raise ValueError("diagonal: requires an array of at least two dimensions")
    i1, i2 = int(axis1) % nd, int(axis2) % nd
    if i1 == i2:
        raise ValueError("diagonal: axis1 and axis2 cannot be the same")
    x = moveaxis(x, (i1, i2), (0, 1))
    n, m = aval(x).shape[:2]
    k = int(offset)
    length = max(0, min(n + min(k, 0), m - max(k, 0)))
    rows = np.arange(length, dtype=np.int32) + max(-k, 0)
    cols = np.arange(length, dtype=np.int32) + max(k, 0)
    if length == 0:
        from .creation import zeros

        return zeros(aval(x).shape[2:] + (0,), aval(x).dtype)
    out = sp.gather(x, np.stack([rows, cols], axis=-1), (0, 1), "clip")
    return moveaxis(out, 0, -1)


def trace(a, offset=0, axis1=0, axis2=1, dtype=None):
    from .reductions import sum

    return sum(diagonal(a, offset, axis1, axis2), axis=-1, dtype=dtype)


def diag(v, k=0):
    """numpy.diag: a 1-d array's diagonal matrix, or a 2-d array's k-th diagonal."""
    from .elementwise import where

    x = asarray(v)
    shape = aval(x).shape
    if len(shape) == 2:
        return diagonal(x, k)
    if len(shape) != 1:
        raise ValueError("diag: input must be 1- or 2-d")
    k = int(k)
    n = shape[0] + abs(k)
    padded = sp.pad(x, 0, [(0, abs(k), 0)])
    i = prims.iota.bind(shape=(n, n), dimension=0, dtype=np.dtype(np.int32))
    j = prims.iota.bind(shape=(n, n), dimension=1, dtype=np.dtype(np.int32))
    on = prims.eq.bind(prims.sub.bind(j, i), prims.broadcast_in_dim.bind(np.int32(k), shape=(n, n), broadcast_dimensions=()))
    spread = prims.broadcast_in_dim.bind(padded, shape=(n, n), broadcast_dimensions=(0,) if k >= 0 else (1,))
    from .creation import zeros_like

    return where(on, spread, zeros_like(x, shape=()))  # zeros_like keeps x's weak type


_SUBLIST_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _sublist_form(args):
    """numpy's sublist form, einsum(a, [0, 1], b, [1, 2], [0, 2]), as (subscripts string, operands):
    labels 0-51 become letters, Ellipsis becomes '...'."""
    args = list(args)
    if len(args) < 2:
        raise TypeError("einsum: the subscripts must be a string or the sublist form einsum(a, [0, 1], ...)")
    terms, operands = [], []
    while len(args) >= 2:
        operands.append(args.pop(0))
        terms.append(_sublist_labels(args.pop(0)))
    out = "->" + _sublist_labels(args[0]) if args else ""
    return ",".join(terms) + out, tuple(operands)


def _sublist_labels(sublist):
    if isinstance(sublist, str) or not hasattr(sublist, "__iter__"):
        raise TypeError(f"einsum: in the sublist form each operand is followed by a list of labels, got {sublist!r}")
    labels = []
    for label in sublist:
        if label is Ellipsis:
            labels.append("...")
        elif isinstance(label, (int, np.integer)) and not isinstance(label, bool) and 0 <= label < 52:
            labels.append(_SUBLIST_LETTERS[int(label)])
        else:
            raise TypeError(f"einsum: sublist labels must be integers in [0, 52) or Ellipsis, got {label!r}")
    return "".join(labels)


def einsum(subscripts, *operands, optimize=None, precision=None, preferred_element_type=None):
    """numpy.einsum for explicit or implicit outputs, ellipses, and repeated (diagonal) labels; precision= and
    preferred_element_type= as jax.numpy's (_dot_options).

    Operands are contracted pairwise left to right with dot_general; labels no
    later operand or the output needs are summed out first.
    """
    from .reductions import sum
    from .shape import transpose

    if not isinstance(subscripts, str):
        subscripts, operands = _sublist_form((subscripts, *operands))
    xs, finish = _dot_options("einsum", operands, precision, preferred_element_type)
    spec = subscripts.replace(" ", "")
    if "->" in spec:
        lhs, out = spec.split("->")
        explicit = True
    else:
        lhs, out, explicit = spec, "", False
    terms = lhs.split(",")
    if len(terms) != len(xs):
        raise ValueError(f"einsum: {len(terms)} operand subscripts for {len(xs)} operands")
    free = iter("ABCDEFGHIJKLMNOPQRSTUVWXYZ")
    ell_labels = None
    labels = []
    for t, x in zip(terms, xs):
        nd = aval(x).ndim
        if "..." in t:
            before, after = t.split("...")
            count = nd - len(before) - len(after)
            if ell_labels is None:
                ell_labels = []
            while len(ell_labels) < count:
                ell_labels.insert(0, next(free))
            t = before + "".join(ell_labels[len(ell_labels) - count:]) + after
        if len(t) != nd:
            raise ValueError(f"einsum: subscripts {t!r} do not match an operand of {nd} dimensions")
        labels.append(t)
    if explicit:
        if "..." in out:
            before, after = out.split("...")
            out = before + "".join(ell_labels or []) + after
    else:
        counts = {}
        for t in labels:
            for c in t:
                counts[c] = counts.get(c, 0) + 1
        out = "".join(ell_labels or []) + "".join(sorted(c for c, n in counts.items() if n == 1 and c not in (ell_labels or [])))
    sizes = {}
    for t, x in zip(labels, xs):
        for c, d in zip(t, aval(x).shape):
            if sizes.setdefault(c, d) != d:
                raise ValueError(f"einsum: label {c!r} has sizes {sizes[c]} and {d}; broadcasting inside einsum is not supported")
    # repeated labels within one operand: take the diagonal
    ops = []
    for t, x in zip(labels, xs):
        while len(set(t)) != len(t):
            c = next(ch for ch in t if t.count(ch) > 1)
            i = t.index(c)
            j = t.index(c, i + 1)
            x = diagonal(x, 0, i, j)
            t = "".join(ch for k, ch in enumerate(t) if k not in (i, j)) + c
        ops.append((t, x))

    def needed_after(k):
        need = set(out)
        for t, _ in ops[k + 1:]:
            need |= set(t)
        return need

    def sum_out(t, x, need):
        drop = [i for i, c in enumerate(t) if c not in need]
        if drop:
            x = sum(x, axis=tuple(drop), dtype=aval(x).dtype)  # numpy keeps the operand dtype (ints wrap)
            t = "".join(c for i, c in enumerate(t) if i not in drop)
        return t, x

    t0, acc = sum_out(*ops[0], needed_after(0) | (set(ops[1][0]) if len(ops) > 1 else set()))
    for k in range(1, len(ops)):
        need = needed_after(k)
        t1, x1 = sum_out(*ops[k], need | set(t0))
        t0, acc = sum_out(t0, acc, need | set(t1))
        shared = [c for c in t0 if c in t1]
        batch = [c for c in shared if c in need]
        contract = [c for c in shared if c not in need]
        dims = (([t0.index(c) for c in contract], [t1.index(c) for c in contract]),
                ([t0.index(c) for c in batch], [t1.index(c) for c in batch]))
        dims = tuple(tuple(tuple(a) for a in pair) for pair in dims)
        acc = prims.dot_general.bind(acc, x1, dimension_numbers=dims)
        t0 = "".join(batch) + "".join(c for c in t0 if c not in shared) + "".join(c for c in t1 if c not in shared)
    t0, acc = sum_out(t0, acc, set(out))
    if sorted(t0) != sorted(out):
        raise ValueError(f"einsum: output subscripts {out!r} name labels not in the inputs")
    return finish(transpose(acc, [t0.index(c) for c in out]))
