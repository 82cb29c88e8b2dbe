"""Rerun a result folder's experiment and compare every number (``mopa verify``).

A result folder written by :func:`~mopa.experiments.run_experiment` records what
produced it: ``config.json`` names the experiment, its preset, the seed override and
the whole config; ``meta.json`` the commit and machine. :func:`verify_folder` reruns
that experiment from nothing into a scratch folder (reusing no stage of the
committed folder) and :func:`compare_results` sets every number of the two
``results.json`` side by side::

    report = verify_folder("results/exp3", scratch="/tmp/exp3_rerun")
    report.ok, [c for c in report.comparisons if not c.ok]

The tolerances and the comparison itself: :mod:`mopa.report.compare`.
"""

from __future__ import annotations

import dataclasses
import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mopa.errors import InvalidParameterError
from mopa.report.compare import (
    FLOAT_ATOL,
    FLOAT_RTOL,
    Comparison,
    compare_results,
    flatten,
    read_json_file,
    recorded_machine,
)
from mopa.runs.registry import (
    ABSENT_MEANS,
    config_dict,
    get_experiment,
    get_preset,
    run_experiment,
)


@dataclasses.dataclass(frozen=True)
class RecordedRun:
    """What a result folder says produced it."""

    experiment: str
    preset: str
    seeds: int | None
    git_sha: str | None
    devices: int | None
    cpu: dict[str, Any] | None
    """The processor it ran on (``None`` in folders written before it was kept)."""
    numerics: str = "native"
    """The numerics mode it computed in (:mod:`mopa.core.numerics`; ``native`` in
    folders written before the mode was kept, as they all computed)."""
    draws: int | None = None
    """How many draws of the pipeline it pooled (``None``: one run)."""

    @property
    def command(self) -> str:
        seeds = "" if self.seeds is None else f" --seeds {self.seeds}"
        draws = "" if self.draws is None else f" --draws {self.draws}"
        return (
            f"mopa experiment {self.experiment} --profile {self.preset}{seeds}{draws}"
        )


def recorded_run(folder: str | Path) -> RecordedRun:
    """Read the command a result folder records, and check the code still has it.

    Raises:
        InvalidParameterError: the folder is missing, lacks ``config.json`` /
            ``meta.json`` / ``results.json``, records no experiment, or records a
            config that neither its preset nor another of the experiment's has
            any longer (the differing field is named: rerunning the preset would
            verify something else). A preset renamed since, or whose name is
            gone while another preset keeps its config, is followed.
        UnknownNameError: the experiment is not registered, or the preset is
            not and no other preset has the recorded config.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise InvalidParameterError(f"{folder} is not a result folder")
    described = read_json_file(folder / "config.json")
    meta = read_json_file(folder / "meta.json")
    read_json_file(folder / "results.json")
    if not isinstance(described, dict) or not {"experiment", "preset"} <= set(
        described
    ):
        raise InvalidParameterError(
            f"{folder / 'config.json'} records no experiment and preset "
            "(mopa verify reruns folders written by mopa experiment / reproduce)"
        )
    seeds = described.get("seeds")
    if seeds is not None and (isinstance(seeds, bool) or not isinstance(seeds, int)):
        raise InvalidParameterError(f"{folder / 'config.json'}: bad seeds {seeds!r}")
    draws = described.get("draws")
    if draws is not None and (
        isinstance(draws, bool) or not isinstance(draws, int) or draws < 2
    ):
        raise InvalidParameterError(f"{folder / 'config.json'}: bad draws {draws!r}")
    name = described["experiment"]
    try:
        preset = recorded_preset(name, described["preset"], described.get("config"))
    except InvalidParameterError as error:
        raise InvalidParameterError(f"{folder} was written with {error}") from None
    return dataclasses.replace(
        RecordedRun(name, preset, seeds, *recorded_machine(meta)), draws=draws
    )


def recorded_preset(name: str, preset: str, recorded: Any) -> str:
    """The preset of experiment ``name`` that has the ``recorded`` config today:
    ``preset`` itself, or the name it was renamed to since (a new default kept
    the old config under another name, or the old name was dropped).

    Raises:
        InvalidParameterError: no preset has the recorded config any longer (the
            first differing field of ``preset`` is named).
        UnknownNameError: the experiment is not registered, or ``preset`` is not
            and no other preset has the recorded config.
    """
    presets = get_experiment(name).presets
    mismatch = (
        _config_mismatch(recorded, presets[preset]) if preset in presets else None
    )
    if preset in presets and mismatch is None:
        return preset
    renamed = [
        other
        for other, config in presets.items()
        if other != preset and _config_mismatch(recorded, config) is None
    ]
    if not renamed and preset not in presets:
        get_preset(name, preset)  # raises UnknownNameError, naming the presets
    if not renamed:
        path, was, now = mismatch
        raise InvalidParameterError(
            f"{name}'s preset {preset!r} at {path} = {was!r}; the preset now has "
            f"{now!r}"
        )
    return renamed[0]


def _config_mismatch(recorded: Any, config: Any) -> tuple[str, Any, Any] | None:
    """The first ``(path, recorded value, config's value)`` at which a recorded
    config differs from ``config``, or ``None``. A field the recorded config lacks
    reads as the value its metadata says folders without it ran with
    (:data:`~mopa.runs.registry.ABSENT_MEANS`)."""
    recorded = dict(recorded) if isinstance(recorded, dict) else {}
    for field in dataclasses.fields(config):
        if field.name not in recorded and ABSENT_MEANS in field.metadata:
            recorded[field.name] = field.metadata[ABSENT_MEANS]
    was = flatten(recorded)
    now = flatten(json.loads(json.dumps(config_dict(config))))
    for path in sorted(set(was) | set(now)):
        if was.get(path, "<absent>") != now.get(path, "<absent>"):
            return path, was.get(path, "<absent>"), now.get(path, "<absent>")
    return None


@dataclasses.dataclass(frozen=True)
class VerifyReport:
    """The outcome of :func:`verify_folder`."""

    run: RecordedRun
    comparisons: list[Comparison]
    wall_s: float
    scratch: Path

    @property
    def failures(self) -> list[Comparison]:
        return [c for c in self.comparisons if not c.ok]

    @property
    def ok(self) -> bool:
        return not self.failures


def verify_folder(
    folder: str | Path,
    scratch: str | Path | None = None,
    progress: Callable[[str], None] | None = None,
    rtol: float = FLOAT_RTOL,
    atol: float = FLOAT_ATOL,
) -> VerifyReport:
    """Rerun the experiment recorded in ``folder`` from nothing and compare.

    Args:
        folder: a folder written by ``mopa experiment`` or ``mopa reproduce``.
        scratch: where the rerun writes (an empty or absent folder, or one left by
            an interrupted verify of the same folder, whose finished stages are
            reused); ``None``: a temporary folder, removed afterwards.
        progress: called with one line at a time.
        rtol, atol: float tolerances.

    Raises:
        InvalidParameterError: see :func:`recorded_run`; or ``scratch`` is the
            committed folder or inside it.
    """
    folder = Path(folder)
    run = recorded_run(folder)
    committed = read_json_file(folder / "results.json")
    if scratch is None:
        with tempfile.TemporaryDirectory(prefix="mopa-verify-") as temporary:
            return verify_folder(folder, temporary, progress, rtol, atol)
    scratch = Path(scratch)
    if scratch.resolve().is_relative_to(folder.resolve()):
        raise InvalidParameterError(
            f"scratch folder {scratch} is inside {folder}: the rerun must not reuse "
            "the committed folder"
        )
    start = time.perf_counter()
    rerun = run_experiment(
        run.experiment, run.preset, scratch, run.seeds, progress, draws=run.draws
    )
    wall_s = time.perf_counter() - start
    rerun = json.loads(json.dumps(rerun))  # as results.json stores it
    return VerifyReport(
        run, compare_results(committed, rerun, rtol, atol), wall_s, scratch
    )
