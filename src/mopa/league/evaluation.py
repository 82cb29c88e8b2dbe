"""Evaluate a policy against an opponent: wins, draws and losses from the game's own
end-of-episode signals.

Opponents (by name):

* ``scripted_l1`` ... ``scripted_l5`` (or ``L1`` ... ``L5`` and every other type
  of :data:`~mopa.envs.scripted_red.RED_TYPES`, such as ``rush``): the battalion
  games' scripted Red, embedded in ``battalion_vs_red``;
* ``random``: uniform random actions (the scripted ``random`` Red in the battalion
  games; a uniform policy for the other side of any other game);
* a checkpoint path: the other side's policy from that checkpoint (in the
  symmetric battalion games a Blue policy drives Red unchanged, since Red observes
  the game in its own frame).

Episode ``i`` uses ``jax.random.key(seed + i)``, so results do not depend on how
many episodes are asked for. Win, draw and loss are defined in
:mod:`mopa.league.arena` (battalion: the game's ``blue_win``/``red_win``/``draw``,
with a simultaneous elimination and the step limit as draws; pursuit: the
predators win an episode with at least one capture, the prey one without).
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from mopa.envs import make
from mopa.envs.battalion_wrappers import SCRIPTED_VARIANTS, DiscreteActions
from mopa.envs.scripted_red import LADDER, RED_TYPE_INDEX, RED_TYPES
from mopa.errors import InvalidParameterError, MissingPathError
from mopa.eval.protocol import EvaluationResult, count_outcomes, outcome_summary
from mopa.league.arena import Arena, ArenaParams, stack_opponents
from mopa.policy import PolicySpec, make_act_fn, read_policy_file

SCRIPTED_NAMES = {f"scripted_l{k}": f"L{k}" for k in range(1, 6)}
"""Seed 001's scripted opponent names and the Red types they play."""
LEAGUE_REDS = (*LADDER, "random")
"""The Red types every league battalion game is built with: one compiled game
plays any of them, chosen by ``red_probs`` (a parameter)."""


def scripted_red_kwargs(red: str) -> dict[str, Any]:
    """Game overrides that make a ``battalion_vs_red`` game play Red type ``red``
    (built with :data:`LEAGUE_REDS` when ``red`` is one of them, so changing the
    level changes a parameter, not the compiled game)."""
    red = SCRIPTED_NAMES.get(red, red)
    if red not in RED_TYPES:
        raise InvalidParameterError(f"unknown scripted Red type {red!r}")
    if red not in LEAGUE_REDS:
        return {"red": red}
    probs = [0.0] * len(RED_TYPES)
    probs[RED_TYPE_INDEX[red]] = 1.0
    return {"red": ",".join(LEAGUE_REDS), "red_probs": tuple(probs)}


def red_mixture_kwargs(mixture: tuple[tuple[str, float], ...]) -> dict[str, Any]:
    """Game overrides of ``battalion_vs_red`` whose Red is drawn per episode from
    ``mixture`` (``(type, weight)`` pairs of :data:`LEAGUE_REDS`, normalised): as
    :func:`scripted_red_kwargs`, any mixture is a parameter of one compiled game.

    Raises:
        InvalidParameterError: an unknown type, a negative weight or no weight.
    """
    probs = np.zeros(len(RED_TYPES))
    for name, weight in mixture:
        if name not in LEAGUE_REDS:
            raise InvalidParameterError(
                f"mixture: {name!r} is not one of {', '.join(LEAGUE_REDS)}"
            )
        if weight < 0:
            raise InvalidParameterError(f"mixture: weight of {name} is negative")
        probs[RED_TYPE_INDEX[name]] += weight
    if probs.sum() <= 0:
        raise InvalidParameterError("mixture: the weights sum to 0")
    probs = probs / probs.sum()
    return {"red": ",".join(LEAGUE_REDS), "red_probs": tuple(float(p) for p in probs)}


class LeaguePolicy(NamedTuple):
    """A policy with the game it plays: what evaluation and the pool pass around."""

    spec: PolicySpec
    params: Any
    """One set of weights (no seed axis)."""
    env: str
    """Registered game the policy was trained on."""
    env_overrides: tuple[tuple[str, Any], ...]
    team: str
    """The team it plays."""


def load_league_policy(
    source: str | Path | LeaguePolicy, team: str | None = None, seed: int = 0
) -> LeaguePolicy:
    """A :class:`LeaguePolicy` from a checkpoint path (file or run folder) or
    as given.

    Raises:
        FileNotFoundError: no such path.
        CheckpointError: not a readable policy checkpoint.
    """
    if isinstance(source, LeaguePolicy):
        return source
    path = Path(source)
    if not path.exists():
        raise MissingPathError(f"no checkpoint at {path}")
    policy_file = read_policy_file(path)
    name = team if team is not None else next(iter(policy_file.teams))
    if name not in policy_file.teams:
        raise InvalidParameterError(
            f"team {name!r} is not in {path}; it holds {sorted(policy_file.teams)}"
        )
    spec, stacked = policy_file.teams[name]
    params = jax.tree.map(lambda x: x[seed], stacked)
    overrides = tuple(sorted(policy_file.env_overrides.items()))
    return LeaguePolicy(spec, params, policy_file.env, overrides, name)


def _is_battalion(env_name: str) -> bool:
    return env_name in SCRIPTED_VARIANTS or env_name in SCRIPTED_VARIANTS.values()


def _two_team(env_name: str, overrides: dict[str, Any]):
    """The two-team game behind ``env_name`` (battalion: Red playable)."""
    overrides = dict(overrides)
    if _is_battalion(env_name):
        base = SCRIPTED_VARIANTS.get(env_name, env_name)
        for key in ("red", "red_probs"):
            overrides.pop(key, None)
        discrete = overrides.pop("discrete", False)
        env, params = make(base, **overrides)
        return (DiscreteActions(env) if discrete else env), params
    return make(env_name, **overrides)


def matchup(
    policy: LeaguePolicy,
    opponent: str | Path | LeaguePolicy,
    env_kwargs: dict[str, Any] | None = None,
) -> tuple[Arena, ArenaParams]:
    """The arena in which ``policy`` meets ``opponent`` (see the module docstring).

    Args:
        env_kwargs: game overrides on top of the policy's own.

    Raises:
        InvalidParameterError: an unknown opponent name, a scripted opponent for a
            game without scripts, or an opponent checkpoint that does not fit.
        FileNotFoundError: an opponent path that does not exist.
    """
    overrides = {**dict(policy.env_overrides), **(env_kwargs or {})}
    name = str(opponent) if isinstance(opponent, str | Path) else None
    red = SCRIPTED_NAMES.get(name, name) if name is not None else None
    if red in RED_TYPES and not Path(str(name)).exists():
        if not _is_battalion(policy.env):
            if red == "random":
                return _random_matchup(policy, overrides)
            raise InvalidParameterError(
                f"scripted opponent {name!r} exists only in the battalion games; "
                f"{policy.env} has none"
            )
        if policy.team != "blue":
            raise InvalidParameterError("scripted Red plays against Blue policies only")
        for key in ("red", "red_probs"):
            overrides.pop(key, None)
        scripted = (
            "multi_battalion_vs_red" if "multi" in policy.env else "battalion_vs_red"
        )
        env, params = make(scripted, **{**overrides, **scripted_red_kwargs(red)})
        return Arena(env), ArenaParams(params, {}, jnp.ones((1,)))
    if name is not None and not Path(name).exists():
        raise MissingPathError(
            f"unknown opponent {name!r}: not a scripted level "
            f"({', '.join(SCRIPTED_NAMES)}), 'random' or an existing checkpoint"
        )
    env, params = _two_team(policy.env, overrides)
    learner = env.team_names.index(policy.team)
    other = env.team_names[1 - learner]
    opposing = _opponent_policy(opponent, other, policy)
    arena = Arena(env, learner, opposing.spec)
    stacked, occupied = stack_opponents([opposing.params], 1)
    return arena, ArenaParams(params, stacked, occupied.astype(jnp.float32))


def _random_matchup(policy: LeaguePolicy, overrides: dict[str, Any]):
    env, params = _two_team(policy.env, overrides)
    learner = env.team_names.index(policy.team)
    other = 1 - learner
    spec = PolicySpec(
        kind="random",
        num_agents=env.team_sizes[other],
        obs_size=int(env.observation_space(other).shape[0]),
        num_actions=env.action_space(other).n,
    )
    return Arena(env, learner, spec), ArenaParams(params, {}, jnp.ones((1,)))


def _opponent_policy(opponent, other_team: str, policy: LeaguePolicy) -> LeaguePolicy:
    if isinstance(opponent, LeaguePolicy):
        return opponent
    policy_file = read_policy_file(opponent)
    if other_team in policy_file.teams:
        return load_league_policy(opponent, other_team)
    if _is_battalion(policy.env) and "blue" in policy_file.teams:
        return load_league_policy(opponent, "blue")  # Red sees its own frame
    raise InvalidParameterError(
        f"{opponent} holds no {other_team!r} policy (teams: "
        f"{sorted(policy_file.teams)})"
    )


@functools.partial(jax.jit, static_argnames=("arena", "spec", "horizon", "greedy"))
def play_outcomes(
    arena: Arena,
    params: ArenaParams,
    spec: PolicySpec,
    policy_params: Any,
    keys: jax.Array,
    horizon: int,
    greedy: bool = True,
) -> dict[str, jax.Array]:
    """Play one episode per key of ``keys [N]`` (vmapped, jitted).

    Returns:
        ``{"outcome": [N] int32 (1 win, 0 draw, -1 loss, -2 unfinished within
        horizon), "return": [N] (mean over the side's agents), "slot": [N] the
        opponent slot, "breakdown/<key>": [N] episode sums}``.
    """
    act = make_act_fn(spec)

    def episode(key):
        key_reset, key_run = jax.random.split(key)
        obs, state = arena.reset(key_reset, params)
        carry = jnp.zeros((spec.num_agents, spec.carry_size))
        slot = state.slot

        def step(loop, key):
            obs, state, carry, alive, first, total, outcome, sums = loop
            key_act, key_env = jax.random.split(key)
            reset = jnp.full((spec.num_agents,), first)
            actions, carry = act(policy_params, key_act, obs[0], carry, reset, greedy)
            obs, state, rewards, terminated, truncated, info = arena.step(
                key_env, state, (actions,), params
            )
            done = terminated | truncated
            ends = alive & done
            code = jnp.where(
                info["episode_win"] > 0, 1, jnp.where(info["episode_loss"] > 0, -1, 0)
            )
            outcome = jnp.where(ends, code, outcome)
            sums = {
                k: jnp.where(ends, info[f"episode_breakdown/{k}"], v)
                for k, v in sums.items()
            }
            total = total + alive * rewards[0].mean()
            alive = alive & ~done
            return (
                obs,
                state,
                carry,
                alive,
                jnp.zeros((), bool),
                total,
                outcome,
                sums,
            ), None

        sums = {k: jnp.zeros(()) for k in arena.breakdown_keys}
        init = (
            obs,
            state,
            carry,
            jnp.ones((), bool),
            jnp.ones((), bool),
            jnp.zeros(()),
            jnp.full((), -2, jnp.int32),
            sums,
        )
        (_, _, _, _, _, total, outcome, sums), _ = jax.lax.scan(
            step, init, jax.random.split(key_run, horizon)
        )
        return {
            "outcome": outcome,
            "return": total,
            "slot": slot,
            **{f"breakdown/{k}": v for k, v in sums.items()},
        }

    return jax.vmap(episode)(keys)


def episode_keys(seed: int, n_episodes: int) -> jax.Array:
    """``[N]`` keys, episode ``i`` using ``jax.random.key(seed + i)``."""
    return jax.vmap(jax.random.key)(jnp.arange(seed, seed + n_episodes))


def run_episodes(
    policy: LeaguePolicy,
    opponent: str | Path | LeaguePolicy = "scripted_l5",
    n_episodes: int = 50,
    seed: int = 0,
    deterministic: bool = True,
    env_kwargs: dict[str, Any] | None = None,
) -> dict[str, np.ndarray]:
    """Per-episode arrays of :func:`play_outcomes` for ``policy`` vs
    ``opponent``."""
    if n_episodes < 1:
        raise InvalidParameterError(f"n_episodes must be >= 1, got {n_episodes}")
    arena, params = matchup(policy, opponent, env_kwargs)
    horizon = int(params.game.max_steps)
    # Episodes run in batches of a power of two (at least 8), so evaluations of
    # different lengths share compilations; the extra episodes are dropped.
    padded = max(8, 1 << (n_episodes - 1).bit_length())
    out = play_outcomes(
        arena,
        params,
        policy.spec,
        jax.tree.map(jnp.asarray, policy.params),
        episode_keys(seed, padded),
        horizon,
        deterministic,
    )
    return {k: np.asarray(v)[:n_episodes] for k, v in out.items()}


def evaluate_detailed(
    checkpoint_path: str | Path | LeaguePolicy,
    n_episodes: int = 50,
    deterministic: bool = True,
    seed: int | None = None,
    opponent: str | Path | LeaguePolicy = "scripted_l5",
    env_kwargs: dict[str, Any] | None = None,
    team: str | None = None,
) -> EvaluationResult:
    """Play ``n_episodes`` of the checkpoint's policy against ``opponent``.

    Args:
        checkpoint_path: a policy checkpoint (file or run folder) or a
            :class:`LeaguePolicy`.
        deterministic: the policy takes its most likely action.
        seed: base seed (episode ``i`` uses ``seed + i``; default 0).
        env_kwargs: game overrides on top of those the policy was trained with.
        team: which of the checkpoint's teams to evaluate (default its first).

    Raises:
        ValueError: ``n_episodes < 1`` or an unknown opponent.
        FileNotFoundError: a missing checkpoint.
    """
    policy = load_league_policy(checkpoint_path, team)
    out = run_episodes(
        policy, opponent, n_episodes, seed or 0, deterministic, env_kwargs
    )
    return count_outcomes(out["outcome"])


def evaluate(
    checkpoint_path: str | Path | LeaguePolicy,
    n_episodes: int = 50,
    deterministic: bool = True,
    seed: int | None = None,
    opponent: str | Path | LeaguePolicy = "scripted_l5",
    env_kwargs: dict[str, Any] | None = None,
) -> float:
    """The win rate of :func:`evaluate_detailed`."""
    return evaluate_detailed(
        checkpoint_path, n_episodes, deterministic, seed, opponent, env_kwargs
    ).win_rate


def evaluate_vs_pool(
    policy: LeaguePolicy,
    opponents: list[LeaguePolicy],
    n_episodes: int = 20,
    seed: int = 0,
    deterministic: bool = True,
) -> list[EvaluationResult]:
    """``policy`` against each pool member (one result per member)."""
    return [
        evaluate_detailed(policy, n_episodes, deterministic, seed, opponent)
        for opponent in opponents
    ]


evaluate_team_vs_pool = evaluate_vs_pool
"""Team policies evaluate the same way (every agent of a side is one policy)."""


def evaluate_blue(
    checkpoint: str,
    opponent: str,
    n_episodes: int,
    seed: int,
    env_kwargs: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """:func:`~mopa.eval.protocol.outcome_summary` of the checkpoint's Blue
    (greedy, :func:`evaluate_detailed`) against the scripted ``opponent`` on the
    game set by ``env_kwargs``."""
    result = evaluate_detailed(
        checkpoint,
        n_episodes=n_episodes,
        deterministic=True,
        seed=seed,
        opponent=opponent,
        env_kwargs=env_kwargs,
    )
    return outcome_summary(result.wins, result.draws, result.losses)
