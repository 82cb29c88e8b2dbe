"""Training speed: environment steps per second including learning, and the
trainer's compute rate against the machine's own limit.

Each row trains one algorithm on one game exactly as ``mopa train`` does (the
algorithm's default config, or a named preset's such as the research's
``research_mappo_tag_intent_unaware``; every seed vmapped, jitted chunks) but
without a run folder, and times the whole call, compilation included:
``steps_per_s = seeds x steps / wall_s``. The default rows put the research's
recipes (its networks: MAPPO 2 x 128 with the world-state critic, IQL's
whole-episode replay) beside mopa's lighter defaults.

Each row then states the run against the machine. ``flops_per_step`` is XLA's count
(:func:`mopa.bench.compute.program_flops`) of one seed's ``update`` (the trainer's
own function: the rollout's environment steps and forward passes, the values, and
the forward and backward passes of every epoch and minibatch) divided by the
environment steps it collects; ``gflop_s`` is what that makes over the compiled
chunks' running time; ``matmul_gflop_s`` is a plain jitted matmul the shape of the
trainer's largest layer (:func:`~mopa.bench.compute.largest_trained_layer`),
measured in the same process right after the run; ``matmul_fraction`` is the
ratio of the two.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax

from mopa.algos.config import TrainConfig
from mopa.algos.driver import Progress, run_training
from mopa.algos.mappo.config import PPO_ALGOS
from mopa.algos.mappo.train import make_trainer as mappo_trainer
from mopa.algos.presets import preset
from mopa.algos.registry import make_config, trainer_factory
from mopa.algos.trainer import seed_keys
from mopa.bench.compute import largest_trained_layer, matmul_limit, program_flops
from mopa.core.devices import dividing_devices

TRAIN_BENCHES = (
    "research_mappo_tag_intent_unaware",
    "research_iql_tag",
    ("mappo", "tag_intent"),
    ("mappo", "tag"),
    ("iql", "tag"),
)
"""Rows measured by default: research presets (by name) first, then ``(algo, env)``
pairs at mopa's default configs."""

Run = str | tuple[str, str]
"""A row: a preset's name (``mopa train --list-presets``) or ``(algo, env)``."""


def run_config(run: Run, seeds: int, steps: int, **fields: Any) -> TrainConfig:
    """The config a row trains: the preset's, or the algorithm's default on the
    game, with ``seeds``, ``steps`` and ``fields`` set.

    Raises:
        UnknownNameError: unknown preset, algorithm or game.
        InvalidParameterError: a field the config does not accept.
    """
    if isinstance(run, str):
        return preset(run).replace(total_steps=steps, num_seeds=seeds, **fields)
    algo, env = run
    return make_config(algo, env=env, total_steps=steps, num_seeds=seeds, **fields)


def bench_train(
    runs: tuple[Run, ...] = TRAIN_BENCHES,
    seeds: int = 3,
    steps: int = 2_000_000,
    progress: Callable[[dict[str, Any]], None] | None = None,
    matmul_repeats: int = 5,
    plain_paths: bool = False,
    **fields: Any,
) -> list[dict[str, Any]]:
    """Train every row of ``runs`` (:data:`Run`) for ``steps`` per seed.

    Args:
        progress: called with each row once it is complete.
        matmul_repeats: timed repeats of the reference matmul (median taken).
        plain_paths: also train each MAPPO row with its plain paths (autodiff
            through Flax's actor, ``jax.random.permutation``; the same numbers),
            right after the fast one, as a second row: what the fast paths pay.
        **fields: config fields set on every run (e.g. ``hidden=(64,)``).

    Returns:
        Rows ``{"preset", "algo", "env", "seeds", "steps", "wall_s", "compile_s",
        "steps_per_s", "hidden", "devices", "train_s", "flops_per_step",
        "gflop_s", "matmul_shape", "matmul_gflop_s", "matmul_fraction"}``:

        * ``preset`` is the row's preset name, or None for an algorithm's default;
        * ``paths`` is ``fast`` or ``plain`` for MAPPO (see ``plain_paths``),
          None otherwise;
        * ``hidden``, ``critic_input`` (MAPPO) and ``replay`` (IQL) say what
          networks and recipe ran;
        * ``steps`` is per seed (whole updates only); ``devices`` is how many
          devices the seeds were spread over;
        * ``train_s``: seconds in the compiled chunks (``wall_s`` less set-up and
          compilation);
        * ``flops_per_step``: XLA's FLOPs of one seed's update / the environment
          steps it collects;
        * ``gflop_s``: ``flops_per_step x seeds x steps / train_s / 1e9``;
        * ``matmul_shape``: ``[rows, inputs, outputs]`` of the layer whose
          gradient costs the trainer most, rows being one gradient step's;
        * ``matmul_gflop_s``: a plain matmul of that shape per seed, seeds vmapped
          over the same devices (median of ``matmul_repeats``);
        * ``matmul_fraction``: ``gflop_s / matmul_gflop_s``.

        The last three are ``None`` when the trainer learns no dense layer.
    """
    configs = [  # every config is checked before the first run trains
        run_config(run, seeds, steps, **fields) for run in runs
    ]
    jobs = []
    for i, (run, config) in enumerate(zip(runs, configs, strict=True)):
        if config.algo in PPO_ALGOS:
            jobs.append((i, run, config, "fast"))
            if plain_paths:
                jobs.append((i, run, config, "plain"))
        else:
            jobs.append((i, run, config, None))
    rows = []
    costs = {}  # a row's two paths do the same work: its cost is counted once
    for i, run, config, paths in jobs:
        chunks: list[Progress] = []
        make_trainer = None
        if paths == "plain":
            make_trainer = functools.partial(mappo_trainer, fast_paths=False)
        result = run_training(config, progress=chunks.append, make_trainer=make_trainer)
        done = config.num_updates * config.steps_per_update
        train_s = _chunks_seconds(chunks, config)
        if i not in costs:
            costs[i] = _update_cost(config)
        flops_per_step, layer = costs[i]
        gflop_s = flops_per_step * seeds * done / train_s / 1e9
        row = {
            "preset": run if isinstance(run, str) else None,
            "paths": paths,
            "algo": config.algo,
            "env": config.env,
            "seeds": seeds,
            "steps": done,
            "wall_s": result.wall_s,
            "compile_s": result.compile_s,
            "steps_per_s": seeds * done / result.wall_s,
            "hidden": list(config.hidden),
            "critic_input": getattr(config, "critic_input", None),
            "replay": getattr(config, "replay", None),
            "devices": len(dividing_devices(seeds)),
            "train_s": train_s,
            "flops_per_step": flops_per_step,
            "gflop_s": gflop_s,
            **matmul_limit(layer, gflop_s, seeds, repeats=matmul_repeats),
        }
        rows.append(row)
        if progress is not None:
            progress(row)
    return rows


def _chunks_seconds(chunks: list[Progress], config: TrainConfig) -> float:
    """Seconds the compiled chunks ran, from each chunk's steps and speed."""
    seconds, updates = 0.0, 0
    for chunk in chunks:
        steps = (chunk.updates - updates) * config.steps_per_update * config.num_seeds
        seconds += steps / chunk.chunk_steps_per_s
        updates = chunk.updates
    return seconds


def _update_cost(config: TrainConfig):
    """``(FLOPs per environment step, largest trained layer)`` of one seed's
    update, from the shapes of its carry (nothing is run)."""
    trainer = trainer_factory(config)(config, None)
    carry = jax.eval_shape(trainer.init, seed_keys(config)[0])
    flops = program_flops(trainer.update, carry)
    return flops / config.steps_per_update, largest_trained_layer(trainer.update, carry)
