"""One 8 x 8 block of elements transposed in SIMD registers: the inner step of the batched kernels' blocked copies.

A gather turns eight matrices' runs of eight elements along memory into eight elements' runs of eight lanes in the
interleaved buffer, and a scatter the reverse: an 8 x 8 transpose. Written as loops over strided arrays, the
compiler moves it one element at a time (a load and a store each); here it is eight vector loads, the three rounds
of pairwise shuffles of the textbook transpose, and eight vector stores. The elements move as integers of their
size, so every bit (NaN payloads, signed zeros) arrives as it left.
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

#: Elements on each side of a block.
SIZE = 8

#: Bytes of a cache line: the most a streaming store of :func:`stream_rows` asks its address to be aligned to, and
#: the step of ``_interleave.prefetch_next``.
LINE_BYTES = 64


def _shuffle_round(builder: ir.IRBuilder, rows: list, step: int, parts: int) -> list:
    """One round of the transpose: rows ``i`` and ``i + step`` exchange their elements ``p`` with ``p & step`` set
    and ``p + step`` (with ``p & step`` clear), pairwise; after rounds 1, 2 and 4, row ``c`` holds column ``c``.
    Each element is ``parts`` words (a complex number's real and imaginary parts), moved together."""
    low = [p if not p & step else SIZE + p - step for p in range(SIZE)]
    high = [p + step if not p & step else SIZE + p for p in range(SIZE)]
    mask = ir.VectorType(ir.IntType(32), SIZE * parts)
    low, high = ([parts * p + k for p in picks for k in range(parts)] for picks in (low, high))
    result = list(rows)
    for i in range(SIZE):
        if not i & step:
            first, second = rows[i], rows[i + step]
            result[i] = builder.shuffle_vector(first, second, ir.Constant(mask, low))
            result[i + step] = builder.shuffle_vector(first, second, ir.Constant(mask, high))
    return result


def _conjugated(builder: ir.IRBuilder, rows: list, row_type: ir.VectorType, conjugate, parts: int, bits: int) -> list:
    """``rows`` with the sign bits of their imaginary parts (every second word) flipped where ``conjugate`` is true
    and the elements are complex, as negation does."""
    if parts == 1:
        return rows
    word = ir.IntType(bits)
    sign = ir.Constant(row_type, [word(0), word(1 << (bits - 1))] * SIZE)
    return [builder.select(conjugate, builder.xor(row, sign), row) for row in rows]


@intrinsic
def transpose_block(typingctx, source, source_offset, source_stride, target, target_offset, target_stride,
                    conjugate):
    """``target[c][r] = source[r][c]`` (its complex conjugate if ``conjugate``) for ``r, c < 8``, where row ``r`` of
    ``source`` is the eight elements from byte ``source_offset + r * source_stride`` of ``source``'s data, and row
    ``c`` of ``target`` likewise: each row lies along memory, the rows anywhere (strides in bytes, negative ones
    too). Both arrays hold the same dtype. A conjugate flips the sign bit of the imaginary part, as negation does."""
    if not (isinstance(source, types.Array) and isinstance(target, types.Array) and source.dtype == target.dtype):
        return None
    signature = types.none(source, types.intp, types.intp, target, types.intp, types.intp, types.boolean)
    parts = 2 if isinstance(source.dtype, types.Complex) else 1
    bits = source.dtype.bitwidth // parts

    def codegen(context, builder, sig, args):
        source_array = context.make_array(sig.args[0])(context, builder, args[0])
        target_array = context.make_array(sig.args[3])(context, builder, args[3])
        word = ir.IntType(bits)
        row_type = ir.VectorType(word, SIZE * parts)
        byte = ir.IntType(8).as_pointer()

        def row_pointer(array, offset, stride, row):
            start = builder.add(offset, builder.mul(stride, ir.Constant(stride.type, row)))
            address = builder.gep(builder.bitcast(array.data, byte), [start])
            return builder.bitcast(address, row_type.as_pointer())

        rows = [builder.load(row_pointer(source_array, args[1], args[2], r), align=1) for r in range(SIZE)]
        for step in (1, 2, 4):
            rows = _shuffle_round(builder, rows, step, parts)
        rows = _conjugated(builder, rows, row_type, args[6], parts, bits)
        for c, row in enumerate(rows):
            builder.store(row, row_pointer(target_array, args[4], args[5], c), align=1)
        return context.get_dummy_value()

    return signature, codegen


def _row_transposition(source, source_rows, target, target_rows, streaming: bool):
    """The signature and code of :func:`transpose_rows` (``streaming``: of :func:`stream_rows`), or ``None`` for
    arguments it does not take."""
    if not (isinstance(source, types.Array) and isinstance(target, types.Array) and source.dtype == target.dtype
            and isinstance(source_rows, types.UniTuple) and source_rows.count == SIZE
            and isinstance(source_rows.dtype, types.Integer) and source_rows == target_rows):
        return None
    signature = types.none(source, source_rows, target, target_rows, types.boolean)
    parts = 2 if isinstance(source.dtype, types.Complex) else 1
    bits = source.dtype.bitwidth // parts
    aligned = min(SIZE * source.dtype.bitwidth // 8, LINE_BYTES)

    def codegen(context, builder, sig, args):
        row_type = ir.VectorType(ir.IntType(bits), SIZE * parts)
        byte = ir.IntType(8).as_pointer()

        def row_pointer(array_type, array, offset):
            data = context.make_array(array_type)(context, builder, array).data
            return builder.bitcast(builder.gep(builder.bitcast(data, byte), [offset]), row_type.as_pointer())

        sources = cgutils.unpack_tuple(builder, args[1], SIZE)
        targets = cgutils.unpack_tuple(builder, args[3], SIZE)
        rows = [builder.load(row_pointer(sig.args[0], args[0], offset), align=1) for offset in sources]
        for step in (1, 2, 4):
            rows = _shuffle_round(builder, rows, step, parts)
        rows = _conjugated(builder, rows, row_type, args[4], parts, bits)
        for offset, row in zip(targets, rows):
            stored = builder.store(row, row_pointer(sig.args[2], args[2], offset), align=aligned if streaming else 1)
            if streaming:
                stored.set_metadata("nontemporal", builder.module.add_metadata([ir.IntType(32)(1)]))
        return context.get_dummy_value()

    return signature, codegen


@intrinsic
def transpose_rows(typingctx, source, source_rows, target, target_rows, conjugate):
    """:func:`transpose_block` between rows anywhere: row ``r`` of ``source`` is the eight elements from byte
    ``source_rows[r]`` of its data, row ``c`` of ``target`` those from byte ``target_rows[c]`` (two tuples of eight
    offsets), so that one side's rows may follow an order no single stride gives (the places of a small
    Fortran-ordered matrix among an interleaved buffer's rows); conjugated if ``conjugate``."""
    return _row_transposition(source, source_rows, target, target_rows, streaming=False)


@intrinsic
def stream_rows(typingctx, source, source_rows, target, target_rows, conjugate):
    """:func:`transpose_rows` whose stores stream past the caches (non-temporal): each target row is to start at a
    multiple of its own size or of :data:`LINE_BYTES`, whichever is less (a misaligned one faults). Into results
    larger than the last-level cache, a line stored so goes to memory once, where an ordinary store first reads it
    (:func:`store_fence` orders such stores before other threads read the results)."""
    return _row_transposition(source, source_rows, target, target_rows, streaming=True)


@intrinsic
def store_fence(typingctx):
    """A full memory fence: the streaming stores before it (:func:`stream_rows`) reach memory before any access
    after it, so a thread that joins this one reads what they wrote."""

    def codegen(context, builder, sig, args):
        builder.fence("seq_cst")
        return context.get_dummy_value()

    return types.none(), codegen
