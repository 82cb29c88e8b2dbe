"""Dynamics models behind one interface, their open-loop rollouts and their
k-step position error.

A :class:`Dynamics` is a hashable object (static structure only) whose numbers
come in as ``params``; it moves a *hidden state* ``h`` (the state features for
the ensemble, a latent for the JEPA)::

    params = dynamics.init(key)                          # untrained weights
    h = dynamics.encode(params, x)                       # x [F] -> h
    h, disagreement = dynamics.advance(params, key, h, action)   # action [N]
    x = dynamics.decode(params, h)                       # h -> x [F]

:class:`SimulatorDynamics` is the game's own physics in this form (its params are
the game's params): the zero-error model, which a learned model is compared
with and which checks that :class:`~mopa.worldmodel.env.LearnedDynamicsEnv`
reproduces the game.

Errors (:func:`rmse_by_step`): from every start ``t`` of every held-out episode
with ``k`` transitions after it, the model is rolled ``k`` steps open-loop with
the true actions; the error at step ``i`` is the root mean square over starts
and agents of the Euclidean distance between predicted and true positions.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any, Protocol

import jax
import jax.numpy as jnp
import numpy as np

from mopa.envs.pursuit import (
    PursuitEnv,
    action_directions,
    integrate_bodies,
    per_agent,
)
from mopa.errors import InvalidParameterError
from mopa.worldmodel.config import JEPAWorldConfig, SSMConfig, WorldModelConfig
from mopa.worldmodel.data import EpisodeData, split_features, state_features
from mopa.worldmodel.jepa import LatentDynamics, make_train_jepa_world
from mopa.worldmodel.ssm import EnsembleDynamics, make_train_ssm


class Dynamics(Protocol):
    """A model of one step of the game's positions and velocities."""

    def init(self, key: jax.Array) -> Any:
        """Fresh parameters (untrained weights)."""

    def encode(self, params: Any, x: jax.Array) -> Any:
        """``[F]`` state features -> the model's hidden state."""

    def advance(
        self, params: Any, key: jax.Array, h: Any, action: jax.Array
    ) -> tuple[Any, jax.Array]:
        """One step under the joint action ``[N]``: ``(next hidden state,
        disagreement [])``."""

    def decode(self, params: Any, h: Any) -> jax.Array:
        """The hidden state -> ``[F]`` state features."""


@dataclasses.dataclass(frozen=True)
class SimulatorDynamics:
    """The pursuit game's own physics as a :class:`Dynamics` (``params`` are the
    game's :class:`~mopa.envs.pursuit.PursuitParams`; obstacles at
    ``params.obstacle_pos``, as in the games with pinned obstacles)."""

    env: PursuitEnv

    def init(self, key: jax.Array) -> Any:
        del key
        return self.env.default_params

    def encode(self, params: Any, x: jax.Array) -> jax.Array:
        return x

    def decode(self, params: Any, h: jax.Array) -> jax.Array:
        return h

    def advance(
        self, params: Any, key: jax.Array, h: jax.Array, action: jax.Array
    ) -> tuple[jax.Array, jax.Array]:
        del key
        sizes = self.env.team_sizes
        pos, vel = split_features(h)
        accel = per_agent((params.predator_accel, params.prey_accel), sizes)
        force = action_directions(action.astype(jnp.int32)) * accel[:, None]
        obstacles = params.obstacle_pos
        pos, vel = integrate_bodies(
            pos,
            vel,
            force,
            per_agent((params.predator_radius, params.prey_radius), sizes),
            per_agent((params.predator_max_speed, params.prey_max_speed), sizes),
            obstacles,
            jnp.broadcast_to(params.obstacle_radius, obstacles.shape[:1]),
            params,
        )
        return state_features(pos, vel), jnp.zeros(())


def make_train(config: WorldModelConfig) -> Callable:
    """``train(key, episodes: EpisodeData) -> (params, metrics)`` of ``config``'s
    model (:func:`~mopa.worldmodel.ssm.make_train_ssm` or
    :func:`~mopa.worldmodel.jepa.make_train_jepa_world`)."""
    if isinstance(config, SSMConfig):
        return make_train_ssm(config)
    if isinstance(config, JEPAWorldConfig):
        return make_train_jepa_world(config)
    raise InvalidParameterError(f"not a world model config: {type(config).__name__}")


def dynamics_of(config: WorldModelConfig, member: str = "mean") -> Dynamics:
    """The :class:`Dynamics` of a trained model of ``config`` (``member``: how
    the ensemble steps, ``"mean"`` or ``"sample"``; unused by the JEPA)."""
    if isinstance(config, SSMConfig):
        return EnsembleDynamics(config, member)
    if isinstance(config, JEPAWorldConfig):
        return LatentDynamics(config)
    raise InvalidParameterError(f"not a world model config: {type(config).__name__}")


def rollout(
    dynamics: Dynamics,
    params: Any,
    key: jax.Array,
    x: jax.Array,
    actions: jax.Array,
    through_state: bool = False,
) -> jax.Array:
    """Roll ``dynamics`` open-loop from ``x`` ``[F]`` under ``actions`` ``[k, N]``.

    Args:
        through_state: decode and re-encode the state at every step (what
            :class:`~mopa.worldmodel.env.LearnedDynamicsEnv` does, whose state is
            the game's) instead of rolling the hidden state.

    Returns:
        ``[k, F]`` the predicted state features after each step.
    """

    def step(h, inputs):
        action, key_t = inputs
        h, _ = dynamics.advance(params, key_t, h, action)
        x = dynamics.decode(params, h)
        if through_state:
            h = dynamics.encode(params, x)
        return h, x

    keys = jax.random.split(key, actions.shape[0])
    return jax.lax.scan(step, dynamics.encode(params, x), (actions, keys))[1]


def _windows(episodes: EpisodeData, k: int) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Every start with ``k`` transitions after it: ``(x0 [W, F], actions
    [W, k, N], true positions [W, k, N, 2])``."""
    M, T = episodes.state.shape[:2]
    if not 1 <= k < T:
        raise InvalidParameterError(f"k must be in [1, {T - 1}], got {k}")
    starts = jnp.arange(T - k)
    offsets = jnp.arange(k)
    actions = episodes.actions[:, starts[:, None] + offsets]  # [M, S, k, N]
    after = episodes.state[:, starts[:, None] + offsets + 1]  # [M, S, k, F]
    x0 = episodes.state[:, starts]  # [M, S, F]
    flat = lambda a: a.reshape(-1, *a.shape[2:])  # noqa: E731
    return flat(x0), flat(actions), split_features(flat(after))[0]


@functools.partial(jax.jit, static_argnames=("dynamics", "k", "through_state"))
def rmse_by_step(
    dynamics: Dynamics,
    params: Any,
    episodes: EpisodeData,
    k: int = 5,
    key: jax.Array | None = None,
    through_state: bool = False,
) -> jax.Array:
    """``[k]`` open-loop position RMSE after ``1..k`` steps (see the module
    docstring), over every start of ``episodes`` with ``k`` steps after it
    (jitted; ``dynamics``, ``k`` and ``through_state`` are static).

    Args:
        episodes: held-out :class:`EpisodeData` (``[M, T, ...]``).
        key: for a sampling ensemble (one key per start); default ``key(0)``.
        through_state: see :func:`rollout`.
    """
    x0, actions, truth = _windows(episodes, k)
    key = jax.random.key(0) if key is None else key
    keys = jax.random.split(key, x0.shape[0])
    predicted = jax.vmap(
        lambda x, a, kk: rollout(dynamics, params, kk, x, a, through_state)
    )(x0, actions, keys)
    pos = split_features(predicted)[0]  # [W, k, N, 2]
    squared = jnp.sum((pos - truth) ** 2, -1)  # [W, k, N]
    return jnp.sqrt(jnp.mean(squared, axis=(0, 2)))


def rmse_k_step(
    dynamics: Dynamics,
    params: Any,
    episodes: EpisodeData,
    k: int = 5,
    key: jax.Array | None = None,
    through_state: bool = False,
) -> jax.Array:
    """``[]`` the open-loop position RMSE after ``k`` steps (the last entry of
    :func:`rmse_by_step`)."""
    return rmse_by_step(dynamics, params, episodes, k, key, through_state)[-1]


def constant_rmse_by_step(episodes: EpisodeData, k: int = 5) -> jax.Array:
    """``[k]`` the same error for the baseline that predicts no motion (every
    agent stays where it is)."""
    x0, _, truth = _windows(episodes, k)
    pos = split_features(x0)[0][:, None]  # [W, 1, N, 2]
    return jnp.sqrt(jnp.mean(jnp.sum((pos - truth) ** 2, -1), axis=(0, 2)))


def fit_and_score(
    config: WorldModelConfig,
    key: jax.Array,
    train: EpisodeData,
    held_out: EpisodeData,
    k: int = 5,
    member: str = "sample",
) -> tuple[Any, dict[str, Any]]:
    """Train a world model on ``train`` and score it open loop on ``held_out``.

    Args:
        member: the ensemble's rollout (:func:`dynamics_of`; ``"sample"``: a
            member drawn every step, as a planner rolls it).

    Returns:
        ``(params, figures)``: ``rmse_<k>step`` (the position RMSE ``k`` steps
        out), ``rmse_by_step`` ``[k]``, ``rmse_<k>step_through_state`` (rolled
        through the game's state features) and ``final_loss``.
    """
    params, metrics = jax.jit(make_train(config))(key, train)
    dynamics = dynamics_of(config, member=member)
    by_step = rmse_by_step(dynamics, params, held_out, k=k)
    through = rmse_by_step(dynamics, params, held_out, k=k, through_state=True)
    return params, {
        f"rmse_{k}step": float(by_step[-1]),
        "rmse_by_step": np.asarray(by_step).tolist(),
        f"rmse_{k}step_through_state": float(through[-1]),
        "final_loss": float(np.asarray(metrics["loss"])[-1]),
    }
