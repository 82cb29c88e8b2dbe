"""``mopa experiment exp4`` end to end on its quick profile: files, the results
schema and stage reuse (the quick budget learns nothing, so no numbers)."""

import json
import shutil

import pytest

from mopa.experiments import run_experiment
from mopa.experiments.exp4 import Exp4Config


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("exp4") / "run"
    run_experiment("exp4", "quick", out)
    return out


def test_quick_run_writes_files_and_schema(quick_run):
    for name in ("results.json", "results.md", "config.json", "exp4_probe.png"):
        assert (quick_run / name).is_file(), name
    results = json.loads((quick_run / "results.json").read_text())
    for name in ("probe_raw_placement", "probe_occupancy_placement"):
        assert isinstance(results[name], float) and 0.0 <= results[name] <= 1.0
    # The random placement flips a fair coin per episode: both layouts occur.
    assert 0.0 < results["placement_share_corners"] < 1.0
    assert results["num_episodes"] == 40
    assert "raw-trajectory placement probe" in (quick_run / "results.md").read_text()


def test_a_second_run_reuses_every_stage(quick_run, tmp_path):
    out = tmp_path / "again"
    shutil.copytree(quick_run, out)
    before = json.loads((out / "results.json").read_text())
    lines = []
    results = run_experiment("exp4", "quick", out, progress=lines.append)
    for stage in ("train", "data", "probe"):
        assert f"[{stage}] reused (finished earlier with this config)" in lines
    assert json.dumps(results, sort_keys=True) == json.dumps(before, sort_keys=True)


def test_config_names_a_bad_field():
    with pytest.raises(Exception, match="test_fraction"):
        Exp4Config(test_fraction=1.5)
