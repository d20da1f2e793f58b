"""The batched path's output memory: a dropped result's memory serves the next call, a result still held never."""

import threading

import numpy as np
import pytest

import hetlapack.linalg as la
from hetlapack.batched import recycled

LARGE = (64, 64, 64)  # 2 MiB of float64: above MIN_BYTES
LINE = recycled.LINE_BYTES  # each block holds a line more than its array, which starts on one


@pytest.fixture(autouse=True)
def empty_pool():
    recycled.release()
    yield
    recycled.release()


def _address(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


def test_a_dropped_output_s_memory_is_handed_out_again():
    first = recycled.empty(LARGE, np.float64)
    address = _address(first)
    del first
    again = recycled.empty(LARGE, np.complex64)
    assert _address(again) == address
    assert again.shape == LARGE and again.dtype == np.complex64 and again.flags.c_contiguous
    assert recycled.retained() == (again.nbytes + LINE, 0)


def test_outputs_from_the_pool_start_on_a_cache_line():
    shapes = ((LARGE, np.float64), ((3, *LARGE), np.float32), (((1 << 20) + 3,), np.uint8))
    held = [recycled.empty(shape, dtype) for shape, dtype in shapes]
    assert all(not a.flags.owndata and _address(a) % LINE == 0 for a in held)


def test_memory_any_view_still_sees_is_never_handed_out():
    first = recycled.empty(LARGE, np.float64)
    first[:] = 7.0
    view = first[::3, 1]
    del first
    second = recycled.empty(LARGE, np.float64)
    second[:] = -1.0
    assert np.all(view == 7.0)
    assert recycled.retained() == (2 * (second.nbytes + LINE), 0)


def test_small_outputs_and_outputs_beyond_the_pool_are_numpy_s_own(monkeypatch):
    small = recycled.empty((8, 8, 8), np.float64)
    assert small.flags.owndata and recycled.retained() == (0, 0)
    monkeypatch.setattr(recycled, "RETAINED_BYTES", 3 * (np.prod(LARGE) * 8 + LINE))
    held = [recycled.empty(LARGE, np.float64) for _ in range(3)]
    beyond = recycled.empty(LARGE, np.float64)
    assert beyond.flags.owndata and recycled.retained() == (3 * (beyond.nbytes + LINE), 0)
    del held[0]
    assert recycled.retained() == (2 * (beyond.nbytes + LINE), beyond.nbytes + LINE)


def test_free_blocks_are_given_up_longest_unused_first_to_make_room(monkeypatch):
    monkeypatch.setattr(recycled, "RETAINED_BYTES", (5 << 20) + 3 * LINE)
    first, second = recycled.empty(LARGE, np.float64), recycled.empty(LARGE, np.float64)
    addresses = _address(first), _address(second)
    del first, second
    larger = recycled.empty((3, *LARGE), np.float32)  # 3 MiB: no free block serves it, one must go
    assert recycled.retained() == ((3 << 20) + LINE, (2 << 20) + LINE)
    reused = recycled.empty(LARGE, np.float64)
    assert _address(reused) == addresses[1] and larger.base is not None


def test_a_block_serves_outputs_of_at_least_half_its_size():
    block = recycled.empty((4, *LARGE), np.float64)
    address = _address(block)
    del block
    assert _address(recycled.empty((1, *LARGE), np.float64)) != address
    assert _address(recycled.empty((2, *LARGE), np.float64)) == address


def test_release_gives_back_free_blocks_only():
    held, dropped = recycled.empty(LARGE, np.float64), recycled.empty(LARGE, np.float64)
    del dropped
    assert recycled.release() == held.nbytes + LINE
    assert recycled.retained() == (held.nbytes + LINE, 0)


def test_threads_never_share_a_block():
    blocks = [[] for _ in range(4)]
    start = threading.Barrier(4)

    def take(mine):
        start.wait()
        for value in range(20):
            block = recycled.empty(LARGE, np.float64)
            block[:] = value
            mine.append(block)
            if len(mine) > 2:
                kept = mine.pop(0)
                assert np.all(kept == kept.flat[0])

    workers = [threading.Thread(target=take, args=(mine,)) for mine in blocks]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    addresses = [_address(block) for mine in blocks for block in mine]
    assert len(set(addresses)) == len(addresses) == 8


def _arrays(results):
    return [results] if isinstance(results, np.ndarray) else list(results)


@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_results_held_by_the_caller_survive_the_next_calls(dtype):
    rng = np.random.default_rng(5)
    a = (rng.standard_normal((4096, 16, 16)) + (1j if dtype == np.complex128 else 0) * rng.standard_normal(
        (4096, 16, 16))).astype(dtype)
    spd = a @ np.conj(a.transpose(0, 2, 1)) + 16 * np.eye(16)
    held = {"qr": la.qr(a, mode="economic"), "lu_factor": la.lu_factor(a), "cholesky": la.cholesky(spd),
            "lu": la.lu(a)}
    saved = {name: [result.copy() for result in _arrays(results)] for name, results in held.items()}
    assert recycled.retained()[0] > 0
    for _ in range(3):  # the same calls again, their results dropped at once: the pool's free blocks reused
        la.qr(2 * a, mode="economic"), la.lu_factor(2 * a), la.cholesky(2 * spd), la.lu(2 * a)
    for name, results in held.items():
        for result, copy in zip(_arrays(results), saved[name], strict=True):
            np.testing.assert_array_equal(result, copy, err_msg=name)
    assert recycled.retained()[1] > 0
    again = la.qr(a, mode="economic")
    np.testing.assert_array_equal(again[1], saved["qr"][1])
