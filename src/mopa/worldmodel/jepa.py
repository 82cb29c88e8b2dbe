"""The JEPA latent world model: encode the state, roll the latent with an
action-conditioned transition, and read positions and velocities out of it::

    params, metrics = jax.jit(make_train_jepa_world(config))(key, episodes)

On a window of ``H`` transitions (``config.rollout_steps``) with normalised
states ``x_0..x_H`` and actions ``a_0..a_{H-1}``: ``z_0 = f(x_0)``,
``z_i = g(z_{i-1}, a_{i-1})``, and the loss is

``1/H sum_i |z_i - sg(f_target(x_i))|^2                      (prediction)``
``+ variance_weight * mean_j max(0, 1 - std_batch(s z_j))     (variance hinge)``
``+ covariance_weight * sum_{j != l} cov(s z_j, s z_l)^2 / Z   (covariance)``
``+ readout_weight * mean |r(sg(z)) - x|^2                    (readout)``

with ``f`` the online encoder (``z_j`` latent unit ``j`` of the window's encoded
states, ``s = sqrt(Z)`` for normalised latents and 1 otherwise),
``f_target`` its EMA copy (never trained by gradient; ``target <- decay * target +
(1 - decay) * encoder`` after every update), latents L2-normalised when
``config.normalize`` (as BYOL), and ``sg`` the stop-gradient. The latent path is
trained only to predict the target's embedding of the next state (no
reconstruction: Assran et al., 2023; V-JEPA 2-AC, 2025); the readout learns to
decode the state features from the encoded latents and from the predicted ones,
both with their gradient stopped, so rewards and errors can be computed on
positions.

``params`` is ``{"norm": statistics [F], "online": encoder, transition and
readout, "target": the EMA encoder}``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from mopa.policy import apply_by_rows
from mopa.worldmodel.config import JEPAWorldConfig
from mopa.worldmodel.data import (
    EpisodeData,
    Windows,
    check_episodes,
    normaliser,
    sample_windows,
)
from mopa.worldmodel.networks import LatentWorldModel
from mopa.worldmodel.ssm import identity_norm
from mopa.worldmodel.training import FitState, apply_gradients, fit, optimiser


def module(config: JEPAWorldConfig) -> LatentWorldModel:
    return LatentWorldModel(
        config.hidden,
        config.latent_size,
        config.predictor_hidden,
        config.state_size,
        config.activation,
        config.normalize,
    )


def _encoder_part(variables: Any) -> Any:
    """The encoder's weights of the online variables (what the target copies)."""
    return {"params": {"encoder": variables["params"]["encoder"]}}


def init_params(
    config: JEPAWorldConfig, key: jax.Array, norm: dict | None = None
) -> Any:
    """Fresh weights (the target a copy of the online encoder) and ``norm``
    (identity statistics when ``None``)."""
    x = jnp.zeros((1, config.state_size))
    a = jnp.zeros((1, config.action_size))
    online = module(config).init(key, x, a)
    return {
        "norm": norm or identity_norm(config.state_size),
        "online": online,
        "target": _encoder_part(online),
    }


def _one_hot(config: JEPAWorldConfig, action: jax.Array) -> jax.Array:
    onehot = jax.nn.one_hot(action, config.num_actions)
    return onehot.reshape(*action.shape[:-1], config.action_size)


def _normalise(norm: dict, x: jax.Array) -> jax.Array:
    return (x - norm["x_mean"]) / norm["x_std"]


def _rows(config: JEPAWorldConfig, params: Any, method: Any, *inputs: jax.Array):
    """The online model's ``method`` on ``inputs [..., D]``, on rows under vmap
    (:func:`~mopa.policy.apply_by_rows`: the numbers of the method; inference
    only)."""
    return apply_by_rows(module(config), params["online"], *inputs, method=method)


def encode(config: JEPAWorldConfig, params: Any, x: jax.Array) -> jax.Array:
    """``[..., F]`` state features -> ``[..., Z]`` latent (inference)."""
    xn = _normalise(params["norm"], x)
    return _rows(config, params, LatentWorldModel.encode, xn)


def latent_step(
    config: JEPAWorldConfig, params: Any, z: jax.Array, action: jax.Array
) -> jax.Array:
    """``(z [..., Z], joint action [..., N]) -> z' [..., Z]`` (inference)."""
    onehot = _one_hot(config, action)
    return _rows(config, params, LatentWorldModel.step, z, onehot)


def decode(config: JEPAWorldConfig, params: Any, z: jax.Array) -> jax.Array:
    """``[..., Z]`` latent -> ``[..., F]`` state features (the readout;
    inference)."""
    read = _rows(config, params, LatentWorldModel.read, z)
    return params["norm"]["x_mean"] + params["norm"]["x_std"] * read


def jepa_world_loss(
    config: JEPAWorldConfig,
    online: Any,
    target: Any,
    norm: dict,
    windows: Windows,
) -> tuple[jax.Array, dict]:
    """The objective of the module docstring on ``windows`` (leaves ``[B, ...]``).

    Returns:
        ``(loss, {"prediction", "variance", "readout"})``.
    """
    net = module(config)
    xn = _normalise(norm, windows.state)  # [B, H + 1, F]
    onehot = _one_hot(config, windows.actions)  # [B, H, U]
    embedding = net.apply(online, xn, method=LatentWorldModel.embed)
    encoded = net.apply(online, embedding, method=LatentWorldModel.latent)

    def roll(z0, actions):
        def step(z, a):
            z = net.apply(online, z, a, method=LatentWorldModel.step)
            return z, z

        return jax.lax.scan(step, z0, actions)[1]

    predicted = jax.vmap(roll)(encoded[:, 0], onehot)  # [B, H, Z]
    target_latent = jax.lax.stop_gradient(
        net.apply(target, xn[:, 1:], method=LatentWorldModel.encode)
    )
    prediction = jnp.mean(jnp.sum((predicted - target_latent) ** 2, -1))

    # A unit latent spread evenly over Z units has a deviation of 1/sqrt(Z) in
    # each, so normalised latents are scaled by sqrt(Z) before the hinge.
    scale = jnp.sqrt(config.latent_size) if config.normalize else 1.0
    flat = scale * encoded.reshape(-1, encoded.shape[-1])
    std = jnp.sqrt(jnp.var(flat, 0) + 1e-4)
    variance = jnp.mean(jax.nn.relu(1.0 - std))
    centred = flat - jnp.mean(flat, 0)
    cov = centred.T @ centred / (flat.shape[0] - 1)
    off_diagonal = cov - jnp.diag(jnp.diag(cov))
    covariance = jnp.sum(off_diagonal**2) / config.latent_size

    latents = jnp.concatenate([encoded, predicted], 1)  # [B, 2H + 1, Z]
    truth = jnp.concatenate([xn, xn[:, 1:]], 1)
    read = net.apply(online, latents, method=LatentWorldModel.read)
    readout = jnp.mean(jnp.sum((read - truth) ** 2, -1))

    loss = (
        prediction
        + config.variance_weight * variance
        + config.covariance_weight * covariance
        + config.readout_weight * readout
    )
    metrics = {
        "prediction": prediction,
        "variance": variance,
        "covariance": covariance,
        "readout": readout,
    }
    return loss, metrics


def ema(target: Any, online: Any, decay: float) -> Any:
    """``decay * target + (1 - decay) * online``, leaf by leaf."""
    return jax.tree.map(lambda t, o: decay * t + (1.0 - decay) * o, target, online)


def make_train_jepa_world(config: JEPAWorldConfig) -> Callable:
    """``train(key, episodes: EpisodeData) -> (params, metrics)``; metrics
    ``loss``, ``prediction``, ``variance`` and ``readout``, each
    ``[num_updates]``."""
    H = config.rollout_steps

    def train(key: jax.Array, episodes: EpisodeData):
        check_episodes(episodes, config.num_agents, H)
        key_init, key_fit = jax.random.split(key)
        params = init_params(config, key_init, normaliser(episodes))
        norm = params["norm"]

        def update(state: FitState, key_t: jax.Array):
            windows = sample_windows(key_t, episodes, config.batch_size, H)
            (loss, metrics), grads = jax.value_and_grad(
                lambda p: jepa_world_loss(
                    config, p, state.target_params, norm, windows
                ),
                has_aux=True,
            )(state.params)
            online, opt_state = apply_gradients(config, state, grads)
            target = ema(state.target_params, _encoder_part(online), config.ema_decay)
            state = FitState(online, opt_state, target, state.update + 1)
            return state, {"loss": loss, **metrics}

        online = params["online"]
        state = FitState(
            online, optimiser(config).init(online), params["target"], jnp.int32(0)
        )
        state, metrics = fit(config, state, update, key_fit)
        return (
            {"norm": norm, "online": state.params, "target": state.target_params},
            metrics,
        )

    return train


@dataclasses.dataclass(frozen=True)
class LatentDynamics:
    """The JEPA world model as a :class:`~mopa.worldmodel.dynamics.Dynamics`: its
    hidden state is the latent; it reports no disagreement (zero)."""

    config: JEPAWorldConfig

    def init(self, key: jax.Array) -> Any:
        return init_params(self.config, key)

    def encode(self, params: Any, x: jax.Array) -> jax.Array:
        return encode(self.config, params, x)

    def decode(self, params: Any, h: jax.Array) -> jax.Array:
        return decode(self.config, params, h)

    def advance(
        self, params: Any, key: jax.Array, h: jax.Array, action: jax.Array
    ) -> tuple[jax.Array, jax.Array]:
        del key
        return latent_step(self.config, params, h, action), jnp.zeros(())
