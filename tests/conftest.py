"""Test-session setup: custom CUDA kernels run in Numba's CUDA simulator on machines without an NVIDIA GPU."""

import os
import shutil

if shutil.which("nvidia-smi") is None:
    os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")
