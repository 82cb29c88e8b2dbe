"""The checkpoint manifest: an append-only record of every checkpoint a league
wrote (``periodic``, ``best``, ``final``, ``snapshot``), with its seed, curriculum
stage, run id, config hash and step; the latest periodic row for resumption; and
pruning that keeps the newest ``N`` and never deletes a checkpoint that the pool,
the registry or a rating still references.

Rows are never rewritten except to mark a pruned file ``deleted``.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any, NamedTuple

from mopa.errors import InvalidParameterError
from mopa.league.store import LeagueStore

KINDS = ("periodic", "best", "final", "snapshot")


class ManifestRow(NamedTuple):
    path: str
    kind: str
    seed: int | None
    stage: int | None
    run_id: str | None
    config_hash: str | None
    step: int
    deleted: bool


def config_hash(config: dict[str, Any]) -> str:
    """First 16 hex digits of the SHA-256 of the config's sorted JSON."""
    text = json.dumps(config, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class CheckpointManifest:
    """The manifest table of a league store."""

    def __init__(self, store: LeagueStore):
        self.store = store

    def register(
        self,
        path: str | Path,
        *,
        kind: str,
        step: int,
        seed: int | None = None,
        stage: int | None = None,
        run_id: str | None = None,
        config_hash: str | None = None,
    ) -> ManifestRow:
        """Append a row (one transaction)."""
        if kind not in KINDS:
            raise InvalidParameterError(f"kind must be one of {KINDS}, got {kind!r}")
        path = str(Path(path).resolve())
        with self.store.transaction() as db:
            db.execute(
                "INSERT INTO manifest (path, kind, seed, stage, run_id, config_hash, "
                "step, created) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (path, kind, seed, stage, run_id, config_hash, int(step), time.time()),
            )
        return ManifestRow(path, kind, seed, stage, run_id, config_hash, step, False)

    def rows(self, kind: str | None = None) -> list[ManifestRow]:
        sql = (
            "SELECT path, kind, seed, stage, run_id, config_hash, step, deleted "
            "FROM manifest"
        )
        args: tuple = ()
        if kind is not None:
            sql += " WHERE kind = ?"
            args = (kind,)
        return [
            ManifestRow(*row[:-1], bool(row[-1]))
            for row in self.store.query(sql + " ORDER BY id", args)
        ]

    def known_paths(self) -> set[str]:
        return {row.path for row in self.rows()}

    def has_entry(self, path: str | Path, *, kind: str, step: int) -> bool:
        path = str(Path(path).resolve())
        return any(r.path == path and r.step == step for r in self.rows(kind))

    def latest_periodic(self, run_id: str | None = None) -> ManifestRow | None:
        """The newest periodic checkpoint still on disk (of ``run_id`` if given)."""
        rows = [
            r
            for r in self.rows("periodic")
            if not r.deleted
            and Path(r.path).exists()
            and (run_id is None or r.run_id == run_id)
        ]
        return max(rows, key=lambda r: r.step) if rows else None

    def referenced_paths(self) -> set[str]:
        """Checkpoints the pool or the registry point at, or that a rating is named
        after (a rated player named by its checkpoint path)."""
        pool = {row[0] for row in self.store.query("SELECT path FROM pool")}
        registry = {row[0] for row in self.store.query("SELECT path FROM registry")}
        rated = {
            row[0]
            for row in self.store.query("SELECT name FROM ratings")
            if "/" in row[0] or row[0].endswith(".msgpack")
        }
        rated |= {
            str(Path(name).resolve())
            for name in rated
            if not name.startswith("openskill:")
        }
        return pool | registry | rated

    def prune(
        self, keep_last: int, kinds: tuple[str, ...] = ("periodic", "snapshot")
    ) -> list[str]:
        """Delete checkpoint files of ``kinds`` except the newest ``keep_last`` per
        kind and every referenced one; mark their rows deleted.

        Returns:
            The deleted paths.
        """
        if keep_last < 0:
            raise InvalidParameterError(f"keep_last must be >= 0, got {keep_last}")
        referenced = self.referenced_paths()
        deleted = []
        for kind in kinds:
            live = sorted(
                {r.path: r for r in self.rows(kind) if not r.deleted}.values(),
                key=lambda r: r.step,
            )
            doomed = live[: max(0, len(live) - keep_last)]
            for row in doomed:
                if row.path in referenced:
                    continue
                Path(row.path).unlink(missing_ok=True)
                with self.store.transaction() as db:
                    db.execute(
                        "UPDATE manifest SET deleted = 1 WHERE path = ?", (row.path,)
                    )
                deleted.append(row.path)
        return deleted
