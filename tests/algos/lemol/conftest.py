"""One small LeMOL run through ``mopa lemol``, shared by the algorithm's and the
command's tests (compiling it is most of its cost)."""

import pytest

from mopa.cli.main import main
from tests.algos.lemol.small import SMALL_FLAGS


@pytest.fixture(scope="package")
def small_run(tmp_path_factory):
    """The folder holding ``run/`` (``--out``) and ``lemol/``
    (``--lemol_save_path``) of the run of :data:`SMALL_FLAGS`."""
    folder = tmp_path_factory.mktemp("lemol")
    argv = [*SMALL_FLAGS, "--out", str(folder / "run")]
    argv += ["--lemol_save_path", str(folder / "lemol")]
    assert main(["lemol", *argv]) == 0
    return folder
