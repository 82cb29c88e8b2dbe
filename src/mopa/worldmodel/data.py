"""Transition data of the world models: episodes of every agent's position and
velocity with the joint action taken at each step, built from a
:class:`~mopa.opponent.data.TrajectoryDataset` or played here in one jitted scan.

An :class:`EpisodeData` holds ``M`` episodes of ``T`` steps; step ``t``'s action
moves state ``t`` to state ``t + 1``, so an episode gives ``T - 1`` transitions.
Training draws windows of ``H + 1`` consecutive states and their ``H`` actions
(:func:`sample_windows`); normalisation statistics (:func:`normaliser`) are
computed from the training episodes and stored with the weights.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from mopa.envs.base import Env
from mopa.errors import InvalidParameterError
from mopa.opponent.data import TrajectoryDataset, generate
from mopa.players import Player

STD_FLOOR = 1e-6
"""Smallest standard deviation a feature is divided by."""


class EpisodeData(NamedTuple):
    """Episodes of the modelled state and the joint actions."""

    state: jax.Array  # [M, T, 4N] float32: positions then velocities
    actions: jax.Array  # [M, T, N] int32: every agent's action, teams in order


class Windows(NamedTuple):
    """A batch of training windows."""

    state: jax.Array  # [B, H + 1, 4N]
    actions: jax.Array  # [B, H, N]


def state_features(pos: jax.Array, vel: jax.Array) -> jax.Array:
    """``[..., N, 2]`` positions and velocities -> ``[..., 4N]`` features: every
    agent's position (x, y), then every agent's velocity."""
    lead = pos.shape[:-2]
    return jnp.concatenate([pos.reshape(*lead, -1), vel.reshape(*lead, -1)], -1)


def split_features(x: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Inverse of :func:`state_features`: ``[..., 4N] -> (pos, vel)``, each
    ``[..., N, 2]``."""
    N = x.shape[-1] // 4
    lead = x.shape[:-1]
    return x[..., : 2 * N].reshape(*lead, N, 2), x[..., 2 * N :].reshape(*lead, N, 2)


def episodes_from_dataset(dataset: TrajectoryDataset) -> EpisodeData:
    """The episodes of a pursuit-game dataset as :class:`EpisodeData`.

    Positions come from the ``pos`` array; velocities from each team's
    observations, which in the pursuit games start with the agent's own velocity.

    Args:
        dataset: a dataset of a game whose episodes last exactly ``horizon`` steps.

    Returns:
        :class:`EpisodeData` with ``M = dataset.num_episodes``, ``T = horizon``.
    """
    pos = dataset.episodes("pos")  # [M, T, N, 2]
    teams = dataset.header["team_names"]
    vel = np.concatenate(
        [dataset.episodes(f"obs.{team}")[..., :2] for team in teams], axis=2
    )
    actions = np.concatenate(
        [dataset.episodes(f"actions.{team}") for team in teams], axis=2
    )
    if vel.shape != pos.shape:
        raise InvalidParameterError(
            f"velocities read from the observations have shape {vel.shape}, "
            f"positions {pos.shape}: not a pursuit-game dataset"
        )
    return EpisodeData(
        jnp.asarray(state_features(jnp.asarray(pos), jnp.asarray(vel)), jnp.float32),
        jnp.asarray(actions, jnp.int32),
    )


def generate_episodes(
    env: Env,
    params: Any,
    players: tuple[Player, ...],
    player_params: tuple[Any, ...],
    key: jax.Array,
    num_episodes: int,
) -> EpisodeData:
    """Play ``num_episodes`` episodes of ``players`` on ``env`` (one jitted
    ``vmap`` of a ``lax.scan``, :func:`mopa.opponent.data.generate`) and return
    their :class:`EpisodeData`."""
    dataset = generate(
        env, params, players, player_params, key, num_chains=num_episodes
    )
    return episodes_from_dataset(dataset)


def select_episodes(data: EpisodeData, index: Any) -> EpisodeData:
    """The episodes at ``index`` (an index array or a slice)."""
    return EpisodeData(data.state[index], data.actions[index])


def normaliser(data: EpisodeData) -> dict[str, jax.Array]:
    """Feature statistics of ``data``: ``x_mean``, ``x_std`` (of the states) and
    ``d_mean``, ``d_std`` (of one-step changes), each ``[4N]``."""
    x = data.state.reshape(-1, data.state.shape[-1])
    d = (data.state[:, 1:] - data.state[:, :-1]).reshape(-1, data.state.shape[-1])
    return {
        "x_mean": jnp.mean(x, 0),
        "x_std": jnp.maximum(jnp.std(x, 0), STD_FLOOR),
        "d_mean": jnp.mean(d, 0),
        "d_std": jnp.maximum(jnp.std(d, 0), STD_FLOOR),
    }


def check_episodes(data: EpisodeData, num_agents: int, window: int) -> None:
    """Raise :class:`InvalidParameterError` unless ``data`` has ``num_agents``
    agents and episodes of at least ``window + 1`` steps (static shapes)."""
    state, actions = data
    if state.ndim != 3 or state.shape[-1] != 4 * num_agents:
        raise InvalidParameterError(
            f"episode state must be [M, T, {4 * num_agents}] (num_agents "
            f"{num_agents}), got {tuple(state.shape)}"
        )
    if actions.shape != (*state.shape[:2], num_agents):
        raise InvalidParameterError(
            f"episode actions must be [M, T, {num_agents}] matching the state, "
            f"got {tuple(actions.shape)}"
        )
    if state.shape[1] < window + 1:
        raise InvalidParameterError(
            f"episodes of {state.shape[1]} steps are too short for windows of "
            f"{window} transitions"
        )


def sample_windows(
    key: jax.Array, data: EpisodeData, batch_size: int, steps: int
) -> Windows:
    """``batch_size`` windows of ``steps`` transitions, episode and start drawn
    uniformly (with replacement)."""
    M, T = data.state.shape[:2]
    key_episode, key_start = jax.random.split(key)
    episode = jax.random.randint(key_episode, (batch_size,), 0, M)
    start = jax.random.randint(key_start, (batch_size,), 0, T - steps)

    def one(m, t):
        x = jax.lax.dynamic_slice_in_dim(data.state[m], t, steps + 1)
        a = jax.lax.dynamic_slice_in_dim(data.actions[m], t, steps)
        return x, a

    return Windows(*jax.vmap(one)(episode, start))
