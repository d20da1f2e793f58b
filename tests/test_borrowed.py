"""The kernels' borrowed arrays (``hetlapack.batched._borrowed``): the same data, no references counted."""

import numba
import numpy as np
import pytest
from numba.core.errors import TypingError

from hetlapack.batched._borrowed import borrowed, keep_alive


@numba.njit(cache=False)
def _fill_through_borrowed(target, rows):
    """Write ``target[i, :] = i + rows[i] + 2`` through borrowed views of ``target`` and of buffers allocated here
    (``rows[i] + 2`` kept in one of them), then return that buffer's sum, read back through its borrowed view."""
    owned = (np.zeros(rows.shape[0]), np.full(3, 2.0))
    view, (scratch, twos), count = borrowed((target, owned, rows.shape[0]))
    for i in range(count):
        scratch[i] = rows[i] + twos[0]
        view[i, :] = i + scratch[i]
    total = scratch.sum()
    keep_alive(owned)
    return total


def test_borrowed_views_read_and_write_their_owners_data():
    """Through borrowed views, nested in tuples beside scalars, writes reach the caller's array and the kernel's own
    buffers, kept alive to the end."""
    target = np.zeros((5, 2))
    rows = np.arange(5.0)
    assert _fill_through_borrowed(target, rows) == rows.sum() + 10
    np.testing.assert_array_equal(target, (np.arange(5) + rows + 2)[:, None].repeat(2, axis=1))


def test_borrowed_refuses_what_it_cannot_make_own_nothing():
    """A list (reference counted, and not an array) is refused when compiled, not borrowed half-way."""

    @numba.njit(cache=False)
    def borrow_list(values):
        return len(borrowed(values))

    with pytest.raises(TypingError):
        borrow_list(numba.typed.List([1.0]))
