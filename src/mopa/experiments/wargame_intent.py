"""Opponent modelling in the wargame (issue W7, item 4) as one command:
``mopa experiment wargame_intent``.

Red's strategy is drawn per episode from the family
(:data:`~mopa.envs.scripted_red.STRATEGIES`: rush, flank left, flank right,
stand-off, hold, feint; each shows itself in its opening moves and calls for its
own plan) and hidden from Blue (``battalion_vs_red`` with ``red="mixed"``,
discrete actions). Three Blues meet the family:

* ``blind``: MAPPO on Blue's 17 observations only: the aware Blue's network with
  its belief slot held at the flat ``1 / K`` (a constant input), so both Blues
  train in one program vmapped over the two Blues and their seeds;
* ``aware``: MAPPO on Blue's observations plus a belief over Red's strategy,
  trained as the hidden-intent predators are (Exp 6) on soft beliefs of random
  sharpness (:class:`~mopa.opponent.soft_belief_game.SoftBeliefGame`) and
  evaluated with the online posterior of a classifier over prefixes of Blue's own
  observations (:mod:`mopa.opponent.battalion_belief`): the type never reaches it;
* ``oracle``: the aware Blue fed the true type's one-hot (a reference).

Both trained Blues get the same budget and the same critic (the game's global
state and the true type's one-hot, training-time information only), and share a
warm start: for the first ``warm_start`` of the updates both see the flat belief
(the same program, inputs and keys, so the same parameters).

The scripts are deterministic given the state, but Blue never sees all of it, so
the belief is a learned classifier (``belief`` stage): the aware Blue plays with
``decoy`` beliefs (:mod:`mopa.planning.battalion_blue`: its moves then say
nothing about Red's type), every ``belief_stride`` steps Blue's features are
recorded, and the classifier is fitted on every prefix of those rows
(:func:`~mopa.opponent.battalion_belief.fit_row_classifier`).

A second pair of Blues plans instead of learning (``plan_belief`` and
``plan_evaluate``): every step it plays the scripted plan with the highest
expected win rate under its belief (the ``family_probe``'s win-rate table,
:func:`~mopa.planning.battalion_blue.probe_family`); the blind planner plays the
best single plan, the aware one the online belief of its own classifier.

Stages (reused when re-run with the same config, :mod:`mopa.core.stages`):
``train``, ``belief``, ``evaluate``, ``family_probe``, ``plan_belief`` and
``plan_evaluate``. Every condition plays the same episodes (the same keys: the
same terrain, start and Red type). Win, draw and loss come from the game's end
signals; win rates carry Wilson 95% intervals over all episodes, the per-seed
rates beside them (:func:`~mopa.eval.protocol.outcome_tables`).
"""

from __future__ import annotations

import dataclasses
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from mopa.algos.mappo.config import MAPPOConfig
from mopa.core.checks import check_fields, check_fraction
from mopa.errors import InvalidParameterError
from mopa.eval.protocol import outcome_tables, win_difference
from mopa.opponent.battalion_belief import (
    MOTION_FEATURES,
    NUM_FEATURES,
    fit_row_classifier,
    load_row_classifier,
    rows_seen,
    save_row_classifier,
)
from mopa.opponent.calibration import calibration_by_row
from mopa.opponent.encoders import ClassifierConfig
from mopa.opponent.encoders import init_params as init_classifier
from mopa.planning.battalion_blue import (
    FAMILY,
    PROBE_PLANS,
    BlueBeliefConfig,
    choose_plan,
    episode_keys,
    load_blue,
    make_plan_play,
    make_play,
    play_seeds,
    probe_family,
    save_blue,
    train_belief_blues,
)
from mopa.policy import PolicySpec
from mopa.report import wargame_report
from mopa.report.wargame_report import CONDITIONS, PLANNERS
from mopa.runs.registry import register_experiment

NUM_TYPES = len(FAMILY)
"""``K``: the strategies in :data:`FAMILY`."""
TRAINED = ("blind", "aware")
"""The trained Blues (same budget)."""
BELIEF_INPUT_VERSION = 3
"""Version of the classifier's input (:func:`classifier_input`), part of the
config of every stage that fits or uses a classifier."""
RED_FAMILY_VERSION = 2
"""Version of the family's scripts (:mod:`mopa.envs.scripted_red`), part of every
stage's config so that finished stages of an older family are not reused."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class WargameIntentConfig:
    """Sizes of every stage of the wargame opponent-modelling experiment."""

    num_seeds: int = 3
    """Training seeds per trained Blue (the evaluation plays every seed)."""
    seed: int = 0
    """Base random seed of every stage."""
    train_steps: int = 1_572_864
    """Environment steps per seed of each trained Blue (the same for both)."""
    train_envs: int = 32
    """Games per seed played in parallel while training."""
    train_rollout: int = 64
    """Steps per game per MAPPO update."""
    train_chunks: int = 8
    """Jitted chunks per training run (progress points)."""
    hidden: tuple[int, ...] = (64, 64)
    """Widths of the actor's and the critic's hidden layers."""
    lr: float = 1e-3
    """MAPPO learning rate."""
    ent_coef: float = 0.01
    """MAPPO entropy bonus."""
    warm_start: float = 0.5
    """Fraction of the training updates during which the aware Blue, too, sees
    the flat belief: both Blues share this first part of the run (the same
    seeds, so the same parameters), then the aware Blue goes on with soft
    beliefs for the rest of the same budget."""
    alpha_low: float = 0.0
    """Lower end of the per-episode sharpness of the aware Blue's training belief."""
    alpha_high: float = 1.0
    """Upper end of that sharpness."""
    belief_stride: int = 10
    """Steps between the rows the belief reads (one row per ``belief_stride``)."""
    belief_rows: int = 32
    """Rows the belief reads at most (it stops sharpening after
    ``belief_stride * belief_rows`` steps)."""
    data_episodes_per_seed: int = 400
    """Belief data: episodes of each aware seed against the mixed family."""
    classifier_updates: int = 4000
    """Adam updates of the belief classifier."""
    classifier_hidden: tuple[int, ...] = (128, 128)
    """Widths of the belief classifier's hidden layers."""
    eval_episodes: int = 600
    """Episodes per seed of every condition (Red's type drawn uniformly)."""
    greedy: bool = True
    """Blues take their actor's most likely action in evaluation."""
    calibration_bins: int = 10
    """Confidence bins of the ECE."""

    def __post_init__(self):
        check_fields(self)
        object.__setattr__(self, "hidden", tuple(self.hidden))
        object.__setattr__(self, "classifier_hidden", tuple(self.classifier_hidden))
        for name in (
            "num_seeds", "train_steps", "train_envs", "train_rollout",
            "train_chunks", "belief_stride", "belief_rows",
            "data_episodes_per_seed", "classifier_updates", "eval_episodes",
            "calibration_bins",
        ):  # fmt: skip
            if getattr(self, name) < 1:
                raise InvalidParameterError(
                    f"{name} must be >= 1, got {getattr(self, name)}"
                )
        check_fraction("warm_start", self.warm_start)
        if not 0.0 <= self.alpha_low <= self.alpha_high <= 1.0:
            raise InvalidParameterError(
                "alpha_low and alpha_high must satisfy 0 <= alpha_low <= "
                f"alpha_high <= 1, got {self.alpha_low}, {self.alpha_high}"
            )
        if self.data_episodes_per_seed < 8:
            raise InvalidParameterError(
                "data_episodes_per_seed must be >= 8 (fit, validation and test "
                f"episodes), got {self.data_episodes_per_seed}"
            )
        if self.train_steps < self.train_envs * self.train_rollout:
            raise InvalidParameterError(
                f"train_steps ({self.train_steps}) must be at least train_envs x "
                f"train_rollout ({self.train_envs * self.train_rollout})"
            )

    @property
    def belief_input_size(self) -> int:
        """Width of the classifier's input (:func:`classifier_input`): the rows
        and the motion between them, flattened, and the fraction of rows
        observed."""
        return self.belief_rows * (NUM_FEATURES + len(MOTION_FEATURES)) + 1


PROFILES = {
    "default": WargameIntentConfig(),
    "quick": WargameIntentConfig(
        num_seeds=2,
        train_steps=4096,
        train_envs=8,
        train_rollout=64,
        train_chunks=2,
        hidden=(16,),
        belief_stride=25,
        belief_rows=4,
        data_episodes_per_seed=8,
        classifier_updates=20,
        classifier_hidden=(16,),
        eval_episodes=8,
    ),
}
"""``default`` (the reported sizes) and ``quick`` (tiny budgets: checks the
pipeline, not the numbers)."""


# -- the game ------------------------------------------------------------------------
def blue_config(config: WargameIntentConfig) -> BlueBeliefConfig:
    """How the evaluated Blues keep and are fed their belief."""
    return BlueBeliefConfig(
        classifier=classifier_config(config),
        belief_stride=config.belief_stride,
        belief_rows=config.belief_rows,
        alpha_low=config.alpha_low,
        alpha_high=config.alpha_high,
        greedy=config.greedy,
    )


def sharpness_ranges(config: WargameIntentConfig) -> dict[str, tuple[float, float]]:
    """``(alpha_low, alpha_high)`` of each trained Blue's belief: the blind Blue's
    is always flat (sharpness 0), the aware Blue's of random sharpness."""
    return {"blind": (0.0, 0.0), "aware": (config.alpha_low, config.alpha_high)}


# -- training ------------------------------------------------------------------------
def mappo_config(config: WargameIntentConfig, num_seeds: int) -> MAPPOConfig:
    """The MAPPO settings of both trained Blues."""
    return MAPPOConfig(
        algo="mappo",
        env="battalion_vs_red",
        env_overrides=(("red", "mixed"), ("discrete", True)),
        total_steps=config.train_steps,
        num_envs=config.train_envs,
        num_steps=config.train_rollout,
        num_seeds=num_seeds,
        seed=config.seed,
        num_chunks=config.train_chunks,
        hidden=config.hidden,
        lr=config.lr,
        ent_coef=config.ent_coef,
    )


def warm_start_updates(config: WargameIntentConfig, num_updates: int) -> int:
    """Updates the two Blues share (both with the flat belief) before the aware
    Blue's belief turns soft."""
    return int(round(config.warm_start * num_updates))


def train_blues(
    config: WargameIntentConfig,
    num_seeds: int,
    progress: Callable[[str], None],
) -> tuple[PolicySpec, dict[str, Any], dict[str, np.ndarray]]:
    """The blind and the aware Blue, every seed, in one program
    (:func:`~mopa.planning.battalion_blue.train_belief_blues`: the two differ
    only in their belief's sharpness range, :func:`sharpness_ranges`; both see
    the flat belief for the first :func:`warm_start_updates` updates)."""
    mappo = mappo_config(config, num_seeds)
    ranges = sharpness_ranges(config)
    return train_belief_blues(
        mappo,
        {n: ranges[n] for n in TRAINED},
        warm_start_updates(config, mappo.num_updates),
        config.train_chunks,
        progress,
    )


# -- the belief ----------------------------------------------------------------------


def classifier_config(config: WargameIntentConfig) -> ClassifierConfig:
    """The belief classifier: prefix rows (flattened) and the fraction observed
    -> logits over :data:`FAMILY`."""
    return ClassifierConfig(
        input_size=config.belief_input_size,
        num_classes=NUM_TYPES,
        hidden=config.classifier_hidden,
        num_updates=config.classifier_updates,
    )


# -- stages --------------------------------------------------------------------------
def _train_stage(config, num_seeds, progress):
    def fn(folder: Path) -> dict:
        spec, params, curves = train_blues(config, num_seeds, progress)
        result = {}
        for name in TRAINED:
            save_blue(folder / f"{name}.msgpack", spec, params[name])
            returns = curves[name]  # [S, U]
            tail = max(1, returns.shape[1] // 10)
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                result[name] = {
                    "final_return_per_seed": [
                        float(np.nanmean(r[-tail:])) for r in returns
                    ],
                }
        return result

    return fn


def _belief_stage(
    config, source: Callable, num_seeds: int, progress, salt: int = 1, tag="belief"
):
    """The belief stage: ``source() -> (play, stacked actor params)`` plays the
    data episodes (key ``salt``) with decoy beliefs; a classifier is fitted on
    them. ``tag`` prefixes the progress lines."""

    def fn(folder: Path) -> dict:
        play, params = source()
        c_config = classifier_config(config)
        key_init, key_fit = jax.random.split(
            jax.random.fold_in(jax.random.key(config.seed), 2)
        )
        untrained = init_classifier(c_config, key_init)  # the decoy feed ignores it
        keys = episode_keys(config.seed, salt, num_seeds, config.data_episodes_per_seed)
        data = play_seeds(play, params, untrained, 1.0, "decoy", keys)
        rows = data["rows"].reshape(-1, config.belief_rows, NUM_FEATURES)
        labels = data["label"].reshape(-1)
        fitted = fit_row_classifier(
            c_config,
            key_fit,
            rows,
            data["num_rows"].reshape(-1),
            labels,
            seed=config.seed,
            num_bins=config.calibration_bins,
        )
        temperature, heldout = fitted.temperature, fitted.heldout
        save_row_classifier(folder / "classifier.msgpack", fitted)
        shown = heldout["accuracy"][:: max(1, len(heldout["accuracy"]) // 8)]
        progress(
            f"[{tag}] {labels.size} episodes, {fitted.num_prefixes:,} prefixes; "
            f"temperature {temperature:.2f}; held-out accuracy by row "
            + " ".join(f"{a:.2f}" for a in shown)
        )
        return {
            "temperature": temperature,
            "episodes": fitted.episodes,
            "heldout": heldout,
            "type_counts": np.bincount(labels, minlength=NUM_TYPES).tolist(),
        }

    return fn


def _plan_evaluate_stage(config, table, folder_belief: Path, num_seeds, progress):
    def fn(folder: Path) -> dict:
        keys = episode_keys(config.seed, 3, num_seeds, config.eval_episodes)
        c_params, temperature = load_row_classifier(
            folder_belief / "classifier.msgpack"
        )
        stacked = jnp.broadcast_to(
            jnp.asarray(table, jnp.float32), (num_seeds, *np.shape(table))
        )
        play = make_plan_play(blue_config(config))
        feeds = dict(zip(PLANNERS, ("none", "online", "oracle"), strict=True))
        runs = {}
        for name in PLANNERS:
            tick = time.perf_counter()
            runs[name] = play_seeds(
                play, stacked, c_params, temperature, feeds[name], keys
            )
            progress(
                f"[plan_evaluate] {name}: win rate "
                f"{np.mean(runs[name]['outcome'] == 1):.3f} "
                f"({time.perf_counter() - tick:.1f} s)"
            )
        aware = runs["aware_planner"]
        online = calibration_by_row(
            aware["beliefs"].reshape(-1, config.belief_rows, NUM_TYPES),
            rows_seen(aware["num_rows"], config.belief_rows),
            aware["label"].reshape(-1),
            config.calibration_bins,
        )
        summary = outcome_tables(
            runs, PLANNERS, "aware_planner", "blind_planner", FAMILY
        )
        flat = np.full(NUM_TYPES, 1.0 / NUM_TYPES)
        return {
            **summary,
            "oracle_minus_blind": win_difference(
                runs["oracle_planner"]["outcome"], runs["blind_planner"]["outcome"]
            ),
            "blind_plan": list(PROBE_PLANS)[int(choose_plan(jnp.asarray(table), flat))],
            "online_belief": online,
        }

    return fn


def _evaluate_stage(config, folders: dict[str, Path], num_seeds: int, progress):
    def fn(folder: Path) -> dict:
        keys = episode_keys(config.seed, 3, num_seeds, config.eval_episodes)
        c_params, temperature = load_row_classifier(
            folders["belief"] / "classifier.msgpack"
        )
        blues = {n: load_blue(folders["train"] / f"{n}.msgpack") for n in TRAINED}
        spec = blues["aware"][0]
        if blues["blind"][0] != spec:
            raise RuntimeError("the blind and aware Blues must share one network")
        play = make_play(blue_config(config), spec)
        feeds = {"blind": "none", "aware": "online", "oracle": "oracle"}
        players = {"blind": "blind", "aware": "aware", "oracle": "aware"}
        runs = {}
        for name in CONDITIONS:
            tick = time.perf_counter()
            runs[name] = play_seeds(
                play, blues[players[name]][1], c_params, temperature, feeds[name], keys
            )
            progress(
                f"[evaluate] {name}: win rate "
                f"{np.mean(runs[name]['outcome'] == 1):.3f} "
                f"({time.perf_counter() - tick:.1f} s)"
            )
        summary = outcome_tables(runs, CONDITIONS, "aware", "blind", FAMILY)
        conditions = summary["conditions"]
        labels = runs["blind"]["label"]
        aware = runs["aware"]
        online = calibration_by_row(
            aware["beliefs"].reshape(-1, config.belief_rows, NUM_TYPES),
            rows_seen(aware["num_rows"], config.belief_rows),
            labels.reshape(-1),
            config.calibration_bins,
        )
        blind_hi = conditions["blind"]["win_rate_ci95"][1]
        return {
            "conditions": conditions,
            "per_type": summary["per_type"],
            "aware_minus_blind": summary["difference"],
            "oracle_minus_blind": win_difference(
                runs["oracle"]["outcome"], runs["blind"]["outcome"]
            ),
            "aware_beats_blind": summary["beats"],
            "oracle_beats_blind": bool(
                conditions["oracle"]["win_rate_ci95"][0] > blind_hi
            ),
            "online_belief": online,
            "mean_episode_length": summary["mean_episode_length"],
        }

    return fn


def run_wargame_intent(
    config: WargameIntentConfig,
    seeds: int | None = None,
    progress: Callable[[str], None] | None = None,
    stages: Any = None,
) -> dict:
    """Train the blind and aware Blues, fit the belief, evaluate every condition.

    Returns:
        The JSON-able results (see the module docstring and
        :func:`wargame_markdown`).
    """
    from mopa.core.stages import Stages

    progress = progress or (lambda line: None)
    stages = stages if stages is not None else Stages(None, progress)
    num_seeds = config.num_seeds if seeds is None else seeds
    described = {**dataclasses.asdict(config), "num_seeds": num_seeds}
    training = stages.run("train", described, _train_stage(config, num_seeds, progress))
    folders = {"train": stages.folder("train")}

    def trained_aware():
        spec, params = load_blue(folders["train"] / "aware.msgpack")
        return make_play(blue_config(config), spec), params

    # The belief's input is part of the stages that fit or use a classifier.
    described_belief = {**described, "belief_input": BELIEF_INPUT_VERSION}
    belief = stages.run(
        "belief",
        described_belief,
        _belief_stage(config, trained_aware, num_seeds, progress),
    )
    folders["belief"] = stages.folder("belief")
    evaluation = stages.run(
        "evaluate",
        described_belief,
        _evaluate_stage(config, folders, num_seeds, progress),
    )
    probe_episodes = max(1, config.eval_episodes // 3)
    probe = stages.run(
        "family_probe",
        {
            "num_episodes": probe_episodes,
            "seed": config.seed,
            "plans": PROBE_PLANS,
            "red_family": RED_FAMILY_VERSION,
        },
        lambda folder: probe_family(probe_episodes, config.seed),
    )
    # The planning Blues: the probe's win-rate table, their own belief.
    table = probe["win_rate"]
    plan_described = {
        **described_belief,
        "plans": PROBE_PLANS,
        "plan_table": table,
        "red_family": RED_FAMILY_VERSION,
    }

    def planner():
        stacked = jnp.broadcast_to(
            jnp.asarray(table, jnp.float32), (num_seeds, *np.shape(table))
        )
        return make_plan_play(blue_config(config)), stacked

    plan_belief = stages.run(
        "plan_belief",
        plan_described,
        _belief_stage(config, planner, num_seeds, progress, 5, "plan_belief"),
    )
    planning = stages.run(
        "plan_evaluate",
        plan_described,
        _plan_evaluate_stage(
            config, table, stages.folder("plan_belief"), num_seeds, progress
        ),
    )
    steps = [r * config.belief_stride for r in range(config.belief_rows)]
    plan_online = planning.pop("online_belief")
    planning["belief"] = {
        "accuracy_by_step": plan_online["accuracy"],
        "ece_by_step": plan_online["ece"],
        "n_episodes_by_step": plan_online["n_episodes"],
        "heldout_accuracy_by_step": plan_belief["heldout"]["accuracy"],
        "heldout_ece_by_step": plan_belief["heldout"]["ece"],
        "temperature": plan_belief["temperature"],
    }
    online = evaluation.pop("online_belief")
    return {
        "family": list(FAMILY),
        "num_seeds": num_seeds,
        "eval_episodes_per_seed": config.eval_episodes,
        "train_steps_per_seed": config.train_steps,
        "warm_start": config.warm_start,
        **evaluation,
        "belief": {
            "steps": steps,
            "accuracy_by_step": online["accuracy"],
            "ece_by_step": online["ece"],
            "n_episodes_by_step": online["n_episodes"],
            "heldout_accuracy_by_step": belief["heldout"]["accuracy"],
            "heldout_ece_by_step": belief["heldout"]["ece"],
            "temperature": belief["temperature"],
            "stride": config.belief_stride,
            "chance": 1.0 / NUM_TYPES,
        },
        "training": training,
        "family_probe": probe,
        "planning": planning,
        "timing_s": dict(stages.timing_s),
    }


register_experiment(
    "wargame_intent",
    run_wargame_intent,
    PROFILES,
    "default",
    plot_fn=wargame_report.plot_wargame_intent,
    description="Wargame opponent modelling: type-aware vs type-blind Blue "
    "against the mixed Red family",
    markdown_fn=wargame_report.wargame_markdown,
)
