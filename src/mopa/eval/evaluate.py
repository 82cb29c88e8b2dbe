"""Play teams' policies against each other and measure them.

:func:`evaluate` plays ``num_episodes`` independent episodes in parallel (one
jitted ``vmap`` over episodes of a ``lax.scan`` over steps) and reports, per team,
the mean episode return (averaged over the team's agents) with a 95% confidence
interval over episodes, and every scalar the game totals per episode (such as
``captures``).
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from mopa.envs.base import Env, episode_sum_keys
from mopa.policy import PolicySpec, initial_carry, make_act_fn


def _horizon(params: Any, horizon: int | None) -> int:
    if horizon is not None:
        return int(horizon)
    if hasattr(params, "max_steps"):
        return int(params.max_steps)
    raise ValueError("give horizon: the game's params have no max_steps")


@functools.partial(jax.jit, static_argnums=(0, 2, 5, 6))
def _play(env, params, specs, team_params, keys, horizon, greedy):
    acts = [make_act_fn(spec) for spec in specs]
    sum_keys = episode_sum_keys(env, params)

    def episode(key):
        key_reset, key_run = jax.random.split(key)
        obs, state = env.reset(key_reset, params)
        carries = tuple(initial_carry(spec) for spec in specs)
        alive = jnp.ones((), bool)
        totals = {
            "returns": tuple(jnp.zeros((spec.num_agents,)) for spec in specs),
            **{k: jnp.zeros(()) for k in sum_keys},
        }

        def step(carry, key):
            obs, state, carries, alive, totals, first = carry
            keys = jax.random.split(key, len(specs) + 1)
            acted = [
                act(p, k, o, c, jnp.full((spec.num_agents,), first), greedy)
                for act, p, k, o, c, spec in zip(
                    acts, team_params, keys[1:], obs, carries, specs, strict=True
                )
            ]
            actions = tuple(a for a, _ in acted)
            carries = tuple(c for _, c in acted)
            obs, state, rewards, terminated, truncated, info = env.step(
                keys[0], state, actions, params
            )
            live = alive.astype(jnp.float32)
            totals = {
                "returns": tuple(
                    t + live * r
                    for t, r in zip(totals["returns"], rewards, strict=True)
                ),
                **{
                    k: totals[k] + live * jnp.asarray(info[k], jnp.float32)
                    for k in sum_keys
                },
            }
            alive = alive & ~(terminated | truncated)
            return (obs, state, carries, alive, totals, jnp.zeros((), bool)), None

        init = (obs, state, carries, alive, totals, jnp.ones((), bool))
        (_, _, _, _, totals, _), _ = jax.lax.scan(
            step, init, jax.random.split(key_run, horizon)
        )
        return totals

    return jax.vmap(episode)(keys)


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
    specs = tuple(spec for spec, _ in policies)
    team_params = tuple(p for _, p in policies)
    keys = jax.random.split(key, num_episodes)
    totals = _play(
        env, params, specs, team_params, keys, _horizon(params, horizon), greedy
    )
    out: dict[str, Any] = {}
    for name, returns in zip(env.team_names, totals["returns"], strict=True):
        out[f"return/{name}"] = _stats(np.asarray(returns).mean(-1))
    for k in episode_sum_keys(env, params):
        if k in totals:
            out[f"{k}_per_episode"] = _stats(np.asarray(totals[k]))
    return out


def _stats(values: np.ndarray) -> dict[str, Any]:
    values = np.asarray(values, np.float64)
    n = len(values)
    return {
        "mean": float(values.mean()),
        "ci95": float(1.96 * values.std(ddof=1) / np.sqrt(n)) if n > 1 else None,
        "per_episode": values.tolist(),
    }
