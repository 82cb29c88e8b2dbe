"""Every number of two results side by side: what ``mopa verify`` prints, and the
tolerances it judges them by.

Tolerances. Integers, booleans and text must match exactly. Floats must agree to
:data:`FLOAT_RTOL` relative (plus :data:`FLOAT_ATOL` absolute, for values at zero).
XLA on the CPU is deterministic for a given program, set of flags, device count and
processor, so a rerun at the committed commit repeats every float bit for bit; what
may still move is the last bit or two of a float32 figure (about 1e-7 relative) when a
library summarises it in another order (a NumPy or SciPy reduction over a few
hundred values). 1e-5 relative is a hundred times that, and a thousand times
smaller than the least change a results table shows (three significant figures), so
a real change in behaviour never passes as rounding. Wall times, compile times and
CPU seconds (:func:`is_timing`) are shown but never compared: they measure the
machine, not the code. On another processor XLA may compile other instructions, and
a training run can carry a last-bit difference into different policies: meta.json
records the processor (:func:`mopa.core.runinfo.cpu_description`) and ``mopa
verify`` names a rerun on another one (:func:`same_machine_notes`). The commit a
results.json records of itself (a ``git_sha`` leaf, :func:`is_provenance`) is
shown, not compared either: a verification reruns a folder at a later commit by
design, and meta.json keeps the commit that wrote it.

Benchmarks (:func:`compare_benchmark`) are timed, so never compared exactly: each
measurement must be within a factor :data:`TIMING_BAND` of the committed one, as
the ratio rerun / committed. The machines are shared: load alone has moved a
benchmark on the 2-core machine by up to 1.9x (``bench_env_battalion`` against
``bench_env_battalion_quiet``, battalion at batch 4096), while what a benchmark
exists to catch, a hot path no longer vmapped or jitted, costs far more (the
vmapped game at batch 1024 takes 10x the steps per second of batch 1,
``bench_env``). 2.5 sits between the two. Ratios measured within one run (mopa
against JaxMARL, a planner against the bare game) move less than either time and
meet the same band.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mopa.core.numerics import MODES
from mopa.core.runinfo import GitState
from mopa.errors import InvalidParameterError

FLOAT_RTOL = 1e-5
"""Relative tolerance for floats (see the module docstring for why)."""


FLOAT_ATOL = 1e-8
"""Absolute tolerance for floats, for figures at or near zero."""


TIMING_BAND = 2.5
"""A benchmark's measurements must be within this factor of the committed ones
(see the module docstring)."""


_TIMING = re.compile(r"(wall|compile|cpu|timing|elapsed)\w*_s(_|$)")


def is_timing(path: str) -> bool:
    """Whether the figure at ``path`` (``a.b.0.c``) is a time measurement: a key
    such as ``wall_s``, ``compile_s``, ``cpu_s_per_outer_step_per_seed`` or one
    inside ``timing_s`` / ``stage_wall_s``."""
    return any(_TIMING.search(part) for part in path.split("."))


NOT_COMPARED = ("timing", "machine", "commit")
"""Comparison kinds shown beside the figures but never compared."""


PROVENANCE_KEYS = ("git_sha",)
"""Leaves that record which commit ran, not what it computed."""


def is_provenance(path: str) -> bool:
    """Whether the figure at ``path`` names the commit that ran (``git_sha``)."""
    return path.rsplit(".", 1)[-1] in PROVENANCE_KEYS


def flatten(tree: Any, prefix: str = "") -> dict[str, Any]:
    """Every leaf of a JSON tree by its dotted path (list items by index)."""
    if isinstance(tree, dict):
        items = ((str(key), value) for key, value in tree.items())
    elif isinstance(tree, list):
        items = ((str(i), value) for i, value in enumerate(tree))
    else:
        return {prefix: tree}
    leaves: dict[str, Any] = {}
    for key, value in items:
        leaves.update(flatten(value, f"{prefix}.{key}" if prefix else key))
    return leaves


@dataclasses.dataclass(frozen=True)
class Comparison:
    """One figure of ``results.json``, committed against rerun."""

    path: str
    committed: Any
    rerun: Any
    kind: str
    """``int``, ``float``, ``bool``, ``text``, ``null``, ``timing`` or ``commit``
    (shown, not compared), ``missing`` (not in the rerun) or ``extra`` (only in the
    rerun)."""
    ok: bool

    @property
    def difference(self) -> float | None:
        """``rerun - committed`` for numbers, else ``None``."""
        numbers = (self.committed, self.rerun)
        if all(isinstance(v, int | float) and not isinstance(v, bool) for v in numbers):
            return self.rerun - self.committed
        return None


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    return "text"


def _same(committed: Any, rerun: Any, rtol: float, atol: float) -> bool:
    if _kind(committed) == "float" or _kind(rerun) == "float":
        if _kind(committed) not in ("int", "float") or _kind(rerun) not in (
            "int",
            "float",
        ):
            return False
        if math.isnan(committed) or math.isnan(rerun):
            return math.isnan(committed) and math.isnan(rerun)
        return math.isclose(committed, rerun, rel_tol=rtol, abs_tol=atol)
    return _kind(committed) == _kind(rerun) and committed == rerun


def _compare(
    committed: Any, rerun: Any, rule: Callable[[str, Any, Any], tuple[str, bool]]
) -> list[Comparison]:
    """Leaves side by side, in the committed order (then the rerun's extra ones);
    ``rule(path, committed, rerun) -> (kind, ok)`` judges the leaves in both."""
    old, new = flatten(committed), flatten(rerun)
    rows = [
        Comparison(path, value, None, "missing", False)
        if path not in new
        else Comparison(path, value, new[path], *rule(path, value, new[path]))
        for path, value in old.items()
    ]
    rows += [
        Comparison(path, None, value, "extra", False)
        for path, value in new.items()
        if path not in old
    ]
    return rows


def compare_results(
    committed: Any,
    rerun: Any,
    rtol: float = FLOAT_RTOL,
    atol: float = FLOAT_ATOL,
) -> list[Comparison]:
    """Every leaf of two results trees side by side.

    Args:
        committed: the committed ``results.json``, parsed.
        rerun: the rerun's, parsed.
        rtol, atol: float tolerances.

    Returns:
        One :class:`Comparison` per leaf; timings and the commit that ran always
        count as ``ok``.
    """

    def rule(path: str, old: Any, new: Any) -> tuple[str, bool]:
        if is_timing(path):
            return "timing", True
        if is_provenance(path):
            return "commit", True
        return _kind(old), _same(old, new, rtol, atol)

    return _compare(committed, rerun, rule)


def compare_benchmark(
    committed: Any, rerun: Any, band: float = TIMING_BAND
) -> list[Comparison]:
    """Two benchmarks' rows side by side: what was measured (names, sizes, counts,
    flags) exactly, every measurement (a float: a time, a rate, a ratio of two
    timings) as the ratio rerun / committed, within ``[1 / band, band]``.

    Returns:
        One :class:`Comparison` per leaf; ``load_*`` (the machine's load average,
        recorded beside some rows) and the commit that ran are shown, not
        compared.
    """

    def rule(path: str, old: Any, new: Any) -> tuple[str, bool]:
        if path.rsplit(".", 1)[-1].startswith("load_"):
            return "machine", True
        if is_provenance(path):
            return "commit", True
        if _kind(old) != "float":
            return _kind(old), _same(old, new, 0.0, 0.0)
        if _kind(new) not in ("int", "float") or not math.isfinite(new):
            return "measurement", False
        if old == 0 or new == 0:
            return "measurement", old == new
        return "measurement", 1 / band <= new / old <= band

    return _compare(committed, rerun, rule)


def read_json_file(path: Path) -> Any:
    """The JSON in ``path``; a missing or unreadable file is an
    :class:`~mopa.errors.InvalidParameterError` naming it."""
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise InvalidParameterError(f"{path} is missing") from None
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise InvalidParameterError(f"{path} is not readable JSON ({error})") from None


def recorded_machine(
    meta: Any,
) -> tuple[str | None, int | None, dict[str, Any] | None, str]:
    """``(git_sha, device count, processor, numerics mode)`` as a meta.json
    records them."""
    meta = meta if isinstance(meta, dict) else {}
    machine = meta.get("machine") if isinstance(meta.get("machine"), dict) else {}
    devices, cpu = machine.get("devices"), machine.get("cpu")
    numerics = meta.get("numerics") if isinstance(meta.get("numerics"), dict) else {}
    mode = numerics.get("mode", "native")
    return (
        meta.get("git_sha"),
        len(devices) if isinstance(devices, list) else None,
        cpu if isinstance(cpu, dict) else None,
        mode if mode in MODES else "native",
    )


@dataclasses.dataclass(frozen=True)
class RecordedBenchmark:
    """What a benchmark's ``NAME.meta.json`` says produced ``NAME.json``."""

    rows: Any
    """The committed rows."""
    argv: list[str]
    """The command line after ``mopa`` (``bench KIND ... --json PATH``)."""
    git_sha: str | None
    devices: int | None
    cpu: dict[str, Any] | None
    numerics: str = "native"
    """The numerics mode it ran in (:mod:`mopa.core.numerics`; ``native`` in
    records written before the mode was kept, as they all computed)."""

    @property
    def command(self) -> str:
        return "mopa " + " ".join(self.argv)


def recorded_benchmark(path: str | Path) -> RecordedBenchmark:
    """Read a benchmark's rows and the command line its metadata records.

    Raises:
        InvalidParameterError: ``path`` or its ``.meta.json`` is missing or not
            JSON, or the metadata records no ``mopa bench`` command line (written
            before commands were recorded: rerun the command BENCHMARKS.md gives).
    """
    path = Path(path)
    rows = read_json_file(path)
    meta_path = path.with_name(path.stem + ".meta.json")
    meta = read_json_file(meta_path)
    config = meta.get("config") if isinstance(meta, dict) else None
    argv = config.get("argv") if isinstance(config, dict) else None
    if (
        not isinstance(argv, list)
        or not all(isinstance(word, str) for word in argv)
        or "bench" not in argv
    ):
        raise InvalidParameterError(
            f"{meta_path} records no mopa bench command line (written before "
            "commands were recorded): run the benchmark again with its command"
        )
    return RecordedBenchmark(rows, argv, *recorded_machine(meta))


def same_machine_notes(recorded: Any) -> list[str]:
    """Where this process differs from the machine that wrote ``recorded`` (a
    :class:`RecordedBenchmark` or a :class:`~mopa.runs.verify.RecordedRun`:
    its ``devices``, ``cpu`` and ``numerics``): another device count or processor
    (XLA may round differently on either; in portable numerics the processor's
    digits should not)."""
    import jax

    from mopa.core.runinfo import cpu_description

    notes = []
    if recorded.devices is not None and recorded.devices != len(jax.devices()):
        notes.append(
            f"written on {recorded.devices} devices, rerun on {len(jax.devices())}: "
            "float rounding may differ"
        )
    here = cpu_description()
    if recorded.cpu is not None and any(
        recorded.cpu.get(key) != here[key] for key in ("model", "isa")
    ):
        then = f"{recorded.cpu.get('model')} ({' '.join(recorded.cpu.get('isa', []))})"
        why = (
            "in portable numerics the digits should be the same (mopa.core.numerics)"
            if recorded.numerics == "portable"
            else "in native numerics XLA compiles for each processor, so float "
            "rounding may differ"
        )
        notes.append(
            f"written on {then}, rerun on {here['model']} ({' '.join(here['isa'])}): "
            f"{why}"
        )
    return notes


def verify_record(
    recorded: Any,
    comparisons: list[Comparison],
    wall_s: float,
    git: GitState | None = None,
    argv: list[str] | None = None,
) -> dict[str, Any]:
    """What a verification found, as ``mopa verify`` keeps it beside the figures
    it checked (``verify.json`` in a result folder, ``NAME.verify.json`` beside a
    benchmark's rows: :func:`mopa.cli.records.verify_record_path`) and the results
    pages show it
    (:func:`mopa.report.docs.verify_text`).

    Args:
        recorded: what the checked figures record of the run that wrote them (a
            :class:`RecordedBenchmark` or a
            :class:`~mopa.runs.verify.RecordedRun`).
        comparisons: every figure, committed against rerun.
        wall_s: the rerun's wall time in seconds.
        git: the git state of the source that ran,
            read when the rerun started (``None``: read now).
        argv: the ``mopa verify`` command line after ``mopa``, kept as
            ``verified_by``.

    Returns:
        ``{"command", "verified_by", "written_at", "git_sha", "git_dirty", "cpu",
        "devices", "numerics", "date", "compared", "matched", "not_compared",
        "passed", "first_failure", "failures", "rerun_wall_s"}``: ``command`` is the
        experiment or
        benchmark the figures record, ``verified_by`` the verification's own
        command line (``None`` where not given), ``written_at`` is the commit the
        figures were written at, ``git_sha`` / ``git_dirty`` / ``cpu`` /
        ``devices`` the commit and machine of the rerun, ``numerics`` the mode
        it computed in (the record's own: :mod:`mopa.core.numerics`), ``date``
        its end (UTC, ISO 8601), ``compared`` the figures compared (timings and
        the commit that ran are shown, not compared: ``not_compared``),
        ``matched`` those that match, ``failures`` the first
        :data:`MAX_LISTED_FAILURES` that differ.
    """
    import datetime

    import jax

    from mopa.core.numerics import numerics_mode
    from mopa.core.runinfo import cpu_description, git_state

    state = git_state() if git is None else git
    compared = [c for c in comparisons if c.kind not in NOT_COMPARED]
    failures = [c for c in comparisons if not c.ok]
    now = datetime.datetime.now(datetime.UTC)
    return {
        "command": recorded.command,
        "verified_by": None if argv is None else "mopa " + " ".join(argv),
        "written_at": recorded.git_sha,
        "git_sha": None if state is None else state.sha,
        "git_dirty": None if state is None else state.dirty,
        "cpu": cpu_description(),
        "devices": len(jax.devices()),
        "numerics": numerics_mode(),
        "date": now.isoformat(timespec="seconds"),
        "compared": len(compared),
        "matched": len(compared) - len(failures),
        "not_compared": len(comparisons) - len(compared),
        "passed": not failures,
        "first_failure": failures[0].path if failures else None,
        "failures": [c.path for c in failures[:MAX_LISTED_FAILURES]],
        "rerun_wall_s": wall_s,
    }


MAX_LISTED_FAILURES = 50
"""How many differing figures a verification record names (``failures``)."""


def with_history(record: dict[str, Any], previous: Any) -> dict[str, Any]:
    """``record`` with ``history``: every earlier verification of the same figures,
    oldest first, each as its own record was (without its history).

    The history is what shows on which processors a folder was checked (the
    reference's table in RESULTS.md): ``previous`` is the ``verify.json`` that
    ``record`` replaces, kept when it verified the same commit's figures
    (``written_at``), dropped when the folder was rewritten since.

    Args:
        record: the new verification (:func:`verify_record`).
        previous: the record it replaces (``None``, or anything not a record, when
            there was none).
    """
    history: list[Any] = []
    same = (
        isinstance(previous, dict)
        and previous.get("written_at") == record.get("written_at")
        and previous.get("command") == record.get("command")
    )
    if same:
        earlier = previous.get("history")
        history = [*(earlier if isinstance(earlier, list) else [])]
        history.append({k: v for k, v in previous.items() if k != "history"})
    return {**record, "history": history}
