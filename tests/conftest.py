"""Test-session setup: custom CUDA kernels run in Numba's CUDA simulator on machines without an NVIDIA GPU, and
dispatch forgets its decisions after each test."""

import os
import shutil

import pytest

if shutil.which("nvidia-smi") is None:
    os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")


@pytest.fixture(autouse=True)
def _fresh_dispatch():
    """Each test prices its own plans: some replace the model's functions, which dispatch otherwise remembers."""
    yield
    from hetlapack.dispatch.choose import _remembered

    _remembered.cache_clear()
