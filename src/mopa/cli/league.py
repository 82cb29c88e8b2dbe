"""``mopa league``: train, evaluate, rate, and manage a league directory (its
pool, registry and checkpoint manifest) from the command line.

Every subcommand works on one league directory (``--league``), whose SQLite store
(:mod:`mopa.league.store`) holds ratings, matches, pools, registry and manifest.
The listings (``ratings``, ``pool``, ``registry list`` and ``get``, ``export``
without ``--import``) only read it and never create or change a file; a missing
league is an error there, as it is for ``prune`` and ``registry remove``.
``evaluate``, ``tournament`` and ``train --seeds`` split their work into
independent jobs that run in this process or on Ray (``--backend ray``,
:mod:`mopa.league.backend`).
"""

from __future__ import annotations

import argparse
import functools
import json
from pathlib import Path
from typing import Any

from mopa.errors import InvalidParameterError


def add_parser(commands: argparse._SubParsersAction) -> None:
    league = commands.add_parser(
        "league",
        help="co-training leagues: train, evaluate, ratings, pool, registry, prune, "
        "export",
        description="Train a league learner, evaluate checkpoints (wins, draws and "
        "losses from the game's own end signals), and inspect or manage a league "
        "directory.",
    )
    sub = league.add_subparsers(
        dest="league_command", metavar="SUBCOMMAND", required=True
    )

    train = sub.add_parser("train", help="train a learner (see mopa.league.train)")
    _league_arg(train)
    train.add_argument("--game", default="battalion_vs_red")
    train.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="a TrainingConfig field (JSON value), repeatable",
    )
    train.add_argument(
        "--game-kwarg",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="a game override (JSON value), repeatable",
    )
    train.add_argument("--self-play", action="store_true", help="enable self-play")
    train.add_argument("--resume", action="store_true", help="resume --run-id")
    train.add_argument("--run-id", default="run")
    train.add_argument(
        "--rate-against",
        nargs="*",
        default=[],
        metavar="OPPONENT",
        help="rate the learner against these opponents after every chunk",
    )
    train.add_argument(
        "--seeds",
        nargs="+",
        type=int,
        metavar="SEED",
        help="train one run per seed, run ids <run-id>-s<SEED>, as separate jobs",
    )
    add_backend_args(train)
    train.set_defaults(run=_train)

    evaluate = sub.add_parser(
        "evaluate",
        help="evaluate checkpoints against opponents",
        description="Evaluate every checkpoint against every opponent, one job per "
        "pair. With one checkpoint the JSON maps opponent -> result; with several, "
        "checkpoint -> opponent -> result.",
    )
    evaluate.add_argument(
        "checkpoint", nargs="+", help="policy checkpoints or run folders"
    )
    evaluate.add_argument(
        "--opponent",
        nargs="+",
        default=["scripted_l5"],
        help="scripted_l1..scripted_l5, random, or checkpoint paths",
    )
    evaluate.add_argument("--n-episodes", type=int, default=50)
    evaluate.add_argument("--seed", type=int, default=0)
    evaluate.add_argument("--stochastic", action="store_true")
    evaluate.add_argument("--league", help="record the games as rated matches here")
    evaluate.add_argument(
        "--agent-name", help="the rated name of a single checkpoint (default: its path)"
    )
    add_backend_args(evaluate)
    evaluate.set_defaults(run=_evaluate)

    tournament = sub.add_parser(
        "tournament",
        help="every player checkpoint against every opponent",
        description="Play every player checkpoint (rows) against every opponent "
        "(columns: scripted levels, random or checkpoints), one job per cell; every "
        "cell plays episodes seed .. seed + n_episodes - 1. Prints wins / draws / "
        "losses per cell and the meta-game Nash of the win-minus-loss payoff.",
    )
    tournament.add_argument(
        "--players", nargs="+", required=True, metavar="CHECKPOINT", help="rows"
    )
    tournament.add_argument(
        "--opponents",
        nargs="+",
        required=True,
        metavar="OPPONENT",
        help="columns: scripted_l1..scripted_l5, random, or checkpoint paths",
    )
    tournament.add_argument("--n-episodes", type=int, default=50)
    tournament.add_argument("--seed", type=int, default=0)
    tournament.add_argument("--stochastic", action="store_true")
    tournament.add_argument("--out", type=Path, help="write the table as JSON here")
    tournament.add_argument("--league", help="record the games as rated matches here")
    add_backend_args(tournament)
    tournament.set_defaults(run=_tournament)

    ratings = sub.add_parser("ratings", help="the league's leaderboard")
    _league_arg(ratings)
    ratings.add_argument(
        "--bradley-terry",
        action="store_true",
        help="fit every recorded match (with 95%% intervals) instead of Elo",
    )
    ratings.set_defaults(run=_ratings)

    pool = sub.add_parser("pool", help="list a self-play pool")
    _league_arg(pool)
    pool.add_argument("--side", default="run", help="the pool's side (its run id)")
    pool.set_defaults(run=_pool)

    registry = sub.add_parser("registry", help="the policy registry")
    _league_arg(registry)
    registry.add_argument("action", choices=("list", "register", "remove", "get"))
    registry.add_argument("--echelon")
    registry.add_argument("--version")
    registry.add_argument("--path")
    registry.add_argument("--run-id")
    registry.add_argument("--overwrite", action="store_true")
    registry.set_defaults(run=_registry)

    prune = sub.add_parser("prune", help="delete old unreferenced checkpoints")
    _league_arg(prune)
    prune.add_argument("--keep", type=int, default=3)
    prune.set_defaults(run=_prune)

    export = sub.add_parser("export", help="the store as JSON (seed 001's shapes)")
    _league_arg(export)
    export.add_argument("--out", help="file to write (default: stdout)")
    export.add_argument("--import", dest="import_path", help="merge this JSON in")
    export.set_defaults(run=_export)


def _league_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--league", required=True, help="league directory")


def add_backend_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--backend",
        default="inprocess",
        help="where the jobs run: inprocess (default) or ray (pip install mopa[ray])",
    )
    parser.add_argument(
        "--ray-workers",
        type=int,
        help="ray: jobs at once, one CPU each (default 2; a local instance gets "
        "this many CPUs)",
    )
    parser.add_argument(
        "--ray-address",
        help="ray: a running cluster to use (default: start a local instance); "
        "its workers need mopa and the checkpoints' file system",
    )


def backend_from_args(args: argparse.Namespace):
    """The backend the arguments ask for (the caller closes it)."""
    from mopa.league.backend import BACKENDS, check_ray_address, make_backend

    if args.backend not in BACKENDS:
        raise InvalidParameterError(
            f"unknown --backend {args.backend!r}; choose from {', '.join(BACKENDS)}"
        )
    if args.backend != "ray" and (
        args.ray_workers is not None or args.ray_address is not None
    ):
        raise InvalidParameterError(
            "--ray-workers and --ray-address need --backend ray"
        )
    workers = 2 if args.ray_workers is None else args.ray_workers
    if workers < 1:
        raise InvalidParameterError(f"--ray-workers must be >= 1, got {workers}")
    check_ray_address(args.ray_address, "--ray-address")
    return make_backend(args.backend, workers, args.ray_address)


def _check_league(league: str) -> None:
    """Refuse, before any game, a league folder that could not be written."""
    from mopa.core.files import check_output_folder

    check_output_folder(league, "--league")


def _check_games(args: argparse.Namespace) -> None:
    """Refuse episode counts and seeds no evaluation can play."""
    from mopa.core.checks import check_count, check_seed

    check_count("--n-episodes", args.n_episodes)
    check_seed("--seed", args.seed)


def _read_export(path: Path) -> dict[str, Any]:
    """The JSON object of a league export at ``path``.

    Raises:
        PathError: ``path`` is missing, not a file, or not a JSON object.
    """
    from mopa.errors import MissingPathError, PathError

    if not path.exists():
        raise MissingPathError(f"--import {path}: no such file")
    if not path.is_file():
        raise PathError(f"--import {path} is a folder, not a file")
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise PathError(f"--import {path} is not readable JSON ({error})") from None
    if not isinstance(data, dict):
        raise PathError(
            f"--import {path} is not a league export (a JSON object), got "
            f"{type(data).__name__}"
        )
    return data


def _record(league_dir: str, name: str, opponent: str, result) -> float:
    """Enter an evaluation's games as rated matches; returns the Elo change."""
    from mopa.league import EloRatings, LeagueStore

    scores = [1.0] * result.wins + [0.5] * result.draws + [0.0] * result.losses
    with LeagueStore(league_dir) as store:
        return EloRatings(store).update(name, opponent, scores, source="cli")


def _pairs(items: list[str]) -> dict[str, Any]:
    out = {}
    for item in items:
        if "=" not in item:
            raise InvalidParameterError(f"expected FIELD=VALUE, got {item!r}")
        key, value = item.split("=", 1)
        try:
            out[key] = json.loads(value)
        except ValueError:
            out[key] = value
    return out


def _train(args: argparse.Namespace) -> int:
    from mopa.cli.train import _pair_dict
    from mopa.league import TrainingConfig
    from mopa.league.backend import seed_configs, train_runs

    _check_league(args.league)
    fields = _pairs(args.set)
    game_kwargs = _pair_dict(fields.get("game_kwargs", ()), "game_kwargs")
    fields.update(
        game=args.game,
        game_kwargs={**game_kwargs, **_pairs(args.game_kwarg)},
        run_id=args.run_id,
        enable_self_play=args.self_play or fields.get("enable_self_play", False),
        checkpoint_dir=args.league,
    )
    config = TrainingConfig().replace(**fields)
    configs = seed_configs(config, args.seeds) if args.seeds else [config]
    with backend_from_args(args) as backend:
        runs = train_runs(
            configs,
            backend,
            callbacks_fn=functools.partial(
                _train_callbacks, tuple(args.rate_against), bool(args.seeds)
            ),
            resume=args.resume,
        )
    summaries = [
        {
            **({"seed": run.seed, "run_id": run.run_id} if args.seeds else {}),
            "final_checkpoint": str(run.final_checkpoint),
            "env_steps": run.env_steps,
            "stage": run.stage,
            "promotions": run.promotions,
            "wall_s": round(run.wall_s, 1),
        }
        for run in runs
    ]
    print(json.dumps(summaries if args.seeds else summaries[0], indent=2))
    return 0


def _train_callbacks(rate_against: tuple[str, ...], show_run: bool) -> list[Any]:
    """A ``mopa league train`` run's callbacks (built where the run trains)."""
    from mopa.league import MetricsLogger, RatingEval, RewardBreakdown

    callbacks: list[Any] = [RewardBreakdown()]
    if rate_against:
        callbacks.append(RatingEval(list(rate_against)))
    callbacks.append(_Progress(show_run))
    callbacks.append(MetricsLogger())
    return callbacks


class _Progress:
    def __init__(self, show_run: bool = False):
        self.show_run = show_run

    def on_train_start(self, run) -> None:
        pass

    def on_chunk_end(self, run) -> None:
        win = run.rows.get("win_per_episode")
        rate = float(win[~(win != win)].mean()) if win is not None and len(win) else 0
        label = f"[{run.config.run_id}] " if self.show_run else ""
        print(
            f"{label}chunk {run.chunk}/{run.num_chunks}  steps {run.env_steps}  "
            f"win rate {rate:.2f}  {run.wall_s:.0f}s",
            flush=True,
        )

    def on_train_end(self, run) -> None:
        pass


def _evaluate(args: argparse.Namespace) -> int:
    from mopa.league.backend import eval_job, evaluate_sweep

    if args.agent_name and len(args.checkpoint) > 1:
        raise InvalidParameterError("--agent-name needs a single checkpoint")
    _check_games(args)
    if args.league:
        _check_league(args.league)
    jobs = [
        eval_job(checkpoint, opponent, args.n_episodes, args.seed, not args.stochastic)
        for checkpoint in args.checkpoint
        for opponent in args.opponent
    ]
    with backend_from_args(args) as backend:
        outcomes = evaluate_sweep(jobs, backend)
    rows: dict[str, dict[str, Any]] = {}
    pairs = [(c, o) for c in args.checkpoint for o in args.opponent]
    for (checkpoint, opponent), outcome in zip(pairs, outcomes, strict=True):
        result = outcome.result
        rows.setdefault(checkpoint, {})[opponent] = result.as_dict()
        label = opponent if len(args.checkpoint) == 1 else f"{checkpoint} vs {opponent}"
        print(
            f"{label}: {result.wins} W / {result.draws} D / {result.losses} L "
            f"(win rate {result.win_rate:.3f})"
        )
        if args.league:
            name = args.agent_name or str(Path(checkpoint).resolve())
            delta = _record(args.league, name, opponent, result)
            print(f"  Elo {delta:+.1f}")
    single = len(args.checkpoint) == 1
    print(json.dumps(rows[args.checkpoint[0]] if single else rows, indent=2))
    return 0


def _tournament(args: argparse.Namespace) -> int:
    from mopa.core.files import check_output_file, write_json
    from mopa.league import meta_nash
    from mopa.league.backend import eval_job, league_tournament

    _check_games(args)
    if args.league:
        _check_league(args.league)
    if args.out:
        check_output_file(args.out, "--out")
    for player in args.players:  # every path and name checked before any game
        for opponent in args.opponents:
            eval_job(player, opponent, args.n_episodes, args.seed)
    with backend_from_args(args) as backend:
        table = league_tournament(
            args.players,
            args.opponents,
            args.n_episodes,
            args.seed,
            not args.stochastic,
            backend,
        )
    print(table.to_markdown())
    nash = meta_nash(table.payoff())
    print(
        f"meta-game Nash (payoff win - loss rate): value {nash.value:+.3f}; players "
        + ", ".join(f"{p:.2f}" for p in nash.row)
        + "; opponents "
        + ", ".join(f"{p:.2f}" for p in nash.column)
    )
    if args.league:
        for player, row in zip(args.players, table.results, strict=True):
            name = str(Path(player).resolve())
            for opponent, result in zip(args.opponents, row, strict=True):
                _record(args.league, name, opponent, result)
    if args.out:
        data = table.to_json()
        data["meta_nash"] = {
            "players": nash.row.tolist(),
            "opponents": nash.column.tolist(),
            "value": nash.value,
        }
        write_json(args.out, data)
    return 0


def _ratings(args: argparse.Namespace) -> int:
    from mopa.league import EloRatings, LeagueStore, fit_bradley_terry

    with LeagueStore(args.league, read_only=True) as store:
        if args.bradley_terry:
            matches = [
                (m["player"], m["opponent"], m["score"]) for m in store.matches()
            ]
            fit = fit_bradley_terry(matches)
            for name, rating, lo, hi in fit.leaderboard():
                print(f"{rating:8.1f}  [{lo:7.1f}, {hi:7.1f}]  {name}")
            return 0
        elo = EloRatings(store)
        for name, rating in sorted(elo.all_ratings().items(), key=lambda x: -x[1]):
            print(f"{rating:8.1f}  {elo.games(name):6d} games  {name}")
    return 0


def _pool(args: argparse.Namespace) -> int:
    from mopa.league import LeagueStore, OpponentPool

    with LeagueStore(args.league, read_only=True) as store:
        for entry in OpponentPool(store, args.side).entries:
            print(
                f"v{entry.version}  step {entry.step}  record {entry.wins:g}/"
                f"{entry.games:g}  {entry.path}"
            )
    return 0


def _registry(args: argparse.Namespace) -> int:
    from mopa.league import LeagueStore, PolicyRegistry

    if args.action != "list":
        if not (args.echelon and args.version):
            raise InvalidParameterError(
                f"registry {args.action} needs --echelon and --version"
            )
        if args.action == "register" and not args.path:
            raise InvalidParameterError("registry register needs --path")
    if args.action == "register":
        from mopa.league.registry import Echelon, check_version

        Echelon.from_str(args.echelon)
        check_version(args.version)
        _check_league(args.league)
    read_only = args.action in ("list", "get")
    create = args.action == "register"
    with LeagueStore(args.league, read_only=read_only, create=create) as store:
        registry = PolicyRegistry(store)
        if args.action == "list":
            for entry in registry.list(args.echelon):
                print(f"{entry.echelon}/{entry.version}  {entry.run_id}  {entry.path}")
            return 0
        if args.action == "register":
            registry.register(
                args.echelon, args.version, args.path, args.run_id, args.overwrite
            )
        elif args.action == "remove":
            registry.remove(args.echelon, args.version)
        else:
            print(json.dumps(registry.get(args.echelon, args.version)._asdict()))
    return 0


def _prune(args: argparse.Namespace) -> int:
    from mopa.league import CheckpointManifest, LeagueStore

    if args.keep < 0:
        raise InvalidParameterError(f"--keep must be >= 0, got {args.keep}")
    with LeagueStore(args.league, create=False) as store:
        for path in CheckpointManifest(store).prune(args.keep):
            print(f"deleted {path}")
    return 0


def _export(args: argparse.Namespace) -> int:
    from mopa.core.files import check_output_file, write_json
    from mopa.league import LeagueStore

    if args.out:
        check_output_file(args.out, "--out")
    if not args.import_path:  # a read-only listing
        with LeagueStore(args.league, read_only=True) as store:
            data = store.export_json()
    else:
        imported = _read_export(Path(args.import_path))
        _check_league(args.league)
        with LeagueStore(args.league) as store:
            store.import_json(imported)
            data = store.export_json()
    if args.out:
        write_json(args.out, data)
    else:
        print(json.dumps(data, indent=2))
    return 0
