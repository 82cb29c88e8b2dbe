"""Opponent-model speed (``mopa bench beliefs``): encoder training time and the
latency of one online belief update, batched.

Encoders are measured at the sizes the experiments train them: the prefix
classifier and the JEPA of the hidden-intent experiment
(:func:`mopa.experiments.intent.classifier_config`, :func:`~mopa.experiments.
intent.jepa_config`: 64 occupancy cells and the last 8 positions, 128-128, 3,000
Adam updates of 128 examples) and Exp 5's occupancy VAE
(:meth:`mopa.experiments.exp5.Exp5Config.vae`: latent 2, 4,000 updates). One
measurement is a whole ``jit(make_train(config))`` run on random data, after
compilation.

Beliefs are measured over the four corners of ``tag_intent`` (K = 4), one update
per step of a batch of ``B`` games, ``jit(vmap(update))``:

* ``classifier``: :func:`~mopa.opponent.beliefs.update_prefix_belief` with the
  prefix classifier on the prefix's occupancy (belief (a));
* ``jepa``: the same with the JEPA's arrival readout against the corners (b);
* ``bayes``: :func:`~mopa.opponent.beliefs.update_bayes_belief` after evaluating
  the opponent model ``p(a | s, k)`` for every corner: the ``tag_intent`` prey's
  actor (MAPPO's one layer of 128, :func:`~mopa.opponent.beliefs.
  policy_log_probs_fn`) (c);
* ``intent_<source>``: a whole step of the Exp 6 predator player
  (:class:`~mopa.planning.IntentPredator`, fed its belief):
  the belief update with that one source (``bayes`` also recovers the prey's
  last action by simulating the transition under each of its 5 actions), then
  the predators' actions.

Each belief row has two latencies: ``step_s``, one jitted call doing one step
(what a host-driven loop pays, dispatch included), and ``scan_step_s``, the time
per step of a 25-step ``lax.scan`` in one call (the cost inside a jitted
episode). Every figure is the median of ``repeats`` timed repetitions after
compilation, with ``block_until_ready``.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from mopa.bench import BELIEFS, ENCODERS

EPISODE_STEPS = 25
"""Steps of the timed scan (one ``tag_intent`` episode)."""


# -- encoders -----------------------------------------------------------------------
def encoder_configs(
    num_updates: int | None = None, hidden: tuple[int, ...] | None = None
) -> dict[str, Any]:
    """``{name: EncoderConfig}`` at the experiments' sizes, optionally with fewer
    updates or other hidden widths (for tests)."""
    from mopa.experiments.exp5 import Exp5Config
    from mopa.experiments.intent import IntentConfig, classifier_config, jepa_config

    intent = IntentConfig()
    configs = {
        "classifier": classifier_config(intent),
        "vae": Exp5Config().vae(),
        "jepa": jepa_config(intent),
    }
    changes: dict[str, Any] = {}
    if num_updates is not None:
        changes["num_updates"] = num_updates
    if hidden is not None:
        changes["hidden"] = tuple(hidden)
    return {name: dataclasses.replace(c, **changes) for name, c in configs.items()}


def _encoder_data(name: str, config: Any, key: jax.Array, num_examples: int) -> Any:
    """Random training data of the encoder's shapes (training time does not depend
    on the values)."""
    from mopa.opponent.encoders import ClassifierData, JEPAData

    key_x, key_y, key_r = jax.random.split(key, 3)
    x = jax.random.uniform(key_x, (num_examples, config.input_size))
    x = x / jnp.sum(x, -1, keepdims=True)  # occupancy-like rows summing to 1
    if name == "classifier":
        labels = jax.random.randint(key_y, (num_examples,), 0, config.num_classes)
        return ClassifierData(x, labels)
    if name == "jepa":
        target = jax.random.permutation(key_y, x)
        readout = jax.random.uniform(key_r, (num_examples, config.readout_size))
        return JEPAData(x, target, readout)
    return x


def bench_encoders(
    encoders: tuple[str, ...] = ENCODERS,
    num_examples: int = 4096,
    num_updates: int | None = None,
    hidden: tuple[int, ...] | None = None,
    repeats: int = 3,
    progress: Callable[[dict[str, Any]], None] | None = None,
) -> list[dict[str, Any]]:
    """Time one whole training run of each encoder.

    Args:
        encoders: names from :data:`ENCODERS`.
        num_examples: rows of the random training set (updates draw minibatches
            from it).
        num_updates, hidden: override the experiments' sizes (tests).
        repeats: timed runs (median).

    Returns:
        Rows ``{"bench": "encoder", "name", "num_updates", "batch_size",
        "input_size", "hidden", "num_examples", "compile_s", "train_s",
        "updates_per_s"}``.
    """
    from mopa.bench.planner_speed import median_call_seconds
    from mopa.opponent.encoders import make_train

    configs = encoder_configs(num_updates, hidden)
    key = jax.random.key(0)
    rows = []
    for name in encoders:
        config = configs[name]
        data = _encoder_data(name, config, jax.random.key(1), num_examples)
        tick = time.perf_counter()
        train = jax.jit(make_train(config)).lower(key, data).compile()
        compile_s = time.perf_counter() - tick
        train_s = median_call_seconds(
            lambda train=train, data=data: train(key, data), repeats, 0.0
        )
        row = {
            "bench": "encoder",
            "name": name,
            "num_updates": config.num_updates,
            "batch_size": config.batch_size,
            "input_size": config.input_size,
            "hidden": list(config.hidden),
            "num_examples": num_examples,
            "compile_s": compile_s,
            "train_s": train_s,
            "updates_per_s": config.num_updates / train_s,
        }
        rows.append(row)
        if progress is not None:
            progress(row)
    return rows


# -- beliefs ------------------------------------------------------------------------
def _broadcast(tree: Any, batch: int) -> Any:
    return jax.tree.map(lambda x: jnp.broadcast_to(x, (batch, *jnp.shape(x))), tree)


def _belief_case(
    name: str, batch: int, hidden: tuple[int, ...] | None
) -> tuple[Callable, Any, Any, Any]:
    """``(step_fn, params, state [B], inputs [T, B])`` of one belief update;
    ``step_fn(params, state, input) -> state`` acts on one game."""
    from mopa import planning
    from mopa.algos.presets import preset
    from mopa.envs import make
    from mopa.envs.pursuit import INTENT_CORNERS, PREDATOR, PREY
    from mopa.experiments.intent import IntentConfig
    from mopa.opponent import beliefs
    from mopa.opponent.encoders import init_params
    from mopa.policy import PolicySpec
    from mopa.policy import init_params as init_policy

    configs = encoder_configs(hidden=hidden)
    env, env_params = make("tag_intent", predator_intent_obs=True)
    K, T = env.num_intents, EPISODE_STEPS
    intent = IntentConfig()
    grid, recent = intent.grid_size, intent.encoder_recent
    corners = jnp.asarray(INTENT_CORNERS) * env_params.intent_corner
    policy_hidden = tuple(hidden or preset("exp6_mappo_belief").hidden)
    prey_spec = PolicySpec(
        kind="actor",
        num_agents=env.team_sizes[PREY],
        obs_size=int(env.observation_space(PREY).shape[0]),
        num_actions=int(env.action_space(PREY).n),
        hidden=policy_hidden,
    )
    keys = jax.random.split(jax.random.key(0), 6)
    c_params = j_params = ()
    if name.endswith("classifier"):
        c_params = init_params(configs["classifier"], keys[0])
    if name.endswith("jepa"):
        j_params = init_params(configs["jepa"], keys[1])
    prey_params = init_policy(prey_spec, keys[2])
    positions = jax.random.uniform(keys[3], (T, batch, 2), minval=-1.0, maxval=1.0)

    if name in ("classifier", "jepa"):
        if name == "classifier":
            params = c_params

            def logits_fn_of(p):
                return planning.classifier_logits_fn(
                    configs["classifier"], p, grid, recent
                )
        else:
            params = j_params

            def logits_fn_of(p):
                return planning.jepa_logits_fn(
                    configs["jepa"], p, grid, corners, recent
                )

        def step(p, state, position):
            return beliefs.update_prefix_belief(state, position, logits_fn_of(p))

        return (
            step,
            params,
            _broadcast(beliefs.init_prefix_belief(T, 2, K), batch),
            positions,
        )

    if name == "bayes":
        obs = jax.random.normal(keys[4], (T, batch, prey_spec.obs_size))
        actions = jax.random.randint(keys[5], (T, batch), 0, prey_spec.num_actions)

        def step(p, state, inputs):
            ob, action = inputs
            log_probs = beliefs.policy_log_probs_fn(prey_spec, p, K)(ob)
            return beliefs.update_bayes_belief(state, log_probs, action, 0.05)

        state = _broadcast(beliefs.init_bayes_belief(K), batch)
        return step, prey_params, state, (obs, actions)

    source = name.removeprefix("intent_")
    predator_spec = PolicySpec(
        kind="actor",
        num_agents=env.team_sizes[PREDATOR],
        obs_size=int(env.observation_space(PREDATOR).shape[0]),
        num_actions=int(env.action_space(PREDATOR).n),
        hidden=policy_hidden,
    )
    player = planning.IntentPredator(
        env,
        predator_spec,
        sources=(source,),
        classifier=configs["classifier"],
        jepa=configs["jepa"],
        prey_model=planning.PreyModel(prey_spec, greedy=True),
        grid_size=grid,
        recent=recent,
    )
    params = planning.IntentPredatorParams(
        env_params=env_params,
        policy_params=init_policy(predator_spec, keys[4]),
        classifier_params=c_params,
        classifier_temperature=jnp.float32(1.0),
        jepa_params=j_params,
        jepa_temperature=jnp.float32(1.0),
        bayes_params=prey_params,
        planner_params=(),
        source=jnp.int32(0),
        feed=jnp.int32(planning.FEEDS.index("belief")),
    )
    obs, game = jax.vmap(env.reset, in_axes=(0, None))(
        jax.random.split(keys[5], batch), env_params
    )
    A = player.num_agents
    row = player.pack(player.initial_carry(jax.random.key(0)))
    carry = jnp.broadcast_to(row, (batch, A, row.size))

    def step(p, state, key):
        carry, game, team_obs = state
        _, carry = player.act(p, key, game, team_obs, carry, jnp.zeros((A,), bool))
        return carry, game, team_obs

    step_keys = jax.random.split(jax.random.key(1), T * batch).reshape(T, batch)
    return step, params, (carry, game, obs[PREDATOR]), step_keys


def bench_beliefs(
    beliefs: tuple[str, ...] = BELIEFS,
    batches: tuple[int, ...] = (1, 1024),
    hidden: tuple[int, ...] | None = None,
    repeats: int = 5,
    min_seconds: float = 0.2,
    progress: Callable[[dict[str, Any]], None] | None = None,
) -> list[dict[str, Any]]:
    """Time one belief update per step for each belief and batch size.

    Args:
        beliefs: names from :data:`BELIEFS`.
        batches: games updated in parallel (one ``vmap``).
        hidden: override every network's hidden widths (tests).
        repeats: timed repetitions (median).
        min_seconds: about this long per repetition of the one-step call.

    Returns:
        Rows ``{"bench": "belief", "name", "batch", "compile_s", "step_s",
        "scan_step_s", "updates_per_s"}``: ``step_s`` one jitted call of one
        step, ``scan_step_s`` seconds per step inside a jitted
        :data:`EPISODE_STEPS`-step scan, ``updates_per_s`` = ``batch /
        scan_step_s`` (single-game updates per second).
    """
    from mopa.bench.planner_speed import median_call_seconds

    rows = []
    for name in beliefs:
        for batch in batches:
            step, params, state, inputs = _belief_case(name, batch, hidden)
            batched = jax.vmap(step, in_axes=(None, 0, 0))

            def episode(p, s, xs, batched=batched):
                return jax.lax.scan(lambda c, x: (batched(p, c, x), None), s, xs)[0]

            first = jax.tree.map(lambda x: x[0], inputs)
            tick = time.perf_counter()
            one = jax.jit(batched).lower(params, state, first).compile()
            compile_s = time.perf_counter() - tick
            scan = jax.jit(episode).lower(params, state, inputs).compile()
            step_s = median_call_seconds(
                lambda one=one, first=first, params=params, state=state: one(
                    params, state, first
                ),
                repeats,
                min_seconds,
            )
            scan_s = median_call_seconds(
                lambda scan=scan, inputs=inputs, params=params, state=state: scan(
                    params, state, inputs
                ),
                repeats,
                min_seconds,
            )
            scan_step_s = scan_s / EPISODE_STEPS
            row = {
                "bench": "belief",
                "name": name,
                "batch": batch,
                "compile_s": compile_s,
                "step_s": step_s,
                "scan_step_s": scan_step_s,
                "updates_per_s": batch / scan_step_s,
            }
            rows.append(row)
            if progress is not None:
                progress(row)
    return rows


__all__ = [
    "BELIEFS",
    "ENCODERS",
    "bench_beliefs",
    "bench_encoders",
    "encoder_configs",
]
