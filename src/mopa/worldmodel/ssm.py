"""The ensemble of state-space dynamics models: ``E`` MLPs, each predicting the
change of every agent's position and velocity from the state and the one-hot
joint action, trained together (the members vmapped)::

    params, metrics = jax.jit(make_train_ssm(config))(key, episodes)

Member ``e`` steps a state as ``x' = x + d_mean + d_std * net_e((x - x_mean) /
x_std, onehot(a))`` with the statistics of :func:`mopa.worldmodel.data.normaliser`.
Its loss on a window of ``H`` transitions (``config.rollout_steps``) rolls the
member open-loop from the window's first state with the true actions and averages
``|(x_hat_i - x_i) / d_std|^2`` over the ``H`` steps (for ``H = 1`` the squared
error of the normalised change). Each member draws its own minibatches, so the
members differ by their data and their initialisation (Lakshminarayanan et al.,
2017; Chua et al., 2018, PETS).

``params`` is ``{"norm": statistics [F], "members": weights with a leading [E]
axis}``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from mopa.errors import InvalidParameterError
from mopa.worldmodel.config import SSMConfig
from mopa.worldmodel.data import (
    EpisodeData,
    Windows,
    check_episodes,
    normaliser,
    sample_windows,
    split_features,
)
from mopa.worldmodel.networks import DeltaModel
from mopa.worldmodel.training import FitState, apply_gradients, fit, optimiser

MEMBER_MODES = ("mean", "sample")


def identity_norm(state_size: int) -> dict[str, jax.Array]:
    """Statistics that leave features unchanged (zero means, unit deviations)."""
    zeros, ones = jnp.zeros((state_size,)), jnp.ones((state_size,))
    return {"x_mean": zeros, "x_std": ones, "d_mean": zeros, "d_std": ones}


def module(config: SSMConfig) -> DeltaModel:
    return DeltaModel(config.hidden, config.state_size, config.activation)


def init_params(config: SSMConfig, key: jax.Array, norm: dict | None = None) -> Any:
    """Fresh ensemble weights (``E`` independent initialisations) and ``norm``
    (identity statistics when ``None``)."""
    x = jnp.zeros((1, config.state_size))
    a = jnp.zeros((1, config.action_size))
    members = jax.vmap(lambda k: module(config).init(k, x, a))(
        jax.random.split(key, config.num_members)
    )
    return {"norm": norm or identity_norm(config.state_size), "members": members}


def _one_hot(config: SSMConfig, action: jax.Array) -> jax.Array:
    """``[..., N]`` actions -> ``[..., N x num_actions]``."""
    onehot = jax.nn.one_hot(action, config.num_actions)
    return onehot.reshape(*action.shape[:-1], config.action_size)


def member_step(
    config: SSMConfig, norm: dict, member: Any, x: jax.Array, action: jax.Array
) -> jax.Array:
    """One member's next state ``[F]`` from ``x`` ``[F]`` and the joint action
    ``[N]``."""
    xn = (x - norm["x_mean"]) / norm["x_std"]
    delta = module(config).apply(member, xn, _one_hot(config, action))
    return x + norm["d_mean"] + norm["d_std"] * delta


def ensemble_step(
    config: SSMConfig, params: Any, x: jax.Array, action: jax.Array
) -> jax.Array:
    """``[E, F]``: every member's next state from ``x`` ``[F]`` under the joint
    action ``[N]``."""
    return jax.vmap(lambda m: member_step(config, params["norm"], m, x, action))(
        params["members"]
    )


def _window_loss(config: SSMConfig, norm: dict, member: Any, window: Windows):
    """One member's mean squared error (in units of ``d_std``) over a window's
    ``H`` open-loop steps."""

    def step(x, action):
        x = member_step(config, norm, member, x, action)
        return x, x

    _, predicted = jax.lax.scan(step, window.state[0], window.actions)
    return jnp.mean(((predicted - window.state[1:]) / norm["d_std"]) ** 2)


def ssm_loss(
    config: SSMConfig, members: Any, norm: dict, windows: Windows
) -> tuple[jax.Array, jax.Array]:
    """The ensemble's loss: the sum over members of each member's mean window
    loss (so each member's gradient is its own loss's), and the ``[E]`` member
    losses.

    Args:
        members: weights with a leading ``[E]`` axis.
        windows: :class:`Windows` with leaves ``[E, B, ...]`` (a batch per member).
    """

    def member_loss(member, batch):
        losses = jax.vmap(lambda w: _window_loss(config, norm, member, w))(batch)
        return jnp.mean(losses)

    losses = jax.vmap(member_loss)(members, windows)
    return jnp.sum(losses), losses


def make_train_ssm(config: SSMConfig) -> Callable:
    """``train(key, episodes: EpisodeData) -> (params, metrics)``; metrics
    ``loss`` (the members' mean) and ``loss_spread`` (their standard deviation),
    each ``[num_updates]``."""
    H, E = config.rollout_steps, config.num_members

    def train(key: jax.Array, episodes: EpisodeData):
        check_episodes(episodes, config.num_agents, H)
        key_init, key_fit = jax.random.split(key)
        params = init_params(config, key_init, normaliser(episodes))
        norm, members = params["norm"], params["members"]

        def update(state: FitState, key_t: jax.Array):
            batches = jax.vmap(
                lambda k: sample_windows(k, episodes, config.batch_size, H)
            )(jax.random.split(key_t, E))
            (_, losses), grads = jax.value_and_grad(
                lambda m: ssm_loss(config, m, norm, batches), has_aux=True
            )(state.params)
            new_params, opt_state = apply_gradients(config, state, grads)
            state = FitState(new_params, opt_state, (), state.update + 1)
            return state, {"loss": jnp.mean(losses), "loss_spread": jnp.std(losses)}

        state = FitState(members, optimiser(config).init(members), (), jnp.int32(0))
        state, metrics = fit(config, state, update, key_fit)
        return {"norm": norm, "members": state.params}, metrics

    return train


@dataclasses.dataclass(frozen=True)
class EnsembleDynamics:
    """The ensemble as a :class:`~mopa.worldmodel.dynamics.Dynamics`: its hidden
    state is the state features themselves.

    ``member="mean"`` steps with the mean of the members' predictions;
    ``"sample"`` with one member drawn at every step (PETS's TS-1). Either way the
    step reports the members' disagreement: the root mean square over agents of
    the members' spread of the predicted positions.
    """

    config: SSMConfig
    member: str = "mean"

    def __post_init__(self):
        if self.member not in MEMBER_MODES:
            raise InvalidParameterError(
                f"member must be one of {MEMBER_MODES}, got {self.member!r}"
            )

    def init(self, key: jax.Array) -> Any:
        return init_params(self.config, key)

    def encode(self, params: Any, x: jax.Array) -> jax.Array:
        return x

    def decode(self, params: Any, h: jax.Array) -> jax.Array:
        return h

    def advance(
        self, params: Any, key: jax.Array, h: jax.Array, action: jax.Array
    ) -> tuple[jax.Array, jax.Array]:
        predictions = ensemble_step(self.config, params, h, action)  # [E, F]
        if self.member == "mean":
            chosen = jnp.mean(predictions, 0)
        else:
            # The drawn member alone: when the disagreement goes unused, XLA drops
            # the other members' networks.
            e = jax.random.randint(key, (), 0, self.config.num_members)
            member = jax.tree.map(lambda w: w[e], params["members"])
            chosen = member_step(self.config, params["norm"], member, h, action)
        pos = split_features(predictions)[0]  # [E, N, 2]
        spread = jnp.mean(jnp.sum((pos - jnp.mean(pos, 0)) ** 2, -1), 0)  # [N]
        return chosen, jnp.sqrt(jnp.mean(spread))
