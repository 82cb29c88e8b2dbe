"""Callbacks of :func:`mopa.league.training`, run on the host between jitted chunks.

* :class:`MetricsLogger`: one JSON line per chunk (means of the chunk's metrics,
  curriculum state, and whatever other callbacks added), appended and synced;
  TensorBoard (``tensorboardX``) and Weights & Biases when installed and asked for.
* :class:`RewardBreakdown`: per-component episode sums of the learner's reward,
  from the game's ``info`` (see :mod:`mopa.league.arena`).
* :class:`RatingEval`: evaluates the learner against a list of opponents, rates
  every game (Elo, both sides moved except anchors; openskill) in the store.
* :class:`BestModel`: evaluates against one opponent and keeps the best
  checkpoint (``best.msgpack``, a ``best`` manifest row).
* :class:`WinRateVsPool`: the learner against every pool member; feeds the pool's
  records (prioritised sampling) and reports the spread proxy.

Callbacks add rows to ``run.log``; put :class:`MetricsLogger` last so it writes
them.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
from pathlib import Path
from typing import Any

import numpy as np

from mopa.errors import InvalidParameterError
from mopa.league.evaluation import count_outcomes, run_episodes
from mopa.league.manifest import CheckpointManifest, config_hash
from mopa.league.nash import exploitability_proxy
from mopa.league.pool import OpponentPool
from mopa.league.ratings import EloRatings, OpenSkillRatings
from mopa.league.training import Callback, LeagueRun


def _mean(values: np.ndarray) -> float | None:
    values = np.asarray(values, np.float64)
    finite = values[np.isfinite(values)]
    return float(finite.mean()) if finite.size else None


def _due(run: LeagueRun, every: int) -> bool:
    return run.chunk % every == 0 or run.chunk == run.num_chunks


class MetricsLogger(Callback):
    """Append one JSON row per chunk to ``path`` (default
    ``<league>/runs/<run_id>/metrics.jsonl``).

    Args:
        tensorboard: also write TensorBoard scalars (needs ``tensorboardX``).
        wandb_project: also log to this Weights & Biases project (needs
            ``wandb``).

    Raises:
        ImportError: a tracker was asked for but is not installed (install the
            ``tracking`` extra).
    """

    def __init__(
        self,
        path: str | Path | None = None,
        tensorboard: bool = False,
        wandb_project: str | None = None,
    ):
        self.path = Path(path) if path is not None else None
        self.tensorboard = tensorboard
        self.wandb_project = wandb_project
        for wanted, module in ((tensorboard, "tensorboardX"), (wandb_project, "wandb")):
            if wanted and importlib.util.find_spec(module) is None:
                raise ImportError(
                    f"{module} is not installed: pip install 'mopa[tracking]'"
                )
        self._writer = None
        self._wandb = None
        self.rows: list[dict[str, Any]] = []

    def on_train_start(self, run: LeagueRun) -> None:
        if self.path is None:
            if run.out is None:
                raise InvalidParameterError(
                    "MetricsLogger needs a path or a run with checkpoint_dir"
                )
            self.path = run.out / "runs" / run.config.run_id / "metrics.jsonl"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.tensorboard:
            from tensorboardX import SummaryWriter

            self._writer = SummaryWriter(str(self.path.parent / "tensorboard"))
        if self.wandb_project:
            import wandb

            self._wandb = wandb.init(
                project=self.wandb_project,
                name=run.config.run_id,
                config=run.config.to_dict(),
            )

    def on_chunk_end(self, run: LeagueRun) -> None:
        row: dict[str, Any] = {
            "kind": "chunk",
            "chunk": run.chunk,
            "env_steps": run.env_steps,
            "wall_s": run.wall_s,
        }
        for name, values in sorted(run.rows.items()):
            row[name] = _mean(values)
        if run.curriculum is not None:
            row.update(run.curriculum.metrics())
        lines = [row, *run.log]
        self.rows.extend(lines)
        with open(self.path, "a") as file:
            for line in lines:
                file.write(json.dumps(line, default=float) + "\n")
            file.flush()
            os.fsync(file.fileno())
        scalars = {
            k: v
            for line in lines
            for k, v in line.items()
            if isinstance(v, int | float) and math.isfinite(v)
        }
        if self._writer is not None:
            for name, value in scalars.items():
                self._writer.add_scalar(name, value, run.env_steps)
            self._writer.flush()
        if self._wandb is not None:
            self._wandb.log(scalars, step=run.env_steps)

    def on_train_end(self, run: LeagueRun) -> None:
        if self._writer is not None:
            self._writer.close()
        if self._wandb is not None:
            self._wandb.finish()


def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    """Rows of a metrics file (a torn last line, from a crash, is skipped)."""
    rows = []
    for line in Path(path).read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except ValueError:
            continue
    return rows


class RewardBreakdown(Callback):
    """Per-component reward of the chunk's finished episodes (mean episode sum of
    each ``info`` component) into ``run.log`` and :attr:`history`."""

    def __init__(self):
        self.history: list[dict[str, float]] = []

    def on_chunk_end(self, run: LeagueRun) -> None:
        episodes = np.asarray(run.rows.get("episodes", []), np.float64)
        row: dict[str, Any] = {"kind": "reward_breakdown", "chunk": run.chunk}
        for name, values in run.rows.items():
            if not name.startswith("breakdown/"):
                continue
            values = np.asarray(values, np.float64)
            ok = np.isfinite(values) & (episodes > 0)
            component = name[len("breakdown/") : -len("_per_episode")]
            row[component] = (
                float(np.sum(values[ok] * episodes[ok]) / np.sum(episodes[ok]))
                if ok.any()
                else None
            )
        self.history.append(row)
        run.log.append(row)


class RatingEval(Callback):
    """Every ``every`` chunks, play ``n_episodes`` against each opponent and rate
    each game in the store (Elo per game, both sides; openskill).

    Args:
        opponents: names or checkpoint paths (see :mod:`mopa.league.evaluation`).
        deterministic: rate the policy's most likely actions (``False``: the
            policy as it trains, sampling its actions).
    """

    def __init__(
        self,
        opponents: list[str],
        n_episodes: int = 20,
        every: int = 1,
        seed: int = 10_000,
        deterministic: bool = True,
    ):
        if not opponents:
            raise InvalidParameterError("RatingEval needs at least one opponent")
        self.opponents = list(opponents)
        self.n_episodes = n_episodes
        self.every = every
        self.seed = seed
        self.deterministic = deterministic
        self.history: list[dict[str, Any]] = []

    def on_chunk_end(self, run: LeagueRun) -> None:
        if run.store is None:
            raise InvalidParameterError("RatingEval needs a run with checkpoint_dir")
        if not _due(run, self.every):
            return
        elo = EloRatings(run.store)
        skill = OpenSkillRatings(run.store)
        policy = run.policy()
        row: dict[str, Any] = {"kind": "ratings", "chunk": run.chunk}
        for opponent in self.opponents:
            out = run_episodes(
                policy,
                opponent,
                self.n_episodes,
                self.seed + run.chunk * self.n_episodes,
                self.deterministic,
            )
            scores = [{1: 1.0, 0: 0.5, -1: 0.0}[int(o)] for o in out["outcome"]]
            elo.update(
                run.player_name,
                str(opponent),
                scores,
                step=run.env_steps,
                source="eval",
            )
            for score in scores:
                skill.record(run.player_name, str(opponent), score)
            row[f"win_rate/{opponent}"] = count_outcomes(out["outcome"]).win_rate
        row["elo"] = elo.rating(run.player_name)
        row["openskill_mu"] = skill.rating(run.player_name).mu
        row["openskill_sigma"] = skill.rating(run.player_name).sigma
        self.history.append(row)
        run.log.append(row)


class BestModel(Callback):
    """Every ``every`` chunks evaluate against ``opponent``; a new best score
    (wins + draws / 2) writes ``<league>/runs/<run_id>/best.msgpack`` and a
    ``best`` manifest row."""

    def __init__(
        self,
        opponent: str = "scripted_l5",
        n_episodes: int = 20,
        every: int = 1,
        deterministic: bool = True,
    ):
        self.opponent = opponent
        self.deterministic = deterministic
        self.n_episodes = n_episodes
        self.every = every
        self.best_score = -math.inf
        self.best_step: int | None = None

    def on_train_start(self, run: LeagueRun) -> None:
        if run.store is not None:
            saved = run.store.get_state(f"best/{run.config.run_id}")
            if saved is not None:
                self.best_score, self.best_step = saved["score"], saved["step"]

    def on_chunk_end(self, run: LeagueRun) -> None:
        if run.out is None:
            raise InvalidParameterError("BestModel needs a run with checkpoint_dir")
        if not _due(run, self.every):
            return
        out = run_episodes(
            run.policy(), self.opponent, self.n_episodes, 20_000, self.deterministic
        )
        result = count_outcomes(out["outcome"])
        run.log.append({"kind": "eval", "opponent": self.opponent, **result.as_dict()})
        if result.score <= self.best_score:
            return
        self.best_score, self.best_step = result.score, run.env_steps
        path = run.write_policy(run.out / "runs" / run.config.run_id / "best.msgpack")
        CheckpointManifest(run.store).register(
            path,
            kind="best",
            step=run.env_steps,
            seed=run.config.seed,
            run_id=run.config.run_id,
            config_hash=config_hash(run.config.identity()),
        )
        run.store.put_state(
            f"best/{run.config.run_id}",
            {"score": self.best_score, "step": self.best_step},
        )


class WinRateVsPool(Callback):
    """Every ``every`` chunks, the learner against every pool member: records each
    game in the member's record (for ``pfsp`` sampling) and logs the win rates
    and :func:`~mopa.league.nash.exploitability_proxy`."""

    def __init__(self, n_episodes: int = 10, every: int = 1):
        self.n_episodes = n_episodes
        self.every = every
        self.history: list[dict[str, Any]] = []

    def on_chunk_end(self, run: LeagueRun) -> None:
        if run.pool is None or not _due(run, self.every):
            return
        from mopa.league.evaluation import load_league_policy

        policy = run.policy()
        win_rates = {}
        for entry in run.pool.entries:
            opponent = load_league_policy(entry.path)
            out = run_episodes(policy, opponent, self.n_episodes, seed=30_000)
            for outcome in out["outcome"]:
                run.pool.record(entry.version, {1: 1.0, 0: 0.5, -1: 0.0}[int(outcome)])
            win_rates[entry.version] = count_outcomes(out["outcome"]).win_rate
        row = {
            "kind": "pool",
            "chunk": run.chunk,
            "pool_size": len(win_rates),
            "win_rate_vs_pool": float(np.mean(list(win_rates.values()))),
            "exploitability_proxy": exploitability_proxy(
                np.array(list(win_rates.values()))
            ),
            **{f"win_rate/v{k}": v for k, v in win_rates.items()},
        }
        self.history.append(row)
        run.log.append(row)


__all__ = [
    "BestModel",
    "MetricsLogger",
    "OpponentPool",
    "RatingEval",
    "RewardBreakdown",
    "WinRateVsPool",
    "read_metrics",
]
