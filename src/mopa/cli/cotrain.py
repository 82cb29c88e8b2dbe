"""``mopa cotrain``: the co-training loop (:mod:`mopa.cotrain`), red adapting to
blue and blue re-modelling red, generation after generation."""

from __future__ import annotations

import argparse
from pathlib import Path

from mopa.cli.league import add_backend_args, backend_from_args
from mopa.cli.records import add_record_flags

PROFILE_NAMES = ("quick", "default", "battalion_quick", "battalion")
"""The profiles of :mod:`mopa.experiments.cotrain` (named here so that building
the parser imports no JAX; a test keeps the two equal)."""


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "cotrain",
        help="run the co-training loop (red adapts, blue re-models it)",
        description="Red's population grows by a best response to blue every "
        "generation; blue (blind, remodel, fit_once) trains against it, the model "
        "blues acting through a belief over red's styles found without labels. "
        "Writes results.json, results.md, config.json, meta.json and the curves "
        "into --out; finished stages are reused when the command runs again.",
    )
    parser.add_argument(
        "--profile",
        default="default",
        choices=PROFILE_NAMES,
        help="quick: tiny budgets that check the loop; default: the full league "
        "on tag_intent; battalion(_quick): the battalion with the scripted Red "
        "family (default: %(default)s)",
    )
    parser.add_argument("--seeds", type=int, help="seeds of every blue and red")
    parser.add_argument(
        "--out", type=Path, help="output folder (default: runs/cotrain/PROFILE)"
    )
    add_backend_args(parser)
    add_record_flags(parser, lambda args: args.out)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from mopa.core.files import check_output_folder
    from mopa.errors import InvalidParameterError
    from mopa.experiments import run_experiment

    if args.seeds is not None and args.seeds < 1:
        raise InvalidParameterError(f"--seeds must be >= 1, got {args.seeds}")
    out = check_output_folder(
        args.out or Path("runs") / "cotrain" / args.profile, "--out"
    )
    with backend_from_args(args) as backend:
        run_experiment(
            "cotrain",
            args.profile,
            out,
            seeds=args.seeds,
            progress=lambda line: print(line, flush=True),
            backend=backend,
        )
    return 0
