"""Wrappers for training: automatic reset that keeps the true final observation, and
per-episode statistics.

Wrappers are games themselves (same ``reset``/``step`` signature), so they compose
and can be vmapped and scanned like any game.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

from mopa.envs.base import Env, StepOutput, TeamArrays


class Wrapper(Env):
    """A game that delegates everything it does not override to ``env``."""

    def __init__(self, env: Env):
        self.env = env
        self.name = env.name
        self.team_names = env.team_names

    @property
    def team_sizes(self) -> tuple[int, ...]:
        return self.env.team_sizes

    @property
    def unwrapped(self) -> Env:
        """The innermost game."""
        return self.env.unwrapped if isinstance(self.env, Wrapper) else self.env

    def observation_space(self, team: int):
        return self.env.observation_space(team)

    def action_space(self, team: int):
        return self.env.action_space(team)

    @property
    def default_params(self) -> Any:
        return self.env.default_params

    def validate_params(self, params: Any) -> None:
        self.env.validate_params(params)

    def check_actions(self, actions: Any) -> TeamArrays:
        return self.env.check_actions(actions)

    def __getattr__(self, name: str) -> Any:
        # Only reached for attributes not found normally: forward to the inner game.
        if name == "env":
            raise AttributeError(name)
        return getattr(self.env, name)

    def __hash__(self) -> int:
        return hash((type(self), self.env))

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and self.env == other.env


class AutoReset(Wrapper):
    """Reset automatically when an episode ends.

    On the step that ends an episode (terminated or truncated), the returned
    observation and state are those of a fresh episode; the true final observation
    and state are kept in ``info["final_obs"]`` and ``info["final_state"]`` (on
    other steps they equal the returned ones) and ``info["done"]`` says the episode
    ended.
    ``observe(state)`` therefore always matches the returned observation.
    """

    def _reset(self, key: jax.Array, params: Any) -> tuple[TeamArrays, Any]:
        return self.env.reset(key, params)

    def _step(
        self, key: jax.Array, state: Any, actions: TeamArrays, params: Any
    ) -> StepOutput:
        key_step, key_reset = jax.random.split(key)
        obs, next_state, rewards, terminated, truncated, info = self.env.step(
            key_step, state, actions, params
        )
        done = terminated | truncated
        reset_obs, reset_state = self.env.reset(key_reset, params)
        info = {**info, "final_obs": obs, "final_state": next_state, "done": done}
        next_state = jax.tree.map(
            lambda r, s: jnp.where(done, r, s), reset_state, next_state
        )
        obs = jax.tree.map(lambda r, s: jnp.where(done, r, s), reset_obs, obs)
        return obs, next_state, rewards, terminated, truncated, info

    def observe(self, state: Any, params: Any) -> TeamArrays:
        return self.env.observe(state, params)


@struct.dataclass
class LogState:
    """Inner game state plus running and last-finished episode statistics."""

    env_state: Any
    episode_returns: TeamArrays  # per team [A_t], running
    episode_length: jax.Array  # [] int32, running
    returned_episode_returns: TeamArrays  # per team [A_t], of the last finished episode
    returned_episode_length: jax.Array  # [] int32
    episode_sums: dict = struct.field(default_factory=dict)  # info key -> [] running
    returned_episode_sums: dict = struct.field(default_factory=dict)  # last finished


class EpisodeStats(Wrapper):
    """Track per-agent episode returns and lengths; wrap it around :class:`AutoReset`.

    ``info["episode_returns"]`` (per team ``[A_t]``) and ``info["episode_length"]``
    hold the statistics of the most recently finished episode, and
    ``info["done"]`` marks the steps on which one finished. For each scalar info
    key in ``sum_keys`` (e.g. ``"captures"``), ``info["episode_<key>"]`` holds its
    total over that episode.
    """

    def __init__(self, env: Env, sum_keys: tuple[str, ...] = ()):
        super().__init__(env)
        self.sum_keys = tuple(sum_keys)

    def __hash__(self) -> int:
        return hash((type(self), self.env, self.sum_keys))

    def __eq__(self, other: object) -> bool:
        return super().__eq__(other) and self.sum_keys == other.sum_keys

    def _reset(self, key: jax.Array, params: Any) -> tuple[TeamArrays, LogState]:
        obs, env_state = self.env.reset(key, params)
        zeros = tuple(jnp.zeros((n,)) for n in self.team_sizes)
        sums = {k: jnp.zeros(()) for k in self.sum_keys}
        state = LogState(
            env_state,
            zeros,
            jnp.zeros((), jnp.int32),
            zeros,
            jnp.zeros((), jnp.int32),
            sums,
            sums,
        )
        return obs, state

    def _step(
        self, key: jax.Array, state: LogState, actions: TeamArrays, params: Any
    ) -> StepOutput:
        obs, env_state, rewards, terminated, truncated, info = self.env.step(
            key, state.env_state, actions, params
        )
        done = info.get("done", terminated | truncated)
        returns = tuple(
            r + g for r, g in zip(state.episode_returns, rewards, strict=True)
        )
        length = state.episode_length + 1
        sums = {
            k: state.episode_sums[k] + jnp.asarray(info[k], jnp.float32)
            for k in self.sum_keys
        }
        keep = lambda new, old: jnp.where(done, new, old)  # noqa: E731
        state = LogState(
            env_state=env_state,
            episode_returns=tuple(r * (1 - done) for r in returns),
            episode_length=length * (1 - done),
            returned_episode_returns=jax.tree.map(
                keep, returns, state.returned_episode_returns
            ),
            returned_episode_length=keep(length, state.returned_episode_length),
            episode_sums={k: v * (1 - done) for k, v in sums.items()},
            returned_episode_sums=jax.tree.map(keep, sums, state.returned_episode_sums),
        )
        info = {
            **info,
            "done": done,
            "episode_returns": state.returned_episode_returns,
            "episode_length": state.returned_episode_length,
            **{f"episode_{k}": v for k, v in state.returned_episode_sums.items()},
        }
        return obs, state, rewards, terminated, truncated, info

    def observe(self, state: LogState, params: Any) -> TeamArrays:
        return self.env.observe(state.env_state, params)
