"""``mopa lemol``: every flag changes the run's config (or its outputs), bad
input is one line and exit code 2, and a small run writes its metrics, LeMOL's
experience and its opponent model."""

import json
import re

import jax
import numpy as np
import pytest
from flax import serialization

from mopa.algos.lemol import LeMOLConfig
from mopa.cli.main import main
from tests.algos.lemol.small import SMALL

DEFAULTS = LeMOLConfig().to_dict()

FLAG_VALUES = [
    ("--scenario", "adversary", "scenario", "adversary"),
    ("--max_episode_len", "30", "max_episode_len", 30),
    ("--num_episodes", "500", "num_episodes", 500),
    ("--num_adversaries", "2", "num_adversaries", 2),
    ("--good_policy", "mmmaddpg", "good_policy", "m3ddpg"),
    ("--bad_policy", "m3ddpg", "bad_policy", "m3ddpg"),
    ("--discrete_actions", None, "discrete_actions", True),
    ("--lr", "3e-3", "lr", 3e-3),
    ("--gamma", "0.9", "gamma", 0.9),
    ("--batch_size", "256", "batch_size", 256),
    ("--num_units", "128", "num_units", 128),
    ("--adv_eps", "0.01", "adv_eps", 0.01),
    ("--adv_eps_s", "0.001", "adv_eps_s", 0.001),
    ("--agent_update_freq", "100", "agent_update_freq", 100),
    ("--polyak", "0.01", "polyak", 0.01),
    ("--replay_buffer_capacity", "5e5", "replay_buffer_capacity", 500_000),
    ("--omlr", "1e-2", "omlr", 1e-2),
    ("--lstm_hidden_dim", "32", "lstm_hidden_dim", 32),
    ("--chunk_length", "16", "chunk_length", 16),
    ("--num_traj_to_train", "4", "num_traj_to_train", 4),
    ("--traj_per_iter", "2", "traj_per_iter", 2),
    ("--om_training_iters", "7", "om_training_iters", 7),
    ("--n_opp_cycles", "3", "n_opp_cycles", 3),
    ("--num_envs", "2", "num_envs", 2),
    ("--num_seeds", "4", "num_seeds", 4),
    ("--seed", "9", "seed", 9),
]
"""``(flag, value, config field, parsed value)`` for every flag that sets a
config field."""

NEEDS = {
    "scenario": ["--bad_policy", "maddpg"],
    "num_adversaries": ["--bad_policy", "maddpg"],
}
"""Flags that need another to make a valid run (lemol needs push 1 v 1)."""


def dry_run(argv, capsys):
    assert main(["lemol", "--dry_run", *argv]) == 0
    out = capsys.readouterr().out.splitlines()
    return json.loads(out[0]), out[1]


def test_defaults_are_the_lemol_codes(capsys):
    config, size = dry_run([], capsys)
    assert config == DEFAULTS
    expected = {
        "scenario": "push", "max_episode_len": 25, "num_episodes": 10_000,
        "good_policy": "maddpg", "bad_policy": "lemol", "discrete_actions": False,
        "lr": 1e-2, "gamma": 0.95, "batch_size": 1024, "num_units": 64,
        "adv_eps": 1e-3, "adv_eps_s": 1e-5, "agent_update_freq": 1, "polyak": 1e-4,
        "replay_buffer_capacity": 1_000_000, "omlr": 1e-3, "lstm_hidden_dim": 64,
        "chunk_length": 64, "num_traj_to_train": 8, "traj_per_iter": 3,
        "om_training_iters": 5, "n_opp_cycles": 10,
    }  # fmt: skip
    assert {k: config[k] for k in expected} == expected
    assert size.startswith("10 cycles x 3 play-outs x 250000 updates")


@pytest.mark.parametrize(("flag", "value", "field", "parsed"), FLAG_VALUES)
def test_every_config_flag_sets_its_field(flag, value, field, parsed, capsys):
    argv = [flag] if value is None else [flag, value]
    config, _ = dry_run(NEEDS.get(field, []) + argv, capsys)
    baseline, _ = dry_run(NEEDS.get(field, []), capsys)
    changed = {k for k in config if config[k] != baseline[k]}
    assert changed == {field}
    assert config[field] == parsed


def test_every_flag_is_covered():
    from mopa.cli.main import build_parser

    parser = build_parser()
    commands = next(a for a in parser._actions if a.dest == "command")
    lemol = commands.choices["lemol"]
    flags = {a.dest for a in lemol._actions if a.dest != "help"}
    covered = {f[0][2:] for f in FLAG_VALUES} | {"lemol_save_path", "out", "dry_run"}
    assert flags == covered


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--chunk_length", "0"], "chunk_length must be > 0"),
        (["--replay_buffer_capacity", "1.5"], "must be a whole number, got 1.5"),
        (["--good_policy", "lemol"], "cannot both be lemol"),
        (["--scenario", "adversary"], "lemol models one opponent"),
        (["--gamma", "2"], r"gamma must be in \[0, 1\], got 2.0"),
        (["--bad_policy", "maddpg", "--lemol_save_path", "x"], "needs a lemol agent"),
    ],
)
def test_bad_input_is_one_line_and_exit_code_2(argv, message, capsys):
    assert main(["lemol", "--dry_run", *argv]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert err.startswith("mopa: error: ")
    assert re.search(message, err), err


def test_bad_flag_values_exit_2_without_traceback(capsys):
    assert main(["lemol", "--batch_size", "many"]) == 2
    err = capsys.readouterr().err
    assert err == (
        "mopa: error: argument --batch_size: invalid int value: 'many' "
        "(see mopa lemol --help)\n"
    )


@pytest.mark.slow
def test_a_small_run_writes_metrics_experience_and_model(small_run):
    run, saved = small_run / "run", small_run / "lemol"
    assert json.loads((run / "config.json").read_text()) == SMALL.to_dict()
    with np.load(run / "metrics.npz") as metrics:
        # [seed, update] over 4 cycles x 2 play-outs x 500 updates; [seed, cycle].
        assert metrics["return/adversary"].shape == (2, 4000)
        accuracy = metrics["cycle/om_accuracy"]
        assert accuracy.shape == (2, 4)
        assert np.all(accuracy[:, -1] > 0.3)
    summary = json.loads((run / "summary.json").read_text())
    assert summary["bad_policy"] == "lemol"
    assert len(summary["last_cycle"]["cycle/om_loss"]) == 2
    with np.load(saved / "experience.npz") as experience:
        assert experience["obs"].shape == (2, 4, 1000, 19)  # the good agent's
        assert experience["actions"].shape == (2, 4, 1000, 5)
        np.testing.assert_array_equal(experience["num_stored"], [4, 4])
        # One-hot moves, every step of every stored trajectory.
        np.testing.assert_array_equal(experience["actions"].sum(-1), 1.0)
    model = serialization.msgpack_restore(
        (saved / "opponent_model.msgpack").read_bytes()
    )
    leaves = jax.tree.leaves(model["params"]["params"]["lstm"])
    assert leaves and all(leaf.shape[0] == 2 for leaf in leaves)  # seeds


@pytest.mark.slow
def test_an_existing_run_folder_is_refused(small_run, capsys):
    assert main(["lemol", "--dry_run", "--out", str(small_run / "run")]) == 2
    assert "holds a run" in capsys.readouterr().err
