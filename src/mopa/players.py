"""Players: whatever acts for one team in a game, a trained policy or a planner
wrapped around one.

A player is a small hashable description (a static argument under ``jit``) with a
pure ``act`` function; its numbers (network weights, the game's params a planner
simulates with, an opponent model's weights) travel separately as ``params``, so
players of one kind are stacked and ``vmap``-ed over::

    actions, carry = player.act(params, key, state, obs, carry, reset)

* ``state``: the game's true state. Planners simulate from it; policies ignore it.
* ``obs``: the team's observations ``[A, D]``.
* ``carry``: recurrent state ``[A, H]`` (``H = carry_size``, 0 for feed-forward).
* ``reset``: ``[A]`` bool, true on an episode's first step.

Returns ``actions [A]`` (int32 for discrete games) and the next carry.

A player whose ``act``, ``vmap``-ed over games, works through the games one after
another (a tree search) says so with a ``games_in_turn`` attribute that is true
(:func:`plays_games_in_turn`); a player that wraps a planner passes on the
planner's. A tournament on one device plays such a player as a program of its own,
beside the others, since it keeps one core busy whatever the batch.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Protocol

import jax
import jax.numpy as jnp

from mopa.policy import PolicySpec, make_act_fn


class Player(Protocol):
    """The interface every player implements; see the module docstring."""

    @property
    def num_agents(self) -> int: ...

    @property
    def carry_size(self) -> int: ...

    def act(
        self,
        params: Any,
        key: jax.Array,
        state: Any,
        obs: jax.Array,
        carry: jax.Array,
        reset: jax.Array,
    ) -> tuple[jax.Array, jax.Array]: ...


@dataclasses.dataclass(frozen=True)
class PolicyPlayer:
    """A team policy as a player: acts on its observations alone.

    ``params`` are the policy's network weights (as ``init_params`` or a
    checkpoint gives them).
    """

    spec: PolicySpec
    greedy: bool = True
    """Take the mode of an actor's distribution (Q policies are always greedy)."""

    @property
    def num_agents(self) -> int:
        return self.spec.num_agents

    @property
    def carry_size(self) -> int:
        return self.spec.carry_size

    def act(self, params, key, state, obs, carry, reset):
        del state
        return make_act_fn(self.spec)(params, key, obs, carry, reset, self.greedy)


def plays_games_in_turn(player: Player | None) -> bool:
    """Whether ``player`` (``None``: no player) works through a batch of games one
    after another: its ``games_in_turn`` attribute, false when it has none."""
    return bool(getattr(player, "games_in_turn", False))


def initial_player_carry(player: Player) -> jax.Array:
    """Zero carry ``[A, H]`` of ``player``."""
    return jnp.zeros((player.num_agents, player.carry_size), jnp.float32)


def act_all(
    players: tuple[Player, ...],
    player_params: tuple[Any, ...],
    key: jax.Array,
    state: Any,
    obs: tuple[jax.Array, ...],
    carries: tuple[jax.Array, ...],
    first: jax.Array,
) -> tuple[jax.Array, tuple[jax.Array, ...], tuple[jax.Array, ...]]:
    """Every team's player acts once (one player per team, in team order).

    The step's ``key`` splits into ``num_teams + 1`` keys: the first is returned
    for the game's step, key ``1 + t`` is team ``t``'s. ``first`` ([] bool) marks
    an episode's first step (each player's ``reset``).

    Returns:
        ``(key_env, actions per team, carries per team)``.
    """
    keys = jax.random.split(key, len(players) + 1)
    acted = [
        player.act(p, k, state, o, c, jnp.full((player.num_agents,), first))
        for player, p, k, o, c in zip(
            players, player_params, keys[1:], obs, carries, strict=True
        )
    ]
    return keys[0], tuple(a for a, _ in acted), tuple(c for _, c in acted)
