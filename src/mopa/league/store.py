"""The league store: one SQLite database per league directory.

It holds everything a league must not lose: ratings, every rated match, pool
membership, the policy registry, the checkpoint manifest and small pieces of
resumable state (curriculum, sampler). The database runs in WAL mode and every
change is one transaction, so:

* a process killed at any moment (SIGKILL included) leaves the file readable with
  every committed change in it (SQLite's journal rolls back the half-done one);
* several processes may write at once: writers queue on the database lock
  (``busy_timeout``) and each read-modify-write (such as a rating update) runs
  inside one ``BEGIN IMMEDIATE`` transaction, so no update is lost.

Checkpoint files themselves are written atomically beside the database
(:func:`mopa.core.files.atomic_write`); the database only stores their paths.
This module and the CLI are the only parts of the league that touch the disk.
"""

from __future__ import annotations

import contextlib
import json
import re
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mopa.errors import InvalidParameterError, PathError

DB_FILE = "league.sqlite"
"""The database's file name inside a league directory."""
BUSY_TIMEOUT_MS = 60_000
"""How long a writer waits for another's transaction before giving up."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS ratings (
    name TEXT PRIMARY KEY,
    system TEXT NOT NULL DEFAULT 'elo',
    rating REAL NOT NULL,
    sigma REAL,
    games INTEGER NOT NULL DEFAULT 0,
    updated REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS matches (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    player TEXT NOT NULL,
    opponent TEXT NOT NULL,
    score REAL NOT NULL,
    step INTEGER,
    source TEXT,
    created REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS pool (
    side TEXT NOT NULL,
    version INTEGER NOT NULL,
    path TEXT NOT NULL,
    step INTEGER NOT NULL,
    added REAL NOT NULL,
    wins REAL NOT NULL DEFAULT 0,
    games REAL NOT NULL DEFAULT 0,
    PRIMARY KEY (side, version)
);
CREATE TABLE IF NOT EXISTS registry (
    echelon TEXT NOT NULL,
    version TEXT NOT NULL,
    path TEXT NOT NULL,
    run_id TEXT,
    created REAL NOT NULL,
    PRIMARY KEY (echelon, version)
);
CREATE TABLE IF NOT EXISTS manifest (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    path TEXT NOT NULL,
    kind TEXT NOT NULL,
    seed INTEGER,
    stage INTEGER,
    run_id TEXT,
    config_hash TEXT,
    step INTEGER NOT NULL,
    created REAL NOT NULL,
    deleted INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS state (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
"""


_TABLES = tuple(re.findall(r"CREATE TABLE IF NOT EXISTS (\w+)", _SCHEMA))


class LeagueStore:
    """The database of the league directory ``root``.

    Every method opens its own short transaction; an instance may be shared by
    the callbacks of a run and is safe to use from several processes at once
    (each with its own instance).

    Args:
        root: the league directory.
        create: make the directory and its database when missing (else a missing
            league is an error).
        read_only: read an existing league and never create or change a file
            (the listing commands). When no writer has the database open (there
            is no ``-wal`` file) it is opened immutable, since a read-only WAL
            connection would otherwise leave ``-wal`` and ``-shm`` files behind.

    Raises:
        PathError: ``root`` is a file, holds no league (unless it may be created),
            or its database is not a league's.
    """

    def __init__(
        self, root: str | Path, *, create: bool = True, read_only: bool = False
    ):
        self.root = Path(root)
        self.path = self.root / DB_FILE
        if self.root.exists() and not self.root.is_dir():
            raise PathError(f"{self.root} is not a league folder (it is a file)")
        if (read_only or not create) and not self.path.is_file():
            raise PathError(f"no league at {self.root} (no {DB_FILE} there)")
        try:
            if read_only:
                wal = self.path.with_name(f"{DB_FILE}-wal")
                mode = "ro" if wal.exists() else "ro&immutable=1"
                self._connection = sqlite3.connect(
                    f"{self.path.resolve().as_uri()}?mode={mode}",
                    uri=True,
                    timeout=BUSY_TIMEOUT_MS / 1000,
                    isolation_level=None,
                )
                self._check_tables()
                return
            try:
                self.root.mkdir(parents=True, exist_ok=True)
            except OSError as error:
                raise PathError(
                    f"cannot make the league folder {self.root} ({error.strerror})"
                ) from None
            self._connection = sqlite3.connect(
                self.path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None
            )
            self._connection.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
            self._connection.execute("PRAGMA journal_mode=WAL")
            self._connection.execute("PRAGMA synchronous=FULL")
            with self.transaction() as db:
                for statement in _SCHEMA.split(";"):
                    if statement.strip():
                        db.execute(statement)
        except sqlite3.DatabaseError as error:
            raise PathError(f"{self.path} is not a league database ({error})") from None

    def _check_tables(self) -> None:
        tables = {
            row[0]
            for row in self.query("SELECT name FROM sqlite_master WHERE type='table'")
        }
        missing = sorted(set(_TABLES) - tables)
        if missing:
            raise PathError(
                f"{self.path} is not a league database (no {missing[0]} table)"
            )

    def close(self) -> None:
        self._connection.close()

    def __enter__(self) -> LeagueStore:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One ``BEGIN IMMEDIATE`` transaction: committed on success, rolled back
        on any error (the write lock is taken up front, so read-modify-write
        sequences inside it never interleave with another writer's)."""
        db = self._connection
        db.execute("BEGIN IMMEDIATE")
        try:
            yield db
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")

    def query(self, sql: str, args: tuple = ()) -> list[tuple]:
        """Rows of a read-only query."""
        return self._connection.execute(sql, args).fetchall()

    # -- small state -----------------------------------------------------------------
    def put_state(self, key: str, value: Any) -> None:
        """Store ``value`` (JSON-able) under ``key``."""
        with self.transaction() as db:
            db.execute(
                "INSERT OR REPLACE INTO state (key, value) VALUES (?, ?)",
                (key, json.dumps(value)),
            )

    def get_state(self, key: str, default: Any = None) -> Any:
        rows = self.query("SELECT value FROM state WHERE key = ?", (key,))
        return json.loads(rows[0][0]) if rows else default

    # -- matches ---------------------------------------------------------------------
    def matches(self) -> list[dict[str, Any]]:
        """Every recorded match, oldest first."""
        rows = self.query(
            "SELECT id, player, opponent, score, step, source FROM matches ORDER BY id"
        )
        keys = ("id", "player", "opponent", "score", "step", "source")
        return [dict(zip(keys, row, strict=True)) for row in rows]

    # -- export / import -------------------------------------------------------------
    def export_json(self) -> dict[str, Any]:
        """Everything as JSON data in the shapes of seed 001's files: ``elo``
        (``{"ratings": {name: r}, "game_counts": {name: n}}``), ``policy_registry``
        (a list of ``{echelon, version, path, run_id}``), ``manifest`` (rows),
        ``pool`` (rows per side), ``matches`` and ``state``."""
        ratings = self.query("SELECT name, rating, games FROM ratings")
        registry = self.query("SELECT echelon, version, path, run_id FROM registry")
        manifest = self.query(
            "SELECT path, kind, seed, stage, run_id, config_hash, step, created, "
            "deleted FROM manifest ORDER BY id"
        )
        pool = self.query(
            "SELECT side, version, path, step, wins, games FROM pool "
            "ORDER BY side, version"
        )
        manifest_keys = (
            "path",
            "artifact_type",
            "seed",
            "curriculum_level",
            "run_id",
            "config_hash",
            "step",
            "timestamp",
            "deleted",
        )
        return {
            "elo": {
                "ratings": {name: rating for name, rating, _ in ratings},
                "game_counts": {name: games for name, _, games in ratings},
            },
            "policy_registry": [
                {"echelon": e, "version": v, "path": p, "run_id": r}
                for e, v, p, r in registry
            ],
            "manifest": [
                dict(zip(manifest_keys, row, strict=True)) for row in manifest
            ],
            "pool": [
                dict(
                    zip(
                        ("side", "version", "path", "step", "wins", "games"),
                        row,
                        strict=True,
                    )
                )
                for row in pool
            ],
            "matches": self.matches(),
            "state": {k: json.loads(v) for k, v in self.query("SELECT * FROM state")},
        }

    def import_json(self, data: dict[str, Any]) -> None:
        """Merge data in :meth:`export_json`'s shapes (one transaction).

        Raises:
            InvalidParameterError: ``data`` is not in those shapes (nothing is
                merged then).
        """
        try:
            self._import(data)
        except (AttributeError, KeyError, TypeError, ValueError) as error:
            raise InvalidParameterError(
                f"not a league export: {type(error).__name__} {error}"
            ) from None

    def _import(self, data: dict[str, Any]) -> None:
        now = time.time()
        with self.transaction() as db:
            elo = data.get("elo", {})
            counts = elo.get("game_counts", {})
            for name, rating in elo.get("ratings", {}).items():
                db.execute(
                    "INSERT OR REPLACE INTO ratings (name, rating, games, updated) "
                    "VALUES (?, ?, ?, ?)",
                    (name, float(rating), int(counts.get(name, 0)), now),
                )
            for row in data.get("policy_registry", []):
                db.execute(
                    "INSERT OR REPLACE INTO registry VALUES (?, ?, ?, ?, ?)",
                    (
                        row["echelon"],
                        row["version"],
                        row["path"],
                        row.get("run_id"),
                        now,
                    ),
                )
            for row in data.get("manifest", []):
                db.execute(
                    "INSERT INTO manifest (path, kind, seed, stage, run_id, "
                    "config_hash, step, created, deleted) VALUES (?,?,?,?,?,?,?,?,?)",
                    (
                        row["path"],
                        row["artifact_type"],
                        row.get("seed"),
                        row.get("curriculum_level"),
                        row.get("run_id"),
                        row.get("config_hash"),
                        int(row["step"]),
                        row.get("timestamp", now),
                        int(row.get("deleted", 0)),
                    ),
                )
            for row in data.get("pool", []):
                db.execute(
                    "INSERT OR REPLACE INTO pool VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (
                        row["side"],
                        int(row["version"]),
                        row["path"],
                        int(row["step"]),
                        now,
                        float(row.get("wins", 0)),
                        float(row.get("games", 0)),
                    ),
                )
            for key, value in data.get("state", {}).items():
                db.execute(
                    "INSERT OR REPLACE INTO state VALUES (?, ?)",
                    (key, json.dumps(value)),
                )
