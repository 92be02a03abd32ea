"""kiln.Array: what eager kiln code and kiln.jit return, an immutable array like jax.Array.

An Array is a read-only numpy.ndarray subclass, so np.asarray, the buffer protocol and DLPack see its
memory without a copy, and numpy code that accepts arrays accepts it. Python's operators and the array
methods are kiln.numpy's and give kiln arrays (x + y, x.sum(), x.sort(), x.at[i].set(v)), as jax.Array's
do; kiln.numpy installs them (kiln.numpy._methods). Writing into one is a TypeError that names `.at`,
and `v += a` rebinds v to a new array instead of changing the caller's.

numpy's own functions and ufuncs (np.sum(x), np.add(x, 1)) see plain numpy arrays, read-only views of
the same memory, and return what numpy returns, as they do for jax.Array: numpy's code never meets
kiln's method semantics (an immutable x.sort()), and kiln never changes numpy's results.
"""
from __future__ import annotations

import functools
import types

import numpy as np

from .pytree import tree_map
from .trace import Tracer

_IMMUTABLE = ("kiln arrays are immutable: x[idx] = v is not supported; use x = x.at[idx].set(v) "
              "(or np.array(x) for a mutable numpy copy)")


class Array(np.ndarray):
    """An immutable n-dimensional array (see the module docstring).

    `_weak` marks a weakly typed array, as JAX's weak_type: one computed from Python numbers alone
    (knp.sqrt(2.0)) or made by a creation function without dtype= (knp.ones(3)). It has numpy's
    dtype (float64, int64) on its own and takes the dtype of the arrays it meets, as a Python number
    does, so eager code keeps float32 data float32 as traced code and JAX do."""

    _weak = False

    def __array_finalize__(self, obj):
        if getattr(obj, "_weak", False):
            self._weak = True

    def __setitem__(self, key, value):
        if not self.flags.writeable:
            raise TypeError(_IMMUTABLE)
        super().__setitem__(key, value)

    def __repr__(self):
        if self.dtype.kind == "V":  # bfloat16 and other ml_dtypes: numpy formats them element by element,
            # by each element's repr, which for a kiln array is a 0-d Array; format the plain array instead
            return "A" + repr(self.view(np.ndarray))[1:]
        return super().__repr__()

    def __str__(self):
        if self.dtype.kind == "V":
            return str(self.view(np.ndarray))
        return super().__str__()

    def __hash__(self):
        if self.ndim:
            raise TypeError(f"unhashable type: kiln array of shape {self.shape} (only 0-d arrays are hashable)")
        return hash(self.item())

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if "out" in kwargs:
            out = kwargs["out"]
            if any(isinstance(o, Array) and not o.flags.writeable for o in out):
                raise TypeError(_IMMUTABLE.replace("x[idx] = v", "out=x"))
            kwargs["out"] = tuple(_plain(o) for o in out)
        return getattr(ufunc, method)(*[_plain(x) for x in inputs], **kwargs)

    def __array_function__(self, func, types, args, kwargs):
        return func(*_plain_tree(args), **_plain_tree(kwargs))

    def __reduce__(self):
        constructor, args, state = super().__reduce__()
        return _unpickle, (constructor, args, state)

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self

    # v += a rebinds v to a new array (jax.Array's rule): the in-place operators are the plain ones.
    def __iadd__(self, other):
        return type(self).__add__(self, other)

    def __isub__(self, other):
        return type(self).__sub__(self, other)

    def __imul__(self, other):
        return type(self).__mul__(self, other)

    def __itruediv__(self, other):
        return type(self).__truediv__(self, other)

    def __ifloordiv__(self, other):
        return type(self).__floordiv__(self, other)

    def __imod__(self, other):
        return type(self).__mod__(self, other)

    def __ipow__(self, other):
        return type(self).__pow__(self, other)

    def __imatmul__(self, other):
        return type(self).__matmul__(self, other)

    def __iand__(self, other):
        return type(self).__and__(self, other)

    def __ior__(self, other):
        return type(self).__or__(self, other)

    def __ixor__(self, other):
        return type(self).__xor__(self, other)

    def __ilshift__(self, other):
        return type(self).__lshift__(self, other)

    def __irshift__(self, other):
        return type(self).__rshift__(self, other)


def _unpickle(constructor, args, state):
    array = constructor(*args)
    array.__setstate__(state)
    array.flags.writeable = False
    return array


def _plain(x):
    """A numpy view of an Array (same memory, same read-only flag); anything else as it is."""
    return x.view(np.ndarray) if isinstance(x, Array) else x


def _plain_tree(x):
    if isinstance(x, Array):
        return x.view(np.ndarray)
    if type(x) in (list, tuple):
        return type(x)(_plain_tree(v) for v in x)
    if type(x) is dict:
        return {k: _plain_tree(v) for k, v in x.items()}
    return x


def as_array(x, weak: bool = False):
    """x as a kiln Array without a copy: a read-only Array view of a numpy array, a 0-d Array of a numpy
    scalar (weakly typed when `weak`); an Array or anything else (tracers, Python values) as it is,
    except that `weak` marks an Array weak in a new view."""
    if type(x) is np.ndarray or isinstance(x, np.generic) or (weak and isinstance(x, Array) and not x._weak):
        view = np.asarray(x).view(Array)
        view.flags.writeable = False
        if weak:
            view._weak = True
        return view
    return x


def is_weak(x) -> bool:
    """A Python number or a weakly typed kiln array."""
    return getattr(x, "_weak", False) or type(x) in (int, float, bool)


def as_arrays(tree):
    """as_array over the leaves of a tree of results (tuples, lists, dicts, registered pytrees)."""
    kind = type(tree)
    if kind is np.ndarray or isinstance(tree, np.generic):
        return as_array(tree)
    if kind is tuple:
        return tuple(as_arrays(v) for v in tree)
    if kind is list:
        return [as_arrays(v) for v in tree]
    if kind is dict:
        return {k: as_arrays(v) for k, v in tree.items()}
    if kind in _LEAF_TYPES or isinstance(tree, (Array, Tracer)):
        return tree
    return tree_map(as_array, tree)


_LEAF_TYPES = frozenset({bool, int, float, str, type(None)})


def returning_arrays(fn):
    """fn, with numpy results made kiln arrays (tracers and other values pass through)."""
    wrapped = _WRAPPED.get(fn)
    if wrapped is None:
        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            return as_arrays(fn(*args, **kwargs))

        wrapped.__kiln_unwrapped__ = fn
        _WRAPPED[fn] = wrapped
    return wrapped


_WRAPPED: dict = {}


def install_methods(functions: dict, properties: dict) -> None:
    """Puts kiln.numpy's operators and methods (name -> fn(self, ...)) and properties on Array, with
    results made kiln arrays; __getitem__ keeps numpy's fast path for indices that are not traced."""
    for name, fn in functions.items():
        if name == "__setitem__":
            continue
        setattr(Array, name, returning_arrays(fn))
    traced_getitem = returning_arrays(functions["__getitem__"])
    plain_getitem = np.ndarray.__getitem__

    def __getitem__(self, key):
        if _has_tracer(key):
            return traced_getitem(self, key)
        out = plain_getitem(self, _plain_tree(key))
        return as_array(out, weak=self._weak) if isinstance(out, np.generic) else out

    Array.__getitem__ = __getitem__
    for name, fn in properties.items():
        setattr(Array, name, property(lambda self, fn=fn: _ResultsAsArrays(fn(self))))


class _ResultsAsArrays:
    """A proxy whose indexing and method calls give kiln arrays (x.at[i].set(v) on an Array)."""

    __slots__ = ("_target",)

    def __init__(self, target):
        self._target = target

    def __getitem__(self, key):
        return _ResultsAsArrays(self._target[key])

    def __getattr__(self, name):
        value = getattr(self._target, name)
        if not callable(value):
            return value
        return lambda *args, **kwargs: as_arrays(value(*args, **kwargs))


def _has_tracer(key) -> bool:
    if isinstance(key, Tracer):
        return True
    if isinstance(key, (tuple, list)):
        return any(_has_tracer(k) for k in key)
    if isinstance(key, slice):
        return any(isinstance(k, Tracer) for k in (key.start, key.stop, key.step))
    return False


def wrap_namespace(namespace: dict) -> None:
    """Makes the public functions of a user-facing module (kiln.numpy, kiln.random, ...) return kiln
    arrays; the modules that define them, which kiln calls internally, are unchanged."""
    for name, value in list(namespace.items()):
        if not name.startswith("_") and isinstance(value, types.FunctionType) and \
                (value.__module__ or "").startswith("kiln."):
            namespace[name] = returning_arrays(value)
