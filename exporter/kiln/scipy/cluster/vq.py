"""kiln.scipy.cluster.vq: vq, each observation's nearest code (JAX's jax.scipy.cluster.vq)."""
from __future__ import annotations

import numpy as np

from ... import numpy as knp
from ...numpy._base import aval, promote_inexact

__all__ = ["vq"]


def vq(obs, code_book, check_finite=True):
    """(code, dist): for each row of obs (M, N) the index of the nearest row of code_book (K, N), the first
    on ties (int32, as scipy's and JAX's), and the Euclidean distance to it; 1-d arrays are observations and codes of length 1.
    check_finite is accepted and unused, as JAX's."""
    del check_finite
    obs, code_book = promote_inexact(obs, code_book)
    if aval(obs).ndim != aval(code_book).ndim:
        raise ValueError(f"vq: obs and code_book must have the same rank; got {aval(obs).ndim} and "
                         f"{aval(code_book).ndim}")
    if aval(obs).ndim == 1:
        obs, code_book = obs[:, None], code_book[:, None]
    if aval(obs).ndim != 2:
        raise ValueError(f"vq: obs and code_book must be 1-d or 2-d; got rank {aval(obs).ndim}")
    if aval(obs).shape[1] != aval(code_book).shape[1]:
        raise ValueError(f"vq: observations have {aval(obs).shape[1]} features and codes {aval(code_book).shape[1]}")
    distances = knp.sqrt(knp.sum((obs[:, None, :] - code_book[None, :, :]) ** 2, axis=-1))
    code = knp.argmin(distances, axis=-1)
    return code.astype(np.int32), knp.take_along_axis(distances, code[:, None], axis=-1)[:, 0]
