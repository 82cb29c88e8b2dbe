"""``mopa league``: train, evaluate, rate, and manage a league directory (its
pool, registry and checkpoint manifest) from the command line.

Every subcommand works on one league directory (``--league``), whose SQLite store
(:mod:`mopa.league.store`) holds ratings, matches, pools, registry and manifest.
"""

from __future__ import annotations

import argparse
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
    train.set_defaults(run=_train)

    evaluate = sub.add_parser("evaluate", help="evaluate a checkpoint")
    evaluate.add_argument("checkpoint", help="policy checkpoint or run folder")
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
    evaluate.add_argument("--agent-name", help="the rated name (default: the path)")
    evaluate.set_defaults(run=_evaluate)

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
    from mopa.league import MetricsLogger, RatingEval, RewardBreakdown, train

    fields = _pairs(args.set)
    fields.update(
        game=args.game,
        game_kwargs=_pairs(args.game_kwarg),
        run_id=args.run_id,
        enable_self_play=args.self_play or fields.get("enable_self_play", False),
        checkpoint_dir=args.league,
    )
    callbacks: list[Any] = [RewardBreakdown()]
    if args.rate_against:
        callbacks.append(RatingEval(args.rate_against))
    callbacks.append(_Progress())
    callbacks.append(MetricsLogger())
    resume = args.league if args.resume else None
    result = train(callbacks=callbacks, resume=resume, **fields)
    print(
        json.dumps(
            {
                "final_checkpoint": str(result.final_checkpoint),
                "env_steps": result.env_steps,
                "stage": result.stage,
                "promotions": result.promotions,
                "wall_s": round(result.wall_s, 1),
            },
            indent=2,
        )
    )
    return 0


class _Progress:
    def on_train_start(self, run) -> None:
        pass

    def on_chunk_end(self, run) -> None:
        win = run.rows.get("win_per_episode")
        rate = float(win[~(win != win)].mean()) if win is not None and len(win) else 0
        print(
            f"chunk {run.chunk}/{run.num_chunks}  steps {run.env_steps}  "
            f"win rate {rate:.2f}  {run.wall_s:.0f}s",
            flush=True,
        )

    def on_train_end(self, run) -> None:
        pass


def _evaluate(args: argparse.Namespace) -> int:
    from mopa.league import EloRatings, LeagueStore, evaluate_detailed

    rows = {}
    for opponent in args.opponent:
        result = evaluate_detailed(
            args.checkpoint,
            n_episodes=args.n_episodes,
            deterministic=not args.stochastic,
            seed=args.seed,
            opponent=opponent,
        )
        rows[opponent] = result.as_dict()
        print(
            f"{opponent}: {result.wins} W / {result.draws} D / {result.losses} L "
            f"(win rate {result.win_rate:.3f})"
        )
        if args.league:
            with LeagueStore(args.league) as store:
                scores = (
                    [1.0] * result.wins + [0.5] * result.draws + [0.0] * result.losses
                )
                name = args.agent_name or str(Path(args.checkpoint).resolve())
                delta = EloRatings(store).update(name, opponent, scores, source="cli")
                print(f"  Elo {delta:+.1f}")
    print(json.dumps(rows, indent=2))
    return 0


def _ratings(args: argparse.Namespace) -> int:
    from mopa.league import EloRatings, LeagueStore, fit_bradley_terry

    with LeagueStore(args.league) as store:
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

    with LeagueStore(args.league) as store:
        for entry in OpponentPool(store, args.side).entries:
            print(
                f"v{entry.version}  step {entry.step}  record {entry.wins:g}/"
                f"{entry.games:g}  {entry.path}"
            )
    return 0


def _registry(args: argparse.Namespace) -> int:
    from mopa.league import LeagueStore, PolicyRegistry

    with LeagueStore(args.league) as store:
        registry = PolicyRegistry(store)
        if args.action == "list":
            for entry in registry.list(args.echelon):
                print(f"{entry.echelon}/{entry.version}  {entry.run_id}  {entry.path}")
            return 0
        if not (args.echelon and args.version):
            raise InvalidParameterError(
                f"registry {args.action} needs --echelon and --version"
            )
        if args.action == "register":
            if not args.path:
                raise InvalidParameterError("registry register needs --path")
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

    with LeagueStore(args.league) as store:
        for path in CheckpointManifest(store).prune(args.keep):
            print(f"deleted {path}")
    return 0


def _export(args: argparse.Namespace) -> int:
    from mopa.core.files import write_json
    from mopa.league import LeagueStore

    with LeagueStore(args.league) as store:
        if args.import_path:
            store.import_json(json.loads(Path(args.import_path).read_text()))
        data = store.export_json()
    if args.out:
        write_json(args.out, data)
    else:
        print(json.dumps(data, indent=2))
    return 0
