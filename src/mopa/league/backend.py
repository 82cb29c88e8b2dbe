"""Where a league's independent jobs run: in this process (the default) or on a
Ray cluster (the optional extra, ``pip install mopa[ray]``).

Three kinds of work split into independent jobs:

* a tournament (:func:`league_tournament`): every player against every opponent,
  one job per cell, each a jitted evaluation
  (:func:`~mopa.league.evaluation.run_episodes`);
* an evaluation sweep (:func:`evaluate_sweep`): many ``(checkpoint, opponent,
  n_episodes, seed)`` evaluations, one job each;
* multi-seed training (:func:`train_seeds`): one :func:`~mopa.league.train` run
  per seed, each its own ``run_id`` in one league directory (the store takes
  concurrent writers).

Both backends run the same job function on the same job, so a job's numbers do
not depend on the backend: episode ``i`` of an evaluation uses
``jax.random.key(seed + i)`` wherever it runs, and a tournament cell is exactly
the evaluation :func:`~mopa.league.evaluation.evaluate_detailed` makes of it.
Jobs carry only names, numbers and absolute file paths: a worker builds games by
name and reads checkpoints from disk (so a multi-machine Ray cluster needs the
checkpoints and the league directory on a shared file system); results come back
as NumPy arrays. Before its first job a worker takes the driver's JAX settings
(:class:`JaxSettings`: platform, 64-bit mode, CPU device count) and checks them.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple, Protocol

import jax
import numpy as np

from mopa.errors import CheckpointError, InvalidParameterError
from mopa.league.evaluation import (
    SCRIPTED_NAMES,
    EvaluationResult,
    count_outcomes,
    load_league_policy,
    run_episodes,
)

BACKENDS = ("inprocess", "ray")
"""Backend names (``--backend``)."""
RAY_EXTRA = "pip install mopa[ray]"
"""How to install the Ray backend's dependency."""


# -- JAX settings --------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class JaxSettings:
    """The JAX settings a job's numbers depend on, as the driver has them."""

    platform: str
    """The backend JAX computes on (``cpu``, ``gpu``, ...)."""
    enable_x64: bool
    """64-bit mode."""
    num_devices: int
    """Devices of that platform (CPU devices: ``jax_num_cpu_devices``)."""

    @classmethod
    def current(cls) -> JaxSettings:
        """The settings of this process (starts JAX's backend if needed)."""
        return cls(
            platform=jax.default_backend(),
            enable_x64=bool(jax.config.jax_enable_x64),
            num_devices=jax.local_device_count(),
        )

    def apply(self) -> None:
        """Make this process use these settings, then check them.

        The platform and the CPU device count only take effect before the
        process's first JAX computation; a process that already computed with
        others fails the check.

        Raises:
            RuntimeError: this process cannot use these settings.
        """
        jax.config.update("jax_enable_x64", self.enable_x64)
        try:
            jax.config.update("jax_platforms", self.platform)
            if self.platform == "cpu":
                jax.config.update("jax_num_cpu_devices", self.num_devices)
        except RuntimeError:  # JAX already started here; the check below decides
            pass
        found = JaxSettings.current()
        if found != self:
            raise RuntimeError(
                f"a worker runs JAX with {found}, the driver with {self}; start the "
                "workers with the driver's JAX_PLATFORMS and JAX_NUM_CPU_DEVICES"
            )


def _run_job(settings: JaxSettings, fn: Callable[[Any], Any], job: Any) -> Any:
    """What a worker runs: ``fn(job)`` under the driver's JAX settings."""
    settings.apply()
    return fn(job)


# -- backends ------------------------------------------------------------------------
class Backend(Protocol):
    """Runs independent jobs; results come back in the jobs' order."""

    name: str
    num_workers: int

    def map(self, fn: Callable[[Any], Any], jobs: Sequence[Any]) -> list[Any]:
        """``[fn(job) for job in jobs]``; ``fn`` must be importable by name."""
        ...

    def close(self) -> None:
        """Release what the backend started."""
        ...


class InProcessBackend:
    """Runs every job here, one after another (the default)."""

    name = "inprocess"
    num_workers = 1

    def map(self, fn: Callable[[Any], Any], jobs: Sequence[Any]) -> list[Any]:
        return [fn(job) for job in jobs]

    def close(self) -> None:
        pass

    def __enter__(self) -> InProcessBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def import_ray():
    """The ``ray`` module.

    Raises:
        InvalidParameterError: Ray is not installed (the message names the
            extra).
    """
    try:
        import ray
    except ImportError:
        raise InvalidParameterError(
            f"the ray backend needs Ray, which is not installed: {RAY_EXTRA}"
        ) from None
    return ray


_RAY_ADDRESS = re.compile(r"^(auto|local|(ray://)?[A-Za-z0-9_.-]+:\d{1,5})$")


def check_ray_address(address: str | None, name: str = "address") -> None:
    """Raise unless ``address`` (``None``: start a local instance) is one Ray can
    connect to: ``auto``, ``local``, ``HOST:PORT`` or ``ray://HOST:PORT``."""
    if address is not None and not _RAY_ADDRESS.match(address):
        raise InvalidParameterError(
            f"{name} must be auto, local, HOST:PORT or ray://HOST:PORT, got {address!r}"
        )


class RayBackend:
    """Runs jobs as Ray tasks, at most ``num_workers`` at a time.

    Uses the Ray instance this process is already connected to; otherwise
    connects to ``address`` or, without one, starts a local instance with
    ``num_workers`` CPUs (shut down again by :meth:`close`). A worker process
    keeps its compiled programs between jobs.

    Args:
        num_workers: jobs in flight at once (one CPU each).
        address: a running cluster (``ray start --head`` prints it; ``auto``
            finds a local one).

    Raises:
        InvalidParameterError: Ray is not installed, or ``num_workers < 1``.
    """

    name = "ray"

    def __init__(self, num_workers: int = 2, address: str | None = None):
        if num_workers < 1:
            raise InvalidParameterError(
                f"the ray backend needs num_workers >= 1, got {num_workers}"
            )
        check_ray_address(address)
        ray = import_ray()
        self.num_workers = num_workers
        self._ray = ray
        self._started = False
        if not ray.is_initialized():
            with warnings.catch_warnings():
                # Ray starts its processes with fork + exec, which JAX's warning
                # about forking a multithreaded process does not concern.
                warnings.filterwarnings("ignore", "os.fork", RuntimeWarning)
                if address is None:
                    ray.init(
                        num_cpus=num_workers,
                        include_dashboard=False,
                        logging_level=logging.WARNING,
                    )
                else:
                    ray.init(address=address, logging_level=logging.WARNING)
            self._started = True
        self._remote = ray.remote(num_cpus=1)(_run_job)

    def map(self, fn: Callable[[Any], Any], jobs: Sequence[Any]) -> list[Any]:
        ray = self._ray
        settings = ray.put(JaxSettings.current())
        results: list[Any] = [None] * len(jobs)
        pending: dict[Any, int] = {}
        queue = list(enumerate(jobs))
        while queue or pending:
            while queue and len(pending) < self.num_workers:
                index, job = queue.pop(0)
                pending[self._remote.remote(settings, fn, job)] = index
            done, _ = ray.wait(list(pending), num_returns=1)
            for ref in done:
                index = pending.pop(ref)
                try:
                    results[index] = ray.get(ref)
                except ray.exceptions.RayTaskError as error:
                    for other in pending:
                        ray.cancel(other)
                    cause = getattr(error, "cause", None)
                    if isinstance(cause, Exception):
                        raise cause from error
                    raise
        return results

    def close(self) -> None:
        if self._started and self._ray.is_initialized():
            self._ray.shutdown()
        self._started = False

    def __enter__(self) -> RayBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def make_backend(
    name: str = "inprocess", num_workers: int = 2, address: str | None = None
) -> InProcessBackend | RayBackend:
    """The backend called ``name`` (one of :data:`BACKENDS`).

    Args:
        num_workers, address: the Ray backend's (see :class:`RayBackend`).

    Raises:
        InvalidParameterError: an unknown name, or Ray asked for but not
            installed.
    """
    if name == "inprocess":
        return InProcessBackend()
    if name == "ray":
        return RayBackend(num_workers, address)
    raise InvalidParameterError(
        f"unknown backend {name!r}; choose from {', '.join(BACKENDS)}"
    )


# -- evaluation jobs -------------------------------------------------------------------
class EvalJob(NamedTuple):
    """One evaluation: the arguments of
    :func:`~mopa.league.evaluation.evaluate_detailed`."""

    checkpoint: str
    """Policy checkpoint (file or run folder)."""
    opponent: str
    """A scripted level, ``random`` or a checkpoint path."""
    n_episodes: int = 50
    seed: int = 0
    """Episode ``i`` uses ``jax.random.key(seed + i)``."""
    deterministic: bool = True
    team: str | None = None
    """The checkpoint's team to evaluate (default its first)."""


class EvalOutcome(NamedTuple):
    """What one evaluation job returns."""

    job: EvalJob
    result: EvaluationResult
    episodes: dict[str, np.ndarray]
    """Per-episode arrays ``[N]`` of :func:`~mopa.league.evaluation.run_episodes`
    (``outcome``, ``return``, ``slot``, ``breakdown/<key>``)."""


def _checkpoint_ref(path: str | Path) -> str:
    resolved = Path(path).expanduser()
    if not resolved.exists():
        raise CheckpointError(f"no checkpoint at {path}")
    return str(resolved.resolve())


def _opponent_ref(opponent: str | Path) -> str:
    """An opponent as a job names it: a checkpoint's absolute path or a scripted
    name (a file of that name wins, as in evaluation)."""
    if Path(opponent).expanduser().exists():
        return _checkpoint_ref(opponent)
    from mopa.envs.scripted_red import RED_TYPES

    name = str(opponent)
    if SCRIPTED_NAMES.get(name, name) in RED_TYPES:
        return name
    raise InvalidParameterError(
        f"unknown opponent {name!r}: not a scripted level "
        f"({', '.join(SCRIPTED_NAMES)}), 'random' or an existing checkpoint"
    )


def eval_job(
    checkpoint: str | Path,
    opponent: str | Path,
    n_episodes: int = 50,
    seed: int = 0,
    deterministic: bool = True,
    team: str | None = None,
) -> EvalJob:
    """An :class:`EvalJob` with its paths checked and made absolute (workers may
    run elsewhere).

    Raises:
        CheckpointError: a checkpoint path that does not exist.
        InvalidParameterError: an unknown opponent or ``n_episodes < 1``.
    """
    if n_episodes < 1:
        raise InvalidParameterError(f"n_episodes must be >= 1, got {n_episodes}")
    return EvalJob(
        _checkpoint_ref(checkpoint),
        _opponent_ref(opponent),
        int(n_episodes),
        int(seed),
        bool(deterministic),
        team,
    )


def run_eval_job(job: EvalJob) -> EvalOutcome:
    """Play one evaluation job (what a worker runs)."""
    policy = load_league_policy(job.checkpoint, job.team)
    episodes = run_episodes(
        policy, job.opponent, job.n_episodes, job.seed, job.deterministic
    )
    return EvalOutcome(job, count_outcomes(episodes["outcome"]), episodes)


def evaluate_sweep(
    jobs: Sequence[EvalJob], backend: Backend | None = None
) -> list[EvalOutcome]:
    """Run evaluation jobs (:func:`eval_job` builds them) on ``backend`` (default
    in this process); results in the jobs' order."""
    jobs = [EvalJob(*job) for job in jobs]
    return (backend or InProcessBackend()).map(run_eval_job, jobs)


# -- tournaments ---------------------------------------------------------------------
@dataclasses.dataclass(frozen=True, eq=False)
class LeagueTournament:
    """Every player against every opponent: ``R`` players (rows), ``C``
    opponents (columns), ``N`` episodes per cell, every cell playing episode
    keys ``seed .. seed + N - 1``."""

    players: tuple[str, ...]
    """Row checkpoints, as given."""
    opponents: tuple[str, ...]
    """Column opponents, as given."""
    n_episodes: int
    seed: int
    results: tuple[tuple[EvaluationResult, ...], ...]
    """``[R][C]`` outcome counts from each player's side."""
    outcomes: np.ndarray
    """``[R, C, N]`` int32: 1 win, 0 draw, -1 loss (the player's view)."""
    returns: np.ndarray
    """``[R, C, N]`` the player's episode return (mean over its agents)."""

    def win_rates(self) -> np.ndarray:
        """``[R, C]`` the players' win rates."""
        return np.mean(self.outcomes == 1, axis=-1)

    def payoff(self) -> np.ndarray:
        """``[R, C]`` win rate minus loss rate: the zero-sum meta-game payoff of
        :func:`~mopa.league.nash.meta_nash`."""
        return np.mean(self.outcomes, axis=-1, dtype=np.float64)

    def to_json(self) -> dict[str, Any]:
        return {
            "players": list(self.players),
            "opponents": list(self.opponents),
            "n_episodes": self.n_episodes,
            "seed": self.seed,
            "results": [[r.as_dict() for r in row] for row in self.results],
            "payoff": self.payoff().tolist(),
            "outcomes": self.outcomes.tolist(),
            "returns": self.returns.tolist(),
        }

    def to_markdown(self) -> str:
        """Wins / draws / losses per cell, rows the players."""
        lines = [
            f"wins / draws / losses of each row player, {self.n_episodes} episodes "
            f"per cell (seeds {self.seed}..{self.seed + self.n_episodes - 1})",
            "",
            "| " + " | ".join(["player \\ opponent", *self.opponents]) + " |",
            "|" + "---|" * (len(self.opponents) + 1),
        ]
        for name, row in zip(self.players, self.results, strict=True):
            cells = [f"{r.wins} / {r.draws} / {r.losses}" for r in row]
            lines.append("| " + " | ".join([name, *cells]) + " |")
        return "\n".join(lines) + "\n"


def league_tournament(
    players: Sequence[str | Path],
    opponents: Sequence[str | Path],
    n_episodes: int = 50,
    seed: int = 0,
    deterministic: bool = True,
    backend: Backend | None = None,
) -> LeagueTournament:
    """Every player checkpoint against every opponent (a scripted level,
    ``random`` or a checkpoint), one job per cell on ``backend`` (default in this
    process).

    Cell ``(r, c)`` is ``evaluate_detailed(players[r], n_episodes,
    deterministic, seed, opponents[c])``, wherever it runs.

    Raises:
        CheckpointError: a missing checkpoint.
        InvalidParameterError: an unknown opponent, no players or opponents, or
            ``n_episodes < 1``.
    """
    if not players or not opponents:
        raise InvalidParameterError("a tournament needs players and opponents")
    jobs = [
        eval_job(player, opponent, n_episodes, seed, deterministic)
        for player in players
        for opponent in opponents
    ]
    cells = evaluate_sweep(jobs, backend)
    shape = (len(players), len(opponents), n_episodes)
    columns = len(opponents)
    results = tuple(
        tuple(cell.result for cell in cells[r * columns : (r + 1) * columns])
        for r in range(len(players))
    )
    return LeagueTournament(
        players=tuple(str(p) for p in players),
        opponents=tuple(str(o) for o in opponents),
        n_episodes=n_episodes,
        seed=seed,
        results=results,
        outcomes=np.stack([c.episodes["outcome"] for c in cells]).reshape(shape),
        returns=np.stack([c.episodes["return"] for c in cells]).reshape(shape),
    )


# -- multi-seed training ---------------------------------------------------------------
class TrainJob(NamedTuple):
    """One training run."""

    config: Any
    """Its :class:`~mopa.league.TrainingConfig`."""
    resume: str | None = None
    """League directory to resume from."""
    callbacks_fn: Callable[[], list[Any]] | None = None
    """Builds the run's callbacks where it runs (importable by name)."""


class SeedRun(NamedTuple):
    """What one training job returns (a :class:`~mopa.league.TrainResult`
    without JAX arrays)."""

    seed: int
    run_id: str
    final_checkpoint: str | None
    env_steps: int
    stage: str | None
    promotions: list[dict[str, Any]]
    resumed_from_chunk: int
    wall_s: float
    metrics: dict[str, np.ndarray]
    """Every training metric ``[update]``."""
    policy_params: Any
    """The final policy's weights (NumPy)."""


def run_train_job(job: TrainJob) -> SeedRun:
    """Train one run (what a worker runs)."""
    from mopa.league.training import train

    callbacks = job.callbacks_fn() if job.callbacks_fn is not None else None
    result = train(job.config, callbacks=callbacks, resume=job.resume)
    return SeedRun(
        seed=job.config.seed,
        run_id=job.config.run_id,
        final_checkpoint=(
            None if result.final_checkpoint is None else str(result.final_checkpoint)
        ),
        env_steps=int(result.env_steps),
        stage=result.stage,
        promotions=list(result.promotions),
        resumed_from_chunk=int(result.resumed_from_chunk),
        wall_s=float(result.wall_s),
        metrics={k: np.asarray(v) for k, v in result.metrics.items()},
        policy_params=jax.tree.map(np.asarray, result.policy.params),
    )


def seed_configs(config: Any, seeds: Sequence[int]) -> list[Any]:
    """One config per seed, run ids ``<run_id>-s<seed>``.

    Raises:
        InvalidParameterError: no seeds, or a seed twice.
    """
    if not seeds:
        raise InvalidParameterError("give at least one seed")
    if len(set(seeds)) != len(seeds):
        raise InvalidParameterError(f"seeds must differ, got {list(seeds)}")
    return [
        config.replace(seed=int(seed), run_id=f"{config.run_id}-s{seed}")
        for seed in seeds
    ]


def train_runs(
    configs: Sequence[Any],
    backend: Backend | None = None,
    *,
    callbacks_fn: Callable[[], list[Any]] | None = None,
    resume: bool = False,
) -> list[SeedRun]:
    """Train each of ``configs`` (:class:`~mopa.league.TrainingConfig`-s), one job
    per run on ``backend`` (default in this process); results in their order.

    Args:
        callbacks_fn: builds each run's callbacks where it runs (a module-level
            function or a ``functools.partial`` of one).
        resume: resume each run from its ``checkpoint_dir``.

    Raises:
        InvalidParameterError: two configs with one league and run id, or
            ``resume`` without a ``checkpoint_dir``.
    """
    jobs = []
    seen = set()
    for config in configs:
        if config.checkpoint_dir is not None:
            config = config.replace(
                checkpoint_dir=str(Path(config.checkpoint_dir).resolve())
            )
        elif resume:
            raise InvalidParameterError("resume needs the config's checkpoint_dir")
        identity = (config.checkpoint_dir, config.run_id)
        if config.checkpoint_dir is not None and identity in seen:
            raise InvalidParameterError(
                f"two runs named {config.run_id!r} in {config.checkpoint_dir}"
            )
        seen.add(identity)
        jobs.append(
            TrainJob(config, config.checkpoint_dir if resume else None, callbacks_fn)
        )
    return (backend or InProcessBackend()).map(run_train_job, jobs)


def train_seeds(
    config: Any,
    seeds: Sequence[int],
    backend: Backend | None = None,
    *,
    callbacks_fn: Callable[[], list[Any]] | None = None,
    resume: bool = False,
) -> list[SeedRun]:
    """Train ``config`` once per seed, run ids ``<run_id>-s<seed>``
    (:func:`seed_configs`), one job per seed on ``backend``; with a
    ``checkpoint_dir`` every run writes to that one league. See
    :func:`train_runs`."""
    return train_runs(
        seed_configs(config, seeds), backend, callbacks_fn=callbacks_fn, resume=resume
    )


__all__ = [
    "BACKENDS",
    "Backend",
    "EvalJob",
    "EvalOutcome",
    "InProcessBackend",
    "JaxSettings",
    "LeagueTournament",
    "RayBackend",
    "SeedRun",
    "TrainJob",
    "eval_job",
    "import_ray",
    "evaluate_sweep",
    "league_tournament",
    "make_backend",
    "run_eval_job",
    "run_train_job",
    "seed_configs",
    "train_runs",
    "train_seeds",
]
