"""``mopa bench env``: environment steps per second, with JaxMARL in the same run."""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path

from mopa.cli import bench_beliefs, bench_ray, bench_train
from mopa.cli.records import (
    BenchmarkRecord,
    add_record_flags,
    limit_columns,
    write_benchmark,
)
from mopa.core.checks import check_count, check_counts
from mopa.core.files import check_output_file
from mopa.errors import UnknownNameError


def add_parser(commands: argparse._SubParsersAction) -> None:
    bench = commands.add_parser("bench", help="speed benchmarks")
    kinds = bench.add_subparsers(dest="bench", metavar="BENCH", required=True)
    env = kinds.add_parser(
        "env",
        help="environment steps per second for every pursuit game, the battalion "
        "games and JaxMARL's simple_tag, at several batch sizes",
    )
    env.add_argument(
        "--json", type=Path, help="also write the rows as JSON to this path"
    )
    env.add_argument(
        "--envs",
        nargs="+",
        help="games to measure (default: every pursuit game, battalion and "
        "multi_battalion)",
    )
    env.add_argument(
        "--batches",
        nargs="+",
        type=int,
        default=[1, 64, 1024, 4096],
        help="batch sizes (default: 1 64 1024 4096)",
    )
    env.add_argument(
        "--repeats", type=int, default=5, help="timed repetitions (median)"
    )
    env.add_argument(
        "--steps",
        type=int,
        default=400_000,
        help="about this many steps per timed repetition (default 400000)",
    )
    env.add_argument(
        "--no-jaxmarl", action="store_true", help="skip the JaxMARL reference"
    )
    env.set_defaults(run=run_env)
    bench_train.add_parser(kinds)
    _add_planner_parser(kinds)
    bench_beliefs.add_parser(kinds)
    bench_ray.add_parser(kinds)
    for kind in kinds.choices.values():  # every benchmark writes its rows to --json
        add_record_flags(kind, lambda args: args.json)


def _add_planner_parser(kinds: argparse._SubParsersAction) -> None:
    planner = kinds.add_parser(
        "planner",
        help="Monte-Carlo lookahead decisions per second for 3 predators on tag, "
        "against the greedy policy and the bare game in the same run; FLOPs per "
        "decision and GFLOP/s against a matmul of the largest layer application",
    )
    planner.add_argument("--json", type=Path, help="also write the rows to this path")
    planner.add_argument(
        "--modes",
        nargs="+",
        default=["per_agent", "joint"],
        help="planner modes (default: per_agent joint)",
    )
    planner.add_argument(
        "--batch", type=int, default=100, help="games in parallel (default 100)"
    )
    planner.add_argument(
        "--rollouts", type=int, default=5, help="rollouts per candidate (default 5)"
    )
    planner.add_argument(
        "--horizon", type=int, default=3, help="steps per rollout (default 3)"
    )
    planner.add_argument(
        "--hidden",
        nargs="+",
        type=int,
        default=[128, 128],
        help="Q-network hidden widths (default 128 128)",
    )
    planner.add_argument(
        "--repeats", type=int, default=5, help="timed repetitions (median)"
    )
    planner.set_defaults(run=run_planner)


def run_planner(args: argparse.Namespace) -> int:
    from mopa.bench.planner_speed import bench_planner
    from mopa.planning import MODES

    unknown = [mode for mode in args.modes if mode not in MODES]
    if unknown:
        raise UnknownNameError(
            f"unknown planner mode {unknown[0]!r}; choose from {', '.join(MODES)}"
        )
    for name, value in (
        ("--batch", args.batch),
        ("--rollouts", args.rollouts),
        ("--horizon", args.horizon),
        ("--repeats", args.repeats),
    ):
        check_count(name, value)
    check_counts("--hidden", args.hidden)
    if args.json:
        check_output_file(args.json, "--json")
    from mopa.envs import make
    from mopa.eval.evaluate import check_games_fit

    # every game's rollouts are games at once (times its candidates: more still)
    check_games_fit(*make("tag"), args.batch * args.rollouts, "--batch x --rollouts")
    print(
        f"{'mode':9s} {'batch':>5s} {'cands':>5s} {'decisions/s':>12s} "
        f"{'greedy/s':>10s} {'slowdown':>8s} {'imagined/s':>11s} {'env/s':>11s} "
        f"{'sim_frac':>8s} {'flops/dec':>10s} {'GFLOP/s':>8s} {'matmul':>16s} "
        f"{'mm GFLOP/s':>10s} {'fraction':>8s}"
    )

    def show(row):
        print(
            f"{row['mode']:9s} {row['batch']:5d} {row['candidates']:5d} "
            f"{row['decisions_per_s']:12,.0f} {row['greedy_decisions_per_s']:10,.0f} "
            f"{row['planner_slowdown']:8.0f} {row['imagined_steps_per_s']:11,.0f} "
            f"{row['env_steps_per_s']:11,.0f} {row['sim_fraction']:8.2f} "
            f"{row['flops_per_decision']:10.3g} {row['gflop_s']:8.2f} "
            f"{limit_columns(row)}",
            flush=True,
        )

    config = {
        "modes": list(args.modes),
        "batch": args.batch,
        "num_rollouts": args.rollouts,
        "horizon": args.horizon,
        "hidden": list(args.hidden),
        "repeats": args.repeats,
    }
    record = BenchmarkRecord(args, config)

    def measured(row):
        show(row)
        record.add(row)

    rows = bench_planner(
        modes=tuple(args.modes),
        batch=args.batch,
        num_rollouts=args.rollouts,
        horizon=args.horizon,
        hidden=tuple(args.hidden),
        repeats=args.repeats,
        progress=measured,
    )
    record.finish(rows)
    return 0


def run_env(args: argparse.Namespace) -> int:
    from mopa.bench.env_speed import BENCH_ENVS, bench_env, speedups

    envs = tuple(args.envs or BENCH_ENVS)
    unknown = [name for name in envs if name not in BENCH_ENVS]
    if unknown:
        raise UnknownNameError(
            f"unknown game {unknown[0]!r} for bench env; "
            f"choose from {', '.join(BENCH_ENVS)}"
        )
    for name, value in (("--repeats", args.repeats), ("--steps", args.steps)):
        check_count(name, value)
    check_counts("--batches", args.batches)
    if args.json:
        check_output_file(args.json, "--json")
    from mopa.envs import make
    from mopa.eval.evaluate import check_games_fit

    for name in envs:  # the largest batch of each game must fit in memory
        check_games_fit(*make(name), max(args.batches), "--batches")
    include_jaxmarl = not args.no_jaxmarl
    if include_jaxmarl and importlib.util.find_spec("jaxmarl") is None:
        print("jaxmarl is not installed (pip install 'mopa[dev]'): measuring mopa only")
        include_jaxmarl = False

    print(f"{'env':14s} {'impl':8s} {'batch':>5s}  steps/s")
    rows = bench_env(
        envs=envs,
        batches=tuple(args.batches),
        repeats=args.repeats,
        target_steps=args.steps,
        include_jaxmarl=include_jaxmarl,
        progress=print,
    )
    ratios = speedups(rows)
    for batch, ratio in ratios.items():
        print(f"tag speed-up over JaxMARL simple_tag at batch {batch}: {ratio:.2f}x")
    if args.json:
        config = {
            "envs": list(envs),
            "batches": list(args.batches),
            "repeats": args.repeats,
            "steps": args.steps,
            "jaxmarl": include_jaxmarl,
            "speedup_tag": {str(b): r for b, r in ratios.items()},
        }
        write_benchmark(args, rows, config)
    return 0
