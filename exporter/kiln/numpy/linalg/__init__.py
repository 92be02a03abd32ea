"""kiln.numpy.linalg: numpy.linalg's names with numpy.linalg's semantics (the last two axes are the
matrix; leading axes are a batch), eagerly, under kiln.jit and in exported modules.

The products live in kiln.numpy.products; the norms and matrix functions that need no factorization
in _matrix_functions; the triangular factorizations and what is built on them in _solve, the orthogonal
and spectral ones in _decompositions.
"""
from ..products import matmul, outer, tensordot  # noqa: F401
from ..shape import matrix_transpose  # noqa: F401
from ._matrix_functions import *  # noqa: F401,F403
from ._solve import *  # noqa: F401,F403
from ._decompositions import *  # noqa: F401,F403
from ._matrix_functions import __all__ as _matrix_names
from ._solve import __all__ as _solve_names
from ._decompositions import __all__ as _decomposition_names

__all__ = ["matmul", "outer", "tensordot", "matrix_transpose", *_matrix_names, *_solve_names, *_decomposition_names]

from ...core.array import wrap_namespace as _wrap_namespace  # noqa: E402

_wrap_namespace(globals())
