"""``mopa docs render``: write the results pages (``docs/results/*.md``) and
RESULTS.md's summary from the committed result folders (``mopa.report.docs``)."""

from __future__ import annotations

import argparse
from pathlib import Path

from mopa.errors import InvalidParameterError


def add_parser(commands: argparse._SubParsersAction) -> None:
    docs = commands.add_parser(
        "docs",
        help="render the results pages and RESULTS.md's summary from results/",
        description="Render every results page of the documentation site "
        "(docs/results/*.md) and RESULTS.md's summary table from the committed "
        "result folders (results.json, meta.json, config.json, verify.json) and "
        "the claims of mopa.report.claims. --check writes nothing and exits 1 when "
        "a committed page differs from what it would write.",
    )
    actions = docs.add_subparsers(dest="action", metavar="ACTION", required=True)
    render = actions.add_parser("render", help="write the generated pages")
    render.add_argument(
        "--root",
        type=Path,
        default=Path("."),
        help="the repository's root (default: the current folder)",
    )
    render.add_argument(
        "--check",
        dest="check_only",
        action="store_true",
        help="write nothing; list the pages that differ and exit 1 if any do",
    )
    render.set_defaults(check=check, run=run)


def check(args: argparse.Namespace) -> None:
    """The root's checks, before JAX starts."""
    if not (args.root / "results").is_dir():
        raise InvalidParameterError(
            f"{args.root} has no results/ folder (run from the repository's root, "
            "or pass --root)"
        )


def run(args: argparse.Namespace) -> int:
    from mopa.report.docs import stale_files, write_all

    if args.check_only:
        stale = stale_files(args.root)
        for path in stale:
            print(f"differs: {path}")
        print(f"{len(stale)} generated files differ from their folders")
        return 1 if stale else 0
    for path in write_all(args.root):
        print(f"wrote {path}")
    return 0
