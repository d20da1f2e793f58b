"""What every path is: a :class:`Path` says whether it can run a request, on which devices, and runs the
factorizations LAPACK's way (in-place Fortran arrays, ``tau``, 0-based pivots and ``info`` codes, never SciPy's
errors: turning them into SciPy's or NumPy's results and errors is the shims' job)."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from ...contract.arrays import c_ordered_in_place, upper_trapezoid, working_copy
from ...imports import load, present
from ...options import Options

if TYPE_CHECKING:
    from ..plan import Plan


@dataclass(frozen=True)
class Request:
    """What dispatch needs to know of a call: the operation, the input's shape and dtype, features used, the
    library whose function was called (``"scipy"`` or ``"numpy"``: whose LAPACK its results are), how that
    function loops over a stack (``model.STACK_LOOP_S``'s kinds: the host path's price for a stack), the input's
    memory order (``"F"`` Fortran-contiguous, else ``"C"``: what SciPy's own call converts), and whether a QR also
    forms Q (``qr``'s economic and full modes, priced by their own timed call where calibration timed it)."""

    op: str
    shape: tuple[int, ...]
    dtype: np.dtype
    array_module: str = "numpy"
    features: tuple[str, ...] = ()
    device: str = "cpu"
    library: str = "scipy"
    stack_loop: str = "python"
    memory_order: str = "F"
    forms_q: bool = False

    @property
    def batch(self) -> int:
        """How many matrices: the product of the batch axes (1 for a single matrix)."""
        return math.prod(self.shape[:-2])

    @property
    def core(self) -> tuple[int, int]:
        """Rows and columns of each matrix."""
        return self.shape[-2], self.shape[-1]

    @property
    def scipy_input_order(self) -> str | None:
        """The memory order SciPy's own call on one matrix is priced at (its conversion of a C-ordered input
        costs it), or None where the host path's call is not SciPy's on one matrix (priced as LAPACK's)."""
        return self.memory_order if self.library == "scipy" and len(self.shape) == 2 else None


@dataclass(frozen=True)
class Unread:
    """An operand no copy of which is made before the factorization: ``source`` (converted from the caller's
    ``original``) read as it lies, by the tile algorithm's copy-in tasks, into a fresh Fortran-ordered array of
    ``dtype``."""

    source: np.ndarray
    original: object
    dtype: np.dtype

    @property
    def shape(self) -> tuple[int, ...]:
        """The operand's shape."""
        return self.source.shape

    def copy(self) -> np.ndarray:
        """The working copy the path would have made (for a plan with no host to run the copy-in tasks)."""
        return working_copy(self.source, self.original, self.dtype, False)


#: Operations the tile algorithms and the whole-matrix device routines implement.
TILED_OPS = frozenset({"potrf", "getrf", "geqrf"})


@functools.cache
def module_present(name: str) -> bool:
    """Whether module ``name`` can be imported (asked once per process: the search touches the file system)."""
    return present(name)


def one_matrix_refusal(req: Request) -> str | None:
    """Why a path that factors one whole matrix (hybrid, gpu) cannot take ``req`` for its shape or the features it
    asks for, or None."""
    if len(req.shape) > 2:
        return "it factorizes one matrix; stacks go to the batched or host path"
    if req.features:
        return f"{', '.join(req.features)} is implemented on the host path only"
    return None


def kind(device) -> str:
    """``"cpu"`` for the CPU (by name or object); an accelerator's kind or name otherwise."""
    return device.kind if hasattr(device, "kind") else device


class Path:
    """One way a factorization runs. Subclasses set ``name`` and implement the operations they have; an operation a
    path lacks raises ``NotImplementedError`` (dispatch never plans it there: :meth:`unavailable`)."""

    #: The name plans, ``explain`` and ``hetlapack.using(path=...)`` give the path.
    name: ClassVar[str]
    #: Whether the path is SciPy's (or NumPy's) own call, which the shims make themselves.
    own_call: ClassVar[bool] = False
    #: Whether its algorithm orders its arithmetic unlike LAPACK's: where an infinity or NaN meets a pivot search or
    #: a reflector there, its factors hold them in other places than SciPy's.
    reorders_arithmetic: ClassVar[bool] = False
    #: Whether it checks its input for infinities and NaNs where it reads it (``check_finite`` of its operations);
    #: the shims check first for the other paths.
    checks_where_read: ClassVar[bool] = False

    def __repr__(self) -> str:
        return f"<{self.name} path>"

    def unavailable(self, req: Request, options: Options, gpus: tuple[str, ...] | None) -> str | None:
        """Why this path cannot run ``req`` with these options and detected GPUs (``None``: not looked for), or
        None."""
        raise NotImplementedError

    def devices(self, options: Options, gpus: tuple[str, ...] | None) -> tuple:
        """The devices a plan on this path runs on: the user's, else the CPU."""
        return options.devices if options.devices is not None else ("cpu",)

    def operand(self, a1: np.ndarray, original, dtype: np.dtype, overwrite: bool) -> np.ndarray | Unread:
        """What this path factors for ``a1`` (converted from the caller's ``original``): a Fortran-ordered working
        copy in ``dtype``, ``a1`` itself where SciPy's rules let ``overwrite`` it. A path whose factorizations copy
        their operand in as they go returns an :class:`Unread` instead of a copy."""
        return working_copy(a1, original, dtype, overwrite)

    def _lacks(self, operation: str):
        return NotImplementedError(f"the {self.name} path has no {operation}")

    def potrf(self, plan: Plan, a: np.ndarray, lower: bool, clean: bool, fortran: bool = False,
              check_finite: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """Cholesky of ``a`` in its ``lower`` (or upper) triangle -> (c, info: the first leading minor, 1-based,
        that is not positive definite, per matrix; 0 where none). ``clean`` zeroes the other triangle; ``fortran``
        writes a stack's matrices Fortran-ordered (SciPy's layout) instead of C-ordered (NumPy's); ``check_finite``
        raises SciPy's ``ValueError`` for infinities and NaNs where the path reads them."""
        raise self._lacks("potrf")

    def getrf(self, plan: Plan, a: np.ndarray, fortran: bool = False,
              check_finite: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """LU with partial pivoting -> (lu, piv 0-based int32, info); flags as for :meth:`potrf`."""
        raise self._lacks("getrf")

    def lu(self, plan: Plan, a: np.ndarray, permute_l: bool, p_matrix: bool,
           check_finite: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``scipy.linalg.lu``'s pieces -> (row indices, or with ``p_matrix`` the permutation matrix; ``L``, or ``P
        L`` with ``permute_l``; ``U``), from :meth:`getrf`'s factors by the compiled pass that writes them."""
        packed, piv, _ = self.getrf(plan, a, check_finite=check_finite)
        return load("hetlapack.batched.kernels").plu(packed, piv, permute_l=permute_l, p_matrix=p_matrix)

    def geqrf(self, plan: Plan, a: np.ndarray, check_finite: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """Householder QR in LAPACK storage -> (qr, tau)."""
        raise self._lacks("geqrf")

    def orgqr(self, plan: Plan, qr: np.ndarray, tau: np.ndarray, ncols: int) -> np.ndarray:
        """The first ``ncols`` columns of Q from :meth:`geqrf`'s output."""
        raise self._lacks("orgqr")

    def qr(self, plan: Plan, a: np.ndarray, ncols: int, rows: int, fortran: bool = False,
           check_finite: bool = False, own: bool = False) -> tuple[np.ndarray | None, np.ndarray]:
        """Q's first ``ncols`` columns (``None`` for 0) and the first ``rows`` rows of R, from one factorization;
        ``own``: ``a`` is no caller's array, so R alone of a square matrix is made in the factorization's memory."""
        packed, tau = self.geqrf(plan, a, check_finite)
        if own and not ncols and packed.shape == (rows, rows) and packed.flags.f_contiguous:
            return None, c_ordered_in_place(packed, upper=True)
        r = upper_trapezoid(packed, rows)
        return (self.orgqr(plan, packed, tau, ncols) if ncols else None), r

    def qr_pivoted(self, plan: Plan, a: np.ndarray, ncols: int, rows: int, fortran: bool = False,
                   check_finite: bool = False) -> tuple[np.ndarray | None, np.ndarray, np.ndarray]:
        """:meth:`qr` with column pivoting, and the 0-based pivots."""
        raise self._lacks("geqp3")

    def potrs(self, plan: Plan, c: np.ndarray, b: np.ndarray, lower: bool) -> np.ndarray:
        """Solve with Cholesky factors, in SciPy's layout."""
        raise self._lacks("potrs")

    def getrs(self, plan: Plan, lu: np.ndarray, piv: np.ndarray, b: np.ndarray, trans: int,
              check_finite: bool = False) -> np.ndarray:
        """Solve with LU factors, in SciPy's layout; ``check_finite`` checks ``b`` as the kernel reads it."""
        raise self._lacks("getrs")
