"""jax.flatten_util: a pytree of arrays as one flat vector, and back.

    flat, unravel = ravel_pytree(params)      # flat: 1-D, every leaf raveled and concatenated
    params_again = unravel(flat)              # the same tree, shapes and dtypes

Works eagerly, under kiln.jit and inside exported Program functions (it is reshapes, converts and a
concatenation). The flat vector's dtype is the promotion of the leaves' dtypes (kiln's promotion, which
follows numpy's: docs/numpy.md; a Python float leaf alone is float64 where JAX without x64 says float32). A tree
without leaves gives an empty float32 vector, as in JAX.
"""
from __future__ import annotations

import math

import numpy as np

import kiln.numpy as knp
from kiln.core.pytree import tree_flatten, tree_unflatten

__all__ = ["ravel_pytree"]


class _Unravel:
    """The inverse of one ravel_pytree call: a flat vector of the right size (and, where the leaves had
    several dtypes, of the promoted dtype) back to the tree; each leaf gets its shape and dtype again.
    Hashable and comparable, so it can be a static argument of kiln.jit, like JAX's HashablePartial."""

    def __init__(self, treedef, shapes, dtypes, flat_dtype):
        self.treedef = treedef
        self.shapes = tuple(shapes)
        # None: the leaves all had the flat vector's dtype, and unravel keeps whatever dtype it is given
        self.dtypes = None if dtypes is None else tuple(dtypes)
        self.flat_dtype = flat_dtype
        self.size = sum(math.prod(s) for s in self.shapes)

    def _key(self):
        return (self.treedef, self.shapes, self.dtypes, str(self.flat_dtype))

    def __hash__(self):
        return hash(self._key())

    def __eq__(self, other):
        return isinstance(other, _Unravel) and self._key() == other._key()

    def __repr__(self):
        return f"unravel_pytree(size={self.size}, shapes={self.shapes})"

    def __call__(self, flat):
        flat = knp.asarray(flat)
        if flat.ndim != 1 or flat.shape[0] != self.size:
            raise ValueError(f"unravel_pytree: expected a 1-D array of {self.size} elements (the raveled tree), "
                             f"got shape {tuple(flat.shape)}")
        if self.dtypes is not None and np.dtype(flat.dtype) != np.dtype(self.flat_dtype):
            raise TypeError(f"unravel function given array of dtype {flat.dtype}, but expected dtype "
                            f"{np.dtype(self.flat_dtype)}")
        leaves, start = [], 0
        for i, shape in enumerate(self.shapes):
            n = math.prod(shape)
            leaf = knp.reshape(flat[start:start + n], shape)
            if self.dtypes is not None and np.dtype(self.dtypes[i]) != np.dtype(self.flat_dtype):
                leaf = leaf.astype(self.dtypes[i])
            leaves.append(leaf)
            start += n
        return tree_unflatten(self.treedef, leaves)


def ravel_pytree(pytree):
    """Ravels every leaf of `pytree` (arrays and scalars) and concatenates them into one 1-D array, whose dtype
    is the promotion of the leaves' dtypes; returns ``(flat, unravel)``, where ``unravel(flat)`` rebuilds the tree
    with each leaf's shape and dtype. A tree without leaves gives ``(zeros((0,), float32), unravel)``."""
    leaves, treedef = tree_flatten(pytree)
    if not leaves:
        return knp.zeros((0,), np.float32), _Unravel(treedef, (), None, np.dtype(np.float32))
    leaves = [knp.asarray(leaf) for leaf in leaves]
    dtypes = [np.dtype(leaf.dtype) for leaf in leaves]
    flat_dtype = np.dtype(knp.result_type(*leaves))
    same = all(d == flat_dtype for d in dtypes)
    parts = [knp.reshape(leaf if same else leaf.astype(flat_dtype), (-1,)) for leaf in leaves]
    flat = parts[0] if len(parts) == 1 else knp.concatenate(parts)
    return flat, _Unravel(treedef, [tuple(leaf.shape) for leaf in leaves], None if same else dtypes, flat_dtype)
