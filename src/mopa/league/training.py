"""``train(config, *, callbacks, resume, **overrides)``: one league learner, trained
in jitted chunks against the game's built-in opponent, a fixed policy, or a
self-play pool, with a curriculum, callbacks, checkpoints and resumption.

How it runs: the learner is MAPPO/IPPO (:mod:`mopa.algos.mappo`) playing one side
of an :class:`~mopa.league.arena.Arena`. The arena's numbers (game params, the
pool's stacked weights and sampling weights) are an argument of the compiled
chunk, not a constant of it: the trainer is built *inside* the jitted function
from the traced params. A new snapshot, a new sampling distribution or a
parameter-only curriculum stage therefore reuses the compiled program; a stage
that changes shapes (team sizes) compiles a new one and carries the learner's
weights over where shapes allow (:func:`~mopa.league.curriculum.transfer_weights`).

Between chunks, on the host: the curriculum records every finished episode's
outcome and may promote; a snapshot joins the pool once ``snapshot_freq``
environment steps passed since the last one; a periodic checkpoint (policy file
plus the whole trainer state) is written atomically and entered in the manifest;
the league state (curriculum, snapshot trigger, stage, chunk) is committed to the
store; callbacks run. ``resume=<league dir>`` continues the run ``run_id`` from
its last committed chunk with pool, ratings and curriculum as they were.

Two more settings serve transfer benchmarks: ``init_checkpoint`` starts the
learner's actor from a policy checkpoint (fine-tuning; the critic starts fresh,
as a policy file holds no critic, and may first learn alone for
``critic_warmup_chunks`` chunks), and ``scenarios`` makes the run cycle through
a set of game settings, chunk ``i`` playing ``scenarios[i % len(scenarios)]`` on
top of the run's game and curriculum settings (scenarios that only change
parameters share one compiled program, so many short chunks give a mixture of
scenarios at no compile cost).

A league learner is one seed (its identity in the pool and the ratings); run
seeds as separate ``run_id``-s.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from mopa.algos.driver import run_updates
from mopa.algos.mappo.config import MAPPOConfig
from mopa.algos.mappo.train import make_trainer
from mopa.core import checkpoint
from mopa.core.checks import check_count, check_fields, check_unit
from mopa.core.runinfo import run_metadata
from mopa.envs import make
from mopa.envs.battalion_wrappers import SCRIPTED_VARIANTS
from mopa.errors import CheckpointError, InvalidParameterError, MissingPathError
from mopa.league.arena import Arena, ArenaParams, stack_opponents
from mopa.league.curriculum import (
    CurriculumScheduler,
    CurriculumStage,
    transfer_weights,
)
from mopa.league.evaluation import LeaguePolicy, _opponent_policy, _two_team
from mopa.league.manifest import CheckpointManifest, config_hash
from mopa.league.pool import SAMPLING, OpponentPool, SnapshotTrigger
from mopa.league.store import DB_FILE, LeagueStore
from mopa.policy import PolicySpec, init_params

BUILTIN = "builtin"
"""``opponent`` value: the game's own embedded opponent (``battalion_vs_red``)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class TrainingConfig:
    """Settings of one league training run (every field optional)."""

    game: str = "battalion_vs_red"
    """Registered game; battalion games get discrete actions automatically."""
    game_kwargs: tuple[tuple[str, Any], ...] = ()
    """``(field, value)`` overrides of the game (before any curriculum stage)."""
    team: str | None = None
    """The learning side (default the game's first team)."""
    opponent: str = BUILTIN
    """``builtin`` (the game's embedded opponent), ``random`` or a checkpoint path;
    ignored with ``enable_self_play``."""
    enable_self_play: bool = False
    """Play against a pool of the learner's own snapshots (symmetric games)."""
    algo: str = "mappo"
    """``mappo`` or ``ippo``."""
    total_timesteps: int = 100_000
    """Environment steps of the whole run."""
    n_envs: int = 16
    """Games played in parallel."""
    n_steps: int = 32
    """Steps per game per update."""
    num_chunks: int = 10
    """Jitted chunks; checkpoints, curriculum, snapshots and callbacks run
    between them."""
    lr: float = 3e-4
    """Adam learning rate."""
    hidden: tuple[int, ...] = (64,)
    """Hidden widths of actor and critic."""
    update_epochs: int = 4
    """PPO passes per rollout."""
    num_minibatches: int = 4
    """PPO minibatches per pass."""
    ent_coef: float = 0.01
    """Entropy bonus."""
    gamma: float = 0.99
    """Discount."""
    seed: int = 0
    """Random seed of the learner."""
    checkpoint_dir: str | None = None
    """League directory (store, checkpoints, pool); ``None``: nothing is saved
    and self-play keeps its pool in a temporary directory."""
    run_id: str = "run"
    """Name of this run inside the league (checkpoints, ratings, resumption)."""
    pool_max_size: int = 8
    """Snapshots kept in the self-play pool."""
    snapshot_freq: int = 20_000
    """Environment steps between self-play snapshots."""
    pool_sampling: str = "uniform"
    """``uniform``, ``latest`` or ``pfsp`` (see :mod:`mopa.league.pool`)."""
    latest_ratio: float | None = None
    """Probability of the newest snapshot (the rest by ``pool_sampling``)."""
    curriculum: tuple[CurriculumStage, ...] = ()
    """Curriculum stages (empty: none)."""
    promote_threshold: float = 0.70
    """Rolling win rate that promotes to the next stage."""
    win_rate_window: int = 50
    """Episodes of the rolling win rate."""
    keep_checkpoints: int = 3
    """Periodic checkpoints kept on disk (referenced ones are never deleted)."""
    init_checkpoint: str | None = None
    """Policy checkpoint whose actor weights start the learner (fine-tuning);
    every layer must fit. ``None``: fresh weights."""
    critic_warmup_chunks: int = 0
    """With ``init_checkpoint``: chunks at the start during which the actor is
    held at the checkpoint's weights while only the critic learns (a policy
    checkpoint holds no critic, and a fresh critic's values would steer the first
    updates of a trained actor). Their steps count in ``total_timesteps``."""
    scenarios: tuple[CurriculumStage, ...] = ()
    """Game settings the chunks cycle through (chunk ``i`` plays
    ``scenarios[i % len(scenarios)]`` on top of the game and curriculum
    settings); empty: one setting throughout."""

    def __post_init__(self):
        check_fields(self)  # dicts of stages become CurriculumStage, lists tuples
        object.__setattr__(self, "game_kwargs", _pairs(self.game_kwargs))
        for name in (
            "n_envs",
            "n_steps",
            "num_chunks",
            "pool_max_size",
            "snapshot_freq",
            "win_rate_window",
            "update_epochs",
            "num_minibatches",
        ):
            check_count(name, getattr(self, name))
        if self.total_timesteps < 1:
            raise InvalidParameterError(
                f"total_timesteps must be >= 1, got {self.total_timesteps}"
            )
        if self.pool_sampling not in SAMPLING:
            raise InvalidParameterError(
                f"pool_sampling must be one of {SAMPLING}, got {self.pool_sampling!r}"
            )
        if self.algo not in ("mappo", "ippo"):
            raise InvalidParameterError(
                f"algo must be mappo or ippo, got {self.algo!r}"
            )
        check_unit("promote_threshold", self.promote_threshold)
        if self.critic_warmup_chunks < 0:
            raise InvalidParameterError(
                f"critic_warmup_chunks must be >= 0, got {self.critic_warmup_chunks}"
            )
        if self.critic_warmup_chunks and self.init_checkpoint is None:
            raise InvalidParameterError(
                "critic_warmup_chunks needs init_checkpoint (a trained actor to hold)"
            )
        if self.keep_checkpoints < 0:
            raise InvalidParameterError("keep_checkpoints must be >= 0")
        if not self.run_id.replace("-", "").replace("_", "").isalnum():
            raise InvalidParameterError(
                f"run_id must be letters, digits, '-' or '_', got {self.run_id!r}"
            )
        self.mappo_config()  # validates the learner's settings

    def replace(self, **changes: Any) -> TrainingConfig:
        """A copy with ``changes``; an unknown field raises ``ValueError`` naming
        it."""
        names = {f.name for f in dataclasses.fields(self)}
        unknown = sorted(set(changes) - names)
        if unknown:
            raise InvalidParameterError(f"unknown TrainingConfig field {unknown[0]!r}")
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        for field in ("curriculum", "scenarios"):
            data[field] = [
                {"name": s.name, "game_kwargs": [list(p) for p in s.game_kwargs]}
                for s in getattr(self, field)
            ]
        return data

    def identity(self) -> dict[str, Any]:
        """What makes two runs the same run (everything but where it is saved)."""
        data = self.to_dict()
        data.pop("checkpoint_dir")
        return data

    def mappo_config(self) -> MAPPOConfig:
        return MAPPOConfig(
            algo=self.algo,
            env=self.game,
            total_steps=self.total_timesteps,
            num_envs=self.n_envs,
            num_steps=self.n_steps,
            num_seeds=1,
            seed=self.seed,
            num_chunks=self.num_chunks,
            lr=self.lr,
            anneal_lr=False,
            hidden=self.hidden,
            update_epochs=self.update_epochs,
            num_minibatches=self.num_minibatches,
            ent_coef=self.ent_coef,
            gamma=self.gamma,
        )


def _pairs(value: Any) -> tuple[tuple[str, Any], ...]:
    if isinstance(value, dict):
        value = sorted(value.items())
    return tuple((str(k), tuple(v) if isinstance(v, list) else v) for k, v in value)


# -- the game of a stage -----------------------------------------------------------
def _is_battalion(game: str) -> bool:
    return game in SCRIPTED_VARIANTS or game in SCRIPTED_VARIANTS.values()


def learner_spec(env, team: int, config: TrainingConfig) -> PolicySpec:
    """The actor spec MAPPO builds for ``team`` of ``env``."""
    return PolicySpec(
        kind="actor",
        num_agents=env.team_sizes[team],
        obs_size=int(env.observation_space(team).shape[0]),
        num_actions=env.action_space(team).n,
        hidden=config.hidden,
        activation="tanh",
        agent_id=True,
    )


class StageGame(NamedTuple):
    arena: Arena
    game_params: Any
    spec: PolicySpec
    """The learner's policy spec."""
    overrides: dict[str, Any]
    """The game overrides of this stage (as a checkpoint records them)."""
    fixed_opponent: Any
    """Stacked params of a fixed opponent (``None`` for the built-in one or a
    pool)."""


def build_stage(config: TrainingConfig, stage_kwargs: dict[str, Any]) -> StageGame:
    """The arena of ``config`` at a curriculum stage.

    Raises:
        InvalidParameterError: a self-play game whose two sides differ, a two-team
            game without an opponent, or an unknown learning side.
    """
    overrides = {**dict(config.game_kwargs), **stage_kwargs}
    if _is_battalion(config.game):
        overrides.setdefault("discrete", True)
    two_team = config.enable_self_play or config.opponent != BUILTIN
    if two_team:
        env, params = _two_team(config.game, overrides)
    else:
        env, params = make(config.game, **overrides)
        if env.num_teams != 1:
            raise InvalidParameterError(
                f"{config.game} has two teams: set opponent ('random' or a "
                "checkpoint) or enable_self_play"
            )
    team = config.team or env.team_names[0]
    if team not in env.team_names:
        raise InvalidParameterError(
            f"team {team!r} is not a team of {config.game}: {env.team_names}"
        )
    learner = env.team_names.index(team)
    spec = learner_spec(env, learner, config)
    if not two_team:
        return StageGame(Arena(env), params, spec, overrides, None)
    other = 1 - learner
    if config.enable_self_play:
        opponent_spec = learner_spec(env, other, config)
        if (opponent_spec.obs_size, opponent_spec.num_actions) != (
            spec.obs_size,
            spec.num_actions,
        ):
            raise InvalidParameterError(
                f"self-play needs sides that observe and act alike; {config.game}'s "
                f"{env.team_names} differ (train against a checkpoint instead)"
            )
        return StageGame(
            Arena(env, learner, opponent_spec), params, spec, overrides, None
        )
    if config.opponent == "random":
        opponent_spec = PolicySpec(
            kind="random",
            num_agents=env.team_sizes[other],
            obs_size=int(env.observation_space(other).shape[0]),
            num_actions=env.action_space(other).n,
        )
        return StageGame(
            Arena(env, learner, opponent_spec), params, spec, overrides, {}
        )
    if not Path(config.opponent).exists():
        raise MissingPathError(f"no opponent checkpoint at {config.opponent}")
    mine = LeaguePolicy(spec, None, config.game, (), team)
    opposing = _opponent_policy(config.opponent, env.team_names[other], mine)
    # Slot 0 of a pool-sized stack: a fixed opponent's run has the shapes of a
    # self-play run with the same settings, so the two share one compilation.
    stacked, _ = stack_opponents([opposing.params], config.pool_max_size)
    return StageGame(
        Arena(env, learner, opposing.spec), params, spec, overrides, stacked
    )


# -- compiled pieces ----------------------------------------------------------------
@functools.lru_cache(maxsize=16)
def _compile(mconfig: MAPPOConfig, arena: Arena, length: int):
    """``(init(key, params), run(carry, params, n) -> (carry, rows [length]))``,
    jitted; the trainer is built inside from the traced ``params``."""

    def init(key, params):
        return make_trainer(mconfig, (arena, params)).init(key)

    def run(carry, params, n):
        trainer = make_trainer(mconfig, (arena, params))
        return run_updates(trainer.update, carry, n, length)

    return jax.jit(init), jax.jit(run)


# -- the run as callbacks see it -------------------------------------------------------
@dataclasses.dataclass
class LeagueRun:
    """The state of a run between chunks (what callbacks read)."""

    config: TrainingConfig
    store: LeagueStore | None
    pool: OpponentPool | None
    curriculum: CurriculumScheduler | None
    stage: StageGame
    carry: Any
    chunk: int
    num_chunks: int
    env_steps: int
    rows: dict[str, np.ndarray]
    """The last chunk's metrics ``{name: [updates]}``."""
    history: dict[str, list[np.ndarray]]
    log: list[dict[str, Any]]
    """Rows callbacks added this chunk (written by the metrics logger)."""
    out: Path | None
    wall_s: float = 0.0

    @property
    def player_name(self) -> str:
        """The learner's name in ratings and matches."""
        return self.config.run_id

    def policy(self) -> LeaguePolicy:
        """The learner's current policy."""
        spec = self.stage.spec
        params = self.carry.learners["0"].actor_params
        return LeaguePolicy(
            spec,
            jax.tree.map(np.asarray, params),
            _checkpoint_env(self.config),
            tuple(sorted(self.stage.overrides.items())),
            self.stage.arena.team_names[0],
        )

    def write_policy(self, path: str | Path) -> Path:
        """Write the learner's policy checkpoint to ``path`` (atomically)."""
        policy = self.policy()
        return checkpoint.write_policy_checkpoint(
            path,
            algo=self.config.algo,
            env=policy.env,
            env_overrides=dict(policy.env_overrides),
            config=self.config.to_dict(),
            meta=run_metadata(self.config.to_dict()),
            teams={
                policy.team: (
                    policy.spec.to_dict(),
                    jax.tree.map(lambda x: x[None], policy.params),
                )
            },
        )


def _checkpoint_env(config: TrainingConfig) -> str:
    """The registered game a learner's checkpoint names (its one-team view for
    battalion games, so ``scripted_l*`` evaluation applies)."""
    if config.game in SCRIPTED_VARIANTS.values():
        return {v: k for k, v in SCRIPTED_VARIANTS.items()}[config.game]
    return config.game


class Callback:
    """Host-side hook of :func:`train`; override what you need."""

    def on_train_start(self, run: LeagueRun) -> None:  # noqa: B027
        """Before the first chunk (after resumption)."""

    def on_chunk_end(self, run: LeagueRun) -> None:  # noqa: B027
        """After every chunk, once checkpoints and league state are saved."""

    def on_train_end(self, run: LeagueRun) -> None:  # noqa: B027
        """After the last chunk."""


class ProgressLog(Callback):
    """Reports every chunk's training win rate and the running wall time to
    ``progress``, and keeps the win rates (``None`` for a chunk in which no
    episode ended)."""

    def __init__(self, label: str, progress: Callable[[str], None]):
        self.label = label
        self.progress = progress
        self.win_rates: list[float | None] = []

    def on_chunk_end(self, run: LeagueRun) -> None:
        wins = np.asarray(run.rows["win_per_episode"], np.float64)
        finished = np.isfinite(wins)
        win_rate = float(wins[finished].mean()) if finished.any() else None
        self.win_rates.append(win_rate)
        shown = "-" if win_rate is None else f"{win_rate:.3f}"
        self.progress(
            f"{self.label}: chunk {run.chunk}/{run.num_chunks}, {run.env_steps} steps, "
            f"training win rate {shown}, {run.wall_s:.0f} s"
        )


class TrainResult(NamedTuple):
    policy: LeaguePolicy
    """The final policy."""
    metrics: dict[str, np.ndarray]
    """Every training metric ``[update]``."""
    promotions: list[dict[str, Any]]
    """Curriculum promotions (from, to, win rate, episodes, step)."""
    stage: str | None
    """The final curriculum stage."""
    final_checkpoint: Path | None
    store_path: Path | None
    env_steps: int
    resumed_from_chunk: int
    wall_s: float


# -- train -------------------------------------------------------------------------
def train(
    config: TrainingConfig | None = None,
    *,
    callbacks: Sequence[Callback] | None = None,
    resume: str | Path | None = None,
    **overrides: Any,
) -> TrainResult:
    """Train a league learner; see the module docstring.

    Args:
        config: the run's settings (default :class:`TrainingConfig()`).
        callbacks: host-side :class:`Callback`-s, run between chunks.
        resume: a league directory holding run ``config.run_id``; it continues from
            its last committed chunk (its ``checkpoint_dir`` becomes this one).
        **overrides: :class:`TrainingConfig` fields replacing ``config``'s.

    Returns:
        A :class:`TrainResult`.

    Raises:
        ValueError: an unknown override (named) or an invalid value.
        FileNotFoundError: ``resume`` does not exist or holds no such run.
    """
    config = (config or TrainingConfig()).replace(**overrides)
    if resume is not None:
        resume = Path(resume)
        if not (resume / DB_FILE).is_file():
            raise MissingPathError(f"nothing to resume at {resume} (no league there)")
        config = config.replace(checkpoint_dir=str(resume))
    start_time = time.perf_counter()
    callbacks = list(callbacks or [])
    out = Path(config.checkpoint_dir) if config.checkpoint_dir else None
    curriculum = (
        CurriculumScheduler(
            config.curriculum, config.promote_threshold, config.win_rate_window
        )
        if config.curriculum
        else None
    )
    trigger = SnapshotTrigger(config.snapshot_freq)
    mconfig = config.mappo_config()
    chunk_length = math.ceil(mconfig.num_updates / config.num_chunks)
    bounds = [
        (s, min(chunk_length, mconfig.num_updates - s))
        for s in range(0, mconfig.num_updates, chunk_length)
    ]
    compiled: dict[Arena, tuple[Callable, Callable]] = {}
    # The chunk program does not read the seed (its key is an argument) or the
    # run's length (no learning-rate annealing): runs that differ only in those
    # (the seeds of one config, a fine-tuning run) share one compilation.
    # (mappo_config turns annealing off.)
    program = mconfig.replace(
        seed=0, total_steps=mconfig.steps_per_update, num_chunks=1
    )

    def compiled_for(arena):
        if arena not in compiled:
            compiled[arena] = _compile(program, arena, chunk_length)
        return compiled[arena]

    def stage_kwargs(chunk: int = 0):
        kwargs = curriculum.env_kwargs() if curriculum is not None else {}
        if config.scenarios:
            scenario = config.scenarios[chunk % len(config.scenarios)]
            kwargs = {**kwargs, **scenario.kwargs}
        return kwargs

    def scenario_stage(stage: StageGame, chunk: int) -> StageGame:
        """The stage of chunk ``chunk``'s scenario; its policy records the game
        without the scenario.

        Raises:
            InvalidParameterError: the scenario changes the game's shapes.
        """
        new = build_stage(config, stage_kwargs(chunk))
        if new.arena != stage.arena or new.spec != stage.spec:
            raise InvalidParameterError(
                "scenarios must only change game parameters; scenario "
                f"{config.scenarios[chunk % len(config.scenarios)].name!r} changes "
                "the game's structure"
            )
        base = curriculum.env_kwargs() if curriculum is not None else {}
        overrides = {**dict(config.game_kwargs), **base}
        if _is_battalion(config.game):
            overrides.setdefault("discrete", True)
        return new._replace(overrides=overrides)

    stage = build_stage(config, stage_kwargs())
    for index in range(len(config.scenarios)):  # fail before compiling anything
        scenario_stage(stage, index)
    start_policy = (
        _start_policy(config, stage) if config.init_checkpoint is not None else None
    )
    # The league folder is opened (made) only once the game and scenarios are good.
    if config.enable_self_play and out is None:
        import tempfile

        out = Path(tempfile.mkdtemp(prefix="mopa-league-"))
    store = LeagueStore(out) if out is not None else None
    state_key = f"run/{config.run_id}"
    saved = store.get_state(state_key) if store is not None else None
    if resume is not None and saved is None:
        raise MissingPathError(f"{resume} holds no run {config.run_id!r} to resume")
    if saved is not None and resume is None:
        raise CheckpointError(
            f"{out} already holds run {config.run_id!r}: pass resume={str(out)!r} or "
            "choose another run_id"
        )
    if saved is not None and saved["config_hash"] != config_hash(config.identity()):
        raise CheckpointError(
            f"run {config.run_id!r} in {out} was started with another config"
        )
    pool = (
        OpponentPool(store, side=f"{config.run_id}", max_size=config.pool_max_size)
        if config.enable_self_play
        else None
    )
    key = jax.random.key(config.seed)
    done_chunks, version = 0, 0
    history: dict[str, list[np.ndarray]] = {}
    if saved is not None:
        if curriculum is not None:
            curriculum.load_state_dict(saved["curriculum"])
        stage = build_stage(config, stage_kwargs(saved["chunk"]))
        trigger.mark(saved["snapshot_last"])
        done_chunks, version = saved["chunk"], saved["version"]
        history = {k: [np.asarray(v, np.float32)] for k, v in saved["history"].items()}
    init_fn, _ = compiled_for(stage.arena)
    params = _arena_params(stage, pool, config)
    carry = init_fn(jax.random.fold_in(key, 0), params)
    if saved is not None:
        _, carry = checkpoint.read_train_state(
            out / "runs" / config.run_id / saved["state_file"],
            algo=config.algo,
            config=config.identity() | {"stage": saved["stage_index"]},
            template=carry,
        )
    else:
        if config.init_checkpoint is not None:
            carry = _start_from(carry, config, start_policy)
        if pool is not None:  # the pool starts with the learner's initial weights
            _snapshot(pool, stage, carry, config, 0, 0, store)
            version = 1
    held = carry.learners["0"]  # the actor (and its optimiser) a warm-up holds
    run = LeagueRun(
        config=config,
        store=store,
        pool=pool,
        curriculum=curriculum,
        stage=stage,
        carry=carry,
        chunk=done_chunks,
        num_chunks=len(bounds),
        env_steps=(bounds[done_chunks - 1][0] + bounds[done_chunks - 1][1])
        * mconfig.steps_per_update
        if done_chunks
        else 0,
        rows={},
        history=history,
        log=[],
        out=out,
    )
    for callback in callbacks:
        callback.on_train_start(run)
    for index in range(done_chunks, len(bounds)):
        start, count = bounds[index]
        if config.scenarios:
            run.stage = scenario_stage(run.stage, index)
        _, run_fn = compiled_for(run.stage.arena)
        params = _arena_params(run.stage, pool, config)
        run.carry, rows = run_fn(run.carry, params, count)
        if index < config.critic_warmup_chunks:
            learner = run.carry.learners["0"]._replace(
                actor_params=held.actor_params, actor_opt=held.actor_opt
            )
            run.carry = run.carry._replace(
                learners={**run.carry.learners, "0": learner}
            )
        rows = {k: np.asarray(v)[:count] for k, v in rows.items()}
        for name, value in rows.items():
            run.history.setdefault(name, []).append(value)
        run.rows, run.chunk, run.log = rows, index + 1, []
        run.env_steps = (start + count) * mconfig.steps_per_update
        if curriculum is not None:
            _record_outcomes(curriculum, rows)
            if curriculum.should_promote():
                curriculum.promote(run.env_steps)
                run.stage, run.carry = _change_stage(
                    config, run, curriculum, compiled_for, pool, key, index
                )
        if pool is not None and trigger.should_snapshot(run.env_steps):
            _snapshot(pool, run.stage, run.carry, config, version, run.env_steps, store)
            version += 1
            trigger.mark(run.env_steps)
        if store is not None:
            _save(run, store, trigger, version, state_key)
        run.wall_s = time.perf_counter() - start_time
        for callback in callbacks:
            callback.on_chunk_end(run)
    final = None
    if out is not None:
        final = run.write_policy(out / "runs" / config.run_id / "final.msgpack")
        CheckpointManifest(store).register(
            final,
            kind="final",
            step=run.env_steps,
            seed=config.seed,
            stage=curriculum.stage_index if curriculum else None,
            run_id=config.run_id,
            config_hash=config_hash(config.identity()),
        )
    run.wall_s = time.perf_counter() - start_time
    for callback in callbacks:
        callback.on_train_end(run)
    metrics = {k: np.concatenate(v) for k, v in run.history.items()}
    return TrainResult(
        policy=run.policy(),
        metrics=metrics,
        promotions=list(curriculum.promotions) if curriculum else [],
        stage=curriculum.stage_label if curriculum else None,
        final_checkpoint=final,
        store_path=store.path if store is not None else None,
        env_steps=run.env_steps,
        resumed_from_chunk=done_chunks,
        wall_s=run.wall_s,
    )


def train_blue(
    config: TrainingConfig, folder: Path, label: str, progress: Callable[[str], None]
) -> dict[str, Any]:
    """:func:`train` with its league in ``folder``, reporting every chunk
    (:class:`ProgressLog`); the final checkpoint is
    ``folder/runs/<run_id>/final.msgpack``.

    Returns:
        ``{"checkpoint", "env_steps", "wall_s", "train_win_rate" (per chunk),
        "promotions"}``.
    """
    log = ProgressLog(label, progress)
    result = train(config.replace(checkpoint_dir=str(folder)), callbacks=[log])
    return {
        "checkpoint": str(result.final_checkpoint),
        "env_steps": int(result.env_steps),
        "wall_s": float(result.wall_s),
        "train_win_rate": log.win_rates,
        "promotions": result.promotions,
    }


def _arena_params(
    stage: StageGame, pool: OpponentPool | None, config: TrainingConfig
) -> ArenaParams:
    if pool is not None and not pool.entries:  # before the first snapshot
        placeholder = init_params(stage.arena.opponent, jax.random.key(0))
        stacked, _ = stack_opponents([placeholder], config.pool_max_size)
        weights = np.zeros(config.pool_max_size, np.float32)
        weights[0] = 1.0
        return ArenaParams(stage.game_params, stacked, jnp.asarray(weights))
    if pool is not None:
        entries = pool.entries
        weights = pool.weights(config.pool_sampling, config.latest_ratio)
        members = [OpponentPool.load(e)[1] for e in entries]
        stacked, _ = stack_opponents(members, config.pool_max_size)
        padded = np.zeros(config.pool_max_size, np.float32)
        padded[: len(weights)] = weights
        return ArenaParams(stage.game_params, stacked, jnp.asarray(padded))
    if stage.fixed_opponent is not None:
        leaves = jax.tree.leaves(stage.fixed_opponent)
        weights = np.zeros(leaves[0].shape[0] if leaves else 1, np.float32)
        weights[0] = 1.0
        return ArenaParams(
            stage.game_params, stage.fixed_opponent, jnp.asarray(weights)
        )
    return ArenaParams(stage.game_params, {}, jnp.ones((1,)))


def _record_outcomes(curriculum: CurriculumScheduler, rows: dict[str, np.ndarray]):
    """Every episode finished in the chunk, update by update. The order of
    episodes inside one update is not kept, so its wins are spread evenly over
    its episodes (never all wins first, which would bias a short window)."""
    for episodes, win_rate in zip(
        rows["episodes"], rows["win_per_episode"], strict=True
    ):
        if not (np.isfinite(episodes) and np.isfinite(win_rate)):
            continue
        n = int(round(float(episodes)))
        wins = int(round(float(win_rate) * n))
        for i in range(n):
            curriculum.record_episode((i + 1) * wins // n > i * wins // n)


def _start_policy(config: TrainingConfig, stage: StageGame) -> LeaguePolicy:
    """The policy of ``config.init_checkpoint``, checked to fit the learner.

    Raises:
        FileNotFoundError: no such checkpoint.
        InvalidParameterError: the checkpoint's policy does not fit the learner.
    """
    from mopa.league.evaluation import load_league_policy

    path = Path(config.init_checkpoint)
    if not path.exists():
        raise MissingPathError(f"no checkpoint to start from at {path}")
    team = stage.arena.team_names[0]
    policy = load_league_policy(path, team)
    mine, theirs = stage.spec, policy.spec
    if (theirs.kind, theirs.obs_size, theirs.num_actions, theirs.hidden) != (
        mine.kind,
        mine.obs_size,
        mine.num_actions,
        mine.hidden,
    ):
        raise InvalidParameterError(
            f"init_checkpoint {path} holds a {theirs.kind} policy with obs "
            f"{theirs.obs_size}, actions {theirs.num_actions}, hidden "
            f"{theirs.hidden}; the learner needs {mine.kind}, {mine.obs_size}, "
            f"{mine.num_actions}, {mine.hidden}"
        )
    return policy


def _start_from(carry, config: TrainingConfig, policy: LeaguePolicy):
    """``carry`` with the learner's actor weights those of ``policy`` (read from
    ``config.init_checkpoint``).

    Raises:
        InvalidParameterError: a layer of the policy does not fit the learner's.
    """
    learner = carry.learners["0"]
    actor, report = transfer_weights(policy.params, learner.actor_params)
    if report["skipped"]:
        raise InvalidParameterError(
            f"init_checkpoint {config.init_checkpoint}: layers {report['skipped']} "
            "do not fit"
        )
    learner = learner._replace(actor_params=jax.tree.map(jnp.asarray, actor))
    return carry._replace(learners={**carry.learners, "0": learner})


def _change_stage(config, run, curriculum, compiled_for, pool, key, index):
    """Move the learner to the curriculum's new stage; returns ``(stage, carry)``."""
    stage = build_stage(config, curriculum.env_kwargs())
    if stage.arena == run.stage.arena:
        return stage, run.carry
    init_fn, _ = compiled_for(stage.arena)
    carry = init_fn(
        jax.random.fold_in(key, index + 1), _arena_params(stage, pool, config)
    )
    old = run.carry.learners["0"]
    new = carry.learners["0"]
    actor, actor_report = transfer_weights(old.actor_params, new.actor_params)
    critic, critic_report = transfer_weights(old.critic_params, new.critic_params)
    run.log.append(
        {
            "kind": "weight_transfer",
            "stage": stage.arena.name,
            "loaded": [f"actor{k}" for k in actor_report["loaded"]]
            + [f"critic{k}" for k in critic_report["loaded"]],
            "skipped": [f"actor{k}" for k in actor_report["skipped"]]
            + [f"critic{k}" for k in critic_report["skipped"]],
        }
    )
    learners = {"0": new._replace(actor_params=actor, critic_params=critic)}
    return stage, carry._replace(learners=learners)


def _snapshot(pool, stage, carry, config, version, step, store):
    from mopa.league.manifest import CheckpointManifest

    params = jax.tree.map(np.asarray, carry.learners["0"].actor_params)
    entry = pool.add(
        stage.spec,
        params,
        version,
        step,
        env=_checkpoint_env(config),
        env_overrides=stage.overrides,
        team=stage.arena.team_names[0],
    )
    CheckpointManifest(store).register(
        entry.path,
        kind="snapshot",
        step=step,
        seed=config.seed,
        run_id=config.run_id,
        config_hash=config_hash(config.identity()),
    )


def _save(run: LeagueRun, store: LeagueStore, trigger, version, state_key):
    """Periodic checkpoint, trainer state, manifest row and league state. The
    state row is committed last: a kill before it resumes from the previous
    chunk, whose files are still complete."""
    config = run.config
    folder = run.out / "runs" / config.run_id
    stage_index = run.curriculum.stage_index if run.curriculum else 0
    path = run.write_policy(folder / f"step_{run.env_steps:010d}.msgpack")
    state_file = f"train_state_{run.chunk:05d}.msgpack"
    checkpoint.write_train_state(
        folder / state_file,
        algo=config.algo,
        config=config.identity() | {"stage": stage_index},
        chunk=run.chunk,
        carry=run.carry,
    )
    manifest = CheckpointManifest(store)
    manifest.register(
        path,
        kind="periodic",
        step=run.env_steps,
        seed=config.seed,
        stage=stage_index,
        run_id=config.run_id,
        config_hash=config_hash(config.identity()),
    )
    store.put_state(
        state_key,
        {
            "chunk": run.chunk,
            "state_file": state_file,
            "version": version,
            "snapshot_last": trigger.last,
            "stage_index": stage_index,
            "curriculum": run.curriculum.state_dict() if run.curriculum else None,
            "config_hash": config_hash(config.identity()),
            "history": {k: np.concatenate(v).tolist() for k, v in run.history.items()},
        },
    )
    for old in folder.glob("train_state_*.msgpack"):
        if old.name != state_file:
            old.unlink(missing_ok=True)
    manifest.prune(config.keep_checkpoints, kinds=("periodic",))
