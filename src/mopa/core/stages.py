"""Stages of an experiment, each done once: a stage whose config is unchanged is
reused when the experiment runs again, and redone when its config changed.

A stage is a named piece of work (train a team, build a dataset, play a
tournament) writing into its own folder ``OUT/stages/NAME`` and returning a small
JSON-able result. The folder holds ``stage.json`` once the stage has finished:
its config, a fingerprint of that config, the result and the wall time. A stage
interrupted half-way keeps its folder, so work that can resume (``mopa train``
runs) resumes there; a stage whose config changed starts from an empty folder::

    stages = Stages(out / "stages", progress=print)
    run = stages.run("train_prey", config.to_dict(), lambda folder: train(folder))

Stages that do not read each other's results can run at the same time
(:meth:`Stages.run_together`, one thread each): JAX releases the interpreter while
XLA computes, so a stage that leaves cores idle (a tree search over one game after
another, compilation) lends them to the other. Each stage computes the same
numbers as when run alone. Stages run together hold their memory at the same
time; ``MOPA_STAGES_TOGETHER=0`` runs them one after another instead. Their
programs share XLA's CPU thread pool, which a batched ``jnp.linalg`` solve can
hang (:mod:`mopa.core.linalg`): a stage solves linear systems through
:func:`mopa.core.linalg.solve`.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from mopa.core.checks import switched_off
from mopa.core.compile_cache import bound_compiled_programs
from mopa.core.files import write_json

STAGES_TOGETHER_ENV = "MOPA_STAGES_TOGETHER"
"""Set to ``0`` (or ``false``, ``no``, ``off``) to have :meth:`Stages.run_together`
run its stages one after another (less memory at once; the same results)."""

STAGE_FILE = "stage.json"
STARTED_FILE = "stage_config.json"


def fingerprint(config: Any) -> str:
    """A stable hash of a JSON-able config (key order does not matter)."""
    text = json.dumps(config, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def file_fingerprint(path: str | Path) -> dict[str, str]:
    """``{"path", "sha256"}`` of a file an earlier stage wrote. Put it, not the bare
    path, in the config of a stage that reads the file: an earlier stage that reruns
    rewrites the same path, and only the content tells the later stage to rerun."""
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return {"path": str(path), "sha256": digest.hexdigest()}


class Stages:
    """Runs an experiment's stages, reusing the finished ones.

    Args:
        root: folder holding one sub-folder per stage; ``None`` keeps stages in a
            temporary folder removed with this object (nothing is reused).
        progress: called with one line when a stage starts, is reused or ends.
    """

    def __init__(
        self,
        root: str | Path | None,
        progress: Callable[[str], None] | None = None,
    ):
        self._temporary = None
        if root is None:
            self._temporary = tempfile.TemporaryDirectory(prefix="mopa-stages-")
            root = self._temporary.name
        self.root = Path(root)
        self.progress = progress or (lambda line: None)
        self.timing_s: dict[str, float] = {}
        """Wall seconds of every stage run or reused so far (as first measured)."""
        self.reused: list[str] = []
        """Names of the stages reused rather than run."""

    def folder(self, name: str) -> Path:
        """The folder of stage ``name``."""
        if not name or "/" in name or name.startswith("."):
            raise ValueError(f"bad stage name {name!r}")
        return self.root / name

    def run(
        self, name: str, config: Any, fn: Callable[[Path], Any], *, force: bool = False
    ) -> Any:
        """Result of stage ``name``: stored if it finished with this ``config``,
        otherwise ``fn(folder)``, stored.

        Args:
            config: JSON-able description of everything the stage's result
                depends on (including the results of earlier stages it reads, and
                :func:`file_fingerprint` of the files it reads from them).
            fn: does the work in ``folder`` and returns a JSON-able result.
            force: redo the stage even if it finished with this config.
        """
        result, wall, reused = self._run(name, config, fn, force)
        self._record(name, wall, reused)
        return result

    def run_together(
        self,
        stages: Sequence[tuple[str, Any, Callable[[Path], Any]]],
        *,
        force: bool = False,
    ) -> list[Any]:
        """The results of independent stages ``[(name, config, fn), ...]``, each
        as :meth:`run` gives it, with the stages that are not stored yet running
        at the same time, one thread each.

        No stage may read another's result or files. Each stage's wall time is
        its own, so the times of stages run together overlap. If stages fail,
        the others still finish and are stored, and the first failure (in the
        order given) is raised. With ``MOPA_STAGES_TOGETHER=0`` the stages run one
        after another, as :meth:`run` runs them, stopping at the first failure.
        """
        names = [name for name, _, _ in stages]
        if len(set(names)) != len(names):
            raise ValueError(f"run_together: stage names repeat: {names}")
        if switched_off(STAGES_TOGETHER_ENV):
            return [self.run(*stage, force=force) for stage in stages]
        outcomes: list[Any] = [None] * len(stages)

        def work(i: int, name: str, config: Any, fn: Callable[[Path], Any]) -> None:
            try:
                outcomes[i] = (self._run(name, config, fn, force), None)
            except BaseException as error:  # raised again in the calling thread
                outcomes[i] = (None, error)

        # Daemon threads: an interrupted process exits without waiting for them
        # (a stage that did not finish has no stage.json and runs again). The
        # stages' programs run at the same time and share XLA's CPU thread pool:
        # safe on any device count because XLA's own operations never wait on a
        # pool thread and mopa's stages issue no batched LAPACK kernel, which does
        # (mopa.core.linalg; tests/core/test_stages.py runs stages together
        # 20 times on 1 and 2 devices).
        threads = [
            threading.Thread(target=work, args=(i, *stage), daemon=True)
            for i, stage in enumerate(stages)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        results = []
        for name, (done, error) in zip(names, outcomes, strict=True):
            if error is not None:
                raise error
            result, wall, reused = done
            self._record(name, wall, reused)
            results.append(result)
        return results

    def _record(self, name: str, wall: float, reused: bool) -> None:
        self.timing_s[name] = wall
        if reused:
            self.reused.append(name)
        else:  # a long run's programs can outgrow the kernel's mapping limit
            bound_compiled_programs()

    def _run(
        self, name: str, config: Any, fn: Callable[[Path], Any], force: bool
    ) -> tuple[Any, float, bool]:
        """``(result, wall seconds, reused)`` of :meth:`run`, recording nothing."""
        folder = self.folder(name)
        key = fingerprint(config)
        done = _read(folder / STAGE_FILE)
        if not force and done is not None and done.get("fingerprint") == key:
            self.progress(f"[{name}] reused (finished earlier with this config)")
            return done["result"], float(done.get("wall_s", 0.0)), True
        started = _read(folder / STARTED_FILE)
        if folder.exists() and (
            force
            or done is not None
            or started is None
            or started["fingerprint"] != key
        ):
            shutil.rmtree(folder)
        folder.mkdir(parents=True, exist_ok=True)
        write_json(folder / STARTED_FILE, {"fingerprint": key, "config": config})
        self.progress(f"[{name}] running")
        tick = time.perf_counter()
        result = fn(folder)
        wall = time.perf_counter() - tick
        write_json(
            folder / STAGE_FILE,
            {"fingerprint": key, "config": config, "result": result, "wall_s": wall},
        )
        self.progress(f"[{name}] done in {wall:.1f} s")
        return result, wall, False


def _read(path: Path) -> dict | None:
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and "fingerprint" in data else None
