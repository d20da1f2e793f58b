"""What SciPy and NumPy promise, which every path keeps: their own functions as captured at import
(:mod:`.originals`), their rules for operands, flags, qr modes and ``trans`` (:mod:`.arrays`), and their results,
errors and warnings (:mod:`.scipy_rules`). The shims, the batched kernels and the MPI layer share it."""
