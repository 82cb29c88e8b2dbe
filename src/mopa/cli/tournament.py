"""``mopa tournament``: cross-play trained runs of one game, every policy of the
first team (side A, rows) against every policy of the second (side B, columns)."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from mopa.errors import CheckpointError, InvalidParameterError

RANDOM = "random"
"""A RUN that stands for a uniform random player."""


def add_parser(commands: argparse._SubParsersAction) -> None:
    tournament = commands.add_parser(
        "tournament",
        help="cross-play trained runs: side A (first team) vs side B (second team)",
        description="Play every run of side A (the game's first team, e.g. "
        "predator) against every run of side B (its second team, e.g. prey), for "
        "every seed pairing, in one jitted call. A RUN is a run folder or "
        "checkpoint.msgpack written by `mopa train`, or 'random'. Writes "
        "tournament.json, tournament.md, heatmap.png, config.json and meta.json "
        "to --out and prints the table.",
    )
    tournament.add_argument(
        "--side-a", nargs="+", required=True, metavar="RUN", help="row players"
    )
    tournament.add_argument(
        "--side-b", nargs="+", required=True, metavar="RUN", help="column players"
    )
    tournament.add_argument(
        "--episodes",
        type=int,
        default=100,
        help="episodes per seed pair and cell (default 100)",
    )
    tournament.add_argument(
        "--pairing",
        default="all",
        help="all: every seed against every seed; paired: seed i against seed i "
        "(default all)",
    )
    tournament.add_argument("--seed", type=int, default=0, help="random seed")
    tournament.add_argument(
        "--metric",
        default="captures",
        help="what the table and heatmap show: a game total such as captures, or "
        "return/<team> (default captures)",
    )
    tournament.add_argument(
        "--env",
        help="the game (default: the checkpoints' game; needed when every RUN is "
        "random)",
    )
    tournament.add_argument(
        "--sample",
        action="store_true",
        help="sample actor policies' actions instead of taking their mode",
    )
    tournament.add_argument("--out", type=Path, required=True, help="output folder")
    tournament.set_defaults(run=run)


def _checkpoint_path(run: str) -> Path:
    from mopa.core.checkpoint import POLICY_FILE

    path = Path(run)
    return path / POLICY_FILE if path.is_dir() else path


def _entry_name(run: str) -> str:
    path = Path(run)
    if path.is_dir():
        return path.resolve().name
    if path.name == "checkpoint.msgpack":
        return path.resolve().parent.name
    return path.stem


def _read_checkpoints(runs: list[str]) -> dict[str, Any]:
    """Every distinct non-random RUN's :class:`~mopa.policy.PolicyFile`."""
    from mopa.policy import read_policy_file

    return {
        run: read_policy_file(_checkpoint_path(run))
        for run in dict.fromkeys(runs)
        if run != RANDOM
    }


def _game(checkpoints: dict[str, Any], env_name: str | None):
    """The one game (name, overrides) of every checkpoint and ``--env``."""
    games = {}
    for run, data in checkpoints.items():
        overrides = data.env_overrides
        games.setdefault(
            (data.env, json.dumps(overrides, sort_keys=True)), (run, overrides)
        )
    if len(games) > 1:
        described = "; ".join(
            f"{run} is {name}" + (f" {overrides}" if overrides else "")
            for (name, _), (run, overrides) in games.items()
        )
        raise InvalidParameterError(
            f"every run must be for the same game, got: {described}"
        )
    if games:
        (name, _), (run, overrides) = next(iter(games.items()))
        if env_name is not None and env_name != name:
            raise InvalidParameterError(
                f"--env {env_name} does not match {run}, a run of {name}"
            )
        return name, overrides
    if env_name is None:
        raise InvalidParameterError("give --env when every RUN is random")
    return env_name, {}


def _entry(run, data, env, team: int, side: str, greedy: bool, name: str):
    from mopa.envs.spaces import Discrete
    from mopa.eval import TournamentEntry
    from mopa.players import PolicyPlayer
    from mopa.policy import PolicySpec

    team_name = env.team_names[team]
    if run == RANDOM:
        space = env.action_space(team)
        if not isinstance(space, Discrete):
            raise InvalidParameterError(
                f"random players need discrete actions; team {team_name!r} of "
                f"{env.name} has continuous ones"
            )
        spec = PolicySpec(
            kind="random",
            num_agents=env.team_sizes[team],
            obs_size=int(env.observation_space(team).shape[0]),
            num_actions=int(space.n),
        )
        return TournamentEntry(name, PolicyPlayer(spec), {})
    if team_name not in data.teams:
        raise CheckpointError(
            f"{run} has no {team_name} policy (that team was frozen or random "
            f"while training; it holds {sorted(data.teams)}), so it cannot play side "
            f"{side}"
        )
    spec, params = data.teams[team_name]
    return TournamentEntry(name, PolicyPlayer(spec, greedy), params)


def _names(runs: list[str], side: str) -> list[str]:
    names = [RANDOM if run == RANDOM else _entry_name(run) for run in runs]
    names = [
        run if names.count(name) > 1 else name
        for run, name in zip(runs, names, strict=True)
    ]
    for name in names:
        if names.count(name) > 1:
            raise InvalidParameterError(f"--side-{side.lower()} lists {name} twice")
    return names


def run(args: argparse.Namespace) -> int:
    from mopa.core.checks import check_count, check_seed
    from mopa.core.files import check_output_folder

    check_count("--episodes", args.episodes)
    check_seed("--seed", args.seed)
    check_output_folder(args.out, "--out")
    from mopa.eval.tournament import PAIRINGS

    if args.pairing not in PAIRINGS:
        raise InvalidParameterError(
            f"--pairing must be one of {PAIRINGS}, got {args.pairing!r}"
        )
    import jax

    from mopa.core.files import write_json
    from mopa.core.runinfo import run_metadata
    from mopa.envs import make
    from mopa.envs.base import episode_sum_keys
    from mopa.eval import play_tournament
    from mopa.report.tournament import (
        plot_tournament_heatmap,
        save_tournament,
        save_tournament_markdown,
    )

    checkpoints = _read_checkpoints([*args.side_a, *args.side_b])
    env_name, overrides = _game(checkpoints, args.env)
    env, params = make(env_name, **overrides)
    if env.num_teams != 2:
        raise InvalidParameterError(
            f"a tournament needs a two-team game; {env.name} has teams {env.team_names}"
        )
    metrics = [
        *episode_sum_keys(env, params),
        *(f"return/{team}" for team in env.team_names),
    ]
    if args.metric not in metrics:
        raise InvalidParameterError(
            f"--metric must be one of {metrics} for {env_name}, got {args.metric!r}"
        )
    sides = []
    for side, runs, team in (("A", args.side_a, 0), ("B", args.side_b, 1)):
        sides.append(
            [
                _entry(run, checkpoints.get(run), env, team, side, not args.sample, n)
                for run, n in zip(runs, _names(runs, side), strict=True)
            ]
        )
    config = {
        "side_a": list(args.side_a),
        "side_b": list(args.side_b),
        "env": env_name,
        "env_overrides": overrides,
        "episodes": args.episodes,
        "pairing": args.pairing,
        "seed": args.seed,
        "metric": args.metric,
        "sample": args.sample,
    }
    meta = run_metadata(config)  # the source as the run starts
    start = time.perf_counter()
    result = play_tournament(
        env,
        params,
        sides[0],
        sides[1],
        jax.random.key(args.seed),
        num_episodes=args.episodes,
        pairing=args.pairing,
    )
    wall_s = time.perf_counter() - start

    out = args.out
    save_tournament(result, out / "tournament.json")
    save_tournament_markdown(result, out / "tournament.md", args.metric)
    plot_tournament_heatmap(result, out / "heatmap.png", args.metric)
    write_json(out / "config.json", config)
    write_json(out / "meta.json", {**meta, "wall_s": wall_s})
    print(result.to_markdown(args.metric), end="")
    print(
        f"\n{len(result.row_names)} x {len(result.column_names)} cells in "
        f"{wall_s:.1f}s; wrote {out}"
    )
    return 0
