"""The interleaved chunk layout shared by every batched kernel (seed 004 §4.5).

Each thread gathers ``lanes`` matrices of the stack into a buffer ``buf[i, j, lane]`` (batch innermost) that stays
in cache, factorizes them there so that every elementary operation is one SIMD loop over the lanes, and scatters
the result back. Main memory therefore sees one read of the input and one write of the output: the roofline of
seed 004 §4.1. A partial last chunk is padded with identity matrices so padding lanes never report an error.
"""

from __future__ import annotations

import math

import numba
import numpy as np
from numba import types
from numba.extending import overload

from ..machine import l1_data_cache
from ._simd import WIDTH, imag_parts, load, magnitude, prefetch, real_parts, splat, store, subtract_product
from ._transpose import LINE_BYTES, SIZE, stream_rows, transpose_block, transpose_rows

#: Bytes of one thread's interleaved buffer: a quarter megabyte, half a core's L2 cache. Measured (1 thread,
#: float64): LU at n = 32 runs 1.7x faster with 32 lanes (256 KiB) than with 64, at n = 16 1.7x faster with 64
#: lanes than with 128; Cholesky and QR are within 10% across 32..128 lanes.
BUFFER_BYTES = 256 * 1024

#: Bounds on the matrices per buffer: at least one AVX-512 float32 vector's worth of lanes, and at most
#: ``MAX_LANE_BYTES`` of one element position across the lanes (32 float64 lanes, 64 float32). Measured (2 threads,
#: B = 1e5): float64 with 32 lanes beats 64 by 5-15% at n = 8..16 for every kernel (the strided gather and
#: scatter thrash L1 less), while float32 with 64 lanes beats 32 by 5-25% (its SIMD loops are half as long).
MIN_LANES, MAX_LANE_BYTES = 8, 256

#: Options of every compiled kernel: cached on disk (first call compiles once per machine), GIL released, FMA
#: contraction allowed (it only changes rounding, as LAPACK's own FMA-using BLAS does), and IEEE division (a zero
#: divisor gives an infinity or NaN, as in LAPACK, not a Python exception).
JIT_OPTIONS = {"cache": True, "nogil": True, "fastmath": {"contract"}, "error_model": "numpy"}

# Helpers a kernel calls per column or matrix (QR's norms and reflectors per lane, LU's pivot search and swaps, the
# replays' products) are compiled with ``inline="always"`` (inlined in numba's IR): a call of a compiled function
# counts references to every array it passes, atomic operations that cost more than the arithmetic of small orders
# (float64, B = 10^4, ns a matrix, called / inlined: QR n = 2 31 / 12, n = 8 125 / 81; LU n = 2 11.7 / 7.0). The
# gathers and scatters, called once per chunk, stay calls: inlined everywhere they had made compiling every kernel
# take 1,698 s of one core instead of 695, for gains within the spread. QR's loops over the lanes for a chunk
# (``_factor_chunk``, ``_build_q_chunk``) are compiled once and inlined by LLVM (``forceinline``), not in numba's IR:
# ``qr`` compiles in 42 s for float64 instead of 82, 23 for complex128 instead of 50, and runs 3-9% slower at
# n = 2-4 (B = 10^4), within 1% from n = 8, bitwise the same. As plain calls they lose the compiler's knowledge that
# the buffers do not overlap (complex128 n = 2: 54 ns a matrix against 39). QR's code on SIMD vectors for a chunk
# (``_qr._qr_vector``) is a plain call: its explicit loads and stores need no such knowledge, and inlined into the
# kernel beside the loops over the lanes it made numba's SSA checks warn 171 times. A thread's share of the chunks, one
# function called with each small order as a constant, is inlined into the parallel loop where that compiles faster
# and a call where that does (seconds to compile one dtype, one process, a call / inlined: getrf 77 / 64, potrf
# 46 / 39; the replays' 83 / 113 and 99 / 131); the machine code runs as fast either way.


#: Matrices per buffer of the Householder kernels (the fused real QR's from order 8 or 12: one vector of them,
#: ``threads``' ``_VECTOR_FROM_ORDER``). Their inner loops are short (one reflector against one column) and the loop
#: overhead, not the cache, bounds them: measured (2 threads, ``kernels.qr``, ns per matrix at 32 / 64 / 128 lanes),
#: float64 n = 32 11,278 / 9,879 / 8,811, n = 64 94,303 (32 lanes) / 84,168 / 74,520, float32 n = 32 7,776 / 4,783 /
#: 5,007; n <= 16 within 10% either way. ``geqrf`` alone at float64 n = 64: 87,339 ns with 8 lanes (the cache rule's),
#: 33,762 with 128.
WIDE_LANES = 128

#: Square orders up to ``SMALL_ORDER`` take ``SMALL_ORDER_LANES`` matrices per buffer in kernels with a version
#: compiled for each such order (``_lu.getrf_stack`` and ``_cholesky.potrf_stack`` list them), but where those
#: versions run on one vector of matrices (``SMALL_ORDER_VECTOR``): with constant loop bounds the compiler unrolls
#: the loops over the matrix and keeps the lanes in registers. Measured (LU, 2 threads, float64, ns per matrix):
#: 21 -> 8 at n = 2, 52 -> 29 at n = 3, 72 -> 45 at n = 4; none from n = 8.
SMALL_ORDER, SMALL_ORDER_LANES = 4, 32

#: Kernels whose versions for the small orders run on one vector of matrices, by dtype kind, from which order (up to
#: ``SMALL_ORDER``): complex LU on split vectors (``_lu._factor_split``) from order 2, the single-precision LU replay
#: (``_lu_replay._replay_vector``) from order 3. Measured against their loops over 32 lanes (2 threads, 10^4 / 10^5
#: matrices, ns a matrix, old / new alternating in one process): complex128 n = 2 46 / 44 and 53 / 47, n = 3 73 / 63
#: and 90 / 76, n = 4 117 / 94 and 128 / 98; float32 n = 3 34 / 31 and 32 / 29, n = 4 64 / 48 and 55 / 48, but n = 2
#: 16-22 / 20-25 and 14-15 / 18 (the chunk's fixed costs over 8 matrices instead of 32). Order 1 keeps the loops
#: over lanes: 31 ns a matrix against 44 on one vector (complex128, 10^4 matrices). Real LU (``_lu._factor_vector``)
#: from order 4: float64, 10^4 / 10^5 matrices, ``lu_factor`` n = 4 29-33 / 31-33 -> 26-27 / 26, ``lu`` 42-43 / 42 ->
#: 38-40 / 38; at n = 3 the loops stay faster (``lu_factor`` 19 / 15-16 against 21 / 20).
SMALL_ORDER_VECTOR = {"getrf": {"c": 2, "f": 4}, "getrf_replay": {"f": 3}}


def small_order_lanes(op: str, kind: str, order: int) -> int:
    """Matrices per buffer of kernel ``op``'s version compiled for square ``order`` (up to ``SMALL_ORDER``) in the
    dtype of ``kind`` (NumPy's dtype kind): one vector (``WIDTH``) from the order ``SMALL_ORDER_VECTOR`` gives, else
    ``SMALL_ORDER_LANES``. The one rule that the launch (``threads.kernel_lanes``) and the kernels' branches into
    those versions read: where the two disagreed, a stack would silently run the general kernel."""
    return WIDTH if order >= SMALL_ORDER_VECTOR.get(op, {}).get(kind, SMALL_ORDER + 1) else SMALL_ORDER_LANES


def lanes_for(m: int, n: int, itemsize: int, batch: int, wide: bool = False, small_order: bool = False,
              lanes: int | None = None) -> int:
    """Matrices per interleaved buffer for a batch of ``m x n`` matrices: ``lanes`` where given (a measured
    choice), else ``WIDE_LANES`` for ``wide`` kernels, ``SMALL_ORDER_LANES`` for square orders up to
    ``SMALL_ORDER`` in ``small_order`` kernels (those with versions compiled per order), else as many as fit
    ``BUFFER_BYTES`` (a multiple of 8) within ``MIN_LANES`` and ``MAX_LANE_BYTES``; never more than the batch needs
    (rounded up to 8), so a small batch does not factor a buffer of identity padding."""
    if lanes is None and small_order and m == n <= SMALL_ORDER:
        lanes = SMALL_ORDER_LANES
    if lanes is None:
        fitting = BUFFER_BYTES // max(m * n * itemsize, 1) // 8 * 8
        lanes = WIDE_LANES if wide else min(max(fitting, MIN_LANES), max(MAX_LANE_BYTES // itemsize, MIN_LANES))
    return int(min(lanes, max(MIN_LANES, -(-batch // 8) * 8)))


@numba.njit(**JIT_OPTIONS)
def chunk_range(thread: int, threads: int, chunks: int) -> tuple[int, int]:
    """The contiguous run of chunks a thread owns (a static split: every chunk costs the same)."""
    per, extra = divmod(chunks, threads)
    start = thread * per + min(thread, extra)
    return start, start + per + (1 if thread < extra else 0)


#: Matrices and elements moved per block by the blocked copies: eight matrices' runs of eight elements along memory
#: become eight elements' runs of eight lanes, so that reads and writes both run along cache lines.
BLOCK = SIZE

#: Bytes of buffer beyond which :func:`gather` and :func:`scatter` copy full chunks in blocks even where the blocks
#: cannot be transposed in registers (strided views, short runs): this machine's L1 data
#: cache. Where they can, blocks win at every size: gather and scatter alone, 1 thread, float64, ns per element, in
#: cache / from memory, element by element -> blocks in registers: n = 8 (64 lanes) 0.67 / 0.77 -> 0.31 / 0.43,
#: n = 16 (32 lanes, blocks element by element 0.77 / 1.16) -> 0.27 / 0.89. An element-by-element copy of a buffer
#: beyond the L1 cache touches a new cache line per element on one side and evicts what it wrote before it is
#: filled. Measured (1 thread, float64, B = 10,000, gather and scatter of each
#: chunk, ns per matrix, plain / 8 x 8 blocks, L1 of 32 KiB): n = 16 with 16 lanes (32 KiB) 242 / 343, with 32 lanes
#: (64 KiB) 537 / 379; n = 24 (16 lanes) 1,150 / 609; n = 32 (16 lanes) 2,021 / 989; n = 48 (8 lanes) 4,387 / 1,682;
#: n = 64 (8 lanes) 7,090 / 3,077; 4 x 4 blocks ran 1.2-1.6x slower than 8 x 8 from n = 24. Read when the kernels
#: compile; numba's disk cache keeps a version per CPU model.
BLOCKED_MIN_BYTES = l1_data_cache()[0]


@numba.njit(**JIT_OPTIONS)
def blocked(stack, count: int, m: int, n: int, lanes: int) -> bool:
    """Whether a chunk of ``stack`` (the input of a gather, the output of a scatter) is copied in blocks: a full
    chunk of whole blocks of lanes, whose matrices' runs along memory hold a block and lie next to one another (their
    blocks are transposed in registers: :func:`copy_blocks`), or whose buffer exceeds the L1 cache."""
    along_rows = rows_along_memory(stack)
    runs = stack.strides[2] if along_rows else stack.strides[1]
    in_registers = runs == stack.itemsize and (n if along_rows else m) >= BLOCK
    buffer_bytes = m * n * lanes * stack.itemsize
    return count == lanes and lanes % BLOCK == 0 and (in_registers or buffer_bytes > BLOCKED_MIN_BYTES)


@numba.njit(**JIT_OPTIONS)
def rows_along_memory(stack) -> bool:
    """Whether the matrices of a 3-D stack lie row by row (C order) rather than column by column."""
    return stack.strides[2] <= stack.strides[1]


#: Which places of each row a blocked copy moves: the whole row, or the lower or upper triangle's (diagonal included).
WHOLE, LOWER, UPPER = 0, 1, 2


@numba.njit(**JIT_OPTIONS)
def _row_span(part: int, i: int, n: int) -> tuple[int, int]:
    """The columns of row ``i`` (of ``n``) that a blocked copy of ``part`` moves."""
    if part == LOWER:
        return 0, i + 1
    if part == UPPER:
        return i, n
    return 0, n


@numba.njit(**JIT_OPTIONS)
def copy_blocks(stack, buf, m: int, n: int, lanes: int, part: int = WHOLE, conjugate: bool = False) -> None:
    """``buf[i, j, lane] = stack[lane, i, j]`` over each row's ``part`` for a full chunk, conjugated if
    ``conjugate``, in blocks against the axis ``j`` of ``stack``, which is to lie along memory. A scatter is the same
    copy with the roles swapped: the buffer seen as a stack (:func:`buffer_as_stack`), the output's chunk as a
    buffer (:func:`chunk_as_buffer`). Where eight elements of each side lie along memory (the stack's rows and the
    buffer's lanes, as a gather sees them, or the stack's lanes and the buffer's rows, as a scatter does), a whole
    block is transposed in SIMD registers (:func:`~._transpose.transpose_block`)."""
    item = stack.itemsize
    rows_of_matrices = stack.strides[2] == item and buf.strides[2] == item
    rows_of_lanes = stack.strides[0] == item and buf.strides[1] == item
    in_registers = rows_of_matrices or rows_of_lanes
    for lane0 in range(0, lanes, BLOCK):
        for i in range(m):
            start, stop = _row_span(part, i, n)
            whole = stop - (stop - start) % BLOCK
            for j0 in range(start, whole, BLOCK):
                if in_registers:
                    source = lane0 * stack.strides[0] + i * stack.strides[1] + j0 * stack.strides[2]
                    target = i * buf.strides[0] + j0 * buf.strides[1] + lane0 * buf.strides[2]
                    if rows_of_matrices:
                        transpose_block(stack, source, stack.strides[0], buf, target, buf.strides[1], conjugate)
                    else:
                        transpose_block(stack, source, stack.strides[2], buf, target, buf.strides[2], conjugate)
                    continue
                for w in range(BLOCK):
                    for q in range(BLOCK):
                        value = stack[lane0 + w, i, j0 + q]
                        buf[i, j0 + q, lane0 + w] = np.conj(value) if conjugate else value
            for j in range(whole, stop):
                for w in range(BLOCK):
                    value = stack[lane0 + w, i, j]
                    buf[i, j, lane0 + w] = np.conj(value) if conjugate else value


@numba.njit(**JIT_OPTIONS)
def copy_blocks_along(stack, buf, m: int, n: int, lanes: int, along_rows: bool, part: int = WHOLE,
                      conjugate: bool = False) -> None:
    """:func:`copy_blocks` with its inner loop along the rows of the matrices (``along_rows``: the side that lies
    along memory has its rows there) or along their columns (both sides transposed, the part mirrored)."""
    if along_rows:
        copy_blocks(stack, buf, m, n, lanes, part, conjugate)
    else:
        mirrored = UPPER if part == LOWER else LOWER if part == UPPER else WHOLE
        copy_blocks(permuted(stack, 0, 2, 1), permuted(buf, 1, 0, 2), n, m, lanes, mirrored, conjugate)


@numba.njit(**JIT_OPTIONS, inline="always")
def permuted(array, first: int, second: int, third: int):
    """``array.transpose(first, second, third)`` of a 3-D array: the same view, without the check of the axes that
    numba makes at run time in a set it allocates (0.2 µs a call: half the cost of a scatter of eight matrices of
    order 8, whose views took two)."""
    shape, strides = array.shape, array.strides
    return np.lib.stride_tricks.as_strided(array, shape=(shape[first], shape[second], shape[third]),
                                           strides=(strides[first], strides[second], strides[third]))


@numba.njit(**JIT_OPTIONS)
def buffer_as_stack(buf):
    """The ``m x n x lanes`` buffer seen as a ``lanes x m x n`` stack (a view)."""
    return permuted(buf, 2, 0, 1)


@numba.njit(**JIT_OPTIONS)
def chunk_as_buffer(stack, first: int, lanes: int):
    """Matrices ``stack[first:first + lanes]`` seen as an ``m x n x lanes`` buffer (a view)."""
    return permuted(stack[first:first + lanes], 1, 2, 0)


#: Bytes of a buffer row at whose multiples :func:`padded_width` adds a column: rows two apart then lie 4 KiB apart,
#: and a load waits on an earlier store whose address ends in the same 12 bits. Measured (one vector of 8 float64
#: matrices, in cache, 1 thread, ns a matrix, rows of n / n + 1 elements): fused QR n = 32 (2 KiB rows) 6,196 /
#: 3,672, n = 16 (1 KiB) 568 / 596, n = 24 1,515 / 1,634; LU n = 32 2,822 / 2,174.
ALIASED_ROW_BYTES = 2048


def padded_width(a, n: int, lanes: int) -> int:
    """Elements per row of a buffer of ``lanes`` matrices of the dtype of ``a`` with ``n`` columns: one more where the
    buffer is one vector of real matrices and a row is a multiple of ``ALIASED_ROW_BYTES``, so that rows two apart do
    not share the low 12 bits of their addresses (a load then waits on the store to a row two above it, 4K aliasing).
    Complex buffers are never padded: the split kernels (``_split_complex``) address their words as one run."""


@overload(padded_width, jit_options=JIT_OPTIONS, inline="always")
def _padded_width_for(a, n, lanes):
    if isinstance(a.dtype, types.Complex):
        return lambda a, n, lanes: n

    def width(a, n, lanes):
        if lanes == WIDTH and (n * lanes * a.itemsize) % ALIASED_ROW_BYTES == 0:
            return n + 1
        return n

    return width


@numba.njit(**JIT_OPTIONS, inline="always")
def on_cache_lines(shape, dtype):
    """Zeros of ``shape`` (a tuple) and ``dtype`` starting on a cache line: every buffer a kernel works in comes from
    here. numba aligns its arrays to 32 bytes only, and in a buffer 32 bytes off a line every 64-byte vector of an
    AVX-512 register straddles two lines (fused QR of one vector of float64 matrices of order 32 in cache, one
    thread, on a line / 32 bytes off: 2,996-3,002 / 3,057-3,073 ns a matrix)."""
    size = 1
    for extent in shape:
        size *= extent
    flat = np.zeros(size + LINE_BYTES, dtype=dtype)  # LINE_BYTES elements: at least a line, whatever the item size
    skip = (-flat.ctypes.data % LINE_BYTES) // flat.itemsize
    return flat[skip:skip + size].reshape(shape)


@numba.njit(**JIT_OPTIONS, inline="always")
def chunk_buffer(like, m: int, n: int, lanes: int):
    """:func:`on_cache_lines` for ``lanes`` interleaved ``m x n`` matrices of the dtype of ``like``, rows padded
    where :func:`padded_width` says (the padding stays zero)."""
    return on_cache_lines((m, padded_width(like, n, lanes), lanes), like.dtype)


#: How the matrices of a stack lie (:func:`record_order`): one after another, each by rows (C-ordered) or by columns
#: (Fortran-ordered), or neither.
BY_ROWS, BY_COLUMNS, NEITHER = 0, 1, -1


@numba.njit(**JIT_OPTIONS, inline="always")
def record_order(stack, m: int, n: int) -> int:
    """:data:`BY_ROWS` or :data:`BY_COLUMNS` where the ``m x n`` matrices of a 3-D stack lie one after another (each
    a record of ``m n`` numbers), C- or Fortran-ordered, else :data:`NEITHER` (C order where both hold, a matrix of
    one row or column)."""
    item = stack.itemsize
    if stack.strides[0] != m * n * item:
        return NEITHER
    if (n == 1 or stack.strides[2] == item) and (m == 1 or stack.strides[1] == n * item):
        return BY_ROWS
    if (m == 1 or stack.strides[1] == item) and (n == 1 or stack.strides[2] == m * item):
        return BY_COLUMNS
    return NEITHER


@numba.njit(**JIT_OPTIONS)
def in_records(stack, buf, count: int, m: int, n: int, lanes: int) -> int:
    """How a full chunk of ``stack`` (a gather's input, a scatter's output) is copied as records
    (:func:`record_order`; :data:`NEITHER` where it is not): its matrices one after another, the buffer's rows ``n``
    numbers wide (not padded), so that the chunk is a ``lanes x m n`` matrix whose blocks of eight are transposed in
    registers to and from the buffer's rows (:func:`copy_records`). Below order 8 a matrix's rows are too short for
    a block of their own, and its numbers moved one at a time cost a kernel of order 4 a third of its time (float32
    LU replay, one thread, 10^4 matrices: gather and scatter 16 of 53 ns a matrix)."""
    if count == lanes and lanes % BLOCK == 0 and m * n >= BLOCK and buf.shape[1] == n:
        return record_order(stack, m, n)
    return NEITHER


@numba.njit(**JIT_OPTIONS, inline="always")
def _place_row(p: int, order: int, m: int, n: int) -> int:
    """The buffer row (of lanes, ``i n + j``) of place ``p`` of a record laid by rows or by columns."""
    return p if order == BY_ROWS else (p % m) * n + p // m


@numba.njit(**JIT_OPTIONS, inline="always")
def _column_place(i: int, j: int, t: int, m: int, n: int) -> int:
    """The buffer row (:func:`_place_row`) of the place ``t`` (below 8) after row ``i``, column ``j`` of a record
    laid by columns of at least 8 rows (so at most one column further on)."""
    return (i + t) * n + j if i + t < m else (i + t - m) * n + j + 1


@numba.njit(**JIT_OPTIONS, inline="always")
def _place_rows(p: int, i: int, j: int, order: int, m: int, n: int):
    """The buffer rows (:func:`_place_row`) of places ``p`` to ``p + 7`` of a record laid in ``order``; laid by
    columns of at least 8 rows, counted on from place ``p``'s row and column (``i``, ``j``) instead of divided out.
    With a division for each place (the sizes are not constants from order 5), copying Fortran-ordered records took
    1.4-1.8x as long as C-ordered ones; scattering 10^4 float64 matrices, one thread, ns a matrix, C / Fortran before
    / Fortran now: n = 16 125 / 172-221 / 117-168, n = 32 606-615 / 920-961 / 688-799."""
    if order == BY_COLUMNS and m >= BLOCK:
        return (_column_place(i, j, 0, m, n), _column_place(i, j, 1, m, n), _column_place(i, j, 2, m, n),
                _column_place(i, j, 3, m, n), _column_place(i, j, 4, m, n), _column_place(i, j, 5, m, n),
                _column_place(i, j, 6, m, n), _column_place(i, j, 7, m, n))
    return (_place_row(p, order, m, n), _place_row(p + 1, order, m, n), _place_row(p + 2, order, m, n),
            _place_row(p + 3, order, m, n), _place_row(p + 4, order, m, n), _place_row(p + 5, order, m, n),
            _place_row(p + 6, order, m, n), _place_row(p + 7, order, m, n))


@numba.njit(**JIT_OPTIONS, inline="always")
def streams_into(stack, stream: bool, span: int) -> bool:
    """Whether :func:`copy_records` writes records of ``span`` bytes into ``stack`` with streaming stores: asked to
    (``stream``), and every run of eight numbers starts on a cache line (the stack's data and its records do), as a
    streaming store of a whole vector needs."""
    return stream and stack.ctypes.data % LINE_BYTES == 0 and span % LINE_BYTES == 0


@numba.njit(**JIT_OPTIONS, inline="always")
def copy_records(stack, first: int, buf, m: int, n: int, lanes: int, order: int, into_buffer: bool,
                 conjugate: bool = False, transposed: bool = False, stream: bool = False) -> None:
    """Copy matrices ``first`` to ``first + lanes`` of ``stack``, records laid in ``order``, into ``buf``
    (``into_buffer``), or back, conjugated if ``conjugate``, and transposed if ``transposed`` (square matrices: the
    buffer holds each matrix's transpose): eight records' runs of eight numbers at a time transposed in registers,
    each run to or from the eight buffer rows of its places (:func:`~._transpose.transpose_rows`), the last ``m n
    mod 8`` numbers of each record one by one. Offsets worked out here, not views (a view made per chunk costs its
    reference counts, which at one vector of matrices per chunk took more than the copy). Back into a stack whose
    runs start on cache lines (:func:`streams_into`), ``stream`` writes them with streaming stores."""
    item, size = stack.itemsize, m * n
    streaming = not into_buffer and streams_into(stack, stream, size * item)
    whole = size - size % BLOCK
    span, width = size * item, lanes * item
    placed = order if not transposed else BY_COLUMNS + BY_ROWS - order
    for lane0 in range(0, lanes, BLOCK):
        at = (first + lane0) * span
        records = (at, at + span, at + 2 * span, at + 3 * span, at + 4 * span, at + 5 * span, at + 6 * span,
                   at + 7 * span)
        i, j = 0, 0
        for j0 in range(0, whole, BLOCK):
            places = _place_rows(j0, i, j, placed, m, n)
            i += BLOCK
            while i >= m:  # (i, j): place j0 + 8's row and column in a record laid by columns
                i, j = i - m, j + 1
            rows = (places[0] * width + lane0 * item, places[1] * width + lane0 * item,
                    places[2] * width + lane0 * item, places[3] * width + lane0 * item,
                    places[4] * width + lane0 * item, places[5] * width + lane0 * item,
                    places[6] * width + lane0 * item, places[7] * width + lane0 * item)
            runs = (records[0] + j0 * item, records[1] + j0 * item, records[2] + j0 * item, records[3] + j0 * item,
                    records[4] + j0 * item, records[5] + j0 * item, records[6] + j0 * item, records[7] + j0 * item)
            if into_buffer:
                transpose_rows(stack, runs, buf, rows, conjugate)
            elif streaming:
                stream_rows(buf, rows, stack, runs, conjugate)
            else:
                transpose_rows(buf, rows, stack, runs, conjugate)
        for p in range(whole, size):
            place = _place_row(p, order, m, n)
            i, j = place // n, place % n
            r, c = (j, i) if transposed else (i, j)
            for w in range(BLOCK):
                if into_buffer:
                    value = stack[first + lane0 + w, i, j]
                    buf[r, c, lane0 + w] = np.conj(value) if conjugate else value
                else:
                    value = buf[r, c, lane0 + w]
                    stack[first + lane0 + w, i, j] = np.conj(value) if conjugate else value


#: Bytes of a chunk's buffer up to which a kernel asks for the next chunk a slice at each step of its factorization
#: (:func:`prefetch_slice`) instead of all at once as it gathers and scatters (:func:`prefetch_next`), where
#: ``hetlapack calibrate`` timed neither (``threads.spread_limit``): half this machine's L1 data cache. All at once,
#: 64-256 lines are asked for in a row, more than the core keeps in flight, and main memory then idles while the
#: chunk is factored. Measured (float64 ``lu_factor``, 2 threads, AMD EPYC with a 32 KiB L1, ns a matrix, best of 3,
#: four alternating processes, all at once -> a slice a step): 10^5 matrices of order 8 (4 KiB buffers) 104-120 ->
#: 85-87, order 16 (16 KiB) 348-373 -> 313-316; 10^4 of order 16 352-421 -> 292-317; but order 32 (64 KiB) 1,270-1,355
#: -> 1,462-1,533. On a Zen 5 EPYC (48 KiB L1, 1 MiB L2) slices won up to order 48 (QR of order 32 1,347-1,407 ->
#: 1,201-1,247 ns): the kernels take the bytes as an argument, which calibration measures.
SPREAD_MAX_BYTES = BLOCKED_MIN_BYTES // 2


@numba.njit(**JIT_OPTIONS, inline="always")
def prefetch_next(stack, first: int, lanes: int, m: int, n: int, for_writing: bool) -> None:
    """Ask the caches for the matrices of the chunk after the one at ``first``, where a stack's matrices lie one
    after another: read (or, ``for_writing``, owned) while this chunk is factored, so that main memory's latency
    passes behind the arithmetic instead of before it."""
    prefetch_slice(stack, first, lanes, m, n, 0, 1, for_writing)


@numba.njit(**JIT_OPTIONS, inline="always")
def prefetch_slice(stack, first: int, lanes: int, m: int, n: int, part: int, parts: int, for_writing: bool) -> None:
    """:func:`prefetch_next` for slice ``part`` of ``parts`` of the next chunk's lines: a kernel that calls it at
    each of ``parts`` steps keeps main memory busy while it factors (:data:`SPREAD_MAX_BYTES`)."""
    if record_order(stack, m, n) == NEITHER:
        return
    span = m * n * stack.itemsize
    low, high = slice_bytes((first + lanes) * span, min(first + 2 * lanes, stack.shape[0]) * span, part, parts)
    for at in range(low, high, LINE_BYTES):
        prefetch(stack, at, for_writing)


@numba.njit(**JIT_OPTIONS, inline="always")
def slice_bytes(begin: int, end: int, part: int, parts: int) -> tuple[int, int]:
    """The bytes ``[low, high)`` of slice ``part`` of ``parts`` of ``[begin, end)`` (none where ``end <= begin``), cut
    at cache lines: the slices' lines, one after another, are each line of the range once."""
    lines = -(-max(end - begin, 0) // LINE_BYTES)
    return begin + lines * part // parts * LINE_BYTES, min(begin + lines * (part + 1) // parts * LINE_BYTES, end)


def spreads_prefetch(buf, lanes, spread_bytes):
    """Whether a chunk's kernel asks for the chunk after the one in ``buf`` a slice a step (:func:`prefetch_slice`),
    so that its gather and scatter ask for nothing at once: one vector of real matrices (where ``_lu._factor`` and
    ``_qr._qr_in_chunk`` run their kernels on ``_simd`` vectors, the ones that take the slices; complex LU's split
    vectors do not) within ``spread_bytes`` (:data:`SPREAD_MAX_BYTES` or calibration's)."""


@overload(spreads_prefetch, jit_options=JIT_OPTIONS)
def _spreads_prefetch_for(buf, lanes, spread_bytes):
    real = not isinstance(buf.dtype, types.Complex)
    return lambda buf, lanes, spread_bytes: real and lanes == WIDTH and buf.size * buf.itemsize <= spread_bytes


@numba.njit(**JIT_OPTIONS)
def gather(a, first: int, buf, m: int, n: int, lanes: int, ahead: bool = True) -> int:
    """Copy matrices ``a[first:first + lanes]`` into the ``m x n x lanes`` buffer ``buf[i, j, lane]``; pad missing
    lanes with identity. Full chunks in a buffer beyond the L1 cache (``BLOCKED_MIN_BYTES``) are copied in blocks,
    along rows or columns as the matrices lie. The sizes are arguments, not read from the arrays, so that a caller
    that knows them as constants gets a version compiled for them. The next chunk is asked for (:func:`prefetch_next`)
    unless ``ahead`` is false (a kernel that asks for it a slice a step).

    Returns the number of real lanes.
    """
    count = min(lanes, a.shape[0] - first)
    if ahead:
        prefetch_next(a, first, lanes, m, n, False)
    order = in_records(a, buf, count, m, n, lanes)
    if order != NEITHER:
        copy_records(a, first, buf, m, n, lanes, order, True)
        return count
    if blocked(a, count, m, n, lanes):
        copy_blocks_along(a[first:first + lanes], buf, m, n, lanes, rows_along_memory(a))
        return count
    for lane in range(count):
        for i in range(m):
            for j in range(n):
                buf[i, j, lane] = a[first + lane, i, j]
    for lane in range(count, lanes):
        for i in range(m):
            for j in range(n):
                buf[i, j, lane] = 1.0 if i == j else 0.0
    return count


@numba.njit(**JIT_OPTIONS)
def scatter(buf, count: int, out, first: int, m: int, n: int, ahead: bool = True, stream: bool = False) -> None:
    """Copy the first ``count`` lanes of the ``m x n`` matrices in ``buf`` back to ``out[first + lane]`` (in blocks
    as :func:`gather` copies them), the next chunk's asked for as :func:`gather` asks; with streaming stores where
    ``stream`` and the records allow (:func:`copy_records`), and then nothing asked for: a line asked for is read."""
    lanes = buf.shape[2]
    if ahead and not stream:
        prefetch_next(out, first, lanes, m, n, True)
    order = in_records(out, buf, count, m, n, lanes)
    if order != NEITHER:
        copy_records(out, first, buf, m, n, lanes, order, False, stream=stream)
        return
    if blocked(out, count, m, n, lanes):
        copy_blocks_along(buffer_as_stack(buf), chunk_as_buffer(out, first, lanes), m, n, lanes, rows_along_memory(out))
        return
    for lane in range(count):
        for i in range(m):
            for j in range(n):
                out[first + lane, i, j] = buf[i, j, lane]


@numba.njit(**JIT_OPTIONS)
def is_finite(value) -> bool:
    """Whether a real or complex number is finite, without a branch: ``x - x`` is 0 for finite ``x`` and NaN for
    infinities and NaNs, real and imaginary parts alike."""
    return (value - value) == 0


@numba.njit(**JIT_OPTIONS, inline="always")
def _poison_each_lane(buf, poison, m, n, lanes):
    """``poison[lane]``: 0 where lane's matrix in the buffer is finite, NaN where it holds an infinity or NaN
    (``|x| * 0`` is zero only for finite ``x``: one vector pass over the buffer while it is in cache)."""
    for lane in range(lanes):
        poison[lane] = 0
    for i in range(m):
        for j in range(n):
            for lane in range(lanes):
                poison[lane] += (abs(buf[i, j, lane].real) + abs(buf[i, j, lane].imag)) * 0


@numba.njit(**JIT_OPTIONS, inline="always")
def _poison_vector(buf, poison, m, n):
    """:func:`_poison_each_lane` on SIMD vectors, for a buffer of one vector of real matrices (there the loop over
    the lanes is too short for the compiler's own vector loop, and cost a quarter of LU's factorization at n = 16),
    in four independent sums of zeros or NaNs, whose order changes nothing."""
    poison[0] = 0
    zero = splat(poison[0])  # a zero of the buffer's type
    sum0 = sum1 = sum2 = sum3 = zero
    size, step = m * n * WIDTH, 4 * WIDTH
    whole = size - size % step
    for at in range(0, whole, step):
        sum0 = subtract_product(magnitude(load(buf, at)), zero, sum0)
        sum1 = subtract_product(magnitude(load(buf, at + WIDTH)), zero, sum1)
        sum2 = subtract_product(magnitude(load(buf, at + 2 * WIDTH)), zero, sum2)
        sum3 = subtract_product(magnitude(load(buf, at + 3 * WIDTH)), zero, sum3)
    for at in range(whole, size, WIDTH):
        sum0 = subtract_product(magnitude(load(buf, at)), zero, sum0)
    sum0 = subtract_product(sum1, zero, sum0)
    sum2 = subtract_product(sum3, zero, sum2)
    store(poison, 0, subtract_product(sum2, zero, sum0))


@numba.njit(**JIT_OPTIONS, inline="always")
def _poison_complex_vector(buf, poison, m, n):
    """:func:`_poison_vector` for a buffer of one vector of complex matrices, read as its real words: an element's
    first vector of words holds lanes 0 to ``WIDTH / 2`` (real and imaginary parts interleaved), its second the
    others, each summed apart and the two sums' real and imaginary parts added lane by lane at the end."""
    words = buf.reshape(-1).view(poison.dtype)
    poison[0] = 0
    zero = splat(poison[0])
    first = second = zero
    for at in range(0, m * n * 2 * WIDTH, 2 * WIDTH):
        first = subtract_product(magnitude(load(words, at)), zero, first)
        second = subtract_product(magnitude(load(words, at + WIDTH)), zero, second)
    store(poison, 0, subtract_product(imag_parts(first, second), zero, real_parts(first, second)))


def poison_lanes(buf, poison, m, n, lanes):
    """``poison[lane]`` of an ``m x n x lanes`` buffer: 0 where lane's matrix is finite, NaN where it holds an
    infinity or NaN; on SIMD vectors where the buffer is one vector of matrices."""


@overload(poison_lanes, jit_options=JIT_OPTIONS)
def _poison_lanes_for(buf, poison, m, n, lanes):
    on_vectors = _poison_complex_vector if isinstance(buf.dtype, types.Complex) else _poison_vector

    def poison_lanes_of(buf, poison, m, n, lanes):
        if lanes == WIDTH:
            on_vectors(buf, poison, m, n)
        else:
            _poison_each_lane(buf, poison, m, n, lanes)

    return poison_lanes_of


@numba.njit(**JIT_OPTIONS, inline="always")
def flag_poisoned(buf, poison, count, nonfinite, thread, m, n, lanes):
    """Where the caller asked for the check (``nonfinite`` not empty), set ``thread``'s flag if the first ``count``
    lanes of a gathered buffer hold an infinity or NaN; ``poison`` is scratch of ``lanes`` real numbers."""
    if nonfinite.size:
        poison_lanes(buf, poison, m, n, lanes)
        for lane in range(count):
            if poison[lane] != 0:
                nonfinite[thread] = 1


@numba.njit(**JIT_OPTIONS)
def copy_checked(source, index: int, target) -> bool:
    """Copy matrix ``source[index]`` into the 2-D ``target`` (any layout); return whether it is all finite (SciPy's
    ``check_finite`` on the one pass that reads it)."""
    finite = True
    for i in range(target.shape[0]):
        for j in range(target.shape[1]):
            value = source[index, i, j]
            target[i, j] = value
            finite &= is_finite(value)
    return finite


@numba.njit(**JIT_OPTIONS)
def flag_nonfinite(nonfinite, thread: int) -> bool:
    """Set ``thread``'s flag of a non-finite input, where the caller asked for the check (``nonfinite`` holds a flag
    per thread; empty otherwise), and return whether it did: the matrix's results may then be skipped, since the
    call raises."""
    if nonfinite.size:
        nonfinite[thread] = 1
    return nonfinite.size > 0


def smallest_normal(array):
    """The smallest normal number of ``array``'s real precision, of that type: a constant in compiled code, where
    ``np.finfo`` is built at run time each time it is read (its names formatted as strings, a call of ``log10``)."""
    return np.finfo(array.dtype).tiny


@overload(smallest_normal, jit_options=JIT_OPTIONS)
def _smallest_normal_for(array):
    tiny = np.finfo(numba.np.numpy_support.as_dtype(array.dtype)).tiny
    return lambda array: tiny


def as_stack(a: np.ndarray) -> np.ndarray:
    """``a`` viewed as a 3-D stack ``(batch, m, n)`` (a copy only where NumPy cannot reshape a view)."""
    return a if a.ndim == 3 else a.reshape((math.prod(a.shape[:-2]), *a.shape[-2:]))


def smith_quotient(a, b):
    """``a / b`` for complex numbers by Smith's scaled division (CPython's and numba's algorithm), with no reciprocal
    of ``|b|^2``, which overflows for a subnormal ``b``, and no exception for a zero ``b`` (the quotient is NaN, as
    gfortran's). Compiled for the CPU kernels by :func:`divide` and for the GPU ones by ``cuda_kernels``."""
    if abs(b.real) >= abs(b.imag):
        ratio = b.imag / b.real
        denominator = b.real + b.imag * ratio
        return complex((a.real + a.imag * ratio) / denominator, (a.imag - a.real * ratio) / denominator)
    ratio = b.real / b.imag
    denominator = b.real * ratio + b.imag
    return complex((a.real * ratio + a.imag) / denominator, (a.imag * ratio - a.real) / denominator)


def divide(a, b):
    """``a / b`` as LAPACK's compiled code divides: IEEE division for real numbers, part by part for a complex
    ``a`` over a real ``b``, :func:`smith_quotient` over a complex ``b`` (bitwise numba's own quotients, without their
    exception on a zero divisor). Called from compiled kernels only."""
    return a / b


@overload(divide, jit_options={"fastmath": JIT_OPTIONS["fastmath"], "error_model": "numpy"})
def _divide(a, b):
    if isinstance(b, types.Complex):
        return smith_quotient
    if isinstance(a, types.Complex):
        return lambda a, b: complex(a.real / b, a.imag / b)
    return lambda a, b: a / b
