"""``mopa bench numerics`` at a tiny size: a training run timed in both modes, each
in a child process that computes in that mode, and bad input."""

import json

import pytest

from mopa.bench.numerics_cost import bench_numerics, row_name, speed
from mopa.cli.main import main
from mopa.errors import InvalidParameterError


@pytest.mark.slow
def test_each_mode_is_timed_in_its_own_process_and_compared(tmp_path, capsys):
    path = tmp_path / "numerics.json"
    bench = "train --runs iql:tag --seeds 1 --steps 2048 --set num_envs=8"
    argv = ["bench", "numerics", "--bench", bench, "--repeats", "1", "--json"]
    assert main([*argv, str(path)]) == 0
    (row,) = json.loads(path.read_text())
    assert row["row"] == "iql:tag" and row["bench"] == "train"
    for mode in ("native", "portable"):
        (alone,) = row[f"{mode}_runs"]
        assert row[mode] == alone > 0 and row[f"{mode}_compile_s"] > 0
    assert row["ratio"] == pytest.approx(row["portable"] / row["native"])
    meta = json.loads((tmp_path / "numerics.meta.json").read_text())
    assert meta["config"]["benches"] == [bench] and meta["config"]["repeats"] == 1
    assert meta["config"]["command"] == "bench numerics"
    out = capsys.readouterr().out
    # portable first on even repetitions
    assert out.index("repetition 0, portable") < out.index("repetition 0, native")


def test_speed_is_steps_per_training_second_or_decisions_per_second():
    train = {"algo": "iql", "env": "tag", "preset": None, "steps": 100, "seeds": 3}
    assert speed({**train, "train_s": 2.0}) == 150.0
    assert row_name({**train, "train_s": 2.0}) == "iql:tag"
    assert speed({"mode": "joint", "decisions_per_s": 7.0}) == 7.0
    assert row_name({"mode": "joint", "decisions_per_s": 7.0}) == "planner joint"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--bench", "env --batches 1"], "--bench expects 'train ARGS' or"),
        (["--bench", "train --json x.json"], "--bench takes no --json"),
        (["--repeats", "0"], "--repeats must be >= 1"),
        (["--bench", "train --steps x"], "invalid float value: 'x'"),
    ],
)
def test_bad_input_is_named(argv, message, capsys):
    assert main(["bench", "numerics", *argv]) == 2
    assert message in capsys.readouterr().err


def test_repeats_must_be_positive():
    with pytest.raises(InvalidParameterError, match="repeats must be >= 1"):
        bench_numerics([["train"]], repeats=0)
