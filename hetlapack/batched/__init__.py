"""Batched factorizations of many small matrices: lists of any sizes here, stacks of one size in :mod:`.kernels`.

- :func:`cholesky`, :func:`lu_factor`, :func:`qr`, :func:`cho_solve`, :func:`lu_solve` take sequences of matrices
  that may differ in shape and dtype (MAGMA's *vbatched*) and return SciPy's result for each (:mod:`.lists`);
- :mod:`.kernels` factors and solves stacks ``(..., m, n)`` in one call each (what dispatch's batched path runs), on
  kernels compiled by numba (:mod:`.compiling`) and spread over its threads (:mod:`.threads`); the ``cuda_*``
  modules do the same on a GPU, and :mod:`.precompile` fills numba's cache ahead of first use.
"""

from . import _cache

_cache.install()  # before any kernel is decorated: numba picks a function's cache locator then

from . import kernels  # noqa: E402
from .lists import cho_solve, cholesky, lu_factor, lu_solve, qr  # noqa: E402

__all__ = ["cho_solve", "cholesky", "kernels", "lu_factor", "lu_solve", "qr"]
