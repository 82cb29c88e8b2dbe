"""A small git checkout made for a test: the provenance rules read real git."""

import subprocess
from pathlib import Path


def git(folder: Path, *args: str) -> str:
    """Run git in ``folder``; its standard output, stripped."""
    return subprocess.run(
        ["git", *args], cwd=folder, check=True, capture_output=True, text=True
    ).stdout.strip()


def make_checkout(folder: Path) -> str:
    """A repository in ``folder`` with one committed file, ``f.txt``; its commit."""
    folder.mkdir(parents=True, exist_ok=True)
    git(folder, "init", "-q")
    (folder / "f.txt").write_text("one\n")
    git(folder, "add", "f.txt")
    git(folder, "-c", "user.email=a@b", "-c", "user.name=n", "commit", "-qm", "first")
    return git(folder, "rev-parse", "HEAD")
