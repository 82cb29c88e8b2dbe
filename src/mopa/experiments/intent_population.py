"""Opponent models that generalise (issue 22): plan against prey the models never
saw, and adapt to each prey as a match goes on. ``mopa experiment
intent_population``.

The game is Exp 6's ``tag_intent`` (:mod:`mopa.experiments.intent`): the prey
secretly heads for one of four corners each episode. Stages (each reused when
re-run with the same config, see :mod:`mopa.core.stages`):

1. ``train_<condition>``: a **prey population**, MAPPO co-training of the prey
   with its predators under every condition of ``config.conditions`` (see
   :data:`PREY_CONDITIONS`: the three predator conditions of Exp 6, and variants
   with another intent bonus or entropy weight), ``num_seeds`` seeds vmapped in one
   run per condition. Prey ``<condition>_s<seed>`` is one policy.
   **The split is by seed**: every prey of a seed in ``held_out_seeds`` is
   held out (one seed of three: a third of the prey, every condition), the rest
   is the fitting set. The predators evaluated are those of the other seeds
   (``predator_seeds``), so no predator, clone, temperature or threshold was
   trained or chosen against a held-out prey.
2. ``data``: every prey against its own co-trained predators (greedy, in its
   training game), ``data_episodes`` episodes each.
3. ``population``: the **population model**, a clone library
   (:func:`~mopa.opponent.population.fit_population`), one intent-conditioned
   clone per fitting-set prey and (``pooled_member``) one more of the whole
   fitting set's data pooled, the family's average; fitted on the fitting set's
   data only (the prey's intent one-hot cut off its observation).
4. ``belief``: on the held-out prey's data, the intent marginal of the joint
   (intent, member) belief by step (accuracy, ECE), and the held-out
   log-likelihood of the moves under the population's Bayes predictive against
   each single clone's (the best single clone chosen in hindsight, on the
   held-out data itself: the strongest single-clone comparator).
5. ``eval``: every row (:data:`ROWS`) against every prey (``eval_episodes`` per
   predator seed): pooled over the held-out prey, over the fitting set (the
   generalisation gap) and against each out-of-family prey
   (:data:`OUT_OF_FAMILY_PREY`, ``out_of_family_episodes`` each), with
   ``population_planner``'s paired difference from ``flat_belief_planner``
   there.
6. ``adaptation``: ``population_planner`` plays matches of ``match_episodes``
   consecutive episodes against every held-out and out-of-family prey: captures
   by episode, the late episodes' gain over the first, and the belief (and with
   ``online_fallback`` the correction's weight) through the match, replayed from
   the recorded moves. It runs beside ``eval``
   (:meth:`~mopa.core.stages.Stages.run_together`), with the same numbers
   as alone.

The rows and how they play: :mod:`mopa.experiments.intent_population_rows`.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from mopa.algos.presets import check_recipe
from mopa.core.checks import (
    check_discount,
    check_fields,
    check_fraction,
    check_keys,
    check_probability,
)
from mopa.core.files import write_json
from mopa.core.runinfo import run_metadata
from mopa.envs import make
from mopa.envs.pursuit import INTENT_CORNERS, NUM_ACTIONS
from mopa.errors import InvalidParameterError
from mopa.experiments.intent import IntentConfig, train_config, train_stage
from mopa.experiments.intent_conditions import read_teams
from mopa.experiments.intent_population_rows import (
    ONLINE_FEATURES,
    OUT_OF_FAMILY_PREY,
    adaptation_stage,
    eval_stage,
)
from mopa.opponent.bc import BCConfig
from mopa.opponent.data import generate, load_dataset, save_dataset
from mopa.opponent.population import (
    MemberData,
    PopulationConfig,
    fit_population,
    held_out_report,
    load_clones,
    member_data,
    recognition_prior,
    save_clones,
)
from mopa.players import PolicyPlayer
from mopa.runs.registry import (
    ABSENT_MEANS,
    profile_name,
    recipe_field,
    register_experiment,
)

PREY_CONDITIONS: dict[str, tuple[str, tuple, tuple]] = {
    "unaware": ("unaware", (), ()),
    "oracle": ("oracle", (), ()),
    "belief": ("belief", (), ()),
    "belief_bonus2": ("belief", (("intent_reward", 2.0),), ()),
    "oracle_entropy": ("oracle", (), (("ent_coef", 0.03),)),
}
"""Prey training conditions: ``name -> (Exp 6 preset condition, extra game
overrides, extra MAPPO config overrides)``. ``belief_bonus2`` halves the prey's
intent bonus (4 -> 2: a prey that trades its corner for safety sooner);
``oracle_entropy`` triples the entropy weight (0.01 -> 0.03: a less decided
prey)."""


PLAYER_FIELDS = (
    "fallback_model", "online_fallback", "online_features", "online_reweigh_base",
    "online_free_fit", "greedy_population_model", "planner_prior",
    "greedy_prey_model", "planner_rollouts", "planner_horizon", "planner_gamma",
    "mcts_particles", "distance_weight",
)  # fmt: skip
"""The config's fields that change how the rows play (beyond the stages before
them): in the ``eval`` and ``adaptation`` stages' configs, so that a change reruns
them."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class PopulationExperimentConfig:
    """Sizes of every stage of the population experiment."""

    num_seeds: int = 3
    """Training seeds per prey condition (vmapped in one run)."""
    seed: int = 0
    """Base random seed of every stage."""
    recipe: str = recipe_field()
    """Training recipe of the prey and predators: ``research`` (the research's
    MAPPO networks) or ``mopa`` (mopa's lighter ones); see
    :class:`~mopa.experiments.intent.IntentConfig`."""
    conditions: tuple[str, ...] = ("unaware", "oracle", "belief", "belief_bonus2")
    """Prey training conditions (keys of :data:`PREY_CONDITIONS`)."""
    held_out_seeds: tuple[int, ...] = (2,)
    """Seeds whose prey (of every condition) are held out; the others' prey are the
    fitting set, and only the others' predators are evaluated."""
    train_steps: int = 1_500_000
    """Environment steps per seed of each training condition."""
    train_envs: int = 32
    """Games per seed played in parallel while training."""
    train_rollout: int = 128
    """Steps per game per MAPPO update."""
    train_chunks: int = 10
    """Jitted chunks per training run (progress and resumption points)."""
    data_episodes: int = 600
    """Episodes of each prey against its own predators (clone data for the fitting
    set, belief measurements for the held-out set)."""
    bc_epochs: int = 40
    """Passes of every clone over its prey's data."""
    bc_hidden: tuple[int, ...] = (128, 128)
    """Hidden widths of every clone."""
    bc_batch_size: int = 256
    """Examples per minibatch of every clone."""
    pooled_member: bool = dataclasses.field(
        default=True, metadata={ABSENT_MEANS: False}
    )
    """Add the family's average member, fitted on the fitting set's data pooled
    (:attr:`~mopa.opponent.population.PopulationConfig.pooled_member`)."""
    fallback_model: bool = dataclasses.field(
        default=True, metadata={ABSENT_MEANS: False}
    )
    """With the none-fits probability the population planners imagine the
    flat-belief planner's prey (the GSCU-style ``fallback`` of
    :class:`~mopa.planning.PopulationOpponentModel`); off: a member of the prior."""
    online_fallback: bool = dataclasses.field(
        default=True, metadata={ABSENT_MEANS: False}
    )
    """Correct the fallback online to the prey's moves (:mod:`mopa.opponent.online`),
    carried across a match as the member belief is; off in older folders (what it
    gains: RESULTS.md)."""
    online_features: str = dataclasses.field(
        default="threats", metadata={ABSENT_MEANS: "observation"}
    )
    """What the correction is linear in: ``observation`` (the prey's, its intent
    cut) or ``threats`` (and :meth:`~mopa.envs.pursuit.PursuitEnv.
    prey_threat_features`; :data:`ONLINE_FEATURES`; measured: RESULTS.md)."""
    online_reweigh_base: bool = dataclasses.field(
        default=False, metadata={ABSENT_MEANS: False}
    )
    """Let the correction reweigh the fallback's log-probabilities
    (:class:`~mopa.opponent.online.OnlineResidualConfig`'s ``reweigh_base``; off:
    it lost to the flat-belief planner, RESULTS.md)."""
    online_free_fit: bool = dataclasses.field(
        default=True, metadata={ABSENT_MEANS: False}
    )
    """Also fit the features without the fallback, a third hypothesis weighed by
    its own evidence (:class:`~mopa.opponent.online.OnlineResidualConfig`'s
    ``free_fit``); off in older folders (what it gains: RESULTS.md)."""
    greedy_population_model: bool = dataclasses.field(
        default=False, metadata={ABSENT_MEANS: False}
    )
    """Imagine each member playing its clone's argmax
    (:class:`~mopa.planning.PopulationOpponentModel`'s ``greedy``); off: drawn."""
    bayes_epsilon: float = 0.05
    """Likelihood floor of every Bayes update (own-seed, true-model, population)."""
    fallback_prior: float = 0.01
    """Prior probability that the prey is outside the population (none fits)."""
    planning_prior: float | None = dataclasses.field(
        default=None, metadata={ABSENT_MEANS: 0.01}
    )
    """The prior of the population planners' none-fits probability
    (:func:`~mopa.opponent.population.planner_belief`); ``None``: the recognition
    rule (:func:`~mopa.opponent.population.recognition_prior`)."""
    mcts_planning_prior: float | None = dataclasses.field(
        default=0.01, metadata={ABSENT_MEANS: None}
    )
    """The tree search's own prior for its none-fits probability; ``None``: the
    lookahead's. 0.01 was chosen against the fitting set, each prey's clone left
    out (``population_tuning --vary planning_prior``, RESULTS.md)."""
    out_of_family: tuple[str, ...] = dataclasses.field(
        default=("evader", "wanderer"), metadata={ABSENT_MEANS: ("evader",)}
    )
    """Scripted prey outside the family played in ``eval`` and ``adaptation``
    (keys of :data:`OUT_OF_FAMILY_PREY`)."""
    greedy_prey_model: bool = True
    """The evaluated prey take their actor's mode: the own-seed and true-model
    planners model them so (argmax rollouts, argmax likelihood)."""
    eval_episodes: int = 10
    """Episodes per predator seed of every row against every trained prey."""
    out_of_family_episodes: int | None = dataclasses.field(
        default=50, metadata={ABSENT_MEANS: None}
    )
    """Episodes per predator seed of every row against each out-of-family prey
    (``None``: ``eval_episodes``): one prey, not a pool."""
    paired_out_of_family: bool = dataclasses.field(
        default=True, metadata={ABSENT_MEANS: False}
    )
    """Every row plays the same episodes against an out-of-family prey, and the
    difference from ``flat_belief_planner`` is paired
    (:func:`~mopa.eval.protocol.row_difference`); off: independent episodes."""
    match_episodes: int = 10
    """``M``: consecutive episodes of a match against one prey."""
    matches_per_seed: int = 6
    """Matches per predator seed against every held-out prey and the evader."""
    planner_rollouts: int = 4
    """Rollouts per candidate joint action."""
    planner_horizon: int = 5
    """Steps per rollout."""
    planner_gamma: float = 0.95
    """Discount inside rollouts."""
    mcts_particles: int = 8
    """(Intent, member) pairs drawn from the belief per tree search, at the
    lookahead's simulator budget (8: 75 simulations a decision; RESULTS.md)."""
    distance_weight: float = 1.0
    """Weight of the imagined prey's distance to the nearest predator at the
    horizon."""
    calibration_bins: int = 10
    """Confidence bins of the ECE."""

    def __post_init__(self):
        check_fields(self)
        check_recipe(self.recipe)
        for name in (
            "num_seeds", "train_steps", "train_envs", "train_rollout",
            "train_chunks", "data_episodes", "bc_epochs", "bc_batch_size",
            "eval_episodes", "match_episodes", "matches_per_seed", "planner_rollouts",
            "planner_horizon", "mcts_particles", "calibration_bins",
        ):  # fmt: skip
            if getattr(self, name) < 1:
                raise InvalidParameterError(
                    f"{name} must be >= 1, got {getattr(self, name)}"
                )
        check_keys("conditions", self.conditions, PREY_CONDITIONS)
        if not self.held_out_seeds or len(set(self.held_out_seeds)) != len(
            self.held_out_seeds
        ):
            raise InvalidParameterError(
                "held_out_seeds must name at least one seed, each once"
            )
        if self.out_of_family_episodes is not None and self.out_of_family_episodes < 1:
            raise InvalidParameterError(
                "out_of_family_episodes must be >= 1 or None, got "
                f"{self.out_of_family_episodes}"
            )
        check_fraction("bayes_epsilon", self.bayes_epsilon)
        check_probability("fallback_prior", self.fallback_prior)
        for name in ("planning_prior", "mcts_planning_prior"):
            if getattr(self, name) is not None:
                check_probability(name, getattr(self, name))
        check_keys("out_of_family", self.out_of_family, OUT_OF_FAMILY_PREY)
        check_discount("planner_gamma", self.planner_gamma)
        if self.online_features not in ONLINE_FEATURES:
            raise InvalidParameterError(
                f"online_features must be one of {sorted(ONLINE_FEATURES)}, got "
                f"{self.online_features!r}"
            )
        self.predator_seeds  # noqa: B018 - checks the split

    @property
    def predator_seeds(self) -> tuple[int, ...]:
        """The seeds whose predators are evaluated (and whose prey are fitted)."""
        bad = [s for s in self.held_out_seeds if not 0 <= s < self.num_seeds]
        if bad:
            raise InvalidParameterError(
                f"held_out_seeds must be in [0, {self.num_seeds}), got {bad}"
            )
        kept = tuple(s for s in range(self.num_seeds) if s not in self.held_out_seeds)
        if not kept:
            raise InvalidParameterError(
                "held_out_seeds: every seed is held out; keep at least one to fit"
            )
        return kept

    def prey_names(self, seeds: tuple[int, ...]) -> list[str]:
        """``<condition>_s<seed>`` of every condition at ``seeds``."""
        return [f"{c}_s{s}" for c in self.conditions for s in seeds]

    def episodes_against(self, prey: str) -> int:
        """Episodes per predator seed of every row against ``prey``."""
        if prey in self.out_of_family and self.out_of_family_episodes is not None:
            return self.out_of_family_episodes
        return self.eval_episodes

    @property
    def fitting_prey(self) -> list[str]:
        return self.prey_names(self.predator_seeds)

    @property
    def planner_prior(self) -> float:
        """The population planners' prior (``planning_prior`` resolved)."""
        if self.planning_prior is None:
            return recognition_prior(self.fallback_prior)
        return self.planning_prior

    @property
    def mcts_prior(self) -> float:
        """The tree search's prior (``mcts_planning_prior`` resolved)."""
        if self.mcts_planning_prior is None:
            return self.planner_prior
        return self.mcts_planning_prior

    @property
    def held_out_prey(self) -> list[str]:
        return self.prey_names(tuple(sorted(self.held_out_seeds)))

    @property
    def member_names(self) -> list[str]:
        """The clone library's members in order: the fitting-set prey, then
        ``pooled`` (the family's average) when there is one."""
        return self.fitting_prey + (["pooled"] if self.pooled_member else [])

    def intent_config(self) -> IntentConfig:
        """The Exp 6 config with this experiment's training and planner sizes (for
        :mod:`mopa.experiments.intent`'s training and planner builders)."""
        return IntentConfig(
            num_seeds=self.num_seeds,
            seed=self.seed,
            recipe=self.recipe,
            train_steps=self.train_steps,
            train_envs=self.train_envs,
            train_rollout=self.train_rollout,
            train_chunks=self.train_chunks,
            bayes_epsilon=self.bayes_epsilon,
            greedy_prey_model=self.greedy_prey_model,
            planner_rollouts=self.planner_rollouts,
            planner_horizon=self.planner_horizon,
            planner_gamma=self.planner_gamma,
            mcts_particles=self.mcts_particles,
            distance_weight=self.distance_weight,
        )

    def population_config(self) -> PopulationConfig:
        """The clone library (the prey's intent one-hot cut off its input)."""
        K = len(INTENT_CORNERS)
        return PopulationConfig(
            clone=BCConfig(
                num_actions=NUM_ACTIONS,
                hidden=self.bc_hidden,
                num_epochs=self.bc_epochs,
                batch_size=self.bc_batch_size,
            ),
            num_intents=K,
            drop_obs_tail=K,
            pooled_member=self.pooled_member,
        )


PROFILES = {
    "default": PopulationExperimentConfig(),
    "mopa": PopulationExperimentConfig(recipe="mopa"),
    "quick": PopulationExperimentConfig(
        recipe="mopa",
        train_steps=4096,
        train_envs=8,
        train_rollout=32,
        train_chunks=1,
        data_episodes=8,
        bc_epochs=2,
        bc_hidden=(32,),
        bc_batch_size=64,
        eval_episodes=2,
        out_of_family_episodes=3,
        match_episodes=3,
        matches_per_seed=1,
        planner_rollouts=1,
        planner_horizon=1,
        mcts_particles=1,
        calibration_bins=5,
    ),
}
"""Profiles of ``mopa experiment intent_population``: ``default`` (the issue's
sizes on the research's networks), ``mopa`` (the same on mopa's lighter networks:
15.5 CPU-minutes, 22 minutes' wall on the project's shared 2-core machine at a
load of about 12; four 1.5M-step trainings take half of it, the evaluation a
third) and ``quick`` (tiny budgets: checks the pipeline, not the numbers)."""


# -- training and data ---------------------------------------------------------------
def condition_train_config(config: PopulationExperimentConfig, condition: str):
    """The MAPPO config of one prey condition (an Exp 6 preset with the
    condition's game and config overrides)."""
    base, game, fields = PREY_CONDITIONS[condition]
    cfg = train_config(config.intent_config(), base, config.num_seeds)
    return cfg.replace(env_overrides=(*cfg.env_overrides, *game), **dict(fields))


def condition_game(config: PopulationExperimentConfig, condition: str):
    """``(env, params)`` the condition was trained in."""
    cfg = condition_train_config(config, condition)
    return make(cfg.env, **dict(cfg.env_overrides))


def _data(config, teams: dict, folder: Path, progress) -> dict:
    """Every prey against its own predators, one dataset per prey."""
    key = jax.random.fold_in(jax.random.key(config.seed), 3)
    for c, condition in enumerate(config.conditions):
        env, params = condition_game(config, condition)
        (pred_spec, pred_params), (prey_spec, prey_params) = (
            teams[condition]["predator"],
            teams[condition]["prey"],
        )
        players = (PolicyPlayer(pred_spec), PolicyPlayer(prey_spec))
        progress(f"[data] {condition}: {config.num_seeds} prey")
        for s in range(config.num_seeds):
            seed_params = jax.tree.map(lambda x, s=s: x[s], (pred_params, prey_params))
            dataset = generate(
                env,
                params,
                players,
                seed_params,
                jax.random.fold_in(key, c * config.num_seeds + s),
                num_chains=config.data_episodes,
                seed_index=s,
                policy_names=(f"{condition}_s{s}",),
            )
            save_dataset(folder / f"{condition}_s{s}.npz", dataset)
    return {"episodes_per_prey": config.data_episodes}


def prey_arrays(dataset) -> tuple[jax.Array, jax.Array, np.ndarray]:
    """``(obs [E, T, 1, D], actions [E, T, 1], intents [E])`` of the prey."""
    return (
        jnp.asarray(dataset.episodes("obs.prey")),
        jnp.asarray(dataset.episodes("actions.prey")),
        dataset.episode_labels("intent"),
    )


# -- the population model ------------------------------------------------------------


def fit_library(
    config: PopulationExperimentConfig, data_folder: Path, names: list[str]
) -> tuple[Any, tuple, list[MemberData]]:
    """The clone library of prey ``names`` (one member each, in order, then the
    pooled member when the config has one), fitted on their data in a ``data``
    stage's folder as the ``population`` stage fits the fitting set's.

    Returns:
        ``(clones, metrics, members)``: :func:`~mopa.opponent.population.
        fit_population`'s weights and metrics, and each prey's examples.
    """
    members = [
        member_data(load_dataset(data_folder / f"{name}.npz"), "prey") for name in names
    ]
    key = jax.random.fold_in(jax.random.key(config.seed), 5)
    clones, metrics = fit_population(key, config.population_config(), members)
    return clones, metrics, members


def _population(config, data_folder: Path, folder: Path) -> dict:
    """The clone library fitted on the fitting set's data only."""
    clones, metrics, members = fit_library(config, data_folder, config.fitting_prey)
    save_clones(folder / "clones.msgpack", clones)
    examples = [int(len(m.actions)) for m in members]
    return {
        "members": config.member_names,
        "examples_per_member": examples + [sum(examples)] * config.pooled_member,
        "final_loss": [float(np.asarray(m.loss)[-1]) for m in metrics],
        "final_accuracy": [float(np.asarray(m.accuracy)[-1]) for m in metrics],
    }


# -- the belief on held-out prey -----------------------------------------------------


def _belief(config, clone_folder: Path, data_folder: Path, folder: Path) -> dict:
    """Intent accuracy and ECE by step, and the held-out log-likelihood of the
    population against every single clone, on the held-out prey's data
    (:func:`mopa.opponent.population.held_out_report`)."""
    out = held_out_report(
        config.population_config(),
        load_clones(clone_folder / "clones.msgpack"),
        {
            name: prey_arrays(load_dataset(data_folder / f"{name}.npz"))
            for name in config.held_out_prey
        },
        config.member_names,
        epsilon=config.bayes_epsilon,
        fallback_prior=config.fallback_prior,
        calibration_bins=config.calibration_bins,
    )
    write_json(folder / "belief.json", out)
    return out


# -- the whole run -------------------------------------------------------------------
def run_intent_population(
    config: PopulationExperimentConfig, seeds: int | None, progress, stages
) -> dict:
    """Run every stage (see the module docstring); returns ``results.json``."""
    meta = run_metadata({})  # the source as the run starts, as meta.json's
    if seeds is not None:
        config = dataclasses.replace(config, num_seeds=seeds)
    train_cfgs = {c: condition_train_config(config, c) for c in config.conditions}
    train_configs = {c: cfg.to_dict() for c, cfg in train_cfgs.items()}
    teams = {}
    for condition, cfg in train_cfgs.items():
        name = f"train_{condition}"
        stages.run(
            name,
            train_configs[condition],
            lambda folder, cfg=cfg, name=name: train_stage(cfg, folder, name, progress),
        )
        teams[condition] = read_teams(stages.folder(name))
    split = {
        "fitting": config.fitting_prey,
        "held_out": config.held_out_prey,
        "out_of_family": list(config.out_of_family),
        "predator_seeds": list(config.predator_seeds),
    }
    data_config = {
        "train": train_configs,
        "episodes": config.data_episodes,
        "seed": config.seed,
    }
    data_folder = stages.folder("data")
    stages.run(
        "data", data_config, lambda folder: _data(config, teams, folder, progress)
    )
    population_config = {
        "data": data_config,
        "split": split,
        "clone": dataclasses.asdict(config.population_config()),
    }
    clone_folder = stages.folder("population")
    population = stages.run(
        "population",
        population_config,
        lambda folder: _population(config, data_folder, folder),
    )
    belief_config = {
        "population": population_config,
        "population_result": population,
        "bayes_epsilon": config.bayes_epsilon,
        "fallback_prior": config.fallback_prior,
        "calibration_bins": config.calibration_bins,
    }
    belief = stages.run(
        "belief",
        belief_config,
        lambda folder: _belief(config, clone_folder, data_folder, folder),
    )
    play_config = {
        **belief_config,
        "planner": {name: getattr(config, name) for name in PLAYER_FIELDS},
    }
    evaluation, adaptation = stages.run_together(
        [
            (
                "eval",
                {
                    **play_config,
                    "eval_episodes": config.eval_episodes,
                    "out_of_family_episodes": config.out_of_family_episodes,
                    "paired_out_of_family": config.paired_out_of_family,
                    "mcts_prior": config.mcts_prior,
                },
                lambda folder: eval_stage(
                    config, teams, clone_folder, folder, progress
                ),
            ),
            (
                "adaptation",
                {
                    **play_config,
                    "match_episodes": config.match_episodes,
                    "matches_per_seed": config.matches_per_seed,
                },
                lambda folder: adaptation_stage(
                    config, teams, clone_folder, folder, progress
                ),
            ),
        ]
    )
    return {
        "profile": profile_name(config, PROFILES),
        "split": split,
        "conditions_held_out": evaluation["pooled"]["held_out"],
        "conditions_fitting": evaluation["pooled"]["fitting"],
        "conditions_out_of_family": evaluation["pooled"]["out_of_family"],
        "out_of_family_versus_flat": evaluation["versus_flat"],
        "out_of_family_versus_flat_per_prey": evaluation["versus_flat_per_prey"],
        "per_prey": evaluation["per_prey"],
        "adaptation": adaptation,
        "belief_accuracy_by_step": belief["accuracy_by_step"],
        "ece_by_step": belief["ece_by_step"],
        "mean_ece": belief["mean_ece"],
        "log_likelihood_per_move": belief["log_likelihood_per_move"],
        "clones": population,
        "timing_s": dict(stages.timing_s),
        "versions": meta["versions"],
        "git_sha": meta["git_sha"] or "unknown",
    }


def _markdown(results: dict) -> str:
    from mopa.report.intent_population_report import results_markdown

    return results_markdown(results)


def _criteria(results: dict) -> list:
    from mopa.report.intent_population_report import criteria

    return criteria(results)


def _plots(results: dict, out: Path) -> list[Path]:
    from mopa.report.intent_population_report import write_report

    return write_report(results, Path(out))


register_experiment(
    "intent_population",
    run_intent_population,
    PROFILES,
    "default",
    plot_fn=_plots,
    description="Issue 22: plan against held-out prey with a population model, "
    "and adapt across a match",
    markdown_fn=_markdown,
    criteria_fn=_criteria,
)
