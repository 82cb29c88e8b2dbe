"""``mopa bench train``: environment steps per second including learning, and the
trainer's GFLOP/s against a plain matmul's on the same machine."""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from mopa.cli.records import BenchmarkRecord, limit_columns
from mopa.core.files import check_output_file
from mopa.errors import InvalidParameterError


def add_parser(kinds: argparse._SubParsersAction) -> None:
    train = kinds.add_parser(
        "train",
        help="training speed: the research's MAPPO (2 x 128) and IQL recipes "
        "beside mopa's lighter defaults, seeds vmapped, compilation included; "
        "FLOPs per step and GFLOP/s against a matmul of the largest layer's shape",
    )
    train.add_argument("--json", type=Path, help="also write the rows to this path")
    train.add_argument(
        "--runs",
        nargs="+",
        metavar="ALGO:ENV|PRESET",
        help="what to train: an algorithm's default config on a game, or a preset "
        "of `mopa train --list-presets` (default: research_mappo_tag_intent_unaware "
        "research_iql_tag mappo:tag_intent mappo:tag iql:tag)",
    )
    train.add_argument("--seeds", type=int, default=3, help="seeds (default 3)")
    train.add_argument(
        "--steps", type=float, default=2e6, help="steps per seed (default 2e6)"
    )
    train.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="set a config field of every run (JSON values), e.g. --set hidden=[64]",
    )
    train.add_argument(
        "--plain-paths",
        action="store_true",
        help="also train each MAPPO row with its plain paths (autodiff through "
        "Flax's actor, jax.random.permutation), right after the fast one: what "
        "the hand-written backward pass and shuffle pay",
    )
    train.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from mopa.algos.presets import PRESETS
    from mopa.algos.registry import config_class
    from mopa.bench.train_speed import TRAIN_BENCHES, bench_train
    from mopa.envs import make

    runs = TRAIN_BENCHES
    if args.runs:
        runs = []
        for item in args.runs:
            algo, sep, env = item.partition(":")
            if sep:
                config_class(algo)
                make(env)
                runs.append((algo, env))
            elif item in PRESETS:
                runs.append(item)
            else:
                raise InvalidParameterError(
                    f"--runs expects ALGO:ENV or a preset of `mopa train "
                    f"--list-presets`, got {item!r}"
                )
        runs = tuple(runs)
    if args.seeds < 1:
        raise InvalidParameterError(f"--seeds must be >= 1, got {args.seeds}")
    if not (math.isfinite(args.steps) and args.steps >= 1 and args.steps.is_integer()):
        raise InvalidParameterError(
            f"--steps must be a positive whole number, got {args.steps}"
        )
    if args.json:
        check_output_file(args.json, "--json")
    print(
        f"{'row':34s} {'hidden':>8s} {'seeds':>5s} {'steps':>9s} {'wall_s':>7s} "
        f"{'compile_s':>9s} {'steps/s':>9s} {'devices':>7s} {'flops/step':>10s} "
        f"{'GFLOP/s':>8s} {'matmul':>16s} {'mm GFLOP/s':>10s} {'fraction':>8s}"
    )

    def show(row):
        name = row["preset"] or row["algo"] + ":" + row["env"]
        if row["paths"] == "plain":
            name += " (plain)"
        print(
            f"{name:34s} "
            f"{'x'.join(map(str, row['hidden'])):>8s} {row['seeds']:5d} "
            f"{row['steps']:9d} "
            f"{row['wall_s']:7.1f} {row['compile_s']:9.1f} {row['steps_per_s']:9.0f} "
            f"{row['devices']:7d} {row['flops_per_step']:10.3g} "
            f"{row['gflop_s']:8.2f} {limit_columns(row)}",
            flush=True,
        )

    from mopa.cli.train import _pairs, _value

    fields = {name: _value(value) for name, value in _pairs(args.set, "--set")}
    config = {
        "runs": [r if isinstance(r, str) else list(r) for r in runs],
        "seeds": args.seeds,
        "steps": int(args.steps),
        "set": fields,
        "plain_paths": args.plain_paths,
    }
    record = BenchmarkRecord(args, config)

    def measured(row):
        show(row)
        record.add(row)

    rows = bench_train(
        runs,
        seeds=args.seeds,
        steps=int(args.steps),
        progress=measured,
        plain_paths=args.plain_paths,
        **fields,
    )
    record.finish(rows)
    return 0
