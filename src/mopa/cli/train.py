"""``mopa train``: co-train teams with IQL, OA-IQL, MAPPO or IPPO."""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

from mopa.errors import InvalidParameterError


def add_parser(commands: argparse._SubParsersAction) -> None:
    train = commands.add_parser(
        "train",
        help="co-train teams (IQL, OA-IQL, MAPPO, IPPO), seeds in parallel",
        description="Train one learner per team, every seed at once. Resumes an "
        "unfinished run found in --out.",
    )
    train.add_argument("--algo", help="iql, oa_iql, mappo or ippo")
    train.add_argument("--env", help="game name (default tag), or jaxmarl:NAME")
    train.add_argument("--seeds", type=int, help="seeds trained at once (default 3)")
    train.add_argument(
        "--steps", type=float, help="environment steps per seed, e.g. 2e6"
    )
    train.add_argument("--seed", type=int, help="base random seed (default 0)")
    train.add_argument(
        "--preset", help="a named run of the research (see --list-presets)"
    )
    train.add_argument(
        "--list-presets", action="store_true", help="list the presets and exit"
    )
    train.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="set any config field (JSON values), e.g. --set lr=3e-4",
    )
    train.add_argument(
        "--env-set",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="set a game field, e.g. --env-set resource_placement=corners",
    )
    train.add_argument(
        "--frozen",
        action="append",
        default=[],
        metavar="TEAM=SOURCE",
        help="a team that does not learn: random, a checkpoint path, or "
        "pool:PATH[,PATH...] (every seed of those checkpoints; each game draws one "
        "per episode)",
    )
    train.add_argument("--out", type=Path, help="run folder (default runs/<name>)")
    train.add_argument(
        "--quiet", action="store_true", help="no progress lines, only the summary"
    )
    train.add_argument(
        "--tensorboard",
        type=Path,
        metavar="DIR",
        help="also log metrics to TensorBoard event files (needs tensorboardX)",
    )
    train.add_argument(
        "--wandb", metavar="PROJECT", help="also log metrics to Weights & Biases"
    )
    train.set_defaults(run=run)


def _value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def _pairs(items: list[str], flag: str) -> list[tuple[str, Any]]:
    pairs = []
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise InvalidParameterError(f"{flag} expects FIELD=VALUE, got {item!r}")
        pairs.append((name, value))
    return pairs


def build_config(args: argparse.Namespace):
    """The run's config from ``--preset`` and/or the flags (flags win)."""
    from mopa.algos.presets import preset
    from mopa.algos.registry import config_class

    if args.preset:
        base = preset(args.preset).to_dict()
        if args.algo and args.algo != base["algo"]:
            raise InvalidParameterError(
                f"--algo {args.algo} conflicts with preset {args.preset} "
                f"({base['algo']})"
            )
    elif args.algo:
        base = {"algo": args.algo}
    else:
        raise InvalidParameterError("give --algo or --preset")
    fields = dict(base)
    if args.env:
        fields["env"] = args.env
    if args.seeds is not None:
        fields["num_seeds"] = args.seeds
    if args.steps is not None:
        if not math.isfinite(args.steps) or args.steps != int(args.steps):
            raise InvalidParameterError(
                f"--steps must be a whole number, got {args.steps}"
            )
        fields["total_steps"] = int(args.steps)
    if args.seed is not None:
        fields["seed"] = args.seed
    for name, value in _pairs(args.set, "--set"):
        if name == "algo":
            raise InvalidParameterError("choose the algorithm with --algo, not --set")
        fields[name] = _value(value)
    env_overrides = _pair_dict(fields.get("env_overrides", ()), "env_overrides")
    for name, value in _pairs(args.env_set, "--env-set"):
        env_overrides[name] = _value(value)
    fields["env_overrides"] = tuple(env_overrides.items())
    frozen = _pair_dict(fields.get("frozen", ()), "frozen")
    for team, source in _pairs(args.frozen, "--frozen"):
        frozen[team] = source
    fields["frozen"] = tuple(frozen.items())
    return config_class(fields["algo"]).from_dict(fields)


def _pair_dict(value: Any, name: str) -> dict[Any, Any]:
    """A config's ``(key, value)`` pairs as a dict the flags can add to."""
    try:
        return dict(value)
    except (TypeError, ValueError):
        raise InvalidParameterError(
            f"{name} must be a list of (field, value) pairs, got {value!r}"
        ) from None


def run(args: argparse.Namespace) -> int:
    from mopa.algos.presets import PRESETS

    if args.list_presets:
        width = max(map(len, PRESETS))
        for name, (description, config) in PRESETS.items():
            print(f"{name:<{width}}  {description} ({config.algo}, {config.env})")
        return 0
    config = build_config(args)
    from mopa.algos.driver import run_training
    from mopa.cli.tracking import require_tracker, tensorboard_logger, wandb_logger
    from mopa.core.files import check_output_folder
    from mopa.envs import make

    make(config.env, **dict(config.env_overrides))  # unknown game or field: fail fast
    name = args.preset or f"{config.algo}_{config.env.replace(':', '_')}"
    out = check_output_folder(args.out or Path("runs") / name, "--out")
    if args.tensorboard:
        require_tracker("tensorboard")
        check_output_folder(args.tensorboard, "--tensorboard")
    if args.wandb:
        require_tracker("wandb")
    progress = None if args.quiet else _print_progress
    loggers = None

    def on_chunk(first_update, rows):
        nonlocal loggers
        if loggers is None:  # made after the first chunk: the run folder was accepted
            loggers = []
            if args.tensorboard:
                loggers.append(
                    tensorboard_logger(args.tensorboard, config.steps_per_update)
                )
            if args.wandb:
                loggers.append(
                    wandb_logger(args.wandb, config.to_dict(), config.steps_per_update)
                )
        for log in loggers:
            log(first_update, rows)

    result = run_training(config, out=out, progress=progress, on_chunk=on_chunk)
    _print_summary(result)
    return 0


def _format_steps(n: float) -> str:
    return f"{n / 1e6:.2f}M" if n >= 1e6 else f"{n / 1e3:.0f}k"


def _print_progress(p) -> None:
    done = p.updates / p.num_updates
    bar = "#" * int(round(20 * done))
    returns = "  ".join(
        f"{name.split('/', 1)[1]} {value:+.1f}"
        for name, value in p.recent.items()
        if name.startswith("return/") and math.isfinite(value)
    )
    remaining = p.elapsed_s / max(p.env_steps, 1) * (p.total_env_steps - p.env_steps)
    print(
        f"[{bar:<20}] {100 * done:5.1f}%  {_format_steps(p.env_steps)}/"
        f"{_format_steps(p.total_env_steps)} steps per seed  "
        f"{p.chunk_steps_per_s / 1e3:.1f}k steps/s  ETA {remaining:.0f}s  "
        f"return {returns}",
        file=sys.stderr,
        flush=True,
    )


def _print_summary(result) -> None:
    final = result.summary["final"]
    print(
        f"trained {result.config.algo} on {result.config.env}: "
        f"{result.config.num_seeds} seeds x "
        f"{result.summary['env_steps_per_seed']:,} steps in {result.wall_s:.0f}s"
        + (
            f" (resumed after chunk {result.resumed_from_chunk})"
            if result.resumed_from_chunk
            else ""
        )
    )
    for name, stats in final.items():
        if stats["mean"] is None or name == "episodes":
            continue
        print(f"  {name:<28} {stats['mean']:+.3f} +- {stats['std']:.3f}")
    if result.out is not None:
        print(f"run folder: {result.out}")
