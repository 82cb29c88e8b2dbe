"""``mopa bench beliefs``: opponent encoders' training time and the latency of one
online belief update (:mod:`mopa.bench.belief_speed`)."""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from mopa.bench import BELIEFS, ENCODERS
from mopa.cli.records import write_benchmark
from mopa.core.checks import check_count, check_counts
from mopa.core.files import check_output_file
from mopa.errors import InvalidParameterError, UnknownNameError


def add_parser(kinds: argparse._SubParsersAction) -> None:
    """Register ``mopa bench beliefs`` on the ``bench`` sub-commands."""
    parser = kinds.add_parser(
        "beliefs",
        help="opponent encoders' training time (classifier, VAE, JEPA) and the "
        "latency of one online belief update, batched",
    )
    parser.add_argument("--json", type=Path, help="also write the rows to this path")
    parser.add_argument(
        "--encoders",
        nargs="*",
        default=list(ENCODERS),
        help=f"encoders to train (default: {' '.join(ENCODERS)}; none: skip)",
    )
    parser.add_argument(
        "--beliefs",
        nargs="*",
        default=list(BELIEFS),
        help=f"belief updates to time (default: {' '.join(BELIEFS)}; none: skip)",
    )
    parser.add_argument(
        "--batches",
        nargs="+",
        type=int,
        default=[1, 1024],
        help="games updated in parallel (default: 1 1024)",
    )
    parser.add_argument(
        "--updates", type=int, help="encoder updates (default: the experiments')"
    )
    parser.add_argument(
        "--hidden",
        nargs="+",
        type=int,
        help="hidden widths of every network (default: the experiments')",
    )
    parser.add_argument(
        "--repeats", type=int, default=5, help="timed repetitions (median)"
    )
    parser.add_argument(
        "--seconds",
        type=float,
        default=0.2,
        help="about this long per timed repetition of a belief (default 0.2)",
    )
    parser.set_defaults(run=run_beliefs)


def run_beliefs(args: argparse.Namespace) -> int:
    """``mopa bench beliefs``: print the rows, optionally write them as JSON with
    the run's metadata beside them."""
    from mopa.bench.belief_speed import bench_beliefs, bench_encoders

    for flag, names, known in (
        ("--encoders", args.encoders, ENCODERS),
        ("--beliefs", args.beliefs, BELIEFS),
    ):
        unknown = [n for n in names if n not in known]
        if unknown:
            raise UnknownNameError(
                f"unknown {flag[2:-1]} {unknown[0]!r}; choose from {', '.join(known)}"
            )
    for flag, value in (("--repeats", args.repeats), ("--updates", args.updates)):
        if value is not None:
            check_count(flag, value)
    check_counts("--batches", args.batches)
    if not 0 <= args.seconds < math.inf:
        raise InvalidParameterError(
            f"--seconds must be a finite number >= 0, got {args.seconds}"
        )
    if args.hidden is not None:
        check_counts("--hidden", args.hidden)
    if args.json:
        check_output_file(args.json, "--json")
    hidden = None if args.hidden is None else tuple(args.hidden)

    def show_encoder(row):
        print(
            f"encoder {row['name']:11s} {row['num_updates']:6d} updates "
            f"{row['train_s']:8.2f} s  {row['updates_per_s']:10,.0f} updates/s "
            f"(compile {row['compile_s']:.1f} s)",
            flush=True,
        )

    def show_belief(row):
        print(
            f"belief  {row['name']:17s} B={row['batch']:<5d} "
            f"step {row['step_s'] * 1e6:9.1f} us  in scan "
            f"{row['scan_step_s'] * 1e6:9.1f} us  {row['updates_per_s']:12,.0f} "
            "updates/s",
            flush=True,
        )

    rows = bench_encoders(
        tuple(args.encoders),
        num_updates=args.updates,
        hidden=hidden,
        repeats=args.repeats,
        progress=show_encoder,
    )
    rows += bench_beliefs(
        tuple(args.beliefs),
        tuple(args.batches),
        hidden=hidden,
        repeats=args.repeats,
        min_seconds=args.seconds,
        progress=show_belief,
    )
    if args.json:
        config = {
            "encoders": list(args.encoders),
            "beliefs": list(args.beliefs),
            "batches": list(args.batches),
            "updates": args.updates,
            "hidden": None if hidden is None else list(hidden),
            "repeats": args.repeats,
            "seconds": args.seconds,
        }
        write_benchmark(args, rows, config)
    return 0
