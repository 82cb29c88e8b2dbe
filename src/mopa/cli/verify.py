"""``mopa verify RESULT_DIR``: rerun the experiment a result folder records, from
nothing, and print every number of its ``results.json`` beside the rerun's."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from mopa.errors import InvalidParameterError


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "verify",
        help="rerun a result folder's experiment and compare every number",
        description="Read the experiment, profile and seeds recorded in "
        "RESULT_DIR/config.json, rerun it from nothing into a scratch folder and "
        "print every number of results.json: committed, rerun, difference and "
        "verdict. Integers and text must match exactly, floats to 1e-5 relative; "
        "times are shown, not compared. Exits 0 only when every number matches, "
        "1 when one does not.",
    )
    parser.add_argument("folder", type=Path, metavar="RESULT_DIR")
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
    parser.set_defaults(run=run)


def _text(value) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    return "-" if value is None else json.dumps(value)


def run(args: argparse.Namespace) -> int:
    from mopa.core.devices import use_quick_compile
    from mopa.core.runinfo import git_sha
    from mopa.experiments.verify import recorded_run, verify_folder

    if args.scratch is not None and args.scratch.exists() and not args.scratch.is_dir():
        raise InvalidParameterError(f"--scratch {args.scratch} is not a folder")
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
    import jax

    if recorded.devices is not None and recorded.devices != len(jax.devices()):
        print(
            f"note: written on {recorded.devices} devices, rerun on "
            f"{len(jax.devices())}: float rounding may differ"
        )
    width = max((len(c.path) for c in report.comparisons), default=4)
    print(
        f"{'figure':<{width}}  {'committed':>12}  {'rerun':>12}  {'diff':>10}  verdict"
    )
    for c in report.comparisons:
        if args.failures_only and c.ok:
            continue
        diff = c.difference
        verdict = "timing" if c.kind == "timing" else ("ok" if c.ok else "DIFFERS")
        if c.kind in ("missing", "extra"):
            verdict = c.kind.upper()
        print(
            f"{c.path:<{width}}  {_text(c.committed):>12}  {_text(c.rerun):>12}  "
            f"{'' if diff is None else f'{diff:+.3g}':>10}  {verdict}"
        )
    compared = [c for c in report.comparisons if c.kind != "timing"]
    print(
        f"{len(compared) - len(report.failures)} of {len(compared)} figures match "
        f"({len(report.comparisons) - len(compared)} timings not compared); rerun "
        f"{report.wall_s:.0f} s at {git_sha()}"
    )
    if not report.ok:
        first = report.failures[0].path
        print(f"FAILED: {len(report.failures)} figures differ, first {first}")
        return 1
    print("verified")
    return 0
