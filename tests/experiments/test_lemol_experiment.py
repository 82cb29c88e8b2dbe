"""``mopa experiment lemol``: the quick profile end to end (files, the results
schema the issue asks for, a verdict that follows from the numbers, stage reuse;
the quick budget learns nothing, so no figures are checked), and the
statistics by hand."""

import json
import math
import shutil

import numpy as np
import pytest

from mopa.errors import InvalidParameterError, UnknownNameError
from mopa.experiments import get_preset, run_experiment
from mopa.experiments.lemol import (
    DEFAULT_RUN,
    LeMOLExperimentConfig,
    method_config,
)

PLOTS = ("lemol_prediction.png", "lemol_within_playout.png", "lemol_returns.png")


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("lemol") / "run"
    run_experiment("lemol", "quick", out)
    return out


@pytest.mark.slow
def test_quick_run_writes_results_markdown_and_plots(quick_run):
    for name in ("results.json", "config.json", "meta.json", "results.md", *PLOTS):
        assert (quick_run / name).is_file(), name
        assert (quick_run / name).stat().st_size > 0, name
    described = json.loads((quick_run / "config.json").read_text())
    assert described["experiment"] == "lemol" and described["preset"] == "quick"
    results = json.loads((quick_run / "results.json").read_text())
    markdown = (quick_run / "results.md").read_text()
    assert results["verdict"] in markdown
    assert "| cycle | LeMOL accuracy | BC accuracy |" in markdown


@pytest.mark.slow
def test_results_have_the_issue_schema(quick_run):
    results = json.loads((quick_run / "results.json").read_text())
    config = get_preset("lemol", "quick")
    cycles = config.run.n_opp_cycles
    assert results["num_cycles"] == cycles
    assert results["num_seeds"] == config.num_seeds
    for method in ("lemol", "bc"):
        accuracy = results["prediction_accuracy"][method]
        assert len(accuracy) == cycles
        assert all(isinstance(a, float) and 0.0 <= a <= 1.0 for a in accuracy)
        cross_entropy = results["cross_entropy"][method]
        assert len(cross_entropy) == cycles and all(x > 0 for x in cross_entropy)
        for mean, (low, high) in zip(
            accuracy, results["prediction_accuracy_ci95"][method], strict=True
        ):
            assert low <= mean + 1e-9 and mean <= high + 1e-9
    assert results["uniform"]["accuracy"] == pytest.approx(0.2)
    assert results["uniform"]["cross_entropy"] == pytest.approx(math.log(5), 1e-5)
    assert set(results["returns"]) == set(config.methods)
    for table in ("returns", "returns_opponent"):
        for entry in results[table].values():
            low, high = entry["ci95"]
            assert low <= entry["mean"] <= high
    for method in config.methods:
        for team in ("adversary", "good"):
            assert len(results["returns_per_cycle"][method][team]["mean"]) == cycles
    within = results["within_playout_accuracy"]["lemol"]["mean"]
    assert len(within) == config.within_bins


@pytest.mark.slow
def test_the_verdict_follows_the_numbers(quick_run):
    """The accuracy gap is LeMOL's later-cycle accuracy minus BC's per seed; the
    verdict says "beats" exactly when its interval lies above 0."""
    results = json.loads((quick_run / "results.json").read_text())
    start, end = results["later_cycles"]
    gap = results["accuracy_gap"]
    assert len(gap["per_seed"]) == results["num_seeds"]
    assert gap["mean"] == pytest.approx(np.mean(gap["per_seed"]))
    means = results["later_accuracy"]
    assert gap["mean"] == pytest.approx(means["lemol"]["mean"] - means["bc"]["mean"])
    # The per-seed means over the later cycles average to the per-cycle curve's.
    curve = np.asarray(results["prediction_accuracy"]["lemol"])
    assert means["lemol"]["mean"] == pytest.approx(curve[start:end].mean())
    beats = gap["ci95"][0] > 0
    assert ("LeMOL beats" in results["verdict"]) == beats
    assert gap["excludes_zero"] == (gap["ci95"][0] > 0 or gap["ci95"][1] < 0)


@pytest.mark.slow
def test_a_second_run_reuses_every_stage(quick_run, tmp_path):
    out = tmp_path / "again"
    shutil.copytree(quick_run, out)
    before = json.loads((out / "results.json").read_text())
    lines = []
    results = run_experiment("lemol", "quick", out, progress=lines.append)
    for stage in ("train_lemol", "train_bc"):
        assert f"[{stage}] reused (finished earlier with this config)" in lines
    results = json.loads(json.dumps(results))
    for name in ("prediction_accuracy", "cross_entropy", "returns", "verdict"):
        assert results[name] == before[name], name


def test_methods_set_the_focal_agent_and_its_model():
    lemol = method_config(DEFAULT_RUN, "lemol", 3)
    bc = method_config(DEFAULT_RUN, "bc", 3)
    m3 = method_config(DEFAULT_RUN, "m3ddpg", 3)
    assert (lemol.bad_policy, lemol.opponent_model) == ("lemol", "lstm")
    assert (bc.bad_policy, bc.opponent_model) == ("lemol", "bc")
    assert m3.bad_policy == "m3ddpg" and not m3.uses_model
    # Everything else, the opponent's learning schedule included, is shared.
    assert lemol.replace(opponent_model="bc") == bc
    assert lemol.num_seeds == 3 and lemol.good_policy == "maddpg"


def test_later_cycles():
    assert LeMOLExperimentConfig().later_cycles == (6, 12)
    three = DEFAULT_RUN.replace(n_opp_cycles=3)
    assert LeMOLExperimentConfig(run=three).later_cycles == (1, 3)
    assert LeMOLExperimentConfig(run=three, later_fraction=0.1).later_cycles == (2, 3)


@pytest.mark.parametrize(
    "fields, error, message",
    [
        ({"methods": ("lemol",)}, InvalidParameterError, "lemol and bc"),
        ({"methods": ("lemol", "bc", "pola")}, UnknownNameError, "methods"),
        ({"run": DEFAULT_RUN.replace(discrete_actions=False)}, InvalidParameterError,
         "discrete_actions"),
        ({"num_seeds": 0}, InvalidParameterError, "num_seeds"),
        ({"later_fraction": 0.0}, InvalidParameterError, "later_fraction"),
        ({"within_bins": 10_000}, InvalidParameterError, "within_bins"),
    ],
)  # fmt: skip
def test_bad_configs_name_the_field(fields, error, message):
    with pytest.raises(error, match=message):
        LeMOLExperimentConfig(**fields)
