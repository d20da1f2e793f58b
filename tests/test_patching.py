"""install()/uninstall()/patched(): SciPy's and NumPy's names, private modules included, and back."""

import sys
import types

import numpy as np
import scipy.linalg
import scipy.linalg._decomp_cholesky
import scipy.linalg._decomp_lu
import scipy.linalg._decomp_qr
import scipy.linalg._solvers

import hetlapack.compat as compat
from hetlapack.compat import numpy_linalg, scipy_linalg
from hetlapack.contract.originals import numpy_functions, scipy_functions


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


def _import_binding_the_names(name: str) -> types.ModuleType:
    """A scipy module, imported now, that binds the names from ``scipy.linalg`` and ``numpy.linalg`` as SciPy's own
    modules do."""
    module = sys.modules[name] = types.ModuleType(name)
    exec("from scipy.linalg import lu_factor, cholesky\nfrom numpy.linalg import qr", module.__dict__)
    return module


def assert_originals(module: types.ModuleType) -> None:
    assert module.lu_factor is scipy_functions["lu_factor"] and module.cholesky is scipy_functions["cholesky"]
    assert module.qr is numpy_functions["qr"]


def test_uninstall_also_restores_modules_imported_while_installed():
    """A module imported while installed binds hetlapack's functions; uninstalling (or leaving ``patched()``) gives
    it back SciPy's and NumPy's."""
    name = "scipy._hetlapack_imported_while_installed"
    try:
        compat.install()
        module = _import_binding_the_names(name)
        assert module.lu_factor is scipy_linalg.lu_factor and module.qr is numpy_linalg.qr
        compat.uninstall()
        assert_originals(module)
        with compat.patched():
            module = _import_binding_the_names(name)
        assert_originals(module)
    finally:
        compat.uninstall()
        sys.modules.pop(name, None)
