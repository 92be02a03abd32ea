"""kiln.numpy.linalg: numpy.linalg's names with numpy.linalg's semantics (the last two axes are the
matrix; leading axes are a batch), eagerly, under kiln.jit and in exported modules.

The products live in kiln.numpy.products; the norms and matrix functions that need no factorization
in _matrix_functions; the factorizations and what is built on them in _factorizations.
"""
from ..products import matmul, outer, tensordot  # noqa: F401
from ..shape import matrix_transpose  # noqa: F401
from ._matrix_functions import *  # noqa: F401,F403
from ._factorizations import *  # noqa: F401,F403
from ._matrix_functions import __all__ as _matrix_names
from ._factorizations import __all__ as _factorization_names

__all__ = ["matmul", "outer", "tensordot", "matrix_transpose", *_matrix_names, *_factorization_names]
