"""What every team learner shares: the team layout of a game, the training view of
the game, frozen opponents, the vectorised rollout and per-update episode metrics.

A run has one policy per team. Learning teams act through their trainer's
behaviour policy; frozen teams act through a fixed :class:`~mopa.policy.PolicySpec`
whose parameters are constants of the compiled run. A frozen team's source is
``random``, a policy checkpoint (its seed 0), or a pool,
``pool:PATH[,PATH...]``: every seed of every listed checkpoint is a member, and
each game draws one member, uniformly, at the start of every episode (the member's
index rides in the team's policy carry). A learner trained against a pool meets a
population of opponents, not one. A checkpoint may carry a weight,
``pool:PATH@WEIGHT[,...]`` (a meta-strategy over the population, such as a Nash
mixture): members are then drawn in proportion to the weights, a checkpoint's weight
shared equally by its seeds, and a checkpoint without one weighs 1. A frozen actor
samples its moves; ``greedy:SOURCE`` (any of the sources above) plays each actor's
mode instead, as a deployed policy acts.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from mopa.envs import AutoReset, EpisodeStats, make
from mopa.envs.base import Env, episode_sum_keys
from mopa.envs.spaces import Discrete
from mopa.errors import CheckpointError, InvalidParameterError
from mopa.policy import PolicySpec, make_act_fn


@dataclasses.dataclass(frozen=True)
class TeamInfo:
    """Shapes of one team of a game."""

    name: str
    num_agents: int
    obs_size: int
    num_actions: int
    num_opponents: int
    """Agents of every other team."""
    opponent_actions: int
    """Largest action count among the opponents (the opponent head's width)."""


def team_infos(env: Env) -> tuple[TeamInfo, ...]:
    """The :class:`TeamInfo` of every team; raises for non-discrete actions."""
    sizes = env.team_sizes
    spaces = [env.action_space(t) for t in range(env.num_teams)]
    for t, space in enumerate(spaces):
        if not isinstance(space, Discrete):
            raise InvalidParameterError(
                f"{env.name}: team {env.team_names[t]!r} has continuous actions; "
                "mopa's team learners need discrete actions (use the game's "
                "discrete-action variant)"
            )
    infos = []
    for t, name in enumerate(env.team_names):
        others = [u for u in range(env.num_teams) if u != t]
        infos.append(
            TeamInfo(
                name=name,
                num_agents=sizes[t],
                obs_size=int(env.observation_space(t).shape[0]),
                num_actions=spaces[t].n,
                num_opponents=sum(sizes[u] for u in others),
                opponent_actions=max((spaces[u].n for u in others), default=0),
            )
        )
    return tuple(infos)


def make_training_env(
    env_name: str,
    env_overrides: tuple[tuple[str, Any], ...],
    game: tuple[Env, Any] | None = None,
) -> tuple[Env, Env, Any]:
    """``(game, training view, params)``: the training view auto-resets and keeps
    per-episode returns, lengths and (where reported) captures.

    Args:
        game: an ``(env, params)`` pair to train on instead of building
            ``env_name`` from the registry.
    """
    env, params = game if game is not None else make(env_name, **dict(env_overrides))
    keys = episode_sum_keys(env, params)
    return env, EpisodeStats(AutoReset(env), sum_keys=keys), params


# -- frozen opponents ------------------------------------------------------------------
FROZEN_BUILTINS = ("random",)
POOL_PREFIX = "pool:"
"""Prefix of a frozen pool's source: ``pool:PATH[@WEIGHT][,PATH[@WEIGHT]...]``."""
WEIGHT_MARK = "@"
"""Separates a pool checkpoint's path from its weight."""
GREEDY_PREFIX = "greedy:"
"""Prefix of a frozen source whose actors play their mode: ``greedy:SOURCE``."""


def split_greedy(source: str) -> tuple[str, bool]:
    """``(source without the greedy prefix, whether it had one)``."""
    if source.startswith(GREEDY_PREFIX):
        return source[len(GREEDY_PREFIX) :], True
    return source, False


def pool_items(source: str) -> list[tuple[str, float | None]]:
    """``(path, weight or None)`` of every checkpoint a pool source lists, in order.

    Raises:
        InvalidParameterError: no checkpoint listed, or a weight that is not a
            positive finite number.
    """
    items = []
    for item in source[len(POOL_PREFIX) :].split(","):
        item = item.strip()
        if not item:
            continue
        path, mark, weight = item.rpartition(WEIGHT_MARK)
        if not mark:
            items.append((item, None))
            continue
        try:
            value = float(weight)
        except ValueError:
            value = math.nan
        if not (math.isfinite(value) and value > 0):
            raise InvalidParameterError(
                f"frozen pool {source!r}: the weight of {path.strip()!r} must be a "
                f"positive number, got {weight!r}"
            )
        items.append((path.strip(), value))
    if not items:
        raise InvalidParameterError(
            f"frozen pool {source!r} lists no checkpoint (pool:PATH[,PATH...])"
        )
    return items


def weighted_pool_source(paths: Sequence[Any], weights: Sequence[float]) -> str:
    """The pool source of ``paths`` drawn in proportion to ``weights`` (one per
    path; checkpoints of weight 0 are left out)."""
    if len(paths) != len(weights):
        raise InvalidParameterError(
            f"give one weight per path, got {len(weights)} for {len(paths)} paths"
        )
    kept = [(str(p), float(w)) for p, w in zip(paths, weights, strict=True) if w > 0]
    if not kept:
        raise InvalidParameterError("every weight is 0: the pool would be empty")
    return POOL_PREFIX + ",".join(f"{p}{WEIGHT_MARK}{w!r}" for p, w in kept)


def frozen_policy(source: str, env_name: str, team: TeamInfo) -> tuple[PolicySpec, Any]:
    """``(spec, params)`` of a frozen team: ``"random"`` or a checkpoint path (its
    seed 0); for a pool (:func:`frozen_pool`) the params of its members, stacked.

    Raises:
        CheckpointError: the checkpoint is unreadable, of another game or its team
            does not fit this game's team.
    """
    source, _ = split_greedy(source)  # the same weights whoever plays them
    if source.startswith(POOL_PREFIX):
        spec, params, _ = frozen_pool_weighted(source, env_name, team)
        return spec, params
    if source == "random":
        spec = PolicySpec(
            kind="random",
            num_agents=team.num_agents,
            obs_size=team.obs_size,
            num_actions=team.num_actions,
        )
        return spec, {}
    from mopa.policy import read_policy_checkpoint

    policy = read_policy_checkpoint(source, team=team.name)
    _check_fits(source, policy.env, policy.spec, env_name, team)
    return policy.spec, policy.params


def frozen_pool(source: str, env_name: str, team: TeamInfo) -> tuple[PolicySpec, Any]:
    """``(spec, params [P, ...])`` of the pool ``pool:PATH[,PATH...]``: every seed
    of every listed checkpoint, in order (``P`` members, one network).

    Raises:
        InvalidParameterError: the source lists no checkpoint, or a bad weight.
        CheckpointError: a checkpoint is unreadable, of another game, lacks the
            team, does not fit this game's team, or has another network than the
            first member's.
    """
    spec, params, _ = frozen_pool_weighted(source, env_name, team)
    return spec, params


def frozen_pool_weighted(
    source: str, env_name: str, team: TeamInfo
) -> tuple[PolicySpec, Any, np.ndarray | None]:
    """:func:`frozen_pool` and the members' draw probabilities ``[P]``: each
    checkpoint's weight (1 where the source gives none) shared equally by its
    seeds, normalised; ``None`` when the source gives no weight (uniform)."""
    from mopa.policy import read_policy_file

    items = pool_items(source)
    spec, members, weights = None, [], []
    for path, weight in items:
        policy_file = read_policy_file(path)
        if team.name not in policy_file.teams:
            raise CheckpointError(
                f"{path} has no {team.name!r} policy; it holds "
                f"{sorted(policy_file.teams)}"
            )
        member_spec, params = policy_file.teams[team.name]
        _check_fits(path, policy_file.env, member_spec, env_name, team)
        if spec is not None and member_spec != spec:
            raise CheckpointError(
                f"{path}: pool members must share one network; its "
                f"{team.name!r} policy differs from {items[0][0]}'s"
            )
        spec = member_spec
        members.append(params)
        seeds = pool_size(params)
        weights += [(1.0 if weight is None else weight) / seeds] * seeds
    params = jax.tree.map(lambda *x: jnp.concatenate(x), *members)
    if all(weight is None for _, weight in items):
        return spec, params, None
    weights = np.asarray(weights, np.float64)
    return spec, params, weights / weights.sum()


def pool_size(params: Any) -> int:
    """Members of a pool's stacked params."""
    return int(jax.tree.leaves(params)[0].shape[0])


def _check_fits(
    source: str, trained_on: str, spec: PolicySpec, env_name: str, team: TeamInfo
) -> None:
    if trained_on != env_name:
        raise CheckpointError(
            f"{source} was trained on {trained_on!r}, this run plays {env_name!r}"
        )
    if (spec.num_agents, spec.obs_size, spec.num_actions) != (
        team.num_agents,
        team.obs_size,
        team.num_actions,
    ):
        raise CheckpointError(
            f"{source}: team {team.name!r} has {spec.num_agents} agents, "
            f"observations of {spec.obs_size} and {spec.num_actions} actions; "
            f"this game needs {team.num_agents}, {team.obs_size}, {team.num_actions}"
        )


# -- rollouts --------------------------------------------------------------------------
class Transition(NamedTuple):
    """One vectorised step. Leading axes ``[..., E]`` (envs); per-team tuples."""

    obs: tuple  # per team [E, A_t, D_t]
    actions: tuple  # per team [E, A_t] int32
    extras: tuple  # per team, whatever the acting function returned
    rewards: tuple  # per team [E, A_t]
    next_obs: tuple  # per team [E, A_t, D_t]: the true next observation
    terminated: jax.Array  # [E] bool
    done: jax.Array  # [E] bool: the episode ended here (terminated or truncated)
    first: jax.Array  # [E] bool: ``obs`` starts an episode
    metrics: dict  # episode statistics published on this step, [E] each
    state: Any  # [E, ...] the game's state before the step
    next_state: Any  # [E, ...] the true state after it (before any reset)


class EnvCarry(NamedTuple):
    """Vectorised game state between steps."""

    state: Any  # [E, ...]
    obs: tuple  # per team [E, A_t, D_t]
    first: jax.Array  # [E] bool: ``obs`` starts an episode
    hidden: tuple  # per team [E, A_t, H_t] policy carry (H_t = 0 if feed-forward)


TeamActFn = Callable[..., tuple[jax.Array, jax.Array, Any]]
"""``(key, obs [E, A, D], first [E], hidden [E, A, H]) -> (actions [E, A] int32,
hidden [E, A, H], extras)``."""


def reset_envs(
    env: Env,
    params: Any,
    key: jax.Array,
    num_envs: int,
    hidden_sizes: tuple[int, ...],
) -> EnvCarry:
    """Reset ``num_envs`` games; zero policy carries of the given sizes."""
    obs, state = jax.vmap(env.reset, (0, None))(jax.random.split(key, num_envs), params)
    hidden = tuple(
        jnp.zeros((num_envs, n, h))
        for n, h in zip(env.team_sizes, hidden_sizes, strict=True)
    )
    return EnvCarry(state, obs, jnp.ones((num_envs,), bool), hidden)


def env_step(
    env: Env,
    params: Any,
    act_fns: tuple[TeamActFn, ...],
    key: jax.Array,
    carry: EnvCarry,
) -> tuple[EnvCarry, Transition]:
    """Every team acts, every game steps once (with auto-reset)."""
    key_act, key_step = jax.random.split(key)
    keys = jax.random.split(key_act, len(act_fns))
    acted = [
        fn(k, o, carry.first, h)
        for fn, k, o, h in zip(act_fns, keys, carry.obs, carry.hidden, strict=True)
    ]
    actions = tuple(a for a, _, _ in acted)
    num_envs = carry.first.shape[0]
    obs, state, rewards, terminated, _, info = jax.vmap(env.step, (0, 0, 0, None))(
        jax.random.split(key_step, num_envs), carry.state, actions, params
    )
    metrics = {
        "done": info["done"],
        "episode_returns": info["episode_returns"],
        **{k: v for k, v in info.items() if k.startswith("episode_")},
    }
    transition = Transition(
        obs=carry.obs,
        actions=actions,
        extras=tuple(e for _, _, e in acted),
        rewards=rewards,
        next_obs=info["final_obs"],
        terminated=terminated,
        done=info["done"],
        first=carry.first,
        metrics=metrics,
        state=carry.state.env_state,
        next_state=info["final_state"],
    )
    hidden = tuple(h for _, h, _ in acted)
    return EnvCarry(state, obs, info["done"], hidden), transition


def episode_metrics(metrics: dict, team_names: tuple[str, ...]) -> dict[str, jax.Array]:
    """Means over the episodes that finished in a batch of steps.

    Args:
        metrics: ``Transition.metrics`` with any leading axes.

    Returns:
        ``{"episodes", "return/<team>" (mean over the team's agents), and
        "<key>_per_episode" for every totalled info key}``; NaN where no episode
        finished.
    """
    done = metrics["done"].astype(jnp.float32)
    count = done.sum()
    denom = jnp.where(count > 0, count, jnp.nan)
    out = {"episodes": count}
    for name, returns in zip(team_names, metrics["episode_returns"], strict=True):
        out[f"return/{name}"] = (done * returns.mean(-1)).sum() / denom
    for key, value in metrics.items():
        if key.startswith("episode_") and key not in (
            "episode_returns",
            "episode_length",
        ):
            out[f"{key[len('episode_') :]}_per_episode"] = (done * value).sum() / denom
    return out


def frozen_act_fn(spec: PolicySpec, params: Any, greedy: bool = False) -> TeamActFn:
    """Acting function of a frozen team (greedy for Q policies, sampling for actors
    unless ``greedy``, recurrent ones carrying their hidden state)."""
    act = make_act_fn(spec)

    def fn(key, obs, first, hidden):
        reset = jnp.broadcast_to(first[:, None], obs.shape[:-1])
        actions, hidden = act(params, key, obs, hidden, reset, greedy=greedy)
        return actions, hidden, ()

    return fn


def frozen_pool_act_fn(
    spec: PolicySpec, params: Any, weights: Any = None, greedy: bool = False
) -> TeamActFn:
    """Acting function of a frozen pool (params ``[P, ...]``): at the start of
    every episode each game draws a member, uniformly or (``weights [P]``, summing
    to 1) in proportion to ``weights``; the member then acts as
    :func:`frozen_act_fn`'s policy would (``greedy``: its mode). The team's carry
    is the members' carry with one more column, the drawn member's index (the
    same in every agent's row)."""
    act = make_act_fn(spec)
    size = pool_size(params)
    if weights is not None:
        weights = np.asarray(weights, np.float64)
        if weights.shape != (size,) or np.any(weights < 0) or weights.sum() <= 0:
            raise InvalidParameterError(
                f"weights must be [{size}] non-negative, not all 0, got "
                f"{weights.tolist()}"
            )
        log_weights = jnp.log(jnp.asarray(weights / weights.sum(), jnp.float32))

    def draw(key, num_games):
        if weights is None:
            return jax.random.randint(key, (num_games,), 0, size)
        return jax.random.categorical(key, log_weights, shape=(num_games,))

    def one_game(member, key, obs, hidden, reset):
        chosen = jax.tree.map(lambda x: x[member], params)
        return act(chosen, key, obs, hidden, reset, greedy=greedy)

    def fn(key, obs, first, hidden):
        key_member, key_act = jax.random.split(key)
        num_games = first.shape[0]
        drawn = draw(key_member, num_games)
        member = jnp.where(first, drawn, hidden[:, 0, -1].astype(jnp.int32))
        reset = jnp.broadcast_to(first[:, None], obs.shape[:-1])
        actions, inner = jax.vmap(one_game)(
            member, jax.random.split(key_act, num_games), obs, hidden[..., :-1], reset
        )
        index = jnp.broadcast_to(
            member[:, None, None].astype(hidden.dtype), (*hidden.shape[:-1], 1)
        )
        return actions, jnp.concatenate([inner, index], -1), ()

    return fn


def frozen_carry_size(source: str, spec: PolicySpec) -> int:
    """Carry columns of a frozen team from ``source``: its policy's, plus the
    member index for a pool."""
    return spec.carry_size + int(split_greedy(source)[0].startswith(POOL_PREFIX))


# -- run set-up shared by the trainers ----------------------------------------------
class RunSetup(NamedTuple):
    """The game and the frozen teams of a training run."""

    base_env: Env
    env: Env  # the training view (auto-reset, episode statistics)
    env_params: Any
    infos: tuple[TeamInfo, ...]
    frozen: dict  # team index -> (PolicySpec, params; [P, ...] for a pool)
    frozen_fns: dict  # team index -> TeamActFn
    frozen_carry: dict  # team index -> carry columns (frozen_carry_size)

    def hidden_sizes(self, specs: dict[int, PolicySpec]) -> tuple[int, ...]:
        """Policy carry size of every team (learning teams from ``specs``)."""
        return tuple(
            specs[t].carry_size if t in specs else self.frozen_carry[t]
            for t in range(len(self.infos))
        )


def setup_run(config, game: tuple[Env, Any] | None = None) -> RunSetup:
    """Build the game of ``config`` (or ``game``), check its frozen teams and load
    their policies.

    Raises:
        InvalidParameterError: a frozen team the game does not have, or every team
            frozen.
    """
    base_env, env, env_params = make_training_env(
        config.env, config.env_overrides, game
    )
    infos = team_infos(base_env)
    names = [info.name for info in infos]
    for team in config.frozen_teams:
        if team not in names:
            raise InvalidParameterError(
                f"frozen team {team!r} is not a team of {config.env}; teams: {names}"
            )
    if len(config.frozen_teams) == len(names):
        raise InvalidParameterError("every team is frozen: nothing would learn")
    sources = {
        t: config.frozen_teams[info.name]
        for t, info in enumerate(infos)
        if info.name in config.frozen_teams
    }
    frozen, frozen_fns = {}, {}
    for t, given in sources.items():
        source, greedy = split_greedy(given)
        if source.startswith(POOL_PREFIX):
            spec, params, weights = frozen_pool_weighted(source, config.env, infos[t])
            frozen[t] = (spec, params)
            frozen_fns[t] = frozen_pool_act_fn(spec, params, weights, greedy)
        else:
            frozen[t] = frozen_policy(source, config.env, infos[t])
            frozen_fns[t] = frozen_act_fn(*frozen[t], greedy=greedy)
    carry = {t: frozen_carry_size(s, frozen[t][0]) for t, s in sources.items()}
    return RunSetup(base_env, env, env_params, infos, frozen, frozen_fns, carry)
