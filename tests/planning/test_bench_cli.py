"""``mopa bench planner``: rows, metadata and bad input."""

import json

import pytest

from mopa.cli.main import main


def test_bench_planner_writes_rows_and_metadata(tmp_path, capsys):
    path = tmp_path / "planner.json"
    argv = ["bench", "planner", "--modes", "per_agent", "--batch", "2"]
    argv += ["--rollouts", "2", "--horizon", "1", "--hidden", "8", "--repeats", "1"]
    assert main([*argv, "--json", str(path)]) == 0
    (row,) = json.loads(path.read_text())
    assert row["mode"] == "per_agent" and row["batch"] == 2
    # 3 predators x 5 actions; the bare game runs batch x candidates x rollouts.
    assert row["candidates"] == 15 and row["env_batch"] == 2 * 15 * 2
    assert row["decisions_per_s"] > 0 and row["greedy_decisions_per_s"] > 0
    assert row["imagined_steps_per_s"] == pytest.approx(
        row["decisions_per_s"] * 15 * 2 * 1
    )
    assert row["planner_slowdown"] == pytest.approx(
        row["greedy_decisions_per_s"] / row["decisions_per_s"]
    )
    # The machine's limit: a decision's FLOPs, and the Q-network's costliest
    # layer application (its observations into the 8 hidden units, over every
    # game, candidate and rollout of the 3 predators) as the reference matmul.
    assert row["flops_per_decision"] > 0
    assert row["gflop_s"] == pytest.approx(
        row["flops_per_decision"] * row["decisions_per_s"] / 1e9
    )
    rows, inputs, outputs = row["matmul_shape"]
    assert rows % (2 * 15 * 2) == 0 and outputs == 8
    assert row["matmul_fraction"] == pytest.approx(
        row["gflop_s"] / row["matmul_gflop_s"]
    )
    meta = json.loads((tmp_path / "planner.meta.json").read_text())
    assert meta["config"]["command"] == "bench planner"
    assert meta["config"]["num_rollouts"] == 2 and "git_sha" in meta
    assert "partial" not in meta  # the run finished: every row is there
    out = capsys.readouterr().out
    assert "per_agent" in out and f"wrote {path}" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--modes", "tree"], "unknown planner mode 'tree'"),
        (["--batch", "0"], "--batch must be >= 1"),
        (["--horizon", "0"], "--horizon must be >= 1"),
    ],
)
def test_bench_planner_bad_input_is_one_line(argv, message, capsys):
    assert main(["bench", "planner", *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err
