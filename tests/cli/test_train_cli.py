"""``mopa train`` and ``mopa bench train``: presets, a small run, bad input."""

from __future__ import annotations

import json

import pytest
from flax import serialization

from mopa.algos.presets import PRESETS
from mopa.cli.main import main

SMALL = [
    "--steps=2048",
    "--seeds=1",
    "--set=num_envs=8",
    "--set=num_steps=16",
    "--set=hidden=[16]",
    "--set=num_chunks=2",
    "--quiet",
]


def test_list_presets(capsys):
    assert main(["train", "--list-presets"]) == 0
    out = capsys.readouterr().out
    for name in PRESETS:
        assert name in out


@pytest.mark.slow
def test_train_writes_a_run_and_refuses_to_overwrite_it(tmp_path, capsys):
    out = tmp_path / "run"
    argv = ["train", "--algo=ippo", "--env=tag", f"--out={out}", *SMALL]
    assert main(argv) == 0
    stdout = capsys.readouterr().out
    assert "trained ippo on tag" in stdout and "return/predator" in stdout
    summary = json.loads((out / "summary.json").read_text())
    assert summary["env_steps_per_seed"] == 2048
    assert summary["final"]["return/prey"]["mean"] is not None
    config = json.loads((out / "config.json").read_text())
    assert config["hidden"] == [16] and config["algo"] == "ippo"
    # A finished run is never overwritten; another config is refused too.
    assert main(argv) == 2
    assert "holds a finished run" in capsys.readouterr().err
    assert main([*argv, "--set=lr=0.1"]) == 2
    assert "another config (differs in lr)" in capsys.readouterr().err
    assert (out / "summary.json").read_text() == json.dumps(summary, indent=2) + "\n"


@pytest.mark.slow
def test_preset_with_overrides(tmp_path, capsys):
    out = tmp_path / "preset"
    argv = ["train", "--preset=exp4_mappo_circle", f"--out={out}", *SMALL]
    assert main(argv) == 0
    config = json.loads((out / "config.json").read_text())
    assert config["env"] == "tag_resources"
    assert config["env_overrides"] == [["resource_placement", "circle"]]


@pytest.mark.slow
def test_bench_train_rows(tmp_path):
    path = tmp_path / "bench_train.json"
    argv = ["bench", "train", "--runs", "iql:tag", "--seeds=1", "--steps=4096"]
    argv += ["--set", "hidden=[8]"]
    assert main([*argv, "--json", str(path)]) == 0
    (row,) = json.loads(path.read_text())
    assert {"algo", "env", "seeds", "steps", "wall_s", "steps_per_s"} <= set(row)
    assert (row["algo"], row["env"], row["seeds"], row["steps"]) == (
        "iql",
        "tag",
        1,
        4096,
    )
    assert row["steps_per_s"] == pytest.approx(4096 / row["wall_s"])
    assert row["hidden"] == [8]
    meta = json.loads((tmp_path / "bench_train.meta.json").read_text())
    assert meta["config"]["command"] == "bench train" and "git_sha" in meta


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["train", "--algo=iql", "--steps=0"], "total_steps must be > 0"),
        (["train", "--algo=iql", "--steps=-5"], "total_steps must be > 0"),
        (["train", "--algo=iql", "--steps=1.5"], "--steps must be a whole number"),
        (["train", "--algo=dqn"], "unknown algorithm 'dqn'"),
        (["train", "--algo=iql", "--env=tog"], "unknown environment 'tog'"),
        (["train", "--preset=exp9"], "unknown preset 'exp9'"),
        (["train"], "give --algo or --preset"),
        (
            ["train", "--algo=mappo", "--set=num_minibatches=3"],
            "num_minibatches (3) must divide",
        ),
        (
            ["train", "--algo=iql", "--set=buffer_size=1000"],
            "buffer_size (1000) must be a multiple",
        ),
        (["train", "--algo=iql", "--set=lrr=1"], "unknown IQLConfig field 'lrr'"),
        (["train", "--algo=iql", "--env-set=speed=2"], "speed"),
        (["train", "--algo=iql", "--set", "lr"], "--set expects FIELD=VALUE"),
        (["train", "--preset=exp3_iql", "--algo=mappo"], "conflicts with preset"),
        (["bench", "train", "--runs", "iql"], "--runs expects ALGO:ENV"),
        (["bench", "train", "--runs", "dqn:tag"], "unknown algorithm 'dqn'"),
        (["bench", "train", "--seeds=0"], "--seeds must be >= 1"),
    ],
)
def test_bad_train_input_is_one_line_and_exit_code_2(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("mopa: error:"), err
    assert message in err, err


@pytest.mark.slow
def test_corrupt_or_foreign_checkpoints_are_refused(tmp_path, capsys):
    foreign = tmp_path / "foreign.msgpack"
    foreign.write_bytes(serialization.msgpack_serialize({"format": "weights"}))
    argv = ["train", "--algo=iql", f"--frozen=prey={foreign}", *SMALL]
    assert main([*argv, f"--out={tmp_path / 'a'}"]) == 2
    assert "is not a mopa-policy file" in capsys.readouterr().err
    assert not (tmp_path / "a").exists()
    # A run folder whose resumable state is damaged.
    out = tmp_path / "b"
    base = ["train", "--algo=iql", f"--out={out}", *SMALL]
    assert main(base) == 0
    (out / "summary.json").unlink()
    (out / "train_state.msgpack").write_bytes(b"\xc1\xc1 corrupt")
    capsys.readouterr()
    assert main(base) == 2
    assert "not a readable mopa checkpoint" in capsys.readouterr().err


def test_tensorboard_events_and_missing_tracker(tmp_path, capsys):
    from tensorboardX.event_file_writer import EventFileWriter  # noqa: F401

    logs = tmp_path / "tb"
    argv = ["train", "--algo=iql", f"--out={tmp_path / 'run'}", *SMALL]
    assert main([*argv, f"--tensorboard={logs}"]) == 0
    events = list(logs.glob("events.out.tfevents.*"))
    assert len(events) == 1 and events[0].stat().st_size > 500
    assert b"return/predator" in events[0].read_bytes()
    capsys.readouterr()
    assert main([*argv[:-1], f"--out={tmp_path / 'w'}", "--wandb=p"]) == 2
    assert "wandb is not installed" in capsys.readouterr().err
