"""Atomic writes and run metadata."""

import json
import subprocess

import pytest

from mopa.core.files import atomic_write, write_json
from mopa.core.runinfo import git_sha, package_versions, run_metadata


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
    assert git_sha(tmp_path) is None
    run = lambda *args: subprocess.run(  # noqa: E731
        ["git", *args], cwd=tmp_path, check=True, capture_output=True, text=True
    ).stdout.strip()
    run("init", "-q")
    (tmp_path / "f.txt").write_text("one\n")
    run("add", "f.txt")
    run("-c", "user.email=a@b", "-c", "user.name=n", "commit", "-qm", "first")
    head = run("rev-parse", "HEAD")
    assert git_sha(tmp_path) == head
    (tmp_path / "f.txt").write_text("two\n")
    assert git_sha(tmp_path) == f"{head}-dirty"


def test_run_metadata_records_config_and_versions():
    meta = run_metadata({"seed": 3})
    assert meta["config"] == {"seed": 3}
    versions = package_versions()
    assert versions["jax"] == meta["versions"]["jax"] and versions["jax"]
    assert versions["python"].startswith("3.")
    assert meta["machine"]["cpus"] >= 1 and meta["machine"]["devices"]
