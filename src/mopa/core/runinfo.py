"""Run metadata written beside every result: package versions and the git SHA."""

from __future__ import annotations

import importlib.metadata
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

PACKAGES = ("mopa", "jax", "jaxlib", "flax", "optax", "chex", "numpy", "jaxmarl")


def package_versions(packages: tuple[str, ...] = PACKAGES) -> dict[str, str | None]:
    """Installed version of each package (``None`` where it is not installed)."""
    versions: dict[str, str | None] = {}
    for name in packages:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    versions["python"] = sys.version.split()[0]
    return versions


def git_sha(directory: str | Path | None = None) -> str | None:
    """The commit checked out where mopa's source lives (with ``-dirty`` when the
    work tree has uncommitted changes), or ``None`` outside a git checkout."""
    directory = Path(directory) if directory else Path(__file__).resolve().parent

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args],
            cwd=directory,
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        ).stdout.strip()

    try:
        sha = git("rev-parse", "HEAD")
        dirty = git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.SubprocessError):
        return None
    return f"{sha}-dirty" if dirty else sha


def run_metadata(config: dict[str, Any]) -> dict[str, Any]:
    """``{"config", "versions", "git_sha", "platform", "devices"}`` for a run."""
    import jax

    return {
        "config": config,
        "versions": package_versions(),
        "git_sha": git_sha(),
        "platform": platform.platform(),
        "machine": {"cpus": _cpu_count(), "devices": [str(d) for d in jax.devices()]},
    }


def _cpu_count() -> int | None:
    import os

    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count()
