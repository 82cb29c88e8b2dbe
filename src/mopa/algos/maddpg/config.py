"""The configuration of MADDPG and M3DDPG runs on the two-team particle games.

Field names and defaults are those of the MADDPG / M3DDPG / LeMOL experiments
(``--lr 1e-2``, ``--gamma 0.95``, ``--batch_size 1024`` ...), so a run described
by their command line maps field for field onto :class:`MADDPGConfig`.
"""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any

from mopa.core.checks import (
    check_count,
    check_fields,
    check_positive,
    check_range,
    check_seed,
)
from mopa.errors import InvalidParameterError

MADDPG_POLICIES = ("maddpg", "m3ddpg")
"""Learners a team of agents can use in a plain MADDPG run."""
POLICY_ALIASES = {"mmmaddpg": "m3ddpg"}
"""Other spellings accepted for a policy name (the M3DDPG code's own)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class MADDPGConfig:
    """A MADDPG / M3DDPG run: every agent learns its own actor and centralised
    critic (Lowe et al. 2017; Li et al. 2019 for M3DDPG)."""

    scenario: str = "push"
    """Particle game: ``push`` or ``adversary``."""
    num_adversaries: int = 1
    """Agents of the adversary team (the first agents of the game)."""
    discrete_actions: bool = False
    """Play one-hot moves (``Discrete(5)``) instead of continuous force vectors."""
    max_episode_len: int = 25
    """Transitions per episode."""
    num_episodes: int = 10_000
    """Episodes of one play-out (summed over the parallel games)."""
    good_policy: str = "maddpg"
    """Learner of the good agents: ``maddpg`` or ``m3ddpg`` (``mmmaddpg``)."""
    bad_policy: str = "maddpg"
    """Learner of the adversaries: ``maddpg`` or ``m3ddpg`` (``mmmaddpg``)."""
    lr: float = 1e-2
    """Adam learning rate of actors and critics."""
    gamma: float = 0.95
    """Discount factor."""
    batch_size: int = 1024
    """Transitions per gradient step."""
    num_units: int = 64
    """Width of the two hidden layers of every actor and critic."""
    adv_eps: float = 1e-3
    """M3DDPG: size of the worst-case perturbation of a competitor's action."""
    adv_eps_s: float = 1e-5
    """M3DDPG: size of the worst-case perturbation of a collaborator's action."""
    agent_update_freq: int = 1
    """Environment steps (of every parallel game) between gradient steps."""
    polyak: float = 1e-4
    """Target update ``target <- (1 - polyak) target + polyak params``."""
    replay_buffer_capacity: int = 1_000_000
    """Transitions the replay buffer holds (the oldest are overwritten)."""
    learning_starts: int | None = None
    """Transitions stored before the first gradient step; ``None``: MADDPG's
    ``batch_size * max_episode_len``."""
    explore_noise: float = 0.1
    """Standard deviation of the Gaussian noise added to continuous actions."""
    num_envs: int = 1
    """Games played in parallel."""
    num_seeds: int = 1
    """Seeds trained at once (vmapped)."""
    seed: int = 0
    """Base random seed; seed ``i`` uses ``fold_in(key(seed), i)``."""

    def __post_init__(self):
        check_fields(self)
        for team in ("good_policy", "bad_policy"):
            name = getattr(self, team)
            object.__setattr__(self, team, POLICY_ALIASES.get(name, name))
            if getattr(self, team) not in self.allowed_policies:
                raise InvalidParameterError(
                    f"{team} must be one of {', '.join(self.allowed_policies)}, "
                    f"got {name!r}"
                )
        if self.scenario not in ("push", "adversary"):
            raise InvalidParameterError(
                f"scenario must be push or adversary, got {self.scenario!r}"
            )
        check_positive(
            self,
            "num_adversaries", "max_episode_len", "num_episodes", "lr", "batch_size",
            "num_units", "agent_update_freq", "replay_buffer_capacity", "num_envs",
            "num_seeds",
        )  # fmt: skip
        check_range(self, "gamma", 0.0, 1.0)
        check_range(self, "polyak", 0.0, 1.0)
        for name in ("adv_eps", "adv_eps_s", "explore_noise"):
            check_range(self, name, 0.0, math.inf)
        if self.learning_starts is not None and self.learning_starts < 0:
            raise InvalidParameterError(
                f"learning_starts must be >= 0, got {self.learning_starts}"
            )
        check_seed("seed", self.seed)
        for name in ("num_episodes", "replay_buffer_capacity", "max_episode_len"):
            check_count(name, getattr(self, name))
        if self.num_episodes % self.num_envs:
            raise InvalidParameterError(
                f"num_episodes ({self.num_episodes}) must be a multiple of num_envs "
                f"({self.num_envs})"
            )
        if self.replay_buffer_capacity % self.num_envs:
            raise InvalidParameterError(
                f"replay_buffer_capacity ({self.replay_buffer_capacity}) must be a "
                f"multiple of num_envs ({self.num_envs})"
            )

    allowed_policies = MADDPG_POLICIES

    # -- derived ---------------------------------------------------------------------
    @property
    def team_policies(self) -> tuple[str, str]:
        """Learner of each team, adversaries first (the games' team order)."""
        return (self.bad_policy, self.good_policy)

    @property
    def updates_per_playout(self) -> int:
        """Gradient steps per play-out: one every ``agent_update_freq`` steps of
        the ``num_episodes / num_envs`` episodes each game plays (rounded up)."""
        steps = self.num_episodes // self.num_envs * self.max_episode_len
        return math.ceil(steps / self.agent_update_freq)

    @property
    def steps_per_playout(self) -> int:
        """Steps each parallel game takes in one play-out."""
        return self.updates_per_playout * self.agent_update_freq

    @property
    def warmup(self) -> int:
        """Transitions stored before the first gradient step."""
        if self.learning_starts is None:
            return self.batch_size * self.max_episode_len
        return self.learning_starts

    @property
    def buffer_capacity(self) -> int:
        """Replay capacity actually allocated: the buffer is emptied at each
        play-out, so it never needs more than one play-out's transitions."""
        return min(self.replay_buffer_capacity, self.steps_per_playout * self.num_envs)

    @property
    def env_overrides(self) -> dict[str, Any]:
        """Fields passed to :func:`mopa.envs.make` for ``scenario``."""
        return {
            "num_adversaries": self.num_adversaries,
            "continuous_actions": not self.discrete_actions,
            "max_steps": self.max_episode_len,
        }

    # -- serialisation ---------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return json.loads(json.dumps(dataclasses.asdict(self)))

    def replace(self, **changes: Any) -> MADDPGConfig:
        """A copy with ``changes``; unknown fields are named in the error."""
        names = {f.name for f in dataclasses.fields(self)}
        unknown = sorted(set(changes) - names)
        if unknown:
            raise InvalidParameterError(
                f"unknown {type(self).__name__} field {unknown[0]!r}"
            )
        return dataclasses.replace(self, **changes)
