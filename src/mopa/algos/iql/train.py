"""IQL and OA-IQL: one Q-network per team, weights shared by the team's agents.

Each update plays ``num_steps`` steps in ``num_envs`` games with epsilon-greedy
learning teams (frozen teams act with their fixed policy), stores each game's
steps as one segment in the replay buffer, then takes ``num_epochs`` gradient steps
on sampled segments. Segments keep the recurrent variant exact: the GRU is
unrolled from the hidden state stored at the segment's start and reset at episode
starts. Targets bootstrap from the true next observation (also on truncation) with
a periodically refreshed target network: ``y = r + gamma (1 - terminated) max_a
Q_target(o', a)``. OA-IQL adds the cross-entropy of the opponent head against the
opponents' replayed actions, weighted by ``opp_coef``.

Episode replay (``replay="episodes"``, the research's recipe): every update resets
its ``num_envs`` games and plays ``num_steps`` steps, at least one whole episode,
so each game's steps are stored as one item that starts at a reset. Steps after
the game's first episode has ended (the start of the next one) are masked out of
the losses (from the opponent head's too unless ``opp_loss_all_steps``); the
rest are learnt from along the whole episode, the GRU unrolled from a zero state.
``double_q`` swaps the target's max for the target network's value of the online
network's greedy action (van Hasselt et al. 2016, "Deep Reinforcement Learning
with Double Q-learning"), and ``optimiser="radam"`` uses rectified Adam (Liu et
al. 2020).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from mopa.algos.common import EnvCarry, env_step, episode_metrics, reset_envs, setup_run
from mopa.algos.iql.config import IQLConfig
from mopa.algos.trainer import Trainer, TrainOutput, scan_train
from mopa.core import replay
from mopa.errors import InvalidParameterError
from mopa.policy import PolicySpec, agent_inputs, init_params


class Learner(NamedTuple):
    params: Any
    target_params: Any
    opt_state: Any


class Segment(NamedTuple):
    """``num_steps`` consecutive steps of one game; learning teams keyed by index."""

    obs: dict  # team -> [T, A, D]
    next_obs: dict  # team -> [T, A, D]
    rewards: dict  # team -> [T, A]
    hidden: dict  # team -> [A, H] policy carry at the segment's start
    actions: tuple  # every team [T, A_t]
    terminated: jax.Array  # [T]
    first: jax.Array  # [T]


class IQLCarry(NamedTuple):
    learners: dict  # team index (str) -> Learner
    env: EnvCarry
    buffer: replay.ReplayBuffer
    update: jax.Array  # [] int32 updates done
    key: jax.Array


def team_specs(config: IQLConfig, infos) -> dict[int, PolicySpec]:
    """The Q-network spec of every learning team."""
    frozen = config.frozen_teams
    return {
        t: PolicySpec(
            kind="rnn_q" if config.rnn else "q",
            num_agents=info.num_agents,
            obs_size=info.obs_size,
            num_actions=info.num_actions,
            hidden=config.hidden,
            activation="relu",
            agent_id=config.agent_id,
            num_opponents=info.num_opponents if config.opponent_head else 0,
            opponent_actions=info.opponent_actions if config.opponent_head else 0,
        )
        for t, info in enumerate(infos)
        if info.name not in frozen
    }


def _unroll(module, params, hidden0, x, first):
    """Run the GRU Q-network over a segment batch.

    Args:
        hidden0: ``[B, A, H]``; x: ``[B, T, A, I]``; first: ``[B, T]``.

    Returns:
        ``(hiddens [B, T, A, H] after each step, q [B, T, A, n], opp [B, T, A, ...])``.
    """
    reset = jnp.broadcast_to(first[..., None], x.shape[:-1])

    def step(h, inputs):
        x_t, reset_t = inputs
        h, (q, opp) = module.apply(params, h, x_t, reset_t)
        return h, (h, q, opp)

    _, (hiddens, q, opp) = jax.lax.scan(
        step, hidden0, (jnp.swapaxes(x, 0, 1), jnp.swapaxes(reset, 0, 1))
    )
    return tuple(jnp.swapaxes(a, 0, 1) for a in (hiddens, q, opp))


def first_episode_mask(first: jax.Array) -> jax.Array:
    """Steps of each item's first episode: ``[B, T]`` bool from ``first [B, T]``
    (true where a step starts an episode; the first step of an item is always
    counted, whatever its flag)."""
    later_starts = first.at[..., 0].set(False)
    return jnp.cumsum(later_starts, axis=-1) == 0


def masked_mean(x: jax.Array, mask: jax.Array | None) -> jax.Array:
    """Mean of ``x [B, T, ...]`` over the steps where ``mask [B, T]`` is true; the
    plain mean when ``mask`` is None."""
    if mask is None:
        return jnp.mean(x)
    weights = jnp.broadcast_to(
        mask.reshape(*mask.shape, *(1,) * (x.ndim - mask.ndim)), x.shape
    ).astype(jnp.float32)
    return jnp.sum(x * weights) / jnp.maximum(weights.sum(), 1.0)


def make_loss_fn(config: IQLConfig, spec: PolicySpec, team: int, num_teams: int):
    """Loss of team ``team`` on a batch of segments (or episodes): TD error (and the
    opponent head's cross-entropy for OA-IQL). Returns ``(loss, stats)``."""
    module = spec.module()
    key = str(team)

    def loss_fn(params, target_params, batch: Segment):
        x = agent_inputs(spec, batch.obs[key])  # [B, T, A, I]
        next_x = agent_inputs(spec, batch.next_obs[key])
        if config.rnn:
            h0 = batch.hidden[key]
            hiddens, q, opp = _unroll(module, params, h0, x, batch.first)
            target_hiddens, _, _ = _unroll(module, target_params, h0, x, batch.first)
            no_reset = jnp.zeros(next_x.shape[:-1], bool)

            def next_q(net_params, net_hiddens):  # Q(o', .) [B, T, A, n]
                return module.apply(net_params, net_hiddens, next_x, no_reset)[1][0]

        else:
            q, opp = module.apply(params, x)
            hiddens = target_hiddens = None

            def next_q(net_params, _):
                return module.apply(net_params, next_x)[0]

        q_next = next_q(target_params, target_hiddens)
        if config.double_q:
            greedy = jnp.argmax(next_q(params, hiddens), -1)
            next_value = jnp.take_along_axis(q_next, greedy[..., None], -1)[..., 0]
        else:
            next_value = q_next.max(-1)
        mask = first_episode_mask(batch.first) if config.episode_replay else None
        actions = batch.actions[team]
        q_taken = jnp.take_along_axis(q, actions[..., None], -1)[..., 0]
        not_terminated = 1.0 - batch.terminated.astype(jnp.float32)[..., None]
        target = batch.rewards[key] + config.gamma * not_terminated * next_value
        td_loss = masked_mean((q_taken - jax.lax.stop_gradient(target)) ** 2, mask)
        stats = {"td_loss": td_loss, "q_mean": masked_mean(q_taken, mask)}
        loss = td_loss
        if config.opponent_head:
            labels = jnp.concatenate(
                [batch.actions[u] for u in range(num_teams) if u != team], -1
            )  # [B, T, O]
            labels = jnp.broadcast_to(labels[..., None, :], opp.shape[:-1])
            opp_mask = None if config.opp_loss_all_steps else mask
            ce = masked_mean(
                optax.softmax_cross_entropy_with_integer_labels(opp, labels), opp_mask
            )
            stats["opp_ce"] = ce
            stats["opp_acc"] = masked_mean(jnp.argmax(opp, -1) == labels, opp_mask)
            loss = loss + config.opp_coef * ce
        stats["loss"] = loss
        return loss, stats

    return loss_fn


def make_optimiser(config: IQLConfig) -> optax.GradientTransformation:
    """Every team's optimiser: the global-norm clip, then Adam or RAdam at ``lr``
    (decayed linearly towards 0 over the run's gradient steps with
    ``anneal_lr``)."""
    lr = (
        optax.linear_schedule(
            config.lr, 0.0, max(1, config.num_updates * config.num_epochs)
        )
        if config.anneal_lr
        else config.lr
    )
    return optax.chain(
        optax.clip_by_global_norm(config.max_grad_norm),
        optax.radam(lr) if config.optimiser == "radam" else optax.adam(lr),
    )


def make_trainer(config: IQLConfig, game: tuple[Any, Any] | None = None) -> Trainer:
    """IQL / OA-IQL for ``config``; see the module docstring.

    Args:
        game: ``(env, params)`` to train on instead of ``config.env``.
    """
    run = setup_run(config, game)
    base_env, env, env_params, infos = run[:4]
    if config.episode_replay:
        check_covers_episode(config.num_steps, env_params)
    num_teams = len(infos)
    specs = team_specs(config, infos)
    frozen_fns = run.frozen_fns
    hidden_sizes = run.hidden_sizes(specs)
    modules = {t: spec.module() for t, spec in specs.items()}
    optimiser = make_optimiser(config)
    epsilon = optax.linear_schedule(
        config.eps_start,
        config.eps_finish,
        max(1, int(config.eps_decay * config.num_updates)),
    )
    loss_fns = {t: make_loss_fn(config, specs[t], t, num_teams) for t in specs}
    learn_after = max(config.learning_starts, config.batch_size * config.num_steps)

    def behaviour(t, params, eps):
        spec, module = specs[t], modules[t]

        def act(key, obs, first, hidden):
            x = agent_inputs(spec, obs)
            if config.rnn:
                reset = jnp.broadcast_to(first[:, None], obs.shape[:-1])
                hidden, (q, _) = module.apply(params, hidden, x, reset)
            else:
                q, _ = module.apply(params, x)
            key_explore, key_random = jax.random.split(key)
            explore = jax.random.uniform(key_explore, q.shape[:-1]) < eps
            random_actions = jax.random.randint(
                key_random, q.shape[:-1], 0, spec.num_actions
            )
            actions = jnp.where(explore, random_actions, jnp.argmax(q, -1))
            return actions.astype(jnp.int32), hidden, ()

        return act

    def init(key):
        key_env, key_params, key_run = jax.random.split(key, 3)
        env_carry = reset_envs(env, env_params, key_env, config.num_envs, hidden_sizes)
        learners = {}
        for t, k in zip(specs, jax.random.split(key_params, len(specs)), strict=True):
            params = init_params(specs[t], k)
            learners[str(t)] = Learner(params, params, optimiser.init(params))
        example = _segment(
            config, specs, env_carry, _empty_steps(env_carry, config.num_steps)
        )
        buffer = replay.init_buffer(
            jax.tree.map(lambda x: x[0], example), config.buffer_segments
        )
        return IQLCarry(learners, env_carry, buffer, jnp.zeros((), jnp.int32), key_run)

    def grad_step(learners, batch):
        new, stats = {}, {}
        for t in specs:
            learner = learners[str(t)]
            (_, team_stats), grads = jax.value_and_grad(loss_fns[t], has_aux=True)(
                learner.params, learner.target_params, batch
            )
            updates, opt_state = optimiser.update(
                grads, learner.opt_state, learner.params
            )
            params = optax.apply_updates(learner.params, updates)
            new[str(t)] = Learner(params, learner.target_params, opt_state)
            stats[infos[t].name] = team_stats
        return new, stats

    def update(carry: IQLCarry):
        if config.episode_replay:  # fresh games: each stores one whole episode
            key, key_reset, key_collect, key_learn = jax.random.split(carry.key, 4)
            start = reset_envs(
                env, env_params, key_reset, config.num_envs, hidden_sizes
            )
        else:
            key, key_collect, key_learn = jax.random.split(carry.key, 3)
            start = carry.env
        eps = epsilon(carry.update)
        act_fns = tuple(
            behaviour(t, carry.learners[str(t)].params, eps)
            if t in specs
            else frozen_fns[t]
            for t in range(num_teams)
        )
        env_carry, steps = jax.lax.scan(
            lambda c, k: env_step(env, env_params, act_fns, k, c),
            start,
            jax.random.split(key_collect, config.num_steps),
        )
        segment = _segment(config, specs, start, steps)
        buffer = replay.add_batch(carry.buffer, segment)

        def learn(learners, k):
            return grad_step(learners, replay.sample(buffer, k, config.batch_size))

        trained, stats = jax.lax.scan(
            learn, carry.learners, jax.random.split(key_learn, config.num_epochs)
        )
        ready = buffer.size * config.num_steps >= learn_after
        learners = jax.tree.map(
            lambda new, old: jnp.where(ready, new, old), trained, carry.learners
        )
        refresh = (carry.update + 1) % config.target_update_interval == 0
        step_size = jnp.where(refresh & ready, config.tau, 0.0)
        learners = {
            k: v._replace(
                target_params=optax.incremental_update(
                    v.params, v.target_params, step_size
                )
            )
            for k, v in learners.items()
        }
        metrics = episode_metrics(steps.metrics, base_env.team_names)
        metrics["epsilon"] = eps
        for team, team_stats in stats.items():
            for name, value in team_stats.items():
                metrics[f"{name}/{team}"] = jnp.where(ready, value.mean(), jnp.nan)
        carry = IQLCarry(learners, env_carry, buffer, carry.update + 1, key)
        return carry, metrics

    def policies(carry: IQLCarry):
        return {infos[t].name: (specs[t], carry.learners[str(t)].params) for t in specs}

    return Trainer(config, init, update, policies, base_env.team_names)


def check_covers_episode(num_steps: int, env_params: Any) -> None:
    """Raise unless ``num_steps`` covers a whole episode of the game (checked where
    its parameters state ``max_steps``).

    Raises:
        InvalidParameterError: episode replay would store cut episodes.
    """
    max_steps = getattr(env_params, "max_steps", None)
    if max_steps is not None and num_steps < int(max_steps):
        raise InvalidParameterError(
            f"num_steps ({num_steps}) must be at least the game's episode length "
            f"({int(max_steps)}) with replay='episodes': each update stores one "
            "whole episode per game"
        )


def _empty_steps(env_carry: EnvCarry, num_steps: int):
    """Zeros ``[T, E, ...]`` shaped like the steps an update collects."""

    class Steps(NamedTuple):
        obs: tuple
        next_obs: tuple
        rewards: tuple
        actions: tuple
        terminated: jax.Array
        first: jax.Array

    obs = tuple(jnp.zeros((num_steps, *o.shape), o.dtype) for o in env_carry.obs)
    return Steps(
        obs=obs,
        next_obs=obs,
        rewards=tuple(jnp.zeros(o.shape[:-1]) for o in obs),
        actions=tuple(jnp.zeros(o.shape[:-1], jnp.int32) for o in obs),
        terminated=jnp.zeros((num_steps, *env_carry.first.shape), bool),
        first=jnp.zeros((num_steps, *env_carry.first.shape), bool),
    )


def _segment(config, specs, env_carry: EnvCarry, steps) -> Segment:
    """Per-game segments ``[E, T, ...]`` from time-major steps ``[T, E, ...]``."""
    swap = lambda x: jnp.swapaxes(x, 0, 1)  # noqa: E731
    return Segment(
        obs={str(t): swap(steps.obs[t]) for t in specs},
        next_obs={str(t): swap(steps.next_obs[t]) for t in specs},
        rewards={str(t): swap(steps.rewards[t]) for t in specs},
        hidden={str(t): env_carry.hidden[t] for t in specs},
        actions=tuple(swap(a) for a in steps.actions),
        terminated=swap(steps.terminated),
        first=swap(steps.first),
    )


def make_train(config: IQLConfig, game: tuple[Any, Any] | None = None):
    """``train(key) -> TrainOutput`` for the whole run (jit and vmap it)."""
    return scan_train(make_trainer(config, game))


__all__ = [
    "IQLConfig",
    "TrainOutput",
    "make_loss_fn",
    "make_optimiser",
    "make_train",
    "make_trainer",
]
