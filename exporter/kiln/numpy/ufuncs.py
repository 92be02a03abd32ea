"""numpy's ufunc objects: knp.add, knp.maximum, knp.logical_or, knp.sin, ... are `ufunc`s, called as before
and with numpy's methods `.reduce`, `.accumulate`, `.outer` and `.at`, its attributes `.identity`, `.nin`,
`.nout`, and the call keywords `dtype=`, `where=` and `out=None`.

kiln arrays are immutable: a given `out=` array is an error, and `.at` returns the updated array (as in
jax.numpy, the call must say inplace=False). Without `out=`, numpy leaves the elements where `where=` is
False uninitialized; kiln makes them 0. Internal code keeps calling the plain functions; only the public
kiln.numpy names are these objects.
"""
from __future__ import annotations

import numpy as np

from ..core import dtypes
from ..core.trace import Tracer
from ..lax import control_flow, pooling
from ..lax import structural_prims as sp
from . import elementwise, math, more_math, reductions
from ._base import asarray, aval, broadcast_all, broadcast_to, convert, normalize_axes
from .indexing import at as _at
from .shape import concatenate, moveaxis, reshape, stack

_NO_VALUE = object()


def _out_error(name):
    return NotImplementedError(f"{name}: out= is not supported: kiln arrays are immutable, so a result cannot be "
                               "written into an existing array; use the returned array (out=None is accepted)")


class ufunc:  # noqa: N801  (numpy's name)
    """A numpy-style universal function over kiln arrays (see the module docstring)."""

    def __init__(self, func, /, nin, nout=1, *, name=None, nargs=None, identity=None, reorderable=False,
                 reduction=None, accumulation=None, scatter=None):
        """jax.numpy.ufunc's constructor: func computes the elementwise result of nin arrays (nout=1); the
        methods fold it. reorderable=True lets reduce pair elements in any order (associative and
        commutative functions); the other keywords name faster kiln.numpy functions for the methods."""
        if nout != 1:
            raise ValueError(f"ufunc: only functions with one output (nout=1) are supported, got nout={nout}")
        if int(nin) < 1:
            raise ValueError(f"ufunc: nin must be at least 1, got {nin}")
        self._fn = func
        self.__name__ = self.__qualname__ = name or getattr(func, "__name__", "ufunc")
        self.__doc__ = func.__doc__
        self.nin, self.nout = int(nin), 1
        self.nargs = int(nargs) if nargs is not None else self.nin + 1
        self.identity = identity
        self.signature = None
        self._reorderable = reorderable
        self._reduction = reduction
        self._accumulation = accumulation
        self._scatter = scatter

    def __repr__(self):
        return f"<kiln.numpy.ufunc '{self.__name__}'>"

    def __call__(self, *args, out=None, where=True, dtype=None):
        name = self.__name__
        if out is not None:
            raise _out_error(name)
        if len(args) != self.nin:
            raise TypeError(f"{name}() takes {self.nin} positional argument{'s' if self.nin > 1 else ''} "
                            f"but {len(args)} were given")
        if dtype is not None:
            args = [convert(asarray(a), dtype) for a in args]
        result = self._fn(*args)
        if where is True or where is None:
            return result
        mask = asarray(where)
        if aval(mask).dtype != np.bool_:
            mask = convert(mask, np.bool_)
        mask, result = broadcast_all(mask, result, where=name)
        return elementwise.where(mask, result, np.zeros((), aval(result).dtype))

    def _binary_only(self, method):
        if self.nin != 2:
            raise ValueError(f"{self.__name__}.{method}: only supported for binary functions")

    def reduce(self, array, axis=0, dtype=None, out=None, keepdims=False, initial=_NO_VALUE, where=True):
        """ufunc.reduce: the function folded over `axis` (an int, a tuple for reorderable functions, or None
        for all), starting from `initial` if given; `where` masks elements (they count as the identity)."""
        name = f"{self.__name__}.reduce"
        self._binary_only("reduce")
        if out is not None:
            raise _out_error(name)
        x = asarray(array)
        axes = normalize_axes(axis, aval(x).ndim, name)
        if len(axes) > 1 and not self._reorderable:
            raise ValueError(f"{name}: reduction operation '{self.__name__}' is not reorderable, so at most one "
                             "axis may be specified")
        masked = not (where is True or where is None)
        if self.identity is None and initial is _NO_VALUE and any(aval(x).shape[ax] == 0 for ax in axes):
            raise ValueError(f"{name}: zero-size array to reduction operation {self.__name__} which has no identity")
        if self._reduction is not None and (initial is _NO_VALUE or self._reduction[1]):
            fn, _, takes_dtype = self._reduction
            kw = {"where": asarray(where)} if masked else {}
            if initial is not _NO_VALUE:
                kw["initial"] = initial
            if dtype is not None:
                kw.update({"dtype": dtype} if takes_dtype else {})
                x = x if takes_dtype else convert(x, dtype)
            return fn(x, axis=axes, keepdims=keepdims, **kw)
        if dtype is not None:
            x = convert(x, dtype)
        start = None if initial is _NO_VALUE else initial
        if masked:
            mask = broadcast_to(convert(asarray(where), np.bool_), aval(x).shape)
            if self.identity is None:
                if start is None:
                    raise ValueError(f"{name}: reduction operation '{self.__name__}' does not have an identity, so "
                                     "to use a where mask one has to specify 'initial'")
                return self._masked_fold(x, mask, axes, start, keepdims, name)
            x = elementwise.where(mask, x, np.asarray(self.identity).astype(aval(x).dtype))
        out_dtype = aval(self._fn(_first(x), _first(x))).dtype
        shape = aval(x).shape
        for ax in sorted(axes, reverse=True):
            x = self._fold(x, ax, start, name)
            start = None  # initial joins the fold once
        if start is not None:  # axis=(): initial combines with every element
            x = self._fn(broadcast_to(np.asarray(start).astype(out_dtype), aval(x).shape), x)
        x = convert(x, out_dtype)
        if keepdims:
            x = reshape(x, tuple(1 if i in axes else d for i, d in enumerate(shape)))
        return x

    def _masked_fold(self, x, mask, axes, start, keepdims, name):
        """A left fold from `initial` that skips the masked-out elements (numpy's where= without an identity)."""
        if len(axes) != 1:
            raise ValueError(f"{name}: a where mask without an identity needs exactly one axis")
        (ax,) = axes
        moved, kept = moveaxis(x, ax, 0), moveaxis(mask, ax, 0)
        acc = broadcast_to(np.asarray(start).astype(aval(x).dtype), aval(moved).shape[1:])
        for i in range(aval(moved).shape[0]):
            acc = elementwise.where(kept[i], self._fn(acc, moved[i]), acc)
        return reshape(acc, tuple(1 if i == ax else d for i, d in enumerate(aval(x).shape))) if keepdims else acc

    def _fold(self, x, ax, start, name):
        n = aval(x).shape[ax]
        rest = aval(x).shape[:ax] + aval(x).shape[ax + 1:]
        moved = moveaxis(x, ax, 0)
        if n == 0:
            value = start if start is not None else self.identity
            if value is None:
                raise ValueError(f"{name}: zero-size array to reduction operation {self.__name__} which has no identity")
            return broadcast_to(np.asarray(value).astype(aval(x).dtype), rest)
        if self._reorderable:
            while aval(moved).shape[0] > 1:
                m = aval(moved).shape[0]
                half = m // 2
                paired = self._fn(moved[:half], moved[half:2 * half])
                moved = concatenate([paired, moved[2 * half:]]) if m % 2 else paired
            acc = moved[0]
        else:
            acc = moved[0]
            for i in range(1, n):
                acc = self._fn(acc, moved[i])
        if start is not None:
            acc = self._fn(broadcast_to(np.asarray(start).astype(aval(acc).dtype), aval(acc).shape), acc)
        return acc

    def accumulate(self, array, axis=0, dtype=None, out=None):
        """ufunc.accumulate: the running fold along axis (add and multiply are cumsum and cumprod)."""
        name = f"{self.__name__}.accumulate"
        self._binary_only("accumulate")
        if out is not None:
            raise _out_error(name)
        x = asarray(array)
        if aval(x).ndim == 0:
            raise ValueError(f"{name}: cannot accumulate on a scalar")
        ax = normalize_axes(axis, aval(x).ndim, name)[0]
        if self._accumulation is not None:
            return self._accumulation(x, ax, dtype)
        if dtype is not None:
            x = convert(x, dtype)
        moved = moveaxis(x, ax, 0)
        acc = moved[0]
        if aval(moved).shape[0] == 0:
            return x
        acc = convert(acc, aval(self._fn(acc, acc)).dtype)
        parts = [acc]
        for i in range(1, aval(moved).shape[0]):
            acc = self._fn(acc, moved[i])
            parts.append(acc)
        return moveaxis(stack(parts), 0, ax)

    def reduceat(self, array, indices, axis=0, dtype=None, out=None):
        """ufunc.reduceat with concrete indices: the reduction of array[indices[i]:indices[i+1]] along axis for
        each i (array[indices[i]] where the next index is not larger; the last runs to the end)."""
        name = f"{self.__name__}.reduceat"
        self._binary_only("reduceat")
        if out is not None:
            raise _out_error(name)
        if isinstance(indices, Tracer):
            raise TypeError(f"{name}: indices must be concrete (the slices they cut are static)")
        x = asarray(array)
        ax = normalize_axes(axis, aval(x).ndim, name)[0]
        n = aval(x).shape[ax]
        starts = np.asarray(indices).reshape(-1)
        if starts.dtype.kind not in "iu" or (starts.size and (starts.min() < 0 or starts.max() >= n)):
            raise IndexError(f"{name}: indices must be integers in [0, {n}) along axis {ax}, got {starts.tolist()}")
        moved = moveaxis(x, ax, 0)
        pieces = []
        for i, start in enumerate(starts):
            stop = starts[i + 1] if i + 1 < starts.size else n
            if stop <= start:
                pieces.append(convert(moved[int(start)], aval(self.reduce(moved[:1], axis=0, dtype=dtype)).dtype))
            else:
                pieces.append(self.reduce(moved[int(start):int(stop)], axis=0, dtype=dtype))
        return moveaxis(stack(pieces), 0, ax)

    def outer(self, A, B, /, **kwargs):
        """ufunc.outer: the function of every pair, result shape A.shape + B.shape."""
        self._binary_only("outer")
        a, b = asarray(A), asarray(B)
        a = reshape(a, aval(a).shape + (1,) * aval(b).ndim)
        return self(a, b, **kwargs)

    def at(self, a, indices, b=None, /, *, inplace=True):
        """ufunc.at, returning the new array (as jax.numpy: say inplace=False). Repeated indices apply
        repeatedly, as numpy's unbuffered at."""
        name = f"{self.__name__}.at"
        if inplace:
            raise ValueError(f"{name}: kiln arrays are immutable, so they cannot be updated in place; call "
                             f"{name}(a, indices{', b' if self.nin == 2 else ''}, inplace=False) and use the array "
                             "it returns")
        if (b is None) != (self.nin == 1):
            raise TypeError(f"{name}: {'a second operand b is required' if self.nin == 2 else 'takes no operand b'}")
        x = asarray(a)
        if self._scatter is not None:
            return getattr(_at(x)[indices], self._scatter)(b)
        if _has_tracer(indices):
            idx = asarray(indices)
            if isinstance(indices, (tuple, list)) or not dtypes.is_int(aval(idx).dtype):
                raise TypeError(f"{name}: traced indices must be one integer array (positions along axis 0)")
            positions, target, rows = reshape(idx, (-1,)), x, True
            picked_shape = aval(idx).shape + aval(x).shape[1:]
            unit_shape = aval(x).shape[1:]
        else:
            grid = np.arange(aval(x).size).reshape(aval(x).shape)
            try:
                picked = grid[indices]
            except IndexError as e:
                raise IndexError(f"{name}: {e}") from None
            positions, target, rows = picked.reshape(-1), reshape(x, (-1,)), False
            picked_shape, unit_shape = picked.shape, ()
        count = aval(positions).shape[0]
        values = None
        if b is not None:
            values = broadcast_to(convert(asarray(b), aval(x).dtype), picked_shape)
            values = reshape(values, (count,) + unit_shape)

        def step(k, state):
            current, where_, updates = state
            p = where_[k]
            old = current[p]
            new = self._fn(old) if updates is None else self._fn(old, updates[k])
            return _at(current)[p].set(convert(new, aval(current).dtype)), where_, updates

        state = (target, asarray(positions), values)
        result = control_flow.fori_loop(0, count, step, state)[0] if count else target
        return result if rows else reshape(result, aval(x).shape)


def _first(x):
    """One element of x (for the result dtype of the function), shape ()."""
    return reshape(x, (-1,))[0] if aval(x).size else np.zeros((), aval(x).dtype)


def _has_tracer(indices):
    if isinstance(indices, Tracer):
        return True
    return isinstance(indices, (tuple, list)) and any(_has_tracer(i) for i in indices)


def _cumulative(fn):
    def accumulate(x, ax, dtype):
        return fn(x, axis=ax, dtype=dtype)

    return accumulate


def _extremum_accumulation(prim):
    def accumulate(x, ax, dtype):
        if dtype is not None:
            x = convert(x, dtype)
        return prim.bind(x, axis=ax, reverse=False)

    return accumulate


def _bool_reduction(fn):
    def reduce(x, axis, keepdims, where=None):
        return fn(x, axis=axis, keepdims=keepdims, **({} if where is None else {"where": where}))

    return reduce


def _extremum_reduction(fn):
    def reduce(x, axis, keepdims, **kw):
        return fn(x, axis=axis, keepdims=keepdims, **kw)

    return reduce


def _make(fn, name, nin, **kw):
    return ufunc(fn, nin, 1, name=name, identity=getattr(np, name).identity if hasattr(np, name) else None, **kw)


add = _make(elementwise.add, "add", 2, reorderable=True, reduction=(reductions.sum, True, True),
            accumulation=_cumulative(reductions.cumsum), scatter="add")
multiply = _make(elementwise.multiply, "multiply", 2, reorderable=True, reduction=(reductions.prod, True, True),
                 accumulation=_cumulative(reductions.cumprod), scatter="multiply")
maximum = _make(elementwise.maximum, "maximum", 2, reorderable=True, reduction=(_extremum_reduction(reductions.max), True, False),
                accumulation=_extremum_accumulation(sp.cummax_p), scatter="max")
minimum = _make(elementwise.minimum, "minimum", 2, reorderable=True, reduction=(_extremum_reduction(reductions.min), True, False),
                accumulation=_extremum_accumulation(sp.cummin_p), scatter="min")
logical_and = _make(math.logical_and, "logical_and", 2, reorderable=True, reduction=(_bool_reduction(reductions.all), False, False))
logical_or = _make(math.logical_or, "logical_or", 2, reorderable=True, reduction=(_bool_reduction(reductions.any), False, False))

_BINARY = {
    "subtract": elementwise.subtract, "divide": elementwise.divide,
    "floor_divide": math.floor_divide, "power": elementwise.power, "float_power": math.float_power,
    "remainder": math.remainder, "fmod": math.fmod, "fmax": math.fmax, "fmin": math.fmin,
    "logical_xor": math.logical_xor, "bitwise_and": math.bitwise_and, "bitwise_or": math.bitwise_or,
    "bitwise_xor": math.bitwise_xor, "left_shift": math.left_shift, "right_shift": math.right_shift,
    "equal": elementwise.equal, "not_equal": elementwise.not_equal, "less": elementwise.less,
    "less_equal": elementwise.less_equal, "greater": elementwise.greater, "greater_equal": elementwise.greater_equal,
    "arctan2": math.arctan2, "hypot": more_math.hypot, "logaddexp": more_math.logaddexp,
    "logaddexp2": more_math.logaddexp2, "copysign": more_math.copysign, "heaviside": more_math.heaviside,
    "gcd": more_math.gcd, "lcm": more_math.lcm, "ldexp": more_math.ldexp,
    "nextafter": more_math.nextafter,
}
_REORDERABLE = {"fmax", "fmin", "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor", "gcd", "hypot",
                "logaddexp", "logaddexp2"}

_UNARY = {
    "absolute": elementwise.absolute, "negative": elementwise.negative,
    "positive": more_math.positive, "sign": math.sign, "sqrt": elementwise.sqrt, "cbrt": more_math.cbrt,
    "square": math.square, "reciprocal": math.reciprocal, "exp": elementwise.exp, "exp2": math.exp2,
    "expm1": math.expm1, "log": elementwise.log, "log2": math.log2, "log10": math.log10, "log1p": math.log1p,
    "sin": math.sin, "cos": math.cos, "tan": math.tan, "arcsin": math.arcsin, "arccos": math.arccos,
    "arctan": math.arctan, "sinh": math.sinh, "cosh": math.cosh, "tanh": elementwise.tanh, "arcsinh": math.arcsinh,
    "arccosh": math.arccosh, "arctanh": math.arctanh,
    "floor": math.floor, "ceil": math.ceil, "trunc": math.trunc, "rint": math.rint, "isnan": math.isnan,
    "isinf": math.isinf, "isfinite": math.isfinite, "signbit": more_math.signbit, "logical_not": math.logical_not,
    "invert": math.invert, "deg2rad": more_math.deg2rad,
    "rad2deg": more_math.rad2deg, "degrees": more_math.degrees, "radians": more_math.radians,
    "conjugate": more_math.conjugate, "fabs": more_math.fabs,
    "spacing": more_math.spacing, "bitwise_count": more_math.bitwise_count,
}

globals().update({name: _make(fn, name, 2, reorderable=name in _REORDERABLE) for name, fn in _BINARY.items()})
globals().update({name: _make(fn, name, 1) for name, fn in _UNARY.items()})

# numpy's other names for the same ufuncs are the same objects (np.abs is np.absolute)
_ALIASES = {
    "true_divide": "divide", "mod": "remainder", "bitwise_left_shift": "left_shift",
    "bitwise_right_shift": "right_shift", "atan2": "arctan2", "pow": "power", "abs": "absolute",
    "asin": "arcsin", "acos": "arccos", "atan": "arctan", "asinh": "arcsinh", "acosh": "arccosh",
    "atanh": "arctanh", "bitwise_not": "invert", "bitwise_invert": "invert", "conj": "conjugate",
}
globals().update({alias: globals()[name] for alias, name in _ALIASES.items()})

for _obj, _op in ((add, "add"), (maximum, "max"), (minimum, "min")):
    pooling.register_window_op(_obj, _op)  # lax.reduce_window(x, init, knp.add, ...) as with the functions

__all__ = ["ufunc", "add", "multiply", "maximum", "minimum", "logical_and", "logical_or", *_BINARY, *_UNARY, *_ALIASES]
