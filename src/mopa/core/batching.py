"""Batching rules that run a function on one batch entry after another.

``vmap`` turns a function into one program over the whole batch. For some work
that is slower than a loop: a tree search over many games (each game's tree is
small, and the batched tree's gathers and scatters cost more than the search), or
a network whose weights differ from entry to entry (a product batched over many
entries' weights ran slower than the layered network on each entry's rows).
:func:`map_batched` runs such work with ``lax.map`` over the batched leaves only,
and :func:`one_after_another` makes it what ``vmap`` of a function does::

    search = one_after_another(search_one_game)
    plans = jax.vmap(search)(params, keys)  # lax.map over the games
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax


def map_batched(fn: Callable[..., Any], in_batched: Any, *args: Any) -> Any:
    """``fn(*args)`` for every entry of the leading axis of the batched leaves of
    ``args``, one entry after another (``lax.map``), stacked along a new leading
    axis.

    Args:
        fn: called with ``args``' structure, batched leaves indexed by entry.
        in_batched: ``args``' structure with a bool per leaf (as a
            ``custom_vmap`` rule receives it): true for the leaves with the
            leading batch axis. The others are shared by every entry: closed
            over, not copied per entry. At least one leaf is batched.
    """
    leaves, treedef = jax.tree.flatten(args)
    batched = jax.tree.leaves(in_batched)
    if len(batched) != len(leaves) or not any(batched):
        raise ValueError(
            f"in_batched: {len(batched)} flags for {len(leaves)} leaves, "
            f"{sum(map(bool, batched))} batched (need one flag per leaf, one true)"
        )

    def one(entry_leaves):
        entry = iter(entry_leaves)
        full = [next(entry) if b else x for x, b in zip(leaves, batched, strict=True)]
        return fn(*jax.tree.unflatten(treedef, full))

    return jax.lax.map(one, [x for x, b in zip(leaves, batched, strict=True) if b])


def one_after_another(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` whose ``vmap`` runs it on one batch entry after another
    (:func:`map_batched`: the unbatched arguments are shared). Nested ``vmap``-s
    nest the maps. Called without ``vmap`` it is ``fn``."""
    mapped = jax.custom_batching.custom_vmap(fn)

    @mapped.def_vmap
    def rule(axis_size, in_batched, *args):
        del axis_size
        out = map_batched(mapped, in_batched, *args)
        return out, jax.tree.map(lambda _: True, out)

    return mapped
