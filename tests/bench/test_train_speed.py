"""``mopa bench train`` at a tiny size: the compute rows beside the speed."""

import json
import math

import pytest

from mopa.cli.main import main

NUM_ENVS, NUM_STEPS, NUM_MINIBATCHES = 4, 2, 2
TINY_MAPPO = (
    f"num_envs={NUM_ENVS}",
    f"num_steps={NUM_STEPS}",
    f"num_minibatches={NUM_MINIBATCHES}",
    "update_epochs=1",
    "hidden=[8]",
    "num_chunks=1",
)
"""A MAPPO row of 8-wide layers, one update per 8 environment steps."""


@pytest.mark.slow
def test_rows_carry_flops_gflop_s_and_the_matmul_reference(tmp_path, capsys):
    path = tmp_path / "train.json"
    argv = ["bench", "train", "--runs", "mappo:tag", "--seeds=1", "--steps=16"]
    for field in TINY_MAPPO:
        argv += ["--set", field]
    assert main([*argv, "--json", str(path)]) == 0
    (row,) = json.loads(path.read_text())
    assert row["steps"] == 16 and row["hidden"] == [8]
    assert 0 < row["train_s"] < row["wall_s"]
    assert row["gflop_s"] == pytest.approx(
        row["flops_per_step"] * 16 / row["train_s"] / 1e9
    )
    # The largest layer is a first layer (8 wide) fed by one minibatch of
    # 4 x 2 / 2 = 4 samples (the critic: one row per sample; the actor: a row per
    # agent), and each of its 2 minibatch steps costs at least its forward pass and
    # its kernel's gradient, 4 x rows x inputs x outputs FLOPs, so one update
    # (8 environment steps) at least twice that.
    rows, inputs, outputs = row["matmul_shape"]
    minibatch = NUM_ENVS * NUM_STEPS // NUM_MINIBATCHES
    assert rows % minibatch == 0 and outputs == 8 and inputs > 8
    steps_per_update = NUM_ENVS * NUM_STEPS
    lower = NUM_MINIBATCHES * 4 * rows * inputs * outputs / steps_per_update
    assert row["flops_per_step"] > lower
    assert math.isfinite(row["matmul_gflop_s"]) and row["matmul_gflop_s"] > 0
    assert row["matmul_fraction"] == pytest.approx(
        row["gflop_s"] / row["matmul_gflop_s"]
    )
    # A trainer of 8-wide layers on 4-row minibatches is nowhere near the rate of
    # back-to-back matmuls; above 1 would mean a miscount (the tiny trainer spends
    # most of its time outside matmuls, and its figure includes those FLOPs).
    assert 0 < row["matmul_fraction"] <= 1
    out = capsys.readouterr().out
    assert "GFLOP/s" in out and "x".join(map(str, row["matmul_shape"])) in out


@pytest.mark.slow
def test_a_preset_row_trains_the_preset_and_says_what_ran(tmp_path):
    """A row named by a preset trains that preset's recipe (the research's IQL:
    whole-episode replay, 8 games x 26 steps per update), with ``--set`` on top."""
    path = tmp_path / "train.json"
    argv = ["bench", "train", "--runs", "research_iql_tag", "--seeds=1"]
    argv += ["--steps=416", "--json", str(path)]
    for field in ("hidden=[8,8]", "buffer_size=416", "batch_size=4"):
        argv += ["--set", field]
    assert main([*argv, "--set", "learning_starts=0", "--set", "num_chunks=1"]) == 0
    (row,) = json.loads(path.read_text())
    assert row["preset"] == "research_iql_tag" and row["paths"] is None
    assert (row["algo"], row["env"], row["replay"]) == ("iql", "tag", "episodes")
    assert row["hidden"] == [8, 8] and row["critic_input"] is None
    assert row["steps"] == 416  # two updates of 8 games x 26 steps
    assert row["flops_per_step"] > 0 and row["matmul_shape"][2] == 8


@pytest.mark.slow
def test_plain_paths_add_a_plain_row_per_mappo_row(tmp_path, capsys):
    """``--plain-paths`` trains each MAPPO row a second time with its plain paths
    (the side-by-side measurement of the hand-written backward pass and shuffle):
    the same work, counted the same way."""
    path = tmp_path / "train.json"
    argv = ["bench", "train", "--runs", "mappo:tag", "--seeds=1", "--steps=16"]
    argv += ["--plain-paths", "--json", str(path)]
    for field in TINY_MAPPO:  # the fast row: the first test's program, loaded
        argv += ["--set", field]
    assert main(argv) == 0
    fast, plain = json.loads(path.read_text())
    assert (fast["paths"], plain["paths"]) == ("fast", "plain")
    for key in ("algo", "env", "steps", "hidden", "flops_per_step", "matmul_shape"):
        assert fast[key] == plain[key], key
    assert "mappo:tag (plain)" in capsys.readouterr().out
    meta = json.loads((tmp_path / "train.meta.json").read_text())
    assert meta["config"]["plain_paths"] is True
