"""Complex numbers on ``_simd`` vectors: a buffer of one vector of complex matrices split in place into vectors of
real and of imaginary parts, and numba's complex product and reciprocal on them, rounded as numba's scalar code is.

A complex buffer of ``WIDTH`` lanes holds each element's lanes as ``2 * WIDTH`` interleaved words (real, imaginary,
real, ...). :func:`split` rewrites each element's words as ``WIDTH`` real parts followed by ``WIDTH`` imaginary
parts (two shuffles an element), so that a kernel's complex product is four real vector operations with no shuffle;
:func:`join` puts them back before the buffer is scattered. The arithmetic is the scalar kernels' instruction for
instruction (the product as the compiler contracts numba's ``(ac - bd) + i(ad + bc)``, the reciprocal by numba's
Smith division of ``1``), so a kernel on split vectors gives the bits of its loops over the lanes.
"""

from __future__ import annotations

import numba

from ._interleave import JIT_OPTIONS
from ._simd import (WIDTH, add, first_interleaved, fused_multiply_add, imag_parts, last_interleaved, load, magnitude,
                    multiply, negative, quotient, real_parts, splat, store, subtract, where_at_least)

#: Words from an element's real parts to the next element's in a split buffer (its imaginary parts lie ``WIDTH`` on).
ELEMENT = 2 * WIDTH


@numba.njit(**JIT_OPTIONS, inline="always")
def split(words, elements):
    """Rewrite the first ``elements`` elements of a complex buffer of ``WIDTH`` lanes, seen as its real ``words``,
    from interleaved parts to a vector of real parts and one of imaginary parts each."""
    for at in range(0, elements * ELEMENT, ELEMENT):
        low, high = load(words, at), load(words, at + WIDTH)
        store(words, at, real_parts(low, high))
        store(words, at + WIDTH, imag_parts(low, high))


@numba.njit(**JIT_OPTIONS, inline="always")
def join(words, elements):
    """Undo :func:`split`."""
    for at in range(0, elements * ELEMENT, ELEMENT):
        real, imag = load(words, at), load(words, at + WIDTH)
        store(words, at, first_interleaved(real, imag))
        store(words, at + WIDTH, last_interleaved(real, imag))


@numba.njit(**JIT_OPTIONS, inline="always")
def product(ar, ai, br, bi):
    """``(ar + i ai) * (br + i bi)`` lane by lane, as the scalar kernels' complex product compiles: the real part
    ``ar br - ai bi`` with ``ar br`` fused, the imaginary part ``ar bi + ai br`` with ``ai br`` fused."""
    return (fused_multiply_add(ar, br, negative(multiply(ai, bi))),
            fused_multiply_add(ai, br, multiply(ar, bi)))


@numba.njit(**JIT_OPTIONS, inline="always")
def subtract_product(cr, ci, ar, ai, br, bi):
    """``c - a * b`` lane by lane, the product rounded first (:func:`product`), as the scalar ``c -= a * b``."""
    pr, pi = product(ar, ai, br, bi)
    return subtract(cr, pr), subtract(ci, pi)


@numba.njit(**JIT_OPTIONS, inline="always")
def reciprocal(pivot_real, pivot_imag):
    """``1 / pivot`` lane by lane, as numba's scalar ``1.0 / pivot`` (complex128): Smith's division, scaled by the
    larger part (the real part on a tie), each operation as the compiler rounds it there."""
    br, bi = pivot_real, pivot_imag
    zero, one = splat(0.0), splat(1.0)
    real_larger = magnitude(br), magnitude(bi)
    larger = where_at_least(*real_larger, br, bi)
    smaller = where_at_least(*real_larger, bi, br)
    ratio = quotient(smaller, larger)
    denominator = fused_multiply_add(smaller, ratio, larger)
    real = where_at_least(*real_larger, fused_multiply_add(zero, ratio, one), add(ratio, zero))
    imag = where_at_least(*real_larger, subtract(zero, ratio), fused_multiply_add(zero, ratio, negative(one)))
    return quotient(real, denominator), quotient(imag, denominator)
