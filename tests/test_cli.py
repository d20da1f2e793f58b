"""The ``hetlapack`` command line."""

from hetlapack.cli import main


def test_info(capsys):
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    assert "CPU:" in out and "BLAS:" in out and "GPUs:" in out and "MPI:" in out


def test_demo_small(capsys):
    assert main(["demo", "--n", "200", "--batch", "50", "--small", "4", "--repeat", "1"]) == 0
    out = capsys.readouterr().out
    assert "cholesky" in out and "lu_factor" in out and "qr" in out and "vs SciPy" in out
    residuals = [float(line.split()[3]) for line in out.splitlines() if line.split()[:1] in (["cholesky"], ["lu_factor"], ["qr"]) and len(line.split()) == 6]
    assert residuals and max(residuals) < 50
