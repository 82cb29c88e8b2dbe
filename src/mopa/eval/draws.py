"""Pool the results of independent draws of a whole pipeline.

A draw is one run of an experiment from its base seed, training included; draws
differ only in that seed (``mopa experiment NAME --draws 3``, see
:func:`~mopa.runs.registry.run_experiment`). :func:`pool_draws` lays their
``results.json`` trees side by side and returns one tree of the same shape, so
that whatever reads one draw's results (tables, criteria, plots) reads the pooled
ones::

    pooled = pool_draws([results_seed0, results_seed1, results_seed2])
    pooled["conditions_held_out"]["population_planner"]
    # {"mean": ..., "ci95": [...], "by_draw": [m0, m1, m2], "n_episodes": ...}

How each node pools:

* a **figure with an interval** (a dict with ``mean`` and ``ci95``): the draws'
  mean, with :func:`~mopa.eval.intervals.draws_interval` (between draws and
  within each); ``by_draw`` keeps each draw's mean; its counts (``n``, ``n_*``)
  add up, its other fields pool as below;
* a number: the draws' mean (a count, ``n`` or ``n_*``, the sum; an integer the
  draws share stays as it is);
* a list of equal lengths: item by item; of differing lengths: the draws' lists;
* a dict: key by key, over the keys every draw has;
* text: kept where the draws agree, else the draws' texts joined by `` / `` (the
  best clone of each draw: ``pooled / belief_s0 / pooled``);
* anything else (booleans, ``None``): kept where the draws agree, else the list
  of the draws' values.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mopa.errors import InvalidParameterError
from mopa.eval.intervals import draws_interval


def pool_draws(trees: Sequence[Any]) -> Any:
    """One results tree from the ``trees`` of 2 or more draws (see the module
    docstring).

    Raises:
        InvalidParameterError: fewer than 2 trees.
    """
    if len(trees) < 2:
        raise InvalidParameterError(f"pooling needs 2 or more draws, got {len(trees)}")
    return _pool(list(trees), "")


def _is_count(key: str) -> bool:
    return key == "n" or key.startswith("n_")


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _pool(values: list, key: str) -> Any:
    first = values[0]
    if all(isinstance(v, Mapping) for v in values):
        if all(_is_number(v.get("mean")) and "ci95" in v for v in values):
            return _pool_figure(values)
        common = [k for k in first if all(k in v for v in values)]
        return {k: _pool([v[k] for v in values], k) for k in common}
    if all(isinstance(v, list) for v in values):
        if len({len(v) for v in values}) == 1:
            return [_pool(list(items), key) for items in zip(*values, strict=True)]
        return values
    if all(_is_number(v) for v in values):
        if _is_count(key) and all(isinstance(v, int) for v in values):
            return sum(values)
        if all(isinstance(v, int) and v == first for v in values):
            return first
        return sum(float(v) for v in values) / len(values)
    if all(v == first for v in values):
        return first
    if all(isinstance(v, str) for v in values):
        return " / ".join(values)
    return values


def _pool_figure(cells: list[Mapping]) -> dict[str, Any]:
    """A ``{"mean", "ci95", ...}`` figure of every draw, pooled."""
    means = [float(c["mean"]) for c in cells]
    half_widths = [
        0.0 if c["ci95"] is None else (float(c["ci95"][1]) - float(c["ci95"][0])) / 2
        for c in cells
    ]
    rest = {
        k: _pool([c[k] for c in cells], k)
        for k in cells[0]
        if k not in ("mean", "ci95", "by_draw") and all(k in c for c in cells)
    }
    return {**draws_interval(means, half_widths), "by_draw": means, **rest}
