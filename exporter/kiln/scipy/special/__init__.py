"""kiln.scipy.special: scipy.special's functions over kiln arrays (JAX's jax.scipy.special).

Every function is composed from kiln.numpy and kiln.lax operations, so it runs eagerly (numpy arrays in,
numpy arrays out), under kiln.jit and in exported modules alike. float16, bfloat16 and float32 inputs are
computed in float64 and rounded once to their own dtype; integer and bool inputs give float64 (float32 for
Python numbers in traced code, as JAX's weak types). docs/scipy.md states the accuracy of each function.
One module per family: _logsumexp, _logistic, _error, _gamma, _incomplete, _expint, _bessel, _elementary,
_integrals, _hypergeometric, _faddeeva (wofz, complex), _sph_harm (sph_harm_y, complex).
"""
from . import (
    _bessel, _elementary, _error, _expint, _faddeeva, _gamma, _hypergeometric, _incomplete, _integrals, _logistic,
    _logsumexp, _sph_harm,
)
from ._bessel import *  # noqa: F401,F403
from ._elementary import *  # noqa: F401,F403
from ._error import *  # noqa: F401,F403
from ._expint import *  # noqa: F401,F403
from ._faddeeva import *  # noqa: F401,F403
from ._gamma import *  # noqa: F401,F403
from ._hypergeometric import *  # noqa: F401,F403
from ._incomplete import *  # noqa: F401,F403
from ._integrals import *  # noqa: F401,F403
from ._logistic import *  # noqa: F401,F403
from ._logsumexp import *  # noqa: F401,F403
from ._sph_harm import *  # noqa: F401,F403

__all__ = [name for module in (_logsumexp, _logistic, _error, _gamma, _incomplete, _expint, _bessel, _elementary,
                                 _integrals, _hypergeometric, _faddeeva, _sph_harm)
           for name in module.__all__]
