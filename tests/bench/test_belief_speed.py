"""``mopa bench beliefs`` at tiny sizes: the rows' fields, the JSON and its
metadata, and bad input."""

import argparse
import json

import pytest

from mopa.bench import belief_speed
from mopa.cli import bench_beliefs
from mopa.cli.main import main
from mopa.errors import InvalidParameterError, UnknownNameError


def _parse(argv):
    parser = argparse.ArgumentParser()
    bench_beliefs.add_parser(parser.add_subparsers())
    return parser.parse_args(["beliefs", *argv])


def test_bench_beliefs_writes_rows_and_metadata(tmp_path, capsys):
    path = tmp_path / "beliefs.json"
    argv = (
        ["bench", "beliefs", "--encoders", "classifier", "--beliefs", "bayes"]
        + ["--batches", "3", "--updates", "4", "--hidden", "8", "--repeats", "1"]
        + ["--seconds", "0", "--json", str(path)]
    )
    assert main(argv) == 0
    encoder, *beliefs = json.loads(path.read_text())
    assert encoder["bench"] == "encoder" and encoder["name"] == "classifier"
    # The intent experiment's classifier: 8 x 8 occupancy cells and the last 8
    # positions, batches of 128.
    assert encoder["input_size"] == 64 + 16 and encoder["batch_size"] == 128
    assert encoder["num_updates"] == 4 and encoder["hidden"] == [8]
    assert encoder["train_s"] > 0
    assert encoder["updates_per_s"] == pytest.approx(4 / encoder["train_s"])
    assert [(r["name"], r["batch"]) for r in beliefs] == [("bayes", 3)]
    for row in beliefs:
        assert row["bench"] == "belief" and row["step_s"] > 0
        assert row["updates_per_s"] == pytest.approx(row["batch"] / row["scan_step_s"])
    meta = json.loads((tmp_path / "beliefs.meta.json").read_text())
    assert meta["config"]["command"] == "bench beliefs"
    assert meta["config"]["argv"] == argv
    assert meta["config"]["batches"] == [3] and meta["config"]["seconds"] == 0
    assert "git_sha" in meta
    out = capsys.readouterr().out
    assert "encoder classifier" in out and f"wrote {path}" in out


def test_encoder_configs_are_the_experiments_sizes():
    configs = belief_speed.encoder_configs()
    assert configs["classifier"].num_updates == 3000
    assert configs["jepa"].num_updates == 3000
    assert configs["vae"].num_updates == 4000 and configs["vae"].latent_size == 2
    # The intent encoders read the occupancy and the last 8 positions; the VAE
    # the occupancy only.
    assert configs["classifier"].input_size == configs["jepa"].input_size == 64 + 16
    assert configs["vae"].input_size == 64


@pytest.mark.parametrize(
    ("argv", "error", "message"),
    [
        (["--beliefs", "oracle"], UnknownNameError, "unknown belief 'oracle'"),
        (["--encoders", "gan"], UnknownNameError, "unknown encoder 'gan'"),
        (["--batches", "0"], InvalidParameterError, "--batches must all be >= 1"),
        (["--repeats", "0"], InvalidParameterError, "--repeats must be >= 1"),
        (
            ["--seconds", "-1"],
            InvalidParameterError,
            "--seconds must be a finite number >= 0",
        ),
    ],
)
def test_bad_input_is_named(argv, error, message):
    args = _parse(argv)
    with pytest.raises(error, match=message):
        args.run(args)
