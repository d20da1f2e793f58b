"""The host path: SciPy's own call, handed a Fortran-ordered copy where SciPy would make that copy the slow way.

SciPy's LAPACK wrappers (f2py) copy a C-ordered matrix into Fortran order before LAPACK sees it, element by
element: on a matrix larger than the cache every element of one of the two arrays is a cache miss, and the copy
costs a third of a Cholesky of order 4000 (issue 36). A copy made a cache tile at a time gives LAPACK the same
matrix, so SciPy's call on it, with ``overwrite_a=True``, returns SciPy's result to the bit, in the same layout.
"""

from __future__ import annotations

import numpy as np

from ..contract.arrays import copies_by_tiles, fortran_copy
from ..contract.originals import scipy_functions as _scipy
from ..contract.originals import scipy_matrix_functions as _scipy_matrix
from ..contract.scipy_rules import fortran_copy_unseen


def _plain_matrix(a) -> bool:
    """A 2-D ndarray (not a subclass) in a LAPACK dtype: what SciPy's call may be handed below its batch decorator,
    and in a Fortran copy of its own."""
    return type(a) is np.ndarray and a.ndim == 2 and a.dtype.char in "fdFD"


def _copies_slowly(a, overwrite_a) -> bool:
    """Whether SciPy would copy ``a`` into Fortran order itself, element by element, where tiles are worth it
    (:func:`copies_by_tiles`): a native, aligned plain matrix with a plain ``overwrite_a``."""
    return (_plain_matrix(a) and copies_by_tiles(a) and a.dtype.isnative and a.flags.aligned
            and type(overwrite_a) in (bool, int) and overwrite_a in (0, 1))


def scipy_call(name: str, a, overwrite_a, check_finite, **options):
    """SciPy's own ``name`` on ``a`` with these flags; on a Fortran-ordered copy made by :func:`fortran_copy` where
    SciPy would copy ``a`` slowly and that copy is all it would change (``fortran_copy_unseen``): the same
    result, layout, errors and warnings. Non-finite entries (``check_finite``) go to SciPy's call, for its error."""
    if _copies_slowly(a, overwrite_a) and fortran_copy_unseen(name, **options) and (
            not check_finite or np.isfinite(a).all()):
        return _scipy_matrix[name](fortran_copy(a), overwrite_a=True, check_finite=False, **options)
    call = _scipy_matrix[name] if _plain_matrix(a) else _scipy[name]
    return call(a, overwrite_a=overwrite_a, check_finite=check_finite, **options)
