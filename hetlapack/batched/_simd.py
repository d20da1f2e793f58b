"""SIMD vectors of ``WIDTH`` lanes for the interleaved kernels, as numba values (one LLVM vector each).

The kernels' loops over the lanes of a buffer, written as loops over array elements, reach the compiler with every
row of the buffer possibly overlapping every other: it guards each short loop with run-time overlap checks and a
scalar copy, and keeps nothing in registers across loops. Written on these vectors (a load, arithmetic, a store,
each one instruction on ``WIDTH`` matrices), a kernel says which values stay in registers and in what order each
element is rounded. Vectors of real numbers (or integers, for pivot rows) only: a complex kernel splits its buffer
into vectors of real and of imaginary parts (:func:`real_parts` and the shuffles after it; ``_split_complex``).
"""

from __future__ import annotations

from collections.abc import Callable

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic, models, register_model

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
def where_equal(typingctx, a, b, chosen, otherwise):
    """``chosen`` in the lanes where the integers ``a`` and ``b`` are equal, ``otherwise`` in the others."""
    if not (isinstance(a, Vector) and isinstance(a.dtype, types.Integer) and a == b and isinstance(chosen, Vector)
            and chosen == otherwise):
        return None

    def codegen(context, builder, sig, args):
        return builder.select(builder.icmp_signed("==", args[0], args[1]), args[2], args[3])

    return chosen(a, b, chosen, otherwise), codegen


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
    """``total + a * b`` rounded twice, the product first (never fused), lane by lane: what the kernels' scalar
    loops over the lanes compute where the compiler leaves the product and the sum apart."""
    if not (_is_real(a) and a == b == total):
        return None

    def codegen(context, builder, sig, args):
        return builder.fadd(args[0], builder.fmul(args[1], args[2]))

    return a(total, a, b), codegen


@intrinsic
def widened(typingctx, a):
    """A vector of single-precision numbers in double precision (exactly), lane by lane."""
    if not (_is_real(a) and a.dtype == types.float32):
        return None

    def codegen(context, builder, sig, args):
        return builder.fpext(args[0], ir.VectorType(ir.DoubleType(), WIDTH))

    return Vector(types.float64)(a), codegen


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
    """``c - a * b`` rounded twice, the product first (never fused), lane by lane."""
    if not (_is_real(a) and a == b == c):
        return None

    def codegen(context, builder, sig, args):
        return builder.fsub(args[2], builder.fmul(args[0], args[1]))

    return a(a, b, c), codegen
