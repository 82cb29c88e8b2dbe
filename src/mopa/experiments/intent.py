"""The hidden-intent experiment (the research's Exp 6, issue I5) as one command:
``mopa reproduce intent`` (or ``mopa experiment intent``).

The prey of ``tag_intent`` secretly heads for one of four corners each episode.
Stages (each reused when re-run with the same config, see
:mod:`mopa.experiments.stages`):

1. ``train_unaware``, ``train_oracle``, ``train_belief``: MAPPO co-training of the
   three predator conditions, each with its own prey (presets
   ``exp6_mappo_*``); an interrupted stage resumes its run.
2. ``encoders``: a dataset of the oracle-condition prey against the oracle
   predators, then the supervised prefix classifier (belief (a), temperature
   fitted on held-out prefixes), the JEPA with its arrival readout (belief (b);
   its temperature is fitted against the corner nearest each held-out
   trajectory's arrival, so no intent label is used) and the behaviour clone
   ``pi(a | s, z)`` of the prey (for the Bayes belief of ``bc_belief_planner``).
3. ``calibration``: accuracy and expected calibration error by step, and the
   reliability diagram, of the online beliefs on held-out trajectories.
4. ``eval_paired`` and ``eval_common``: the evaluation conditions (see
   :data:`CONDITIONS`) under the paired protocol (each condition against the prey
   co-trained with its predators: unaware vs the unaware-condition prey; oracle,
   its random-corner and hard-inference variants vs the oracle-condition prey;
   the belief predator and the planners vs the belief-condition prey; as the
   research does) and the common-opponent protocol (every condition against the
   prey of all three training conditions, every seed). Each protocol is played by
   :func:`~mopa.eval.tournament.play_tournament` (3 jitted calls for the paired
   protocol, one per prey; 1 for the common one).
5. ``gif``: one episode of the belief planner against its prey, recorded.

``results.json`` holds exactly the issue's schema; the report step
(:mod:`mopa.report.intent_report`) adds ``results.md``, the plots, the GIF,
``report.html`` and ``details.json`` (per-seed and per-prey numbers, the
encoders' figures, the calibration of every belief source). Conditions not built
(``mcts_planner``, ``wm_ssm_planner``, ``wm_jepa_planner``) are left out of
``conditions`` and listed as missing in ``results.md``; ``wm_rmse_5step`` holds
``null`` for the world models.

Conditions: ``unaware`` (the unaware predators); ``oracle`` (the oracle predators
fed the true corner); ``oracle_random_intent`` (fed a corner drawn per episode);
``hard_inference`` (the oracle predators fed the one-hot argmax of the online
classifier belief, committed after ``commit_step`` positions; the running argmax
before); ``belief_reactive`` (the belief predators fed the online classifier
belief, updated every step); the planners (the joint lookahead of
:func:`_planner`, the belief predators as their policy after the root):
``belief_planner`` (classifier belief, the prey's own policy sampled under intents
drawn from it), ``flat_belief_planner`` (uniform belief), ``jepa_belief_planner``
(the JEPA belief) and ``bc_belief_planner`` (the Bayes belief of the behaviour
clone, and the clone as the rollout opponent: no access to the true prey).

In the common-opponent protocol the planners keep the prey model they plan with
(the belief-condition prey of their seed, or the behaviour clone): a planner does
not know which prey it faces.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from mopa.algos.driver import Progress, run_training
from mopa.algos.presets import preset
from mopa.core.checkpoint import read_msgpack, read_policy_file, write_msgpack
from mopa.core.files import write_json
from mopa.core.runinfo import run_metadata
from mopa.envs import make
from mopa.envs.pursuit import INTENT_CORNERS, NUM_ACTIONS, PREDATOR, PREY
from mopa.errors import InvalidParameterError
from mopa.eval.tournament import TournamentEntry, broadcast_seeds, play_tournament
from mopa.experiments.intent_players import (
    FEEDS,
    IntentPredator,
    IntentPredatorParams,
    PreyModel,
    classifier_logits_fn,
    jepa_logits_fn,
)
from mopa.experiments.registry import register_experiment
from mopa.opponent import bc as bc_lib
from mopa.opponent.beliefs import (
    bayes_beliefs,
    fit_readout_temperature,
    prefix_beliefs,
)
from mopa.opponent.calibration import (
    accuracy_by_step,
    ece_by_step,
    fit_temperature,
    reliability_diagram,
)
from mopa.opponent.data import (
    concatenate,
    generate,
    load_dataset,
    save_dataset,
    split,
)
from mopa.opponent.encoders import (
    ClassifierConfig,
    JEPAConfig,
    load_encoder,
    make_jepa_data,
    make_prefix_data,
    make_train,
    predict_arrival,
    save_encoder,
)
from mopa.planning import (
    IntentConditionedModel,
    IntentModelParams,
    LookaheadConfig,
    LookaheadParams,
    LookaheadPlayer,
    PolicyOpponentModel,
)
from mopa.players import PolicyPlayer, act_all, initial_player_carry
from mopa.policy import PolicySpec

TRAIN_CONDITIONS = ("unaware", "oracle", "belief")
"""Training conditions (presets ``exp6_mappo_<condition>``)."""

CONDITIONS = (
    "unaware",
    "oracle",
    "oracle_random_intent",
    "belief_reactive",
    "hard_inference",
    "belief_planner",
    "flat_belief_planner",
    "jepa_belief_planner",
    "bc_belief_planner",
)
"""Evaluation conditions mopa builds, in table order."""

MISSING_CONDITIONS = ("mcts_planner", "wm_ssm_planner", "wm_jepa_planner")
"""Conditions of the issue not built yet (left out of ``conditions``)."""

PAIRED_PREY = {
    "unaware": "unaware",
    "oracle": "oracle",
    "oracle_random_intent": "oracle",
    "hard_inference": "oracle",
    "belief_reactive": "belief",
    "belief_planner": "belief",
    "flat_belief_planner": "belief",
    "jepa_belief_planner": "belief",
    "bc_belief_planner": "belief",
}
"""The training condition whose prey each evaluation condition meets in the
paired protocol (the research's pairing, ``intent.md``)."""

RESEARCH = {
    "unaware": 2.68,
    "oracle": 4.05,
    "oracle_random_intent": 1.42,
    "belief_reactive": 2.82,
    "hard_inference": 2.56,
    "belief_planner": 4.31,
    "flat_belief_planner": 3.07,
    "jepa_belief_planner": 4.08,
}
"""Captures per episode in the research's Exp 6 write-up."""

RERUNS = {
    "rerun 1": {
        "unaware": 3.17,
        "oracle": 4.23,
        "oracle_random_intent": 1.40,
        "belief_reactive": 2.72,
        "hard_inference": 2.66,
        "belief_planner": 4.71,
        "flat_belief_planner": 3.41,
    },
    "rerun 2 (partitionable threefry)": {
        "unaware": 2.77,
        "oracle": 3.80,
        "oracle_random_intent": 1.45,
        "belief_reactive": 2.75,
        "hard_inference": 2.45,
        "belief_planner": 4.05,
        "flat_belief_planner": 3.41,
    },
}
"""The research pipeline rerun on this project's 2-core machine (``intent.md``)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class IntentConfig:
    """Sizes of every stage of the hidden-intent experiment."""

    num_seeds: int = 3
    """Training seeds per condition (the evaluation plays every seed)."""
    seed: int = 0
    """Base random seed of every stage."""
    train_steps: int = 2_000_000
    """Environment steps per seed of each training condition."""
    train_envs: int = 32
    """Games per seed played in parallel while training."""
    train_rollout: int = 128
    """Steps per game per MAPPO update."""
    train_chunks: int = 20
    """Jitted chunks per training run (progress and resumption points)."""
    data_episodes_per_seed: int = 150
    """Encoder dataset: episodes of each oracle-condition seed."""
    grid_size: int = 8
    """Occupancy cells per axis of the encoders' input."""
    classifier_updates: int = 3000
    """Adam updates of the prefix classifier."""
    jepa_updates: int = 3000
    """Adam updates of the JEPA."""
    jepa_target_length: int = 5
    """Steps in the JEPA's target window."""
    bc_epochs: int = 20
    """Passes of the behaviour clone over its data."""
    min_belief_steps: int = 1
    """The prefix beliefs stay uniform until this many positions are seen."""
    commit_step: int = 8
    """``hard_inference`` commits to the argmax after this many steps."""
    bayes_epsilon: float = 0.05
    """Uniform mixing of the Bayes likelihood (the prey plays greedily)."""
    eval_episodes: int = 100
    """Episodes per seed of every condition (both protocols)."""
    planner_rollouts: int = 8
    """Rollouts per candidate joint action."""
    planner_horizon: int = 5
    """Steps per rollout."""
    planner_gamma: float = 0.95
    """Discount inside rollouts."""
    distance_weight: float = 1.0
    """Weight of the imagined prey's distance to the nearest predator at the
    horizon (subtracted from the discounted captures)."""
    calibration_bins: int = 10
    """Confidence bins of the ECE and the reliability diagram."""
    gif_size: int = 320
    """Side of the GIF's frames in pixels."""

    def __post_init__(self):
        for name in (
            "num_seeds", "train_steps", "train_envs", "train_rollout",
            "train_chunks", "data_episodes_per_seed", "grid_size",
            "classifier_updates", "jepa_updates", "jepa_target_length",
            "bc_epochs", "min_belief_steps", "commit_step", "eval_episodes",
            "planner_rollouts", "planner_horizon", "calibration_bins",
        ):  # fmt: skip
            if getattr(self, name) < 1:
                raise InvalidParameterError(
                    f"{name} must be >= 1, got {getattr(self, name)}"
                )
        if not 0.0 < self.planner_gamma <= 1.0:
            raise InvalidParameterError(
                f"planner_gamma must be in (0, 1], got {self.planner_gamma}"
            )
        if not 0.0 <= self.bayes_epsilon < 1.0:
            raise InvalidParameterError(
                f"bayes_epsilon must be in [0, 1), got {self.bayes_epsilon}"
            )
        if self.data_episodes_per_seed < 8:
            raise InvalidParameterError(
                "data_episodes_per_seed must be >= 8 (train, validation and test "
                f"splits of four intents), got {self.data_episodes_per_seed}"
            )


PROFILES = {
    "default": IntentConfig(),
    "quick": IntentConfig(
        num_seeds=1,
        train_steps=16_384,
        train_envs=16,
        train_rollout=64,
        train_chunks=2,
        data_episodes_per_seed=48,
        classifier_updates=100,
        jepa_updates=100,
        bc_epochs=2,
        eval_episodes=6,
        planner_rollouts=2,
        planner_horizon=2,
        gif_size=128,
    ),
}
"""Profiles of ``mopa reproduce intent``: ``default`` (the issue's sizes) and
``quick`` (tiny budgets: checks the pipeline, not the numbers)."""


# -- the game and the trained teams -----------------------------------------------
def intent_game() -> tuple[Any, Any]:
    """``tag_intent`` with the intent input on the predators' observation (the
    true one-hot unless a player replaces it)."""
    return make("tag_intent", predator_intent_obs=True)


def train_config(config: IntentConfig, condition: str, num_seeds: int):
    """The MAPPO config of one training condition at ``config``'s budget."""
    return preset(f"exp6_mappo_{condition}").replace(
        num_seeds=num_seeds,
        seed=config.seed,
        total_steps=config.train_steps,
        num_envs=config.train_envs,
        num_steps=config.train_rollout,
        num_chunks=config.train_chunks,
    )


def _train(train_cfg, folder: Path, name: str, progress: Callable[[str], None]) -> dict:
    run = folder / "run"
    if (run / "summary.json").is_file():  # finished, but the stage was not stored
        summary = json.loads((run / "summary.json").read_text())
    else:

        def report(p: Progress) -> None:
            captures = p.recent.get("captures_per_episode", float("nan"))
            progress(
                f"[{name}] chunk {p.chunk}/{p.num_chunks}  "
                f"{p.env_steps:,}/{p.total_env_steps:,} steps  "
                f"{p.chunk_steps_per_s:,.0f} steps/s  captures/ep {captures:.2f}"
            )

        summary = run_training(train_cfg, out=run, progress=report).summary
    captures = summary["final"].get("captures_per_episode", {})
    return {"final_captures_per_episode": captures.get("mean"), "run": "run"}


def _teams(folder: Path) -> dict[str, tuple[PolicySpec, Any]]:
    return read_policy_file(folder / "run").teams


# -- encoders ----------------------------------------------------------------------
def classifier_config(config: IntentConfig) -> ClassifierConfig:
    return ClassifierConfig(
        input_size=config.grid_size**2,
        num_classes=len(INTENT_CORNERS),
        num_updates=config.classifier_updates,
    )


def jepa_config(config: IntentConfig) -> JEPAConfig:
    return JEPAConfig(input_size=config.grid_size**2, num_updates=config.jepa_updates)


def bc_config(config: IntentConfig) -> bc_lib.BCConfig:
    return bc_lib.BCConfig(num_actions=NUM_ACTIONS, num_epochs=config.bc_epochs)


def _splits(dataset, seed: int):
    """``(fit, validation, test)`` chains, stratified by intent."""
    rest, test = split(dataset, 0.25, seed, stratify="intent")
    fit, validation = split(rest, 0.2, seed + 1, stratify="intent")
    return fit, validation, test


def _positions_labels(dataset) -> tuple[np.ndarray, np.ndarray]:
    """The prey's ``[M, T, 2]`` positions and ``[M]`` intents of every episode."""
    positions = dataset.episodes("pos")[:, :, -1, :]
    return positions, dataset.episode_labels("intent")


def _encoders(config: IntentConfig, oracle_folder: Path, folder: Path) -> dict:
    env, params = intent_game()
    teams = _teams(oracle_folder)
    (pred_spec, pred_params), (prey_spec, prey_params) = (
        teams["predator"],
        teams["prey"],
    )
    players = (PolicyPlayer(pred_spec), PolicyPlayer(prey_spec))
    num_seeds = jax.tree.leaves(pred_params)[0].shape[0]
    key = jax.random.key(config.seed)
    parts = []
    for s in range(num_seeds):
        seed_params = jax.tree.map(lambda x, s=s: x[s], (pred_params, prey_params))
        parts.append(
            generate(
                env,
                params,
                players,
                seed_params,
                jax.random.fold_in(key, s),
                num_chains=config.data_episodes_per_seed,
                seed_index=s,
            )
        )
    dataset = concatenate(parts)
    save_dataset(folder / "dataset.npz", dataset)
    fit, validation, test = _splits(dataset, config.seed)
    K = len(INTENT_CORNERS)
    corners = INTENT_CORNERS * float(params.intent_corner)
    key_classifier, key_jepa, key_bc = jax.random.split(jax.random.fold_in(key, 99), 3)
    lengths = tuple(range(1, fit.horizon + 1))

    # (a) supervised prefix classifier, temperature on validation prefixes.
    positions, labels = _positions_labels(fit)
    c_config = classifier_config(config)
    data = make_prefix_data(
        positions, labels, grid_size=config.grid_size, prefix_lengths=lengths
    )
    c_params, c_metrics = jax.jit(make_train(c_config))(key_classifier, data)
    v_positions, v_labels = _positions_labels(validation)
    v_data = make_prefix_data(
        v_positions, v_labels, grid_size=config.grid_size, prefix_lengths=lengths
    )
    v_logits = c_config.module().apply(c_params, v_data.x)
    c_temperature = fit_temperature(v_logits, v_data.labels)
    save_encoder(
        folder / "classifier.msgpack",
        c_config,
        c_params,
        metadata={"temperature": c_temperature},
    )

    # (b) JEPA with an arrival readout; no intent labels anywhere: the temperature
    # is fitted against the corner nearest each trajectory's observed arrival.
    j_config = jepa_config(config)
    j_data = make_jepa_data(
        positions,
        grid_size=config.grid_size,
        cuts=tuple(range(1, fit.horizon)),
        target_length=config.jepa_target_length,
    )
    j_params, j_metrics = jax.jit(make_train(j_config))(key_jepa, j_data)
    arrival = predict_arrival(j_config, j_params, v_data.x)
    nearest = np.argmin(
        ((v_positions[:, -1, None, :] - corners[None]) ** 2).sum(-1), -1
    )
    pseudo_labels = np.repeat(nearest, len(lengths))
    j_temperature = fit_readout_temperature(arrival, corners, pseudo_labels)
    save_encoder(
        folder / "jepa.msgpack",
        j_config,
        j_params,
        metadata={"temperature": j_temperature},
    )

    # The behaviour clone pi(a | s, z) of the prey, z the intent one-hot.
    b_config = bc_config(config)
    obs = fit.episodes("obs.prey")[:, :, 0, :]  # [M, T, D]
    actions = fit.episodes("actions.prey")[:, :, 0]  # [M, T]
    z = np.repeat(np.eye(K)[labels][:, None, :], fit.horizon, 1)
    b_params, b_metrics = jax.jit(bc_lib.make_train(b_config))(
        key_bc,
        jnp.asarray(obs[..., :-K].reshape(-1, obs.shape[-1] - K)),
        jnp.asarray(actions.reshape(-1)),
        jnp.asarray(z.reshape(-1, K)),
    )
    write_msgpack(
        folder / "bc.msgpack",
        {"format": "mopa-intent-bc", "version": 1, "params": jax.device_get(b_params)},
    )
    t_obs = test.episodes("obs.prey")[:, :, 0, :]
    t_actions = test.episodes("actions.prey")[:, :, 0]
    t_z = np.repeat(
        np.eye(K)[test.episode_labels("intent")][:, None, :], test.horizon, 1
    )
    match = bc_lib.action_match(
        b_config,
        b_params,
        jnp.asarray(t_obs[..., :-K].reshape(-1, obs.shape[-1] - K)),
        jnp.asarray(t_actions.reshape(-1)),
        jnp.asarray(t_z.reshape(-1, K)),
    )
    return {
        "num_episodes": {
            "fit": fit.num_episodes,
            "validation": validation.num_episodes,
            "test": test.num_episodes,
        },
        "classifier_temperature": float(c_temperature),
        "classifier_final_loss": float(np.asarray(c_metrics["loss"])[-1]),
        "jepa_temperature": float(j_temperature),
        "jepa_final_loss": float(np.asarray(j_metrics["loss"])[-1]),
        "bc_final_loss": float(np.asarray(b_metrics.loss)[-1]),
        "bc_test_action_match": float(match),
    }


def _load_encoders(folder: Path):
    c_config, c_params = load_encoder(folder / "classifier.msgpack")
    j_config, j_params = load_encoder(folder / "jepa.msgpack")
    bc_params = jax.tree.map(
        jnp.asarray,
        read_msgpack(folder / "bc.msgpack", "mopa-intent-bc", noun="clone")["params"],
    )
    return (c_config, c_params), (j_config, j_params), bc_params


# -- calibration -------------------------------------------------------------------
def _calibration(
    config: IntentConfig, encoders: dict, encoder_folder: Path, folder: Path
) -> dict:
    env, params = intent_game()
    K = len(INTENT_CORNERS)
    dataset = load_dataset(encoder_folder / "dataset.npz")
    _, _, test = _splits(dataset, config.seed)
    positions, labels = _positions_labels(test)
    (c_config, c_params), (j_config, j_params), bc_params = _load_encoders(
        encoder_folder
    )
    corners = jnp.asarray(INTENT_CORNERS) * params.intent_corner
    sources = {
        "classifier": (
            classifier_logits_fn(c_config, c_params, config.grid_size),
            encoders["classifier_temperature"],
        ),
        "jepa": (
            jepa_logits_fn(j_config, j_params, config.grid_size, corners),
            encoders["jepa_temperature"],
        ),
    }
    beliefs = {
        name: jax.jit(
            jax.vmap(
                lambda trajectory, fn=fn, t=t: prefix_beliefs(
                    fn, trajectory, K, t, config.min_belief_steps
                )
            )
        )(jnp.asarray(positions))
        for name, (fn, t) in sources.items()
    }
    # Bayes from the clone: the belief at step t has seen the actions before t.
    clone = bc_lib.bc_log_probs_fn(bc_config(config), bc_params, K)
    obs = jnp.asarray(test.episodes("obs.prey")[:, :, 0, :])
    actions = jnp.asarray(test.episodes("actions.prey")[:, :, 0])
    after = jax.jit(
        jax.vmap(lambda o, a: bayes_beliefs(clone, o, a, K, config.bayes_epsilon))
    )(obs, actions)
    uniform = jnp.full((after.shape[0], 1, K), 1.0 / K)
    beliefs["bc_bayes"] = jnp.concatenate([uniform, after[:, :-1]], 1)
    out: dict[str, Any] = {"num_episodes": int(len(labels))}
    labels = jnp.asarray(labels)
    for name, belief in beliefs.items():
        diagram = reliability_diagram(
            belief.reshape(-1, K),
            jnp.repeat(labels, belief.shape[1]),
            config.calibration_bins,
        )
        out[name] = {
            "accuracy_by_step": np.asarray(accuracy_by_step(belief, labels)).tolist(),
            "ece_by_step": np.asarray(
                ece_by_step(belief, labels, config.calibration_bins)
            ).tolist(),
            "reliability": {
                "confidence": _nan_to_none(diagram.confidence),
                "accuracy": _nan_to_none(diagram.accuracy),
                "count": np.asarray(diagram.count).tolist(),
            },
        }
    write_json(folder / "calibration.json", out)
    return out


def _nan_to_none(values) -> list:
    return [None if not math.isfinite(v) else float(v) for v in np.asarray(values)]


# -- evaluation --------------------------------------------------------------------
def _captures_reward(state, rewards, info) -> jax.Array:
    """The planner's per-step reward: captures (predator-prey overlaps)."""
    del state, rewards
    return jnp.asarray(info["captures"], jnp.float32)


def _prey_distance_leaf(params, state, obs) -> jax.Array:
    """Minus the imagined prey's distance to the nearest predator."""
    del params, obs
    P = state.pos.shape[0] - 1
    gap = state.pos[:P] - state.pos[P]
    return -jnp.min(jnp.sqrt(jnp.sum(gap * gap, -1)))


def _planner(config, env, own_spec, opponent_spec) -> LookaheadPlayer:
    K = env.num_intents
    lookahead = LookaheadConfig(
        num_rollouts=config.planner_rollouts,
        horizon=config.planner_horizon,
        gamma=config.planner_gamma,
        mode="joint",
        leaf_weight=config.distance_weight
        / config.planner_gamma**config.planner_horizon,
    )
    model = IntentConditionedModel(PolicyOpponentModel(opponent_spec, team=PREY), K)
    return LookaheadPlayer(
        env=env,
        team=PREDATOR,
        config=lookahead,
        opponent_model=model,
        own_spec=own_spec,
        reward_fn=_captures_reward,
        leaf_fn=_prey_distance_leaf,
    )


def build_entries(config: IntentConfig, teams: dict, encoder_folder: Path) -> dict:
    """Every evaluation condition as a tournament entry, and the prey entries.

    Returns:
        ``{"predators": {NAME: TournamentEntry}, "prey": {CONDITION:
        TournamentEntry}}``.
    """
    env, params = intent_game()
    K = env.num_intents
    (c_config, c_params), (j_config, j_params), bc_params = _load_encoders(
        encoder_folder
    )
    encoders = json.loads((encoder_folder / "stage.json").read_text())["result"]
    b_config = bc_config(config)
    prey_spec = teams["belief"]["prey"][0]
    clone_spec = bc_lib.bc_policy_spec(b_config, prey_spec.obs_size - K, K)
    unaware_spec, unaware_params = teams["unaware"]["predator"]
    oracle_spec, oracle_params = teams["oracle"]["predator"]
    belief_spec, belief_params = teams["belief"]["predator"]
    S = jax.tree.leaves(oracle_params)[0].shape[0]
    common = dict(
        classifier=c_config,
        jepa=j_config,
        grid_size=config.grid_size,
        min_steps=config.min_belief_steps,
        commit_step=config.commit_step,
        bayes_epsilon=config.bayes_epsilon,
    )
    unaware = IntentPredator(env, unaware_spec, feed_none=True, **common)
    reactive = IntentPredator(env, oracle_spec, sources=("classifier",), **common)
    true_planner = IntentPredator(
        env,
        belief_spec,
        sources=("classifier", "jepa", "flat"),
        planner=_planner(config, env, belief_spec, prey_spec),
        **common,
    )
    clone_planner = IntentPredator(
        env,
        belief_spec,
        sources=("bayes",),
        planner=_planner(config, env, belief_spec, clone_spec),
        prey_model=PreyModel(clone_spec),
        **common,
    )
    uniform = jnp.full((K,), 1.0 / K)

    def entry_params(policy_params, source, feed, planner_opponent=None):
        shared = broadcast_seeds(
            dict(
                env_params=params,
                classifier_params=c_params,
                classifier_temperature=jnp.float32(encoders["classifier_temperature"]),
                jepa_params=j_params,
                jepa_temperature=jnp.float32(encoders["jepa_temperature"]),
                bayes_params=bc_params,
                source=jnp.int32(source),
                feed=jnp.int32(FEEDS.index(feed)),
            ),
            S,
        )
        planner_params: Any = ()
        if planner_opponent is not None:
            planner_params = LookaheadParams(
                env_params=shared["env_params"],
                own_params=policy_params,
                opponent_params=IntentModelParams(
                    policy_params=planner_opponent, belief=broadcast_seeds(uniform, S)
                ),
            )
        return IntentPredatorParams(
            policy_params=policy_params, planner_params=planner_params, **shared
        )

    prey_belief = teams["belief"]["prey"][1]
    clone = broadcast_seeds(bc_params, S)
    predators = {
        "unaware": (unaware, entry_params(unaware_params, 0, "none")),
        "oracle": (reactive, entry_params(oracle_params, 0, "true")),
        "oracle_random_intent": (reactive, entry_params(oracle_params, 0, "random")),
        "hard_inference": (reactive, entry_params(oracle_params, 0, "commit")),
        "belief_reactive": (reactive, entry_params(belief_params, 0, "belief")),
        "belief_planner": (
            true_planner,
            entry_params(belief_params, 0, "belief", prey_belief),
        ),
        "flat_belief_planner": (
            true_planner,
            entry_params(belief_params, 2, "belief", prey_belief),
        ),
        "jepa_belief_planner": (
            true_planner,
            entry_params(belief_params, 1, "belief", prey_belief),
        ),
        "bc_belief_planner": (
            clone_planner,
            entry_params(belief_params, 0, "belief", clone),
        ),
    }
    prey = {
        condition: TournamentEntry(
            f"prey_{condition}",
            PolicyPlayer(teams[condition]["prey"][0]),
            teams[condition]["prey"][1],
        )
        for condition in TRAIN_CONDITIONS
    }
    return {
        "predators": {
            name: TournamentEntry(name, player, entry_params)
            for name, (player, entry_params) in predators.items()
        },
        "prey": prey,
    }


def _stats(values: np.ndarray, num_seeds: int) -> dict:
    values = np.asarray(values, np.float64).reshape(-1)
    n = values.size
    mean = float(values.mean())
    half = float(1.96 * values.std(ddof=1) / np.sqrt(n)) if n > 1 else 0.0
    return {
        "mean": mean,
        "ci95": [mean - half, mean + half],
        "n_episodes": int(n),
        "n_seeds": int(num_seeds),
    }


def _eval_paired(config, teams, encoder_folder, folder, progress) -> dict:
    env, params = intent_game()
    entries = build_entries(config, teams, encoder_folder)
    S = jax.tree.leaves(teams["oracle"]["prey"][1])[0].shape[0]
    conditions, seed_means = {}, {}
    for prey_condition in TRAIN_CONDITIONS:
        rows = [
            entries["predators"][name]
            for name in CONDITIONS
            if PAIRED_PREY[name] == prey_condition
        ]
        progress(
            f"[eval_paired] {', '.join(r.name for r in rows)} vs prey_{prey_condition}"
        )
        result = play_tournament(
            env,
            params,
            rows,
            [entries["prey"][prey_condition]],
            jax.random.fold_in(jax.random.key(config.seed), 7),
            num_episodes=config.eval_episodes,
            pairing="paired",
        )
        captures = result.metric("captures")  # [R, 1, S, N]
        for r, name in enumerate(result.row_names):
            conditions[name] = _stats(captures[r], S)
            seed_means[name] = captures[r, 0].mean(-1).tolist()
    ordered = {name: conditions[name] for name in CONDITIONS}
    write_json(
        folder / "paired.json", {"conditions": ordered, "seed_means": seed_means}
    )
    return {"conditions": ordered, "seed_means": seed_means}


def common_episodes(config: IntentConfig, num_seeds: int) -> int:
    """Episodes per seed pair of the common-opponent protocol, so that a condition
    plays at least ``eval_episodes`` episodes per predator seed over the pool of
    ``3 x num_seeds`` prey."""
    return math.ceil(config.eval_episodes / (len(TRAIN_CONDITIONS) * num_seeds))


def _eval_common(config, teams, encoder_folder, folder, progress) -> dict:
    env, params = intent_game()
    entries = build_entries(config, teams, encoder_folder)
    S = jax.tree.leaves(teams["oracle"]["prey"][1])[0].shape[0]
    progress(f"[eval_common] {len(CONDITIONS)} conditions vs the pool of prey")
    result = play_tournament(
        env,
        params,
        [entries["predators"][name] for name in CONDITIONS],
        [entries["prey"][c] for c in TRAIN_CONDITIONS],
        jax.random.fold_in(jax.random.key(config.seed), 11),
        num_episodes=common_episodes(config, S),
        pairing="all",
    )
    captures = result.metric("captures")  # [R, C, S*S, N]
    conditions = {
        name: _stats(captures[r], S) for r, name in enumerate(result.row_names)
    }
    per_prey = {
        name: {
            prey: float(captures[r, c].mean())
            for c, prey in enumerate(result.column_names)
        }
        for r, name in enumerate(result.row_names)
    }
    write_json(folder / "common.json", {"conditions": conditions, "per_prey": per_prey})
    return {"conditions": conditions, "per_prey": per_prey}


# -- the GIF -----------------------------------------------------------------------
def record_episode(env, params, players, player_params, key, horizon: int):
    """One episode's states ``[T]`` (the state each action was taken in) and the
    first team's carry ``[T, A, H]`` after acting in it (it holds the belief the
    action used)."""

    @jax.jit
    def play(player_params, key):
        key_reset, key_run = jax.random.split(key)
        obs, state = env.reset(key_reset, params)
        carries = tuple(initial_player_carry(p) for p in players)

        def step(carry, key):
            obs, state, carries, first = carry
            key_env, actions, carries = act_all(
                players, player_params, key, state, obs, carries, first
            )
            obs_next, state_next, *_ = env.step(key_env, state, actions, params)
            record = (state, carries[0])
            return (obs_next, state_next, carries, jnp.zeros((), bool)), record

        init = (obs, state, carries, jnp.ones((), bool))
        _, (states, carry0) = jax.lax.scan(
            step, init, jax.random.split(key_run, horizon)
        )
        return states, carry0

    return play(player_params, key)


def _gif(config, teams, encoder_folder, folder) -> dict:
    from mopa.report.render import render_episode, save_gif

    env, params = intent_game()
    entries = build_entries(config, teams, encoder_folder)
    planner = entries["predators"]["belief_planner"]
    prey = entries["prey"]["belief"]
    first = lambda tree: jax.tree.map(lambda x: x[0], tree)  # noqa: E731
    states, carries = record_episode(
        env,
        params,
        (planner.player, prey.player),
        (first(planner.params), first(prey.params)),
        jax.random.fold_in(jax.random.key(config.seed), 13),
        int(params.max_steps),
    )
    beliefs = np.stack(
        [np.asarray(planner.player.unpack(row[0]).belief) for row in carries]
    )
    corners = INTENT_CORNERS * float(params.intent_corner)
    heading = beliefs @ corners  # the belief-weighted corner
    frames = render_episode(
        env,
        states,
        params,
        beliefs=beliefs,
        predictions=heading,
        size=config.gif_size,
        title="belief planner",
    )
    save_gif(folder / "belief_planner.gif", frames, fps=4)
    return {"frames": len(frames), "gif": "belief_planner.gif"}


# -- the whole run -----------------------------------------------------------------
def run_intent(config: IntentConfig, seeds: int | None, progress, stages) -> dict:
    """Run every stage (see the module docstring); returns ``results.json``."""
    num_seeds = config.num_seeds if seeds is None else seeds
    config = dataclasses.replace(config, num_seeds=num_seeds)
    train_configs = {
        c: train_config(config, c, num_seeds).to_dict() for c in TRAIN_CONDITIONS
    }
    teams = {}
    for condition in TRAIN_CONDITIONS:
        name = f"train_{condition}"
        cfg = train_config(config, condition, num_seeds)
        stages.run(
            name,
            train_configs[condition],
            lambda folder, cfg=cfg, name=name: _train(cfg, folder, name, progress),
        )
        teams[condition] = _teams(stages.folder(name))
    stage_config = dataclasses.asdict(config)
    encoder_config = {"train": train_configs["oracle"], "config": stage_config}
    encoder_folder = stages.folder("encoders")
    encoders = stages.run(
        "encoders",
        encoder_config,
        lambda folder: _encoders(config, stages.folder("train_oracle"), folder),
    )
    calibration = stages.run(
        "calibration",
        {"encoders": encoder_config, "encoder_result": encoders},
        lambda folder: _calibration(config, encoders, encoder_folder, folder),
    )
    eval_config = {
        "train": train_configs,
        "encoders": encoder_config,
        "encoder_result": encoders,
    }
    paired = stages.run(
        "eval_paired",
        eval_config,
        lambda folder: _eval_paired(config, teams, encoder_folder, folder, progress),
    )
    common = stages.run(
        "eval_common",
        eval_config,
        lambda folder: _eval_common(config, teams, encoder_folder, folder, progress),
    )
    stages.run(
        "gif",
        eval_config,
        lambda folder: _gif(config, teams, encoder_folder, folder),
    )
    meta = run_metadata({})
    online = calibration["classifier"]
    return {
        "profile": _profile_name(config),
        "conditions": paired["conditions"],
        "conditions_common_opponent": common["conditions"],
        "belief_accuracy_by_step": online["accuracy_by_step"],
        "ece_by_step": online["ece_by_step"],
        "wm_rmse_5step": {"ssm": None, "jepa": None},
        "timing_s": dict(stages.timing_s),
        "versions": meta["versions"],
        "git_sha": meta["git_sha"] or "unknown",
    }


def _profile_name(config: IntentConfig) -> str:
    for name, profile in PROFILES.items():
        if dataclasses.replace(profile, num_seeds=config.num_seeds) == config:
            return name
    return "custom"


def _markdown(results: dict) -> str:
    from mopa.report.intent_report import results_markdown

    return results_markdown(results, RESEARCH, RERUNS, MISSING_CONDITIONS)


def _plots(results: dict, out: Path) -> list[Path]:
    from mopa.report.intent_report import write_report

    return write_report(results, Path(out), RESEARCH, RERUNS, MISSING_CONDITIONS)


register_experiment(
    "intent",
    run_intent,
    PROFILES,
    "default",
    plot_fn=_plots,
    description="Exp 6: infer the prey's hidden corner and plan against the belief",
    markdown_fn=_markdown,
)
