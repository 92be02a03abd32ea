"""Indexing of kiln arrays: x[...] (basic and advanced), x.at[...] functional updates, take,
take_along_axis, sort and argsort.

Out-of-range indices (JAX's rules): a concrete index (Python int, numpy array)
out of range raises IndexError as in numpy in x[...], take and take_along_axis;
x.at[...] treats it as a traced one under its mode (JAX's API). A traced index is only known when
the program runs, so it cannot raise: negative values wrap once (as in numpy),
and reads clamp the result into range (x[i] and x.at[i].get() read the nearest
valid element), while `x.at[i].set/add/...` drops updates whose index is out of
range. take and take_along_axis default to JAX's mode="fill": an out-of-range
traced index reads fill_value (NaN for floats, the most negative value for
signed integers, the largest for unsigned, True for bool).

A boolean mask index needs a concrete (numpy) mask, since the result's shape
depends on how many elements are True; for a traced mask use
`knp.where(mask, x, fill)`.
"""
from __future__ import annotations

import numpy as np

from ..core import dtypes
from ..core.trace import Tracer, compile_time_eval
from ..lax import prims
from ..lax import structural_prims as sp
from ._base import asarray, aval, convert, normalize_axes
from .shape import reshape, transpose


class IndexingError(IndexError, TypeError):
    """An index kiln cannot apply (traced boolean masks, bad types)."""


class NonConcreteBooleanIndexError(IndexingError):
    """A traced boolean mask used as an index (the result's shape would depend on the data);
    jax.errors.NonConcreteBooleanIndexError."""


def _is_int_scalar(k) -> bool:
    if isinstance(k, (bool, np.bool_)):
        return False
    if isinstance(k, (int, np.integer)):
        return True
    if isinstance(k, Tracer):
        return k.aval.shape == () and dtypes.is_int(k.aval.dtype)
    return isinstance(k, np.ndarray) and k.shape == () and k.dtype.kind in "iu"


def _is_array_index(k) -> bool:
    return isinstance(k, (list, tuple, np.ndarray, Tracer)) and not _is_int_scalar(k)


def _normalize_key(key, ndim):
    """A list of entries covering every dim: slices, ints, None, and index arrays (bool masks expanded)."""
    if not isinstance(key, tuple):
        key = (key,)
    entries = []
    for k in key:
        if isinstance(k, Tracer) and k.aval.dtype == np.bool_:
            raise NonConcreteBooleanIndexError(
                f"indexing with a traced boolean mask ({k.aval}) is not supported: the output shape depends on the "
                "data (how many elements are True). Use knp.where(mask, x, fill) to keep the shape, a concrete "
                "(numpy) mask, or x[knp.nonzero(mask, size=N)] to gather a fixed number N of elements")
        if isinstance(k, (bool, np.bool_)):
            raise IndexingError("indexing with a Python bool is not supported; use None to add an axis")
        if isinstance(k, (list, tuple)) or (isinstance(k, np.ndarray) and k.ndim > 0):
            arr = np.asarray(k)
            if arr.dtype == np.bool_:
                entries.extend(("array", np.asarray(i, np.int64), "mask") for i in np.nonzero(arr))
                entries.append(("maskdims", arr.ndim))
                continue
            if arr.size and arr.dtype.kind not in "iu":
                raise IndexingError(f"arrays used as indices must be of integer (or boolean) type, got {arr.dtype}")
            entries.append(("array", arr.astype(np.int64) if arr.dtype.kind not in "iu" else arr, None))
        elif isinstance(k, Tracer):
            if not dtypes.is_int(k.aval.dtype):
                raise IndexingError(f"arrays used as indices must be of integer (or boolean) type, got {k.aval}")
            entries.append(("int", k) if k.aval.shape == () else ("array", k, None))
        elif k is None:
            entries.append(("none",))
        elif k is Ellipsis:
            entries.append(("ellipsis",))
        elif isinstance(k, slice):
            for part in (k.start, k.stop, k.step):
                if isinstance(part, Tracer):
                    raise IndexingError(
                        "slice bounds must be concrete (the result's shape depends on them); for a traced start "
                        "with a fixed length use kiln.lax.dynamic_slice(x, start_indices, slice_sizes) or "
                        "kiln.lax.dynamic_slice_in_dim(x, start, size, axis)")
            entries.append(("slice", k))
        elif _is_int_scalar(k):
            entries.append(("int", int(k)))
        else:
            raise IndexingError(f"unsupported index {k!r} of type {type(k).__name__}; use ints, slices, None, "
                                "Ellipsis, integer arrays or concrete boolean masks")
    # mask entries consume as many dims as the mask has; a ("maskdims", n) marker follows them
    consumed = 0
    fixed = []
    i = 0
    while i < len(entries):
        e = entries[i]
        if e[0] == "maskdims":
            i += 1
            continue
        if e[0] == "array" and e[2] == "mask":
            j = i
            while entries[j][0] != "maskdims":
                j += 1
            group = entries[i:j]
            consumed += entries[j][1]
            fixed.extend(group)
            i = j + 1
            continue
        if e[0] in ("slice", "int", "array"):
            consumed += 1
        fixed.append(e)
        i += 1
    if sum(1 for e in fixed if e[0] == "ellipsis") > 1:
        raise IndexingError("an index can only have a single ellipsis ('...')")
    if consumed > ndim:
        raise IndexingError(f"too many indices for array: array is {ndim}-dimensional, but {consumed} were indexed")
    out = []
    for e in fixed:
        if e[0] == "ellipsis":
            out.extend([("slice", slice(None))] * (ndim - consumed))
            consumed = ndim
        else:
            out.append(e)
    out.extend([("slice", slice(None))] * (ndim - consumed))
    return out


def _wrap_traced(i, n):
    """Negative traced indices wrap once (numpy), as int32/int64."""
    a = aval(i)
    if not dtypes.is_int(a.dtype):
        raise IndexingError(f"indices must be integers, got {a}")
    dt = np.dtype(np.int64) if a.dtype == np.int64 or a.dtype == np.uint64 else np.dtype(np.int32)
    i = convert(i, dt) if a.dtype != dt else i
    zero = prims.broadcast_in_dim.bind(np.zeros((), dt), shape=a.shape, broadcast_dimensions=())
    size = prims.broadcast_in_dim.bind(np.asarray(n, dt), shape=a.shape, broadcast_dimensions=())
    return prims.select.bind(prims.lt.bind(i, zero), prims.add.bind(i, size), i)


def _check_concrete(idx, n, dim):
    idx = np.asarray(idx)
    if idx.size and (idx.min() < -n or idx.max() >= n):
        bad = idx.min() if idx.min() < -n else idx.max()
        raise IndexError(f"index {bad} is out of bounds for axis {dim} with size {n}")
    return np.where(idx < 0, idx + n, idx)


def _keep_negative(key, shape):
    """key with each negative index i (concrete or traced) made i - n, so that the one wrap every index gets
    leaves it negative, out of range: JAX's wrap_negative_indices=False."""
    out, d = [], 0
    for e in _normalize_key(key, len(shape)):
        if e[0] == "none":
            out.append(None)
            continue
        n = shape[d]
        d += 1
        if e[0] == "slice":
            out.append(e[1])
        elif isinstance(e[1], Tracer):
            a = aval(e[1])
            zero = prims.broadcast_in_dim.bind(np.zeros((), a.dtype), shape=a.shape, broadcast_dimensions=())
            size = prims.broadcast_in_dim.bind(np.asarray(n, a.dtype), shape=a.shape, broadcast_dimensions=())
            out.append(prims.select.bind(prims.lt.bind(e[1], zero), prims.sub.bind(e[1], size), e[1]))
        else:
            idx = np.asarray(e[1]).astype(np.int64)
            out.append(np.where(idx < 0, idx - n, idx) if idx.ndim else int(idx - n if idx < 0 else idx))
    return tuple(out)


def _concrete_out_of_range(entries, shape) -> bool:
    """Whether a concrete (int or numpy) index entry is out of range for its axis (after wrapping once)."""
    d = 0
    for e in entries:
        if e[0] == "none":
            continue
        if e[0] in ("int", "array") and not isinstance(e[1], Tracer):
            idx = np.asarray(e[1])
            if idx.size and (idx.min() < -shape[d] or idx.max() >= shape[d]):
                return True
        d += 1
    return False


def _wrap_concrete(idx, n):
    """A concrete index as a traced one is treated (JAX's rules, x.at[]): negative values wrap once, and what
    is still out of range stays out of range (held at -1 or n, so it fits the index dtype) for the gather's
    or scatter's mode to clamp or drop."""
    idx = np.asarray(idx).astype(np.int64)
    return np.clip(np.where(idx < 0, idx + n, idx), -1, n)


def getitem(x, key, mode="clip", check_bounds=True):
    """x[key] with numpy semantics; mode is how traced out-of-range indices read ('clip' or 'fill' with 0).
    check_bounds=False (x.at[]) treats concrete indices as traced ones: out of range, they follow mode too
    instead of raising numpy's IndexError."""
    x = asarray(x)
    shape = aval(x).shape
    entries = _normalize_key(key, len(shape))
    has_array = any(e[0] == "array" for e in entries)
    if mode == "fill" and any(e[0] == "int" and isinstance(e[1], Tracer) for e in entries):
        has_array = True  # traced ints read through the gather, which knows out-of-range
    if not check_bounds and _concrete_out_of_range(entries, shape):
        has_array = True  # likewise out-of-range concrete ones: the gather applies the mode
    # 1. static slices (negative steps via rev) and static ints: one slice op
    lo, hi, st, rev_dims = [], [], [], []
    tokens = []  # output layout: ('dim', d) kept dims, ('new',) for None, ('adv',) for advanced entries
    drop = []  # dims removed by basic integer indexing
    dyn = {}  # dim -> traced basic int
    adv = []  # (dim, index) for advanced entries
    d = 0
    for e in entries:
        kind = e[0]
        if kind == "none":
            tokens.append(("new",))
            continue
        n = shape[d]
        if kind == "slice":
            start, stop, step = e[1].indices(n)
            if step > 0:
                lo.append(start), hi.append(max(start, stop)), st.append(step)
            else:
                count = len(range(start, stop, step))
                if count == 0:
                    lo.append(0), hi.append(0), st.append(1)
                else:
                    last = start + (count - 1) * step
                    lo.append(last), hi.append(start + 1), st.append(-step)
                    rev_dims.append(d)
            tokens.append(("dim", d))
        elif kind == "int" and not has_array:
            lo.append(0), hi.append(n), st.append(1)
            if isinstance(e[1], Tracer):
                dyn[d] = e[1]
            else:
                (i,) = _check_concrete([e[1]], n, d)
                lo[-1], hi[-1] = int(i), int(i) + 1
            drop.append(d)
        else:
            lo.append(0), hi.append(n), st.append(1)
            adv.append((d, e[1]))
            tokens.append(("adv",))
        d += 1
    if tuple(lo) != (0,) * len(shape) or tuple(hi) != shape or any(s != 1 for s in st):
        x = sp.slice(x, lo, hi, st)
    if rev_dims:
        x = sp.rev(x, rev_dims)
    cur = aval(x).shape
    if dyn:
        starts = [(_wrap_traced(dyn[i], cur[i]) if i in dyn else np.int32(0)) for i in range(len(cur))]
        starts = [convert(s, np.int32) if isinstance(s, Tracer) and aval(s).dtype != np.int32 else s for s in starts]
        sizes = [1 if i in dyn else n for i, n in enumerate(cur)]
        x = sp.dynamic_slice(x, starts, sizes)
    if drop:
        x = reshape(x, tuple(n for i, n in enumerate(aval(x).shape) if i not in drop))
    if not adv:
        final = []
        kept = iter(aval(x).shape)
        for t in tokens:
            final.append(1 if t[0] == "new" else next(kept))
        return reshape(x, tuple(final))
    return _advanced(x, shape, tokens, adv, mode, check_bounds)


def _advanced(x, shape, tokens, adv, mode, check_bounds=True):
    """Gather for the advanced (integer array) entries; tokens give where every output dim goes."""
    from .elementwise import _full  # noqa: F401
    from ._base import broadcast_shapes, broadcast_to

    idx = []
    for dim, i in adv:
        n = shape[dim]
        if isinstance(i, Tracer):
            idx.append(_wrap_traced(i, n))
        else:
            i = _check_concrete(i, n, dim) if check_bounds else _wrap_concrete(i, n)
            idx.append(i.astype(np.int64 if n > 2**31 - 1 else np.int32))
    bshape = broadcast_shapes(*[aval(i).shape for i in idx], where="indexing")
    dt = np.dtype(np.int64) if any(aval(i).dtype == np.int64 for i in idx) else np.dtype(np.int32)
    cols = [reshape(broadcast_to(convert(i, dt), bshape), bshape + (1,)) for i in idx]
    indices = cols[0] if len(cols) == 1 else sp.concatenate(cols, len(bshape))
    axes = tuple(dim for dim, _ in adv)
    out = sp.gather(x, indices, axes, mode)
    nb = len(bshape)
    # out: bshape + kept dims in order. Place the broadcast block where numpy puts it.
    adv_pos = [k for k, t in enumerate(tokens) if t[0] == "adv"]
    adjacent = adv_pos == list(range(adv_pos[0], adv_pos[0] + len(adv_pos)))
    layout = []  # the final order as ('b', j) / ('k', j) / ('new',)
    kept_count = 0
    placed = False
    if not adjacent:
        layout.extend(("b", j) for j in range(nb))
        placed = True
    for t in tokens:
        if t[0] == "adv":
            if not placed:
                layout.extend(("b", j) for j in range(nb))
                placed = True
        elif t[0] == "dim":
            layout.append(("k", kept_count))
            kept_count += 1
        else:
            layout.append(("new",))
    perm = [j if kind == "b" else nb + j for kind, j in (e for e in layout if e[0] != "new")]
    out = transpose(out, perm)
    dims = iter(aval(out).shape)
    return reshape(out, tuple(1 if e[0] == "new" else next(dims) for e in layout))


def _default_fill(dtype) -> np.ndarray:
    """JAX's fill value for out-of-range reads: NaN, the most negative (signed) or largest (unsigned) integer,
    or True."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return np.asarray(True)
    if dtypes.is_int(dtype):
        info = np.iinfo(dtype)
        return np.asarray(info.min if dtype.kind == "i" else info.max, dtype)
    return np.asarray(np.nan).astype(dtype)


def _getitem_fill(x, key, fill_value=None, check_bounds=True):
    """x[key] where a traced out-of-range index reads fill_value (JAX's mode="fill"); a concrete one raises
    IndexError, or with check_bounds=False (x.at[].get) reads fill_value too."""
    from .elementwise import where

    x = asarray(x)
    xa = aval(x)
    out = getitem(x, key, mode="fill", check_bounds=check_bounds)
    traced = any(isinstance(k, Tracer) for k in (key if isinstance(key, tuple) else (key,)))
    if xa.size == 0 or not (traced or (not check_bounds and _concrete_out_of_range(_normalize_key(key, xa.ndim),
                                                                                  xa.shape))):
        return out  # every index is concrete and in range
    # which elements read in range: gather 1 + flat position (0 means out of range)
    dt = np.dtype(np.int64) if xa.size >= 2**31 - 1 else np.dtype(np.int32)
    ids = prims.iota.bind(shape=(xa.size,), dimension=0, dtype=dt)
    ids = prims.add.bind(ids, prims.broadcast_in_dim.bind(np.ones((), dt), shape=(xa.size,), broadcast_dimensions=()))
    ids = reshape(ids, xa.shape)
    valid = prims.ne.bind(getitem(ids, key, mode="fill", check_bounds=check_bounds),
                          prims.broadcast_in_dim.bind(np.zeros((), dt), shape=aval(out).shape, broadcast_dimensions=()))
    fill = _default_fill(xa.dtype) if fill_value is None else np.asarray(fill_value).astype(xa.dtype)
    return where(valid, out, fill)


def setitem_error(self, key, value):
    raise TypeError("kiln arrays are immutable: x[idx] = v is not supported; use x = x.at[idx].set(v)")


class _IndexUpdateHelper:
    __slots__ = ("array",)

    def __init__(self, array):
        self.array = array

    def __getitem__(self, key):
        return _IndexUpdateRef(self.array, key)

    def __repr__(self):
        return f"_IndexUpdateHelper({self.array!r})"


class _IndexUpdateRef:
    """x.at[key]: set / add / multiply / divide / power / min / max / get, each returning a new array."""

    __slots__ = ("array", "key")

    def __init__(self, array, key):
        self.array = array
        self.key = key

    def _key(self, wrap_negative_indices):
        return self.key if wrap_negative_indices else _keep_negative(self.key, aval(asarray(self.array)).shape)

    def get(self, *, indices_are_sorted=False, unique_indices=False, mode=None, fill_value=None,
            out_sharding=None, wrap_negative_indices=True):
        """x[key]; mode "fill" or "drop" reads fill_value (JAX's default: NaN, or an integer's extreme) where an
        index is out of range, None, "clip" and "promise_in_bounds" clamp it (JAX's rules, concrete indices
        included: negative ones wrap once, or with wrap_negative_indices=False are out of range, and what is out
        of range follows the mode). out_sharding is accepted and unused (one host)."""
        mode = getattr(mode, "value", mode)  # a lax.GatherScatterMode
        if mode not in _SCATTER_MODES:
            raise ValueError(f"at[].get: mode must be None, 'drop', 'fill', 'clip' or 'promise_in_bounds', "
                             f"got {mode!r}")
        key = self._key(wrap_negative_indices)
        if mode in ("fill", "drop"):
            return _getitem_fill(self.array, key, fill_value, check_bounds=False)
        return getitem(self.array, key, "clip", check_bounds=False)

    # JAX's keywords: indices_are_sorted and unique_indices are hints (kiln's scatter needs neither), out_sharding
    # is accepted and unused (one host), wrap_negative_indices=False makes negative indices out of range;
    # mode None, "drop", "fill" or "promise_in_bounds" drops updates at out-of-range indices, "clip" clamps the
    # indices into range; concrete indices as traced ones (JAX's rules)
    def set(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None, out_sharding=None,
            wrap_negative_indices=True):
        return _scatter(self.array, self._key(wrap_negative_indices), values, "set", mode)

    def add(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None, out_sharding=None,
            wrap_negative_indices=True):
        return _scatter(self.array, self._key(wrap_negative_indices), values, "add", mode)

    def multiply(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None, out_sharding=None,
            wrap_negative_indices=True):
        return _scatter(self.array, self._key(wrap_negative_indices), values, "mul", mode)

    mul = multiply

    def divide(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None, out_sharding=None,
               wrap_negative_indices=True):
        """x[key] /= values, as JAX computes it: x divided by ones multiplied by values at key (so an integer x
        gives a float result, numpy's true division)."""
        from .elementwise import true_divide

        return true_divide(self.array, _scatter(_ones_like(self.array), self._key(wrap_negative_indices), values,
                                                "mul", mode, "divide"))

    def power(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None, out_sharding=None,
              wrap_negative_indices=True):
        """x[key] **= values, as JAX computes it: x to the power of ones multiplied by values at key."""
        from .elementwise import power

        return power(self.array, _scatter(_ones_like(self.array), self._key(wrap_negative_indices), values, "mul",
                                          mode, "power"))

    def apply(self, func, *, indices_are_sorted=False, unique_indices=False, mode=None,
              wrap_negative_indices=True):
        """func (a unary elementwise function, e.g. a ufunc) applied to x at key, as JAX's scatter_apply: once
        per occurrence of a position (a repeated index applies it again), out-of-range indices dropped or, with
        mode="clip", clamped. Computed as func over the whole array, kept where a position's count of
        occurrences exceeds the pass, for as many passes as the largest count (a while_loop for traced indices,
        which JAX does not differentiate either; concrete ones differentiate)."""
        from ..lax.control_flow import while_loop
        from .elementwise import where

        x = asarray(self.array)
        xa = aval(x)
        key = self._key(wrap_negative_indices)
        parts = key if isinstance(key, tuple) else (key,)
        token = compile_time_eval.set(not any(isinstance(k, Tracer) for k in parts))  # concrete counts
        try:
            zeros = np.zeros(xa.shape, np.int32)
            count = _scatter(zeros, key, np.int32(1), "add", mode, "apply")
            most = prims.reduce_max.bind(reshape(count, (xa.size,)), axes=(0,)) if xa.size else np.int32(0)
        finally:
            compile_time_eval.reset(token)

        def body(state):
            k, y = state
            out = asarray(func(y))
            if aval(out).dtype != xa.dtype:
                out = convert(out, xa.dtype)
            return k + 1, where(count > k, out, y)

        if not isinstance(most, Tracer):  # concrete indices: as many passes as needed, differentiable
            state = (np.int32(0), x)
            for _ in range(int(most)):
                state = body(state)
            return state[1]
        return while_loop(lambda state: state[0] < most, body, (np.int32(0), x))[1]

    def min(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None, out_sharding=None,
            wrap_negative_indices=True):
        return _scatter(self.array, self._key(wrap_negative_indices), values, "min", mode)

    def max(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None, out_sharding=None,
            wrap_negative_indices=True):
        return _scatter(self.array, self._key(wrap_negative_indices), values, "max", mode)


_SCATTER_MODES = {None: "fill", "drop": "fill", "fill": "fill", "promise_in_bounds": "fill", "clip": "clip"}


def _ones_like(x):
    x = asarray(x)
    a = aval(x)
    return prims.broadcast_in_dim.bind(np.ones((), a.dtype), shape=a.shape, broadcast_dimensions=())


def _scatter(x, key, values, update, mode=None, name=None):
    """Scatter over the flattened array at the flat positions that x[key] reads (out-of-range traced
    indices give position -1, which the scatter drops; mode="clip" clamps them instead)."""
    from ._base import broadcast_to

    mode = getattr(mode, "value", mode)  # a lax.GatherScatterMode
    if mode not in _SCATTER_MODES:
        name = name or ("multiply" if update == "mul" else update)
        raise ValueError(f"at[].{name}: mode must be None, 'drop', 'fill', "
                         "'clip' or 'promise_in_bounds', "
                         f"got {mode!r}")
    x = asarray(x)
    xa = aval(x)
    dt = np.dtype(np.int64) if xa.size >= 2**31 - 1 else np.dtype(np.int32)
    flat_ids = prims.iota.bind(shape=(xa.size,), dimension=0, dtype=dt)
    one = prims.broadcast_in_dim.bind(np.ones((), dt), shape=(xa.size,), broadcast_dimensions=())
    ids = reshape(prims.add.bind(flat_ids, one), xa.shape)
    pos = getitem(ids, key, mode=_SCATTER_MODES[mode], check_bounds=False)
    pa = aval(pos)
    pos = prims.sub.bind(pos, prims.broadcast_in_dim.bind(np.ones((), dt), shape=pa.shape, broadcast_dimensions=()))
    v = asarray(values)
    if aval(v).dtype != xa.dtype:
        v = convert(v, xa.dtype)
    v = broadcast_to(v, pa.shape)
    flat = reshape(x, (xa.size,))
    out = sp.scatter(flat, reshape(pos, (pa.size, 1)), reshape(v, (pa.size,)), (0,), update, "drop")
    return reshape(out, xa.shape)


def take(a, indices, axis=None, mode=None, *, fill_value=None):
    """numpy.take with jax.numpy's modes. Concrete indices out of range raise IndexError (unless mode='clip' or
    'wrap'); traced ones read fill_value in the default mode 'fill' (as JAX: NaN for floats, the most negative
    value for signed integers, the largest for unsigned, True for bool), are clamped with 'clip' and wrapped with
    'wrap'."""
    x = asarray(a)
    if axis is None:
        x, axis = reshape(x, (-1,)), 0
    nd = aval(x).ndim
    (ax,) = normalize_axes(axis, nd, "take")
    n = aval(x).shape[ax]
    if mode not in (None, "raise", "clip", "wrap", "fill"):
        raise ValueError(f"take: mode must be 'raise', 'clip', 'wrap' or 'fill', got {mode!r}")
    idx = indices if isinstance(indices, Tracer) else np.asarray(indices)
    if mode == "wrap":
        from .elementwise import remainder

        idx = remainder(idx, n) if isinstance(idx, Tracer) else np.mod(idx, n)
    elif mode == "clip":  # numpy's clip: a negative index is 0, not counted from the end
        if isinstance(idx, Tracer):
            from .elementwise import maximum, minimum

            idx = maximum(minimum(idx, max(n - 1, 0)), 0)
        else:
            idx = np.clip(idx, 0, max(n - 1, 0))
    key = (slice(None),) * ax + (idx,)
    if mode in (None, "raise", "fill"):
        return _getitem_fill(x, key, fill_value)
    return getitem(x, key, "clip")


def take_along_axis(arr, indices, axis, mode=None, fill_value=None):
    """numpy.take_along_axis (index and array broadcast over the other axes). Concrete indices out of range raise
    IndexError; traced ones read fill_value in the default mode 'fill' (as jax.numpy) or are clamped with
    mode='clip'."""
    from ._base import broadcast_to

    x = asarray(arr)
    if axis is None:
        x, axis = reshape(x, (-1,)), 0
    nd = aval(x).ndim
    (ax,) = normalize_axes(axis, nd, "take_along_axis")
    idx = indices if isinstance(indices, Tracer) else np.asarray(indices)
    ia = aval(idx)
    if ia.ndim != nd:
        raise ValueError(f"take_along_axis: `indices` and `arr` must have the same number of dimensions ({ia.ndim} vs {nd})")
    if not dtypes.is_int(ia.dtype):
        raise IndexingError(f"take_along_axis: indices must be integers, got {ia.dtype}")
    if mode not in (None, "fill", "clip"):
        raise ValueError(f"take_along_axis: mode must be 'fill' or 'clip', got {mode!r}")
    n = aval(x).shape[ax]
    valid = None
    if isinstance(idx, Tracer):
        if mode != "clip":  # JAX's fill: in range after negative indices wrap once
            lo = prims.broadcast_in_dim.bind(np.asarray(-n, ia.dtype), shape=ia.shape, broadcast_dimensions=())
            hi = prims.broadcast_in_dim.bind(np.asarray(n, ia.dtype), shape=ia.shape, broadcast_dimensions=())
            valid = prims.min.bind(prims.ge.bind(idx, lo), prims.lt.bind(idx, hi))  # and
        idx = _wrap_traced(idx, n)
    else:
        idx = np.clip(idx, -n, n - 1) if mode == "clip" else idx
        idx = _check_concrete(idx, n, ax).astype(np.int32)
    shape = tuple(max(a, b) if i != ax else None for i, (a, b) in enumerate(zip(aval(x).shape, aval(idx).shape)))
    xs = tuple(aval(x).shape[ax] if i == ax else d for i, d in enumerate(shape))
    iss = tuple(aval(idx).shape[ax] if i == ax else d for i, d in enumerate(shape))
    x = broadcast_to(x, xs)
    idx = broadcast_to(idx, iss)
    if aval(idx).size == 0:
        from .creation import zeros

        return zeros(iss, aval(x).dtype)
    out = sp.take_along(x, idx, ax)
    if valid is None:
        return out
    from .elementwise import where

    fill = _default_fill(aval(x).dtype) if fill_value is None else np.asarray(fill_value).astype(aval(x).dtype)
    return where(broadcast_to(valid, iss), out, fill)


def _sort_parts(a, axis, descending, name):
    """(values, int64 indices) of a stable sort along axis; descending as in jax.numpy: the ascending order
    reversed, except that equal elements keep their original order (so NaNs come first)."""
    x = asarray(a)
    if axis is None:
        x, axis = reshape(x, (-1,)), 0
    nd = aval(x).ndim
    if nd == 0:
        raise ValueError(f"{name}: axis out of bounds for a 0-d array (use axis=None)")
    (ax,) = normalize_axes(axis, nd, name)
    if descending:
        x = sp.rev(x, (ax,))
    iota = prims.iota.bind(shape=aval(x).shape, dimension=ax, dtype=np.dtype(np.int64))
    values, idx = sp.sort([x, iota], ax, 2)
    if not descending:
        return values, idx
    n = aval(x).shape[ax]
    last = prims.broadcast_in_dim.bind(np.int64(n - 1), shape=aval(idx).shape, broadcast_dimensions=())
    return sp.rev(values, (ax,)), sp.rev(prims.sub.bind(last, idx), (ax,))


def sort(a, axis=-1, kind=None, order=None, *, stable=None, descending=False):
    """numpy.sort (stable; NaN sort last). descending=True (jax.numpy's keyword) sorts from largest to
    smallest, NaNs first."""
    if order is not None:
        raise ValueError("sort: `order` (structured arrays) is not supported")
    return _sort_parts(a, axis, descending, "sort")[0]


def argsort(a, axis=-1, kind=None, order=None, *, stable=None, descending=False):
    """numpy.argsort (stable; int64 indices). descending=True (jax.numpy's keyword): indices of the largest
    first, equal elements in their original order."""
    if order is not None:
        raise ValueError("argsort: `order` (structured arrays) is not supported")
    return _sort_parts(a, axis, descending, "argsort")[1]


def at(x):
    """x.at for any array: numpy arrays have no `.at`, so eager code writes knp.at(x)[idx].set(v)."""
    return _IndexUpdateHelper(asarray(x))
