"""LeMOL training: play-outs against learning opponents, then opponent-model
training on the opponent's experience with truncated backpropagation.

A run is ``n_opp_cycles`` cycles (:meth:`LeMOL.cycle`). In each of a cycle's
``traj_per_iter`` play-outs the focal team keeps its networks, the opponent starts
from fresh ones, and both learn with MADDPG (:mod:`mopa.algos.maddpg`) for
``num_episodes`` episodes; a ``lemol`` agent reads the opponent model's prediction
of the opponent's current action in its actor and critic, the model's LSTM reading
the opponent's experience as it happens. Each game's play-out leaves one opponent
trajectory (its observations and actions over the whole play-out, in order); the
``num_traj_to_train`` most recent are kept. After the play-outs the model takes
``om_training_iters`` passes over them, each pass one gradient step per chunk of
``chunk_length`` steps, the LSTM state carried from chunk to chunk without its
gradient (truncated backpropagation through time).

Every figure is also returned for runs without a ``lemol`` agent (MADDPG or
M3DDPG against learning opponents, the same protocol), minus the model's.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from mopa.algos.lemol.config import LeMOLConfig
from mopa.algos.lemol.model import (
    OpponentModel,
    initial_state,
    prediction,
    prediction_loss,
    prediction_scores,
)
from mopa.algos.maddpg.losses import ACTION_SIZE
from mopa.algos.maddpg.train import OnlineModel, init_learners, make_engine
from mopa.core import replay
from mopa.envs.base import Env
from mopa.errors import InvalidParameterError


class Trajectory(NamedTuple):
    """One opponent's experience over a play-out, padded to whole chunks."""

    obs: jax.Array  # [num_chunks * chunk_length, D]
    actions: jax.Array  # [num_chunks * chunk_length, 5]
    valid: jax.Array  # [num_chunks * chunk_length] bool: a real step, not padding


class LeMOLCarry(NamedTuple):
    learners: tuple  # per agent Learner (the focal team's persist)
    model_params: Any  # opponent model (() without a lemol agent)
    model_opt: Any
    store: replay.ReplayBuffer | tuple  # Trajectory items, num_traj_to_train
    cycle: jax.Array  # [] int32 cycles done
    key: jax.Array


class LeMOLOutput(NamedTuple):
    carry: LeMOLCarry
    metrics: dict
    """Per update ``[update]`` (``[seed, update]`` once vmapped), updates of every
    play-out in order: ``return/<team>``, per-agent losses and, with a model,
    ``om_loss``, ``om_uniform_loss`` (and ``om_accuracy`` for discrete moves) of
    its online predictions."""
    cycle_metrics: dict
    """Per cycle ``[cycle]``: the model's online scores over the cycle's play-outs
    (made before the cycle's training) and ``om_train_loss`` of its last pass."""


class LeMOL(NamedTuple):
    """A LeMOL run for one config and game."""

    config: LeMOLConfig
    agent_names: tuple[str, ...]
    init: Callable[[jax.Array], LeMOLCarry]
    """``key -> carry`` of a fresh run (one seed)."""
    cycle: Callable[[LeMOLCarry], tuple[LeMOLCarry, dict, dict]]
    """``carry -> (carry, metrics [P * U], cycle metrics [])``: one cycle."""


def make_lemol(config: LeMOLConfig, game: tuple[Env, Any] | None = None) -> LeMOL:
    """The run of ``config`` on its scenario (or ``game``).

    Raises:
        InvalidParameterError: a ``lemol`` agent in a game that is not one agent
            against one.
    """
    focal = config.focal_team
    discrete = config.discrete_actions
    module = OpponentModel(config.lstm_hidden_dim, config.num_units)
    if config.opponent_model == "bc":
        module = module.clone(memory=False)
    probe = make_engine(config, game)
    if config.uses_model and probe.env.team_sizes != (1, 1):
        raise InvalidParameterError(
            f"lemol models one opponent: {config.scenario} with these settings has "
            f"teams of {probe.env.team_sizes}; use push with num_adversaries 1"
        )
    # Agents are adversaries first: in a one-against-one game the focal agent's
    # index is its team's.
    opponent = 1 - focal
    online = None
    if config.uses_model:

        def predict(params, state, obs):
            out = module.apply(params, state, obs[opponent], method=module.predict)
            return prediction(out, discrete)

        def observe(params, state, obs, actions):
            return module.apply(
                params, state, obs[opponent], actions[opponent], method=module.observe
            )

        online = OnlineModel(
            agent=focal,
            size=ACTION_SIZE,
            init_hidden=lambda: initial_state(config.lstm_hidden_dim),
            predict=predict,
            observe=observe,
        )
    engine = make_engine(config, game, online) if online is not None else probe
    teams = engine.agent_teams
    model_optimiser = optax.adam(config.omlr)
    opp_obs_size = engine.env.observation_space(teams[opponent]).shape[0]
    padded = config.num_chunks * config.chunk_length
    steps = config.steps_per_playout

    def init(key):
        key_learners, key_model, key_run = jax.random.split(key, 3)
        learners = init_learners(engine, key_learners)
        if online is None:
            return LeMOLCarry(learners, (), (), (), jnp.zeros((), jnp.int32), key_run)
        params = module.init(
            key_model,
            initial_state(config.lstm_hidden_dim),
            jnp.zeros((opp_obs_size,)),
            jnp.zeros((ACTION_SIZE,)),
        )
        example = Trajectory(
            jnp.zeros((padded, opp_obs_size)),
            jnp.zeros((padded, ACTION_SIZE)),
            jnp.zeros((padded,), bool),
        )
        store = replay.init_buffer(example, config.num_traj_to_train)
        return LeMOLCarry(
            learners,
            params,
            model_optimiser.init(params),
            store,
            jnp.zeros((), jnp.int32),
            key_run,
        )

    def playout(carry: LeMOLCarry, key):
        key_opponent, key_play = jax.random.split(key)
        fresh = init_learners(engine, key_opponent)
        learners = tuple(
            old if teams[i] == focal else new
            for i, (old, new) in enumerate(zip(carry.learners, fresh, strict=True))
        )
        state = engine.init_playout(key_play, learners)

        def step(state, _):
            state, metrics, record = engine.update(state, carry.model_params)
            if online is not None:
                scores = prediction_scores(
                    record.extras[focal], record.actions[opponent], discrete
                )
                metrics.update({k: v.mean() for k, v in scores.items()})
                record = (record.obs[opponent], record.actions[opponent])
            else:
                record = ()
            return state, (metrics, record)

        state, (metrics, record) = jax.lax.scan(
            step, state, length=config.updates_per_playout
        )
        store = carry.store
        if online is not None:
            store = replay.add_batch(store, _trajectories(record, steps, padded))
        return carry._replace(learners=state.learners, store=store), metrics

    def chunk_loss(params, states, chunk: Trajectory):
        """Mean loss over the valid steps of one chunk of every stored trajectory
        (``[K, chunk_length, ...]``) from LSTM states ``[K, ...]``."""

        def run(state, obs, actions):
            def one(state, inputs):
                o, a = inputs
                out = module.apply(params, state, o, method=module.predict)
                state = module.apply(params, state, o, a, method=module.observe)
                return state, out

            return jax.lax.scan(one, state, (obs, actions))

        states, out = jax.vmap(run)(states, chunk.obs, chunk.actions)
        losses = prediction_loss(out, chunk.actions, discrete)  # [K, chunk_length]
        weight = chunk.valid.astype(jnp.float32)
        loss = jnp.sum(losses * weight) / jnp.maximum(weight.sum(), 1.0)
        return loss, states

    def train_model(params, opt_state, store):
        """``om_training_iters`` passes of truncated backpropagation over the
        stored trajectories. Returns ``(params, opt_state, last pass's mean
        loss)``."""
        K = config.num_traj_to_train
        stored = jnp.arange(K) < store.size
        data = store.data._replace(valid=store.data.valid & stored[:, None])
        chunks = jax.tree.map(
            lambda x: jnp.swapaxes(
                x.reshape(K, config.num_chunks, config.chunk_length, *x.shape[2:]),
                0,
                1,
            ),
            data,
        )  # [num_chunks, K, chunk_length, ...]

        def train_chunk(state, chunk):
            params, opt_state, lstm = state
            (loss, lstm), grads = jax.value_and_grad(chunk_loss, has_aux=True)(
                params, lstm, chunk
            )
            updates, opt_state = model_optimiser.update(grads, opt_state)
            params = optax.apply_updates(params, updates)
            return (params, opt_state, jax.lax.stop_gradient(lstm)), loss

        def one_pass(state, _):
            params, opt_state = state
            lstm = jax.vmap(lambda _: initial_state(config.lstm_hidden_dim))(
                jnp.arange(K)
            )
            (params, opt_state, _), losses = jax.lax.scan(
                train_chunk, (params, opt_state, lstm), chunks
            )
            return (params, opt_state), losses.mean()

        (params, opt_state), losses = jax.lax.scan(
            one_pass, (params, opt_state), length=config.om_training_iters
        )
        return params, opt_state, losses[-1]

    def cycle(carry: LeMOLCarry):
        key, key_playouts = jax.random.split(carry.key)
        carry, metrics = jax.lax.scan(
            playout, carry, jax.random.split(key_playouts, config.traj_per_iter)
        )  # metrics [P, U]
        cycle_metrics = {k: v.mean() for k, v in metrics.items() if k.startswith("om_")}
        if online is not None:
            params, opt_state, loss = train_model(
                carry.model_params, carry.model_opt, carry.store
            )
            carry = carry._replace(model_params=params, model_opt=opt_state)
            cycle_metrics["om_train_loss"] = loss
        metrics = jax.tree.map(lambda x: x.reshape(-1), metrics)
        return carry._replace(cycle=carry.cycle + 1, key=key), metrics, cycle_metrics

    return LeMOL(config, engine.agent_names, init, cycle)


def _trajectories(record, steps: int, padded: int) -> Trajectory:
    """Per-game trajectories ``[E, padded, ...]`` from a play-out's opponent
    record ``(obs, actions)``, each ``[U, F, E, ...]`` (time-major)."""

    def per_game(x):
        x = x.reshape(steps, *x.shape[2:])  # [U * F, E, ...]
        x = jnp.swapaxes(x, 0, 1)
        pad = [(0, 0), (0, padded - steps)] + [(0, 0)] * (x.ndim - 2)
        return jnp.pad(x, pad)

    obs, actions = (per_game(x) for x in record)
    valid = jnp.broadcast_to(jnp.arange(padded) < steps, obs.shape[:2])
    return Trajectory(obs, actions, valid)


def make_train(
    config: LeMOLConfig, game: tuple[Env, Any] | None = None
) -> Callable[[jax.Array], LeMOLOutput]:
    """``train(key) -> LeMOLOutput``: the whole run as one scan over cycles (jit
    it; vmap it over seed keys)."""
    lemol = make_lemol(config, game)

    def train(key: jax.Array) -> LeMOLOutput:
        def step(carry, _):
            carry, metrics, cycle_metrics = lemol.cycle(carry)
            return carry, (metrics, cycle_metrics)

        carry, (metrics, cycle_metrics) = jax.lax.scan(
            step, lemol.init(key), length=config.n_opp_cycles
        )
        metrics = jax.tree.map(lambda x: x.reshape(-1), metrics)
        return LeMOLOutput(carry, metrics, cycle_metrics)

    return train


def _binned(x: np.ndarray, bins: int) -> np.ndarray:
    """Means of ``bins`` consecutive near-equal slices of the last axis."""
    return np.stack([part.mean(-1) for part in np.array_split(x, bins, -1)], -1)


def train_cycles(
    run: LeMOLConfig,
    seed: int,
    teams: tuple[str, ...],
    within_bins: int,
    progress: Callable[[str], None],
    label: str,
) -> dict[str, Any]:
    """Every seed's run (``run.num_seeds``, keys folded from ``seed``), one jitted,
    vmapped cycle at a time; a progress line per cycle, prefixed ``label``.

    Returns:
        ``{"cycles": {NAME: [seed][cycle]}, "within_playout": [seed][cycle][bin],
        "compile_s", "run_s"}``: per cycle ``return/<team>`` (mean over the
        cycle's updates of the return of the episodes that ended), and with a
        model ``om_accuracy``, ``om_loss``, ``om_uniform_loss``,
        ``om_train_loss``; ``within_playout`` is ``om_accuracy`` over the
        play-out's updates in ``within_bins`` bins, averaged over the cycle's
        play-outs (empty without a model).
    """
    num_seeds = run.num_seeds
    lemol = make_lemol(run)
    base = jax.random.key(seed)
    keys = jax.vmap(lambda i: jax.random.fold_in(base, i))(np.arange(num_seeds))
    start = time.perf_counter()
    carry = jax.jit(jax.vmap(lemol.init))(keys)
    cycle = jax.jit(jax.vmap(lemol.cycle)).lower(carry).compile()
    compile_s = time.perf_counter() - start
    cycles: dict[str, list] = {}
    within = []
    start = time.perf_counter()
    for c in range(run.n_opp_cycles):
        carry, metrics, cycle_metrics = cycle(carry)
        metrics = {k: np.asarray(v, np.float64) for k, v in metrics.items()}
        per_cycle = {
            f"return/{team}": np.nanmean(metrics[f"return/{team}"], 1) for team in teams
        }
        per_cycle.update({k: np.asarray(v) for k, v in cycle_metrics.items()})
        for name, value in per_cycle.items():
            cycles.setdefault(name, []).append(value)
        if "om_accuracy" in metrics:
            shape = (num_seeds, run.traj_per_iter, run.updates_per_playout)
            accuracy = metrics["om_accuracy"].reshape(shape).mean(1)
            within.append(_binned(accuracy, within_bins))
        line = " ".join(
            f"{k} {float(np.mean(v)):+.3f}" for k, v in sorted(per_cycle.items())
        )
        progress(f"{label} cycle {c + 1}/{run.n_opp_cycles}: {line}")
    return {
        "cycles": {k: np.stack(v, 1).tolist() for k, v in cycles.items()},
        "within_playout": np.stack(within, 1).tolist() if within else [],
        "compile_s": compile_s,
        "run_s": time.perf_counter() - start,
    }
