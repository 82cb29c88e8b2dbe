"""The co-training loop: red adapts to blue, blue re-models red and answers.

One lineage per blue kind (:data:`BLUES`), each over generations ``g = 0 .. G-1``:

1. **Red's population** ``R_g``: ``R_0`` is a family of red policies co-trained
   under different settings (``family``: each entry a co-training run, every seed
   but the held-out ones a member); ``R_{g+1} = R_g`` plus every seed of the best
   response red trained against blue at generation ``g``.
2. **Blue's model of red** (``remodel`` and ``fit_once``): trajectories of every
   member of ``R_g`` against the previous blue (a uniform-random blue at ``g =
   0``) go to :func:`mopa.opponent.styles.fit_style_population`: styles found by a
   VAE and k-means, **without labels**, one clone per style. ``remodel`` re-fits
   every generation; ``fit_once`` keeps generation 0's model. Red's identities are
   used only to score the styles found (adjusted Rand index against red's
   identities, and against its intents where the game has them).
3. **Blue**: a MAPPO team trained from scratch against the pool ``R_g``
   (:mod:`mopa.algos.common`'s ``pool:`` source: one member per game and
   episode). ``blind`` sees the game alone; the model blues see it through
   :class:`~mopa.opponent.belief_game.BeliefObservation`: their observation
   carries the online belief over red's styles (and the none-fits probability),
   so their policy acts through the belief.
4. **Red's best response and blue's exploitability**: a fresh red team trained
   against the pool of blue's seeds (``red_steps``); how well it does against
   blue is blue's exploitability at that budget, and it joins red's population.
5. **Evaluation**: blue's score (the game's ``metric``: captures, wins) against
   every member of ``R_g``, against the held-out reds (no blue ever trains against
   them) and against its best response; per episode, with 95% intervals.

   The model blues' belief is also read on the newest red of ``R_g``
   (:func:`belief_on_red`).

``plan``, the planning blue, re-fits the model every generation and trains the
MAPPO blue as ``remodel`` does; that policy is the rollout policy of a lookahead
(:attr:`CotrainConfig.planner`) that draws red's moves from the style clones under
the belief of blue's observation (:class:`~mopa.planning.ObservedBeliefPlanner`).
Training red against a planner is expensive, so the planner's moves against every
red of ``R_g`` are imitated by a fresh actor (expert iteration's distillation,
``distill_*`` stages): the distilled policy is the lineage's blue, the one red's best
response answers and red's population meets; the planner itself is evaluated
beside it (``planner`` in each generation's results).
6. **The league's store** (:func:`write_league`): every policy and style model in
   the checkpoint manifest, every evaluation episode a match (blue wins by the
   game's league rule, :func:`mopa.league.arena.outcome_rule`), Elo in the order
   played and Bradley-Terry ratings of every blue and red checkpoint.

Every step is a stage (:mod:`mopa.core.stages`): a killed run, started
again, reuses the finished stages and redoes the interrupted one from its start,
so it ends with the same results. Every policy is a checkpoint file in its stage's
folder (``*.policy``, msgpack, never pickle); the style models are msgpack files.
The family's runs, then the lineages, are independent jobs of a
:mod:`mopa.league.backend` (in this process, or Ray workers), each writing only its
own stages.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from mopa.algos import MAPPOConfig, run_training
from mopa.algos.common import POOL_PREFIX, frozen_policy, pool_size, team_infos
from mopa.algos.mappo.train import actor_spec
from mopa.core.checkpoint import (
    FORMAT_VERSION,
    read_msgpack,
    write_msgpack,
    write_policy_checkpoint,
)
from mopa.core.checks import check_fields
from mopa.core.stages import Stages, file_fingerprint
from mopa.cotrain.scripted import (
    SCRIPTED,
    check_scripted_game,
    check_scripted_type,
    clone_scripted_red,
)
from mopa.envs import make
from mopa.errors import InvalidParameterError
from mopa.eval.intervals import mean_interval
from mopa.eval.tournament import TournamentEntry, broadcast_seeds, play_tournament
from mopa.league.arena import outcome_rule
from mopa.league.backend import Backend, InProcessBackend
from mopa.league.manifest import CheckpointManifest, config_hash
from mopa.league.ratings import EloRatings, fit_bradley_terry
from mopa.league.store import DB_FILE, LeagueStore
from mopa.opponent.bc import BCConfig
from mopa.opponent.belief_game import BeliefObservation
from mopa.opponent.data import concatenate, generate
from mopa.opponent.population import PopulationConfig, population_log_probs
from mopa.opponent.styles import StyleConfig, fit_style_population, style_purity
from mopa.planning import (
    LookaheadConfig,
    LookaheadParams,
    LookaheadPlayer,
    PopulationModelParams,
    PopulationOpponentModel,
)
from mopa.planning.observed_belief import ObservedBeliefPlanner
from mopa.players import PolicyPlayer
from mopa.policy import PolicySpec, agent_inputs, fit_actor, read_policy_file

BLUES = ("blind", "remodel", "fit_once", "plan")
"""The blue kinds: no model, a model re-fitted every generation, a model fitted at
generation 0 only, and the planning blue (the model re-fitted every generation;
blue's moves planned against it, distilled into the policy red answers)."""
MODEL_FORMAT = "mopa.cotrain.style_model"
EVAL_FORMAT = 2
"""The evaluation stage's result format, among its inputs: a stage stored in an
earlier format (other keys) is run again, not reused."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class CotrainConfig:
    """One co-training league: the game, red's family, the blues and the budgets."""

    game: str = "tag_intent"
    """A registered mopa game of two teams."""
    game_overrides: tuple[tuple[str, Any], ...] = ()
    """``(field, value)`` pairs of the game every generation plays."""
    blue_team: str = "predator"
    """The modelling team."""
    red_team: str = "prey"
    """The team whose population adapts."""
    red_private_tail: int = 4
    """Trailing entries of red's observation that blue cannot see (in
    ``tag_intent``, red's intent one-hot): the style model never reads them."""
    metric: str = "captures"
    """The game's per-episode total that scores blue (higher is better for blue)."""
    blues: tuple[str, ...] = BLUES
    """Which blue kinds to run."""
    generations: int = 5
    """``G``: generations per blue."""
    num_seeds: int = 3
    """Seeds of every blue and every best-response red (vmapped)."""
    family: tuple[tuple[str, tuple[tuple[str, Any], ...]], ...] = (
        ("plain", ()),
        ("eager", (("env_overrides", (("intent_reward", 8.0),)),)),
        ("wary", (("ent_coef", 0.03),)),
    )
    """Red's family: ``(name, fields)`` per entry. An entry is a co-training run of
    both teams, ``fields`` its MAPPOConfig field overrides (``env_overrides`` there
    are added to ``game_overrides``), or, with the single field ``("scripted",
    TYPE)``, the clone of a scripted battalion red (:mod:`mopa.cotrain.scripted`)."""
    family_seeds: int = 3
    """Seeds of every family entry."""
    held_out_seeds: tuple[int, ...] = (2,)
    """Seeds of every family entry kept out of red's population: held-out reds."""
    held_out_family: tuple[str, ...] = ()
    """Family entries whose every seed is held out."""
    scripted_episodes: int = 64
    """Episodes of each scripted red recorded for its clone."""
    scripted_updates: int = 3000
    """Adam updates of each scripted red's clone."""
    family_steps: int = 1_500_000
    """Environment steps of every family run."""
    blue_steps: int = 800_000
    """Environment steps of every blue training."""
    red_steps: int = 400_000
    """Environment steps of every best-response red (the exploitability budget)."""
    hidden: tuple[int, ...] = (64,)
    """Hidden widths of every policy."""
    num_envs: int = 32
    """Games per seed in every training."""
    rollout: int = 50
    """Steps per game between updates."""
    num_chunks: int = 4
    """Chunks of every training (progress lines)."""
    data_episodes: int = 12
    """Episodes of every red member recorded for blue's model."""
    styles: StyleConfig = dataclasses.field(
        default_factory=lambda: StyleConfig(
            clone=BCConfig(num_actions=5, hidden=(64,), num_epochs=10), drop_obs_tail=4
        )
    )
    """How blue finds and clones red's styles (its ``drop_obs_tail`` is set to
    ``red_private_tail``)."""
    eval_episodes: int = 20
    """Episodes per blue seed against every red."""
    planner: LookaheadConfig = dataclasses.field(
        default_factory=lambda: LookaheadConfig(
            num_rollouts=4, horizon=4, leaf_weight=0.0, mode="per_agent"
        )
    )
    """The planning blue's lookahead (``plan``): rollouts through the belief game,
    red drawn from the style model's clones, blue's MAPPO policy after the root;
    rewards only (the MAPPO actor has no Q-values for a leaf)."""
    distill_episodes: int = 8
    """Episodes of the planner against every red of the population, per blue
    seed, that its distillation imitates."""
    distill_updates: int = 2000
    """Adam updates of the distillation."""
    seed: int = 0

    def __post_init__(self):
        check_fields(self)
        unknown = sorted(set(self.blues) - set(BLUES))
        if unknown or not self.blues or len(set(self.blues)) != len(self.blues):
            raise InvalidParameterError(
                f"blues must be distinct names of {BLUES}, got {self.blues}"
            )
        for name in (
            "scripted_episodes",
            "scripted_updates",
            "generations",
            "num_seeds",
            "family_seeds",
            "family_steps",
            "blue_steps",
            "red_steps",
            "num_envs",
            "rollout",
            "num_chunks",
            "data_episodes",
            "eval_episodes",
            "distill_episodes",
            "distill_updates",
        ):
            if getattr(self, name) < 1:
                raise InvalidParameterError(
                    f"{name} must be >= 1, got {getattr(self, name)}"
                )
        if not self.family:
            raise InvalidParameterError("family must name at least one run")
        names = [name for name, _ in self.family]
        if len(set(names)) != len(names):
            raise InvalidParameterError(f"family names must be distinct, got {names}")
        bad = [s for s in self.held_out_seeds if not 0 <= s < self.family_seeds]
        if bad:
            raise InvalidParameterError(
                f"held_out_seeds must be in [0, {self.family_seeds}), got {bad}"
            )
        unknown = sorted(set(self.held_out_family) - set(names))
        if unknown:
            raise InvalidParameterError(
                f"held_out_family names {unknown}, not family entries of {names}"
            )
        if len(set(self.held_out_seeds)) >= self.family_seeds or set(
            self.held_out_family
        ) >= set(names):
            raise InvalidParameterError(
                "every family seed is held out: red's population would be empty"
            )
        for name, fields in self.family:
            fields = dict(fields)
            if SCRIPTED in fields:
                if len(fields) != 1:
                    raise InvalidParameterError(
                        f"family entry {name!r}: a scripted red takes no other "
                        f"field, got {sorted(fields)}"
                    )
                check_scripted_type(fields[SCRIPTED])
        if self.red_private_tail < 0:
            raise InvalidParameterError(
                f"red_private_tail must be >= 0, got {self.red_private_tail}"
            )
        object.__setattr__(
            self,
            "styles",
            dataclasses.replace(self.styles, drop_obs_tail=self.red_private_tail),
        )

    def train_config(self, steps: int, seed: int, **fields: Any) -> MAPPOConfig:
        """A MAPPO run of this league: its game, networks and rollout."""
        overrides = dict(self.game_overrides)
        overrides.update(dict(fields.pop("env_overrides", ())))
        return MAPPOConfig(
            env=self.game,
            env_overrides=tuple(overrides.items()),
            total_steps=steps,
            num_envs=self.num_envs,
            num_steps=self.rollout,
            num_seeds=self.num_seeds,
            seed=seed,
            hidden=self.hidden,
            num_chunks=self.num_chunks,
            **fields,
        )

    def to_dict(self) -> dict[str, Any]:
        return json.loads(json.dumps(dataclasses.asdict(self)))


# -- policies as files ----------------------------------------------------------------
def write_team(
    path: Path, config: MAPPOConfig, team: str, spec: PolicySpec, params: Any
) -> Path:
    """One team's policy (params ``[S, ...]``) as a checkpoint file."""
    return write_policy_checkpoint(
        path,
        algo=config.algo,
        env=config.env,
        env_overrides=dict(config.env_overrides),
        config=config.to_dict(),
        meta={},
        teams={team: (spec.to_dict(), params)},
    )


def read_team(path: str | Path, team: str) -> tuple[PolicySpec, Any]:
    """``(spec, params [S, ...])`` of ``team`` in a checkpoint file."""
    return read_policy_file(path).teams[team]


def pool_source(paths: list[Path]) -> str:
    """The frozen-team source that plays a member of ``paths`` per episode."""
    return POOL_PREFIX + ",".join(str(p) for p in paths)


# -- style models as files -------------------------------------------------------------
def write_model(path: Path, population: PopulationConfig, clones: Any) -> Path:
    return write_msgpack(
        path,
        {
            "format": MODEL_FORMAT,
            "version": FORMAT_VERSION,
            "population": json.dumps(dataclasses.asdict(population)),
            "clones": jax.tree.map(np.asarray, clones),
        },
    )


def read_model(path: Path) -> tuple[PopulationConfig, Any]:
    data = read_msgpack(path, MODEL_FORMAT)
    population = PopulationConfig(**json.loads(data["population"]))
    return population, jax.tree.map(jnp.asarray, data["clones"])


# -- the loop ------------------------------------------------------------------------
def run_cotrain(
    config: CotrainConfig,
    progress: Callable[[str], None],
    stages: Stages,
    backend: Backend | None = None,
) -> dict[str, Any]:
    """Every lineage's generations (see the module docstring); returns the
    results (JSON-able).

    Args:
        backend: where the independent jobs run (:mod:`mopa.league.backend`):
            first the family's co-training runs, then one job per blue lineage.
            ``None`` runs them here, one after another. The results do not
            depend on it: every job reads and writes only its own stages under
            ``stages.root``.
    """
    env, env_params = make(config.game, **dict(config.game_overrides))
    check_league_game(config, env, env_params)
    backend = backend or InProcessBackend()
    here = isinstance(backend, InProcessBackend)
    # A Ray worker reports through its own stdout (Ray forwards it).
    report, stage_report = (progress, stages.progress) if here else (_say, _say)

    def jobs(kind: str, args: list) -> list[Any]:
        outcomes = backend.map(
            _run_job,
            [
                _Job(kind, config, str(stages.root), a, report, stage_report)
                for a in args
            ],
        )
        for outcome in outcomes:
            stages.timing_s.update(outcome.timing_s)
            stages.reused.extend(outcome.reused)
        return [outcome.result for outcome in outcomes]

    family = _family_members(config, jobs("family", list(range(len(config.family)))))
    paths = {m["name"]: str(stages.root / m["file"]) for m in family["members"]}
    fitting = [paths[m["name"]] for m in family["members"] if not m["held_out"]]
    held_out = [paths[m["name"]] for m in family["members"] if m["held_out"]]
    identities = {path: name for name, path in paths.items()}
    runs = jobs(
        "lineage", [(blue, fitting, held_out, identities) for blue in config.blues]
    )
    lineages = {
        blue: run["generations"] for blue, run in zip(config.blues, runs, strict=True)
    }
    league = write_league(
        config,
        stages.root,
        [*family["checkpoints"], *(c for run in runs for c in run["checkpoints"])],
        [match for run in runs for match in run["matches"]],
    )
    return {
        "metric": config.metric,
        "family": {"members": family["members"]},
        "lineages": lineages,
        "final": {
            blue: {
                key: lineages[blue][-1][key]
                for key in (
                    "score_vs_population",
                    "score_vs_held_out",
                    "exploitability",
                )
            }
            for blue in config.blues
        },
        "ratings": league,
        "timing_s": dict(stages.timing_s),
    }


class _Job(NamedTuple):
    """One independent piece of a league: a family run or a blue's lineage."""

    kind: str
    config: CotrainConfig
    root: str
    """The stages folder."""
    arg: Any
    progress: Callable[[str], None]
    stage_progress: Callable[[str], None]


class _JobOutcome(NamedTuple):
    result: Any
    timing_s: dict[str, float]
    reused: list[str]


def _run_job(job: _Job) -> _JobOutcome:
    """A job, in this process or a worker: its stages under ``job.root``."""
    config = job.config
    stages = Stages(job.root, progress=job.stage_progress)
    if job.kind == "family":
        result = _family_run(config, job.arg, job.progress, stages)
    else:
        env, env_params = make(config.game, **dict(config.game_overrides))
        blue, fitting, held_out, identities = job.arg
        result = _lineage(
            config,
            blue,
            env,
            env_params,
            fitting,
            held_out,
            identities,
            job.progress,
            stages,
        )
    return _JobOutcome(result, dict(stages.timing_s), list(stages.reused))


def check_league_game(config: CotrainConfig, env, env_params) -> None:
    """Refuse, before any training, a game the league cannot play: blue must be
    its first team of two, red the second, and ``metric`` one of its totals."""
    from mopa.envs.base import episode_sum_keys

    if tuple(env.team_names) != (config.blue_team, config.red_team):
        raise InvalidParameterError(
            f"blue_team and red_team must be {config.game}'s first and second "
            f"teams {tuple(env.team_names)}, got ({config.blue_team!r}, "
            f"{config.red_team!r})"
        )
    totals = episode_sum_keys(env, env_params)
    if config.metric not in totals:
        raise InvalidParameterError(
            f"metric must be one of {config.game}'s episode totals {totals}, got "
            f"{config.metric!r}"
        )
    if any(SCRIPTED in dict(fields) for _, fields in config.family):
        check_scripted_game(env, config.game, config.red_team)
    width = env.observation_space(env.team_index(config.red_team)).shape[0]
    if config.red_private_tail >= width:
        raise InvalidParameterError(
            f"red_private_tail ({config.red_private_tail}) must be less than red's "
            f"observation width ({width})"
        )


def _family_run(config: CotrainConfig, index: int, progress, stages: Stages):
    """The family's entry ``index``, a co-training run or a scripted red's
    clones: ``(name, the stage's result, its checkpoints for the manifest)``."""
    name, fields = config.family[index]
    stage = f"family_{name}"
    if SCRIPTED in dict(fields):
        red_type = dict(fields)[SCRIPTED]
        network = config.train_config(  # red's actor (no steps are trained)
            config.num_envs * config.rollout, config.seed + 100 + index
        )
        inputs = {
            SCRIPTED: red_type,
            "seeds": config.family_seeds,
            "episodes": config.scripted_episodes,
            "updates": config.scripted_updates,
            "game": config.game,
            "game_overrides": _plain(config.game_overrides),
            "network": [network.hidden, network.activation, network.agent_id],
            "seed": network.seed,
        }
        result = stages.run(
            stage,
            inputs,
            lambda folder: _clone_family(config, red_type, network, folder, progress),
        )
        train = None  # no training run: the manifest records no step count
    else:
        train = dataclasses.replace(
            config.train_config(
                config.family_steps, config.seed + 100 + index, **dict(fields)
            ),
            num_seeds=config.family_seeds,
        )
        result = stages.run(
            stage,
            train.to_dict(),
            lambda folder: _train_family(config, train, folder, stage, progress),
        )
    checkpoints = [
        _checkpoint(stages.folder(stage) / file, f"family_{name}", None, train, seed)
        for seed, file in enumerate(result["files"])
    ]
    return name, result, checkpoints


def _family_members(config: CotrainConfig, runs: list) -> dict[str, Any]:
    members, checkpoints = [], []
    for name, result, files in runs:
        checkpoints += files
        for seed, file in enumerate(result["files"]):
            members.append(
                {
                    "name": f"{name}_s{seed}",
                    "file": f"family_{name}/{file}",  # under the stages folder
                    "held_out": seed in config.held_out_seeds
                    or name in config.held_out_family,
                    **({"clone": result["clones"][seed]} if "clones" in result else {}),
                }
            )
    return {"members": members, "checkpoints": checkpoints}


def _clone_family(config, red_type: str, train: MAPPOConfig, folder: Path, progress):
    """Every seed's clone of the scripted red ``red_type``, one checkpoint each."""
    env, env_params = make(config.game, **dict(config.game_overrides))
    spec = actor_spec(train, team_infos(env)[env.team_index(config.red_team)])
    files, clones = [], []
    for seed in range(config.family_seeds):
        weights, facts = clone_scripted_red(
            env,
            env_params,
            red_type,
            spec,
            jax.random.fold_in(jax.random.key(train.seed), seed),
            episodes=config.scripted_episodes,
            num_updates=config.scripted_updates,
        )
        progress(
            f"[family {red_type} s{seed}] clone of the script: agreement "
            f"{facts['agreement']:.3f} on {facts['samples']} moves"
        )
        file = f"red_s{seed}.policy"
        write_policy_checkpoint(
            folder / file,
            algo="bc",
            env=config.game,
            env_overrides=dict(config.game_overrides),
            config={SCRIPTED: red_type, "network": train.to_dict()},
            meta={},
            teams={
                config.red_team: (
                    spec.to_dict(),
                    jax.tree.map(lambda x: np.asarray(x)[None], weights),
                )
            },
        )
        files.append(file)
        clones.append(facts)
    return {"files": files, "clones": clones}


def _train_family(config, train: MAPPOConfig, folder: Path, stage: str, progress):
    result = run_training(train, out=folder / "run", progress=_report(stage, progress))
    spec, params = result.policies[config.red_team]
    files = []
    for seed in range(train.num_seeds):
        file = f"red_s{seed}.policy"
        one = jax.tree.map(lambda x, s=seed: x[s : s + 1], params)
        write_team(folder / file, train, config.red_team, spec, one)
        files.append(file)
    return {"files": files, "final": _final(result.summary)}


def _lineage(
    config, blue, env, env_params, fitting, held_out, identities, progress, stages
) -> list[dict[str, Any]]:
    population = list(fitting)  # red's population, as checkpoint paths
    identities = dict(identities)  # this lineage's best responses join it
    generations, model_path, previous = [], None, None
    checkpoints, matches = [], []
    for g in range(config.generations):
        tag = f"{blue}_g{g}"
        model_result = None
        if blue != "blind" and (blue in ("remodel", "plan") or g == 0):
            model_stage = f"model_{tag}"
            inputs = {
                "reds": [_fingerprint(p) for p in population],
                "blue": _fingerprint(previous and previous["blue"]),
                "blue_model": _fingerprint(previous and previous["model"]),
                "styles": _plain(config.styles),
                "episodes": config.data_episodes,
                "seed": config.seed,
                "game": config.game,
                "game_overrides": _plain(config.game_overrides),
            }
            model_result = stages.run(
                model_stage,
                inputs,
                lambda folder, previous=previous, population=list(population), g=g: (
                    _fit_model(
                        config,
                        env,
                        env_params,
                        population,
                        previous,
                        identities,
                        folder,
                        g,
                        progress,
                    )
                ),
            )
            model_path = str(stages.folder(model_stage) / "model.msgpack")
            checkpoints.append(_checkpoint(model_path, f"{blue}_model", g))
        game = _game(config, env, env_params, model_path)  # None for blind
        offset = config.seed + 1000 * (BLUES.index(blue) + 1) + g
        blue_result, blue_path, blue_train = _team_stage(
            config,
            stages,
            f"blue_{tag}",
            config.blue_team,
            population,
            offset,
            game,
            model_path,
            progress,
        )
        rollout_path = distillation = None
        if blue == "plan":  # blue_path becomes the planner's distillation
            rollout_path, distill_stage = blue_path, f"distill_{tag}"
            distillation = stages.run(
                distill_stage,
                {
                    "rollout": _fingerprint(rollout_path),
                    "model": _fingerprint(model_path),
                    "reds": [_fingerprint(p) for p in population],
                    "planner": _plain(config.planner),
                    "episodes": config.distill_episodes,
                    "updates": config.distill_updates,
                    "seed": config.seed,
                },
                functools.partial(
                    _distill, config, game, rollout_path, list(population), g, progress
                ),
            )
            blue_path = str(stages.folder(distill_stage) / "blue.policy")
            checkpoints.append(
                _checkpoint(rollout_path, f"blue_{blue}_rollout", g, blue_train)
            )
        red_result, red_path, red_train = _team_stage(
            config,
            stages,
            f"red_{tag}",
            config.red_team,
            [blue_path],
            offset + 500,
            game,
            model_path,
            progress,
        )
        eval_stage = f"eval_{tag}"
        evaluation = stages.run(
            eval_stage,
            {
                "blue": _fingerprint(blue_path),
                "reds": [_fingerprint(p) for p in population],
                "held_out": [_fingerprint(p) for p in held_out],
                "best_response": _fingerprint(red_path),
                "model": _fingerprint(model_path),
                "episodes": config.eval_episodes,
                "seed": config.seed,
                "outcome": _outcome(env, env_params),
                "newest_red": _fingerprint(population[-1]),
                "belief_episodes": config.data_episodes,
                "result_format": EVAL_FORMAT,
                "rollout": _fingerprint(rollout_path),
                "planner": _plain(config.planner) if rollout_path else None,
            },
            functools.partial(
                _evaluate,
                config,
                game,
                blue_path,
                list(population),
                held_out,
                red_path,
                g,
                progress,
                rollout_path=rollout_path,
            ),
        )
        red_names = {
            **{f"population_{i}": identities[p] for i, p in enumerate(population)},
            **{f"held_out_{i}": identities[p] for i, p in enumerate(held_out)},
            "best_response": f"best_response_{tag}",
        }
        scores = evaluation.pop("scores")  # per episode: kept in the stage only
        for column, values in scores.items():
            matches.append((tag, red_names[column], g, values))
        if "planner" in evaluation:
            for column, values in evaluation["planner"].pop("scores").items():
                matches.append((f"{tag}_planner", red_names[column], g, values))
        checkpoints += [
            _checkpoint(blue_path, f"blue_{blue}", g, blue_train),
            _checkpoint(red_path, f"red_{blue}", g, red_train),
        ]
        generations.append(
            {
                "generation": g,
                "population_size": len(population),
                "model": model_result,
                "blue_training": blue_result["final"],
                "distillation": distillation,
                "best_response_training": red_result["final"],
                **evaluation,
            }
        )
        previous = {"blue": blue_path, "model": model_path}
        population = [*population, red_path]
        identities[red_path] = f"best_response_{tag}"
    return {"generations": generations, "checkpoints": checkpoints, "matches": matches}


def _game(config, env, env_params, model_path: str | None):
    """``(game, params)`` blue plays: the game, or the game with blue's belief."""
    if model_path is None:
        return env, env_params
    population, clones = read_model(Path(model_path))
    game = BeliefObservation(env, config.blue_team, config.red_team, population, clones)
    return game, game.default_params


def _fit_model(
    config, env, env_params, population, previous, identities, folder, g, progress
) -> dict[str, Any]:
    """Red's trajectories against the previous blue, and the styles fitted on them."""
    progress(f"[model g{g}] {len(population)} reds x {config.data_episodes} episodes")
    if previous is None:  # a uniform-random blue
        game, game_params = env, env_params
        blue_info = team_infos(env)[env.team_index(config.blue_team)]
        blue_spec, blue_params = frozen_policy("random", config.game, blue_info)
    else:
        game, game_params = _game(config, env, env_params, previous["model"])
        blue_spec, stacked = read_team(previous["blue"], config.blue_team)
        blue_params = jax.tree.map(lambda x: x[0], stacked)
    datasets, truth = [], []
    for i, path in enumerate(population):
        red_spec, red_params = read_team(path, config.red_team)
        datasets.append(
            generate(  # blue is the game's first team (check_league_game)
                game,
                game_params,
                (PolicyPlayer(blue_spec, greedy=False), PolicyPlayer(red_spec, False)),
                (blue_params, jax.tree.map(lambda x: x[0], red_params)),
                jax.random.fold_in(jax.random.key(config.seed), 7000 + 100 * g + i),
                num_chains=config.data_episodes,
            )
        )
        truth += [identities[path]] * config.data_episodes
    dataset = concatenate(datasets)
    key = jax.random.fold_in(jax.random.key(config.seed), 9000 + g)
    model, clones, styles = fit_style_population(
        key, dataset, config.red_team, config.styles
    )
    write_model(folder / "model.msgpack", model, clones)
    _, codes = np.unique(np.asarray(truth), return_inverse=True)
    result = {
        "num_styles": styles.num_styles,
        "silhouette": {str(k): v for k, v in styles.silhouette.items()},
        "against_identities": style_purity(styles.labels, codes),
        "episodes": int(styles.labels.size),
    }
    if "intent" in dataset.header["episode_fields"]:  # one episode per chain
        result["against_intents"] = style_purity(
            styles.labels, np.asarray(dataset["intent"])[:, 0]
        )
    return result


def _team_stage(
    config, stages, stage, team, opponents, seed, game, model_path, progress
) -> tuple[dict[str, Any], str, MAPPOConfig]:
    """Train ``team`` from scratch against the pool ``opponents`` (checkpoint
    paths of the other team) in ``game``: ``(the stage's result, the policy's
    path, the training's config)``."""
    other = config.red_team if team == config.blue_team else config.blue_team
    steps = config.blue_steps if team == config.blue_team else config.red_steps
    train = config.train_config(steps, seed, frozen=((other, pool_source(opponents)),))
    inputs = {
        # The frozen pool names the opponents' paths: their content stands in.
        "train": {k: v for k, v in train.to_dict().items() if k != "frozen"},
        "opponents": [_fingerprint(p) for p in opponents],
        "model": _fingerprint(model_path),
    }
    file = f"{team}.policy"
    result = stages.run(
        stage,
        inputs,
        lambda folder: _train_one(
            config, team, train, game, folder, file, stage, progress
        ),
    )
    return result, str(stages.folder(stage) / file), train


def _train_one(config, team, train, game, folder, file, stage, progress):
    result = run_training(train, progress=_report(stage, progress), game=game)
    spec, params = result.policies[team]
    write_team(folder / file, train, team, spec, params)
    return {"final": _final(result.summary), "wall_s": result.wall_s}


def _seed_entries(config, prefix: str, path: str) -> list[TournamentEntry]:
    """Every seed of the red checkpoint ``path`` as its own entry,
    ``<prefix>_s<seed>`` (params ``[1, ...]``)."""
    spec, stacked = read_team(path, config.red_team)
    return [
        TournamentEntry(
            f"{prefix}_s{s}",
            PolicyPlayer(spec, greedy=False),
            jax.tree.map(lambda x, s=s: x[s : s + 1], stacked),
        )
        for s in range(pool_size(stacked))
    ]


def _evaluate(
    config,
    game,
    blue_path,
    population,
    held_out,
    red_path,
    g,
    progress,
    folder,
    rollout_path=None,
):
    """Blue's seeds against every red: the population, the held-out reds and its
    best response (each seed of it); with ``rollout_path`` (the ``plan``
    lineage), the planning blue too, under ``"planner"``. The stage writes no
    file in ``folder``."""
    del folder
    env, params = game
    blue_spec, blue_params = read_team(blue_path, config.blue_team)
    reds = [
        *(
            entry
            for group, paths in (("population", population), ("held_out", held_out))
            for i, path in enumerate(paths)
            for entry in _seed_entries(config, f"{group}_{i}", path)
        ),
        *_seed_entries(config, "best_response", red_path),
    ]
    blues = [
        TournamentEntry("blue", PolicyPlayer(blue_spec, greedy=False), blue_params)
    ]
    if rollout_path is not None:
        planner, planner_params = _planner(config, game, rollout_path)
        blues.append(TournamentEntry("planner", planner, planner_params))
    progress(
        f"[eval g{g}] {len(blues)} blue x {len(reds)} reds x {config.eval_episodes}"
    )
    result = play_tournament(
        env,
        params,
        blues,
        reds,
        jax.random.fold_in(jax.random.key(config.seed), 5000 + g),
        num_episodes=config.eval_episodes,
    )
    evaluation = _row_summary(config, result, 0)
    evaluation["belief_on_newest_red"] = (
        belief_on_red(config, game, blue_path, population[-1], g)
        if isinstance(env, BeliefObservation)
        else None
    )
    if rollout_path is not None:
        evaluation["planner"] = _row_summary(config, result, 1)
    return evaluation


def _row_summary(config, result, row: int) -> dict[str, Any]:
    """One blue row of the evaluation's tournament: its score against each red
    set, its best response's return, and every episode's outcome (``scores``)."""
    values = result.metric(config.metric)[row]  # [C, P, N]
    by_name = dict(zip(result.column_names, values, strict=True))

    def pooled(prefix: str) -> dict[str, Any]:
        chosen = [v for n, v in by_name.items() if n.startswith(prefix)]
        summary = mean_interval(np.concatenate([np.ravel(v) for v in chosen]))
        per_seed = np.mean(np.stack([np.asarray(v) for v in chosen]), (0, 2))
        return {**summary, "per_blue_seed": per_seed.tolist()}

    red_returns = result.metric(f"return/{config.red_team}")[row]
    br = [i for i, n in enumerate(result.column_names) if n.startswith("best_resp")]
    outcome = _episode_scores(config, result, row)  # [C, P, N]
    scores: dict[str, list[float]] = {}
    for name, values in zip(result.column_names, outcome, strict=True):
        scores.setdefault(name.rsplit("_s", 1)[0], []).extend(np.ravel(values).tolist())
    return {
        "scores": scores,
        "score_vs_population": pooled("population_"),
        "score_vs_held_out": pooled("held_out_"),
        "exploitability": {
            "score_vs_best_response": pooled("best_response_"),
            "best_response_return": mean_interval(np.ravel(red_returns[br])),
        },
    }


# -- the planning blue -----------------------------------------------------------------
def _planner(config: CotrainConfig, game, rollout_path: str):
    """``(player, params [S, ...])``: the planning blue of the belief ``game``.

    It scores its candidate moves by :attr:`CotrainConfig.planner` rollouts
    through the game, red's moves drawn from the style model's clones under the
    belief of its observation (:class:`~mopa.planning.ObservedBeliefPlanner`),
    blue's own moves after the root from the MAPPO blue at ``rollout_path``
    (every seed: params ``[S, ...]``)."""
    env, params = game
    spec, stacked = read_team(rollout_path, config.blue_team)
    red = env.team_index(config.red_team)
    model = PopulationOpponentModel(
        env.population, team=red, num_opponents=env.team_sizes[red]
    )
    planner = ObservedBeliefPlanner(
        LookaheadPlayer(env, config.blue_team, config.planner, model, spec),
        env.num_members,
    )
    seeds = pool_size(stacked)
    belief = jnp.full((1, env.num_members), 1.0 / env.num_members)  # replaced
    planner_params = LookaheadParams(
        env_params=broadcast_seeds(params, seeds),
        own_params=stacked,
        opponent_params=PopulationModelParams(
            clone_params=broadcast_seeds(params.clones, seeds),
            belief=broadcast_seeds(belief, seeds),
        ),
    )
    return planner, planner_params


def _distill(
    config, game, rollout_path, population, g, progress, folder
) -> dict[str, Any]:
    """The planning blue distilled into a policy (expert iteration's imitation
    step): ``distill_episodes`` episodes of each blue seed's planner against every
    red of the population (red seed ``s`` modulo its seeds), and blue's actor
    fitted to the planner's moves by :func:`mopa.policy.fit_actor`; written as
    ``blue.policy`` (every seed)."""
    env, params = game
    planner, stacked = _planner(config, game, rollout_path)
    seeds = pool_size(stacked.own_params)
    train = config.train_config(config.blue_steps, config.seed)
    spec = actor_spec(train, team_infos(env)[env.team_index(config.blue_team)])
    progress(
        f"[distill g{g}] planner x {len(population)} reds x "
        f"{config.distill_episodes} episodes, {seeds} seeds"
    )
    key = jax.random.fold_in(jax.random.key(config.seed), 8000 + g)
    weights, facts = [], []
    for s in range(seeds):
        obs, actions = [], []
        for i, path in enumerate(population):
            red_spec, red_stack = read_team(path, config.red_team)
            r = s % pool_size(red_stack)
            data = generate(
                env,
                params,
                (planner, PolicyPlayer(red_spec, greedy=False)),
                (
                    jax.tree.map(lambda x, s=s: x[s], stacked),
                    jax.tree.map(lambda x, r=r: x[r], red_stack),
                ),
                jax.random.fold_in(key, 100 * s + i),
                num_chains=config.distill_episodes,
            )
            valid = np.asarray(data["valid"], bool)
            obs.append(np.asarray(data[f"obs.{config.blue_team}"])[valid])
            actions.append(np.asarray(data[f"actions.{config.blue_team}"])[valid])
        obs, actions = np.concatenate(obs), np.concatenate(actions)
        fitted, losses = fit_actor(
            spec,
            obs,
            actions,
            jax.random.fold_in(key, 10_000 + s),
            num_updates=config.distill_updates,
            batch_size=256,
            lr=1e-3,
        )
        logits = spec.module().apply(fitted, agent_inputs(spec, jnp.asarray(obs)))
        agreement = float(np.mean(np.argmax(np.asarray(logits), -1) == actions))
        weights.append(fitted)
        facts.append(
            {
                "samples": int(actions.size),
                "agreement": agreement,
                "loss": float(losses[-1]),
            }
        )
    stacked_weights = jax.tree.map(lambda *x: np.stack(x), *weights)
    write_team(folder / "blue.policy", train, config.blue_team, spec, stacked_weights)
    return {"seeds": facts}


def belief_on_red(
    config: CotrainConfig, game, blue_path: str, red_path: str, g: int
) -> dict[str, Any]:
    """How blue's belief (the :class:`BeliefObservation` ``game``) reads the red
    checkpoint ``red_path``: ``data_episodes`` fresh episodes per blue seed
    (blue seed ``s`` against red seed ``s`` modulo red's seeds).

    Red's styles carry no labels, so the reference is the style that describes
    this red best: the member of blue's model with the highest log-likelihood of
    all its moves in these episodes. Returns:

    * ``accuracy``: the share of episodes whose belief at the last step puts most
      mass on that member (mean and 95% interval over episodes);
    * ``none_fits``: the none-fits probability at the last step (same);
    * ``nats_per_move_over_uniform``: that member's log-likelihood per move of
      red's moves, minus a uniform model's (how well the model describes red);
    * ``reference_member`` and ``num_members``.
    """
    env, params = game
    blue_spec, blue_stack = read_team(blue_path, config.blue_team)
    red_spec, red_stack = read_team(red_path, config.red_team)
    members = env.num_members
    key = jax.random.fold_in(jax.random.key(config.seed), 6000 + g)
    log_lik, ends, moves = [], [], 0
    for s in range(pool_size(blue_stack)):
        r = s % pool_size(red_stack)
        data = generate(  # blue is the game's first team (check_league_game)
            env,
            params,
            (PolicyPlayer(blue_spec, greedy=False), PolicyPlayer(red_spec, False)),
            (
                jax.tree.map(lambda x, s=s: x[s], blue_stack),
                jax.tree.map(lambda x, r=r: x[r], red_stack),
            ),
            jax.random.fold_in(key, s),
            num_chains=config.data_episodes,
        )
        valid = np.asarray(data["valid"], bool)  # [C, T]
        actions = jnp.asarray(data[f"actions.{config.red_team}"])  # [C, T, A]
        log_probs = population_log_probs(
            env.population, params.clones, jnp.asarray(data[f"obs.{config.red_team}"])
        )[..., 0, :, :]  # intent-free styles: [C, T, A, M, actions]
        taken = jnp.take_along_axis(
            log_probs, actions[..., None, None].astype(jnp.int32), -1
        )[..., 0]  # [C, T, A, M]
        log_lik.append(np.einsum("ctam,ct->cm", np.asarray(taken), valid))
        last = valid.shape[1] - 1 - np.argmax(valid[:, ::-1], 1)  # [C]
        belief = np.asarray(data[f"obs.{config.blue_team}"])[:, :, 0, -(members + 1) :]
        ends.append(belief[np.arange(len(last)), last])  # [C, M + 1]
        moves += int(valid.sum()) * actions.shape[-1]
    log_lik, ends = np.concatenate(log_lik), np.concatenate(ends)
    reference = int(np.argmax(log_lik.sum(0)))
    uniform = -np.log(env.population.num_actions)
    return {
        "reference_member": reference,
        "num_members": members,
        "accuracy": mean_interval(
            (np.argmax(ends[:, :members], 1) == reference).astype(np.float64)
        ),
        "none_fits": mean_interval(ends[:, members].astype(np.float64)),
        "nats_per_move_over_uniform": float(log_lik[:, reference].sum() / moves)
        - uniform,
    }


# -- outcomes, ratings and the manifest ----------------------------------------------
def _outcome(env, env_params) -> str:
    """How blue's episodes are won: the league's rule for the game
    (:func:`mopa.league.arena.outcome_rule`: ``battalion`` or ``pursuit``), else
    ``returns`` (blue wins an episode whose return beats red's)."""
    try:
        return outcome_rule(env, env_params)
    except InvalidParameterError:
        return "returns"


def _episode_scores(config: CotrainConfig, result, row: int = 0) -> np.ndarray:
    """Blue's score of every episode of ``result``'s blue ``row``, ``[C, P, N]``:
    1 a win, 0.5 a draw, 0 a loss, by :func:`_outcome`'s rule."""
    totals = {key: np.asarray(value[row]) for key, value in result.totals.items()}
    if {"blue_win", "red_win", "draw"} <= set(totals):  # battalion (blue first)
        return (totals["blue_win"] > 0) + 0.5 * (totals["draw"] > 0)
    if "captures" in totals:  # pursuit: a capture is blue's win
        return (totals["captures"] > 0).astype(np.float64)
    mine = result.metric(f"return/{config.blue_team}")[row]
    theirs = result.metric(f"return/{config.red_team}")[row]
    return (mine > theirs) + 0.5 * (mine == theirs)


def _checkpoint(
    path: str | Path,
    run_id: str,
    generation: int | None,
    train: MAPPOConfig | None = None,
    seed: int | None = None,
) -> dict[str, Any]:
    """A manifest row of one file: a policy (``train`` its training) or a style
    model."""
    return {
        "path": str(path),
        "run_id": run_id,
        "stage": generation,
        "step": 0 if train is None else train.total_steps,
        "seed": seed,
        "config_hash": None if train is None else config_hash(train.to_dict()),
    }


LEAGUE_PLAYERS = ("blue:", "red:")
"""Prefixes of the rated players' names: blue checkpoints, red checkpoints."""


def write_league(
    config: CotrainConfig,
    root: Path,
    checkpoints: list[dict[str, Any]],
    matches: list[tuple[str, str, int, list[float]]],
) -> dict[str, Any]:
    """The league's store (:class:`mopa.league.LeagueStore` in ``root``), made
    anew from the stages' results: every checkpoint in the manifest (kind
    ``snapshot``, ``run_id`` its lineage, ``stage`` its generation), every
    evaluation episode a match rated by Elo in the order played, generation by
    generation; returns the Bradley-Terry ratings of every blue and red
    checkpoint (Elo scale, 95% intervals) with the Elo ratings beside them.

    The store is written beside and moved into place whole, so a store from an
    earlier run is replaced, never left half-written.
    """
    scratch = Path(root) / ".league_store"
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    ordered = sorted(matches, key=lambda m: m[2])  # stable: lineages in order
    with LeagueStore(scratch) as store:
        manifest = CheckpointManifest(store)
        for row in checkpoints:  # the caller's rows are left as they are
            fields = {k: v for k, v in row.items() if k != "path"}
            manifest.register(row["path"], kind="snapshot", **fields)
        elo = EloRatings(store)
        for blue, red, generation, scores in ordered:
            elo.update(
                f"blue:{blue}",
                f"red:{red}",
                scores,
                step=generation,
                source="cotrain_eval",
            )
        elo_ratings = {
            name: rating
            for name, rating in elo.all_ratings().items()
            if name.startswith(LEAGUE_PLAYERS)
        }
        rows = [(m["player"], m["opponent"], m["score"]) for m in store.matches()]
    os.replace(scratch / DB_FILE, Path(root) / DB_FILE)
    shutil.rmtree(scratch)
    fit = fit_bradley_terry(rows)
    return {
        "rule": "Bradley-Terry over every evaluation episode (Elo scale)",
        "players": {
            name: {
                "rating": rating,
                "ci95": [low, high],
                "elo": elo_ratings[name],
            }
            for name, rating, low, high in fit.leaderboard()
        },
    }


# -- small helpers ----------------------------------------------------------------
def _say(line: str) -> None:
    """A worker's progress line, on its stdout."""
    print(line, flush=True)


def _report(stage: str, progress):
    def report(p) -> None:
        progress(
            f"[{stage}] chunk {p.chunk}/{p.num_chunks}  "
            f"{p.env_steps:,}/{p.total_env_steps:,} steps"
        )

    return report


def _final(summary: dict[str, Any]) -> dict[str, Any]:
    """The training's last-chunk means (returns and the game's totals)."""
    return {
        key: value.get("mean") if isinstance(value, dict) else value
        for key, value in summary.get("final", {}).items()
    }


def _plain(value: Any) -> Any:
    """``value`` (a dataclass config, or tuples) as plain JSON values."""
    if dataclasses.is_dataclass(value):
        value = dataclasses.asdict(value)
    return json.loads(json.dumps(value))


def _fingerprint(path: str | Path | None) -> str | None:
    """The SHA-256 of a file an earlier stage wrote (its content only, so that a
    league folder moved elsewhere reuses its stages), ``None`` for no file."""
    return None if path is None else file_fingerprint(path)["sha256"]
