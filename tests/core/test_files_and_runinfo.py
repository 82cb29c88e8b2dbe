"""Atomic writes and run metadata."""

import json
import subprocess
from pathlib import Path

import pytest

from mopa.core import runinfo
from mopa.core.files import atomic_write, write_json
from mopa.core.runinfo import (
    check_clean_for,
    git_sha,
    git_state,
    package_versions,
    run_metadata,
)
from mopa.errors import InvalidParameterError
from tests.checkouts import make_checkout


def test_atomic_write_replaces_whole_or_not_at_all(tmp_path):
    path = tmp_path / "sub" / "result.json"
    write_json(path, {"a": 1})
    assert json.loads(path.read_text()) == {"a": 1}

    def fail_halfway(file):
        file.write(b'{"a": 2, "trunc')
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        atomic_write(path, fail_halfway)
    assert json.loads(path.read_text()) == {"a": 1}  # untouched
    assert sorted(p.name for p in path.parent.iterdir()) == ["result.json"]  # no temp
    write_json(path, [1, 2])
    assert json.loads(path.read_text()) == [1, 2]


def test_git_sha_clean_dirty_and_outside(tmp_path):
    assert git_sha(tmp_path) is None and git_state(tmp_path) is None
    head = make_checkout(tmp_path)
    assert git_sha(tmp_path) == head
    clean = git_state(tmp_path)
    assert (clean.sha, clean.dirty, clean.diff_sha256) == (head, False, None)
    (tmp_path / "f.txt").write_text("two\n")
    assert git_sha(tmp_path) == f"{head}-dirty"
    first = git_state(tmp_path)
    assert first.dirty and len(first.diff_sha256) == 64
    (tmp_path / "f.txt").write_text("three\n")
    assert git_state(tmp_path).diff_sha256 != first.diff_sha256  # another change


def test_record_folders_are_written_only_from_a_clean_tree(tmp_path, monkeypatch):
    make_checkout(tmp_path)
    monkeypatch.setattr(runinfo, "SOURCE", tmp_path)
    for target in ("results/exp5", "benchmarks/bench_env.json", "runs/exp5"):
        check_clean_for(tmp_path / target)  # clean: anywhere
    (tmp_path / "f.txt").write_text("two\n")
    for target in ("results/exp5", "benchmarks/bench_env.json"):
        with pytest.raises(InvalidParameterError, match="uncommitted changes"):
            check_clean_for(tmp_path / target)
        check_clean_for(tmp_path / target, allow_dirty=True)
    check_clean_for(tmp_path / "runs/exp5")  # not a record folder
    meta = run_metadata({})
    assert meta["git_dirty"] is True and meta["git_sha"].endswith("-dirty")
    assert meta["git_diff_sha256"] == git_state(tmp_path).diff_sha256


def test_run_metadata_records_config_and_versions():
    meta = run_metadata({"seed": 3})
    assert meta["config"] == {"seed": 3}
    versions = package_versions()
    assert versions["jax"] == meta["versions"]["jax"] and versions["jax"]
    assert versions["python"].startswith("3.")
    assert meta["machine"]["cpus"] >= 1 and meta["machine"]["devices"]
    assert set(meta["machine"]["cpu"]["isa"]) <= set(runinfo.ISA_FLAGS)


def test_rewriting_a_tracked_benchmark_keeps_the_record_clean(tmp_path, monkeypatch):
    """A benchmark rerun into its own committed file: the tree was clean when the
    run was recorded, so its metadata says so (the rows rewrite a tracked file, and
    the git state is read before they do)."""
    import argparse

    from mopa.cli.records import write_benchmark
    from tests.checkouts import git

    make_checkout(tmp_path)
    monkeypatch.setattr(runinfo, "SOURCE", tmp_path)
    rows = tmp_path / "benchmarks" / "bench_x.json"
    write_json(rows, [{"old": 1}])
    git(tmp_path, "add", "benchmarks")
    git(tmp_path, "-c", "user.email=a@b", "-c", "user.name=n", "commit", "-qm", "x")
    args = argparse.Namespace(json=rows, bench="x", argv=["bench", "x"])
    write_benchmark(args, [{"new": 2}], {})
    meta = json.loads((tmp_path / "benchmarks" / "bench_x.meta.json").read_text())
    assert meta["git_dirty"] is False and not meta["git_sha"].endswith("-dirty")
    assert json.loads(rows.read_text()) == [{"new": 2}]
    assert git_state(tmp_path).dirty  # the rows did change a tracked file


def test_a_benchmark_record_keeps_each_row_as_it_is_measured(tmp_path, monkeypatch):
    """Rows are on disk as soon as each is measured, the metadata saying how many
    until the end; the git state is the one read when the record was made."""
    import argparse

    from mopa.cli.records import BenchmarkRecord
    from tests.checkouts import git

    make_checkout(tmp_path)
    monkeypatch.setattr(runinfo, "SOURCE", tmp_path)
    rows = tmp_path / "benchmarks" / "bench_x.json"
    meta_path = tmp_path / "benchmarks" / "bench_x.meta.json"
    write_json(rows, [{"old": 1}])
    git(tmp_path, "add", "benchmarks")
    git(tmp_path, "-c", "user.email=a@b", "-c", "user.name=n", "commit", "-qm", "x")
    args = argparse.Namespace(json=rows, bench="x", argv=["bench", "x", "--n", "2"])
    record = BenchmarkRecord(args, {"n": 2})
    assert json.loads(rows.read_text()) == [{"old": 1}]  # nothing written yet
    record.add({"row": 0})
    assert json.loads(rows.read_text()) == [{"row": 0}]
    meta = json.loads(meta_path.read_text())
    assert meta["partial"] == {"rows": 1} and meta["config"]["n"] == 2
    record.add({"row": 1})
    assert json.loads(meta_path.read_text())["partial"] == {"rows": 2}
    record.finish(speedup=1.5)
    meta = json.loads(meta_path.read_text())
    assert "partial" not in meta
    assert meta["config"] == {
        "command": "bench x",
        "argv": ["bench", "x", "--n", "2"],
        "n": 2,
        "speedup": 1.5,
    }
    assert meta["git_dirty"] is False  # read before the rows changed the file
    assert json.loads(rows.read_text()) == [{"row": 0}, {"row": 1}]
    # Without --json nothing is written.
    quiet = BenchmarkRecord(argparse.Namespace(json=None), {})
    quiet.add({"row": 0})
    quiet.finish()
    assert quiet.rows == [{"row": 0}]


def test_no_committed_record_names_a_dirty_tree():
    """Every meta.json that git tracks under results/ and benchmarks/ was written
    from a clean commit, so each committed figure can be traced to its code."""
    root = Path(__file__).resolve().parents[2]
    if not (root / ".git").exists():
        pytest.skip("not a git checkout: no tracked records to check")
    listed = subprocess.run(
        ["git", "ls-files", "-z", "results", "benchmarks"],
        cwd=root,
        capture_output=True,
        check=True,
    ).stdout.decode()
    metas = [name for name in listed.split("\0") if name.endswith("meta.json")]
    assert len(metas) >= 20  # every result folder and benchmark has one
    dirty = []
    for name in metas:
        meta = json.loads((root / name).read_text())
        sha = meta.get("git_sha")
        if meta.get("git_dirty") is True or not sha or sha.endswith("-dirty"):
            dirty.append(f"{name}: {sha}")
        if "partial" in meta:  # a benchmark cut short
            dirty.append(f"{name}: only {meta['partial']['rows']} rows")
    assert not dirty, "records written from a dirty tree: " + ", ".join(dirty)
