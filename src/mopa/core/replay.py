"""A fixed-size replay buffer as a pure pytree: ring insertion, uniform sampling.

Items are any pytree (a transition, or a segment of consecutive transitions with a
leading time axis). Storage is preallocated, ``[capacity, ...]`` per leaf, so the
buffer lives in a jitted training carry and is saved with it. Batches of ``n`` items
are written contiguously, so ``capacity`` must be a multiple of ``n``.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp


class ReplayBuffer(NamedTuple):
    data: Any  # pytree, every leaf [capacity, ...]
    size: jax.Array  # [] int32: items stored (at most capacity)
    position: jax.Array  # [] int32: where the next batch goes


def init_buffer(example: Any, capacity: int) -> ReplayBuffer:
    """An empty buffer for items shaped like ``example`` (one item, no batch axis)."""
    data = jax.tree.map(
        lambda x: jnp.zeros((capacity, *jnp.shape(x)), jnp.asarray(x).dtype), example
    )
    zero = jnp.zeros((), jnp.int32)
    return ReplayBuffer(data, zero, zero)


def capacity(buffer: ReplayBuffer) -> int:
    return jax.tree.leaves(buffer.data)[0].shape[0]


def add_batch(buffer: ReplayBuffer, items: Any) -> ReplayBuffer:
    """Write ``n`` items (leading axis ``n`` on every leaf), overwriting the oldest.

    ``capacity`` must be a multiple of ``n`` (checked at trace time).
    """
    cap = capacity(buffer)
    n = jax.tree.leaves(items)[0].shape[0]
    if cap % n:
        raise ValueError(f"buffer capacity {cap} is not a multiple of batch {n}")
    data = jax.tree.map(
        lambda store, new: jax.lax.dynamic_update_slice_in_dim(
            store, new.astype(store.dtype), buffer.position, 0
        ),
        buffer.data,
        items,
    )
    return ReplayBuffer(
        data,
        jnp.minimum(buffer.size + n, cap),
        (buffer.position + n) % cap,
    )


def sample(buffer: ReplayBuffer, key: jax.Array, batch_size: int) -> Any:
    """``batch_size`` items drawn uniformly, with replacement, from those stored.

    Sampling an empty buffer returns item 0 (zeros); callers gate learning on
    ``buffer.size``.
    """
    index = jax.random.randint(key, (batch_size,), 0, jnp.maximum(buffer.size, 1))
    return jax.tree.map(lambda x: x[index], buffer.data)
