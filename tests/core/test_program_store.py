"""Stored programs (:mod:`mopa.core.program_store`): a later process runs the
tournament's program without tracing it, with the same numbers; what the key holds;
bad files; the off switch."""

import dataclasses
import json
import os
import subprocess
import sys

import jax
import numpy as np
import optax
import pytest
from flax import struct

from mopa.core import program_store
from mopa.core.compile_cache import COMPILE_CACHE_DIR_ENV, COMPILE_CACHE_ENV
from mopa.core.program_store import (
    UnknownValueError,
    fingerprint,
    program_store_folder,
    stored_jit,
    use_program_store,
)
from mopa.policy import PolicySpec

# One small tournament; counts how often its program's Python body runs (the cell
# function runs only while the program is traced).
TOURNAMENT = """
import json
import jax
from mopa.core.compile_cache import use_compile_cache
from mopa.core.program_store import program_store_folder
from mopa.envs import make
from mopa.eval import TournamentEntry, play_tournament
from mopa.eval import tournament
from mopa.players import PolicyPlayer
from mopa.policy import PolicySpec, init_params

use_compile_cache()
traced = []
cell = tournament._play_cell
tournament._play_cell = lambda *a, **k: traced.append(1) or cell(*a, **k)
env, params = make("tag")

def entry(name, team, seed):
    spec = PolicySpec(kind="q", num_agents=env.team_sizes[team],
                      obs_size=env.observation_space(team).shape[0],
                      num_actions=5, hidden=(8,))
    keys = jax.random.split(jax.random.key(seed), 2)
    return TournamentEntry(name, PolicyPlayer(spec),
                           jax.vmap(lambda k: init_params(spec, k))(keys))

result = play_tournament(env, params, [entry("predators", 0, 1)],
                         [entry("prey", 1, 2)], jax.random.key(3),
                         num_episodes=2, horizon=12)
folder = program_store_folder()
print(json.dumps({
    "traced": len(traced),
    "stored": sorted(p.name for p in folder.iterdir()) if folder else None,
    "returns": result.returns.tolist(),
}))
"""


def _tournament(folder, **settings):
    env = {k: v for k, v in os.environ.items() if not k.startswith("MOPA_COMPILE")}
    return subprocess.Popen(
        [sys.executable, "-c", TOURNAMENT],
        env={**env, COMPILE_CACHE_DIR_ENV: str(folder), **settings},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _finish(process) -> dict:
    out, err = process.communicate(timeout=300)
    assert process.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])


@pytest.mark.slow
def test_a_later_process_runs_the_stored_program_untraced_with_the_same_numbers(
    tmp_path,
):
    first = _tournament(tmp_path / "cache")
    off = _tournament(tmp_path / "unused", **{COMPILE_CACHE_ENV: "0"})
    first, off = _finish(first), _finish(off)
    second = _finish(_tournament(tmp_path / "cache"))

    assert first["traced"] > 0 and len(first["stored"]) == 1
    assert first["stored"][0].endswith(".program")
    assert second["traced"] == 0  # loaded: the Python function never ran
    assert second["stored"] == first["stored"]
    assert off["traced"] > 0 and off["stored"] is None
    assert not (tmp_path / "unused").exists()
    assert second["returns"] == first["returns"] == off["returns"]


@pytest.fixture
def store(tmp_path):
    """The program store in a folder of its own, restored after the test."""
    before = program_store_folder()
    use_program_store(tmp_path)
    yield tmp_path
    use_program_store(before)


def _files(folder):
    return sorted(p.name for p in folder.iterdir())


softmax = stored_jit(jax.nn.softmax, static_argnames=("axis",))


def test_one_program_per_static_value_and_argument_kind(store):
    x = np.linspace(-2.0, 3.0, 12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_array_equal(softmax(x), jax.nn.softmax(x))
    assert len(_files(store)) == 1
    np.testing.assert_array_equal(softmax(x, axis=0), jax.nn.softmax(x, axis=0))
    assert len(_files(store)) == 2  # another static value
    softmax(x[:2])
    assert len(_files(store)) == 3  # another shape
    softmax(x.astype(np.float16))
    assert len(_files(store)) == 4  # another dtype
    softmax(x + 1.0)
    softmax(x, axis=-1)
    assert len(_files(store)) == 4  # other values, same program


def test_a_damaged_file_is_ignored_and_written_again(store):
    x = np.arange(6, dtype=np.float32)
    expected = jax.nn.softmax(x)
    softmax(x)
    (path,) = store.iterdir()
    good = path.read_bytes()
    assert program_store._load(path) is not None
    for damaged in (good[:-7] + b"garbage", good[: len(good) // 2], b""):
        path.write_bytes(damaged)
        use_program_store(store)  # a new process: nothing looked up yet
        np.testing.assert_array_equal(softmax(x), expected)
        assert program_store._load(path) is not None  # a whole, checked file again


def test_off_and_unknown_code_run_plain_and_store_nothing(store):
    x = np.arange(4, dtype=np.float32)

    def local_softmax(x):
        return jax.nn.softmax(x)

    np.testing.assert_array_equal(stored_jit(local_softmax)(x), jax.nn.softmax(x))
    assert _files(store) == []  # a function outside mopa and its libraries
    use_program_store(None)
    softmax(x)
    assert _files(store) == []


@struct.dataclass
class _LocalParams:
    x: jax.Array


def test_arguments_whose_tree_holds_unknown_nodes_run_plain(store):
    global_norm = stored_jit(optax.global_norm)  # takes any tree
    x = np.arange(3, dtype=np.float32)
    expected = optax.global_norm(x)
    np.testing.assert_allclose(global_norm(_LocalParams(x)), expected)
    assert _files(store) == []  # a node type outside mopa: its flattening unknown
    np.testing.assert_allclose(global_norm({"x": x}), expected)
    assert len(_files(store)) == 1


def test_stored_jit_refuses_parameters_it_cannot_name():
    with pytest.raises(TypeError, match="parameter args"):
        stored_jit(_star)
    with pytest.raises(TypeError, match="no parameter nope"):
        stored_jit(jax.nn.softmax, static_argnames=("nope",))


def _star(*args):
    return args


@dataclasses.dataclass(frozen=True)
class _Local:
    size: int


def test_fingerprints_follow_every_field_and_refuse_unknown_objects():
    spec = PolicySpec(kind="q", num_agents=2, obs_size=5, num_actions=5, hidden=(8,))
    same = PolicySpec(kind="q", num_agents=2, obs_size=5, num_actions=5, hidden=(8,))
    assert fingerprint(spec) == fingerprint(same)
    assert fingerprint(spec) != fingerprint(dataclasses.replace(spec, hidden=(9,)))
    assert fingerprint((1, 1.0, True)) != fingerprint((1.0, 1, True))
    assert fingerprint({"b": 1, "a": 2}) == fingerprint({"a": 2, "b": 1})
    a = np.arange(4, dtype=np.float32)
    assert fingerprint(a) == fingerprint(jax.numpy.asarray(a))
    assert fingerprint(a) != fingerprint(a + 1e-7)
    assert fingerprint(a) != fingerprint(a.astype(np.float64))
    key = jax.random.key(1)
    assert fingerprint(key) == fingerprint(jax.random.key(1))
    assert fingerprint(key) != fingerprint(jax.random.key(2))
    assert fingerprint(key) != fingerprint(jax.random.key_data(key))
    assert fingerprint(np.float32(1.0)) != fingerprint(1.0)
    local_function = _Local.__init__  # defined in a test module, not in mopa
    for unknown in (_Local(3), lambda x: x, object(), local_function):
        with pytest.raises(UnknownValueError):
            fingerprint(unknown)
