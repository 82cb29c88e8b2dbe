"""``mopa verify RESULT``: rerun what a result folder or a benchmark's JSON records,
from nothing, and print every number beside the rerun's."""

from __future__ import annotations

import argparse
import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mopa.cli.records import add_record_flags, verify_record_path
from mopa.errors import InvalidParameterError


def add_parser(
    commands: argparse._SubParsersAction,
    build_parser: Callable[[], argparse.ArgumentParser],
) -> None:
    """Register ``mopa verify``; ``build_parser`` builds the whole command line's
    parser (a benchmark's recorded command is parsed with it)."""
    parser = commands.add_parser(
        "verify",
        help="rerun a result folder's experiment or a benchmark and compare every "
        "number",
        description="RESULT is a folder written by mopa experiment / reproduce, or a "
        "benchmark's rows (NAME.json, with NAME.meta.json beside it) written by "
        "mopa bench --json. Rerun what it records from nothing into a scratch "
        "folder and print every number: committed, rerun, difference and verdict. "
        "For experiments integers and text must match exactly, floats to 1e-5 "
        "relative, and times are shown, not compared; for benchmarks what was "
        "measured must match exactly and every measurement within a factor 2.5 "
        "(mopa.report.compare says why). Exits 0 only when every number "
        "matches, 1 when one does not. The outcome is kept beside RESULT "
        "(verify.json in a result folder, NAME.verify.json beside a benchmark's "
        "rows) for the results pages (mopa docs render).",
    )
    parser.add_argument("folder", type=Path, metavar="RESULT")
    parser.add_argument(
        "--scratch",
        type=Path,
        help="folder for the rerun, kept afterwards (default: a temporary folder); "
        "a verify interrupted there resumes its finished stages",
    )
    parser.add_argument(
        "--failures-only",
        action="store_true",
        help="print only the numbers that do not match",
    )
    parser.add_argument(
        "--no-record",
        action="store_true",
        help="keep no record of the outcome beside RESULT",
    )
    add_record_flags(
        parser, lambda args: None if args.no_record else verify_record_path(args.folder)
    )
    parser.set_defaults(check=check, run=run, build_parser=build_parser)


def check(args: argparse.Namespace) -> None:
    """The paths' checks, before JAX starts."""
    if not args.folder.exists():
        raise InvalidParameterError(
            f"{args.folder} does not exist (a result folder or a benchmark's JSON)"
        )
    if args.scratch is not None and args.scratch.exists() and not args.scratch.is_dir():
        raise InvalidParameterError(f"--scratch {args.scratch} is not a folder")


def run(args: argparse.Namespace) -> int:
    from mopa.core.numerics import numerics_mode
    from mopa.core.runinfo import git_state
    from mopa.report.compare import recorded_benchmark
    from mopa.runs.verify import recorded_run

    recorded = (recorded_benchmark if args.folder.is_file() else recorded_run)(
        args.folder
    )
    if recorded.numerics != numerics_mode():
        return _rerun_in(recorded.numerics, args)
    args.git_state = git_state()  # the source that reruns, for the record
    if args.folder.is_file():
        return _verify_benchmark(args)
    return _verify_experiment(args)


def _rerun_in(mode: str, args: argparse.Namespace) -> int:
    """This verify in a new ``mopa`` process computing in ``mode``, the numerics
    the record was written in (a process's mode is fixed when it starts)."""
    import subprocess
    import sys

    command = args.argv[args.argv.index("verify") :]
    print(f"verify: {args.folder} was computed in {mode} numerics; rerunning in them")
    options = ["--no-compile-cache"] if args.no_compile_cache else []
    return subprocess.run(
        [sys.executable, "-m", "mopa", "--numerics", mode, *options, *command]
    ).returncode


def _verify_experiment(args: argparse.Namespace) -> int:
    from mopa.core.devices import use_quick_compile
    from mopa.runs.verify import recorded_run, verify_folder

    recorded = recorded_run(args.folder)
    if recorded.preset == "quick":
        use_quick_compile()  # as `mopa experiment --profile quick` compiled it
    print(
        f"verify {args.folder}: {recorded.command} (written at {recorded.git_sha})",
        flush=True,
    )
    report = verify_folder(
        args.folder, args.scratch, progress=lambda line: print(f"  {line}", flush=True)
    )
    return _print_report(recorded, report.comparisons, report.wall_s, args)


def _verify_benchmark(args: argparse.Namespace) -> int:
    import time

    from mopa.report.compare import compare_benchmark, recorded_benchmark

    recorded = recorded_benchmark(args.folder)
    rerun_args = args.build_parser().parse_args(recorded.argv)
    print(f"verify {args.folder}: {recorded.command} (written at {recorded.git_sha})")
    with tempfile.TemporaryDirectory(prefix="mopa-verify-") as temporary:
        scratch = Path(temporary) if args.scratch is None else args.scratch
        if scratch.resolve() == args.folder.resolve().parent:
            raise InvalidParameterError(
                f"--scratch {scratch} holds {args.folder}: the rerun must not "
                "overwrite the committed rows"
            )
        scratch.mkdir(parents=True, exist_ok=True)
        rerun_args.json = scratch / args.folder.name
        rerun_args.argv = recorded.argv
        start = time.perf_counter()
        rerun_args.run(rerun_args)
        wall_s = time.perf_counter() - start
        rerun = json.loads(rerun_args.json.read_text())
    comparisons = compare_benchmark(recorded.rows, rerun)
    return _print_report(recorded, comparisons, wall_s, args)


def _text(value) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    return "-" if value is None else json.dumps(value)


def _read_record(path) -> Any:
    """The verification record at ``path``, or ``None`` where there is none or it
    is not JSON (a broken record is replaced, its history lost with it)."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _print_report(recorded, comparisons, wall_s: float, args) -> int:
    """Print the figures side by side and the verdict, and keep the record of it
    beside what was checked (unless ``--no-record``); returns the exit code."""
    from mopa.core.files import write_json
    from mopa.core.runinfo import git_sha
    from mopa.report.compare import (
        NOT_COMPARED,
        same_machine_notes,
        verify_record,
        with_history,
    )

    for note in same_machine_notes(recorded):
        print(f"note: {note}")
    width = max((len(c.path) for c in comparisons), default=4)
    print(
        f"{'figure':<{width}}  {'committed':>12}  {'rerun':>12}  {'diff':>10}  verdict"
    )
    for c in comparisons:
        if args.failures_only and c.ok:
            continue
        diff = c.difference
        verdict = c.kind if c.kind in NOT_COMPARED else "ok"
        if not c.ok:
            verdict = c.kind.upper() if c.kind in ("missing", "extra") else "DIFFERS"
        numbers = all(isinstance(v, int | float) for v in (c.committed, c.rerun))
        if c.kind == "measurement" and numbers and c.committed:
            verdict += f" (x{c.rerun / c.committed:.2f})"
        print(
            f"{c.path:<{width}}  {_text(c.committed):>12}  {_text(c.rerun):>12}  "
            f"{'' if diff is None else f'{diff:+.3g}':>10}  {verdict}"
        )
    compared = [c for c in comparisons if c.kind not in NOT_COMPARED]
    failures = [c for c in comparisons if not c.ok]
    print(
        f"{len(compared) - len(failures)} of {len(compared)} figures match "
        f"({len(comparisons) - len(compared)} not compared); rerun {wall_s:.0f} s "
        f"at {git_sha()}"
    )
    if not args.no_record:
        path = verify_record_path(args.folder)
        record = verify_record(
            recorded, comparisons, wall_s, args.git_state, getattr(args, "argv", None)
        )
        write_json(path, with_history(record, _read_record(path)))
        print(f"recorded in {path}")
    if failures:
        print(f"FAILED: {len(failures)} figures differ, first {failures[0].path}")
        return 1
    print("verified")
    return 0
