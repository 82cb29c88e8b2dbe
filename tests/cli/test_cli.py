"""The command line: bench output and JSON schema, listing, rendering, bad input."""

import json
import subprocess
import sys

import imageio.v3 as iio
import pytest

from mopa.cli.main import main


@pytest.mark.slow
def test_bench_env_writes_rows_and_metadata(tmp_path, capsys):
    path = tmp_path / "bench.json"
    code = main(
        [
            "bench",
            "env",
            "--envs",
            "tag",
            "tag_intent",
            "--batches",
            "1",
            "64",
            "--repeats",
            "1",
            "--steps",
            "2000",
            "--json",
            str(path),
        ]
    )
    assert code == 0
    rows = json.loads(path.read_text())
    impls = {(r["env"], r["impl"], r["batch"]) for r in rows}
    assert impls == {
        ("tag", "mopa", 1),
        ("tag", "mopa", 64),
        ("tag_intent", "mopa", 1),
        ("tag_intent", "mopa", 64),
        ("tag", "jaxmarl", 1),
        ("tag", "jaxmarl", 64),
    }
    for row in rows:
        assert set(row) == {"env", "impl", "batch", "steps_per_s"}
        assert isinstance(row["steps_per_s"], float) and row["steps_per_s"] > 1000
    meta = json.loads((tmp_path / "bench.meta.json").read_text())
    assert meta["config"]["envs"] == ["tag", "tag_intent"]
    assert meta["versions"]["jax"] and "git_sha" in meta
    assert "speed-up over JaxMARL" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["bench", "env", "--envs", "tog"], "unknown game 'tog'"),
        (["bench", "env", "--batches", "0"], "--batches must all be >= 1"),
        (["bench", "env", "--repeats", "0"], "--repeats must be >= 1"),
        (["render", "--env", "nope", "--out", "x.gif"], "unknown environment 'nope'"),
        (["render", "--out", "x.gif", "--steps", "0"], "--steps must be >= 1"),
    ],
)
def test_bad_input_is_one_line_and_exit_code_2(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("mopa: error:") and message in err


def test_bad_arguments_exit_2_without_traceback():
    result = subprocess.run(
        [sys.executable, "-m", "mopa", "bench", "env", "--batches", "x"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 2
    assert "Traceback" not in result.stderr and "invalid int value" in result.stderr


def test_envs_lists_every_game(capsys):
    from mopa.envs import registered_envs

    assert main(["envs"]) == 0
    out = capsys.readouterr().out
    for name in registered_envs():
        assert name in out
    assert "1 prey (obs 18)" in out  # tag_intent's prey sees its intent


def test_render_writes_an_episode_gif(tmp_path):
    path = tmp_path / "episode.gif"
    assert (
        main(["render", "--env", "tag_resources", "--out", str(path), "--steps", "6"])
        == 0
    )
    frames = iio.imread(path)
    assert frames.shape == (6, 400, 400, 3)
