"""Training speed: environment steps per second including learning.

Each row trains one algorithm on one game exactly as ``mopa train`` does (default
config, every seed vmapped, jitted chunks) but without a run folder, and times the
whole call, compilation included: ``steps_per_s = seeds x steps / wall_s``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mopa.algos.driver import run_training
from mopa.algos.registry import make_config
from mopa.core.devices import dividing_devices

TRAIN_BENCHES = (("iql", "tag"), ("mappo", "tag"), ("mappo", "tag_intent"))
"""``(algo, env)`` pairs measured by default."""


def bench_train(
    runs: tuple[tuple[str, str], ...] = TRAIN_BENCHES,
    seeds: int = 3,
    steps: int = 2_000_000,
    progress: Callable[[dict[str, Any]], None] | None = None,
    **fields: Any,
) -> list[dict[str, Any]]:
    """Train every ``(algo, env)`` of ``runs`` for ``steps`` per seed.

    Args:
        **fields: config fields set on every run (e.g. ``hidden=(64,)``).

    Returns:
        Rows ``{"algo", "env", "seeds", "steps", "wall_s", "compile_s",
        "steps_per_s", "hidden", "devices"}``; ``steps`` is per seed (whole updates
        only); ``devices`` is how many devices the seeds were spread over.
    """
    configs = [  # every config is checked before the first run trains
        make_config(algo, env=env, total_steps=steps, num_seeds=seeds, **fields)
        for algo, env in runs
    ]
    rows = []
    for (algo, env), config in zip(runs, configs, strict=True):
        result = run_training(config)
        done = config.num_updates * config.steps_per_update
        row = {
            "algo": algo,
            "env": env,
            "seeds": seeds,
            "steps": done,
            "wall_s": result.wall_s,
            "compile_s": result.compile_s,
            "steps_per_s": seeds * done / result.wall_s,
            "hidden": list(config.hidden),
            "devices": len(dividing_devices(seeds)),
        }
        rows.append(row)
        if progress is not None:
            progress(row)
    return rows
