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


@dataclasses.dataclass(frozen=True, kw_only=True)
class DrawnConfig:
    seed: int = 5
    num_seeds: int = 2


def drawn(config, seeds, progress, stages):
    """A pipeline whose figure depends on its base seed, through a stage."""
    out = stages.run("measure", {"seed": config.seed}, lambda folder: config.seed * 2)
    return {
        "captures": {"mean": float(out), "ci95": [out - 1.0, out + 1.0], "n": 10},
        "seed": config.seed,
    }


def drawn_criteria(results):
    return [("captures >= 11", results["captures"]["mean"] >= 11), ("untested", None)]


register_experiment(
    "test-drawn",
    drawn,
    {"small": DrawnConfig()},
    "small",
    markdown_fn=lambda results: f"# Captures\n\n{results['captures']['mean']:.1f}\n",
    criteria_fn=drawn_criteria,
)


def test_draws_rerun_the_pipeline_from_successive_seeds_and_pool(tmp_path):
    results = run_experiment("test-drawn", out=tmp_path, draws=3)
    assert results["draw_seeds"] == [5, 6, 7]
    assert [d["captures"]["mean"] for d in results["draws"]] == [10.0, 12.0, 14.0]
    pooled = results["captures"]
    assert pooled["mean"] == 12.0 and pooled["by_draw"] == [10.0, 12.0, 14.0]
    assert pooled["n"] == 30
    half = 4.302652729911275 * (4.0 / 3) ** 0.5  # t(2) x sqrt(s^2 / 3)
    assert pooled["ci95"] == pytest.approx([12.0 - half, 12.0 + half])
    # each draw keeps its stages apart
    stages = sorted(p.name for p in (tmp_path / "stages").iterdir())
    assert stages == ["draw_5", "draw_6", "draw_7"]
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["draws"] == 3 and config["config"]["seed"] == 5
    text = (tmp_path / "results.md").read_text()
    assert "| criterion | seed 5 | seed 6 | seed 7 | pooled |" in text
    assert "| captures >= 11 | not met | met | met | met |" in text
    assert "| untested | - | - | - | - |" in text
    assert "## Captures" in text  # the experiment's own tables, one level down


def test_draws_need_two_and_a_base_seed(tmp_path, capsys):
    with pytest.raises(InvalidParameterError, match="draws must be an integer >= 2"):
        run_experiment("test-drawn", draws=1)
    with pytest.raises(InvalidParameterError, match="no base seed"):
        run_experiment("test-count", draws=2)
    out = tmp_path / "out"
    assert main(["experiment", "test-count", "--draws", "2", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "no base seed" in err and err.count("\n") == 1
    assert main(["experiment", "test-drawn", "--draws", "0", "--out", str(out)]) == 2
    assert not out.exists()  # nothing was written


def test_a_folder_of_draws_verifies_by_rerunning_every_draw(tmp_path, capsys):
    folder = tmp_path / "drawn"
    assert main(["experiment", "test-drawn", "--draws", "2", "--out", str(folder)]) == 0
    capsys.readouterr()
    assert main(["verify", str(folder), "--scratch", str(tmp_path / "rerun")]) == 0
    out = capsys.readouterr().out
    assert "mopa experiment test-drawn --profile small --draws 2" in out
    assert out.rstrip().endswith("verified")
    assert sorted(p.name for p in (tmp_path / "rerun" / "stages").iterdir()) == [
        "draw_5",
        "draw_6",
    ]
