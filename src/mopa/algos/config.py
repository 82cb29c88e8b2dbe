"""The fields every training run shares, validation helpers, and JSON round-trips.

Each algorithm's config is a frozen, keyword-only dataclass that extends
:class:`TrainConfig`; ``__post_init__`` validates every field and names the bad one.
Configs are hashable (tuples, not lists or dicts), so they can be static arguments,
and they serialise to plain JSON for run folders and checkpoints.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from mopa.core import checks
from mopa.errors import InvalidParameterError

MIN_METRICS = 4
"""Metrics every trainer logs per update at least (episodes, a return per team and
a loss): each is a ``[seed, update]`` float32 array held in memory."""


def _freeze(value: Any) -> Any:
    """Lists (from JSON or the CLI) to tuples, recursively."""
    if isinstance(value, list | tuple):
        return tuple(_freeze(v) for v in value)
    return value


@dataclasses.dataclass(frozen=True, kw_only=True)
class TrainConfig:
    """Settings shared by every team learner."""

    algo: str
    """Algorithm name (``iql``, ``oa_iql``, ``mappo``, ``ippo``)."""
    env: str = "tag"
    """Registered game, or ``jaxmarl:NAME`` for a JaxMARL environment."""
    env_overrides: tuple[tuple[str, Any], ...] = ()
    """``(field, value)`` pairs passed to ``mopa.envs.make``."""
    total_steps: int = 2_000_000
    """Environment steps per seed (every parallel game's step counts)."""
    num_envs: int = 16
    """Games played in parallel per seed."""
    num_steps: int = 8
    """Steps each game takes per update."""
    num_seeds: int = 3
    """Seeds trained at once (vmapped)."""
    seed: int = 0
    """Base random seed; seed ``i`` of the run uses ``fold_in(key(seed), i)``."""
    frozen: tuple[tuple[str, str], ...] = ()
    """``(team, source)`` pairs for teams that do not learn; source is ``random``,
    the path of a policy checkpoint, or ``pool:PATH[,PATH...]`` (every seed of the
    listed checkpoints; each game draws one per episode,
    :func:`mopa.algos.common.frozen_pool_act_fn`; ``PATH@WEIGHT`` draws in
    proportion to the weights); ``greedy:SOURCE`` plays the actors' modes."""
    num_chunks: int = 20
    """Jitted chunks per run: progress, metrics and the resumable state are
    written between chunks."""

    def __post_init__(self):
        checks.check_fields(self)
        object.__setattr__(self, "env_overrides", _freeze(self.env_overrides))
        self.check_positive(
            "total_steps", "num_envs", "num_steps", "num_seeds", "num_chunks"
        )
        if self.total_steps < self.steps_per_update:
            raise InvalidParameterError(
                f"total_steps ({self.total_steps}) must be at least num_envs x "
                f"num_steps ({self.steps_per_update})"
            )
        checks.check_seed("seed", self.seed)
        checks.check_count("num_envs x num_steps", self.steps_per_update)
        checks.check_fits_memory(
            "total_steps",
            MIN_METRICS * 4 * self.num_seeds * self.num_updates,
            f"the metrics of {self.num_updates:,} updates x {self.num_seeds} seeds",
        )
        if self.num_updates > checks.MAX_COUNT:
            raise InvalidParameterError(
                f"total_steps is too large: {self.num_updates:,} updates exceed "
                "2**31 - 1"
            )

    # -- derived ---------------------------------------------------------------------
    @property
    def steps_per_update(self) -> int:
        return self.num_envs * self.num_steps

    @property
    def num_updates(self) -> int:
        return self.total_steps // self.steps_per_update

    @property
    def frozen_teams(self) -> dict[str, str]:
        return dict(self.frozen)

    # -- validation helpers ----------------------------------------------------------
    def check_positive(self, *names: str) -> None:
        checks.check_positive(self, *names)

    def check_range(self, name: str, low: float, high: float) -> None:
        checks.check_range(self, name, low, high)

    # -- serialisation ---------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return json.loads(json.dumps(dataclasses.asdict(self)))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainConfig:
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise InvalidParameterError(f"unknown {cls.__name__} field {unknown[0]!r}")
        return cls(**{k: _freeze(v) for k, v in data.items()})

    def replace(self, **changes: Any) -> TrainConfig:
        """A copy with ``changes``; unknown fields are named in the error."""
        names = {f.name for f in dataclasses.fields(self)}
        unknown = sorted(set(changes) - names)
        if unknown:
            raise InvalidParameterError(
                f"unknown {type(self).__name__} field {unknown[0]!r}"
            )
        return dataclasses.replace(self, **changes)
