"""install()/uninstall()/patched(): SciPy's and NumPy's names, private modules included, and back."""

import numpy as np
import scipy.linalg
import scipy.linalg._decomp_cholesky
import scipy.linalg._decomp_lu
import scipy.linalg._decomp_qr
import scipy.linalg._solvers

import hetlapack.compat as compat
from hetlapack.compat import numpy_linalg, scipy_linalg
from hetlapack.compat._originals import numpy_functions, scipy_functions


def test_install_reaches_private_modules_and_restores():
    count = compat.install()
    try:
        assert count > 10
        assert scipy.linalg.cholesky is scipy_linalg.cholesky
        assert scipy.linalg._decomp_cholesky.cho_factor is scipy_linalg.cho_factor
        assert scipy.linalg._decomp_lu.lu_factor is scipy_linalg.lu_factor
        assert scipy.linalg._decomp_qr.qr is scipy_linalg.qr
        assert scipy.linalg._solvers.qr is scipy_linalg.qr and scipy.linalg._solvers.lu is scipy_linalg.lu
        assert np.linalg.cholesky is numpy_linalg.cholesky and np.linalg.qr is numpy_linalg.qr
        assert compat.leftover_originals() == []
        assert compat.install() == 0
    finally:
        compat.uninstall()
    assert scipy.linalg.cholesky is scipy_functions["cholesky"]
    assert scipy.linalg._solvers.qr is scipy_functions["qr"]
    assert np.linalg.qr is numpy_functions["qr"]
    assert not compat.installed()


def test_patched_context_never_recurses():
    a = np.eye(5) * 9
    with compat.patched():
        np.testing.assert_allclose(scipy.linalg.cholesky(a), 3 * np.eye(5))
        np.testing.assert_allclose(np.linalg.cholesky(a), 3 * np.eye(5))
        x = scipy.linalg.solve_continuous_lyapunov(-a, np.eye(5))
        assert np.isfinite(x).all()
    assert scipy.linalg.cholesky is scipy_functions["cholesky"]
