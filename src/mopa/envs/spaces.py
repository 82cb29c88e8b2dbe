"""Observation and action spaces of mopa's games.

Spaces describe one agent of a team. They are plain, hashable Python objects (never
traced), with a jittable ``sample`` and a ``contains`` check used by the contract
tests and the PettingZoo adapter.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np


@dataclass(frozen=True)
class Discrete:
    """``n`` actions ``0 .. n-1``."""

    n: int
    dtype: str = "int32"

    @property
    def shape(self) -> tuple[int, ...]:
        return ()

    def sample(self, key: jax.Array, shape: tuple[int, ...] = ()) -> jax.Array:
        """Uniform actions of the given batch ``shape``."""
        return jax.random.randint(key, shape, 0, self.n, dtype=self.dtype)

    def contains(self, x) -> bool:
        """Whether every element of ``x`` is an integer in ``[0, n)``."""
        x = np.asarray(x)
        if not np.issubdtype(x.dtype, np.integer):
            return False
        return bool(np.all((x >= 0) & (x < self.n)))


@dataclass(frozen=True)
class Box:
    """A box ``low <= x <= high`` of the given shape (bounds may be infinite)."""

    low: float
    high: float
    shape: tuple[int, ...]
    dtype: str = "float32"

    def sample(self, key: jax.Array, shape: tuple[int, ...] = ()) -> jax.Array:
        """Uniform samples; infinite bounds are replaced by a unit normal."""
        full = tuple(shape) + self.shape
        if np.isfinite(self.low) and np.isfinite(self.high):
            return jax.random.uniform(
                key, full, self.dtype, minval=self.low, maxval=self.high
            )
        return jax.random.normal(key, full, self.dtype)

    def contains(self, x) -> bool:
        """Whether ``x`` has this shape (as trailing axes), a float dtype and lies
        inside the bounds."""
        x = np.asarray(x)
        if (
            x.ndim < len(self.shape)
            or x.shape[x.ndim - len(self.shape) :] != self.shape
        ):
            return False
        if not np.issubdtype(x.dtype, np.floating):
            return False
        return bool(np.all((x >= self.low) & (x <= self.high)))


def as_jnp_dtype(space: Discrete | Box) -> jnp.dtype:
    """The JAX dtype of values in ``space``."""
    return jnp.dtype(space.dtype)
