"""Scripted red strategies as members of a league's red family.

The battalion's scripted Reds (:data:`mopa.envs.scripted_red.RED_TYPES`: the
strategy family ``rush``, ``flank_left``, ... and the ladder) read the game's whole
state, so no frozen pool of networks can play them. A league that starts from them
plays each one's **clone**: red's actor network (the network every best-response red
of the league trains, so that the clones and the best responses share one pool)
fitted by cross-entropy (:func:`mopa.policy.fit_actor`) to the script's moves in
episodes against a uniform-random blue, on red's own observations. The script's
continuous ``[move, rotate, fire]`` is played as the nearest of the game's discrete
actions (:class:`~mopa.envs.battalion_wrappers.DiscreteActions`'s table), so the
recorded game and the clone use the same actions; how often the clone's greedy
action is the script's is reported as its agreement.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from mopa.envs.battalion import BattalionEnv
from mopa.envs.battalion_wrappers import DiscreteActions
from mopa.envs.scripted_red import RED_TYPES, red_script
from mopa.errors import InvalidParameterError
from mopa.policy import PolicySpec, agent_inputs, fit_actor

SCRIPTED = "scripted"
"""The family-entry field that names a scripted red type: ``("rush",
(("scripted", "rush"),))``."""


def check_scripted_game(env: Any, name: str, red_team: str) -> None:
    """Refuse a game in which a scripted red cannot be recorded: the discrete
    two-team battalion (``battalion`` with ``discrete=True``), red its team
    ``"red"``."""
    inner = getattr(env, "env", None)
    if not (isinstance(env, DiscreteActions) and isinstance(inner, BattalionEnv)):
        raise InvalidParameterError(
            f"a scripted red family member needs the discrete two-team battalion "
            f"(game battalion with discrete=True), got {name}"
        )
    if red_team != "red":
        raise InvalidParameterError(
            f"a scripted red family member plays the battalion's team 'red', not "
            f"{red_team!r}"
        )


def check_scripted_type(red_type: Any) -> str:
    if red_type not in RED_TYPES:
        raise InvalidParameterError(
            f"scripted red type must be one of {RED_TYPES}, got {red_type!r}"
        )
    return str(red_type)


def scripted_episodes(
    env: DiscreteActions, params: Any, red_type: str, key: jax.Array, episodes: int
) -> tuple[np.ndarray, np.ndarray]:
    """Red's observations and the script's (discretised) actions over
    ``episodes`` episodes against a uniform-random blue, every step while the
    episode runs.

    Returns:
        ``(obs [N, R, D], actions [N, R])``.
    """
    game: BattalionEnv = env.env
    table = jnp.asarray(env.table)
    red_team = 1  # the battalion's teams: blue, red
    num_steps = int(params.max_steps)

    def episode(key):
        key_reset, key_run = jax.random.split(key)
        obs, state = game.reset(key_reset, params)

        def body(carry, key_step):
            obs, state, live = carry
            key_blue, key_red, key_game = jax.random.split(key_step, 3)
            blue = jax.random.randint(
                key_blue, (game.num_blue,), 0, table.shape[0], jnp.int32
            )
            chosen = []

            def red_fn(mid_state):
                moves = red_script(red_type, key_red, mid_state, params, game.num_blue)
                gap = jnp.sum((moves[:, None, :] - table[None]) ** 2, -1)
                chosen.append(jnp.argmin(gap, -1).astype(jnp.int32))  # [R]
                return table[chosen[0]]

            out = game.step_with_red(key_game, state, table[blue], red_fn, params)
            next_obs, next_state, _, terminated, truncated, _ = out
            done = terminated | truncated
            return (next_obs, next_state, live & ~done), (
                obs[red_team],
                chosen[0],
                live,
            )

        init = (obs, state, jnp.ones((), bool))
        _, recorded = jax.lax.scan(body, init, jax.random.split(key_run, num_steps))
        return recorded

    obs, actions, live = jax.jit(jax.vmap(episode))(jax.random.split(key, episodes))
    live = np.asarray(live).reshape(-1)
    obs = np.asarray(obs).reshape(live.size, *obs.shape[2:])[live]
    return obs, np.asarray(actions).reshape(live.size, -1)[live]


def clone_scripted_red(
    env: DiscreteActions,
    params: Any,
    red_type: str,
    spec: PolicySpec,
    key: jax.Array,
    *,
    episodes: int,
    num_updates: int,
    batch_size: int = 256,
    lr: float = 1e-3,
) -> tuple[Any, dict[str, Any]]:
    """Red's actor ``spec`` fitted to the script ``red_type``.

    Returns:
        ``(params, facts)``: the actor's weights (unbatched) and
        ``{"samples", "agreement", "final_loss"}``, the agreement the greedy
        clone's share of recorded steps on which it plays the script's action.
    """
    key_play, key_fit = jax.random.split(key)
    obs, actions = scripted_episodes(env, params, red_type, key_play, episodes)
    weights, losses = fit_actor(
        spec,
        obs,
        actions,
        key_fit,
        num_updates=num_updates,
        batch_size=batch_size,
        lr=lr,
    )
    logits = spec.module().apply(weights, agent_inputs(spec, jnp.asarray(obs)))
    agreement = float(np.mean(np.argmax(np.asarray(logits), -1) == actions))
    return weights, {
        "samples": int(actions.size),
        "agreement": agreement,
        "final_loss": float(losses[-1]),
    }
