"""``explain(op, a)``: the Plan dispatch would follow for this call, printable."""

from __future__ import annotations

from numpy.typing import ArrayLike

from .compat.numpy_linalg import NUMPY_OPS, plan_of
from .compat.scipy_linalg import lu_features, plan_call, qr_route
from .contract.scipy_rules import QR_LWORK_DEFAULT, stack_loop
from .dispatch import OPS, Plan


def explain(op: str, a: ArrayLike, *, library: str = "scipy", mode: str | None = None, pivoting: bool = False,
            lwork=QR_LWORK_DEFAULT, check_finite: bool = True) -> Plan:
    """The plan hetlapack would follow for ``op`` (a SciPy or LAPACK name; with ``library="numpy"``, NumPy's
    ``"cholesky"`` or ``"qr"`` as ``hetlapack.compat.numpy_linalg`` runs them) on ``a``, with its reason and the
    predicted seconds of every candidate path.

    ``mode`` (default: the library's own), ``pivoting`` and ``lwork`` are ``qr``'s own keywords that change the
    route (they are ignored for the other operations; NumPy's ``qr`` has ``mode`` alone); ``lwork``'s default is the
    installed SciPy's. With ``check_finite=False`` the plan looks at ``a``'s values too, as the call does:
    infinities or NaNs go to SciPy's own call. NumPy's functions always look at them.

    Examples
    --------
    >>> import numpy as np, hetlapack
    >>> print(hetlapack.explain("cholesky", np.eye(3)).path)
    host
    >>> print(hetlapack.explain("qr", np.eye(3), library="numpy", mode="raw").reason)
    mode='raw': NumPy's own function
    """
    if library == "numpy":
        if op not in NUMPY_OPS:
            raise ValueError(f"explain: unknown NumPy function {op!r}; expected one of {', '.join(NUMPY_OPS)}")
        return plan_of(op, a, "reduced" if mode is None else mode)
    if library != "scipy":
        raise ValueError(f"explain: unknown library {library!r}; expected 'scipy' or 'numpy'")
    if not isinstance(op, str) or op not in OPS:
        raise ValueError(f"explain: unknown operation {op!r}; expected one of {', '.join(sorted(OPS))}")
    features, loop = (lu_features(a), stack_loop("lu")) if op == "lu" else ((), None)
    forms_q = False
    if op == "qr":
        op, features, forms_q = qr_route(a, "full" if mode is None else mode, pivoting, lwork)
    return plan_call(OPS[op], a, check_finite, features, loop, forms_q)[0]
