"""The experiment registry and runner: presets, seeds, the files written, and
errors for unknown names, through the library and the CLI."""

import dataclasses
import json

import pytest

from mopa.cli.main import main
from mopa.errors import InvalidParameterError, UnknownNameError
from mopa.experiments import (
    get_preset,
    register_experiment,
    registered_experiments,
    run_experiment,
)


@dataclasses.dataclass(frozen=True, kw_only=True)
class CountConfig:
    start: int = 1
    num_seeds: int = 3


def count(config, seeds, progress, stages):
    n = config.num_seeds if seeds is None else seeds
    progress(f"counting {n}")
    return {"values": [config.start + s for s in range(n)]}


register_experiment(
    "test-count",
    count,
    {"small": CountConfig(), "big": CountConfig(start=10)},
    "small",
    description="test experiment",
)


def test_registry_lists_the_pola_experiments():
    names = registered_experiments()
    assert {"pola-fig3", "pola-ipd", "pola-coin", "test-count"} <= set(names)
    assert get_preset("pola-fig3", "paper").num_seeds == 20


def test_run_writes_results_config_and_meta(tmp_path):
    lines = []
    results = run_experiment(
        "test-count", "big", tmp_path, seeds=2, progress=lines.append
    )
    assert results == {"values": [10, 11]}
    assert json.loads((tmp_path / "results.json").read_text()) == results
    config = json.loads((tmp_path / "config.json").read_text())
    assert config == {
        "experiment": "test-count",
        "preset": "big",
        "seeds": 2,
        "config": {"start": 10, "num_seeds": 3},
    }
    meta = json.loads((tmp_path / "meta.json").read_text())
    assert (
        meta["config"] == config and "jax" in meta["versions"] and meta["wall_s"] >= 0
    )
    assert lines[0] == "counting 2"
    # The default preset and the preset's own seed count:
    assert run_experiment("test-count") == {"values": [1, 2, 3]}


def test_unknown_names_and_bad_seeds():
    with pytest.raises(
        UnknownNameError, match="unknown experiment 'pola-fig'.*did you mean"
    ):
        run_experiment("pola-fig")
    with pytest.raises(UnknownNameError, match="unknown preset 'huge'.*big, small"):
        run_experiment("test-count", "huge")
    with pytest.raises(InvalidParameterError, match="seeds"):
        run_experiment("test-count", seeds=0)
    with pytest.raises(ValueError, match="already registered"):
        register_experiment("test-count", count, {"small": CountConfig()}, "small")
    with pytest.raises(ValueError, match="default preset"):
        register_experiment("test-other", count, {"small": CountConfig()}, "big")


def test_cli_runs_lists_and_reports_errors(tmp_path, capsys):
    assert main(["experiment", "test-count", "--preset", "big", "--seeds", "1",
                 "--out", str(tmp_path)]) == 0  # fmt: skip
    assert json.loads((tmp_path / "results.json").read_text()) == {"values": [10]}
    assert main(["experiment", "--list"]) == 0
    listing = capsys.readouterr().out
    assert "pola-fig3" in listing and "small*" in listing
    assert main(["experiment", "nope"]) == 2
    err = capsys.readouterr().err
    assert (
        err.startswith("mopa: error: unknown experiment 'nope'")
        and err.count("\n") == 1
    )
    assert main(["experiment", "test-count", "--preset", "huge"]) == 2
    assert main(["experiment", "test-count", "--seeds", "0"]) == 2
    assert main(["experiment"]) == 2


def test_fig3_quick_preset_runs_and_plots(tmp_path):
    results = run_experiment("pola-fig3", "quick", tmp_path, seeds=2)
    assert set(results["p_tft"]) == {"lola_tabular", "pola_tabular"}
    assert set(results["p_tft"]["pola_tabular"]) == {"1.6"}
    for method in results["p_tft"]:
        assert 0.0 <= results["p_tft"][method]["1.6"] <= 1.0
    # 15 LOLA epochs at cf 1.6 reach TFT on these seeds; one POLA epoch does not yet.
    assert results["p_tft"]["lola_tabular"]["1.6"] == 1.0
    assert results["settings"]["pola_tabular"]["1.6"]["num_epochs"] == 1
    assert (tmp_path / "fig3.png").stat().st_size > 1000


def test_fig3_config_names_the_bad_field():
    from mopa.experiments.pola import Fig3Config

    with pytest.raises(UnknownNameError, match="methods"):
        Fig3Config(methods=("sos_tabular",))
    with pytest.raises(InvalidParameterError, match="contrib_factors"):
        Fig3Config(contrib_factors=(1.5,))
