"""MADDPG and M3DDPG training on the particle games: the play-out engine and
``make_train``.

A play-out is ``num_episodes`` episodes in ``num_envs`` parallel games with a
fresh, empty replay buffer. Each update plays ``agent_update_freq`` steps in every
game (continuous actions with Gaussian exploration noise, or discrete moves drawn
from the actor's softmax by the Gumbel-max trick), stores the transitions, then
takes one gradient step for every agent on one shared batch: the critic on its TD
target, then the actor through the updated critic, then Polyak updates of both
targets. Learning starts once ``batch_size * max_episode_len`` transitions are
stored. Agents are flattened across teams, adversaries first; each has its own
networks (the teams' observation sizes differ).

The engine takes an optional :class:`OnlineModel`: a recurrent model, run along
every game, whose prediction is one agent's extra input (LeMOL's opponent model,
:mod:`mopa.algos.lemol`). ``make_train`` here is one play-out of plain
MADDPG / M3DDPG.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from mopa.algos.common import episode_metrics, make_training_env
from mopa.algos.maddpg.config import MADDPGConfig
from mopa.algos.maddpg.losses import (
    ACTION_SIZE,
    MLP,
    Batch,
    actor_loss,
    critic_loss,
    policy_action,
    td_target,
)
from mopa.algos.trainer import TrainOutput
from mopa.core import replay
from mopa.envs.base import Env
from mopa.envs.spaces import Discrete
from mopa.errors import InvalidParameterError

MAX_GRAD_NORM = 0.5
"""Gradient clipping of actors and critics (MADDPG's)."""


class Learner(NamedTuple):
    """One agent's networks and optimiser states."""

    actor: Any
    critic: Any
    target_actor: Any
    target_critic: Any
    actor_opt: Any
    critic_opt: Any


class OnlineModel(NamedTuple):
    """A model run along every game whose output is one agent's extra input.

    Both functions are for one game; the engine vmaps them. ``hidden`` persists
    across episodes for a whole play-out.
    """

    agent: int
    """The agent that reads the prediction."""
    size: int
    """Length of the prediction."""
    init_hidden: Callable[[], Any]
    """``() -> hidden`` at the start of a play-out."""
    predict: Callable[[Any, Any, tuple], jax.Array]
    """``(params, hidden, obs per agent [D_j]) -> prediction [size]``."""
    observe: Callable[[Any, Any, tuple, tuple], Any]
    """``(params, hidden, obs per agent, action vectors per agent [5]) -> hidden``,
    after the step."""


class Record(NamedTuple):
    """What every step of a play-out leaves behind, ``[steps, E, ...]``."""

    obs: tuple  # per agent [.., D_j]
    actions: tuple  # per agent [.., 5] action vectors
    extras: tuple  # per agent [.., X_j]


class PlayoutCarry(NamedTuple):
    learners: tuple  # per agent Learner
    env_state: Any  # [E, ...]
    obs: tuple  # per team [E, A_t, D_t]
    hidden: Any  # [E, ...] online model state (() without one)
    buffer: replay.ReplayBuffer
    key: jax.Array


class Engine(NamedTuple):
    """MADDPG / M3DDPG for one config and game (see the module docstring)."""

    config: MADDPGConfig
    env: Env
    """The game (not wrapped)."""
    agent_names: tuple[str, ...]
    """``"<team>_<j>"`` of every agent, adversaries first."""
    agent_teams: tuple[int, ...]
    init_learner: Callable[[int, jax.Array], Learner]
    """``(agent, key) -> Learner`` (fresh networks)."""
    init_playout: Callable[[jax.Array, tuple], PlayoutCarry]
    """``(key, learners) -> carry``: fresh games, empty buffer, fresh model state."""
    update: Callable[[PlayoutCarry, Any], tuple[PlayoutCarry, dict, Record]]
    """``(carry, model_params) -> (carry, metrics, record)``: one update."""
    learn: Callable[[tuple, replay.ReplayBuffer, jax.Array], tuple[tuple, dict]]
    """``(learners, buffer, key) -> (learners, stats)``: one gradient step of
    every agent on one batch from ``buffer``."""


def perturbation_sizes(
    teams: tuple[int, ...],
    policies: tuple[str, ...],
    adv_eps: float,
    adv_eps_s: float,
) -> tuple[tuple[float, ...] | None, ...]:
    """M3DDPG's perturbation size of every agent's action as seen from each
    agent's critic: ``adv_eps`` for agents of another team (competitors),
    ``adv_eps_s`` for team mates (collaborators); ``None`` for agents whose team
    does not use ``m3ddpg``.

    Args:
        teams: team of every agent.
        policies: learner of every team.
    """
    return tuple(
        tuple(adv_eps_s if other == team else adv_eps for other in teams)
        if policies[team] == "m3ddpg"
        else None
        for team in teams
    )


def make_engine(
    config: MADDPGConfig,
    game: tuple[Env, Any] | None = None,
    model: OnlineModel | None = None,
) -> Engine:
    """The play-out engine of ``config`` on its scenario (or ``game``)."""
    base_env, env, env_params = make_training_env(
        config.scenario, tuple(config.env_overrides.items()), game
    )
    discrete = config.discrete_actions
    for t in range(base_env.num_teams):
        space = base_env.action_space(t)
        if isinstance(space, Discrete) != discrete or space.shape not in (
            (),
            (ACTION_SIZE,),
        ):
            raise InvalidParameterError(
                f"{base_env.name}: team {base_env.team_names[t]!r} has actions "
                f"{space}; the config needs "
                + ("Discrete(5)" if discrete else "5-vectors")
            )
    agents = [
        (t, j) for t in range(base_env.num_teams) for j in range(base_env.team_sizes[t])
    ]
    teams = tuple(t for t, _ in agents)
    names = tuple(f"{base_env.team_names[t]}_{j}" for t, j in agents)
    num_agents = len(agents)
    obs_sizes = [base_env.observation_space(t).shape[0] for t in teams]
    extra_sizes = [
        model.size if model is not None and i == model.agent else 0
        for i in range(num_agents)
    ]
    eps = perturbation_sizes(
        teams, config.team_policies, config.adv_eps, config.adv_eps_s
    )
    actor = MLP(ACTION_SIZE, config.num_units)
    critic = MLP(1, config.num_units)
    critic_input = sum(obs_sizes) + num_agents * ACTION_SIZE
    optimiser = optax.chain(
        optax.clip_by_global_norm(MAX_GRAD_NORM), optax.adam(config.lr)
    )
    E = config.num_envs
    learn_after = min(config.warmup, config.buffer_capacity)

    def init_learner(i, key):
        key_actor, key_critic = jax.random.split(key)
        actor_params = actor.init(
            key_actor, jnp.zeros((obs_sizes[i] + extra_sizes[i],))
        )
        critic_params = critic.init(
            key_critic, jnp.zeros((critic_input + extra_sizes[i],))
        )
        return Learner(
            actor_params,
            critic_params,
            actor_params,
            critic_params,
            optimiser.init(actor_params),
            optimiser.init(critic_params),
        )

    def split_agents(team_arrays):
        """Per-team ``[E, A_t, ...]`` to per-agent ``[E, ...]``."""
        return tuple(team_arrays[t][:, j] for t, j in agents)

    def example_item():
        zeros = lambda n: jnp.zeros((n,))  # noqa: E731
        return Batch(
            obs=tuple(zeros(d) for d in obs_sizes),
            actions=tuple(zeros(ACTION_SIZE) for _ in agents),
            rewards=tuple(jnp.zeros(()) for _ in agents),
            next_obs=tuple(zeros(d) for d in obs_sizes),
            extras=tuple(zeros(x) for x in extra_sizes),
            next_extras=tuple(zeros(x) for x in extra_sizes),
            terminated=jnp.zeros((), bool),
        )

    def init_playout(key, learners):
        key_env, key_run = jax.random.split(key)
        obs, state = jax.vmap(env.reset, (0, None))(
            jax.random.split(key_env, E), env_params
        )
        hidden = (
            jax.vmap(lambda _: model.init_hidden())(jnp.arange(E))
            if model is not None
            else ()
        )
        buffer = replay.init_buffer(example_item(), config.buffer_capacity)
        return PlayoutCarry(tuple(learners), state, obs, hidden, buffer, key_run)

    def predictions(model_params, hidden, obs):
        """Per-agent extra inputs ``[E, X_i]`` for per-agent ``obs [E, D_i]``."""
        if model is None:
            return tuple(jnp.zeros((E, 0)) for _ in agents)
        pred = jax.vmap(model.predict, (None, 0, 0))(model_params, hidden, obs)
        return tuple(
            pred if i == model.agent else jnp.zeros((E, 0)) for i in range(num_agents)
        )

    def act(learners, key, obs, extras):
        """Behaviour actions: per-agent vectors ``[E, 5]`` and per-team env
        actions."""
        vectors, moves = [], []
        for i, k in enumerate(jax.random.split(key, num_agents)):
            out = actor.apply(
                learners[i].actor, jnp.concatenate([obs[i], extras[i]], -1)
            )
            if discrete:
                move = jnp.argmax(out + jax.random.gumbel(k, out.shape), -1)
                moves.append(move.astype(jnp.int32))
                vectors.append(jax.nn.one_hot(move, ACTION_SIZE))
            else:
                noise = config.explore_noise * jax.random.normal(k, out.shape)
                vectors.append(jnp.clip(jax.nn.sigmoid(out) + noise, 0.0, 1.0))
        per_agent = moves if discrete else vectors
        team_actions = tuple(
            jnp.stack([per_agent[i] for i in range(num_agents) if teams[i] == t], 1)
            for t in range(base_env.num_teams)
        )
        return tuple(vectors), team_actions

    def env_step(learners, model_params, state, key):
        env_state, obs_teams, hidden, buffer = state
        key_act, key_step = jax.random.split(key)
        obs = split_agents(obs_teams)
        extras = predictions(model_params, hidden, obs)
        vectors, team_actions = act(learners, key_act, obs, extras)
        next_obs_teams, env_state, rewards, terminated, _, info = jax.vmap(
            env.step, (0, 0, 0, None)
        )(jax.random.split(key_step, E), env_state, team_actions, env_params)
        next_obs = split_agents(info["final_obs"])
        if model is not None:
            hidden = jax.vmap(model.observe, (None, 0, 0, 0))(
                model_params, hidden, obs, vectors
            )
        next_extras = predictions(model_params, hidden, next_obs)
        item = Batch(
            obs=obs,
            actions=vectors,
            rewards=split_agents(rewards),
            next_obs=next_obs,
            extras=extras,
            next_extras=next_extras,
            terminated=terminated,
        )
        buffer = replay.add_batch(buffer, item)
        metrics = {
            "done": info["done"],
            "episode_returns": info["episode_returns"],
        }
        new_state = (env_state, next_obs_teams, hidden, buffer)
        return new_state, (metrics, Record(obs, vectors, extras))

    def learn_agent(i, learners, batch, key):
        learner = learners[i]
        key_target, key_actor = jax.random.split(key)
        target_keys = jax.random.split(key_target, num_agents)
        next_actions = tuple(
            policy_action(
                actor.apply(
                    learners[j].target_actor,
                    jnp.concatenate([batch.next_obs[j], batch.next_extras[j]], -1),
                ),
                target_keys[j],
                discrete,
            )
            for j in range(num_agents)
        )
        target = td_target(
            critic, learner.target_critic, batch, i, next_actions, config.gamma, eps[i]
        )
        (_, q_stats), grads = jax.value_and_grad(
            lambda p: critic_loss(critic, p, batch, i, target), has_aux=True
        )(learner.critic)
        updates, critic_opt = optimiser.update(grads, learner.critic_opt)
        critic_params = optax.apply_updates(learner.critic, updates)
        (_, a_stats), grads = jax.value_and_grad(
            lambda p: actor_loss(
                actor, p, critic, critic_params, batch, i, key_actor, discrete, eps[i]
            ),
            has_aux=True,
        )(learner.actor)
        updates, actor_opt = optimiser.update(grads, learner.actor_opt)
        actor_params = optax.apply_updates(learner.actor, updates)
        new = Learner(
            actor_params,
            critic_params,
            optax.incremental_update(actor_params, learner.target_actor, config.polyak),
            optax.incremental_update(
                critic_params, learner.target_critic, config.polyak
            ),
            actor_opt,
            critic_opt,
        )
        return new, {**q_stats, **a_stats}

    def learn(learners, buffer, key):
        key_sample, key_agents = jax.random.split(key)
        batch = replay.sample(buffer, key_sample, config.batch_size)
        new, stats = [], {}
        for i, k in enumerate(jax.random.split(key_agents, num_agents)):
            learner, agent_stats = learn_agent(i, learners, batch, k)
            new.append(learner)
            stats.update({f"{name}/{names[i]}": v for name, v in agent_stats.items()})
        return tuple(new), stats

    def update(carry: PlayoutCarry, model_params=None):
        key, key_steps, key_learn = jax.random.split(carry.key, 3)
        state = (carry.env_state, carry.obs, carry.hidden, carry.buffer)
        state, (step_metrics, record) = jax.lax.scan(
            lambda s, k: env_step(carry.learners, model_params, s, k),
            state,
            jax.random.split(key_steps, config.agent_update_freq),
        )
        env_state, obs, hidden, buffer = state
        trained, stats = learn(carry.learners, buffer, key_learn)
        ready = buffer.size >= learn_after
        learners = jax.tree.map(
            lambda new, old: jnp.where(ready, new, old), trained, carry.learners
        )
        metrics = episode_metrics(step_metrics, base_env.team_names)
        metrics.update({k: jnp.where(ready, v, jnp.nan) for k, v in stats.items()})
        carry = PlayoutCarry(learners, env_state, obs, hidden, buffer, key)
        return carry, metrics, record

    return Engine(
        config, base_env, names, teams, init_learner, init_playout, update, learn
    )


def init_learners(engine: Engine, key: jax.Array) -> tuple[Learner, ...]:
    """Fresh networks for every agent."""
    keys = jax.random.split(key, len(engine.agent_names))
    return tuple(engine.init_learner(i, k) for i, k in enumerate(keys))


def make_train(
    config: MADDPGConfig, game: tuple[Env, Any] | None = None
) -> Callable[[jax.Array], TrainOutput]:
    """``train(key) -> TrainOutput``: one play-out of MADDPG / M3DDPG, every agent
    learning, as one scan (jit it; vmap it over seed keys).

    ``TrainOutput.metrics`` holds ``[update]`` arrays: ``episodes``,
    ``return/<team>`` (mean return of the episodes that ended in the update, NaN
    if none) and, per agent, ``q_loss``, ``q_mean`` and ``actor_loss`` (NaN before
    learning starts). ``TrainOutput.carry`` is the final :class:`PlayoutCarry`.
    """
    engine = make_engine(config, game)

    def train(key: jax.Array) -> TrainOutput:
        key_learners, key_playout = jax.random.split(key)
        carry = engine.init_playout(key_playout, init_learners(engine, key_learners))

        def step(carry, _):
            carry, metrics, _ = engine.update(carry, None)
            return carry, metrics

        carry, metrics = jax.lax.scan(step, carry, length=config.updates_per_playout)
        return TrainOutput(carry, metrics)

    return train
