"""SIMD vectors of ``WIDTH`` lanes for the interleaved kernels, as numba values (one LLVM vector each).

The kernels' loops over the lanes of a buffer, written as loops over array elements, reach the compiler with every
row of the buffer possibly overlapping every other: it guards each short loop with run-time overlap checks and a
scalar copy, and keeps nothing in registers across loops. Written on these vectors (a load, arithmetic, a store,
each one instruction on ``WIDTH`` matrices), a kernel says which values stay in registers and in what order each
element is rounded. Vectors of real numbers (or integers, for pivot rows) only: a complex kernel splits its buffer
into vectors of real and of imaginary parts (:func:`real_parts` and the shuffles after it; ``_split_complex``).
"""

from __future__ import annotations

import operator
from collections.abc import Callable

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic, models, overload, register_model
from numba.np.numpy_support import as_dtype

#: Lanes of a vector: eight matrices, one AVX-512 register of float64 (two AVX2 ones; float32 fills half).
WIDTH = 8


class Vector(types.Type):
    """``WIDTH`` values of one numba scalar type, one per lane."""

    def __init__(self, dtype: types.Type):
        self.dtype = dtype
        super().__init__(name=f"Vector({dtype} x {WIDTH})")


@register_model(Vector)
class _VectorModel(models.PrimitiveModel):
    def __init__(self, dmm, fe_type):
        super().__init__(dmm, fe_type, ir.VectorType(dmm.lookup(fe_type.dtype).get_value_type(), WIDTH))


def _llvm_suffix(value: ir.Type) -> str:
    """An LLVM intrinsic's type suffix for a floating-point scalar or vector type (``f32``, ``v8f64``)."""
    if isinstance(value, ir.VectorType):
        return f"v{value.count}{_llvm_suffix(value.element)}"
    return "f64" if isinstance(value, ir.DoubleType) else "f32"


def _llvm_function(builder: ir.IRBuilder, name: str, value: ir.Type, arity: int) -> ir.Function:
    """The LLVM intrinsic ``name`` on floating-point scalars or vectors of ``value``'s type (``llvm.fabs.v8f64``,
    ``llvm.fma.f32`` and so on)."""
    return cgutils.get_or_insert_function(builder.module, ir.FunctionType(value, [value] * arity),
                                          f"llvm.{name}.{_llvm_suffix(value)}")


def _address(context, builder, array_type, array, offset):
    """A vector pointer to element ``offset`` of a C-contiguous array's data."""
    data = context.make_array(array_type)(context, builder, array).data
    vector = ir.VectorType(context.get_value_type(array_type.dtype), WIDTH)
    return builder.bitcast(builder.gep(data, [offset]), vector.as_pointer())


@intrinsic
def load(typingctx, array, offset):
    """Elements ``offset`` to ``offset + WIDTH`` of a C-contiguous array (flat index)."""
    if not (isinstance(array, types.Array) and array.layout == "C"):
        return None

    def codegen(context, builder, sig, args):
        return builder.load(_address(context, builder, sig.args[0], args[0], args[1]), align=array.dtype.bitwidth // 8)

    return Vector(array.dtype)(array, types.intp), codegen


@intrinsic
def store(typingctx, array, offset, value):
    """Write ``value`` to elements ``offset`` to ``offset + WIDTH`` of a C-contiguous array (flat index)."""
    if not (isinstance(array, types.Array) and array.layout == "C" and value == Vector(array.dtype)):
        return None

    def codegen(context, builder, sig, args):
        builder.store(args[2], _address(context, builder, sig.args[0], args[0], args[1]),
                      align=array.dtype.bitwidth // 8)
        return context.get_dummy_value()

    return types.none(array, types.intp, value), codegen


@intrinsic
def splat(typingctx, value):
    """``value`` in every lane."""
    value = types.unliteral(value)
    if not isinstance(value, (types.Float, types.Integer)):
        return None

    def codegen(context, builder, sig, args):
        vector = context.get_value_type(sig.return_type)
        undefined = ir.Constant(vector, ir.Undefined)
        first = builder.insert_element(undefined, args[0], ir.Constant(ir.IntType(32), 0))
        return builder.shuffle_vector(first, undefined, ir.Constant(ir.VectorType(ir.IntType(32), WIDTH), [0] * WIDTH))

    return Vector(value)(value), codegen


def _is_real(vector) -> bool:
    return isinstance(vector, Vector) and isinstance(vector.dtype, types.Float)


def _lanewise(name: str, doc: str, instruction: Callable) -> Callable:
    """An intrinsic applying one LLVM ``instruction(builder, a, b)`` to two real vectors, lane by lane."""

    def lanewise(typingctx, a, b):
        if not (_is_real(a) and a == b):
            return None

        def codegen(context, builder, sig, args):
            return instruction(builder, *args)

        return a(a, b), codegen

    lanewise.__name__ = lanewise.__qualname__ = name
    lanewise.__doc__ = doc
    return intrinsic(lanewise)


add = _lanewise("add", "``a + b``, lane by lane (contractible, as the kernels' scalar sums are).",
                lambda builder, a, b: builder.fadd(a, b, flags=["contract"]))
subtract = _lanewise("subtract", "``a - b``, lane by lane (contractible, as the kernels' scalar differences are).",
                     lambda builder, a, b: builder.fsub(a, b, flags=["contract"]))
multiply = _lanewise("multiply", "``a * b``, lane by lane.",
                     lambda builder, a, b: builder.fmul(a, b, flags=["contract"]))
quotient = _lanewise("quotient", "``a / b``, lane by lane (IEEE division: a zero divisor gives an infinity or NaN).",
                     lambda builder, a, b: builder.fdiv(a, b))


@intrinsic
def subtract_product(typingctx, a, b, c):
    """``c - a * b``, contracted to one fused multiply-add as the kernels' scalar ``c -= a * b`` is (the same
    instruction: an ``llvm.fma`` of ``-a`` would give a NaN ``a`` the other sign)."""
    if not (_is_real(a) and a == b == c):
        return None

    def codegen(context, builder, sig, args):
        return builder.fsub(args[2], builder.fmul(args[0], args[1], flags=["contract"]), flags=["contract"])

    return a(a, b, c), codegen


@intrinsic
def fused_multiply_add(typingctx, a, b, c):
    """``a * b + c`` rounded once (``llvm.fma``), on real scalars or vectors alike, whatever the kernel's options
    allow the compiler to contract: for kernels that replay another library's roundings, instruction by
    instruction."""
    if not ((_is_real(a) or isinstance(a, types.Float)) and a == b == c):
        return None

    def codegen(context, builder, sig, args):
        return builder.call(_llvm_function(builder, "fma", args[0].type, 3), args)

    return a(a, b, c), codegen


@intrinsic
def magnitude(typingctx, a):
    """``|a|``, lane by lane."""
    if not _is_real(a):
        return None

    def codegen(context, builder, sig, args):
        return builder.call(_llvm_function(builder, "fabs", args[0].type, 1), [args[0]])

    return a(a), codegen


@intrinsic
def copy_sign(typingctx, a, b):
    """``|a|`` with the sign of ``b``, lane by lane (``math.copysign``: a negative zero's sign counts)."""
    if not (_is_real(a) and a == b):
        return None

    def codegen(context, builder, sig, args):
        return builder.call(_llvm_function(builder, "copysign", args[0].type, 2), list(args))

    return a(a, b), codegen


@intrinsic
def where_greater(typingctx, a, b, chosen, otherwise):
    """``chosen`` in the lanes where ``a > b`` (false where either is NaN), ``otherwise`` in the others."""
    if not (_is_real(a) and a == b and isinstance(chosen, Vector) and chosen == otherwise):
        return None

    def codegen(context, builder, sig, args):
        return builder.select(builder.fcmp_ordered(">", args[0], args[1]), args[2], args[3])

    return chosen(a, b, chosen, otherwise), codegen


@intrinsic
def square_root(typingctx, a):
    """``sqrt(a)``, lane by lane (correctly rounded, as the scalar ``math.sqrt``)."""
    if not _is_real(a):
        return None

    def codegen(context, builder, sig, args):
        return builder.call(_llvm_function(builder, "sqrt", args[0].type, 1), [args[0]])

    return a(a), codegen


@intrinsic
def where_at_least(typingctx, a, b, chosen, otherwise):
    """``chosen`` in the lanes where ``a >= b`` (false where either is NaN), ``otherwise`` in the others."""
    if not (_is_real(a) and a == b and isinstance(chosen, Vector) and chosen == otherwise):
        return None

    def codegen(context, builder, sig, args):
        return builder.select(builder.fcmp_ordered(">=", args[0], args[1]), args[2], args[3])

    return chosen(a, b, chosen, otherwise), codegen


@intrinsic
def exchange_where(typingctx, a, b, first, second):
    """``(first, second)`` with their values exchanged in the lanes where the integers ``a`` and ``b`` are equal:
    a row swap across the lanes. Written with exclusive ors, not selects: LLVM turns the store of a select between
    a value and what was loaded from the same place into a masked store, which AVX2 machines run as microcode and
    after which a load of the place waits for the store to retire (complex128 LU of order 8: its row swaps took
    twice as long)."""
    if not (isinstance(a, Vector) and isinstance(a.dtype, types.Integer) and a == b and isinstance(first, Vector)
            and first == second):
        return None

    def codegen(context, builder, sig, args):
        vector = context.get_value_type(sig.args[2])
        bits = ir.VectorType(ir.IntType(sig.args[2].dtype.bitwidth), WIDTH)
        mask = builder.sext(builder.icmp_signed("==", args[0], args[1]), bits)
        one, other = builder.bitcast(args[2], bits), builder.bitcast(args[3], bits)
        change = builder.and_(builder.xor(one, other), mask)
        exchanged = [builder.bitcast(builder.xor(value, change), vector) for value in (one, other)]
        return context.make_tuple(builder, sig.return_type, exchanged)

    return types.UniTuple(first, 2)(a, b, first, second), codegen


@intrinsic
def any_equal(typingctx, a, b):
    """Whether the integers ``a`` and ``b`` are equal in any lane."""
    if not (isinstance(a, Vector) and isinstance(a.dtype, types.Integer) and a == b):
        return None

    def codegen(context, builder, sig, args):
        lanes = builder.bitcast(builder.icmp_signed("==", args[0], args[1]), ir.IntType(WIDTH))
        return builder.icmp_unsigned("!=", lanes, ir.Constant(ir.IntType(WIDTH), 0))

    return types.boolean(a, b), codegen


@intrinsic
def any_below(typingctx, a, b):
    """Whether ``a < b`` in any lane (false in a lane where either is NaN)."""
    if not (_is_real(a) and a == b):
        return None

    def codegen(context, builder, sig, args):
        lanes = builder.bitcast(builder.fcmp_ordered("<", args[0], args[1]), ir.IntType(WIDTH))
        return builder.icmp_unsigned("!=", lanes, ir.Constant(ir.IntType(WIDTH), 0))

    return types.boolean(a, b), codegen


def _shuffle(name: str, order: list[int]):
    """An intrinsic taking lanes ``order`` of two real vectors laid end to end (``2 * WIDTH`` lanes)."""

    def shuffle(typingctx, a, b):
        if not (_is_real(a) and a == b):
            return None

        def codegen(context, builder, sig, args):
            return builder.shuffle_vector(args[0], args[1], ir.Constant(ir.VectorType(ir.IntType(32), WIDTH), order))

        return a(a, b), codegen

    shuffle.__name__ = shuffle.__qualname__ = name
    return intrinsic(shuffle)


#: The even and the odd lanes of two vectors laid end to end: the real and the imaginary parts of ``WIDTH`` complex
#: numbers that lie in them interleaved, as NumPy stores them.
real_parts = _shuffle("real_parts", [2 * lane for lane in range(WIDTH)])
imag_parts = _shuffle("imag_parts", [2 * lane + 1 for lane in range(WIDTH)])
#: Their inverse: the first and the second ``WIDTH / 2`` complex numbers, interleaved, of a vector of real parts and
#: one of imaginary parts.
first_interleaved = _shuffle("first_interleaved", [lane // 2 + lane % 2 * WIDTH for lane in range(WIDTH)])
last_interleaved = _shuffle("last_interleaved", [WIDTH // 2 + lane // 2 + lane % 2 * WIDTH for lane in range(WIDTH)])


@intrinsic
def where_at_most(typingctx, a, b, chosen, otherwise):
    """``chosen`` in the lanes where ``a <= b`` (false where either is NaN), ``otherwise`` in the others."""
    if not (_is_real(a) and a == b and isinstance(chosen, Vector) and chosen == otherwise):
        return None

    def codegen(context, builder, sig, args):
        return builder.select(builder.fcmp_ordered("<=", args[0], args[1]), args[2], args[3])

    return chosen(a, b, chosen, otherwise), codegen


@intrinsic
def negative(typingctx, a):
    """``-a``, lane by lane."""
    if not _is_real(a):
        return None

    def codegen(context, builder, sig, args):
        return builder.fneg(args[0])

    return a(a), codegen


@intrinsic
def add_rounded_product(typingctx, total, a, b):
    """``total + a * b`` lane by lane, a product then a sum: rounded twice in the replays (``fastmath=False``), as
    LAPACK's unfused loops round; fused into one FMA by LLVM under the factorization kernels'
    ``fastmath={"contract"}``, as it fuses their loops over the lanes' ``total += a * b`` (stop 99 read both in the
    compiled code), so the vectors and those loops agree either way."""
    if not (_is_real(a) and a == b == total):
        return None

    def codegen(context, builder, sig, args):
        return builder.fadd(args[0], builder.fmul(args[1], args[2]))

    return a(total, a, b), codegen


@intrinsic
def widened(typingctx, a):
    """A single-precision number, or a vector of them, in double precision (exactly), lane by lane."""
    if a == types.float32:
        result = types.float64
    elif _is_real(a) and a.dtype == types.float32:
        result = Vector(types.float64)
    else:
        return None

    def codegen(context, builder, sig, args):
        return builder.fpext(args[0], context.get_value_type(sig.return_type))

    return result(a), codegen


@intrinsic
def narrowed(typingctx, a):
    """A vector of double-precision numbers rounded to single precision, lane by lane (as ``np.float32(x)``)."""
    if not (_is_real(a) and a.dtype == types.float64):
        return None

    def codegen(context, builder, sig, args):
        return builder.fptrunc(args[0], ir.VectorType(ir.FloatType(), WIDTH))

    return Vector(types.float32)(a), codegen


@intrinsic
def subtract_rounded_product(typingctx, a, b, c):
    """``c - a * b`` lane by lane, a product then a difference: fused or not as :func:`add_rounded_product`."""
    if not (_is_real(a) and a == b == c):
        return None

    def codegen(context, builder, sig, args):
        return builder.fsub(args[2], builder.fmul(args[0], args[1]))

    return a(a, b, c), codegen


@intrinsic
def any_zero(typingctx, a):
    """Whether ``a`` is zero (of either sign) in any lane."""
    if not _is_real(a):
        return None

    def codegen(context, builder, sig, args):
        zero = ir.Constant(args[0].type, None)
        lanes = builder.bitcast(builder.fcmp_ordered("==", args[0], zero), ir.IntType(WIDTH))
        return builder.icmp_unsigned("!=", lanes, ir.Constant(ir.IntType(WIDTH), 0))

    return types.boolean(a), codegen



@intrinsic
def any_not_a_number(typingctx, a):
    """Whether ``a`` is NaN in any lane."""
    if not _is_real(a):
        return None

    def codegen(context, builder, sig, args):
        lanes = builder.bitcast(builder.fcmp_unordered("uno", args[0], args[0]), ir.IntType(WIDTH))
        return builder.icmp_unsigned("!=", lanes, ir.Constant(ir.IntType(WIDTH), 0))

    return types.boolean(a), codegen


def _word(dtype: types.Type) -> types.Type:
    """The numbers an array of ``dtype`` is read as by :func:`load_records`: its own, or a complex one's parts."""
    return dtype.underlying_float if isinstance(dtype, types.Complex) else dtype


def _records_pointer(context, builder, array_type, array, offset, words):
    """A pointer to ``words * WIDTH`` numbers (:func:`_word`) from element ``offset`` of an array's data, as one LLVM
    vector."""
    data = context.make_array(array_type)(context, builder, array).data
    records = ir.VectorType(context.get_value_type(_word(array_type.dtype)), words * WIDTH)
    return builder.bitcast(builder.gep(data, [offset]), records.as_pointer())


@intrinsic
def load_records(typingctx, array, offset, places):
    """``WIDTH`` records of ``places`` numbers each (small matrices, laid one after another), from element
    ``offset`` of an array's data, dealt into ``places`` vectors: lane ``w`` of vector ``k`` is element ``offset + w
    * places + k``. A complex array's records are read as their real and imaginary parts (``2 * places`` vectors,
    each element's real part, then its imaginary part). One wide load and shuffles, which LLVM lowers to the
    shortest transpose it knows; the caller checks that the records lie in the array's memory as said (any
    layout)."""
    if not (isinstance(array, types.Array) and isinstance(places, types.IntegerLiteral)):
        return None
    word = _word(array.dtype)
    count = places.literal_value * (2 if word is not array.dtype else 1)
    result = types.UniTuple(Vector(word), count)

    def codegen(context, builder, sig, args):
        records = builder.load(_records_pointer(context, builder, sig.args[0], args[0], args[1], count),
                               align=word.bitwidth // 8)
        undefined = ir.Constant(records.type, ir.Undefined)
        mask = ir.VectorType(ir.IntType(32), WIDTH)
        dealt = [builder.shuffle_vector(records, undefined, ir.Constant(mask, [w * count + k for w in range(WIDTH)]))
                 for k in range(count)]
        return context.make_tuple(builder, sig.return_type, dealt)

    return result(array, types.intp, places), codegen


@intrinsic
def store_records(typingctx, array, offset, vectors):
    """The inverse of :func:`load_records`: lane ``w`` of vector ``k`` of the tuple ``vectors`` written to number
    ``w * len(vectors) + k`` of the records from element ``offset`` of an array's data (a complex array's parts)."""
    if not (isinstance(array, types.Array) and isinstance(vectors, types.UniTuple)
            and vectors.dtype == Vector(_word(array.dtype))):
        return None
    count = vectors.count
    word = _word(array.dtype)

    def codegen(context, builder, sig, args):
        dealt = cgutils.unpack_tuple(builder, args[2], count)
        joined = dealt[0]
        for k, vector in enumerate(dealt[1:], start=1):  # end to end: lane w of vector k at k * WIDTH + w
            width = k * WIDTH
            wider = ir.VectorType(ir.IntType(32), width + WIDTH)
            if width > WIDTH:
                vector = builder.shuffle_vector(vector, ir.Constant(vector.type, ir.Undefined),
                                                ir.Constant(ir.VectorType(ir.IntType(32), width),
                                                            [i if i < WIDTH else 0 for i in range(width)]))
            joined = builder.shuffle_vector(joined, vector, ir.Constant(wider, list(range(width + WIDTH))))
        order = [(i % count) * WIDTH + i // count for i in range(count * WIDTH)]
        records = builder.shuffle_vector(joined, ir.Constant(joined.type, ir.Undefined),
                                         ir.Constant(ir.VectorType(ir.IntType(32), count * WIDTH), order))
        builder.store(records, _records_pointer(context, builder, sig.args[0], args[0], args[1], count),
                      align=word.bitwidth // 8)
        return context.get_dummy_value()

    return types.none(array, types.intp, vectors), codegen

#: The options of the overloads below: compiled once, inlined by LLVM (numba's own inlining retypes the caller at
#: each use, which multiplied a replay's compile time).
_INLINED_BY_LLVM = {"forceinline": True, "fastmath": False}


def _exact_operator(python_operator: Callable, instruction: Callable) -> None:
    """Give real vectors Python's binary operator ``python_operator`` as one LLVM ``instruction(builder, a, b)`` per
    lane, never contracted with another: the rounding of a replay's scalar code, written once for scalars and
    vectors alike (:func:`entry`)."""
    exact = _lanewise(f"exact_{python_operator.__name__}", "The operator, rounded alone, lane by lane.", instruction)

    @overload(python_operator, jit_options=_INLINED_BY_LLVM)
    def exact_for(a, b):
        if _is_real(a) and a == b:
            return lambda a, b: exact(a, b)


_exact_operator(operator.add, lambda builder, a, b: builder.fadd(a, b))
_exact_operator(operator.sub, lambda builder, a, b: builder.fsub(a, b))
_exact_operator(operator.mul, lambda builder, a, b: builder.fmul(a, b))


@overload(operator.truediv, jit_options=_INLINED_BY_LLVM)
def _quotient_for(a, b):
    if _is_real(a) and a == b:
        return lambda a, b: quotient(a, b)


@overload(operator.neg, jit_options=_INLINED_BY_LLVM)
def _negative_for(a):
    if _is_real(a):
        return lambda a: negative(a)


def entry(a, r, c):
    """Entry ``[r, c]`` of a matrix (2-D), or of every matrix of a buffer of one vector of them (``m x n x WIDTH``,
    C-ordered) as a vector: code written with it (and :func:`set_entry`, :func:`element`, :func:`constant_like`)
    runs on one matrix or on ``WIDTH`` of them with the same roundings."""
    return a[r, c]


@overload(entry, jit_options=_INLINED_BY_LLVM)
def _entry_for(a, r, c):
    if a.ndim == 2:
        return lambda a, r, c: a[r, c]
    if a.ndim == 3 and a.layout == "C":
        return lambda a, r, c: load(a, (r * a.shape[1] + c) * WIDTH)


def set_entry(a, r, c, value):
    """Write ``value`` to :func:`entry` ``[r, c]``."""
    a[r, c] = value


@overload(set_entry, jit_options=_INLINED_BY_LLVM)
def _set_entry_for(a, r, c, value):
    if a.ndim == 2:
        def set_matrix_entry(a, r, c, value):
            a[r, c] = value
        return set_matrix_entry
    if a.ndim == 3 and a.layout == "C":
        return lambda a, r, c, value: store(a, (r * a.shape[1] + c) * WIDTH, value)


def element(x, k):
    """Element ``k`` of a vector of numbers (1-D), or of every lane's (``count x WIDTH``, C-ordered) as a vector."""
    return x[k]


@overload(element, jit_options=_INLINED_BY_LLVM)
def _element_for(x, k):
    if x.ndim == 1:
        return lambda x, k: x[k]
    if x.ndim == 2 and x.layout == "C":
        return lambda x, k: load(x, k * WIDTH)


def set_element(x, k, value):
    """Write ``value`` to :func:`element` ``k``."""
    x[k] = value


@overload(set_element, jit_options=_INLINED_BY_LLVM)
def _set_element_for(x, k, value):
    if x.ndim == 1:
        def set_number(x, k, value):
            x[k] = value
        return set_number
    if x.ndim == 2 and x.layout == "C":
        return lambda x, k, value: store(x, k * WIDTH, value)


def constant_like(a, value):
    """``value`` in the type of :func:`entry` of ``a``: a number, or a vector of it in every lane."""
    return a.dtype.type(value)


@overload(constant_like, jit_options=_INLINED_BY_LLVM)
def _constant_like_for(a, value):
    scalar = as_dtype(a.dtype).type
    if a.ndim == 2:
        return lambda a, value: scalar(value)
    if a.ndim == 3:
        return lambda a, value: splat(scalar(value))


@intrinsic
def prefetch(typingctx, array, offset, for_writing):
    """Ask the caches for the line holding byte ``offset`` of an array's data (for writing where ``for_writing``), into
    the second level (a hint that never faults, whatever the address)."""
    if not isinstance(array, types.Array):
        return None

    def codegen(context, builder, sig, args):
        data = context.make_array(sig.args[0])(context, builder, args[0]).data
        byte = ir.IntType(8).as_pointer()
        address = builder.gep(builder.bitcast(data, byte), [args[1]])
        i32 = ir.IntType(32)
        function = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.VoidType(), [byte, i32, i32, i32]),
                                                  "llvm.prefetch.p0i8")
        with builder.if_else(args[2]) as (writing, reading):  # the kind is an immediate operand
            with writing:
                builder.call(function, [address, i32(1), i32(2), i32(1)])
            with reading:
                builder.call(function, [address, i32(0), i32(2), i32(1)])
        return context.get_dummy_value()

    return types.none(array, types.intp, types.boolean), codegen
