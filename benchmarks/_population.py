"""What the ``benchmarks/population_*.py`` scripts share: the ``--set`` option on
the default profile of ``mopa experiment intent_population``, the trained stages
they play on, its rows against one prey (:func:`mopa.eval.protocol.play_rows`),
and the record each writes.

Imported by those scripts (run as ``python benchmarks/NAME.py``, so this folder is
on the import path), after :func:`~mopa.core.devices.use_cpu_devices`.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from mopa.core.configs import replace_from_json
from mopa.errors import InvalidParameterError
from mopa.eval.protocol import play_rows
from mopa.experiments import intent_population as ip
from mopa.experiments import intent_population_rows as pr
from mopa.experiments.intent_conditions import intent_game, read_teams
from mopa.opponent.population import load_clones


def add_set_option(parser: argparse.ArgumentParser) -> None:
    """``--set FIELD VALUE`` (repeatable, values JSON): a field of the default
    profile's config changed."""
    parser.add_argument(
        "--set",
        nargs=2,
        action="append",
        default=[],
        metavar=("FIELD", "VALUE"),
        help="a field of the default profile's config and its value (JSON)",
    )


def config_from(
    parser: argparse.ArgumentParser,
    changes: list,
    option: str = "--set",
    base: ip.PopulationExperimentConfig | None = None,
) -> ip.PopulationExperimentConfig:
    """``base`` (the default profile) with ``changes`` ``[(FIELD, JSON), ...]``;
    a bad field or value ends the script through ``parser.error`` naming
    ``option``."""
    try:
        return replace_from_json(base or ip.PROFILES["default"], changes)
    except InvalidParameterError as error:
        parser.error(f"{option}: {error}")


def trained_stages(config: ip.PopulationExperimentConfig, stages: Path) -> tuple:
    """``(teams, clones)``: every condition's trained teams and the clone library
    in a run's ``stages`` folder."""
    teams = {c: read_teams(stages / f"train_{c}") for c in config.conditions}
    return teams, load_clones(stages / "population" / "clones.msgpack")


def play_named_rows(
    rows: dict,
    names: list[str],
    entry: Any,
    key: Any,
    *,
    num_episodes: int,
    paired: bool,
    faced: Any = None,
) -> dict:
    """Rows ``names`` of :func:`~mopa.experiments.intent_population_rows.
    build_rows` against one prey entry, as the ``eval`` stage plays them:
    ``{ROW: captures [S, num_episodes]}``; ``faced``: the prey's policy params
    for ``true_model_planner``."""
    env, params = intent_game()
    return play_rows(
        env,
        params,
        pr.row_entries(rows, names, faced),
        entry,
        key,
        num_episodes=num_episodes,
        paired_episodes=paired,
    )


def write_record(out: Path, results: Any, meta: dict) -> None:
    """``out`` (the results as JSON) and ``out`` with ``.meta.json`` (the run's
    :func:`~mopa.core.runinfo.run_metadata`)."""
    out.write_text(json.dumps(results, indent=1) + "\n")
    out.with_suffix(".meta.json").write_text(json.dumps(meta, indent=1) + "\n")
