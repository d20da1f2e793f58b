"""``explain(op, a)``: the Plan dispatch would follow for this call, printable."""

from __future__ import annotations

from .compat._arrays import request
from .dispatch import OPS, Plan, choose


def explain(op: str, a, **options) -> Plan:
    """The plan hetlapack would follow for ``op`` (a SciPy or LAPACK name) on ``a``, with its reason and the
    predicted seconds of every candidate path.

    ``options`` are the call's own keywords that change the route (``pivoting=True``, ``lwork=...``, ``mode='raw'``).

    Examples
    --------
    >>> import numpy as np, hetlapack
    >>> print(hetlapack.explain("cholesky", np.eye(3)).path)
    host
    """
    if op not in OPS:
        raise ValueError(f"explain: unknown operation {op!r}; expected one of {', '.join(sorted(OPS))}")
    features = tuple(f"{key}={value!r}" if key != "lwork" else "lwork" for key, value in options.items()
                     if value not in (None, False, "full", "reduced", "economic", "r", "complete"))
    req, _ = request(OPS[op], a, features=features)
    return choose(req)
