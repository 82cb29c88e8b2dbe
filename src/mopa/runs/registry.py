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

**Draws.** One training draw can overturn a verdict, so an experiment whose config
has a base ``seed`` can be run as ``draws`` independent draws of the whole
pipeline, training included (``mopa experiment NAME --draws 3``): draw ``r`` runs
the config with ``seed + r``, in its own stage folder. ``results.json`` is then
the draws pooled (:func:`~mopa.eval.draws.pool_draws`: the same shape as one
draw's, each figure the draws' mean with an interval that counts the variation
between draws) plus ``draws``, the list of each draw's results, and
``draw_seeds``. An experiment registered with ``criteria_fn`` gets its criteria
judged on each draw and pooled, as a table in ``results.md``.
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib
import json
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from mopa.core.files import atomic_write, write_json
from mopa.core.runinfo import run_metadata
from mopa.core.stages import Stages
from mopa.errors import InvalidParameterError, UnknownNameError
from mopa.report.page import demote_headings

RunFn = Callable[..., dict]
"""``run_fn(config, seeds: int | None, progress: Callable[[str], None], stages:
Stages) -> dict``."""

PlotFn = Callable[[dict, Path], list[Path]]
"""``plot_fn(results, out_dir) -> paths written``."""

MarkdownFn = Callable[[dict], str]
"""``markdown_fn(results) -> text`` of ``results.md``: mopa's figures beside the
research's."""

CriteriaFn = Callable[[dict], list[tuple[str, "bool | None"]]]
"""``criteria_fn(results) -> [(criterion, met)]``: the experiment's criteria on
one results tree (``None``: not measured)."""


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
    criteria_fn: CriteriaFn | None = None


_EXPERIMENTS: dict[str, Experiment] = {}

EXPERIMENT_PACKAGES: list[str] = ["mopa.experiments"]
"""Packages imported on the first lookup of an experiment, for the experiments they
register: mopa's own (:mod:`mopa.experiments`), and any a user appends, so that
``mopa experiment`` and ``mopa verify`` find an experiment of their own package.
The registry names them rather than importing them: they sit above it."""


def _experiments() -> dict[str, Experiment]:
    """Every registered experiment, after importing :data:`EXPERIMENT_PACKAGES`."""
    for package in EXPERIMENT_PACKAGES:
        importlib.import_module(package)
    return _EXPERIMENTS


def register_experiment(
    name: str,
    run_fn: RunFn,
    presets: Mapping[str, Any],
    default_preset: str,
    plot_fn: PlotFn | None = None,
    description: str = "",
    markdown_fn: MarkdownFn | None = None,
    criteria_fn: CriteriaFn | None = None,
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
        criteria_fn: optional ``criteria_fn(results) -> [(criterion, met)]``,
            judged on each draw and pooled when the experiment runs as draws.

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
        name,
        run_fn,
        dict(presets),
        default_preset,
        plot_fn,
        description,
        markdown_fn,
        criteria_fn,
    )
    _EXPERIMENTS[name] = experiment
    return experiment


def registered_experiments() -> list[str]:
    """Names of every registered experiment, sorted."""
    return sorted(_experiments())


def get_experiment(name: str) -> Experiment:
    """The experiment called ``name``.

    Raises:
        UnknownNameError: no experiment has that name.
    """
    if name not in _experiments():
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
    and base seed aside: a draw of a profile is that profile), or ``custom``."""
    for name, profile in profiles.items():
        fields = {"num_seeds": config.num_seeds}
        if hasattr(config, "seed") and hasattr(profile, "seed"):
            fields["seed"] = config.seed
        if dataclasses.replace(profile, **fields) == config:
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
    draws: int | None = None,
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
        draws: run the whole pipeline this many times, from base seeds ``seed``,
            ``seed + 1``, ..., and pool them (see the module docstring; ``None``:
            one run, as the preset says).

    Returns:
        The results dict (also written to ``out/results.json``).

    Raises:
        UnknownNameError: unknown experiment or preset.
        InvalidParameterError: ``seeds`` is not positive; ``draws`` is below 2,
            or the experiment's config has no base ``seed``.
    """
    experiment = get_experiment(name)
    preset = experiment.default_preset if preset is None else preset
    config = get_preset(name, preset)
    if seeds is not None and seeds < 1:
        raise InvalidParameterError(f"seeds must be >= 1, got {seeds}")
    check_draws(experiment, config, draws)
    progress = progress or (lambda line: None)
    described = {
        "experiment": name,
        "preset": preset,
        "seeds": seeds,
        "config": config_dict(config),
    }
    if draws is not None:
        described["draws"] = draws
    meta = run_metadata(described)  # the source as it was when the run started
    start = time.perf_counter()
    stage_root = None if out is None else Path(out) / "stages"
    options = {} if backend is None else {"backend": backend}
    if draws is None:
        stages = Stages(stage_root, progress)
        results = experiment.run_fn(config, seeds, progress, stages, **options)
    else:
        results = _run_draws(
            experiment, config, seeds, draws, stage_root, progress, options
        )
    elapsed = time.perf_counter() - start
    if out is not None:
        out = Path(out)
        write_json(out / "results.json", results)
        write_json(out / "config.json", described)
        write_json(out / "meta.json", {**meta, "wall_s": elapsed})
        text = results_markdown(experiment, results)
        if text is not None:
            atomic_write(out / "results.md", lambda file: file.write(text.encode()))
        if experiment.plot_fn is not None:
            for path in experiment.plot_fn(results, out):
                progress(f"wrote {path}")
        progress(f"wrote {out / 'results.json'}")
    return results


def check_draws(experiment: Experiment, config: Any, draws: int | None) -> None:
    """Check a ``draws`` request against an experiment's config.

    Raises:
        InvalidParameterError: ``draws`` is below 2 (or not an integer), or the
            config has no integer base ``seed`` to draw from.
    """
    if draws is None:
        return
    if isinstance(draws, bool) or not isinstance(draws, int) or draws < 2:
        raise InvalidParameterError(f"draws must be an integer >= 2, got {draws!r}")
    seed = getattr(config, "seed", None)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise InvalidParameterError(
            f"experiment {experiment.name!r} has no base seed in its config, so it "
            "cannot be run as draws"
        )


def _run_draws(
    experiment: Experiment,
    config: Any,
    seeds: int | None,
    draws: int,
    stage_root: Path | None,
    progress: Callable[[str], None],
    options: dict,
) -> dict:
    """Every draw of the whole pipeline, each in its own stage folder, pooled."""
    from mopa.eval.draws import pool_draws

    draw_seeds = [config.seed + r for r in range(draws)]
    trees = []
    for seed in draw_seeds:
        progress(f"[draws] base seed {seed} ({len(trees) + 1} of {draws})")
        stages = Stages(
            None if stage_root is None else stage_root / f"draw_{seed}", progress
        )
        drawn = dataclasses.replace(config, seed=seed)
        results = experiment.run_fn(drawn, seeds, progress, stages, **options)
        trees.append(json.loads(json.dumps(results)))  # as results.json stores it
    return {**pool_draws(trees), "draw_seeds": draw_seeds, "draws": trees}


def draw_criteria(experiment: Experiment, results: Mapping) -> list[list[str]] | None:
    """Rows ``[criterion, draw 1, ..., pooled]`` of the experiment's criteria on
    each draw and on the pooled results (``met``, ``not met``, ``-``), or ``None``
    where the results are not draws or the experiment has no criteria."""
    if experiment.criteria_fn is None or "draws" not in results:
        return None
    marks = {True: "met", False: "not met", None: "-"}
    columns = [experiment.criteria_fn(tree) for tree in results["draws"]]
    pooled = experiment.criteria_fn(dict(results))
    return [
        [statement, *(marks[c[i][1]] for c in columns), marks[met]]
        for i, (statement, met) in enumerate(pooled)
    ]


def results_markdown(experiment: Experiment, results: Mapping) -> str | None:
    """``results.md``: for draws, the criteria by draw and pooled, then the
    experiment's own tables of the pooled results; else its own tables (``None``
    where it writes none)."""
    own = None if experiment.markdown_fn is None else experiment.markdown_fn(results)
    rows = draw_criteria(experiment, results)
    if rows is None:
        return own
    seeds = results["draw_seeds"]
    lines = [
        f"# {experiment.name}: {len(seeds)} draws, pooled",
        "",
        f"Each draw runs the whole pipeline, training included, from base seed "
        f"{', '.join(map(str, seeds))}. Pooled figures are the draws' mean, with a "
        "95% interval that counts the variation between draws as well as within "
        "each (Student's t over the draws; `mopa.eval.intervals.draws_interval`). "
        "The experiment's own tables below show the pooled figures: each of their "
        "intervals is this pooled one, whatever their headers say.",
        "",
        "| criterion | " + " | ".join(f"seed {s}" for s in seeds) + " | pooled |",
        "|---|" + "---|" * (len(seeds) + 1),
        *("| " + " | ".join(row) + " |" for row in rows),
    ]
    if own is not None:
        lines += ["", demote_headings(own, 1)]
    return "\n".join(lines) + "\n"
