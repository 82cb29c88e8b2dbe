"""The tutorials run end to end as the site shows them (``docs/tutorials/*.py``,
included into the pages): a public function one of them calls that is removed or
renamed fails here. The population tutorial's test is
``tests/opponent/test_population_tutorial.py``, the co-training tutorial's
``tests/cotrain/test_cotrain.py`` (on the stages its quick profile has played)."""

import json
import runpy
import sys
from pathlib import Path

import numpy as np
import pytest

TUTORIALS = Path(__file__).resolve().parents[2] / "docs" / "tutorials"


def run_tutorial(name: str, *argv: str) -> dict:
    """Run ``docs/tutorials/NAME.py`` as a script with ``argv``; its globals."""
    path = TUTORIALS / f"{name}.py"
    saved = sys.argv
    sys.argv = [str(path), *argv]
    try:
        return runpy.run_path(str(path), run_name="__main__")
    finally:
        sys.argv = saved


@pytest.mark.slow
def test_cross_play_trains_two_learners_and_plays_every_pairing(capsys):
    ns = run_tutorial("cross_play")
    result, captures = ns["result"], ns["captures"]
    assert result.row_names == result.column_names == ("iql", "mappo")
    assert result.teams == ("predator", "prey")
    assert np.asarray(captures["mean"]).shape == (2, 2)
    ci = np.asarray(captures["ci95"])
    assert np.all(ci[..., 0] <= captures["mean"]) and np.all(
        captures["mean"] <= ci[..., 1]
    )
    assert captures["num_episodes"] == 2 * 16  # 2 seed pairs x 16 episodes
    assert np.all(np.asarray(captures["mean"]) >= 0)
    for run in ns["runs"].values():
        assert run.config.total_steps == 4_096 and run.config.num_seeds == 2
    out = capsys.readouterr().out
    assert "| predator \\ prey | iql | mappo |" in out


def test_reproduce_runs_the_table_and_verifies_every_figure(tmp_path, capsys):
    out = tmp_path / "fig3"
    ns = run_tutorial("reproduce", str(out))
    report = ns["report"]
    assert report.ok and report.failures == []
    results = json.loads((out / "results.json").read_text())
    assert set(results["p_tft"]) == {"lola_tabular", "pola_tabular"}
    assert all(0.0 <= p <= 1.0 for m in results["p_tft"].values() for p in m.values())
    assert {"results.json", "config.json", "meta.json"} <= {
        p.name for p in out.iterdir()
    }
    printed = capsys.readouterr().out
    assert f"{len(report.comparisons)} figures compared, verified: True" in printed
    assert "lola_tabular" in printed and "cf 1.6" in printed
