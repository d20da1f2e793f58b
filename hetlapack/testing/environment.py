"""Environment variables for child processes that tests and benchmarks start (``env={**os.environ, **...}``)."""

#: BLAS and OpenMP on one thread: children that run beside others, or many at once, never oversubscribe the cores.
ONE_BLAS_THREAD = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}

#: MPICH busy-polls while it waits; with more ranks than cores, waiting ranks must yield to the working one.
RANKS_YIELD = {"MPIR_CVAR_ENABLE_HEAVY_YIELD": "1"}
