"""Scripted red strategies as members of a league's red family.

Two families of scripts: the battalion's scripted Reds (below) and the pursuit
games' scripted prey (:data:`SCRIPTED_PREY`: the prey that runs from the nearest
predator and the one that wanders, outside any trained family). Each is played in
the league by its **clone**, red's actor network fitted to the script's moves in
episodes against a uniform-random blue (:func:`clone_scripted`). A scripted prey
is a :class:`~mopa.players.Player` of the game, recorded as any player is
(:func:`clone_player`).

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
from mopa.envs.pursuit import PursuitEnv
from mopa.envs.scripted_red import RED_TYPES, red_script
from mopa.errors import InvalidParameterError
from mopa.planning import SCRIPTED_PREY_PLAYERS
from mopa.players import PolicyPlayer
from mopa.policy import PolicySpec, agent_inputs, fit_actor

SCRIPTED = "scripted"
"""The family-entry field that names a scripted red type: ``("rush",
(("scripted", "rush"),))``."""
SCRIPTED_PREY = ("evader", "wanderer")
"""The pursuit games' scripted prey (``intent_population``'s out-of-family prey:
:class:`~mopa.planning.EvaderPrey`,
:class:`~mopa.planning.WandererPrey`)."""
SCRIPTED_TYPES = (*RED_TYPES, *SCRIPTED_PREY)
"""Every scripted red type a family entry may name."""


def check_scripted_game(env: Any, name: str, red_team: str, red_type: str) -> None:
    """Refuse a game in which the scripted red ``red_type`` cannot be recorded: a
    battalion Red needs the discrete two-team battalion (``battalion`` with
    ``discrete=True``), red its team ``"red"``; a scripted prey a pursuit game of
    one prey, red its team ``"prey"``."""
    if red_type in SCRIPTED_PREY:
        if not isinstance(env, PursuitEnv) or env.num_prey != 1:
            raise InvalidParameterError(
                f"a scripted prey family member ({red_type}) needs a pursuit game "
                f"of one prey, got {name}"
            )
        if red_team != "prey":
            raise InvalidParameterError(
                f"a scripted prey plays the pursuit game's team 'prey', not "
                f"{red_team!r}"
            )
        return
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
    if red_type not in SCRIPTED_TYPES:
        raise InvalidParameterError(
            f"scripted red type must be one of {SCRIPTED_TYPES}, got {red_type!r}"
        )
    return str(red_type)


def scripted_player(env: PursuitEnv, red_type: str) -> Any:
    """The scripted prey ``red_type`` of :data:`SCRIPTED_PREY` as a player."""
    return SCRIPTED_PREY_PLAYERS[red_type](env)


def clone_scripted(
    env: Any,
    params: Any,
    red_type: str,
    spec: PolicySpec,
    key: jax.Array,
    *,
    episodes: int,
    num_updates: int,
) -> tuple[Any, dict[str, Any]]:
    """Red's actor ``spec`` fitted to the script ``red_type`` (a battalion Red,
    :func:`clone_scripted_red`, or a scripted prey, :func:`clone_player`)."""
    if red_type in SCRIPTED_PREY:
        red = env.team_index("prey")
        return clone_player(
            env,
            params,
            red,
            scripted_player(env, red_type),
            {},
            spec,
            key,
            episodes=episodes,
            num_updates=num_updates,
        )
    return clone_scripted_red(
        env,
        params,
        red_type,
        spec,
        key,
        episodes=episodes,
        num_updates=num_updates,
    )


def clone_player(
    env: Any,
    params: Any,
    team: int,
    player: Any,
    player_params: Any,
    spec: PolicySpec,
    key: jax.Array,
    *,
    episodes: int,
    num_updates: int,
    batch_size: int = 256,
    lr: float = 1e-3,
) -> tuple[Any, dict[str, Any]]:
    """An actor ``spec`` fitted to ``player``'s moves for ``team`` of a two-team
    game, in ``episodes`` episodes against a uniform-random other team.

    Returns:
        ``(params, facts)`` as :func:`clone_scripted_red`'s.
    """
    from mopa.algos.common import frozen_policy, team_infos
    from mopa.opponent.data import generate

    other = team_infos(env)[1 - team]
    random_spec, random_params = frozen_policy("random", env.name, other)
    players = [PolicyPlayer(random_spec), PolicyPlayer(random_spec)]
    players[team] = player
    weights = [random_params, random_params]
    weights[team] = player_params
    key_play, key_fit = jax.random.split(key)
    data = generate(
        env, params, tuple(players), tuple(weights), key_play, num_chains=episodes
    )
    name = env.team_names[team]
    valid = np.asarray(data["valid"], bool)
    obs = np.asarray(data[f"obs.{name}"])[valid]
    actions = np.asarray(data[f"actions.{name}"])[valid]
    return _fit_clone(spec, obs, actions, key_fit, num_updates, batch_size, lr)


def _fit_clone(spec, obs, actions, key, num_updates, batch_size, lr):
    """:func:`mopa.policy.fit_actor` and what the clone agrees with."""
    weights, losses = fit_actor(
        spec,
        obs,
        actions,
        key,
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
    return _fit_clone(spec, obs, actions, key_fit, num_updates, batch_size, lr)
