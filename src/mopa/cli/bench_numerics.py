"""``mopa bench numerics``: training and planning speed in native and in portable
numerics, timed in the same run (:mod:`mopa.bench.numerics_cost`)."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

from mopa.cli.records import BenchmarkRecord
from mopa.core.checks import check_count
from mopa.core.files import check_output_file
from mopa.errors import InvalidParameterError

BENCHES = (
    "train --runs research_mappo_tag_intent_unaware research_iql_tag mappo:tag_intent "
    "--seeds 3 --steps 2e5",
    "planner --repeats 3",
)
"""The default benchmarks timed in both modes: the research's MAPPO and IQL
recipes and mopa's MAPPO default (three seeds each), and both planner modes."""


def add_parser(kinds: argparse._SubParsersAction) -> None:
    """Register ``mopa bench numerics`` on the ``bench`` sub-commands."""
    parser = kinds.add_parser(
        "numerics",
        help="training steps and planner decisions per second in native and in "
        "portable numerics (each a child process), the modes alternating, in one "
        "run: what portable numerics cost",
    )
    parser.add_argument("--json", type=Path, help="also write the rows to this path")
    parser.add_argument(
        "--bench",
        dest="benches",  # `bench` names the sub-command (`numerics`) in records
        action="append",
        metavar="'KIND ARGS'",
        help="a `mopa bench` command line to time in both modes (repeatable; "
        "kinds train and planner; default: "
        + "; ".join(f"'{b}'" for b in BENCHES)
        + ")",
    )
    parser.add_argument(
        "--repeats", type=int, default=3, help="repetitions per mode (median)"
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """``mopa bench numerics``: print each row's speed in both modes and their
    ratio; optionally write the rows as JSON with the run's metadata."""
    check_count("--repeats", args.repeats)
    benches = [shlex.split(b) for b in (args.benches or BENCHES)]
    for argv in benches:
        if not argv or argv[0] not in ("train", "planner"):
            given = " ".join(argv)
            raise InvalidParameterError(
                f"--bench expects 'train ARGS' or 'planner ARGS', got {given!r}"
            )
        if "--json" in argv:
            raise InvalidParameterError("--bench takes no --json: the rows come back")
    if args.json:
        check_output_file(args.json, "--json")
    from mopa.bench.numerics_cost import bench_numerics

    config = {"benches": [" ".join(b) for b in benches], "repeats": args.repeats}
    record = BenchmarkRecord(args, config)

    def measured(mode, repetition, rows):
        print(f"repetition {repetition}, {mode}: {len(rows)} rows", flush=True)

    rows = bench_numerics(benches, repeats=args.repeats, progress=measured)
    print(f"{'row':36s} {'native/s':>11s} {'portable/s':>11s} {'ratio':>6s}")
    for row in rows:
        print(
            f"{row['row']:36s} {row['native']:11,.0f} {row['portable']:11,.0f} "
            f"{row['ratio']:6.3f}"
        )
    record.finish(rows)
    return 0
