"""The training loop every world model shares: ``num_updates`` Adam updates in
one ``lax.scan``, each on a fresh minibatch of windows."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import optax

from mopa.worldmodel.config import WorldModelConfig


class FitState(NamedTuple):
    """The carry of a training scan."""

    params: Any  # the trained variables
    opt_state: Any
    target_params: Any  # the JEPA's EMA target encoder; () for the ensemble
    update: jax.Array  # [] int32 updates done


UpdateFn = Callable[[FitState, jax.Array], tuple[FitState, dict]]
"""``(state, key) -> (state, metrics)``: one update; draws its own minibatch."""


def optimiser(config: WorldModelConfig) -> optax.GradientTransformation:
    """Adam at ``config.learning_rate``, after global-norm clipping if asked."""
    adam = optax.adam(config.learning_rate)
    if config.max_grad_norm > 0:
        return optax.chain(optax.clip_by_global_norm(config.max_grad_norm), adam)
    return adam


def fit(
    config: WorldModelConfig, state: FitState, update_fn: UpdateFn, key: jax.Array
) -> tuple[FitState, dict]:
    """Run ``config.num_updates`` updates; metrics are ``[num_updates]`` arrays."""
    return jax.lax.scan(update_fn, state, jax.random.split(key, config.num_updates))


def apply_gradients(
    config: WorldModelConfig, state: FitState, grads: Any
) -> tuple[Any, Any]:
    """``(params, opt_state)`` after one optimiser step on ``grads``."""
    updates, opt_state = optimiser(config).update(grads, state.opt_state, state.params)
    return optax.apply_updates(state.params, updates), opt_state
