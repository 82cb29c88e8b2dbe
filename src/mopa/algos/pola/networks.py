"""Recurrent policies and critics of the sampled POLA algorithms, and a tabular
memory-one IPD policy used to check estimators against exact values.

A network is a hashable description with ``init(key, obs_size) -> params``,
``initial_carry(batch) -> carry`` and ``step(params, carry, obs) -> (carry, out)``
over a batch; :func:`unroll` runs it over a sequence with ``lax.scan``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp


class _GRUModule(nn.Module):
    num_outputs: int
    hidden_size: int
    layers_before_gru: int

    @nn.compact
    def __call__(self, carry: jax.Array, obs: jax.Array):
        x = obs
        for _ in range(self.layers_before_gru):
            x = nn.relu(nn.Dense(self.hidden_size)(x))
        carry, x = nn.GRUCell(self.hidden_size)(carry, x)
        return carry, nn.Dense(self.num_outputs)(x)


@dataclasses.dataclass(frozen=True)
class GRUNetwork:
    """``layers_before_gru`` x (Dense + ReLU), a GRU, and a Dense head with
    ``num_outputs`` outputs (action logits, or 1 for a critic)."""

    num_outputs: int
    hidden_size: int = 64
    layers_before_gru: int = 1

    @property
    def _module(self) -> _GRUModule:
        return _GRUModule(self.num_outputs, self.hidden_size, self.layers_before_gru)

    def init(self, key: jax.Array, obs_size: int) -> Any:
        """Parameters for observations of size ``obs_size``."""
        return self._module.init(key, self.initial_carry(1), jnp.zeros((1, obs_size)))

    def initial_carry(self, batch: int) -> jax.Array:
        """``[B, H]`` zero hidden state."""
        return jnp.zeros((batch, self.hidden_size))

    def step(
        self, params: Any, carry: jax.Array, obs: jax.Array
    ) -> tuple[jax.Array, jax.Array]:
        """One step: ``[B, H]``, ``[B, D]`` -> ``[B, H]``, ``[B, num_outputs]``."""
        return self._module.apply(params, carry, obs)


@dataclasses.dataclass(frozen=True)
class TabularIPDPolicy:
    """A memory-one IPD policy: one cooperation logit per state (DD, DC, CD, CC,
    start), read from the ``ipd`` observation. Outputs logits ``[0, theta_s]`` over
    (defect, cooperate), so ``P(C) = sigmoid(theta_s)``."""

    num_outputs: int = 2

    def init(self, key: jax.Array, obs_size: int) -> jax.Array:
        return 0.1 * jax.random.normal(key, (5,))

    def initial_carry(self, batch: int) -> jax.Array:
        return jnp.zeros((batch, 1))

    def step(
        self, params: jax.Array, carry: jax.Array, obs: jax.Array
    ) -> tuple[jax.Array, jax.Array]:
        a1 = jnp.argmax(obs[:, :3], -1)
        a2 = jnp.argmax(obs[:, 3:], -1)
        state = jnp.where(a1 == 2, 4, 2 * a1 + a2)
        theta = params[state]
        return carry, jnp.stack([jnp.zeros_like(theta), theta], -1)


def unroll(network: Any, params: Any, obs: jax.Array) -> jax.Array:
    """Outputs of ``network`` over a sequence from a zero carry.

    Args:
        network: a network (see the module docstring).
        params: its parameters.
        obs: ``[T, B, D]`` observations.

    Returns:
        ``[T, B, num_outputs]``.
    """

    def body(carry, x):
        return network.step(params, carry, x)

    _, out = jax.lax.scan(body, network.initial_carry(obs.shape[1]), obs)
    return out
