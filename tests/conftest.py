"""Test-session setup: custom CUDA kernels run in Numba's CUDA simulator on machines without an NVIDIA GPU, the batched
kernels are compiled on every core before the first test (``hetlapack compile``: on a fresh checkout the tests would
otherwise compile them one at a time as they meet them, 12 minutes instead of 7 on 2 cores), dispatch forgets its
decisions after each test, and no test reads the calibration this machine's user cached (``hetlapack calibrate``):
plans are priced as on a machine never calibrated, unless a test writes a cache of its own."""

import os
import shutil
import subprocess
import sys
import tempfile

import pytest

#: ``0`` skips the up-front compile: a run of a few test files (the GPU set on a lent machine, where device time is
#: short) then compiles only the CPU kernels its tests meet.
COMPILE_AHEAD = "HETLAPACK_TEST_COMPILE_AHEAD"

if shutil.which("nvidia-smi") is None:
    os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")
# a kernel missing from numba's cache compiles in the call that meets it, as the tests expect the plans they check
# (tests/test_background_compile.py checks the background compilation users get)
os.environ.setdefault("HETLAPACK_BATCHED_COMPILE", "inline")


def pytest_sessionstart(session):
    """An empty calibration cache directory for the session (its processes inherit it), then (unless
    ``HETLAPACK_TEST_COMPILE_AHEAD=0``) ``hetlapack compile`` in a process of its own: this one keeps numba and the
    kernels unloaded until a test loads them."""
    from hetlapack.devices.capability import ENV_CACHE_DIR  # loads neither numba nor the kernels

    os.environ[ENV_CACHE_DIR] = tempfile.mkdtemp(prefix="hetlapack-test-cache-")
    if os.environ.get(COMPILE_AHEAD, "1") != "0":
        subprocess.run([sys.executable, "-c", "from hetlapack.cli import main; main(['compile'])"], check=True)


def pytest_sessionfinish(session):
    from hetlapack.devices.capability import ENV_CACHE_DIR

    shutil.rmtree(os.environ[ENV_CACHE_DIR], ignore_errors=True)


@pytest.fixture(autouse=True)
def _fresh_dispatch():
    """Each test prices its own plans: some replace the model's functions, which dispatch otherwise remembers."""
    yield
    from hetlapack.dispatch.choose import forget_decisions

    forget_decisions()
