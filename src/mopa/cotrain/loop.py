"""The co-training loop: red adapts to blue, blue re-models red and answers, and
blue keeps what it learned from generation to generation.

One lineage per blue kind (:data:`BLUES`), over generations ``g = 0 .. G-1``:

1. **Red's population** ``R_g``. ``R_0`` is red's family: co-training runs of
   both teams under different settings (``family``; on ``tag_intent`` the prey
   conditions of ``intent_population``: unaware, oracle and belief predators, and
   a halved intent bonus) and scripted reds cloned into red's actor
   (:mod:`mopa.cotrain.scripted`; on ``tag_intent`` the prey that runs from the
   nearest predator and the one that wanders), every seed a member but the
   held-out ones. ``R_{g+1} = R_g`` plus every seed of red's best response to
   blue at generation ``g``. The **held-out reds** (``held_out_seeds`` of every
   family entry, and ``held_out_family``) are fixed: no blue trains against them
   and no model is fitted to them.
2. **Blue's model of red** (``remodel``, ``fit_once``, ``plan``;
   :mod:`mopa.cotrain.model`): the population model of
   :mod:`mopa.opponent.population`, one intent-conditioned clone per red
   checkpoint of ``R_g`` and the pooled member, fitted on episodes of every red
   against blue as it plays (which checkpoint played each episode is blue's
   league's record; red's intent is found without labels unless
   ``intent_labels="true"``). ``remodel`` and ``plan`` re-fit it every
   generation, ``fit_once`` keeps generation 0's.
3. **Blue**, a MAPPO team of ``num_seeds`` seeds, trained against ``R_g`` as a
   frozen pool drawn by the **meta-strategy** (``meta_strategy``: uniform, or half
   uniform and half the Nash mixture of the meta-game of blue's last generation
   against ``R_g``, :func:`meta_weights`). Generation 0 trains from scratch
   (``blue_first_steps``); every later generation **warm-starts** from the
   lineage's blue of the generation before (its actor and critic,
   ``blue_steps``). ``blind`` plays the game; the model blues play it through
   their belief (``belief_input``: ``intent``, the game's own intent input
   carrying the belief's intent marginal,
   :class:`~mopa.opponent.belief_game.IntentBeliefInput`; ``appended``, the joint
   belief padded to every member the league will have,
   :class:`~mopa.opponent.belief_game.BeliefObservation`). Generation 0's
   blues are common: one blind blue, and one model blue on generation 0's model
   (the model is fitted on episodes against the blind blue), shared by
   ``remodel``, ``fit_once`` and ``plan``.
4. **The planning blue** (``plan``): the tree search and the lookahead over the
   model (``planners``, :class:`~mopa.planning.StateBeliefPlanner` or
   :class:`~mopa.planning.ObservedBeliefPlanner`), red's moves drawn from the
   clones under blue's belief and blue's own moves after the root from the
   lineage's MAPPO blue. The ``teacher`` planner is distilled into the lineage's
   deployed policy by DAgger (:func:`mopa.planning.dagger`: the student rolls
   out, the planner labels its states, until the student keeps ``dagger.keep`` of
   the planner's score or ``dagger.max_rounds`` rounds); the student, warm-started
   from the MAPPO blue, is the blue red's best response answers, and the next
   generation's MAPPO blue starts from it.
5. **Red's best response and blue's exploitability**: a fresh red team
   (``red_steps``, the fixed budget) trained against blue's seeds as they play
   (their modes); what it scores against blue is blue's exploitability at that
   budget, and it joins red's population.
6. **Evaluation**: every blue plays its mode (the planners are deterministic),
   every red samples its moves. Blue's score (the game's ``metric``) against
   every red of ``R_g``, against the held-out reds, against its best response and
   against the newest reds (the best responses of this generation and the one
   before), per episode with 95% intervals; in the ``plan`` lineage also the
   planners and the MAPPO blue the planners roll out. Each red set is played
   with the same episode keys in every generation, so a blue's generations are
   paired (``improvement``: the last generation less generation 0, per episode
   against the held-out reds). The belief on the newest red of ``R_g``: how its
   last step reads that red's intent (an evaluation against red's true intent),
   its member and "none fits".
7. **The league's store** (:func:`write_league`): every policy and model in the
   checkpoint manifest, every evaluation episode a match, Elo in the order played
   and Bradley-Terry ratings of every blue and red checkpoint.

Every step is a stage (:mod:`mopa.core.stages`): a killed run, started
again, reuses the finished stages and redoes the interrupted one from its start.
Policies are checkpoint files (``*.policy``), a MAPPO blue's critic beside its
actor (``*.learners``, for the warm start), models msgpack files; never pickle.
The family's runs, then the lineages, are independent jobs of a
:mod:`mopa.league.backend` (in this process, or Ray workers), each writing only its
own stages; generation 0's common blues run first, in this process.
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
import numpy as np

from mopa.algos import MAPPOConfig, run_training
from mopa.algos.common import (
    GREEDY_PREFIX,
    POOL_PREFIX,
    pool_size,
    team_infos,
    weighted_pool_source,
)
from mopa.algos.mappo.train import actor_spec
from mopa.algos.presets import INTENT_CONDITIONS
from mopa.core.checkpoint import (
    FORMAT_VERSION,
    read_msgpack,
    write_msgpack,
    write_policy_checkpoint,
)
from mopa.core.checks import check_fields
from mopa.core.stages import Stages, file_fingerprint
from mopa.cotrain.evaluation import (
    blue_game,
    evaluate,
    intent_game,
    planner_entry,
    read_team,
)
from mopa.cotrain.model import (
    INTENT_LABELS,
    fit_red_model,
    record_red,
    write_model,
)
from mopa.cotrain.scripted import (
    SCRIPTED,
    check_scripted_game,
    check_scripted_type,
    clone_scripted,
)
from mopa.envs import make
from mopa.errors import InvalidParameterError
from mopa.league.arena import outcome_rule
from mopa.league.backend import Backend, InProcessBackend
from mopa.league.manifest import CheckpointManifest, config_hash
from mopa.league.nash import meta_nash
from mopa.league.ratings import EloRatings, fit_bradley_terry
from mopa.league.store import DB_FILE, LeagueStore
from mopa.opponent.bc import BCConfig
from mopa.opponent.belief_game import IntentBeliefInput
from mopa.opponent.population import PopulationConfig
from mopa.planning import DaggerConfig, dagger
from mopa.players import PolicyPlayer

BLUES = ("blind", "remodel", "fit_once", "plan")
"""The blue kinds: no model; a model re-fitted every generation; a model fitted at
generation 0 only; the planning blue (the model re-fitted every generation, blue's
moves planned against it and distilled into the policy red answers)."""
PLANNERS = ("lookahead", "mcts")
"""The planning blue's planners: the Monte-Carlo lookahead and the tree search."""
BELIEF_INPUTS = ("intent", "appended")
"""How a model blue observes its belief (see the module docstring, step 3)."""
META_STRATEGIES = ("uniform", "nash")
"""How blue's training draws red's population (:func:`meta_weights`)."""
EVAL_FORMAT = 3
"""The evaluation stage's result format, among its inputs: a stage stored in an
earlier format is run again, not reused."""

_BELIEF_PREDATORS = tuple(INTENT_CONDITIONS["belief"])
INTENT_FAMILY: tuple[tuple[str, tuple[tuple[str, Any], ...]], ...] = (
    ("unaware", ()),
    ("oracle", (("env_overrides", tuple(INTENT_CONDITIONS["oracle"])),)),
    ("belief", (("env_overrides", _BELIEF_PREDATORS),)),
    (
        "belief_bonus2",
        (("env_overrides", (*_BELIEF_PREDATORS, ("intent_reward", 2.0))),),
    ),
    ("evader", ((SCRIPTED, "evader"),)),
    ("wanderer", ((SCRIPTED, "wanderer"),)),
)
"""Red's family on ``tag_intent``: the prey conditions of ``intent_population``
(co-trained with predators blind to the prey's corner, told it, or given a noisy
belief of it; and the last with the prey's intent bonus halved) and its two
scripted prey, cloned."""


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
    ``tag_intent``, red's intent one-hot): the model never reads them."""
    metric: str = "captures"
    """The game's per-episode total that scores blue (higher is better for blue)."""
    blues: tuple[str, ...] = BLUES
    """Which blue kinds to run."""
    generations: int = 5
    """``G``: generations per blue."""
    num_seeds: int = 3
    """Seeds of every blue and every best-response red (vmapped)."""
    family: tuple[tuple[str, tuple[tuple[str, Any], ...]], ...] = INTENT_FAMILY
    """Red's family: ``(name, fields)`` per entry. An entry is a co-training run of
    both teams, ``fields`` its MAPPOConfig field overrides (``env_overrides`` there
    are added to ``game_overrides``), or, with the single field ``("scripted",
    TYPE)``, the clones of a scripted red (:mod:`mopa.cotrain.scripted`)."""
    family_seeds: int = 3
    """Seeds of every family entry (a scripted red's: clones fitted with other
    keys)."""
    held_out_seeds: tuple[int, ...] = (2,)
    """Seeds of every family entry kept out of red's population: held-out reds."""
    held_out_family: tuple[str, ...] = ()
    """Family entries whose every seed is held out."""
    scripted_episodes: int = 128
    """Episodes of each scripted red recorded for its clone."""
    scripted_updates: int = 3000
    """Adam updates of each scripted red's clone."""
    family_steps: int = 1_000_000
    """Environment steps of every family run."""
    blue_first_steps: int = 2_000_000
    """Environment steps of generation 0's blues (from scratch)."""
    blue_steps: int = 500_000
    """Environment steps of every later generation's blue (warm-started)."""
    red_steps: int = 500_000
    """Environment steps of every best-response red (the exploitability budget)."""
    hidden: tuple[int, ...] = (128,)
    """Hidden widths of every policy."""
    num_envs: int = 32
    """Games per seed in every training."""
    rollout: int = 128
    """Steps per game between updates."""
    num_chunks: int = 4
    """Chunks of every training (progress lines)."""
    meta_strategy: str = "uniform"
    """How blue's training draws red's population (:data:`META_STRATEGIES`,
    :func:`meta_weights`)."""
    meta_uniform: float = 0.5
    """Under ``nash``, the share of the draw kept uniform over the population."""
    belief_input: str = "intent"
    """How a model blue observes its belief (:data:`BELIEF_INPUTS`)."""
    num_intents: int = 4
    """``K``: red's intents in blue's model (1: an intent-free family)."""
    intent_labels: str = "inferred"
    """How the model learns red's intents (:data:`~mopa.cotrain.model.
    INTENT_LABELS`): ``inferred`` without labels, or ``true``, red's private
    labels (a variant named as such)."""
    intent_rounds: int = 3
    """Rounds of the intents' EM (``inferred``)."""
    model_clone: BCConfig = dataclasses.field(
        default_factory=lambda: BCConfig(num_actions=5, hidden=(64, 64), num_epochs=20)
    )
    """Every member's clone (its ``num_actions`` red's)."""
    data_episodes: int = 64
    """Episodes of every red checkpoint recorded for blue's model (and of blue
    against the newest red for the belief's readout)."""
    eval_episodes: int = 10
    """Episodes per blue seed against every red seed (policies)."""
    planner_episodes: int = 4
    """Episodes per blue seed against every red seed (planners)."""
    planners: tuple[str, ...] = PLANNERS
    """The planning blue's planners evaluated (:data:`PLANNERS`)."""
    teacher: str = "mcts"
    """The planner DAgger distils (one of ``planners``). On ``tag_intent`` the tree
    search: at generation 0 of the default profile the lookahead catches no more
    than the MAPPO blue it rolls out, the tree search half as much again."""
    planner_rollouts: int = 4
    """Lookahead: rollouts per candidate."""
    planner_horizon: int = 5
    """Lookahead: steps per rollout (the tree search's budget is the same)."""
    planner_gamma: float = 0.95
    """Discount inside the planners' rollouts."""
    planner_joint: bool = True
    """Score the team's joint actions (pursuit: captures and the imagined prey's
    distance at the leaf, ``intent_population``'s planners); else per agent on
    the game's rewards."""
    distance_weight: float = 1.0
    """Joint pursuit planners: weight of the imagined prey's distance to the
    nearest predator at the leaf."""
    mcts_particles: int = 8
    """Tree search: (intent, member) pairs drawn from the belief per decision."""
    dagger: DaggerConfig = dataclasses.field(
        default_factory=lambda: DaggerConfig(
            max_rounds=3, keep=0.9, episodes=8, num_updates=1500
        )
    )
    """DAgger's rounds (its ``episodes`` per red of the population per round: a
    student fitted on 2 per red forgets the MAPPO blue it starts from and catches
    less than it did)."""
    seed: int = 0

    def __post_init__(self):
        check_fields(self)
        for name, allowed in (
            ("meta_strategy", META_STRATEGIES),
            ("belief_input", BELIEF_INPUTS),
            ("intent_labels", INTENT_LABELS),
            ("teacher", PLANNERS),
        ):
            if getattr(self, name) not in allowed:
                raise InvalidParameterError(
                    f"{name} must be one of {allowed}, got {getattr(self, name)!r}"
                )
        for name, options in (("blues", BLUES), ("planners", PLANNERS)):
            chosen = getattr(self, name)
            if (
                set(chosen) - set(options)
                or not chosen
                or len(set(chosen)) != len(chosen)
            ):
                raise InvalidParameterError(
                    f"{name} must be distinct names of {options}, got {chosen}"
                )
        if "plan" in self.blues and self.teacher not in self.planners:
            raise InvalidParameterError(
                f"teacher {self.teacher!r} must be one of planners {self.planners}"
            )
        for name in (
            "scripted_episodes",
            "scripted_updates",
            "generations",
            "num_seeds",
            "family_seeds",
            "family_steps",
            "blue_first_steps",
            "blue_steps",
            "red_steps",
            "num_envs",
            "rollout",
            "num_chunks",
            "num_intents",
            "data_episodes",
            "eval_episodes",
            "planner_episodes",
            "planner_rollouts",
            "planner_horizon",
            "mcts_particles",
        ):
            if getattr(self, name) < 1:
                raise InvalidParameterError(
                    f"{name} must be >= 1, got {getattr(self, name)}"
                )
        if self.intent_rounds < 0:
            raise InvalidParameterError(
                f"intent_rounds must be >= 0, got {self.intent_rounds}"
            )
        if not 0.0 <= self.meta_uniform <= 1.0:
            raise InvalidParameterError(
                f"meta_uniform must be in [0, 1], got {self.meta_uniform}"
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
            num_seeds=fields.pop("num_seeds", self.num_seeds),
            seed=seed,
            hidden=self.hidden,
            num_chunks=self.num_chunks,
            **fields,
        )

    def population_config(self) -> PopulationConfig:
        """Blue's model of red: one clone per red checkpoint and the pooled one."""
        return PopulationConfig(
            clone=self.model_clone,
            num_intents=self.num_intents,
            drop_obs_tail=self.red_private_tail,
            pooled_member=True,
        )

    @property
    def max_members(self) -> int:
        """Members blue's model can have: red's population at the last generation
        (every fitting family member, a best response per generation before it)
        and the pooled member."""
        fitting = sum(
            1
            for name, _ in self.family
            for seed in range(self.family_seeds)
            if name not in self.held_out_family and seed not in self.held_out_seeds
        )
        return fitting + self.generations - 1 + 1

    def to_dict(self) -> dict[str, Any]:
        return json.loads(json.dumps(dataclasses.asdict(self)))


# -- policies as files ----------------------------------------------------------------
def write_team(
    path: Path, config: MAPPOConfig, team: str, spec: Any, params: Any
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


def pool_source(paths: list[Path] | list[str]) -> str:
    """The frozen-team source that plays a member of ``paths`` per episode."""
    return POOL_PREFIX + ",".join(str(p) for p in paths)


LEARNERS_FORMAT = "mopa.cotrain.learners"


def write_learners(path: Path, learners: Any) -> Path:
    """A MAPPO team's actor and critic (``{"actor", "critic"}``, leaves ``[S,
    ...]``), what the next generation warm-starts from."""
    return write_msgpack(
        path,
        {
            "format": LEARNERS_FORMAT,
            "version": FORMAT_VERSION,
            "learners": jax.tree.map(np.asarray, learners),
        },
    )


def read_learners(path: str | Path) -> Any:
    return read_msgpack(Path(path), LEARNERS_FORMAT)["learners"]


# -- the meta-strategy -----------------------------------------------------------------
def meta_weights(
    config: CotrainConfig, num_reds: int, payoffs: np.ndarray | None = None
) -> list[float]:
    """How blue's training draws red's population: one weight per red
    checkpoint (``num_reds``).

    ``uniform``: every checkpoint alike. ``nash``: ``meta_uniform`` of the draw
    uniform, the rest red's equilibrium mixture of the zero-sum meta-game whose
    row player is blue's last generation and whose payoffs are its scores
    against each red (``payoffs [R]``, :func:`mopa.league.nash.meta_nash`: the
    reds that hold it lowest); uniform where there is no payoff yet (generation
    0).
    """
    if payoffs is None or config.meta_strategy == "uniform":
        return [1.0] * num_reds
    if len(payoffs) != num_reds:
        raise InvalidParameterError(
            f"payoffs must hold one score per red ({num_reds}), got {len(payoffs)}"
        )
    nash = meta_nash(np.asarray(payoffs, np.float64)[None, :]).column
    uniform = np.full(len(payoffs), 1.0 / len(payoffs))
    mixed = config.meta_uniform * uniform + (1.0 - config.meta_uniform) * nash
    return mixed.tolist()


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
            first the family's runs, then one job per blue lineage (generation
            0's common blues run in this process between the two). ``None`` runs
            them here, one after another. The results do not depend on it: every
            job reads and writes only its own stages under ``stages.root``.
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
    league = _League(fitting, held_out, identities)
    common = _common_blues(config, env, env_params, league, progress, stages)
    runs = jobs("lineage", [(blue, league, common) for blue in config.blues])
    lineages = {
        blue: run["generations"] for blue, run in zip(config.blues, runs, strict=True)
    }
    ratings = write_league(
        config,
        stages.root,
        [
            *family["checkpoints"],
            *common["checkpoints"],
            *(c for run in runs for c in run["checkpoints"]),
        ],
        [match for run in runs for match in run["matches"]],
    )
    return {
        "metric": config.metric,
        "family": {"members": family["members"]},
        "common": common["result"],
        "lineages": lineages,
        "improvement": {
            blue: run["improvement"]
            for blue, run in zip(config.blues, runs, strict=True)
        },
        "final": {
            blue: {
                key: lineages[blue][-1][key]
                for key in (
                    "score_vs_population",
                    "score_vs_held_out",
                    "score_vs_newest",
                    "exploitability",
                )
            }
            for blue in config.blues
        },
        "criteria": criteria(config, lineages, runs),
        "ratings": ratings,
        "timing_s": dict(stages.timing_s),
    }


class _League(NamedTuple):
    """Red's family as the lineages start from it: checkpoint paths."""

    fitting: list[str]
    """Red's population at generation 0."""
    held_out: list[str]
    identities: dict[str, str]
    """Checkpoint path -> name."""


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
        blue, league, common = job.arg
        result = _lineage(
            config, blue, env, env_params, league, common, job.progress, stages
        )
    return _JobOutcome(result, dict(stages.timing_s), list(stages.reused))


def check_league_game(config: CotrainConfig, env, env_params) -> None:
    """Refuse, before any training, a game the league cannot play: blue must be
    its first team of two, red the second, ``metric`` one of its totals, and a
    belief input the game can carry."""
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
    for _, fields in config.family:
        if SCRIPTED in dict(fields):
            check_scripted_game(
                env, config.game, config.red_team, dict(fields)[SCRIPTED]
            )
    width = env.observation_space(env.team_index(config.red_team)).shape[0]
    if config.red_private_tail >= width:
        raise InvalidParameterError(
            f"red_private_tail ({config.red_private_tail}) must be less than red's "
            f"observation width ({width})"
        )
    space = env.action_space(env.team_index(config.red_team))
    if getattr(space, "n", None) != config.model_clone.num_actions:
        raise InvalidParameterError(
            f"model_clone.num_actions ({config.model_clone.num_actions}) must be "
            f"red's actions ({space})"
        )
    if config.belief_input == "intent" and (
        config.num_intents == 1 or not _has_intent_input(env, config)
    ):
        raise InvalidParameterError(
            f"belief_input 'intent' needs a game whose {config.blue_team!r} "
            f"observes an intent input of num_intents ({config.num_intents}) "
            f"entries ({config.game} with predator_intent_obs); use 'appended'"
        )


def _has_intent_input(env, config: CotrainConfig) -> bool:
    intent_env, _ = intent_game(config)
    try:
        IntentBeliefInput(
            intent_env,
            config.blue_team,
            config.red_team,
            config.population_config(),
            _placeholder_clones(config, intent_env),
        )
    except InvalidParameterError:
        return False
    return True


def _placeholder_clones(config: CotrainConfig, env) -> Any:
    """Untrained clone weights of one member (to check a game, never played)."""
    from mopa.opponent.bc import init_bc_params

    red = env.team_index(config.red_team)
    width = env.observation_space(red).shape[0] - config.red_private_tail
    params = init_bc_params(
        config.model_clone, jax.random.key(0), width, config.num_intents
    )
    return jax.tree.map(lambda x: x[None], params)


# -- red's family ----------------------------------------------------------------------
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
        train = config.train_config(
            config.family_steps,
            config.seed + 100 + index,
            num_seeds=config.family_seeds,
            **dict(fields),
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
                    **({"training": result["final"]} if "final" in result else {}),
                }
            )
    return {"members": members, "checkpoints": checkpoints}


def _clone_family(config, red_type: str, train: MAPPOConfig, folder: Path, progress):
    """Every seed's clone of the scripted red ``red_type``, one checkpoint each."""
    env, env_params = make(config.game, **dict(config.game_overrides))
    spec = actor_spec(train, team_infos(env)[env.team_index(config.red_team)])
    files, clones = [], []
    for seed in range(config.family_seeds):
        weights, facts = clone_scripted(
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


# -- the games blue plays --------------------------------------------------------------
def _blue_overrides(config: CotrainConfig, model_path: str | None) -> tuple:
    """The game overrides a blue's training config records (its game is passed
    in; the record says which)."""
    if model_path is None or config.belief_input != "intent":
        return ()
    return (("predator_intent_obs", True),)


# -- generation 0's common blues -------------------------------------------------------
def _common_blues(config, env, env_params, league: _League, progress, stages):
    """Generation 0's blues: the blind blue and, when a model blue runs, the model
    of red's family (on episodes against the blind blue) and the model blue on
    it. Returns ``{"blind", "model", "model_blue", "result", "checkpoints"}``
    (paths and the stages' results)."""
    population = list(league.fitting)
    weights = meta_weights(config, len(population))
    blind_result, blind_path, blind_train = _blue_stage(
        config,
        stages,
        "blue_blind_g0",
        population,
        weights,
        None,
        None,
        config.blue_first_steps,
        config.seed + 1000,
        progress,
    )
    out = {
        "blind": blind_path,
        "model": None,
        "model_blue": None,
        "result": {"blind": blind_result},
        "checkpoints": [_checkpoint(blind_path, "blue_blind", 0, blind_train)],
    }
    if set(config.blues) <= {"blind"}:
        return out
    model_result, model_path = _model_stage(
        config, stages, "model_g0", population, league, blind_path, None, 0, progress
    )
    model_blue, model_blue_path, model_train = _blue_stage(
        config,
        stages,
        "blue_model_g0",
        population,
        weights,
        model_path,
        None,
        config.blue_first_steps,
        config.seed + 2000,
        progress,
    )
    out.update(
        model=model_path,
        model_blue=model_blue_path,
        result={"blind": blind_result, "model": model_result, "model_blue": model_blue},
    )
    out["checkpoints"] += [
        _checkpoint(model_path, "model", 0),
        _checkpoint(model_blue_path, "blue_model", 0, model_train),
    ]
    return out


# -- a lineage -------------------------------------------------------------------------
def _lineage(
    config, blue, env, env_params, league: _League, common, progress, stages
) -> dict[str, Any]:
    population = list(league.fitting)  # red's population, as checkpoint paths
    identities = dict(league.identities)  # this lineage's best responses join it
    modelled = blue != "blind"
    model_path = common["model"] if modelled else None
    blue_path = common["model_blue"] if modelled else common["blind"]
    generations, checkpoints, matches = [], [], []
    evaluations: list[dict[str, Any]] = []
    previous = None  # {"blue", "model", "learners"} of the generation before
    for g in range(config.generations):
        tag = f"{blue}_g{g}"
        model_result = None
        if g > 0 and blue in ("remodel", "plan"):
            model_result, model_path = _model_stage(
                config,
                stages,
                f"model_{tag}",
                population,
                _League(population, league.held_out, identities),
                previous["blue"],
                previous["model"],
                g,
                progress,
            )
            checkpoints.append(_checkpoint(model_path, f"{blue}_model", g))
        payoffs = None if g == 0 else evaluations[-1]["payoffs"]
        weights = meta_weights(config, len(population), payoffs)
        if g == 0:
            blue_result = common["result"]["model_blue" if modelled else "blind"]
            blue_train = None
        else:
            blue_result, blue_path, blue_train = _blue_stage(
                config,
                stages,
                f"blue_{tag}",
                population,
                weights,
                model_path,
                previous["learners"],
                config.blue_steps,
                config.seed + 1000 * (BLUES.index(blue) + 1) + g,
                progress,
            )
            checkpoints.append(_checkpoint(blue_path, f"blue_{blue}", g, blue_train))
        rollout_path, distillation = None, None
        learners = str(Path(blue_path).with_suffix(".learners"))
        if blue == "plan":
            rollout_path = blue_path
            if g > 0:  # the rollout policy (generation 0's is common)
                checkpoints[-1]["run_id"] = "blue_plan_rollout"
            stage = f"distill_{tag}"
            distillation = stages.run(
                stage,
                {
                    "rollout": _fingerprint(rollout_path),
                    "model": _fingerprint(model_path),
                    "reds": [_fingerprint(p) for p in population],
                    "planner": _planner_inputs(config),
                    "dagger": _plain(config.dagger),
                    "seed": config.seed,
                },
                functools.partial(
                    _distill, config, model_path, rollout_path, population, g, progress
                ),
            )
            blue_path = str(stages.folder(stage) / "blue.policy")
            learners = str(stages.folder(stage) / "blue.learners")
            checkpoints.append(_checkpoint(blue_path, f"blue_{blue}", g))
        red_result, red_path, red_train = _red_stage(
            config,
            stages,
            f"red_{tag}",
            blue_path,
            model_path,
            config.seed + 1000 * (BLUES.index(blue) + 1) + 500 + g,
            progress,
        )
        checkpoints.append(_checkpoint(red_path, f"red_{blue}", g, red_train))
        newest = [population[-1]] if population[-1] not in league.fitting else []
        # The newest red of the population is a member of a model fitted on it.
        fitted_on = blue in ("remodel", "plan") or g == 0
        newest_member = len(population) - 1 if modelled and fitted_on else None
        evaluation = _eval_stage(
            config,
            stages,
            f"eval_{tag}",
            blue_path,
            rollout_path,
            model_path,
            population,
            league.held_out,
            red_path,
            newest,
            newest_member,
            g,
            progress,
        )
        evaluations.append(evaluation)
        red_names = {
            **{f"population_{i}": identities[p] for i, p in enumerate(population)},
            **{f"held_out_{i}": identities[p] for i, p in enumerate(league.held_out)},
            "best_response_0": f"best_response_{tag}",
        }
        for row, scores in evaluation["scores"].items():
            player = tag if row == "blue" else f"{tag}_{row}"
            for column, values in scores.items():
                matches.append((player, red_names[column], g, values))
        generations.append(
            {
                "generation": g,
                "population_size": len(population),
                "meta_weights": weights,
                "model": (
                    common["result"]["model"] if g == 0 and modelled else model_result
                ),
                "blue_training": blue_result["final"],
                "distillation": distillation,
                "best_response_training": red_result["final"],
                **evaluation["summary"],
            }
        )
        previous = {"blue": blue_path, "model": model_path, "learners": learners}
        # Every generation compiles new programs (red's population grows, so the
        # shapes change); XLA's CPU code lives in memory mappings of its own, and
        # a whole league's worth outgrows the kernel's limit on mappings
        # (vm.max_map_count, 65,530 by default: "LLVM compilation error: Cannot
        # allocate memory" at the fourth generation of the default profile).
        # Dropping the compiled programs after each generation bounds them; a
        # program compiled again is the same program, so no figure moves.
        jax.clear_caches()
        population = [*population, red_path]
        identities[red_path] = f"best_response_{tag}"
    return {
        "generations": generations,
        "improvement": _improvement(evaluations),
        "checkpoints": checkpoints,
        "matches": matches,
    }


def _improvement(evaluations: list[dict[str, Any]]) -> dict[str, Any]:
    """Every row's score against the held-out reds at the last generation less
    generation 0's, paired episode by episode (the same keys), with its 95%
    interval."""
    from mopa.eval.intervals import mean_interval

    first, last = (
        evaluations[0]["held_out_episodes"],
        evaluations[-1]["held_out_episodes"],
    )
    return {
        row: mean_interval(np.asarray(last[row]) - np.asarray(first[row]))
        for row in last
        if row in first
    }


# -- the stages ------------------------------------------------------------------------
def _model_stage(
    config,
    stages,
    stage,
    population,
    league: _League,
    blue_path,
    blue_model,
    g,
    progress,
) -> tuple[dict[str, Any], str]:
    """Blue's model of ``population``, fitted on episodes of every red against
    the blue at ``blue_path`` (in the game of its model ``blue_model``; ``None``:
    the blind blue): ``(the stage's result, the model's path)``."""
    inputs = {
        "reds": [_fingerprint(p) for p in population],
        "blue": _fingerprint(blue_path),
        "blue_model": _fingerprint(blue_model),
        "population": _plain(config.population_config()),
        "intent_labels": config.intent_labels,
        "intent_rounds": config.intent_rounds,
        "belief_input": config.belief_input,
        "episodes": config.data_episodes,
        "seed": config.seed,
        "game": config.game,
        "game_overrides": _plain(config.game_overrides),
    }
    result = stages.run(
        stage,
        inputs,
        lambda folder: _fit_model(
            config, population, league, blue_path, blue_model, folder, g, progress
        ),
    )
    return result, str(stages.folder(stage) / "model.msgpack")


def _fit_model(
    config, population, league: _League, blue_path, blue_model, folder, g, progress
) -> dict[str, Any]:
    progress(f"[model g{g}] {len(population)} reds x {config.data_episodes} episodes")
    game, game_params = blue_game(config, blue_model)
    blue_spec, blue_stack = read_team(blue_path, config.blue_team)
    blue = PolicyPlayer(blue_spec, greedy=True)
    key = jax.random.fold_in(jax.random.key(config.seed), 7000 + g)
    datasets = []
    for i, path in enumerate(population):
        red_spec, red_params = read_team(path, config.red_team)
        datasets.append(
            record_red(
                game,
                game_params,
                blue,
                jax.tree.map(lambda x: x[0], blue_stack),
                PolicyPlayer(red_spec, greedy=False),
                red_params,
                jax.random.fold_in(key, i),
                config.data_episodes,
            )
        )
    env, _ = make(config.game, **dict(config.game_overrides))
    clones, facts = fit_red_model(
        jax.random.fold_in(jax.random.key(config.seed), 9000 + g),
        env,
        config.population_config(),
        datasets,
        config.red_team,
        intent_labels=config.intent_labels,
        intent_rounds=config.intent_rounds,
    )
    write_model(folder / "model.msgpack", config.population_config(), clones)
    return {
        "members": [league.identities[p] for p in population] + ["pooled"],
        "episodes_per_member": config.data_episodes,
        **facts,
    }


def _blue_stage(
    config, stages, stage, population, weights, model_path, start, steps, seed, progress
) -> tuple[dict[str, Any], str, MAPPOConfig]:
    """Train blue against the population drawn by ``weights``, in the game of
    ``model_path`` (``None``: the plain game), from the learners file ``start``
    (``None``: from scratch): ``(the stage's result, the policy's path, the
    training's config)``."""
    source = weighted_pool_source(population, weights)
    train = config.train_config(
        steps,
        seed,
        env_overrides=_blue_overrides(config, model_path),
        frozen=((config.red_team, source),),
    )
    inputs = {
        # The frozen pool names the opponents' paths: their content stands in.
        "train": {k: v for k, v in train.to_dict().items() if k != "frozen"},
        "opponents": [_fingerprint(p) for p in population],
        "weights": list(weights),
        "model": _fingerprint(model_path),
        "belief_input": config.belief_input,
        "start": _fingerprint(start),
    }
    result = stages.run(
        stage,
        inputs,
        lambda folder: _train_blue(
            config, train, model_path, start, folder, stage, progress
        ),
    )
    return result, str(stages.folder(stage) / "blue.policy"), train


def _train_blue(config, train, model_path, start, folder, stage, progress):
    game = blue_game(config, model_path)
    warm = None if start is None else {config.blue_team: read_learners(start)}
    result = run_training(
        train, progress=_report(stage, progress), game=game, start=warm
    )
    spec, params = result.policies[config.blue_team]
    write_team(folder / "blue.policy", train, config.blue_team, spec, params)
    write_learners(folder / "blue.learners", result.learners[config.blue_team])
    return {"final": _final(result.summary), "wall_s": result.wall_s}


def _red_stage(
    config, stages, stage, blue_path, model_path, seed, progress
) -> tuple[dict[str, Any], str, MAPPOConfig]:
    """A fresh red trained against every seed of the blue at ``blue_path`` as it
    plays (its mode), in blue's game: ``(result, the policy's path, config)``."""
    source = GREEDY_PREFIX + pool_source([blue_path])
    train = config.train_config(
        config.red_steps,
        seed,
        env_overrides=_blue_overrides(config, model_path),
        frozen=((config.blue_team, source),),
    )
    inputs = {
        "train": {k: v for k, v in train.to_dict().items() if k != "frozen"},
        "blue": _fingerprint(blue_path),
        "greedy": True,
        "model": _fingerprint(model_path),
        "belief_input": config.belief_input,
    }

    def train_red(folder: Path) -> dict[str, Any]:
        result = run_training(
            train,
            progress=_report(stage, progress),
            game=blue_game(config, model_path),
        )
        spec, params = result.policies[config.red_team]
        write_team(folder / "red.policy", train, config.red_team, spec, params)
        return {"final": _final(result.summary), "wall_s": result.wall_s}

    result = stages.run(stage, inputs, train_red)
    return result, str(stages.folder(stage) / "red.policy"), train


def _distill(config, model_path, rollout_path, population, g, progress, folder):
    """The teacher planner distilled by DAgger for every blue seed (the student
    warm-started from that seed's MAPPO blue, the planner rolling that blue out),
    against every seed of every red of the population; written as
    ``blue.policy`` and ``blue.learners`` (the student's actor, the MAPPO blue's
    critic: the next generation warm-starts from both)."""

    game, params = blue_game(config, model_path)
    spec, stacked = read_team(rollout_path, config.blue_team)
    learners = read_learners(Path(rollout_path).with_suffix(".learners"))
    teacher, teacher_params = planner_entry(
        config, game, params, config.teacher, spec, stacked
    )
    red_spec, reds = _stack_reds(config, population)
    blue = game.team_index(config.blue_team)
    progress(
        f"[distill g{g}] {config.teacher} into the policy: {pool_size(stacked)} "
        f"seeds x {pool_size(reds)} reds x {config.dagger.episodes} episodes"
    )
    key = jax.random.fold_in(jax.random.key(config.seed), 8000 + g)
    students, facts = [], []
    for s in range(pool_size(stacked)):
        weights, rounds = dagger(
            game,
            params,
            blue,
            spec,
            jax.tree.map(lambda x, s=s: x[s], stacked),
            teacher,
            jax.tree.map(lambda x, s=s: x[s], teacher_params),
            PolicyPlayer(red_spec, greedy=False),
            reds,
            jax.random.fold_in(key, s),
            config.dagger,
            score_key=config.metric,
        )
        students.append(weights)
        facts.append([_plain(r._asdict()) for r in rounds])
        progress(
            f"[distill g{g} s{s}] {len(rounds) - 1} rounds: the student scores "
            f"{_student_score(facts[-1]):.2f} against the planner's "
            f"{rounds[0].score:.2f}"
        )
    actors = jax.tree.map(lambda *x: np.stack([np.asarray(v) for v in x]), *students)
    train = config.train_config(config.blue_steps, config.seed)
    write_team(folder / "blue.policy", train, config.blue_team, spec, actors)
    write_learners(folder / "blue.learners", {**learners, "actor": actors})
    return {
        "teacher": config.teacher,
        "seeds": facts,
        "keeps": [_student_score(r) / max(r[0]["score"], 1e-9) for r in facts],
    }


def _student_score(rounds: list[dict[str, Any]]) -> float:
    """The score of the student :func:`~mopa.planning.dagger` returns: the round
    that met ``keep`` is the last and the best, and without one it returns the
    best student played."""
    return max(r["score"] for r in rounds[1:])


def _stack_reds(config, paths: list[str]) -> tuple[Any, Any]:
    """``(spec, params [P, ...])``: every seed of every red checkpoint (they share
    one network, as a pool does)."""
    specs, params = [], []
    for path in paths:
        spec, stacked = read_team(path, config.red_team)
        specs.append(spec)
        params.append(stacked)
    return specs[0], jax.tree.map(lambda *x: np.concatenate(x), *params)


def _planner_inputs(config: CotrainConfig) -> dict[str, Any]:
    """The config fields that change how the planners play."""
    return {
        name: _plain(getattr(config, name))
        for name in (
            "planners",
            "teacher",
            "planner_rollouts",
            "planner_horizon",
            "planner_gamma",
            "planner_joint",
            "distance_weight",
            "mcts_particles",
        )
    }


def _eval_stage(
    config,
    stages,
    stage,
    blue_path,
    rollout_path,
    model_path,
    population,
    held_out,
    red_path,
    newest,
    newest_member,
    g,
    progress,
) -> dict[str, Any]:
    """The evaluation stage (:func:`mopa.cotrain.evaluation.evaluate`)."""

    inputs = {
        "blue": _fingerprint(blue_path),
        "rollout": _fingerprint(rollout_path),
        "model": _fingerprint(model_path),
        "reds": [_fingerprint(p) for p in population],
        "held_out": [_fingerprint(p) for p in held_out],
        "best_response": _fingerprint(red_path),
        "newest": [_fingerprint(p) for p in newest],
        "newest_member": newest_member,
        "episodes": [config.eval_episodes, config.planner_episodes],
        "data_episodes": config.data_episodes,
        "planner": _planner_inputs(config) if rollout_path else None,
        "belief_input": config.belief_input,
        "seed": config.seed,
        "outcome": _outcome(*make(config.game, **dict(config.game_overrides))),
        "result_format": EVAL_FORMAT,
    }
    return stages.run(
        stage,
        inputs,
        lambda folder: evaluate(
            config,
            blue_path,
            rollout_path,
            model_path,
            population,
            held_out,
            red_path,
            newest,
            newest_member,
            g,
            progress,
        ),
    )


def criteria(
    config: CotrainConfig, lineages: dict[str, list], runs: list[dict]
) -> dict[str, Any]:
    """The last generation's comparisons, where both sides ran: each planner's
    and the distilled policy's scores over ``blind``'s (ratio of means, and
    whether the two 95% intervals are apart), the distilled policy's over its
    teacher's, and ``remodel``'s over ``fit_once``'s on the newest reds; every
    blue's improvement is in ``improvement``."""

    def apart(a: dict, b: dict) -> bool:
        return a["ci95"][0] > b["ci95"][1] or b["ci95"][0] > a["ci95"][1]

    def compare(a: dict, b: dict) -> dict[str, Any]:
        return {
            "ratio": a["mean"] / b["mean"] if b["mean"] else None,
            "intervals_apart": apart(a, b),
            "a": a["mean"],
            "b": b["mean"],
        }

    out: dict[str, Any] = {}
    last = {blue: generations[-1] for blue, generations in lineages.items()}
    if "plan" in last and "blind" in last:
        plan, blind = last["plan"], last["blind"]
        for key in ("score_vs_held_out", "score_vs_population"):
            for kind in config.planners:
                out[f"{kind}_over_blind/{key}"] = compare(
                    plan["planners"][kind][key], blind[key]
                )
            out[f"distilled_over_blind/{key}"] = compare(plan[key], blind[key])
        out["distilled_over_blind/exploitability"] = compare(
            plan["exploitability"]["score_vs_best_response"],
            blind["exploitability"]["score_vs_best_response"],
        )
        teacher = plan["planners"][config.teacher]
        for key in ("score_vs_population", "score_vs_held_out"):
            out[f"distilled_over_{config.teacher}/{key}"] = compare(
                plan[key], teacher[key]
            )
    if "remodel" in last and "fit_once" in last:
        out["remodel_over_fit_once/score_vs_newest"] = compare(
            last["remodel"]["score_vs_newest"], last["fit_once"]["score_vs_newest"]
        )
    return out


# -- outcomes, ratings and the manifest ----------------------------------------------
def _outcome(env, env_params) -> str:
    """How blue's episodes are won: the league's rule for the game
    (:func:`mopa.league.arena.outcome_rule`: ``battalion`` or ``pursuit``), else
    ``returns`` (blue wins an episode whose return beats red's)."""
    try:
        return outcome_rule(env, env_params)
    except InvalidParameterError:
        return "returns"


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
