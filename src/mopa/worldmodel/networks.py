"""Flax modules of the world models: the dynamics MLP of one ensemble member and
the JEPA latent world model (encoder, action-conditioned latent transition,
readout of the state).

Modules hold no training logic and no normalisation: they map normalised
features to normalised outputs, so saved weights are rebuilt from a config alone.
"""

from __future__ import annotations

from collections.abc import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

from mopa.models.encoders import MLP


class DeltaModel(nn.Module):
    """One dynamics model: ``(state [..., F], action one-hot [..., U]) ->
    normalised change of the state [..., F]``."""

    hidden: Sequence[int]
    state_size: int
    activation: str = "relu"

    @nn.compact
    def __call__(self, x: jax.Array, action: jax.Array) -> jax.Array:
        inputs = jnp.concatenate([x, action], -1)
        return MLP(self.hidden, self.state_size, self.activation)(inputs)


def l2_normalise(z: jax.Array) -> jax.Array:
    """``z / |z|`` along the last axis (safe at 0)."""
    return z / jnp.sqrt(jnp.sum(z * z, -1, keepdims=True) + 1e-12)


class LatentWorldModel(nn.Module):
    """Encoder ``f``, latent transition ``g`` and readout ``r``.

    The latent of a state is ``z = f(x)`` (L2-normalised when ``normalize``); the
    transition is residual, ``z' = z + g(z, a)`` (normalised again); the readout
    decodes the state features from a latent with the gradient stopped, so the
    latent path is never trained to reconstruct.
    """

    hidden: Sequence[int]
    latent_size: int
    predictor_hidden: Sequence[int]
    state_size: int
    activation: str = "relu"
    normalize: bool = True

    def setup(self):
        self.encoder = MLP(self.hidden, self.latent_size, self.activation)
        self.transition = MLP(self.predictor_hidden, self.latent_size, self.activation)
        self.readout = MLP(self.hidden, self.state_size, self.activation)

    def embed(self, x: jax.Array) -> jax.Array:
        """``[..., F] -> [..., Z]``: the encoder's raw output."""
        return self.encoder(x)

    def latent(self, embedding: jax.Array) -> jax.Array:
        """The latent state of an embedding (normalised when ``normalize``)."""
        return l2_normalise(embedding) if self.normalize else embedding

    def encode(self, x: jax.Array) -> jax.Array:
        """``[..., F] -> [..., Z]``: the latent state of ``x``."""
        return self.latent(self.embed(x))

    def step(self, z: jax.Array, action: jax.Array) -> jax.Array:
        """``(z [..., Z], action one-hot [..., U]) -> z' [..., Z]``."""
        delta = self.transition(jnp.concatenate([z, action], -1))
        return self.latent(z + delta)

    def read(self, z: jax.Array) -> jax.Array:
        """``[..., Z] -> [..., F]``; gradients do not reach the latent."""
        return self.readout(jax.lax.stop_gradient(z))

    def __call__(self, x: jax.Array, action: jax.Array):
        """``(latent, next latent, readout)`` of ``x`` under ``action``."""
        z = self.encode(x)
        return z, self.step(z, action), self.read(z)
