"""``mopa tournament`` on small checkpoints written the way ``mopa train`` writes
them: the files, the table, and one-line errors for bad input."""

from __future__ import annotations

import json

import jax
import numpy as np
import pytest

from mopa.cli.main import main
from mopa.core.checkpoint import POLICY_FILE, write_policy_checkpoint
from mopa.policy import PolicySpec, init_params

NUM_SEEDS = 2


def _team(num_agents, obs_size, seed):
    spec = PolicySpec(
        kind="q",
        num_agents=num_agents,
        obs_size=obs_size,
        num_actions=5,
        hidden=(16,),
    )
    keys = jax.random.split(jax.random.key(seed), NUM_SEEDS)
    return spec.to_dict(), jax.vmap(lambda k: init_params(spec, k))(keys)


def _write(folder, teams, env="tag"):
    write_policy_checkpoint(
        folder / POLICY_FILE,
        algo="iql",
        env=env,
        env_overrides={},
        config={"algo": "iql"},
        meta={},
        teams=teams,
    )
    return str(folder)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """``both`` holds both teams; ``pred_only`` trained against a frozen prey;
    ``static`` is a run of another game."""
    root = tmp_path_factory.mktemp("runs")
    both = {"predator": _team(3, 16, 1), "prey": _team(1, 14, 2)}
    return {
        "both": _write(root / "both", both),
        "pred_only": _write(root / "pred_only", {"predator": _team(3, 16, 3)}),
        "static": _write(root / "static", both, env="tag_static"),
        "root": root,
    }


@pytest.mark.slow
def test_tournament_writes_its_files_and_prints_the_table(runs, tmp_path, capsys):
    out = tmp_path / "cross"
    argv = [
        "tournament",
        "--side-a",
        runs["both"],
        runs["pred_only"],
        "--side-b",
        runs["both"],
        "random",
        "--episodes=2",
        f"--out={out}",
    ]
    assert main(argv) == 0
    stdout = capsys.readouterr().out
    table = (out / "tournament.md").read_text()
    assert stdout.startswith(table)
    assert "| predator \\ prey | both | random |" in table
    assert "| both |" in table and "| pred_only |" in table
    assert "2 x 2 cells" in stdout

    result = json.loads((out / "tournament.json").read_text())
    assert result["row_names"] == ["both", "pred_only"]
    assert result["column_names"] == ["both", "random"]
    assert result["seed_pairs"] == [[0, 0], [0, 1], [1, 0], [1, 1]]
    captures = np.asarray(result["totals"]["captures"])
    assert captures.shape == (2, 2, 4, 2)
    assert captures.min() >= 0 and np.all(captures == np.round(captures))
    np.testing.assert_allclose(
        result["summary"]["captures"]["mean"], captures.reshape(2, 2, -1).mean(-1)
    )

    config = json.loads((out / "config.json").read_text())
    assert config["episodes"] == 2 and config["env"] == "tag"
    assert config["side_b"] == [runs["both"], "random"]
    meta = json.loads((out / "meta.json").read_text())
    assert meta["config"] == config and meta["wall_s"] > 0
    assert "git_sha" in meta and meta["versions"]["jax"] == jax.__version__
    assert (out / "heatmap.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--side-a", "{missing}", "--side-b", "random"], "no checkpoint at"),
        (["--side-a", "{both}", "--side-b", "{pred_only}"], "has no prey policy"),
        (["--side-a", "{both}", "--side-b", "{static}"], "for the same game"),
        (["--side-a", "{both}", "--side-b", "random", "--episodes=0"], "--episodes"),
        (["--side-a", "random", "--side-b", "random"], "give --env"),
        (["--side-a", "{both}", "--side-b", "{both}", "--metric=wins"], "--metric"),
        (["--side-a", "{both}", "{both}", "--side-b", "random"], "lists"),
        (["--side-a", "{both}", "--side-b", "random", "--pairing=best"], "pairing"),
    ],
)
def test_bad_input_is_one_line_and_exit_code_2(runs, tmp_path, capsys, args, message):
    paths = {**runs, "missing": str(runs["root"] / "missing")}
    argv = ["tournament", *(a.format(**paths) for a in args), f"--out={tmp_path}"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("mopa: error: ") and message in err
    assert err.count("\n") == 1
    assert not (tmp_path / "tournament.json").exists()
