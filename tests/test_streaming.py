"""Batched results written with streaming stores: the numbers ordinary stores write, into records on cache lines
only. Where a call streams is calibration's (``tests/test_calibration.py``)."""

import numba
import numpy as np
import pytest

import hetlapack
import hetlapack.linalg as la
from hetlapack.batched import kernels, streaming
from hetlapack.batched._interleave import BY_ROWS, copy_records
from hetlapack.testing.matrices import on_cache_line, random_matrix

#: Matrices per stack: results of order 8 in float64 take 1 MiB, enough to come from the pool, on cache lines.
BATCH = 2048


def test_no_call_streams_where_the_system_does_not_say_its_last_level_cache(monkeypatch):
    a = np.empty((1000, 8, 8))
    monkeypatch.setattr(streaming, "last_level_cache", lambda: None)
    assert not streaming.streams("getrf", a, a, a)
    assert streaming.streams("getrf", a, chosen=True)


def test_a_call_streams_only_into_results_whose_records_start_on_cache_lines(monkeypatch):
    """So that the kernels skip asking for the results' lines ahead only where they then stream into them."""
    monkeypatch.setattr(streaming, "last_level_cache", lambda: 1)
    aligned = on_cache_line((4, 8, 8))
    assert streaming.streams("potrf", aligned, aligned)
    assert not streaming.streams("potrf", aligned, on_cache_line((4, 8, 8), past_line=1))
    assert not streaming.streams("potrf", aligned, on_cache_line((4, 6, 6)))  # records of 288 bytes
    assert streaming.streams("potrf", aligned, aligned, on_cache_line((0, 8, 8), past_line=1))  # nothing written


def _results(a: np.ndarray, spd: np.ndarray) -> list[np.ndarray]:
    with hetlapack.using(path="batched", kernels="interleaved"):
        return [la.cholesky(spd), la.cholesky(spd, lower=True), la.cho_factor(spd)[0], *la.lu_factor(a), *la.lu(a),
                *la.lu(a, p_indices=True), *la.lu(a, permute_l=True), *la.qr(a), la.qr(a, mode="r")[0],
                *la.qr(a, mode="economic")]


@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
@pytest.mark.parametrize("n", [5, 8, 12])
def test_streamed_results_are_the_ordinary_ones(monkeypatch, dtype, n):
    """Order 5's records (200 or 400 bytes) are not whole lines: written with ordinary stores, whatever is asked."""
    a = random_matrix((BATCH, n, n), dtype, seed=n)
    spd = a @ np.swapaxes(a, -1, -2).conj() / n + np.eye(n, dtype=dtype)
    asked = []

    def results(stream: bool) -> list[np.ndarray]:
        monkeypatch.setattr(kernels, "streams", lambda op, *arrays, chosen=None: asked.append(op) or stream)
        return _results(a, spd)

    ordinary, streamed = results(False), results(True)
    assert sorted(set(asked)) == ["geqrf", "getrf", "lu", "potrf"]
    for expected, result in zip(ordinary, streamed, strict=True):
        assert result.dtype == expected.dtype and result.strides == expected.strides
        np.testing.assert_array_equal(result, expected)


@numba.njit
def _write_back(out, buf, stream):
    copy_records(out, 0, buf, 8, 8, 8, BY_ROWS, False, stream=stream)


@pytest.mark.parametrize("past_a_line", [0, 1])
def test_records_off_cache_lines_are_written_with_ordinary_stores(past_a_line):
    """A streaming store of a run that does not start on a line would fault: such records are written as ever."""
    buf = np.arange(8 * 8 * 8, dtype=np.float64).reshape(8, 8, 8)
    out = on_cache_line((8, 8, 8), past_line=past_a_line)
    _write_back(out, buf, True)
    np.testing.assert_array_equal(out, buf.transpose(2, 0, 1))
