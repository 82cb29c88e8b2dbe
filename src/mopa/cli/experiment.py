"""``mopa experiment NAME``: run a registered experiment and write its results,
config, run metadata and plots into a folder."""

from __future__ import annotations

import argparse
from pathlib import Path

from mopa.cli.records import add_record_flags
from mopa.errors import InvalidParameterError


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "experiment",
        help="run a named experiment (see --list)",
        description="Run a registered experiment with one of its profiles; writes "
        "results.json, results.md, config.json, meta.json and plots into --out. "
        "Finished stages are reused when the same command runs again, and redone "
        "when their config changed.",
    )
    parser.add_argument("name", nargs="?", help="experiment name")
    parser.add_argument(
        "--profile",
        "--preset",
        dest="profile",
        help="profile, e.g. quick or default (default: the experiment's own)",
    )
    parser.add_argument("--seeds", type=int, help="number of seeds (overrides preset)")
    parser.add_argument(
        "--draws",
        type=int,
        help="run the whole pipeline this many times (2 or more), from base seeds "
        "seed, seed+1, ..., and pool the draws (results.json: the pooled figures, "
        "with intervals that count the variation between draws, and each draw's)",
    )
    parser.add_argument(
        "--out", type=Path, help="output folder (default: runs/NAME/PRESET)"
    )
    parser.add_argument(
        "--list", action="store_true", help="list experiments and their profiles"
    )
    add_record_flags(parser, lambda args: args.out)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from mopa.core.files import check_output_folder
    from mopa.experiments import (
        get_experiment,
        get_preset,
        registered_experiments,
        run_experiment,
    )
    from mopa.runs.registry import check_draws

    if args.list:
        for name in registered_experiments():
            experiment = get_experiment(name)
            presets = ", ".join(
                f"{p}*" if p == experiment.default_preset else p
                for p in experiment.presets
            )
            print(f"{name:12s} [{presets}]  {experiment.description}")
        return 0
    if args.name is None:
        raise InvalidParameterError("name an experiment, or pass --list")
    experiment = get_experiment(args.name)
    preset = args.profile or experiment.default_preset
    if args.seeds is not None and args.seeds < 1:
        raise InvalidParameterError(f"--seeds must be >= 1, got {args.seeds}")
    check_draws(experiment, get_preset(args.name, preset), args.draws)
    default = (
        Path("runs")
        / args.name
        / (preset if args.draws is None else f"{preset}_draws{args.draws}")
    )
    out = check_output_folder(args.out or default, "--out")
    run_experiment(
        args.name, preset, out, seeds=args.seeds, progress=print, draws=args.draws
    )
    return 0
