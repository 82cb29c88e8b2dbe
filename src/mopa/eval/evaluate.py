"""Play players against each other and measure them.

:func:`play_episode` plays one episode of one player per team (a ``lax.scan`` over
steps) and returns its totals; :func:`play_episodes` is its jitted ``vmap`` over
episode keys, and the tournament (:mod:`mopa.eval.tournament`) ``vmap``-s it over
more axes. :func:`evaluate` wraps trained policies as players and reports, per team,
the mean episode return (averaged over the team's agents) with a 95% confidence
interval over episodes, and every scalar the game totals per episode (such as
``captures``).
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from mopa.core.checks import check_fits_memory, tree_bytes
from mopa.core.tracing import batched_like
from mopa.envs.base import Env, episode_sum_keys
from mopa.errors import InvalidParameterError
from mopa.eval.intervals import half_width
from mopa.players import Player, PolicyPlayer, act_all, initial_player_carry
from mopa.policy import PolicySpec


class EpisodeTotals(NamedTuple):
    """What one episode adds up to (leading axes where episodes are batched)."""

    returns: jax.Array
    """``[T]`` each team's return, averaged over the team's agents."""
    sums: dict[str, jax.Array]
    """``{key: []}`` every scalar of :func:`~mopa.envs.base.episode_sum_keys`
    (such as ``captures``), summed over the episode."""


# A stored program's output tree names its NamedTuples (mopa.core.program_store).
jax.export.register_namedtuple_serialization(
    EpisodeTotals, serialized_name="mopa.eval.evaluate.EpisodeTotals"
)


def episode_horizon(params: Any, horizon: int | None = None) -> int:
    """Steps per episode: ``horizon``, or else the game's ``params.max_steps``.

    Raises:
        InvalidParameterError: neither is there, or ``horizon < 1``.
    """
    if horizon is None:
        if not hasattr(params, "max_steps"):
            raise InvalidParameterError(
                "give horizon: the game's params have no max_steps"
            )
        horizon = params.max_steps
    horizon = int(horizon)
    if horizon < 1:
        raise InvalidParameterError(f"horizon must be >= 1, got {horizon}")
    return horizon


def play_episode(
    env: Env,
    params: Any,
    players: tuple[Player, ...],
    player_params: tuple[Any, ...],
    key: jax.Array,
    horizon: int,
) -> EpisodeTotals:
    """Play one episode of ``players`` (one per team, in ``env.team_names`` order).

    Every step splits its key into one for the game and one per team; each player
    acts on the game's true state, its team's observations ``[A, D]``, its carry
    ``[A, H]`` and ``reset [A]`` (true on the first step). Rewards after the game
    ends (terminated or truncated) are not counted.

    Args:
        env, params: the game and its parameters.
        players: one :class:`~mopa.players.Player` per team (static).
        player_params: each player's ``params`` (one seed: no seed axis).
        key: the episode's key ``[]``.
        horizon: steps played (static), e.g. :func:`episode_horizon`.

    Returns:
        The episode's :class:`EpisodeTotals` (``returns [T]``, ``sums {key: []}``).
    """
    sum_keys = episode_sum_keys(env, params)
    key_reset, key_run = jax.random.split(key)
    obs, state = env.reset(key_reset, params)
    carries = tuple(initial_player_carry(player) for player in players)
    returns = tuple(jnp.zeros((player.num_agents,)) for player in players)
    sums = {k: jnp.zeros(()) for k in sum_keys}

    def step(carry, key):
        obs, state, carries, alive, returns, sums, first = carry
        key_env, actions, carries = act_all(
            players, player_params, key, state, obs, carries, first
        )
        obs, state, rewards, terminated, truncated, info = env.step(
            key_env, state, actions, params
        )
        live = alive.astype(jnp.float32)
        returns = tuple(t + live * r for t, r in zip(returns, rewards, strict=True))
        sums = {k: sums[k] + live * jnp.asarray(info[k], jnp.float32) for k in sums}
        alive = alive & ~(terminated | truncated)
        return (obs, state, carries, alive, returns, sums, jnp.zeros((), bool)), None

    init = (obs, state, carries, jnp.ones((), bool), returns, sums)
    init = (*batched_like(init, key_reset), jnp.ones((), bool))  # cheap to trace
    (_, _, _, _, returns, sums, _), _ = jax.lax.scan(
        step, init, jax.random.split(key_run, horizon)
    )
    return EpisodeTotals(jnp.stack([r.mean() for r in returns]), sums)


def check_games_fit(env: Env, params: Any, num_games: int, name: str) -> None:
    """Refuse ``num_games`` games played at once that would not fit in memory:
    each holds its state and every team's observations (a lower bound: players
    hold more), sized by ``jax.eval_shape`` before anything is allocated.

    Args:
        name: the input that set ``num_games`` (``num_episodes``), for the error.

    Raises:
        InvalidParameterError: naming ``name``.
    """
    one = tree_bytes(jax.eval_shape(env.reset, jax.random.key(0), params))
    check_fits_memory(
        name,
        num_games * one,
        f"{num_games:,} games at once ({one:,} bytes of state and observations each)",
    )


@functools.partial(jax.jit, static_argnames=("env", "players", "horizon"))
def play_episodes(
    env: Env,
    params: Any,
    players: tuple[Player, ...],
    player_params: tuple[Any, ...],
    keys: jax.Array,
    horizon: int,
) -> EpisodeTotals:
    """:func:`play_episode` for every key of ``keys [N]``, in parallel (jitted).

    Returns:
        :class:`EpisodeTotals` with ``returns [N, T]`` and ``sums {key: [N]}``.
    """
    return jax.vmap(
        lambda key: play_episode(env, params, players, player_params, key, horizon)
    )(keys)


def evaluate(
    env: Env,
    params: Any,
    policies: tuple[tuple[PolicySpec, Any], ...],
    key: jax.Array,
    num_episodes: int = 100,
    horizon: int | None = None,
    greedy: bool = True,
) -> dict[str, Any]:
    """Play ``num_episodes`` episodes of ``policies`` (one ``(spec, params)`` per
    team, in ``env.team_names`` order).

    Args:
        horizon: steps per episode (default ``params.max_steps``); rewards after an
            episode ends are not counted.
        greedy: argmax actions for actors too (Q policies are always greedy).

    Returns:
        ``{"return/<team>": {"mean", "ci95", "per_episode"}, "<key>_per_episode":
        {...}}`` with ``ci95 = 1.96 x std / sqrt(n)``.
    """
    check_games_fit(env, params, num_episodes, "num_episodes")
    players = tuple(PolicyPlayer(spec, greedy) for spec, _ in policies)
    player_params = tuple(p for _, p in policies)
    keys = jax.random.split(key, num_episodes)
    totals = play_episodes(
        env, params, players, player_params, keys, episode_horizon(params, horizon)
    )
    returns = np.asarray(totals.returns)
    out: dict[str, Any] = {}
    for t, name in enumerate(env.team_names):
        out[f"return/{name}"] = _stats(returns[:, t])
    for k, values in totals.sums.items():
        out[f"{k}_per_episode"] = _stats(np.asarray(values))
    return out


def _stats(values: np.ndarray) -> dict[str, Any]:
    values = np.asarray(values, np.float64)
    n = len(values)
    return {
        "mean": float(values.mean()),
        "ci95": float(half_width(values)) if n > 1 else None,
        "per_episode": values.tolist(),
    }
