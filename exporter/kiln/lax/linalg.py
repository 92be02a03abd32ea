"""kiln.lax.linalg: the factorization primitives under JAX's lax.linalg names, batched over leading axes,
with JVP, transpose and batching rules, compiled into kernels (kiln writes the factorizations; no LAPACK).

The triangular family (cholesky, triangular_solve, lu) lives in _linalg_triangular, the orthogonal and
spectral one (qr, eigh, svd) in _linalg_spectral.
"""
from ._linalg_triangular import *  # noqa: F401,F403
from ._linalg_spectral import *  # noqa: F401,F403
from ._linalg_triangular import __all__ as _triangular_names
from ._linalg_spectral import __all__ as _spectral_names

__all__ = [*_triangular_names, *_spectral_names]
