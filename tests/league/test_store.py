"""The league store survives SIGKILL; pool, registry and manifest (pruning keeps
referenced checkpoints); JSON export and import."""

import os
import signal
import sqlite3
import subprocess
import sys
import time

import numpy as np
import pytest

from mopa.errors import (
    InvalidParameterError,
    MissingPathError,
    PathError,
    UnknownNameError,
)
from mopa.league.manifest import CheckpointManifest
from mopa.league.pool import OpponentPool, SnapshotTrigger
from mopa.league.ratings import EloRatings
from mopa.league.registry import Echelon, PolicyRegistry
from mopa.league.store import LeagueStore

KILLED_WRITER = """
import sys
from mopa.league.ratings import EloRatings
from mopa.league.store import LeagueStore
root, name = sys.argv[1], sys.argv[2]
with LeagueStore(root) as store:
    elo = EloRatings(store)
    i = 0
    while True:
        elo.update(name, "scripted_l2", float(i % 2), step=i)
        print(i, flush=True)  # printed only after the commit
        i += 1
"""


def test_sigkill_at_random_moments_loses_nothing_committed(tmp_path):
    LeagueStore(tmp_path).close()
    rng = np.random.default_rng(0)
    committed: dict[str, set[int]] = {}
    for round_ in range(6):
        name = f"writer{round_}"
        writers = [
            subprocess.Popen(
                [sys.executable, "-c", KILLED_WRITER, str(tmp_path), f"{name}_{k}"],
                stdout=subprocess.PIPE,
                text=True,
            )
            for k in range(2)
        ]
        time.sleep(0.3 + rng.uniform(0.0, 0.4))
        for k, writer in enumerate(writers):
            os.kill(writer.pid, signal.SIGKILL)
            writer.wait()
            lines = writer.stdout.read().split()
            committed[f"{name}_{k}"] = {int(x) for x in lines}
    with sqlite3.connect(tmp_path / "league.sqlite") as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    with LeagueStore(tmp_path) as store:
        stored: dict[str, set[int]] = {}
        for match in store.matches():
            stored.setdefault(match["player"], set()).add(match["step"])
        assert sum(len(v) for v in committed.values()) > 0
        for player, steps in committed.items():
            assert steps <= stored.get(player, set())
            # At most the one update in flight when killed was committed unseen.
            assert len(stored.get(player, set()) - steps) <= 1
            assert EloRatings(store).games(player) == len(stored.get(player, ()))


def _fake_checkpoint(path):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x")
    return path


def test_pool_evicts_oldest_and_samples(tmp_path):
    with LeagueStore(tmp_path) as store:
        pool = OpponentPool(store, side="red", max_size=3)
        for v in range(5):
            pool.add_file(_fake_checkpoint(tmp_path / f"v{v}"), version=v, step=100 * v)
        assert [e.version for e in pool.entries] == [2, 3, 4]
        assert OpponentPool(store, side="blue").size == 0  # pools per side
        np.testing.assert_allclose(pool.weights("uniform"), [1 / 3] * 3)
        np.testing.assert_allclose(pool.weights("latest"), [0, 0, 1])
        np.testing.assert_allclose(
            pool.weights("uniform", latest_ratio=0.8), [0.1, 0.1, 0.8]
        )
        for _ in range(8):
            pool.record(2, 1.0)  # the learner beats v2: (8+1)/(8+2) = 0.9
        # pfsp: (1 - 0.9)^2 = 0.01 for v2, (1 - 0.5)^2 = 0.25 for the others.
        np.testing.assert_allclose(
            pool.weights("pfsp"), np.array([0.01, 0.25, 0.25]) / 0.51
        )
        draws = [
            pool.sample(np.random.default_rng(i), sampling="latest") for i in range(5)
        ]
        assert {d.version for d in draws} == {4}
    with LeagueStore(tmp_path) as store:  # membership and records resume
        pool = OpponentPool(store, side="red", max_size=3)
        assert [e.version for e in pool.entries] == [2, 3, 4]
        assert pool.entries[0].games == 8


def test_snapshot_trigger_counts_steps_since_last():
    trigger = SnapshotTrigger(every=1000)
    fired = []
    for step in range(0, 5000, 48):  # strides that skip most multiples of 1000
        if trigger.should_snapshot(step):
            trigger.mark(step)
            fired.append(step)
    assert fired == [1008, 2016, 3024, 4032]


def test_registry_validates_names(tmp_path):
    checkpoint = _fake_checkpoint(tmp_path / "ck" / "a.msgpack")
    with LeagueStore(tmp_path) as store:
        registry = PolicyRegistry(store)
        entry = registry.register("Battalion", "v1.0", checkpoint, run_id="r1")
        assert entry.echelon == Echelon.BATTALION == "battalion"
        assert registry.get("battalion", "v1.0").run_id == "r1"
        with pytest.raises(ValueError, match="already registered"):
            registry.register("battalion", "v1.0", checkpoint)
        registry.register("battalion", "v1.0", checkpoint, run_id="r2", overwrite=True)
        assert registry.get("battalion", "v1.0").run_id == "r2"
        for bad in ("../x", "a/b", "", ".hidden"):
            with pytest.raises(InvalidParameterError):
                registry.register("battalion", bad, checkpoint)
        with pytest.raises(ValueError, match="unknown echelon"):
            registry.register("corps", "v1", checkpoint)
        with pytest.raises(MissingPathError, match="no checkpoint at"):
            registry.register("brigade", "v1", tmp_path / "missing")
        registry.register("division", "v2", checkpoint)
        assert [e.version for e in registry.list("division")] == ["v2"]
        assert len(registry.list()) == 2
        registry.remove("division", "v2")
        with pytest.raises(UnknownNameError, match="division/v2 is not registered"):
            registry.get("division", "v2")


def test_prune_keeps_newest_and_referenced(tmp_path):
    paths = [
        _fake_checkpoint(tmp_path / "runs" / f"step_{i}.msgpack") for i in range(6)
    ]
    with LeagueStore(tmp_path) as store:
        manifest = CheckpointManifest(store)
        for i, path in enumerate(paths):
            manifest.register(path, kind="periodic", step=i * 10, seed=0, run_id="r")
        OpponentPool(store, side="main").add_file(paths[0], version=0, step=0)
        PolicyRegistry(store).register("battalion", "v1", paths[1])
        EloRatings(store).update(str(paths[2]), "random", 1.0)
        deleted = manifest.prune(keep_last=2)
        assert sorted(deleted) == [str(paths[3].resolve())]
        assert [p.exists() for p in paths] == [True, True, True, False, True, True]
        assert manifest.latest_periodic().step == 50
        assert [r.deleted for r in manifest.rows("periodic")] == [
            False, False, False, True, False, False
        ]  # fmt: skip


def test_export_import_round_trip(tmp_path):
    checkpoint = _fake_checkpoint(tmp_path / "a.msgpack")
    with LeagueStore(tmp_path / "one") as store:
        EloRatings(store).update("a", "scripted_l1", [1.0, 0.0])
        PolicyRegistry(store).register("brigade", "v3", checkpoint, run_id="r")
        CheckpointManifest(store).register(checkpoint, kind="best", step=5)
        store.put_state("curriculum", {"stage": 2})
        exported = store.export_json()
    assert exported["elo"]["game_counts"]["a"] == 2
    assert exported["policy_registry"][0]["version"] == "v3"
    with LeagueStore(tmp_path / "two") as store:
        store.import_json(exported)
        again = store.export_json()
        assert EloRatings(store).rating("a") == pytest.approx(
            exported["elo"]["ratings"]["a"]
        )
        assert store.get_state("curriculum") == {"stage": 2}
    for key in ("elo", "policy_registry", "state"):
        assert again[key] == exported[key]
    assert [r["artifact_type"] for r in again["manifest"]] == ["best"]


def _tree(root):
    """Every file under ``root`` with its bytes and modification time."""
    return {
        p.relative_to(root).as_posix(): (p.read_bytes(), p.stat().st_mtime_ns)
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def test_read_only_store_reads_and_changes_nothing(tmp_path):
    root = tmp_path / "league"
    with LeagueStore(root) as store:
        EloRatings(store).update("a", "scripted_l1", [1.0, 1.0])
    before = _tree(tmp_path)
    assert list(before) == ["league/league.sqlite"]  # the WAL is folded in on close
    with LeagueStore(root, read_only=True) as store:
        assert EloRatings(store).games("a") == 2
        assert len(store.matches()) == 2
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            store.put_state("k", 1)
    assert _tree(tmp_path) == before


def test_read_only_store_sees_a_writer_that_is_still_open(tmp_path):
    root = tmp_path / "league"
    with LeagueStore(root) as writer:
        EloRatings(writer).update("a", "scripted_l1", [1.0])  # in the WAL, open
        assert (root / "league.sqlite-wal").exists()
        with LeagueStore(root, read_only=True) as reader:
            assert EloRatings(reader).games("a") == 1


def test_a_missing_or_broken_league_is_refused_without_creating_one(tmp_path):
    (tmp_path / "file.txt").write_text("x")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "league.sqlite").write_bytes(b"not a database" * 100)
    (tmp_path / "other").mkdir()
    sqlite3.connect(tmp_path / "other" / "league.sqlite").execute(
        "CREATE TABLE t (x)"
    ).connection.close()
    before = _tree(tmp_path)
    for root, kwargs, message in [
        ("missing", {"read_only": True}, "no league at .*missing"),
        ("missing", {"create": False}, "no league at .*missing"),
        ("file.txt", {}, "file.txt is not a league folder"),
        ("bad", {"read_only": True}, "is not a league database"),
        ("bad", {}, "is not a league database"),
        ("other", {"read_only": True}, "is not a league database .no manifest table"),
    ]:
        with pytest.raises(PathError, match=message):
            LeagueStore(tmp_path / root, **kwargs)
    assert _tree(tmp_path) == before
    assert not (tmp_path / "missing").exists()


def test_import_of_a_malformed_export_merges_nothing(tmp_path):
    with LeagueStore(tmp_path / "league") as store:
        EloRatings(store).update("a", "scripted_l1", [1.0])
        before = store.export_json()
        bad = {"elo": {"ratings": {"b": 1500.0}}, "pool": [{"side": "run"}]}
        with pytest.raises(InvalidParameterError, match="not a league export"):
            store.import_json(bad)
        assert store.export_json() == before  # the ratings of the import rolled back
