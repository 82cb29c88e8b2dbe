"""Every ``mopa`` command against a table of bad inputs.

Each case must exit with code 2 and print exactly one line on stderr, starting
with ``mopa: error:`` and naming what is wrong, before any work: no file may
appear, disappear or change in the folder it ran in (inputs included). The cases
run in-process, in a copy of a sandbox holding one file of every kind a command
reads (an empty file, corrupt JSON, a pickle named ``.msgpack``, a policy
checkpoint of ``tag``, a league, a corrupt league ...). To cover a new flag or
command, add rows to ``BAD_INPUTS``:
:func:`test_every_command_and_flag_kind_has_bad_inputs` fails for a command (or
a kind of flag of one: whole numbers, numbers, paths, words) with no row.

The read-only commands (listings, exports, evaluations, tournaments of existing
runs) are run on the same sandbox and must leave it as it was.
"""

from __future__ import annotations

import argparse
import pickle
import shutil
from pathlib import Path

import jax
import pytest

from mopa.cli.main import build_parser, main
from mopa.core.checkpoint import POLICY_FILE, write_policy_checkpoint
from mopa.policy import PolicySpec, init_params

UNWRITABLE = "/proc/mopa/out"
"""A path nothing can be created at, not even by root."""
HUGE = str(10**12)
"""A count no array or loop of this machine holds."""

BAD_INPUTS: dict[str, list[tuple[list[str], str]]] = {
    # command: [(arguments, what the error line must contain), ...]
    "bench env": [
        (["--batches", "x"], "argument --batches: invalid int value: 'x'"),
        (["--batches", "0"], "--batches must all be >= 1"),
        (["--batches", "1000000000"], "--batches is too large: 1,000,000,000 games"),
        (["--repeats", "-1"], "--repeats must be >= 1"),
        (["--steps", "0"], "--steps must be >= 1"),
        (["--steps", HUGE], "--steps must be <= 2**31 - 1"),
        (["--envs", "tog"], "unknown game 'tog'"),
        (["--json", "folder"], "--json folder is a folder, not a file"),
        (["--json", f"{UNWRITABLE}.json"], "cannot write in /proc"),
        (["--json", "file.txt/rows.json"], "file.txt is a file, not a folder"),
        (["--bogus"], "unrecognized arguments: --bogus"),
    ],
    "bench train": [
        (["--seeds", "0"], "--seeds must be >= 1"),
        (["--steps", "1e30"], "total_steps is too large"),
        (["--steps", "nan"], "--steps must be a positive whole number, got nan"),
        (["--steps", "2.5"], "--steps must be a positive whole number, got 2.5"),
        (["--set", "lr=fast"], "lr must be a number, got 'fast'"),
        (["--set", "nope=1"], "unknown MAPPOConfig field 'nope'"),
        (
            ["--runs", "iql"],
            "--runs expects ALGO:ENV or a preset of `mopa train --list-presets`, "
            "got 'iql'",
        ),
        (["--runs", "iql:nope"], "unknown environment 'nope'"),
        (["--runs", "nope:tag"], "unknown algorithm 'nope'"),
        (["--json", "folder"], "--json folder is a folder, not a file"),
    ],
    "bench planner": [
        (["--modes", "nope"], "unknown planner mode 'nope'"),
        (["--batch", "0"], "--batch must be >= 1"),
        (
            ["--batch", "100000000", "--rollouts", "100"],
            "--batch x --rollouts is too large: 10,000,000,000 games at once",
        ),
        (["--rollouts", "x"], "argument --rollouts: invalid int value: 'x'"),
        (["--horizon", HUGE], "--horizon must be <= 2**31 - 1"),
        (["--hidden", "0"], "--hidden must all be >= 1"),
        (["--repeats", "0"], "--repeats must be >= 1"),
        (["--json", UNWRITABLE], "cannot write in /proc"),
    ],
    "bench beliefs": [
        (["--encoders", "nope"], "unknown encoder 'nope'"),
        (["--beliefs", "nope"], "unknown belief 'nope'"),
        (["--batches", "0"], "--batches must all be >= 1"),
        (["--updates", "0"], "--updates must be >= 1"),
        (["--hidden", "-1"], "--hidden must all be >= 1"),
        (["--seconds", "nan"], "--seconds must be a finite number >= 0, got nan"),
        (["--seconds", "inf"], "--seconds must be a finite number >= 0, got inf"),
        (["--json", "folder"], "--json folder is a folder, not a file"),
    ],
    "bench ray": [
        (["--workers", "0"], "--workers must be >= 1"),
        (["--players", "0"], "--players must be >= 1"),
        (["--opponents", "-1"], "--opponents must be >= 1"),
        (["--episodes", HUGE], "--episodes must be <= 2**31 - 1"),
        (["--repeats", "x"], "argument --repeats: invalid int value: 'x'"),
        (["--json", UNWRITABLE], "cannot write in /proc"),
        (["--ray-address", "nowhere"], "--ray-address must be auto, local"),
    ],
    "envs": [
        (["--bogus"], "unrecognized arguments: --bogus"),
    ],
    "render": [
        (["--env", "tag", "--out", "/proc/x.gif"], "--out /proc/x.gif: cannot write"),
        (["--out", "folder"], "--out folder is a folder, not a file"),
        (["--out", "x.gif", "--env", "nope"], "unknown environment 'nope'"),
        (["--out", "x.gif", "--env", "ipd"], "render draws the pursuit games"),
        (["--out", "x.gif", "--steps", "0"], "--steps must be >= 1"),
        (["--out", "x.gif", "--steps", HUGE], "num_steps is too large"),
        (["--out", "x.gif", "--fps", "0"], "fps must be a positive number, got 0.0"),
        (["--out", "x.gif", "--fps", "nan"], "fps must be a positive number"),
        (["--out", "x.gif", "--seed", "-1"], "--seed must be >= 0"),
        (["--out", "x.gif", "--seed", HUGE], "--seed must be <= 2**32 - 1"),
        (["--env", "tag"], "the following arguments are required: --out"),
    ],
    "train": [
        # The inputs first reported as tracebacks (or, for --steps, as a run
        # folder left behind), then the rest.
        (["--algo", "iql", "--steps", "1e30", "--out", "r5"], "total_steps is too"),
        (
            # a replay buffer per seed: refused from the state's size before any
            # of it is allocated (it ran on for minutes)
            ["--algo", "iql", "--steps", "2e4", "--seeds", "100000", "--out", "R"],
            "num_seeds is too large: the training state of 100,000 seeds",
        ),
        (
            # an intent game with no intents (it trained and exited 0)
            [
                *("--algo", "iql", "--env", "tag_intent", "--steps", "2e4"),
                *("--seeds", "1", "--env-set", "num_intents=0", "--out", "R"),
            ],
            "tag_intent: num_intents must be >= 1, got 0",
        ),
        (["--algo", "iql", "--set", "lr=fast"], "lr must be a number, got 'fast'"),
        (["--algo", "iql", "--out", "/proc/nowrite"], "cannot write in /proc"),
        (["--algo", "iql", "--out", "file.txt"], "--out file.txt is a file"),
        (
            ["--algo", "iql", "--env", "tag_intent", "--env-set", "intent_reward=nan"],
            "tag_intent: parameter intent_reward must be a number, got 'nan'",
        ),
        (
            ["--algo", "iql", "--env", "tag_intent", "--env-set", "intent_reward=NaN"],
            "tag_intent: parameter intent_reward must be finite, got nan",
        ),
        (
            ["--algo", "iql", "--env-set", "capture_reward=-Infinity"],
            "tag: parameter capture_reward must be finite, got -inf",
        ),
        (["--algo", "iql", "--env-set", "prey_radius=-1"], "prey_radius must be >= 0"),
        (["--algo", "iql", "--env-set", "fixed_obstacles=1"], "must be true or false"),
        (["--algo", "iql", "--env-set", "num_prey=0.5"], "num_prey must be a whole"),
        (["--algo", "iql", "--env-set", "nope=1"], "tag: unknown parameter 'nope'"),
        (["--algo", "mappo", "--frozen", "prey=pool:"], "lists no checkpoint (pool:"),
        (
            ["--algo", "mappo", "--frozen", "prey=pool:tag_run,gone.policy"],
            "gone.policy",
        ),
        (["--algo", "iql", "--env-set", f"max_steps={HUGE}"], "(a 32-bit number)"),
        (["--algo", "iql", "--env-set", "capture_reward=1e39"], "(a 32-bit number)"),
        (
            ["--algo", "iql", "--env-set", "num_predators=100000000"],
            "tag is too large: one step's observations would take",
        ),
        (
            ["--algo", "iql", "--env-set", "resource_placement=nope"],
            "resource_placement must be one of",
        ),
        (
            ["--algo", "iql", "--env-set", 'obstacle_pos=[[0, "a"], [1, 1]]'],
            "obstacle_pos must be an array of numbers",
        ),
        (["--algo", "iql", "--env-set", "speed"], "--env-set expects FIELD=VALUE"),
        (["--algo", "iql", "--steps", "nan"], "--steps must be a whole number"),
        (["--algo", "iql", "--steps", "inf"], "--steps must be a whole number"),
        (["--algo", "iql", "--steps", "-5"], "total_steps must be > 0"),
        (["--algo", "iql", "--steps", "1000.5"], "--steps must be a whole number"),
        (["--algo", "iql", "--seeds", "0"], "num_seeds must be > 0"),
        (["--algo", "iql", "--seeds", "x"], "argument --seeds: invalid int value"),
        (["--algo", "iql", "--seed", "-1"], "seed must be >= 0"),
        (["--algo", "iql", "--seed", HUGE], "seed must be <= 2**32 - 1"),
        (["--algo", "iql", "--set", "lr=Infinity"], "lr must be finite, got inf"),
        (["--algo", "iql", "--set", "lr=-1"], "lr must be > 0"),
        (["--algo", "iql", "--set", "num_envs=1.5"], "num_envs must be a whole"),
        (["--algo", "iql", "--set", "num_envs=true"], "num_envs must be a whole"),
        (["--algo", "iql", "--set", "rnn=0"], "rnn must be true or false, got 0"),
        (
            ["--algo", "iql", "--set", 'hidden=[64, "a"]'],
            "hidden[1] must be a whole number, got 'a'",
        ),
        (["--algo", "iql", "--set", "hidden=64"], "hidden must be a list of whole"),
        (["--algo", "iql", "--set", "nope=1"], "unknown IQLConfig field 'nope'"),
        (["--algo", "iql", "--set", f"buffer_size={HUGE}"], "buffer_size must be <="),
        (["--algo", "iql", "--set", "env_overrides=5"], "env_overrides must be a list"),
        (["--algo", "iql", "--set", "frozen=[[1, 2]]"], "frozen[0][0] must be a str"),
        (["--algo", "iql", "--set", "algo=mappo"], "choose the algorithm with --algo"),
        (["--algo", "iql", "--set", "lr"], "--set expects FIELD=VALUE, got 'lr'"),
        (["--algo", "nope"], "unknown algorithm 'nope'"),
        (["--algo", "iql", "--env", "nope"], "unknown environment 'nope'"),
        (["--preset", "nope"], "unknown preset 'nope'"),
        (["--steps", "1000"], "give --algo or --preset"),
        (["--algo", "iql", "--frozen", "prey=pickle.msgpack"], "pickle.msgpack"),
        (["--algo", "iql", "--frozen", "prey=empty.msgpack"], "empty.msgpack"),
        (["--algo", "iql", "--frozen", "prey=missing.msgpack"], "missing.msgpack"),
        (["--algo", "iql", "--frozen", "nobody=random"], "nobody"),
        (["--algo", "iql", "--out", "run"], "another config (differs in"),
        (["--algo", "iql", "--tensorboard", "file.txt"], "--tensorboard file.txt"),
        (["--algo", "iql", "--tensorboard", UNWRITABLE], "cannot write in /proc"),
    ],
    "experiment": [
        (["nope"], "unknown experiment 'nope'"),
        ([], "name an experiment, or pass --list"),
        (["exp2", "--seeds", "0"], "--seeds must be >= 1"),
        (["exp2", "--seeds", "x"], "argument --seeds: invalid int value: 'x'"),
        (["exp2", "--profile", "nope"], "unknown preset 'nope'"),
        (["exp2", "--out", "file.txt"], "--out file.txt is a file, not a folder"),
        (["exp2", "--out", UNWRITABLE], "cannot write in /proc"),
    ],
    "reproduce": [
        (["nope"], "argument name: invalid choice: 'nope'"),
        (["intent", "--profile", "nope"], "argument --profile: invalid choice"),
        (["intent", "--out", "file.txt"], "--out file.txt is a file, not a folder"),
        (["intent", "--out", UNWRITABLE], "cannot write in /proc"),
    ],
    "cotrain": [
        (["--profile", "nope"], "argument --profile: invalid choice"),
        (["--seeds", "0"], "--seeds must be >= 1"),
        (["--seeds", "x"], "argument --seeds: invalid int value: 'x'"),
        (["--out", "file.txt"], "--out file.txt is a file, not a folder"),
        (["--out", UNWRITABLE], "cannot write in /proc"),
    ],
    "pola": [
        (["--preset", "nope"], "unknown preset 'nope'"),
        (["--env", "nope"], "env must be one of ipd, coin, got 'nope'"),
        (["--n_update", "0"], "n_update must be >= 1"),
        (["--hidden_size", HUGE], "hidden_size must be <= 2**31 - 1"),
        (["--lr_in", "nan"], "lr_in must be finite, got nan"),
        (["--lr_out", "inf"], "lr_out must be finite, got inf"),
        (["--gae_lambda", "2"], "gae_lambda must be in [0, 1], got 2.0"),
        (["--batch_size", "x"], "argument --batch_size: invalid int value: 'x'"),
        (["--print_every", "0"], "--print_every must be >= 1"),
        (["--checkpoint_every", "-1"], "--checkpoint_every must be >= 0"),
        (["--seed", "-1"], "--seed must be >= 0"),
        (["--save_dir", "file.txt"], "--save_dir file.txt is a file, not a folder"),
        (["--save_dir", UNWRITABLE], "cannot write in /proc"),
    ],
    "pola-exact": [
        (["--n_agents", "3"], "--n_agents must be 2, got 3"),
        (["--gamma", "1"], "gamma must be in (0, 1), got 1.0"),
        (["--gamma", "nan"], "gamma must be finite, got nan"),
        (["--lr_policies_inner", "inf"], "lr_inner must be finite, got inf"),
        (["--std", "-1"], "std must be >= 0"),
        (["--num_epochs", "0"], "num_epochs must be >= 1"),
        (["--repeats", "0"], "--repeats must be >= 1"),
        (["--repeats", HUGE], "--repeats must be <= 2**31 - 1"),
        (["--print_every", "x"], "argument --print_every: invalid int value: 'x'"),
        (["--init_state_representation", "1"], "--init_state_representation must"),
        (["--set_seed", "--seed", "-1"], "--seed must be >= 0"),
    ],
    "lemol": [
        (["--chunk_length", "0"], "chunk_length must be > 0"),
        (["--lr", "nan"], "lr must be finite, got nan"),
        (["--gamma", "2"], "gamma must be in [0, 1], got 2.0"),
        (["--num_episodes", "x"], "argument --num_episodes: invalid int value: 'x'"),
        (["--num_episodes", HUGE], "num_episodes must be <= 2**31 - 1"),
        (["--replay_buffer_capacity", "inf"], "must be a whole number, got inf"),
        (["--scenario", "nope"], "scenario must be push or adversary, got 'nope'"),
        (["--seed", "-1"], "seed must be >= 0"),
        (["--out", "file.txt"], "--out file.txt is a file, not a folder"),
        (["--out", UNWRITABLE], "cannot write in /proc"),
        (["--out", "run"], "run holds a run; choose a new --out"),
        (["--lemol_save_path", "file.txt"], "--lemol_save_path file.txt is a file"),
    ],
    "tournament": [
        (
            ["--side-a", "tag_run", "--side-b", "tag_run", "--out", "t"]
            + ["--metric", "nope"],
            "--metric must be one of",
        ),
        (
            ["--side-a", "tag_run", "--side-b", "tag_run", "--out", "t"]
            + ["--env", "tag_static"],
            "--env tag_static does not match",
        ),
        (["--side-a", "folder", "--side-b", "random", "--out", "t"], "folder"),
        (["--side-a", "pickle.msgpack", "--side-b", "random", "--out", "t"], "pickle"),
        (["--side-a", "empty.msgpack", "--side-b", "random", "--out", "t"], "empty"),
        (["--side-a", "missing.msgpack", "--side-b", "random", "--out", "t"], "miss"),
        (["--side-a", "random", "--side-b", "random", "--out", "t"], "give --env"),
        (
            ["--side-a", "random", "--side-b", "random", "--env", "nope", "--out", "t"],
            "unknown environment 'nope'",
        ),
        (
            ["--side-a", "random", "--side-b", "random", "--env", "tag"]
            + ["--out", "t", "--episodes", "0"],
            "--episodes must be >= 1",
        ),
        (
            ["--side-a", "random", "--side-b", "random", "--env", "tag"]
            + ["--out", "t", "--episodes", HUGE],
            "--episodes must be <= 2**31 - 1",
        ),
        (
            ["--side-a", "random", "--side-b", "random", "--env", "tag"]
            + ["--out", "t", "--episodes", "1000000000"],
            "num_episodes is too large: 1,000,000,000 games at once",
        ),
        (
            ["--side-a", "random", "--side-b", "random", "--env", "tag"]
            + ["--out", "t", "--pairing", "nope"],
            "--pairing must be one of",
        ),
        (
            ["--side-a", "random", "--side-b", "random", "--env", "tag"]
            + ["--out", "t", "--seed", "-1"],
            "--seed must be >= 0",
        ),
        (
            ["--side-a", "random", "--side-b", "random", "--env", "tag"]
            + ["--out", "file.txt"],
            "--out file.txt is a file, not a folder",
        ),
        (
            ["--side-a", "random", "--side-b", "random", "--env", "tag"]
            + ["--out", UNWRITABLE],
            "cannot write in /proc",
        ),
    ],
    "league train": [
        (["--league", "file.txt"], "--league file.txt is a file, not a folder"),
        (["--league", UNWRITABLE], "cannot write in /proc"),
        (["--league", "new", "--set", "lr=fast"], "lr must be a number, got 'fast'"),
        (["--league", "new", "--set", "lr=NaN"], "lr must be finite, got nan"),
        (["--league", "new", "--set", "nope=1"], "unknown TrainingConfig field"),
        (["--league", "new", "--set", "n_envs=-1"], "n_envs must be >= 1"),
        (["--league", "new", "--set", "seed=-1"], "seed must be >= 0"),
        (
            ["--league", "new", "--set", "total_timesteps=1e30"],
            "total_steps is too large",
        ),
        (["--league", "new", "--game", "nope"], "unknown environment 'nope'"),
        (["--league", "new", "--game", "tag"], "tag has two teams"),
        (
            ["--league", "new", "--set", "opponent=missing.msgpack"],
            "no opponent checkpoint at missing.msgpack",
        ),
        (
            ["--league", "new", "--set", "init_checkpoint=missing.msgpack"],
            "no checkpoint to start from at missing.msgpack",
        ),
        (["--league", "new", "--set", "game_kwargs=5"], "game_kwargs must be a list"),
        (["--league", "new", "--set", "curriculum=[1]"], "curriculum[0] must be a"),
        (["--league", "new", "--resume"], "nothing to resume"),
        (["--league", "new", "--game-kwarg", "nope=1"], "unknown parameter 'nope'"),
        (
            ["--league", "new", "--game-kwarg", "max_steps=Infinity"],
            "max_steps must be a whole number, got inf",
        ),
        (["--league", "new", "--run-id", "a b"], "run_id must be letters"),
        (["--league", "new", "--seeds", "-1"], "seed must be >= 0, got -1"),
        (["--league", "new", "--backend", "nope"], "unknown --backend 'nope'"),
        (
            ["--league", "new", "--backend", "ray", "--ray-workers", "0"],
            "--ray-workers must be >= 1",
        ),
    ],
    "league evaluate": [
        (["pickle.msgpack"], "pickle.msgpack"),
        (["missing.msgpack"], "missing.msgpack"),
        (["folder"], "folder"),
        (["corrupt.json"], "corrupt.json"),
        (["tag_run", "--opponent", "nope"], "unknown opponent 'nope'"),
        (["random", "--n-episodes", "0"], "--n-episodes must be >= 1"),
        (["random", "--n-episodes", HUGE], "--n-episodes must be <= 2**31 - 1"),
        (["random", "--seed", "-1"], "--seed must be >= 0"),
        (["random", "--league", "file.txt"], "--league file.txt is a file"),
        (["random", "random", "--agent-name", "a"], "--agent-name needs a single"),
        (["tag_run", "--backend", "nope"], "unknown --backend 'nope'"),
        (
            ["tag_run", "--backend", "ray", "--ray-address", "no address"],
            "--ray-address must be auto, local, HOST:PORT or ray://HOST:PORT",
        ),
    ],
    "league tournament": [
        (["--players", "missing.msgpack", "--opponents", "random"], "missing"),
        (["--players", "tag_run", "--opponents", "nope"], "unknown opponent 'nope'"),
        (
            ["--players", "random", "--opponents", "random", "--n-episodes", "0"],
            "--n-episodes must be >= 1",
        ),
        (
            ["--players", "random", "--opponents", "random", "--seed", HUGE],
            "--seed must be <= 2**32 - 1",
        ),
        (
            ["--players", "random", "--opponents", "random", "--out", "folder"],
            "--out folder is a folder, not a file",
        ),
        (
            ["--players", "random", "--opponents", "random", "--out", UNWRITABLE],
            "cannot write in /proc",
        ),
        (
            ["--players", "random", "--opponents", "random", "--league", "file.txt"],
            "--league file.txt is a file",
        ),
        (["--players", "random"], "the following arguments are required"),
    ],
    "league ratings": [
        (["--league", "empty.json"], "empty.json is not a league folder"),
        (["--league", "missing_folder"], "no league at missing_folder"),
        (["--league", "folder"], "no league at folder"),
        (["--league", "corrupt_league"], "is not a league database"),
        (["--league", "league", "--bradley-terry", "x"], "unrecognized arguments"),
    ],
    "league pool": [
        (["--league", "missing_folder"], "no league at missing_folder"),
        (["--league", "corrupt_league"], "is not a league database"),
        (["--league", "empty.json"], "empty.json is not a league folder"),
    ],
    "league registry": [
        (["--league", "missing_folder", "list"], "no league at missing_folder"),
        (["--league", "league", "nope"], "argument action: invalid choice: 'nope'"),
        (["--league", "league", "register"], "needs --echelon and --version"),
        (
            ["--league", "league", "register", "--echelon", "brigade"]
            + ["--version", "v1"],
            "registry register needs --path",
        ),
        (
            ["--league", "league", "register", "--echelon", "brigade"]
            + ["--version", "v 1", "--path", "file.txt"],
            "version",
        ),
        (
            ["--league", "league", "register", "--echelon", "nope"]
            + ["--version", "v1", "--path", "file.txt"],
            "echelon",
        ),
        (
            ["--league", "league", "get", "--echelon", "brigade", "--version", "v9"],
            "brigade/v9",
        ),
        (
            ["--league", "league", "remove", "--echelon", "brigade", "--version", "v9"],
            "brigade/v9",
        ),
        (
            ["--league", "file.txt", "register", "--echelon", "brigade"]
            + ["--version", "v1", "--path", "file.txt"],
            "--league file.txt is a file, not a folder",
        ),
    ],
    "league prune": [
        (["--league", "league", "--keep", "-1"], "--keep must be >= 0"),
        (["--league", "league", "--keep", "x"], "argument --keep: invalid int"),
        (["--league", "missing_folder"], "no league at missing_folder"),
        (["--league", "corrupt_league"], "is not a league database"),
    ],
    "league export": [
        (["--league", "missing_folder"], "no league at missing_folder"),
        (["--league", "corrupt_league"], "is not a league database"),
        (["--league", "league", "--out", "folder"], "--out folder is a folder"),
        (["--league", "league", "--out", UNWRITABLE], "cannot write in /proc"),
        (["--league", "league", "--import", "corrupt.json"], "corrupt.json"),
        (["--league", "league", "--import", "empty.json"], "empty.json"),
        (["--league", "league", "--import", "missing.json"], "missing.json"),
        (["--league", "league", "--import", "folder"], "folder"),
        (["--league", "new", "--import", "list.json"], "list.json"),
        (["--league", "league", "--import", "wrong_export.json"], "not a league"),
    ],
    "docs render": [
        (["--root", "missing_folder"], "missing_folder has no results/ folder"),
        (["--root", "folder", "--check"], "folder has no results/ folder"),
    ],
    "verify": [
        (["missing_folder"], "missing_folder"),
        (["folder"], "folder"),
        (["file.txt"], "file.txt"),
        (["folder", "--scratch", "file.txt"], "--scratch file.txt is not a folder"),
    ],
}


def _cases():
    for command, cases in BAD_INPUTS.items():
        for args, message in cases:
            argv = [*command.split(), *args]
            yield pytest.param(argv, message, id=" ".join(argv))


# -- the sandbox ---------------------------------------------------------------------
def _team(num_agents: int, obs_size: int) -> tuple[dict, dict]:
    """A small Q-network team of ``tag``, one seed, as ``mopa train`` saves it."""
    spec = PolicySpec(
        kind="q", num_agents=num_agents, obs_size=obs_size, num_actions=5, hidden=(8,)
    )
    params = init_params(spec, jax.random.key(0))
    return spec.to_dict(), jax.tree.map(lambda x: x[None], params)


@pytest.fixture(scope="module")
def sandbox_template(tmp_path_factory) -> Path:
    """A folder with one file of every kind the commands read."""
    from mopa.league import EloRatings, LeagueStore, PolicyRegistry

    root = tmp_path_factory.mktemp("sandbox")
    (root / "file.txt").write_text("not a folder\n")
    (root / "empty.json").write_bytes(b"")
    (root / "corrupt.json").write_text('{"elo": [1, 2')
    (root / "list.json").write_text("[1, 2]\n")
    (root / "pickle.msgpack").write_bytes(pickle.dumps({"params": [1.0, 2.0]}))
    (root / "empty.msgpack").write_bytes(b"")
    (root / "folder").mkdir()
    (root / "run").mkdir()
    (root / "run" / "config.json").write_text('{"algo": "iql", "total_steps": 8}\n')
    (root / "wrong_export.json").write_text('{"elo": {"ratings": {"a": "x"}}}\n')
    teams = {"predator": _team(3, 16), "prey": _team(1, 14)}
    write_policy_checkpoint(
        root / "tag_run" / POLICY_FILE,
        algo="iql",
        env="tag",
        env_overrides={},
        config={"algo": "iql"},
        meta={},
        teams=teams,
    )
    with LeagueStore(root / "league") as store:
        EloRatings(store).update("agent", "scripted_l1", [1.0, 0.0])
        PolicyRegistry(store).register("brigade", "v1", root / "tag_run" / POLICY_FILE)
    (root / "corrupt_league").mkdir()
    (root / "corrupt_league" / "league.sqlite").write_bytes(b"not a database" * 100)
    return root


def snapshot(root: Path) -> dict[str, tuple]:
    """Every path under ``root``: folders by name, files with bytes and mtime."""
    tree = {}
    for path in sorted(root.rglob("*")):
        name = path.relative_to(root).as_posix()
        if path.is_dir():
            tree[name] = ("folder",)
        else:
            tree[name] = ("file", path.read_bytes(), path.stat().st_mtime_ns)
    return tree


@pytest.fixture
def sandbox(sandbox_template, tmp_path, monkeypatch) -> Path:
    root = tmp_path / "sandbox"
    shutil.copytree(sandbox_template, root)
    monkeypatch.chdir(root)
    return root


# -- the tests -----------------------------------------------------------------------
@pytest.mark.parametrize(("argv", "message"), _cases())
def test_bad_input_is_one_line_exit_2_and_changes_nothing(
    argv, message, sandbox, capsys
):
    before = snapshot(sandbox)
    assert main(argv) == 2
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("mopa: error: "), captured.err
    assert "Traceback" not in captured.err
    assert message in lines[0], lines[0]
    assert snapshot(sandbox) == before


@pytest.mark.parametrize(
    "args", [["missing_folder"], ["folder", "--scratch", "file.txt"]]
)
def test_verify_refuses_bad_paths_before_jax_is_set_up(
    args, sandbox, capsys, monkeypatch
):
    import mopa.core.compile_cache

    def set_up(enabled=True):
        raise AssertionError("JAX was set up before the paths were checked")

    monkeypatch.setattr(mopa.core.compile_cache, "use_compile_cache", set_up)
    assert main(["verify", *args]) == 2
    assert capsys.readouterr().err.startswith("mopa: error: ")


def leaf_commands(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()):
    """``{"league ratings": parser, ...}``: every command that runs, nested ones by
    their full name."""
    commands = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                commands.update(leaf_commands(sub, (*prefix, name)))
    if not commands and prefix:
        commands[" ".join(prefix)] = parser
    return commands


def flag_kind(action: argparse.Action) -> str | None:
    """What a flag takes: ``int``, ``float``, ``path`` or ``word``; ``None`` for
    switches, which take nothing that could be bad."""
    if action.nargs == 0:
        return None
    if action.type in (int, float):
        return action.type.__name__
    if action.type is Path:
        return "path"
    return "word"


def test_every_command_and_flag_kind_has_bad_inputs():
    commands = leaf_commands(build_parser())
    assert {"train", "league ratings", "bench env"} <= set(commands)
    assert set(BAD_INPUTS) == set(commands), "commands without bad inputs"
    missing = []
    for name, parser in commands.items():
        flags = {
            option: flag_kind(action)
            for action in parser._actions
            for option in action.option_strings
        }
        kinds = {kind for kind in flags.values() if kind is not None}
        covered = {
            flags.get(token.partition("=")[0])
            for args, _ in BAD_INPUTS[name]
            for token in args
        }
        missing += [f"{name}: {kind} flags" for kind in sorted(kinds - covered)]
    assert not missing, missing


READ_ONLY = [
    # (arguments, a line the output must contain)
    (["league", "ratings", "--league", "league"], "agent"),
    (["league", "ratings", "--league", "league", "--bradley-terry"], "scripted_l1"),
    (["league", "pool", "--league", "league", "--side", "run"], None),
    (["league", "registry", "--league", "league", "list"], "brigade/v1"),
    (
        ["league", "registry", "--league", "league", "get"]
        + ["--echelon", "brigade", "--version", "v1"],
        '"version": "v1"',
    ),
    (["league", "export", "--league", "league"], '"game_counts"'),
    (["envs"], "tag_intent"),
    (["train", "--list-presets"], "exp4_mappo_circle"),
    (["experiment", "--list"], "exp2"),
    (["lemol", "--dry_run"], '"scenario": "push"'),
    (
        ["league", "evaluate", "tag_run", "--opponent", "random", "--n-episodes", "2"],
        "random: ",
    ),
]


@pytest.mark.parametrize(
    ("argv", "expected"), [pytest.param(a, e, id=" ".join(a)) for a, e in READ_ONLY]
)
def test_read_only_commands_create_and_change_no_file(argv, expected, sandbox, capsys):
    before = snapshot(sandbox)
    assert main(argv) == 0
    out = capsys.readouterr().out
    if expected is None:
        assert out == ""  # the league has no pool
    else:
        assert expected in out
    assert snapshot(sandbox) == before


def test_a_tournament_of_existing_runs_writes_only_its_output(sandbox, capsys):
    before = snapshot(sandbox)
    argv = ["tournament", "--side-a", "tag_run", "--side-b", "tag_run"]
    assert main([*argv, "--episodes", "2", "--out", "cross"]) == 0
    assert "1 x 1 cells" in capsys.readouterr().out
    after = snapshot(sandbox)
    written = {name for name in after if name.split("/")[0] == "cross"}
    assert {"cross", "cross/tournament.json", "cross/heatmap.png"} <= written
    assert {k: v for k, v in after.items() if k not in written} == before
