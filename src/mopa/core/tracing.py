"""Keeping tracing cheap: scans under ``vmap``.

A ``lax.scan`` traced under ``vmap`` finds which parts of its carry are batched by
a fixed point: it batches its body with the carry as it starts, and again with
every part that the body made batched (a zero that accumulates a batched reward,
a counter reset when a batched game ends), until nothing changes. Each round
batches the whole body again, scans nested in it included, which repeat their own
rounds: two levels of two rounds trace the innermost body four times. An
episode's scan holding a planner's rollout scans spent most of a tournament's
tracing there. :func:`batched_like` starts a carry batched wherever a key is, so
the first round is the last.

It is used for the episode's scan (:func:`mopa.eval.evaluate.play_episode`), whose
players' results it left bit for bit as they were. It is not used for a
planner's rollouts: there it changed the planning blue's moves in
``results/cotrain`` in a few steps (presumably rounding: the root state is the
same for every candidate, so products on it ran once, unbatched, and batched from
the start they run per candidate with other kernels).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp


def batched_like(tree: Any, key: jax.Array) -> Any:
    """``tree`` with the same values, batched wherever ``key`` is (under ``vmap``).

    Each numeric leaf has a zero drawn from ``key`` subtracted (``x - 0`` keeps
    every value, signed zeros included), each boolean leaf or-ed with a false one;
    other leaves (keys) are returned as they are. Outside ``vmap``, or with an
    unbatched ``key``, nothing changes but a few no-op operations.

    Args:
        tree: a scan's initial carry.
        key: one PRNG key (typed or raw), batched as the scan's inputs are.
    """
    zero = jax.random.bits(key, (), jnp.uint32) & 0  # 0, batched as ``key`` is

    def leaf(x):
        x = jnp.asarray(x)
        if x.dtype == jnp.bool_:
            return x | (zero != 0)
        if jnp.issubdtype(x.dtype, jnp.number):
            return x - zero.astype(x.dtype)
        return x

    return jax.tree.map(leaf, tree)


__all__ = ["batched_like"]
