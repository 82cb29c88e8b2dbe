"""Batched rollouts: ``vmap`` over games, ``lax.scan`` over steps, one jitted call.

A policy is any function ``policy_fn(key, obs, state) -> actions`` over one game
(``obs`` and ``actions`` per-team tuples); :func:`rollout` vmaps it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from functools import partial
from typing import Any, NamedTuple

import jax

from mopa.envs.base import Env, TeamArrays
from mopa.envs.wrappers import AutoReset, Wrapper

PolicyFn = Callable[[jax.Array, TeamArrays, Any], TeamArrays]


class Trajectory(NamedTuple):
    """A rollout, time on the leading axis (after the batch axis, if any)."""

    state: Any  # the state each action was taken in
    obs: TeamArrays  # per team [T, A_t, D_t]: the observation each action saw
    actions: TeamArrays  # per team [T, A_t]
    rewards: TeamArrays  # per team [T, A_t]
    terminated: jax.Array  # [T]
    truncated: jax.Array  # [T]
    info: dict  # per-step info, each leaf [T, ...]


@dataclasses.dataclass(frozen=True)
class RandomPolicy:
    """Uniformly random actions for every agent of every team.

    A hashable policy object, so rollouts of the same game reuse one compilation.
    """

    env: Env

    def __call__(self, key: jax.Array, obs: TeamArrays, state: Any) -> TeamArrays:
        env = self.env
        keys = jax.random.split(key, env.num_teams)
        return tuple(
            env.action_space(t).sample(keys[t], (env.team_sizes[t],))
            for t in range(env.num_teams)
        )


def random_policy(env: Env) -> PolicyFn:
    """Uniformly random actions for every agent of every team of ``env``."""
    return RandomPolicy(env)


def has_auto_reset(env: Env) -> bool:
    """Whether ``env`` is wrapped in :class:`AutoReset` (at any depth)."""
    while isinstance(env, Wrapper):
        if isinstance(env, AutoReset):
            return True
        env = env.env
    return False


def rollout(
    env: Env,
    params: Any,
    policy_fn: PolicyFn,
    key: jax.Array,
    num_steps: int,
    batch_size: int | None = None,
    auto_reset: bool = True,
) -> Trajectory:
    """Play ``num_steps`` steps from fresh resets, jitted.

    Args:
        env: the game (wrapped in :class:`AutoReset` here unless it already is and
            ``auto_reset`` is true, so episodes chain).
        params: the game's parameters (shared by the batch).
        policy_fn: ``(key, obs, state) -> actions`` for one game.
        key: PRNG key.
        num_steps: steps per game (static).
        batch_size: number of games played in parallel; ``None`` plays one game
            without a batch axis.
        auto_reset: start a new episode when one ends.

    Returns:
        A :class:`Trajectory` with leaves ``[T, ...]``, or ``[B, T, ...]`` batched.
    """
    if auto_reset and not has_auto_reset(env):
        env = AutoReset(env)
    return _rollout_jit(env, policy_fn, num_steps, batch_size, key, params)


@partial(jax.jit, static_argnums=(0, 1, 2, 3))
def _rollout_jit(
    env: Env, policy_fn: PolicyFn, num_steps: int, batch_size: int | None, key, params
) -> Trajectory:
    # Compiled once per (game, policy, length, batch): games and wrappers hash by
    # their static structure, so a fresh AutoReset(env) hits the cache.
    if batch_size is None:
        return _rollout_one(env, policy_fn, num_steps, key, params)
    keys = jax.random.split(key, batch_size)
    return jax.vmap(
        partial(_rollout_one, env, policy_fn, num_steps), in_axes=(0, None)
    )(keys, params)


def _rollout_one(
    env: Env, policy_fn: PolicyFn, num_steps: int, key: jax.Array, params: Any
) -> Trajectory:
    key_reset, key_steps = jax.random.split(key)
    obs, state = env.reset(key_reset, params)

    def body(carry, key_t):
        obs, state = carry
        key_act, key_step = jax.random.split(key_t)
        actions = policy_fn(key_act, obs, state)
        next_obs, next_state, rewards, terminated, truncated, info = env.step(
            key_step, state, actions, params
        )
        step = Trajectory(state, obs, actions, rewards, terminated, truncated, info)
        return (next_obs, next_state), step

    _, trajectory = jax.lax.scan(
        body, (obs, state), jax.random.split(key_steps, num_steps)
    )
    return trajectory
