"""Scale-out speed (``mopa bench ray``): one league tournament in this process and
on Ray workers, timed in the same run, and checked to give the same numbers.

The workload is :func:`~mopa.league.backend.league_tournament` on ``tag``:
``num_players`` predator checkpoints (rows) against ``num_opponents`` prey
checkpoints (columns), one job per cell, each a jitted evaluation of
``n_episodes`` sampled episodes. The players are small actor policies, each
biased towards a different move (:func:`write_biased_policy`), so cells differ.

Figures, each the wall time of the whole tournament:

* ``inprocess_cold_s`` / ``ray_cold_s``: the first tournament on each backend,
  compilation included (in this process one compilation serves every job; each
  Ray worker compiles once, in parallel, after importing JAX and mopa);
  ``ray_start_s`` is the Ray instance's start-up before it;
* ``inprocess_s`` / ``ray_s``: the median of ``repeats`` further tournaments
  (other seeds, same shapes: nothing compiles), the backends interleaved
  repetition by repetition;
* ``speedup`` = ``inprocess_s / ray_s`` and ``speedup_cold`` =
  ``inprocess_cold_s / (ray_start_s + ray_cold_s)``;
* ``identical``: every tournament gave the same outcomes and returns, bit for
  bit, on both backends.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

import jax
import numpy as np

from mopa.errors import InvalidParameterError

TAG = {"max_steps": 100}
"""The benchmark's ``tag`` overrides: 100-step episodes."""
HIDDEN = (64,)
"""Hidden widths of the benchmark's policies."""


def write_biased_policy(
    path: str | Path,
    team: str,
    move: int,
    key: int,
    *,
    game: str = "tag",
    game_kwargs: dict[str, Any] | None = None,
    hidden: tuple[int, ...] = HIDDEN,
    bias: float = 1.5,
) -> str:
    """Write a league checkpoint of a freshly initialised ``team`` actor of
    ``game`` whose logits favour action ``move`` by ``bias``.

    Returns:
        The checkpoint's path.
    """
    from mopa.core import checkpoint
    from mopa.league.training import TrainingConfig, build_stage
    from mopa.policy import init_params

    config = TrainingConfig(
        game=game,
        game_kwargs=game_kwargs or {},
        opponent="random",
        team=team,
        hidden=hidden,
    )
    stage = build_stage(config, {})
    params = init_params(stage.spec, jax.random.key(key))
    out = params["params"]["Dense_0"]["bias"]
    params["params"]["Dense_0"]["bias"] = out.at[move].add(bias)
    return str(
        checkpoint.write_policy_checkpoint(
            path,
            algo="fixed",
            env=game,
            env_overrides=stage.overrides,
            config={},
            meta={},
            teams={
                team: (stage.spec.to_dict(), jax.tree.map(lambda x: x[None], params))
            },
        )
    )


def bench_ray(
    workdir: str | Path,
    *,
    num_workers: int = 2,
    num_players: int = 2,
    num_opponents: int = 4,
    n_episodes: int = 8192,
    repeats: int = 5,
    address: str | None = None,
) -> dict[str, Any]:
    """Time one tournament in this process and on ``num_workers`` Ray workers
    (see the module docstring); the players' checkpoints go to ``workdir``.

    Args:
        address: a running Ray cluster (default: start a local instance with
            ``num_workers`` CPUs).

    Raises:
        InvalidParameterError: a count below 1, or Ray not installed.

    Returns:
        ``{"jobs", "n_episodes", "episode_steps", "num_workers", "inprocess_cold_s",
        "ray_start_s", "ray_cold_s", "inprocess_s", "ray_s", "speedup",
        "speedup_cold", "identical", "inprocess_runs_s", "ray_runs_s"}``.
    """
    from mopa.league.backend import (
        InProcessBackend,
        RayBackend,
        import_ray,
        league_tournament,
    )

    for name, value in (
        ("num_workers", num_workers),
        ("num_players", num_players),
        ("num_opponents", num_opponents),
        ("n_episodes", n_episodes),
        ("repeats", repeats),
    ):
        if value < 1:
            raise InvalidParameterError(f"{name} must be >= 1, got {value}")
    import_ray()  # before minutes of in-process work
    workdir = Path(workdir)
    players = [
        write_biased_policy(
            workdir / f"predator{i}.msgpack", "predator", 1 + i % 4, i, game_kwargs=TAG
        )
        for i in range(num_players)
    ]
    opponents = [
        write_biased_policy(
            workdir / f"prey{j}.msgpack", "prey", j % 5, 100 + j, game_kwargs=TAG
        )
        for j in range(num_opponents)
    ]

    def play(backend, seed):
        start = time.perf_counter()
        table = league_tournament(
            players, opponents, n_episodes, seed, deterministic=False, backend=backend
        )
        return time.perf_counter() - start, table

    def same(a, b) -> bool:
        return np.array_equal(a.outcomes, b.outcomes) and np.array_equal(
            a.returns, b.returns
        )

    here = InProcessBackend()
    inprocess_cold, first = play(here, 0)
    start = time.perf_counter()
    ray = RayBackend(num_workers, address)
    try:
        ray_start = time.perf_counter() - start
        ray_cold, first_ray = play(ray, 0)
        identical = same(first, first_ray)
        inprocess_runs, ray_runs = [], []
        for repeat in range(repeats):
            seed = (repeat + 1) * n_episodes
            seconds, table = play(here, seed)
            inprocess_runs.append(seconds)
            seconds, table_ray = play(ray, seed)
            ray_runs.append(seconds)
            identical = identical and same(table, table_ray)
    finally:
        ray.close()
    inprocess_s = statistics.median(inprocess_runs)
    ray_s = statistics.median(ray_runs)
    return {
        "jobs": num_players * num_opponents,
        "n_episodes": n_episodes,
        "episode_steps": TAG["max_steps"],
        "num_workers": num_workers,
        "inprocess_cold_s": inprocess_cold,
        "ray_start_s": ray_start,
        "ray_cold_s": ray_cold,
        "inprocess_s": inprocess_s,
        "ray_s": ray_s,
        "speedup": inprocess_s / ray_s,
        "speedup_cold": inprocess_cold / (ray_start + ray_cold),
        "identical": bool(identical),
        "inprocess_runs_s": inprocess_runs,
        "ray_runs_s": ray_runs,
    }
