"""The experiment registry and runner behind ``mopa experiment``.

An experiment is a named, runnable definition: a driver ``run_fn(config, seeds,
progress, stages) -> results`` (pure Python around jitted code, returning a
JSON-able dict; ``stages`` is a :class:`~mopa.core.stages.Stages` that keeps
finished stages for the next run),
named presets (frozen dataclass configs), a default preset and an optional
``plot_fn(results, out_dir) -> [paths]`` that draws figures from the results alone.
:func:`run_experiment` runs one and writes ``results.json``, ``config.json`` and
``meta.json`` (versions, git SHA, machine) atomically into the output folder, plus
the plots::

    register_experiment("my-exp", run_fn, {"paper": Cfg(), "cpu": Cfg(n=3)}, "cpu")
    results = run_experiment("my-exp", preset="cpu", out="runs/my-exp", seeds=5)
"""

from __future__ import annotations

import dataclasses
import difflib
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from mopa.core.files import atomic_write, write_json
from mopa.core.runinfo import run_metadata
from mopa.core.stages import Stages
from mopa.errors import InvalidParameterError, UnknownNameError

RunFn = Callable[..., dict]
"""``run_fn(config, seeds: int | None, progress: Callable[[str], None], stages:
Stages) -> dict``."""

PlotFn = Callable[[dict, Path], list[Path]]
"""``plot_fn(results, out_dir) -> paths written``."""

MarkdownFn = Callable[[dict], str]
"""``markdown_fn(results) -> text`` of ``results.md``: mopa's figures beside the
research's."""


@dataclasses.dataclass(frozen=True)
class Experiment:
    """A registered experiment."""

    name: str
    run_fn: RunFn
    presets: Mapping[str, Any]
    default_preset: str
    plot_fn: PlotFn | None = None
    description: str = ""
    markdown_fn: MarkdownFn | None = None


_EXPERIMENTS: dict[str, Experiment] = {}


def register_experiment(
    name: str,
    run_fn: RunFn,
    presets: Mapping[str, Any],
    default_preset: str,
    plot_fn: PlotFn | None = None,
    description: str = "",
    markdown_fn: MarkdownFn | None = None,
) -> Experiment:
    """Register an experiment under ``name``.

    Args:
        name: the name ``mopa experiment NAME`` uses.
        run_fn: ``run_fn(config, seeds, progress, stages) -> results``; ``seeds``
            is ``None`` (use the config's own count) or a positive override,
            ``progress(line)`` reports progress and ``stages`` runs or reuses the
            experiment's stages (see :mod:`mopa.core.stages`). Results
            must be JSON-able.
        presets: preset name -> frozen dataclass config.
        default_preset: the preset run when none is named.
        plot_fn: optional ``plot_fn(results, out_dir) -> paths`` drawing figures.
        description: one line shown by ``--list``.
        markdown_fn: optional ``markdown_fn(results) -> text`` written as
            ``results.md`` (mopa's figures beside the research's).

    Raises:
        ValueError: the name is taken, or the default preset is not a preset.
    """
    if name in _EXPERIMENTS:
        raise ValueError(f"an experiment called {name!r} is already registered")
    if default_preset not in presets:
        raise ValueError(
            f"default preset {default_preset!r} of {name!r} is not among its presets"
        )
    for preset, config in presets.items():
        if not dataclasses.is_dataclass(config):
            raise ValueError(f"preset {preset!r} of {name!r} is not a dataclass")
    experiment = Experiment(
        name, run_fn, dict(presets), default_preset, plot_fn, description, markdown_fn
    )
    _EXPERIMENTS[name] = experiment
    return experiment


def registered_experiments() -> list[str]:
    """Names of every registered experiment, sorted."""
    return sorted(_EXPERIMENTS)


def get_experiment(name: str) -> Experiment:
    """The experiment called ``name``.

    Raises:
        UnknownNameError: no experiment has that name.
    """
    if name not in _EXPERIMENTS:
        close = difflib.get_close_matches(name, _EXPERIMENTS, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise UnknownNameError(
            f"unknown experiment {name!r}{hint}; "
            f"registered: {', '.join(registered_experiments())}"
        )
    return _EXPERIMENTS[name]


def get_preset(name: str, preset: str | None = None) -> Any:
    """The config of preset ``preset`` (default: the experiment's default) of
    experiment ``name``.

    Raises:
        UnknownNameError: unknown experiment or preset.
    """
    experiment = get_experiment(name)
    preset = experiment.default_preset if preset is None else preset
    if preset not in experiment.presets:
        raise UnknownNameError(
            f"unknown preset {preset!r} for experiment {name!r}; "
            f"presets: {', '.join(sorted(experiment.presets))}"
        )
    return experiment.presets[preset]


def profile_name(config: Any, profiles: Mapping[str, Any]) -> str:
    """The name of the profile in ``profiles`` that ``config`` is (its seed count
    aside), or ``custom``."""
    for name, profile in profiles.items():
        if dataclasses.replace(profile, num_seeds=config.num_seeds) == config:
            return name
    return "custom"


ABSENT_MEANS = "absent_means"
"""Metadata key of a config field added after folders were written without it: the
value those folders' runs behaved as (``mopa verify`` reads a missing field so)."""


def recipe_field() -> Any:
    """The ``recipe`` field of a reproduction experiment's config: ``research``
    (the default: the research's exact training settings) or ``mopa`` (mopa's
    lighter ones; :func:`~mopa.algos.presets.recipe_preset`). Folders written
    before the field existed ran mopa's recipe."""
    return dataclasses.field(default="research", metadata={ABSENT_MEANS: "mopa"})


def config_dict(config: Any) -> dict:
    """A dataclass config as a JSON-able dict (tuples become lists)."""
    return dataclasses.asdict(config)


def run_experiment(
    name: str,
    preset: str | None = None,
    out: str | Path | None = None,
    seeds: int | None = None,
    progress: Callable[[str], None] | None = None,
    backend: Any = None,
) -> dict:
    """Run experiment ``name`` with ``preset`` and write its files into ``out``.

    Args:
        name: a registered experiment.
        preset: one of its presets (``None``: the default preset).
        out: output folder; ``None`` writes nothing (the results are returned).
            Finished stages are kept in ``out/stages`` and reused by the next run
            with the same stage configs.
        seeds: number of seeds, overriding the preset's (``None``: keep it).
        progress: called with one line at a time (default: silent).
        backend: where an experiment that splits into independent jobs runs them
            (:mod:`mopa.league.backend`; ``None``: this process). Its results do
            not depend on it, so it is not part of the recorded config.

    Returns:
        The results dict (also written to ``out/results.json``).

    Raises:
        UnknownNameError: unknown experiment or preset.
        InvalidParameterError: ``seeds`` is not positive.
    """
    experiment = get_experiment(name)
    preset = experiment.default_preset if preset is None else preset
    config = get_preset(name, preset)
    if seeds is not None and seeds < 1:
        raise InvalidParameterError(f"seeds must be >= 1, got {seeds}")
    progress = progress or (lambda line: None)
    described = {
        "experiment": name,
        "preset": preset,
        "seeds": seeds,
        "config": config_dict(config),
    }
    meta = run_metadata(described)  # the source as it was when the run started
    start = time.perf_counter()
    stages = Stages(None if out is None else Path(out) / "stages", progress)
    options = {} if backend is None else {"backend": backend}
    results = experiment.run_fn(config, seeds, progress, stages, **options)
    elapsed = time.perf_counter() - start
    if out is not None:
        out = Path(out)
        write_json(out / "results.json", results)
        write_json(out / "config.json", described)
        write_json(out / "meta.json", {**meta, "wall_s": elapsed})
        if experiment.markdown_fn is not None:
            text = experiment.markdown_fn(results)
            atomic_write(out / "results.md", lambda file: file.write(text.encode()))
        if experiment.plot_fn is not None:
            for path in experiment.plot_fn(results, out):
                progress(f"wrote {path}")
        progress(f"wrote {out / 'results.json'}")
    return results
