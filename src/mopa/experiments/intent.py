"""The hidden-intent experiment (the research's Exp 6, issue I5) as one command:
``mopa reproduce intent`` (or ``mopa experiment intent``).

The prey of ``tag_intent`` secretly heads for one of four corners each episode.
Stages (each reused when re-run with the same config, see
:mod:`mopa.core.stages`):

1. ``train_unaware``, ``train_oracle``, ``train_belief``: MAPPO co-training of the
   three predator conditions, each with its own prey (the research's networks,
   presets ``research_mappo_tag_intent_*``, or with profile ``mopa`` mopa's
   lighter ones, ``exp6_mappo_*``); an interrupted stage resumes its run.
2. ``encoders``: a dataset of the belief-condition prey against its predators
   (the prey the planners face in the paired protocol), then the supervised
   prefix classifier (belief (a), temperature fitted on held-out prefixes) and
   the JEPA with its arrival readout (belief (b); its temperature is fitted
   against the corner nearest each held-out trajectory's arrival, so no intent
   label is used), both reading the occupancy of the prey's prefix of lead
   positions (where its latest move takes it,
   :func:`~mopa.envs.pursuit.lead_position`) and its last
   ``encoder_recent`` of them; and one behaviour clone ``pi(a | s, z)`` per seed
   (the prey model of ``bc_belief_planner``).
3. ``calibration``: accuracy and expected calibration error by step, and the
   reliability diagram, of the online beliefs on held-out trajectories;
   ``world_models``: a state-space ensemble and a JEPA latent world model trained
   on the encoder dataset (:mod:`mopa.worldmodel`), with their open-loop 5-step
   position RMSE on its held-out episodes.

   ``train_belief`` runs first; then ``encoders`` beside ``train_unaware``, and
   ``calibration`` and ``world_models`` beside ``train_oracle``, at the same time
   (:meth:`~mopa.core.stages.Stages.run_together`), as do the stages of 4
   and 5: a stage that leaves a core idle (small networks, the tree search that
   plays one game after another) lends it to the others, and each computes the
   numbers it computes alone.
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
encoders' figures, the calibration of every belief source, the world models'
errors by step).

The online belief is exact Bayes from the prey's own policy (belief (c)): each
step the prey's last action is recovered from the transition and the belief is
multiplied by ``p(a | s, k)`` under every corner ``k``. The evaluated prey takes
its actor's mode, so with ``greedy_prey_model`` the likelihood is that of the
argmax (mixed with a uniform ``bayes_epsilon``) and the planners' rollouts play the
prey's argmax under the sampled corner.

Conditions: ``unaware`` (the unaware predators); ``oracle`` (the oracle predators
fed the true corner); ``oracle_random_intent`` (fed a corner drawn per episode);
``hard_inference`` (the oracle predators fed the one-hot argmax of the online
belief, committed after ``commit_step`` steps; the running argmax before);
``belief_reactive`` (the belief predators fed the online belief, updated every
step); the planners (the joint lookahead of :func:`_planner`, the belief predators
as their policy after the root): ``belief_planner`` (the online belief, the prey's
own policy in the rollouts under corners drawn from it), ``flat_belief_planner``
(uniform belief), ``jepa_belief_planner`` (the JEPA belief: no labels anywhere),
``supervised_belief_planner`` (the supervised classifier's belief, the research's
choice) and ``bc_belief_planner`` (Bayes under the behaviour clone, and the clone
in the rollouts: no access to the true prey).

In the common-opponent protocol the planners keep the prey model they plan with
(the belief-condition prey of their seed, or the behaviour clone): a planner does
not know which prey it faces.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import numpy as np

from mopa.algos.common import pool_size
from mopa.algos.driver import Progress, run_training
from mopa.algos.presets import check_recipe, recipe_preset
from mopa.core.checkpoint import write_msgpack
from mopa.core.checks import check_discount, check_fields, check_fraction
from mopa.core.runinfo import run_metadata
from mopa.envs.pursuit import INTENT_CORNERS
from mopa.errors import InvalidParameterError
from mopa.experiments.intent_conditions import (
    INTENT_GAME,
    TRAIN_CONDITIONS,
    WORLD_MODELS,
    bc_config,
    calibration_stage,
    eval_common_stage,
    eval_paired_stage,
    gif_stage,
    intent_game,
    prey_paths,
    read_teams,
)
from mopa.opponent import bc as bc_lib
from mopa.opponent.data import (
    concatenate,
    load_dataset,
    play_dataset,
    save_dataset,
)
from mopa.opponent.encoders import (
    ClassifierConfig,
    JEPAConfig,
    make_prefix_data,
    predict_arrival,
    save_encoder,
)
from mopa.opponent.intent_encoders import (
    clone_arrays,
    fit_arrival_readout,
    fit_named_clones,
    fit_prefix_classifier,
    posterior_names,
    seed_parts,
    split_episodes,
)
from mopa.planning import (
    PreyModel,
)
from mopa.report import intent_report
from mopa.runs.registry import (
    profile_name,
    recipe_field,
    register_experiment,
)
from mopa.worldmodel import (
    JEPAWorldConfig,
    SSMConfig,
    constant_rmse_by_step,
    episodes_from_dataset,
    fit_and_score,
    save_world_model,
)


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
    recipe: str = recipe_field()
    """Training recipe: ``research`` (presets ``research_mappo_tag_intent_*``: actor
    and critic of two layers of 128; the unaware predators keep mopa's critic,
    which cannot see the prey's intent) or ``mopa`` (``exp6_mappo_*``: one layer of
    128)."""
    data_episodes_per_seed: int = 1200
    """Episodes of each belief-condition seed's teams: the data of the encoders,
    the behaviour clones and the world models (the research's classifier read 150
    per seed of the oracle condition; more data of the prey the planners face
    makes every encoder belief sharper)."""
    clone_temperature: float = 0.3
    """The clone planner's rollouts sample the clone's softmax at this temperature
    (a clone is an imperfect model of a greedy prey; sampling hedges its
    mistakes); 0 plays its argmax."""
    grid_size: int = 8
    """Occupancy cells per axis of the encoders' input."""
    encoder_recent: int = 8
    """Latest prey positions the encoders read beside the occupancy (where the
    prey is and which way it moves, which the occupancy's cells blur; the
    research's classifier read raw positions); 0 reads the occupancy only."""
    classifier_updates: int = 3000
    """Adam updates of the prefix classifier."""
    jepa_updates: int = 3000
    """Adam updates of the JEPA."""
    jepa_target_length: int = 5
    """Steps in the JEPA's target window."""
    jepa_name_rounds: int = 1
    """Rounds of renaming the episodes by the JEPA-named clone's own posterior and
    refitting it (the clone corrects the names of episodes whose arrival was not
    their corner); 0 keeps the JEPA's names."""
    bc_epochs: int = 100
    """Passes of the behaviour clone over its data (the clone is the planner's
    whole model of the prey, and its held-out action match still rises well past
    30 passes)."""
    min_belief_steps: int = 1
    """The prefix beliefs stay uniform until this many positions are seen."""
    commit_step: int = 8
    """``hard_inference`` commits to the argmax after this many steps."""
    bayes_epsilon: float = 0.05
    """Uniform mixing of the Bayes likelihoods (a model's mistakes cannot rule the
    true corner out for good)."""
    greedy_prey_model: bool = True
    """The evaluated prey takes its actor's mode, so model it that way: the
    planners' rollouts play the prey model's argmax and the Bayes beliefs use the
    argmax likelihood. ``False`` samples the model's softmax in both (as the
    research's planner does)."""
    eval_episodes: int = 100
    """Episodes per seed of every condition (both protocols)."""
    planner_rollouts: int = 4
    """Rollouts per candidate joint action (the research used 8 for a sampled
    prey; the greedy prey model makes a rollout depend only on its corner)."""
    planner_horizon: int = 5
    """Steps per rollout."""
    planner_gamma: float = 0.95
    """Discount inside rollouts."""
    mcts_particles: int = 8
    """Corners drawn from the belief per decision of the tree search (its
    simulations follow from the lookahead's simulator budget)."""
    distance_weight: float = 1.0
    """Weight of the imagined prey's distance to the nearest predator at the
    horizon (subtracted from the discounted captures)."""
    wm_updates: int = 2000
    """Adam updates of each learned world model."""
    wm_members: int = 5
    """Members of the state-space model ensemble."""
    wm_jepa_rollout_steps: int = 3
    """Steps the JEPA world model's latent is rolled in training."""
    calibration_bins: int = 10
    """Confidence bins of the ECE and the reliability diagram."""
    gif_size: int = 320
    """Side of the GIF's frames in pixels."""

    def __post_init__(self):
        check_fields(self)
        check_recipe(self.recipe)
        for name in (
            "num_seeds", "train_steps", "train_envs", "train_rollout",
            "train_chunks", "data_episodes_per_seed",
            "grid_size",
            "classifier_updates", "jepa_updates", "jepa_target_length",
            "bc_epochs", "min_belief_steps", "commit_step", "eval_episodes",
            "planner_rollouts", "planner_horizon", "calibration_bins",
            "mcts_particles",
            "wm_updates", "wm_members", "wm_jepa_rollout_steps",
        ):  # fmt: skip
            if getattr(self, name) < 1:
                raise InvalidParameterError(
                    f"{name} must be >= 1, got {getattr(self, name)}"
                )
        if self.jepa_name_rounds < 0:
            raise InvalidParameterError(
                f"jepa_name_rounds must be >= 0, got {self.jepa_name_rounds}"
            )
        check_discount("planner_gamma", self.planner_gamma)
        if self.clone_temperature < 0:
            raise InvalidParameterError(
                f"clone_temperature must be >= 0, got {self.clone_temperature}"
            )
        if self.encoder_recent < 0:
            raise InvalidParameterError(
                f"encoder_recent must be >= 0, got {self.encoder_recent}"
            )
        check_fraction("bayes_epsilon", self.bayes_epsilon)
        if self.data_episodes_per_seed < 8:
            raise InvalidParameterError(
                "data_episodes_per_seed must be >= 8 (train, validation and test "
                f"splits of four intents), got {self.data_episodes_per_seed}"
            )


PROFILES = {
    "default": IntentConfig(),
    "mopa": IntentConfig(recipe="mopa"),
    "quick": IntentConfig(
        recipe="mopa",
        num_seeds=1,
        train_steps=16_384,
        train_envs=16,
        train_rollout=64,
        train_chunks=2,
        data_episodes_per_seed=48,
        classifier_updates=100,
        jepa_updates=100,
        bc_epochs=2,
        wm_updates=20,
        wm_members=2,
        wm_jepa_rollout_steps=1,
        eval_episodes=6,
        planner_rollouts=2,
        planner_horizon=2,
        mcts_particles=2,
        gif_size=128,
    ),
}
"""Profiles of ``mopa reproduce intent``: ``default`` (the issue's sizes, the
research's networks), ``mopa`` (the same with mopa's lighter networks, the first
figures' recipe) and ``quick`` (tiny budgets: checks the pipeline, not the
numbers)."""


# -- the game and the trained teams -----------------------------------------------


def train_config(config: IntentConfig, condition: str, num_seeds: int):
    """The MAPPO config of one training condition at ``config``'s budget."""
    return recipe_preset(f"exp6_mappo_{condition}", config.recipe).replace(
        num_seeds=num_seeds,
        seed=config.seed,
        total_steps=config.train_steps,
        num_envs=config.train_envs,
        num_steps=config.train_rollout,
        num_chunks=config.train_chunks,
    )


def train_stage(
    train_cfg, folder: Path, name: str, progress: Callable[[str], None]
) -> dict:
    """A training stage: ``train_cfg`` run (or resumed) in ``folder / "run"``, with
    a progress line per chunk prefixed by ``[name]``; returns the stage's result
    (the final captures per episode and the run's folder name)."""
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


# -- encoders ----------------------------------------------------------------------
def classifier_config(config: IntentConfig) -> ClassifierConfig:
    return ClassifierConfig(
        input_size=encoder_input_size(config),
        num_classes=len(INTENT_CORNERS),
        num_updates=config.classifier_updates,
    )


def jepa_config(config: IntentConfig) -> JEPAConfig:
    return JEPAConfig(
        input_size=encoder_input_size(config), num_updates=config.jepa_updates
    )


def encoder_input_size(config: IntentConfig) -> int:
    """Features per prefix the classifier and the JEPA read."""
    return config.grid_size**2 + 2 * config.encoder_recent


def encoders_stage(config: IntentConfig, belief_folder: Path, folder: Path) -> dict:
    """The encoders, their temperatures and the behaviour clones, all from one
    dataset: episodes of the prey the planners face in the paired protocol (the
    belief-condition prey of each seed) against its predators."""
    _, params = intent_game()
    key = jax.random.key(config.seed)
    teams = read_teams(belief_folder)
    dataset = play_dataset(
        *INTENT_GAME,
        teams,
        key,
        num_seeds=pool_size(teams["predator"][1]),
        num_chains=config.data_episodes_per_seed,
        episodes_per_chain=1,
        policy_id=0,
        policy_names=(),
    )
    save_dataset(folder / "dataset.npz", dataset)
    fit, validation, test = split_episodes(dataset, config.seed)
    K = len(INTENT_CORNERS)
    corners = INTENT_CORNERS * float(params.intent_corner)
    key_classifier, key_jepa, key_bc = jax.random.split(jax.random.fold_in(key, 99), 3)
    lengths = tuple(range(1, fit.horizon + 1))
    paths = dict(grid_size=config.grid_size, recent=config.encoder_recent)
    # (a) supervised prefix classifier, temperature on validation prefixes.
    positions, v_paths = prey_paths(fit)[0], prey_paths(validation)
    classifier, v_data = fit_prefix_classifier(
        classifier_config(config),
        key_classifier,
        prey_paths(fit),
        v_paths,
        lengths=lengths,
        **paths,
    )
    # (b) JEPA with an arrival readout; no intent labels anywhere.
    j_config = jepa_config(config)
    jepa = fit_arrival_readout(
        j_config,
        key_jepa,
        positions,
        (v_paths[0], v_data.x),
        corners,
        target_length=config.jepa_target_length,
        num_prefixes=len(lengths),
        **paths,
    )
    for name, encoder, config_ in (
        ("classifier", classifier, classifier_config(config)),
        ("jepa", jepa, j_config),
    ):
        save_encoder(
            folder / f"{name}.msgpack",
            config_,
            encoder.params,
            metadata={"temperature": encoder.temperature},
        )

    # The behaviour clones pi(a | s, z), one per seed (each seed's prey is its own
    # policy), on that seed's fit and validation episodes: with z the intent
    # one-hot (the prey model of ``bc_belief_planner``), and with z the corner the
    # JEPA names for the episode (its readout of the whole episode; no label),
    # renamed by the clone's own posterior (the JEPA planner's Bayes belief).
    clone_fit = seed_parts(concatenate([fit, validation]))

    def jepa_names(part):
        part_positions, _ = prey_paths(part)
        whole = make_prefix_data(
            part_positions,
            np.zeros(len(part_positions), np.int32),
            grid_size=config.grid_size,
            prefix_lengths=(part.horizon,),
            recent=config.encoder_recent,
        )
        readout = predict_arrival(j_config, jepa.params, whole.x)
        return np.argmin(((readout[:, None, :] - corners[None]) ** 2).sum(-1), -1)

    b_config = bc_config(config)
    obs_size = fit.episodes("obs.prey").shape[-1] - K
    model = PreyModel(
        bc_lib.bc_policy_spec(b_config, obs_size, K), config.greedy_prey_model
    )
    b_params, j_clone, both_metrics, j_loss, names_right = fit_named_clones(
        b_config,
        key_bc,
        clone_fit,
        [jepa_names(part) for part in clone_fit],
        K,
        rounds=config.jepa_name_rounds,
        rename=lambda params, part: posterior_names(
            lambda ob: model.log_probs(params, ob, K), part, K, config.bayes_epsilon
        ),
    )
    for name, clone in (("bc", b_params), ("bc_jepa", j_clone)):
        write_msgpack(
            folder / f"{name}.msgpack",
            {"format": "mopa-intent-bc", "version": 1, "params": jax.device_get(clone)},
        )
    match = np.mean(
        [
            float(
                bc_lib.action_match(
                    b_config,
                    jax.tree.map(lambda x, s=s: x[s], b_params),
                    *clone_arrays(test_part, K),
                )
            )
            for s, test_part in enumerate(seed_parts(test))
        ]
    )
    S = len(clone_fit)
    return {
        "num_episodes": {
            "fit": fit.num_episodes,
            "validation": validation.num_episodes,
            "test": test.num_episodes,
            "clone_fit": sum(part.num_episodes for part in clone_fit),
            "clone_test": test.num_episodes,
        },
        "classifier_temperature": float(classifier.temperature),
        "classifier_final_loss": float(np.asarray(classifier.metrics["loss"])[-1]),
        "jepa_temperature": float(jepa.temperature),
        "jepa_final_loss": float(np.asarray(jepa.metrics["loss"])[-1]),
        "bc_final_loss": float(np.asarray(both_metrics.loss)[:S, -1].mean()),
        "bc_jepa_final_loss": float(j_loss),
        "jepa_names_match_intent_by_round": names_right,
        "bc_test_action_match": float(match),
    }


# -- learned world models ------------------------------------------------------------
def world_model_configs(config: IntentConfig, num_agents: int) -> dict:
    """``{name: config}`` of the learned world models."""
    return {
        "ssm": SSMConfig(
            num_agents=num_agents,
            num_members=config.wm_members,
            num_updates=config.wm_updates,
        ),
        "jepa": JEPAWorldConfig(
            num_agents=num_agents,
            num_updates=config.wm_updates,
            rollout_steps=config.wm_jepa_rollout_steps,
        ),
    }


def world_models_stage(
    config: IntentConfig, encoder_folder: Path, folder: Path
) -> dict:
    """Train both world models on the encoder dataset's fit and validation
    episodes; their open-loop position RMSE by step on its test episodes."""
    env, _ = intent_game()
    fit, validation, test = split_episodes(
        load_dataset(encoder_folder / "dataset.npz"), config.seed
    )
    train = episodes_from_dataset(concatenate([fit, validation]))
    held_out = episodes_from_dataset(test)
    key = jax.random.fold_in(jax.random.key(config.seed), 23)
    out = {}
    configs = world_model_configs(config, env.num_agents)
    for i, (name, wm_config) in enumerate(configs.items()):
        wm_params, out[name] = fit_and_score(
            wm_config, jax.random.fold_in(key, i), train, held_out
        )
        save_world_model(folder / f"{name}.msgpack", wm_config, wm_params, out[name])
    baseline = constant_rmse_by_step(held_out, k=5)
    out["standing_still_rmse_5step"] = float(np.asarray(baseline)[-1])
    return out


# -- the whole run -----------------------------------------------------------------
def run_intent(config: IntentConfig, seeds: int | None, progress, stages) -> dict:
    """Run every stage (see the module docstring); returns ``results.json``."""
    meta = run_metadata({})  # the source as the run starts, as meta.json's
    num_seeds = config.num_seeds if seeds is None else seeds
    config = dataclasses.replace(config, num_seeds=num_seeds)
    train_cfgs = {c: train_config(config, c, num_seeds) for c in TRAIN_CONDITIONS}
    train_configs = {c: cfg.to_dict() for c, cfg in train_cfgs.items()}

    def training(condition: str) -> tuple[str, Any, Callable[[Path], Any]]:
        name = f"train_{condition}"
        cfg = train_cfgs[condition]
        return (
            name,
            train_configs[condition],
            lambda folder: train_stage(cfg, folder, name, progress),
        )

    # The encoders read only the belief condition's teams, so that condition
    # trains first and the encoder stages run beside the other two trainings,
    # whose cores they share (they leave part of one idle when alone).
    stages.run(*training("belief"))
    stage_config = dataclasses.asdict(config)
    encoder_config = {
        "train_belief": train_configs["belief"],
        "config": stage_config,
    }
    encoder_folder = stages.folder("encoders")
    _, encoders = stages.run_together(
        [
            training("unaware"),
            (
                "encoders",
                encoder_config,
                lambda folder: encoders_stage(
                    config, stages.folder("train_belief"), folder
                ),
            ),
        ]
    )
    wm_folder = stages.folder("world_models")
    encoder_stage = {"encoders": encoder_config, "encoder_result": encoders}
    _, calibration, world_models = stages.run_together(
        [
            training("oracle"),
            (
                "calibration",
                encoder_stage,
                lambda folder: calibration_stage(
                    config,
                    encoders,
                    encoder_folder,
                    stages.folder("train_belief"),
                    folder,
                ),
            ),
            (
                "world_models",
                encoder_stage,
                lambda folder: world_models_stage(config, encoder_folder, folder),
            ),
        ]
    )
    teams = {c: read_teams(stages.folder(f"train_{c}")) for c in TRAIN_CONDITIONS}
    eval_config = {
        "train": train_configs,
        "encoders": encoder_config,
        "encoder_result": encoders,
        "world_models": world_models,
    }
    folders = (encoder_folder, wm_folder)
    paired, common, _ = stages.run_together(
        [
            (
                "eval_paired",
                eval_config,
                lambda folder: eval_paired_stage(
                    config, teams, *folders, folder, progress
                ),
            ),
            (
                "eval_common",
                eval_config,
                lambda folder: eval_common_stage(
                    config, teams, *folders, folder, progress
                ),
            ),
            (
                "gif",
                eval_config,
                lambda folder: gif_stage(config, teams, *folders, folder),
            ),
        ]
    )
    online = calibration["bayes"]
    return {
        "profile": profile_name(config, PROFILES),
        "conditions": paired["conditions"],
        "conditions_common_opponent": common["conditions"],
        "belief_accuracy_by_step": online["accuracy_by_step"],
        "ece_by_step": online["ece_by_step"],
        "wm_rmse_5step": {
            name: world_models[name]["rmse_5step"] for name in WORLD_MODELS
        },
        "timing_s": dict(stages.timing_s),
        "versions": meta["versions"],
        "git_sha": meta["git_sha"] or "unknown",
    }


register_experiment(
    "intent",
    run_intent,
    PROFILES,
    "default",
    plot_fn=intent_report.write_report,
    description="Exp 6: infer the prey's hidden corner and plan against the belief",
    markdown_fn=intent_report.results_markdown,
    criteria_fn=intent_report.criteria,
)
