"""``mopa bench ray``: one league tournament in this process and on Ray workers
(:mod:`mopa.bench.ray_speed`)."""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

from mopa.cli.records import write_benchmark
from mopa.core.checks import check_count
from mopa.core.files import check_output_file


def add_parser(kinds: argparse._SubParsersAction) -> None:
    """Register ``mopa bench ray`` on the ``bench`` sub-commands."""
    parser = kinds.add_parser(
        "ray",
        help="a league tournament (one job per cell) in this process and on Ray "
        "workers: wall times, speed-up, and a bit-for-bit comparison",
    )
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument(
        "--workers", type=int, default=2, help="Ray workers (default 2)"
    )
    parser.add_argument(
        "--players", type=int, default=2, help="predator checkpoints (default 2)"
    )
    parser.add_argument(
        "--opponents", type=int, default=4, help="prey checkpoints (default 4)"
    )
    parser.add_argument(
        "--episodes",
        type=int,
        default=8192,
        help="episodes per cell (default 8192)",
    )
    parser.add_argument(
        "--repeats", type=int, default=5, help="timed repetitions (median)"
    )
    parser.add_argument(
        "--ray-address", help="a running Ray cluster (default: a local instance)"
    )
    parser.set_defaults(run=run_ray)


def run_ray(args: argparse.Namespace) -> int:
    """``mopa bench ray``: print the figures, optionally write them as JSON with
    the run's metadata beside them."""
    for flag, value in (
        ("--workers", args.workers),
        ("--players", args.players),
        ("--opponents", args.opponents),
        ("--episodes", args.episodes),
        ("--repeats", args.repeats),
    ):
        check_count(flag, value)
    if args.json:
        check_output_file(args.json, "--json")
    from mopa.bench.ray_speed import bench_ray
    from mopa.league.backend import check_ray_address

    check_ray_address(args.ray_address, "--ray-address")

    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as workdir:
        row = bench_ray(
            workdir,
            num_workers=args.workers,
            num_players=args.players,
            num_opponents=args.opponents,
            n_episodes=args.episodes,
            repeats=args.repeats,
            address=args.ray_address,
        )
    row["load_before"] = load_before
    row["load_after"] = os.getloadavg()[0]
    print(
        f"{row['jobs']} jobs x {row['n_episodes']} episodes: in-process "
        f"{row['inprocess_s']:.2f} s, {row['num_workers']} Ray workers "
        f"{row['ray_s']:.2f} s, speed-up {row['speedup']:.2f}x; with compilation: "
        f"{row['inprocess_cold_s']:.2f} s vs {row['ray_start_s']:.2f} s start-up + "
        f"{row['ray_cold_s']:.2f} s ({row['speedup_cold']:.2f}x); identical: "
        f"{row['identical']}; load {row['load_before']:.1f} -> "
        f"{row['load_after']:.1f}"
    )
    if args.json:
        config = {
            "workers": args.workers,
            "players": args.players,
            "opponents": args.opponents,
            "episodes": args.episodes,
            "repeats": args.repeats,
        }
        write_benchmark(args, row, config)
    return 0
