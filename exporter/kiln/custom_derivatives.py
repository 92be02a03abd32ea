"""jax.custom_derivatives: kiln's custom_jvp and custom_vjp (kiln.transforms.custom, with JAX's symbolic_zeros
mode: SymbolicZero, CustomVJPPrimal, custom_vjp_primal_tree_values, zero_from_primal), linear_call
(kiln.transforms.linear_call) and custom_gradient (kiln.jax_api), under the module name JAX programs import them
from."""
import numpy as np

from kiln.core.pytree import tree_map
from kiln.jax_api import closure_convert, custom_gradient
from kiln.transforms.custom import CustomVJPPrimal, SymbolicZero, custom_jvp, custom_vjp
from kiln.transforms.linear_call import linear_call

__all__ = ["custom_jvp", "custom_vjp", "custom_gradient", "closure_convert", "SymbolicZero", "CustomVJPPrimal",
           "custom_vjp_primal_tree_values", "zero_from_primal", "linear_call"]


def custom_vjp_primal_tree_values(tree):
    """The tree a symbolic_zeros fwd rule received with each CustomVJPPrimal replaced by its value."""

    def value(leaf):
        if type(leaf) is not CustomVJPPrimal:
            raise TypeError(f"custom_vjp_primal_tree_values: unexpected leaf type {type(leaf)}")
        return leaf.value

    return tree_map(value, tree)


def zero_from_primal(value, symbolic_zeros: bool = False):
    """The zero tangent of each leaf of `value`: a SymbolicZero with symbolic_zeros, else a zero array of the
    leaf's tangent type."""

    def zero(x):
        z = SymbolicZero.from_primal_value(x)
        return z if symbolic_zeros else np.zeros(z.shape, z.dtype)

    return tree_map(zero, value)
