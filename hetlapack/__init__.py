"""hetlapack: a drop-in, SciPy-compatible accelerated LAPACK.

``import hetlapack.linalg as la`` replaces ``import scipy.linalg as la``; the
factorizations are routed by :mod:`hetlapack.dispatch` to the host, batched,
tiled/hybrid or GPU paths.
"""
