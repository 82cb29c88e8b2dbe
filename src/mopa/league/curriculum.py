"""Curriculum: ordered stages of game settings and a scheduler that promotes on a
rolling win rate; weight transfer between stages whose shapes differ.

A :class:`CurriculumStage` is a name and the game keyword arguments it sets
(``make(game, **kwargs)``): the scripted opponent's level, the battalion's team
sizes (seed 001's 1v1 -> 2v1 -> 2v2: :data:`BATTALION_TEAM_STAGES`), a pursuit
game's predator speed. Stages that change only parameters keep the compiled
training program; stages that change shapes rebuild it, and
:func:`transfer_weights` carries over every layer whose shape still fits.
"""

from __future__ import annotations

import collections
import dataclasses
from typing import Any

import jax
import numpy as np

from mopa.core.checks import check_fields, check_unit
from mopa.errors import InvalidParameterError


@dataclasses.dataclass(frozen=True, kw_only=True)
class CurriculumStage:
    """One stage of a curriculum."""

    name: str
    """Label, e.g. ``"2v1"`` or ``"L3"``."""
    game_kwargs: tuple[tuple[str, Any], ...] = ()
    """``(field, value)`` game overrides of this stage (on top of the run's)."""

    def __post_init__(self):
        check_fields(self)  # {field: value} becomes sorted (field, value) pairs

    @property
    def kwargs(self) -> dict[str, Any]:
        return dict(self.game_kwargs)


BATTALION_TEAM_STAGES = (
    CurriculumStage(name="1v1", game_kwargs=(("num_blue", 1), ("num_red", 1))),
    CurriculumStage(name="2v1", game_kwargs=(("num_blue", 2), ("num_red", 1))),
    CurriculumStage(name="2v2", game_kwargs=(("num_blue", 2), ("num_red", 2))),
)
"""Seed 001's team-size curriculum (for ``multi_battalion`` games)."""


def scripted_ladder_stages(levels: tuple[int, ...] = (1, 2, 3, 4, 5)):
    """Stages against the scripted Red ladder (``battalion_vs_red`` games); the
    level is a game parameter, so every stage shares one compiled program."""
    from mopa.league.evaluation import scripted_red_kwargs

    return tuple(
        CurriculumStage(
            name=f"L{level}",
            game_kwargs=tuple(scripted_red_kwargs(f"L{level}").items()),
        )
        for level in levels
    )


class CurriculumScheduler:
    """Tracks episode outcomes and decides when to move to the next stage.

    Promotion needs at least ``win_rate_window`` episodes since the last promotion,
    a rolling win rate over the last ``win_rate_window`` of at least
    ``promote_threshold``, and a stage after the current one.
    """

    def __init__(
        self,
        stages: tuple[CurriculumStage, ...],
        promote_threshold: float = 0.70,
        win_rate_window: int = 50,
        initial_stage: int = 0,
    ):
        if not stages:
            raise InvalidParameterError("a curriculum needs at least one stage")
        check_unit("promote_threshold", promote_threshold)
        if win_rate_window < 1:
            raise InvalidParameterError(
                f"win_rate_window must be >= 1, got {win_rate_window}"
            )
        if not 0 <= initial_stage < len(stages):
            raise InvalidParameterError(f"initial_stage {initial_stage} out of range")
        self.stages = tuple(stages)
        self.promote_threshold = promote_threshold
        self.win_rate_window = win_rate_window
        self.stage_index = initial_stage
        self.total_episodes = 0
        self.promotions: list[dict[str, Any]] = []
        self._window: collections.deque[bool] = collections.deque(
            maxlen=win_rate_window
        )

    @property
    def stage(self) -> CurriculumStage:
        return self.stages[self.stage_index]

    @property
    def stage_label(self) -> str:
        return self.stage.name

    @property
    def is_final_stage(self) -> bool:
        return self.stage_index == len(self.stages) - 1

    def env_kwargs(self) -> dict[str, Any]:
        return self.stage.kwargs

    def record_episode(self, win: bool) -> None:
        self._window.append(bool(win))
        self.total_episodes += 1

    def win_rate(self) -> float:
        """Rolling win rate over the window (0 before any episode)."""
        return float(np.mean(self._window)) if self._window else 0.0

    def should_promote(self) -> bool:
        return (
            not self.is_final_stage
            and len(self._window) >= self.win_rate_window
            and self.win_rate() >= self.promote_threshold
        )

    def promote(self, step: int | None = None) -> CurriculumStage:
        """Advance one stage and clear the window.

        Raises:
            RuntimeError: already at the final stage.
        """
        if self.is_final_stage:
            raise RuntimeError("already at the final curriculum stage")
        self.promotions.append(
            {
                "from": self.stage.name,
                "to": self.stages[self.stage_index + 1].name,
                "win_rate": self.win_rate(),
                "episodes": self.total_episodes,
                "step": step,
            }
        )
        self.stage_index += 1
        self._window.clear()
        return self.stage

    def metrics(self) -> dict[str, Any]:
        return {
            "curriculum/stage": self.stage_index,
            "curriculum/stage_label": self.stage.name,
            "curriculum/win_rate": self.win_rate(),
            "curriculum/total_episodes": self.total_episodes,
        }

    # -- persistence -----------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        return {
            "stage_index": self.stage_index,
            "total_episodes": self.total_episodes,
            "window": [bool(w) for w in self._window],
            "promotions": list(self.promotions),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.stage_index = int(state["stage_index"])
        self.total_episodes = int(state["total_episodes"])
        self._window.clear()
        self._window.extend(bool(w) for w in state["window"])
        self.promotions = list(state["promotions"])


def transfer_weights(source: Any, target: Any) -> tuple[Any, dict[str, list[str]]]:
    """Copy every leaf of ``source`` into ``target`` where the path exists in both
    and the shapes agree (e.g. the hidden and output layers when only the input
    size changed between stages).

    Returns:
        ``(new params, {"loaded": [paths], "skipped": [paths]})`` with paths of
        ``target``'s leaves.
    """
    flat_source = {
        jax.tree_util.keystr(path): leaf
        for path, leaf in jax.tree_util.tree_flatten_with_path(source)[0]
    }
    loaded, skipped = [], []

    def pick(path, leaf):
        name = jax.tree_util.keystr(path)
        found = flat_source.get(name)
        if found is not None and np.shape(found) == np.shape(leaf):
            loaded.append(name)
            return found
        skipped.append(name)
        return leaf

    new = jax.tree_util.tree_map_with_path(pick, target)
    return new, {"loaded": loaded, "skipped": skipped}
