"""``mopa experiment exp3 --profile quick``: training both algorithms, the
tournament with planners, the files, the results schema and stage reuse (the
numbers of a quick run mean nothing; the default profile is the reproduction)."""

import json

import pytest

from mopa.cli.main import main
from mopa.experiments import get_experiment
from mopa.experiments.exp3 import PREY_VARIANTS
from mopa.report.exp3_report import findings


@pytest.mark.slow
def test_quick_profile_end_to_end_and_reuse(tmp_path, capsys):
    out = tmp_path / "exp3"
    assert main(["experiment", "exp3", "--profile", "quick", "--out", str(out)]) == 0
    results = json.loads((out / "results.json").read_text())
    assert set(results["captures"]) == set(PREY_VARIANTS)  # no joint row in quick
    for row in results["captures"].values():
        assert set(row) == set(PREY_VARIANTS)
        for cell in row.values():
            lo, hi = cell["ci95"]
            assert lo <= cell["mean"] <= hi and len(cell["seed_means"]) == 2
            assert cell["mean"] >= 0
    accuracy = results["opp_head_accuracy"]
    assert 0 <= accuracy["pred"] <= 1 and 0 <= accuracy["prey"] <= 1
    assert results["tournament_wall_s"] > 0 and results["num_episodes_per_cell"] == 8
    assert set(results["timing_s"]) == {"train_iql", "train_oa_iql", "tournament"}
    text = (out / "results.md").read_text()
    assert "| oa_plan |" in text and "research 1.07" in text
    assert (out / "exp3_heatmap.png").stat().st_size > 1000
    assert json.loads((out / "config.json").read_text())["preset"] == "quick"
    for stage in ("train_iql", "train_oa_iql", "tournament"):
        assert (out / "stages" / stage / "stage.json").exists()
    assert (out / "stages" / "train_oa_iql" / "checkpoint.msgpack").exists()
    capsys.readouterr()
    # A second run reuses every stage and reproduces the results.
    assert main(["experiment", "exp3", "--profile", "quick", "--out", str(out)]) == 0
    assert capsys.readouterr().out.count("reused") == 3
    again = json.loads((out / "results.json").read_text())
    assert again["captures"] == results["captures"]


def test_findings_on_a_hand_made_table():
    def cell(mean):
        return {"mean": mean, "ci95": [mean - 0.1, mean + 0.1]}

    table = {
        "iql_greedy": {
            "iql_greedy": cell(3.0),
            "oa_greedy": cell(3.2),
            "oa_plan": cell(1.0),
        },
        "oa_greedy": {
            "iql_greedy": cell(3.1),
            "oa_greedy": cell(3.3),
            "oa_plan": cell(1.2),
        },
        "oa_plan": {
            "iql_greedy": cell(2.0),
            "oa_greedy": cell(2.5),
            "oa_plan": cell(0.9),
        },
        "oa_plan_joint": {
            "iql_greedy": cell(3.5),
            "oa_greedy": cell(3.0),
            "oa_plan": cell(1.5),
        },
    }
    found = findings(table, PREY_VARIANTS)
    assert found["oa_plan_prey_fewest_in_every_row"]
    assert found["oa_plan_prey_drop_separated"]
    # Rows' drops: (3.0+3.2)/2-1.0 = 2.1, (3.1+3.3)/2-1.2 = 2.0, (2.0+2.5)/2-0.9 = 1.35
    assert (
        abs(found["oa_plan_prey_drop_vs_greedy_prey"] - (2.1 + 2.0 + 1.35) / 3) < 1e-9
    )
    # Worst predator per column: 2.0 < 3.0, 2.5 < 3.2 and 0.9 < 1.0: oa_plan.
    assert found["oa_plan_pred_worst_in_every_column"]
    assert found["joint_minus_per_agent_pred"] == {
        "iql_greedy": 1.5,
        "oa_greedy": 0.5,
        "oa_plan": 1.5 - 0.9,
    }
    results = {
        "captures": table,
        "opp_head_accuracy": {"pred": 0.6, "prey": 0.67},
        "num_seeds": 3,
        "num_episodes_per_cell": 300,
        "findings": found,
        "tournament_wall_s": 42.0,
        "joint_row_wall_s": 100.0,
    }
    text = get_experiment("exp3").markdown_fn(results)
    assert "100 episodes" in text and "| oa_plan_joint | 3.50 [3.40, 3.60]" in text
