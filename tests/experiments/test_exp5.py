"""``mopa experiment exp5`` end to end on its quick profile: the files, the
results schema the issue asks for, the clean-tree rule for results/, and stage
reuse (numbers are not checked: the quick budgets learn nothing)."""

import json
import math
import shutil

import pytest

from mopa.cli.main import main
from mopa.core import runinfo
from mopa.experiments import get_preset, run_experiment
from mopa.experiments.exp5 import Exp5Config
from tests.checkouts import make_checkout

LENGTHS = ("25", "50", "100", "150")
PLOTS = (
    "exp5_encoder_by_L.png",
    "exp5_bc.png",
    "exp5_occupancy.png",
    "exp5_brittleness.png",
)


def _stages(config: Exp5Config) -> list[str]:
    names = [f"train_{a}_{p}" for a in config.algos for p in ("circle", "corners")]
    for algo in config.algos:
        names += [f"data_{algo}", f"encode_{algo}", f"brittleness_{algo}"]
    return names + [f"bc_{config.bc_algo}"]


@pytest.fixture(scope="module")
def checkout(tmp_path_factory):
    """A checkout with an uncommitted change, standing in for mopa's source."""
    folder = tmp_path_factory.mktemp("checkout")
    make_checkout(folder)
    (folder / "f.txt").write_text("changed\n")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(runinfo, "SOURCE", folder)
        yield folder


@pytest.fixture(scope="module")
def quick_run(checkout):
    """The quick profile written into the dirty checkout's results/, allowed."""
    out = checkout / "results" / "exp5"
    argv = ["experiment", "exp5", "--profile", "quick", "--out", str(out)]
    assert main([*argv, "--allow-dirty"]) == 0
    return out


@pytest.mark.slow
def test_a_dirty_tree_writes_results_only_when_allowed(checkout, quick_run, capsys):
    out = checkout / "results" / "exp5_refused"
    assert main(["experiment", "exp5", "--profile", "quick", "--out", str(out)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("mopa: error:") and "--allow-dirty" in line
    assert not out.exists()
    meta = json.loads((quick_run / "meta.json").read_text())  # stamped dirty
    assert meta["git_dirty"] is True and meta["git_sha"].endswith("-dirty")
    assert len(meta["git_diff_sha256"]) == 64


@pytest.mark.slow
def test_quick_run_writes_results_markdown_and_plots(quick_run):
    for name in ("results.json", "config.json", "meta.json", "results.md", *PLOTS):
        assert (quick_run / name).is_file(), name
        assert (quick_run / name).stat().st_size > 0, name
    described = json.loads((quick_run / "config.json").read_text())
    assert described["experiment"] == "exp5" and described["preset"] == "quick"
    markdown = (quick_run / "results.md").read_text()
    assert "brittleness drop" in markdown and "steering rate" in markdown


@pytest.mark.slow
def test_results_have_the_issue_schema(quick_run):
    results = json.loads((quick_run / "results.json").read_text())

    def fraction(value):
        return isinstance(value, float) and 0.0 <= value <= 1.0

    assert fraction(results["probe_occupancy"])
    for name in ("vae_ari_by_L", "latent_probe_by_L"):
        assert set(LENGTHS) <= set(results[name])
        for value in results[name].values():
            assert isinstance(value, float) and -1.0 <= value <= 1.0
    assert {"vanilla", "latent", "oracle", "majority"} <= set(
        results["bc_action_match"]
    )
    assert all(fraction(v) for v in results["bc_action_match"].values())
    assert fraction(results["steering_rate"])
    for name in ("steering_ci95", "steering_ci95_episodes"):
        low, high = results[name]
        assert low <= results["steering_rate"] <= high
    config = get_preset("exp5", "quick")
    assert len(results["steering_by_seed"]) == 1  # steering_predator_seeds
    steps = str(config.steering_steps)
    assert results["steering_by_steps"][steps] == results["steering_rate"]
    assert set(results["steering_reference_by_steps"]) == set(
        results["steering_by_steps"]
    )
    assert all(fraction(v) for v in results["steering_reference_by_steps"].values())
    drop, (low, high) = results["brittleness_drop"], results["brittleness_drop_ci95"]
    assert isinstance(drop, float)
    if not math.isnan(drop):  # NaN when no co-trained capture happened at all
        assert low <= high
    for name in ("captures_cotrained", "captures_unfamiliar"):
        lo, hi = results[f"{name}_ci95"]
        assert lo <= results[name] <= hi
    assert set(results["by_algo"]) == set(config.algos)
    assert results["num_seeds"] == config.num_seeds


@pytest.mark.slow
def test_a_second_run_reuses_every_stage(quick_run, tmp_path):
    out = tmp_path / "again"
    shutil.copytree(quick_run, out)
    before = json.loads((out / "results.json").read_text())
    lines = []
    results = run_experiment("exp5", "quick", out, progress=lines.append)
    for stage in _stages(get_preset("exp5", "quick")):
        assert f"[{stage}] reused (finished earlier with this config)" in lines
    assert not any(line.endswith("running") for line in lines)
    assert json.dumps(results, sort_keys=True) == json.dumps(before, sort_keys=True)


def test_config_names_a_bad_field():
    with pytest.raises(Exception, match="bc_length"):
        Exp5Config(bc_length=150)
    with pytest.raises(Exception, match="algos"):
        Exp5Config(algos=("ppo",))
    with pytest.raises(Exception, match="steering_steps"):
        Exp5Config(steering_steps=30)
