"""Flax modules of the opponent encoders: an MLP-VAE, a JEPA (context encoder,
predictor and a linear readout) and a strategy classifier.

Every module maps a flat representation ``[..., D]`` (any leading batch axes) to
its outputs. Training lives in :mod:`mopa.opponent.encoders`; these modules hold
no training logic, so saved weights are rebuilt from a config alone.
"""

from __future__ import annotations

from collections.abc import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

from mopa.models.networks import Trunk


class MLP(nn.Module):
    """``Trunk(hidden) -> Dense(out_size)``."""

    hidden: Sequence[int]
    out_size: int
    activation: str = "relu"

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:  # [..., D] -> [..., out_size]
        return nn.Dense(self.out_size)(Trunk(self.hidden, self.activation)(x))


class VAE(nn.Module):
    """MLP variational auto-encoder (Kingma and Welling, 2014).

    The encoder gives a diagonal Gaussian ``q(z | x) = N(mean, exp(logvar))``; the
    decoder maps ``z`` to ``output_size`` numbers: the mean of a Gaussian or the
    logits of independent Bernoullis, as the trainer's likelihood says.
    """

    hidden: Sequence[int]
    latent_size: int
    output_size: int
    activation: str = "relu"

    def setup(self):
        self.encoder = MLP(self.hidden, 2 * self.latent_size, self.activation)
        self.decoder = MLP(
            tuple(reversed(self.hidden)), self.output_size, self.activation
        )

    def encode(self, x: jax.Array) -> tuple[jax.Array, jax.Array]:
        """``[..., D] -> (mean [..., Z], logvar [..., Z])``."""
        mean, logvar = jnp.split(self.encoder(x), 2, axis=-1)
        return mean, logvar

    def decode(self, z: jax.Array) -> jax.Array:
        """``[..., Z] -> [..., output_size]`` (Gaussian mean or Bernoulli logits)."""
        return self.decoder(z)

    def __call__(
        self, x: jax.Array, key: jax.Array
    ) -> tuple[jax.Array, jax.Array, jax.Array]:
        """One reparameterised sample ``z = mean + exp(logvar / 2) * eps``.

        Returns:
            ``(decoded [..., output_size], mean [..., Z], logvar [..., Z])``.
        """
        mean, logvar = self.encode(x)
        z = mean + jnp.exp(0.5 * logvar) * jax.random.normal(key, mean.shape)
        return self.decode(z), mean, logvar


class JEPA(nn.Module):
    """Joint-embedding predictive architecture (Assran et al., 2023, I-JEPA).

    ``encoder`` maps a representation to a latent; ``predictor`` maps a context
    latent to the predicted latent of the target (the target's latent comes from
    an EMA copy of ``encoder``, applied with :meth:`encode` and other weights);
    ``readout`` is a linear map from the latent to ``readout_size`` numbers (e.g.
    a predicted arrival position), trained on the stop-gradient latent.
    """

    hidden: Sequence[int]
    latent_size: int
    predictor_hidden: Sequence[int]
    readout_size: int = 2
    activation: str = "relu"

    def setup(self):
        self.encoder = MLP(self.hidden, self.latent_size, self.activation)
        self.predictor = MLP(self.predictor_hidden, self.latent_size, self.activation)
        self.readout = nn.Dense(self.readout_size)

    def encode(self, x: jax.Array) -> jax.Array:
        """``[..., D] -> [..., Z]``."""
        return self.encoder(x)

    def predict(self, z: jax.Array) -> jax.Array:
        """``[..., Z] -> [..., Z]``: the target latent predicted from a context one."""
        return self.predictor(z)

    def read(self, z: jax.Array) -> jax.Array:
        """``[..., Z] -> [..., readout_size]``; gradients do not reach the latent."""
        return self.readout(jax.lax.stop_gradient(z))

    def __call__(self, x: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
        """``[..., D] -> (latent, predicted target latent, readout)``."""
        z = self.encode(x)
        return z, self.predict(z), self.read(z)


class Classifier(nn.Module):
    """Softmax classifier over ``num_classes`` strategies on an MLP trunk."""

    hidden: Sequence[int]
    num_classes: int
    activation: str = "relu"

    def setup(self):
        self.trunk = Trunk(self.hidden, self.activation)
        self.head = nn.Dense(self.num_classes)

    def features(self, x: jax.Array) -> jax.Array:
        """``[..., D] -> [..., hidden[-1]]``: the last hidden layer."""
        return self.trunk(x)

    def __call__(self, x: jax.Array) -> jax.Array:
        """``[..., D] -> logits [..., num_classes]``."""
        return self.head(self.features(x))
