"""Self-play opponent pools: frozen snapshots of a side's policy, sampled as
opponents.

A pool keeps at most ``max_size`` snapshots of one side (``side``: separate pools
per side for asymmetric games), evicting the oldest. Snapshots are policy
checkpoints written atomically under ``<league>/pool/<side>/``; membership and
each member's record against the learner (for prioritised sampling) live in the
league store, so a restarted run finds the same pool. Eviction only drops a
member; the file stays until :func:`mopa.league.manifest.prune` finds nothing
references it.

Sampling distributions (:meth:`OpponentPool.weights`), over members oldest first:

* ``uniform``: every member alike;
* ``latest``: the newest member only;
* ``pfsp``: prioritised fictitious self-play, ``w_i ~ (1 - wr_i)^p`` with ``wr_i``
  the learner's win rate against member ``i`` (``(wins + 1) / (games + 2)``, so
  unplayed members count as even), favouring opponents it still loses to;

and ``latest_ratio`` ``r`` puts probability ``r`` on the newest member and
``1 - r`` on the others by the chosen rule (the 80/20 latest/past split is
``latest_ratio=0.8``). Training draws a member per game and per episode from
these weights inside the compiled run (:mod:`mopa.league.arena`).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from mopa.core import checkpoint
from mopa.core.checks import check_unit
from mopa.errors import InvalidParameterError
from mopa.league.store import LeagueStore
from mopa.policy import read_policy_file

SAMPLING = ("uniform", "latest", "pfsp")


class PoolEntry(NamedTuple):
    version: int
    path: str
    step: int
    wins: float
    games: float

    @property
    def win_rate(self) -> float:
        """The learner's smoothed win rate against this member."""
        return (self.wins + 1.0) / (self.games + 2.0)


class OpponentPool:
    """A fixed-size pool of one side's frozen snapshots; see the module docstring.

    Args:
        store: the league store (membership and records persist there).
        side: which side's snapshots (``"blue"``, ``"red"``, ``"predator"``...).
        max_size: most members kept.
    """

    def __init__(self, store: LeagueStore, side: str = "main", max_size: int = 10):
        if max_size < 1:
            raise InvalidParameterError(f"max_size must be >= 1, got {max_size}")
        self.store = store
        self.side = side
        self.max_size = max_size

    @property
    def pool_dir(self) -> Path:
        return self.store.root / "pool" / self.side

    @property
    def entries(self) -> list[PoolEntry]:
        """Members, oldest first."""
        rows = self.store.query(
            "SELECT version, path, step, wins, games FROM pool WHERE side = ? "
            "ORDER BY version",
            (self.side,),
        )
        return [PoolEntry(*row) for row in rows]

    @property
    def size(self) -> int:
        return len(self.entries)

    @property
    def snapshot_paths(self) -> list[Path]:
        return [Path(e.path) for e in self.entries]

    def add_file(self, path: str | Path, version: int, step: int) -> PoolEntry:
        """Add an existing policy checkpoint as member ``version`` (evicting the
        oldest members beyond ``max_size``), in one transaction."""
        path = str(Path(path).resolve())
        with self.store.transaction() as db:
            # REPLACE: a run killed after a snapshot but before it committed its
            # own state takes the same snapshot again when it resumes.
            db.execute(
                "INSERT OR REPLACE INTO pool (side, version, path, step, added) "
                "VALUES (?, ?, ?, ?, ?)",
                (self.side, int(version), path, int(step), time.time()),
            )
            db.execute(
                "DELETE FROM pool WHERE side = ? AND version NOT IN (SELECT version "
                "FROM pool WHERE side = ? ORDER BY version DESC LIMIT ?)",
                (self.side, self.side, self.max_size),
            )
        return PoolEntry(int(version), path, int(step), 0.0, 0.0)

    def add(
        self,
        spec: Any,
        params: Any,
        version: int,
        step: int,
        *,
        env: str,
        env_overrides: dict[str, Any] | None = None,
        team: str | None = None,
    ) -> PoolEntry:
        """Snapshot ``(spec, params)`` (one seed, no seed axis) to
        ``<pool_dir>/v<version>.msgpack`` atomically and add it."""
        import jax

        path = self.pool_dir / f"v{int(version):06d}.msgpack"
        checkpoint.write_policy_checkpoint(
            path,
            algo="league",
            env=env,
            env_overrides=env_overrides or {},
            config={"pool_side": self.side, "version": int(version)},
            meta={"step": int(step)},
            teams={
                team or self.side: (
                    spec.to_dict(),
                    jax.tree.map(lambda x: np.asarray(x)[None], params),
                )
            },
        )
        return self.add_file(path, version, step)

    def record(self, version: int, score: float) -> None:
        """Add one game of the learner against member ``version`` (score 1, 0.5
        or 0) to the member's record."""
        with self.store.transaction() as db:
            db.execute(
                "UPDATE pool SET wins = wins + ?, games = games + 1 "
                "WHERE side = ? AND version = ?",
                (float(score), self.side, int(version)),
            )

    def weights(
        self,
        sampling: str = "uniform",
        latest_ratio: float | None = None,
        pfsp_power: float = 2.0,
    ) -> np.ndarray:
        """Sampling probabilities ``[size]`` over :attr:`entries` (oldest first)."""
        if sampling not in SAMPLING:
            raise InvalidParameterError(
                f"sampling must be one of {SAMPLING}, got {sampling!r}"
            )
        entries = self.entries
        if not entries:
            raise InvalidParameterError(f"the {self.side} pool is empty")
        k = len(entries)
        if sampling == "uniform":
            w = np.ones(k)
        elif sampling == "latest":
            w = np.zeros(k)
            w[-1] = 1.0
        else:
            w = np.array([(1.0 - e.win_rate) ** pfsp_power for e in entries])
        w = w / w.sum()
        if latest_ratio is not None and k > 1:
            check_unit("latest_ratio", latest_ratio)
            past = (
                w[:-1] / w[:-1].sum()
                if w[:-1].sum() > 0
                else np.full(k - 1, 1 / (k - 1))
            )
            w = np.concatenate([(1.0 - latest_ratio) * past, [latest_ratio]])
        return w

    def sample(
        self, rng: np.random.Generator | None = None, **weights_kwargs: Any
    ) -> PoolEntry | None:
        """One member drawn by :meth:`weights` (``None`` when empty)."""
        entries = self.entries
        if not entries:
            return None
        rng = rng or np.random.default_rng()
        return entries[rng.choice(len(entries), p=self.weights(**weights_kwargs))]

    def sample_latest(self) -> PoolEntry | None:
        entries = self.entries
        return entries[-1] if entries else None

    @staticmethod
    def load(entry: PoolEntry) -> tuple[Any, Any]:
        """``(spec, params)`` of a member (seed 0 of its checkpoint)."""
        policy_file = read_policy_file(entry.path)
        spec, params = next(iter(policy_file.teams.values()))
        import jax

        return spec, jax.tree.map(lambda x: x[0], params)


class TeamOpponentPool(OpponentPool):
    """A pool of team policies (several agents per snapshot, e.g. a 2v2 side):
    the same pool, named for seed 001's multi-agent API; members of one pool
    share one team size."""


class SnapshotTrigger:
    """Fires when at least ``every`` environment steps passed since the last
    snapshot (never ``step % every == 0``, which misses whenever the step count
    moves in strides that skip the multiples)."""

    def __init__(self, every: int, last: int = 0):
        if every < 1:
            raise InvalidParameterError(f"snapshot every must be >= 1, got {every}")
        self.every = every
        self.last = last

    def should_snapshot(self, step: int) -> bool:
        return step - self.last >= self.every

    def mark(self, step: int) -> None:
        self.last = step
