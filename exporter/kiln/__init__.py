"""kiln: compile numpy-style Python array programs into deployable modules.

    from kiln import Program, jit
    import kiln.numpy as knp
"""
from . import lax, numpy
from .core.errors import CompileError, ConcretizationError, KilnError, NumpyOnTracerError, TracingError
from .core.pytree import register_pytree_node, tree_flatten, tree_leaves, tree_map, tree_unflatten
from .jit import jit
from .program import CompiledArtifact, Program
from .runtime_session import set_worker_count

__version__ = "0.1.0"

__all__ = [
    "Program", "CompiledArtifact", "jit", "lax", "numpy", "set_worker_count",
    "KilnError", "TracingError", "ConcretizationError", "NumpyOnTracerError", "CompileError",
    "register_pytree_node", "tree_flatten", "tree_leaves", "tree_map", "tree_unflatten",
]

from .transforms.api import grad, hessian, jacfwd, jacrev, jvp, stop_gradient, value_and_grad, vjp, vmap  # noqa: E402

from .transforms.custom import custom_jvp, custom_vjp  # noqa: E402

__all__ += ["grad", "value_and_grad", "jvp", "vjp", "jacfwd", "jacrev", "hessian", "vmap", "stop_gradient",
            "custom_jvp", "custom_vjp"]

from . import nn  # noqa: E402  (kiln.nn: activations, softmax, pooling helpers)
