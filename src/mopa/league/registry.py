"""The policy registry: ``(echelon, version) -> checkpoint path and run id``.

Echelons are the command levels of the wargame (``battalion``, ``brigade``,
``division``). Entries live in the league store. Versions are validated names
(letters, digits, ``.``, ``_``, ``-``; no path separators or ``..``), and an entry
is never replaced unless ``overwrite=True``.
"""

from __future__ import annotations

import enum
import re
import time
from pathlib import Path
from typing import NamedTuple

from mopa.errors import (
    InvalidParameterError,
    MissingPathError,
    UnknownNameError,
)
from mopa.league.store import LeagueStore
from mopa.policy import read_policy_checkpoint

_VERSION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


class Echelon(enum.StrEnum):
    BATTALION = "battalion"
    BRIGADE = "brigade"
    DIVISION = "division"

    @classmethod
    def from_str(cls, value: str | Echelon) -> Echelon:
        """Case-insensitive lookup; raises ``ValueError`` naming the bad value."""
        if isinstance(value, Echelon):
            return value
        try:
            return cls(str(value).lower())
        except ValueError:
            raise InvalidParameterError(
                f"unknown echelon {value!r}; choose from "
                f"{', '.join(e.value for e in cls)}"
            ) from None


class PolicyEntry(NamedTuple):
    echelon: str
    version: str
    path: str
    run_id: str | None


def check_version(version: str) -> str:
    """``version`` if it is a safe name, else ``InvalidParameterError``."""
    if not isinstance(version, str) or not _VERSION.match(version) or ".." in version:
        raise InvalidParameterError(
            f"invalid version {version!r}: use letters, digits, '.', '_' or '-' "
            "(no path separators, no '..', at most 64 characters)"
        )
    return version


class PolicyRegistry:
    """Registered policies of a league store."""

    def __init__(self, store: LeagueStore):
        self.store = store

    def register(
        self,
        echelon: str | Echelon,
        version: str,
        path: str | Path,
        run_id: str | None = None,
        overwrite: bool = False,
    ) -> PolicyEntry:
        """Register the checkpoint at ``path``.

        Raises:
            InvalidParameterError: bad echelon or version, or the entry exists
                and ``overwrite`` is False.
            MissingPathError: no file at ``path``.
        """
        level = Echelon.from_str(echelon).value
        check_version(version)
        path = Path(path)
        if not path.exists():
            raise MissingPathError(f"no checkpoint at {path}")
        entry = PolicyEntry(level, version, str(path.resolve()), run_id)
        with self.store.transaction() as db:
            exists = db.execute(
                "SELECT 1 FROM registry WHERE echelon = ? AND version = ?",
                (level, version),
            ).fetchall()
            if exists and not overwrite:
                raise InvalidParameterError(
                    f"{level}/{version} is already registered; pass overwrite=True"
                )
            db.execute(
                "INSERT OR REPLACE INTO registry VALUES (?, ?, ?, ?, ?)",
                (*entry, time.time()),
            )
        return entry

    def get(self, echelon: str | Echelon, version: str) -> PolicyEntry:
        """The entry registered as ``echelon/version``.

        Raises:
            UnknownNameError: nothing is registered under that name.
        """
        level = Echelon.from_str(echelon).value
        rows = self.store.query(
            "SELECT echelon, version, path, run_id FROM registry "
            "WHERE echelon = ? AND version = ?",
            (level, check_version(version)),
        )
        if not rows:
            raise UnknownNameError(f"{level}/{version} is not registered")
        return PolicyEntry(*rows[0])

    def list(self, echelon: str | Echelon | None = None) -> list[PolicyEntry]:
        if echelon is None:
            rows = self.store.query(
                "SELECT echelon, version, path, run_id FROM registry "
                "ORDER BY echelon, created"
            )
        else:
            rows = self.store.query(
                "SELECT echelon, version, path, run_id FROM registry "
                "WHERE echelon = ? ORDER BY created",
                (Echelon.from_str(echelon).value,),
            )
        return [PolicyEntry(*row) for row in rows]

    def remove(self, echelon: str | Echelon, version: str) -> None:
        entry = self.get(echelon, version)
        with self.store.transaction() as db:
            db.execute(
                "DELETE FROM registry WHERE echelon = ? AND version = ?",
                (entry.echelon, entry.version),
            )

    def load(self, echelon: str | Echelon, version: str, team: str | None = None):
        """The registered :class:`~mopa.policy.Policy` (seed 0).

        Raises:
            UnknownNameError: not registered. FileNotFoundError: its file is gone.
        """
        entry = self.get(echelon, version)
        if not Path(entry.path).exists():
            raise MissingPathError(f"{entry.path} (registered as {echelon}/{version})")
        return read_policy_checkpoint(entry.path, team=team)
