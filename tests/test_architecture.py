"""The package's layout stays readable top-down: the import-linter contracts in ``pyproject.toml`` (each package
imports only the layers below it, no import circle among the modules of any package, private modules stay in their
package) hold on the code as it is, and every module stays small."""

import re
from pathlib import Path

import numpy as np
import pytest
from importlinter.cli import lint_imports

pytestmark = pytest.mark.own_machinery

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"

#: The most lines a module of the package may have (DESIGN.md, "Small modules"): past it, a module holds more than
#: one job and is to be split by job.
MODULE_LINES = 800


def test_the_import_contracts_hold(capsys):
    status = lint_imports(config_filename=str(PYPROJECT), no_cache=True, no_logo=True)
    output = capsys.readouterr().out
    assert status == 0, output
    assert "0 broken" in output and output.count("KEPT") == 3


def test_every_module_of_the_package_is_small():
    package = PYPROJECT.parent / "hetlapack"
    long = {str(file.relative_to(package)): count for file in sorted(package.rglob("*.py"))
            if (count := len(file.read_text().splitlines())) > MODULE_LINES}
    assert long == {}


def test_paths_are_objects_not_names_compared_as_strings():
    """A path is one object (``hetlapack.dispatch.paths``) that says what it can run and runs it: no module branches
    on a path's name, and every name a user may force is one registered object."""
    from hetlapack.options import PATHS
    from hetlapack.dispatch.paths import BY_NAME

    package = PYPROJECT.parent / "hetlapack"
    compared = [f"{file.relative_to(package)}:{number}" for file in sorted(package.rglob("*.py"))
                for number, line in enumerate(file.read_text().splitlines(), 1)
                if re.search(r"path\s*[!=]=\s*[\"']", line)]
    assert compared == []
    assert tuple(BY_NAME) == PATHS and all(path.name == name for name, path in BY_NAME.items())


def test_a_plan_runs_on_the_object_its_path_names():
    from hetlapack.dispatch import Request, choose
    from hetlapack.dispatch.paths import BY_NAME, HOST

    plan = choose(Request("potrf", (3, 3), np.dtype("d")))
    assert plan.runner is BY_NAME[plan.path] is HOST and HOST.own_call
