"""What portable numerics cost (``mopa bench numerics``): the same training runs
and planner decisions timed in native and in portable mode, in one run.

A process's numerics are fixed before JAX is loaded (:mod:`mopa.core.numerics`),
so each measurement is a child ``mopa --numerics MODE bench train`` (or ``bench
planner``) writing its rows to a scratch file. The modes alternate repetition by
repetition (portable first on even repetitions, native first on odd ones), so a
machine that slows down or speeds up during the run weighs on both alike.

Figures per row (a training run or a planner mode):

* ``native`` / ``portable``: the median over the repetitions of the row's speed:
  training steps per second excluding compilation (every seed's steps over
  ``train_s``) or planner decisions per second;
* ``ratio`` = ``portable / native`` (below 1: portable is slower);
* ``native_runs`` / ``portable_runs``: each repetition's speed, and
  ``native_compile_s`` / ``portable_compile_s`` the median compilation time.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from mopa.core.numerics import MODES
from mopa.errors import InvalidParameterError


def speed(row: dict[str, Any]) -> float:
    """A benchmark row's speed: training steps per second excluding compilation
    (a ``bench train`` row), else planner decisions per second."""
    if "train_s" in row:
        return row["steps"] * row["seeds"] / row["train_s"]
    return row["decisions_per_s"]


def row_name(row: dict[str, Any]) -> str:
    """A row's name: a training run's preset or ``ALGO:ENV``, a planner's mode."""
    if "train_s" in row:
        return row.get("preset") or f"{row['algo']}:{row['env']}"
    return f"planner {row['mode']}"


def measure(mode: str, bench_argv: Sequence[str]) -> list[dict[str, Any]]:
    """Run ``mopa --numerics MODE bench ...`` in a child process and return its
    rows.

    Args:
        mode: ``"native"`` or ``"portable"``.
        bench_argv: the benchmark's command line after ``bench``, e.g.
            ``["train", "--runs", "mappo:tag", "--steps", "1e5"]``.
    """
    if mode not in MODES:
        raise InvalidParameterError(f"numerics must be one of {MODES}, got {mode!r}")
    with tempfile.TemporaryDirectory() as scratch:
        rows_path = Path(scratch) / "rows.json"
        command = [
            sys.executable,
            "-m",
            "mopa",
            "--numerics",
            mode,
            "bench",
            *bench_argv,
            "--json",
            str(rows_path),
        ]
        done = subprocess.run(
            command, capture_output=True, text=True, env=dict(os.environ)
        )
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            failure = InvalidParameterError if done.returncode == 2 else RuntimeError
            raise failure(f"`{' '.join(command[2:])}` failed: {last}")
        return json.loads(rows_path.read_text())


def bench_numerics(
    benches: Sequence[Sequence[str]],
    *,
    repeats: int = 3,
    progress: Callable[[str, int, list[dict[str, Any]]], None] | None = None,
) -> list[dict[str, Any]]:
    """Time every benchmark of ``benches`` in both modes, ``repeats`` times each,
    the modes alternating (see the module's docstring).

    Args:
        benches: command lines after ``bench`` (each writes rows to ``--json``).
        repeats: repetitions per mode and benchmark.
        progress: called as ``progress(mode, repetition, rows)`` after each child.

    Returns:
        One row per benchmark row: ``{"row", "bench", "native", "portable",
        "ratio", "native_runs", "portable_runs", "native_compile_s",
        "portable_compile_s"}``.
    """
    if repeats < 1:
        raise InvalidParameterError(f"repeats must be >= 1, got {repeats}")
    runs: dict[tuple[str, str], dict[str, list[dict[str, Any]]]] = {}
    for repetition in range(repeats):
        order = MODES if repetition % 2 == 0 else tuple(reversed(MODES))
        for argv in benches:
            for mode in order:
                rows = measure(mode, argv)
                if progress is not None:
                    progress(mode, repetition, rows)
                for row in rows:
                    key = (argv[0], row_name(row))
                    runs.setdefault(key, {m: [] for m in MODES})[mode].append(row)
    table = []
    for (bench, name), by_mode in runs.items():
        entry: dict[str, Any] = {"row": name, "bench": bench}
        for mode in MODES:
            entry[f"{mode}_runs"] = [speed(r) for r in by_mode[mode]]
            entry[mode] = statistics.median(entry[f"{mode}_runs"])
            entry[f"{mode}_compile_s"] = statistics.median(
                r["compile_s"] for r in by_mode[mode]
            )
        entry["ratio"] = entry["portable"] / entry["native"]
        table.append(entry)
    return table
