"""The ``mopa`` executable: chooses the process's numerics before NumPy or JAX is
loaded (:mod:`mopa.core.numerics`), then runs :func:`mopa.cli.main.main`.

The mode is ``--numerics MODE`` given before the command, else the
``MOPA_NUMERICS`` variable, else ``portable``. Only this module and
:mod:`mopa.core.numerics` are imported before the environment is set.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from mopa.core import numerics


def numerics_choice(argv: Sequence[str]) -> str:
    """The mode asked for by ``argv`` (``--numerics MODE`` or ``--numerics=MODE``
    among the options before the command), else by ``MOPA_NUMERICS``, else
    ``portable``. An unknown value is returned as it is, for the parser to refuse."""
    for i, token in enumerate(argv):
        if not token.startswith("-"):
            break  # the command: its own options follow
        if token == "--numerics" and i + 1 < len(argv):
            return argv[i + 1]
        if token.startswith("--numerics="):
            return token.partition("=")[2]
    return os.environ.get(numerics.ENVIRONMENT_VARIABLE, "portable")


def main(argv: Sequence[str] | None = None) -> int:
    """Set up the numerics, then run the command line; returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    mode = numerics_choice(argv)
    if mode in numerics.MODES:  # anything else: the parser refuses it, in one line
        numerics.prepare_environment(mode)
        if mode == "portable":
            numerics.install_bounded_dots()
    from mopa.cli.main import main as run_command

    return run_command(argv)
