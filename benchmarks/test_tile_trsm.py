"""The tile TRSM on one core: BLAS's ``?trsm`` on the whole triangle against ``lapack_pointers.trsm_by_halves``, for
the solves the tile algorithms make (Cholesky's panel, lower and upper; LU's row of U), float64, one BLAS thread as
the runtime's workers run it. Both rows of a group solve the same system, so their ratio is the tile path's gain.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE pytest benchmarks/test_tile_trsm.py --benchmark-only

``extra_info["gflops"]`` is ``b^3`` (a ``b x b`` right-hand side) over the best time.
"""

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from hetlapack.devices import lapack_pointers as lp

#: (name, side, uplo, trans, diag): the solves of the tile Cholesky (lower, and upper through its transposed
#: calls) and of the tile LU.
SOLVES = [("cholesky lower", "R", "L", "T", "N"), ("cholesky upper", "L", "U", "T", "N"),
          ("lu", "L", "L", "N", "U")]
TILES = [256, 384, 512]
KERNELS = {"blas": lp.trsm, "by halves": lp.trsm_by_halves}


@pytest.mark.parametrize("kernel", sorted(KERNELS))
@pytest.mark.parametrize("tile", TILES, ids=lambda b: f"b={b}")
@pytest.mark.parametrize("solve", SOLVES, ids=lambda s: s[0])
def test_tile_trsm(benchmark, solve, tile, kernel):
    name, side, uplo, trans, diag = solve
    rng = np.random.default_rng(0)
    triangle = np.asfortranarray(rng.standard_normal((tile, tile)) / tile + 2 * np.eye(tile))
    rhs = np.asfortranarray(rng.standard_normal((tile, tile)))
    work = rhs.copy(order="F")

    def setup():
        work[...] = rhs
        return (side, uplo, trans, diag, 1.0, triangle, work), {}

    benchmark.group = f"tile trsm {name} b={tile}"
    with threadpool_limits(1):
        benchmark.pedantic(KERNELS[kernel], setup=setup, rounds=30, warmup_rounds=2)
    benchmark.extra_info.update(b=tile, gflops=tile**3 / benchmark.stats.stats.min / 1e9)
