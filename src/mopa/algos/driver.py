"""Run a training config to completion: seeds vmapped, jitted chunks, progress,
metrics, checkpoints and exact resumption.

The run is the trainer's ``update`` repeated ``num_updates`` times, in
``num_chunks`` chunks of at most ``ceil(num_updates / num_chunks)`` updates. One
compiled function runs every chunk (the chunk length is a traced argument), so an
interrupted run that resumes executes exactly the same computation as one that was
never stopped: on CPU its metrics are identical. Between chunks the driver reports
progress and, when given an output folder, writes (each file atomically):

* ``config.json`` and ``meta.json``: the config, package versions and git SHA;
* ``train_state.msgpack``: the whole trainer carry, for resumption;
* ``checkpoint.msgpack``: every learning team's policy (see :func:`mopa.load_policy`);
* ``metrics.npz``: every metric ``[seed, update]``; ``metrics.jsonl``: the same,
  averaged over logging windows, plus one row per chunk with its speed;
* ``summary.json`` at the end: final metrics per seed and across seeds.

Seeds run on several devices when there are several: the seed axis of the carry is
sharded over as many devices as divide the seed count
(:func:`~mopa.core.devices.dividing_devices`), so on
a CPU whose cores XLA exposes as devices (``jax_num_cpu_devices``, which the
``mopa`` command sets) each seed runs on its own thread. Every seed computes the
same thing either way; only the placement changes.
"""

from __future__ import annotations

import dataclasses
import io
import json
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from mopa.algos.config import TrainConfig
from mopa.algos.registry import trainer_factory
from mopa.algos.trainer import Trainer, seed_keys
from mopa.core import checkpoint
from mopa.core.checks import check_fits_memory, largest_leaf, tree_bytes
from mopa.core.devices import dividing_devices
from mopa.core.files import atomic_write, check_output_folder, write_json
from mopa.core.runinfo import run_metadata
from mopa.errors import CheckpointError, InvalidParameterError

LOG_WINDOWS = 100
"""Rows per seed in ``metrics.jsonl`` (windows of updates averaged)."""
FINAL_FRACTION = 0.1
"""Share of the last updates averaged into the final figures of ``summary.json``."""


@dataclasses.dataclass
class Progress:
    """What the driver reports after each chunk."""

    chunk: int
    num_chunks: int
    updates: int
    num_updates: int
    env_steps: int
    total_env_steps: int
    chunk_steps_per_s: float
    elapsed_s: float
    recent: dict[str, float]
    """Means over seeds of the chunk's metrics (NaN-free where defined)."""


@dataclasses.dataclass
class RunResult:
    config: TrainConfig
    metrics: dict[str, np.ndarray]
    """Every metric ``[seed, update]``."""
    summary: dict[str, Any]
    policies: dict[str, tuple[Any, Any]]
    """``{team: (spec, params with a leading seed axis)}``."""
    learners: dict[str, Any] | None
    """``{team: weights with a leading seed axis}``: what a learning team has
    learned (MAPPO: ``{"actor", "critic"}``), the ``start`` of a warm-started run;
    ``None`` for an algorithm without warm starts."""
    out: Path | None
    resumed_from_chunk: int
    wall_s: float
    """Seconds for the whole call: set-up, compilation, training and saving."""
    compile_s: float
    """Seconds spent compiling the chunk function."""


def chunk_length(config: TrainConfig) -> int:
    return math.ceil(config.num_updates / config.num_chunks)


def chunk_bounds(config: TrainConfig) -> list[tuple[int, int]]:
    """``(first update, number of updates)`` of each chunk."""
    length = chunk_length(config)
    return [
        (start, min(length, config.num_updates - start))
        for start in range(0, config.num_updates, length)
    ]


def seed_sharding(num_seeds: int) -> NamedSharding | None:
    """Sharding of arrays with a leading seed axis over the devices that divide
    ``num_seeds`` (:func:`~mopa.core.devices.dividing_devices`);
    ``None`` when there is one device."""
    devices = dividing_devices(num_seeds)
    if len(devices) == 1:
        return None
    return NamedSharding(Mesh(np.array(devices), ("seed",)), PartitionSpec("seed"))


def run_updates(update: Callable, carry: Any, n: jax.Array, length: int):
    """``n <= length`` calls of ``update(carry) -> (carry, metrics)`` in one
    ``fori_loop`` (traceable); returns ``(carry, rows)`` with every metric as a
    ``[length, ...]`` float32 row array, NaN past ``n``."""
    template = jax.eval_shape(update, carry)[1]
    rows = jax.tree.map(
        lambda x: jnp.full((length, *x.shape), jnp.nan, jnp.float32), template
    )

    def body(i, state):
        carry, rows = state
        carry, metrics = update(carry)
        rows = jax.tree.map(
            lambda r, m: r.at[i].set(m.astype(jnp.float32)), rows, metrics
        )
        return carry, rows

    return jax.lax.fori_loop(0, n, body, (carry, rows))


def compile_chunk(
    trainer: Trainer, length: int, sharding: NamedSharding | None = None
) -> Callable:
    """``(carry [S], n) -> (carry [S], metrics [S, length])``: ``n <= length``
    updates per seed; metric rows past ``n`` are NaN. With ``sharding`` the seed
    axis of the carry and the metrics stays split over its devices."""

    def run(carry, n):
        return run_updates(trainer.update, carry, n, length)

    if sharding is None:
        return jax.jit(jax.vmap(run, in_axes=(0, None)))
    replicated = NamedSharding(sharding.mesh, PartitionSpec())
    return jax.jit(
        jax.vmap(run, in_axes=(0, None)),
        in_shardings=(sharding, replicated),
        out_shardings=sharding,
    )


def check_state_fits(config: TrainConfig, state: Any) -> None:
    """Refuse a run whose training state (every seed's networks, optimiser state,
    games and replay; ``state`` as ``jax.eval_shape`` of the vmapped ``init``
    gives it) would not fit in this machine's memory.

    Raises:
        InvalidParameterError: naming ``num_seeds`` when one seed's state fits,
            else the fields that size one seed's state.
    """
    total = tree_bytes(state)
    per_seed = total / config.num_seeds
    where = f"most of it in {largest_leaf(state)}"
    check_fits_memory(
        "the state of one seed (num_envs, buffer_size, hidden widths)",
        int(per_seed),
        f"{config.algo}'s training state of one seed ({where})",
    )
    check_fits_memory(
        "num_seeds",
        total,
        f"the training state of {config.num_seeds:,} seeds "
        f"({per_seed / 2**20:.3g} MiB a seed, {where})",
    )


def check_chunk_fits(config: TrainConfig, run_chunk: Any, state_bytes: int) -> None:
    """Refuse a run whose compiled chunk (``run_chunk``, compiled, not yet run)
    needs more working memory beside the ``state_bytes`` of the state than this
    machine has (XLA's own count; skipped where the backend gives none).

    Raises:
        InvalidParameterError: naming the fields that size an update's batch.
    """
    stats = run_chunk.memory_analysis()
    if stats is None:
        return
    check_fits_memory(
        "num_seeds x num_envs x num_steps (or batch_size)",
        state_bytes + stats.temp_size_in_bytes + stats.output_size_in_bytes,
        f"a chunk of {chunk_length(config):,} updates of {config.num_seeds:,} "
        f"seeds with its working memory",
    )


def run_training(
    config: TrainConfig,
    out: str | Path | None = None,
    progress: Callable[[Progress], None] | None = None,
    game: tuple[Any, Any] | None = None,
    on_chunk: Callable[[int, dict[str, np.ndarray]], None] | None = None,
    make_trainer: Callable[..., Any] | None = None,
    start: dict[str, Any] | None = None,
) -> RunResult:
    """Train ``config.num_seeds`` seeds of ``config`` to completion.

    Args:
        out: run folder; if it holds an unfinished run of the same config, training
            resumes from its last chunk.
        progress: called after every chunk.
        on_chunk: called after every chunk with the index of its first update and
            its metrics ``{name: [seed, update]}`` (for experiment trackers).
        game: ``(env, params)`` to train on instead of ``config.env`` (no run
            folder then, since the game could not be rebuilt from it).
        make_trainer: ``make_trainer(config, game) -> Trainer`` to use instead of
            the config's algorithm's (a variant of it under measurement, such
            as MAPPO's plain paths in ``mopa bench train --plain-paths``).
        start: a warm start, ``{team: weights [S, ...]}`` as an earlier run's
            :attr:`RunResult.learners` gives them (one per seed of this run):
            those teams learn on from these weights (their optimiser's state
            fresh, the learning rate's schedule from its start); the other
            teams start afresh. No run folder then (the config does not record
            the weights).

    Raises:
        CheckpointError: ``out`` holds a finished run, a run of another config or
            algorithm, or a damaged state file.
        InvalidParameterError: ``start`` names a team that does not learn, or
            weights that are not this run's networks.
    """
    if game is not None and out is not None:
        raise CheckpointError("a run on a custom game cannot be saved to a folder")
    if start is not None and out is not None:
        raise CheckpointError("a warm-started run cannot be saved to a folder")
    start_time = time.perf_counter()
    config_dict = config.to_dict()
    if out is not None:  # refuse a folder that cannot take this run before any work
        out = check_output_folder(out, "out")
        _check_saved_config(out, config_dict)
    trainer = (make_trainer or trainer_factory(config))(config, game)
    keys = seed_keys(config)
    state = jax.eval_shape(jax.vmap(trainer.init), keys)
    check_state_fits(config, state)  # before any of it is allocated
    carry = jax.jit(jax.vmap(trainer.init))(keys)
    if start is not None:
        carry = _warm_start(trainer, carry, start)
    bounds = chunk_bounds(config)
    sharding = seed_sharding(config.num_seeds)
    if sharding is not None:
        carry = jax.device_put(carry, sharding)
    tick = time.perf_counter()
    run_chunk = (
        compile_chunk(trainer, chunk_length(config), sharding)
        .lower(carry, bounds[0][1])
        .compile()
    )
    compile_s = time.perf_counter() - tick
    check_chunk_fits(config, run_chunk, tree_bytes(state))  # before the folder
    history: dict[str, list[np.ndarray]] = {}
    timing: list[dict[str, float]] = []
    done_chunks = 0
    meta = run_metadata(config_dict)
    if out is not None:
        done_chunks, carry, history, timing = _prepare_folder(
            out, config, config_dict, carry, meta
        )
        if sharding is not None:  # a resumed state is read onto one device
            carry = jax.device_put(carry, sharding)
    resumed_from = done_chunks
    for index in range(done_chunks, len(bounds)):
        start, count = bounds[index]
        tick = time.perf_counter()
        carry, rows = run_chunk(carry, count)
        rows = {k: np.asarray(r)[:, :count] for k, r in rows.items()}
        wall = time.perf_counter() - tick
        steps = count * config.steps_per_update * config.num_seeds
        timing.append(
            {
                "chunk": index,
                "updates": start + count,
                "wall_s": wall,
                "steps_per_s": steps / wall,
            }
        )
        for name, value in rows.items():
            history.setdefault(name, []).append(value)
        if out is not None:
            _save(out, trainer, config, meta, carry, history, timing, index + 1)
        if on_chunk is not None:
            on_chunk(start, rows)
        if progress is not None:
            progress(
                Progress(
                    chunk=index + 1,
                    num_chunks=len(bounds),
                    updates=start + count,
                    num_updates=config.num_updates,
                    env_steps=(start + count) * config.steps_per_update,
                    total_env_steps=config.num_updates * config.steps_per_update,
                    chunk_steps_per_s=steps / wall,
                    elapsed_s=time.perf_counter() - start_time,
                    recent={k: _nanmean(v) for k, v in rows.items()},
                )
            )
    metrics = {k: np.concatenate(v, 1) for k, v in history.items()}
    summary = summarise(metrics, config)
    summary["compile_s"] = compile_s
    if out is not None:
        write_json(out / "summary.json", summary)
    return RunResult(
        config=config,
        metrics=metrics,
        summary=summary,
        policies=trainer.policies(carry),
        learners=None if trainer.learners is None else trainer.learners(carry),
        out=out,
        resumed_from_chunk=resumed_from,
        wall_s=time.perf_counter() - start_time,
        compile_s=compile_s,
    )


def _warm_start(trainer: Trainer, carry: Any, start: dict[str, Any]) -> Any:
    """``carry [S]`` with ``start``'s weights in place (see :func:`run_training`)."""
    if trainer.warm_start is None or trainer.learners is None:
        raise InvalidParameterError(
            f"{trainer.config.algo} has no warm start; start must be None"
        )
    fresh = trainer.learners(carry)
    unknown = sorted(set(start) - set(fresh))
    if unknown:
        raise InvalidParameterError(
            f"start names {unknown}; the learning teams are {sorted(fresh)}"
        )
    for team, weights in start.items():
        expected = jax.tree.map(jnp.shape, fresh[team])
        given = jax.tree.map(jnp.shape, weights)
        if jax.tree.structure(expected) != jax.tree.structure(given) or jax.tree.leaves(
            expected
        ) != jax.tree.leaves(given):
            raise InvalidParameterError(
                f"start[{team!r}]: the weights are not this run's networks "
                f"(shapes {given}, expected {expected})"
            )
    start = jax.tree.map(jnp.asarray, start)
    return jax.jit(jax.vmap(trainer.warm_start))(carry, start)


def _nanmean(x: np.ndarray) -> float:
    x = np.asarray(x, np.float64)
    return float(np.nanmean(x)) if np.isfinite(x).any() else float("nan")


def summarise(metrics: dict[str, np.ndarray], config: TrainConfig) -> dict[str, Any]:
    """Final figures: each metric averaged over the last ``FINAL_FRACTION`` of
    updates, per seed, with the mean and standard deviation across seeds."""
    num_updates = next(iter(metrics.values())).shape[1] if metrics else 0
    tail = max(1, int(round(num_updates * FINAL_FRACTION)))
    final = {}
    for name, values in sorted(metrics.items()):
        per_seed = [_nanmean(v[-tail:]) for v in values]
        finite = [v for v in per_seed if math.isfinite(v)]
        final[name] = {
            "per_seed": per_seed,
            "mean": float(np.mean(finite)) if finite else None,
            "std": float(np.std(finite)) if finite else None,
        }
    return {
        "algo": config.algo,
        "env": config.env,
        "num_seeds": config.num_seeds,
        "env_steps_per_seed": num_updates * config.steps_per_update,
        "final_updates_averaged": tail,
        "final": final,
    }


# -- run folders --------------------------------------------------------------------
def _prepare_folder(out: Path, config, config_dict, carry, meta):
    """Start or resume the run in ``out``; returns ``(chunks, carry, history,
    timing)``."""
    config_path = out / "config.json"
    state_path = out / checkpoint.STATE_FILE
    if not state_path.exists():
        write_json(config_path, config_dict)
        write_json(out / "meta.json", meta)
        return 0, carry, {}, []
    chunks, carry = checkpoint.read_train_state(
        state_path, algo=config.algo, config=config_dict, template=carry
    )
    if chunks >= len(chunk_bounds(config)):
        raise CheckpointError(f"{out} holds a finished run; choose a new --out folder")
    history, timing = _read_history(out, chunks, chunk_bounds(config))
    return chunks, carry, history, timing


def _check_saved_config(out: Path, config_dict: dict[str, Any]) -> None:
    """Raise unless ``out`` holds no run or a run of ``config_dict``."""
    config_path = out / "config.json"
    if not config_path.exists():
        return
    try:
        saved = json.loads(config_path.read_text())
    except (OSError, ValueError):
        raise CheckpointError(f"{config_path} is not readable JSON") from None
    if not isinstance(saved, dict):
        raise CheckpointError(f"{config_path} is not a run's config")
    if saved != config_dict:
        changed = sorted(
            k
            for k in set(saved) | set(config_dict)
            if saved.get(k) != config_dict.get(k)
        )
        raise CheckpointError(
            f"{out} holds a run with another config (differs in "
            f"{', '.join(changed)}); choose a new --out folder"
        )


def _read_history(out: Path, chunks: int, bounds: list[tuple[int, int]]):
    """Metrics and chunk timings of the first ``chunks`` chunks. The metrics file is
    written before the state file, so it may be one chunk ahead: cut it back."""
    path = out / "metrics.npz"
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {k: data[k] for k in data.files if k != "__chunks__"}
            saved_chunks = int(data["__chunks__"])
        rows = (out / "metrics.jsonl").read_text().splitlines()
        timing = [row for row in map(json.loads, rows) if row.get("kind") == "chunk"]
    except (OSError, ValueError, KeyError):
        raise CheckpointError(
            f"{out}: metrics of the finished chunks are damaged"
        ) from None
    if saved_chunks < chunks:
        raise CheckpointError(
            f"{out}: metrics cover {saved_chunks} chunks, the state {chunks}"
        )
    updates = sum(count for _, count in bounds[:chunks])
    timing = [{k: v for k, v in row.items() if k != "kind"} for row in timing]
    return {k: [v[:, :updates]] for k, v in arrays.items()}, timing[:chunks]


def _save(out, trainer, config, meta, carry, history, timing, chunks):
    metrics = {k: np.concatenate(v, 1) for k, v in history.items()}
    buffer = io.BytesIO()
    np.savez(buffer, __chunks__=np.asarray(chunks), **metrics)
    # Metrics first, then the state: a kill between the two leaves metrics one chunk
    # ahead of the state, which resuming detects and the next chunk rewrites.
    atomic_write(out / "metrics.npz", lambda f: f.write(buffer.getvalue()))
    atomic_write(
        out / "metrics.jsonl",
        lambda f: f.write(_jsonl(metrics, timing, config).encode()),
    )
    checkpoint.write_train_state(
        out / checkpoint.STATE_FILE,
        algo=config.algo,
        config=meta["config"],
        chunk=chunks,
        carry=carry,
    )
    policies = trainer.policies(carry)
    checkpoint.write_policy_checkpoint(
        out / checkpoint.POLICY_FILE,
        algo=config.algo,
        env=config.env,
        env_overrides=dict(config.env_overrides),
        config=meta["config"],
        meta=meta,
        teams={
            team: (spec.to_dict(), params) for team, (spec, params) in policies.items()
        },
    )


def _jsonl(metrics: dict[str, np.ndarray], timing, config: TrainConfig) -> str:
    lines = []
    if metrics:
        num_seeds, num_updates = next(iter(metrics.values())).shape
        window = max(1, math.ceil(config.num_updates / LOG_WINDOWS))
        for start in range(0, num_updates, window):
            stop = min(start + window, num_updates)
            for seed in range(num_seeds):
                row = {
                    "kind": "metrics",
                    "seed": seed,
                    "update": stop,
                    "env_steps": stop * config.steps_per_update,
                }
                for name, values in metrics.items():
                    value = _nanmean(values[seed, start:stop])
                    row[name] = value if math.isfinite(value) else None
                lines.append(json.dumps(row))
    lines.extend(json.dumps({"kind": "chunk", **row}) for row in timing)
    return "".join(line + "\n" for line in lines)
