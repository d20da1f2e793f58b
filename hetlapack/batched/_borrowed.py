"""Arrays that the kernels use without counting references to them.

numba counts references to every array a compiled function holds: each time an array is passed to an inlined helper,
taken out of a tuple or viewed, it adds one and later takes it away, each an atomic instruction on the array's
``meminfo``. In the interleaved kernels these are most of what a small matrix costs beyond its arithmetic: in a
batched ``lu_factor`` of order 8 (float64, one thread) 22% of the time was in ``NRT_incref`` and ``NRT_decref``, in
``qr`` of order 8 27%. An array whose ``meminfo`` is null is not counted (numba tests the pointer and returns), so a
kernel that borrows its arrays (:func:`borrowed`) for as long as their owners hold them (the caller, for its
arguments; :func:`keep_alive` after the loop, for the buffers a kernel allocates) pays a test instead of an atomic.
"""

from __future__ import annotations

from numba import types
from numba.core import cgutils
from numba.extending import intrinsic


def _borrow(context, builder, value_type, value):
    """``value`` with each array in it (``value_type`` an array, or a tuple, nested, of arrays and scalars) made to
    own nothing: its ``meminfo`` and ``parent`` null."""
    if isinstance(value_type, types.Array):
        array = context.make_array(value_type)(context, builder, value)
        array.meminfo = cgutils.get_null_value(array.meminfo.type)
        array.parent = cgutils.get_null_value(array.parent.type)
        return array._getvalue()
    if isinstance(value_type, types.BaseTuple):
        items = [_borrow(context, builder, item_type, builder.extract_value(value, i))
                 for i, item_type in enumerate(value_type)]
        return context.make_tuple(builder, value_type, items)
    return value


def _borrowable(value_type) -> bool:
    """Whether :func:`_borrow` takes values of ``value_type``: arrays, numbers and booleans, and tuples of them."""
    if isinstance(value_type, types.BaseTuple):
        return all(_borrowable(item_type) for item_type in value_type)
    return isinstance(value_type, (types.Array, types.Number, types.Boolean))


@intrinsic
def borrowed(typingctx, value):
    """``value`` (an array, or a tuple of arrays, scalars and such tuples) seen through arrays that own nothing: the
    same data, shapes and strides, no reference counted. Valid only while the arrays it was made from are held."""
    if not _borrowable(value):
        return None

    def codegen(context, builder, signature, args):
        return _borrow(context, builder, signature.args[0], args[0])

    return value(value), codegen


@intrinsic
def keep_alive(typingctx, value):
    """Nothing, but a use of ``value``: numba releases a variable after its last use, so a kernel that borrowed the
    arrays in ``value`` calls this after it is done with them."""

    def codegen(context, builder, signature, args):
        return context.get_dummy_value()

    return types.none(value), codegen
