"""``mopa reproduce NAME``: the one command that reproduces a research result from
nothing trained (training, encoders, evaluation, report), printing progress, with
finished stages reused when run again."""

from __future__ import annotations

import argparse
from pathlib import Path

from mopa.cli.records import add_record_flags

REPRODUCIBLE = ("intent",)
"""Experiments ``mopa reproduce`` runs (each registered with ``quick``,
``default`` and ``mopa`` profiles)."""


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "reproduce",
        help="reproduce a research result end to end (e.g. intent)",
        description="Train, evaluate and report one research result. Writes "
        "results.json, results.md, plots and report.html into --out; finished "
        "stages are reused when the command runs again, and redone when their "
        "config changed.",
    )
    parser.add_argument("name", choices=REPRODUCIBLE, help="the result to reproduce")
    parser.add_argument(
        "--profile",
        default="default",
        choices=("quick", "default", "mopa"),
        help="quick: tiny budgets that check the pipeline in minutes; default: "
        "the full run on the research's training settings; mopa: the full run on "
        "mopa's lighter ones (default: %(default)s)",
    )
    parser.add_argument(
        "--out", type=Path, help="output folder (default: runs/NAME/PROFILE)"
    )
    add_record_flags(parser, lambda args: args.out)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from mopa.core.files import check_output_folder
    from mopa.experiments import run_experiment

    out = check_output_folder(
        args.out or Path("runs") / args.name / args.profile, "--out"
    )
    print(f"mopa reproduce {args.name} --profile {args.profile} -> {out}", flush=True)
    run_experiment(
        args.name, args.profile, out, progress=lambda line: print(line, flush=True)
    )
    print(f"open {out / 'report.html'}", flush=True)
    return 0
