"""``mopa``: the command-line entry point.

Bad input never shows a traceback: every :class:`~mopa.errors.MopaError` becomes
one line on stderr and exit code 2, arguments argparse cannot parse included. A
command may set ``check`` (a function of the parsed arguments) beside ``run``: it
runs before JAX is set up, as does the refusal to write records from a dirty tree
(:func:`~mopa.cli.records.check_record_output`), so arguments that can be checked
cheaply fail at once.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import NoReturn

from mopa.cli import (
    bench,
    cotrain,
    docs,
    envs,
    experiment,
    league,
    lemol,
    pola,
    reproduce,
    tournament,
    train,
    verify,
)
from mopa.cli.records import check_record_output
from mopa.core.numerics import MODES, numerics_mode
from mopa.errors import MopaError, UsageError


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are :class:`~mopa.errors.UsageError`, so
    they print as one line like every other bad input (sub-command parsers are
    made with the same class)."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see {self.prog} --help)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="mopa",
        description="Model opponents, plan adversarially: games, opponent models "
        "and planners for adversarial co-training in JAX.",
    )
    parser.add_argument(
        "--no-compile-cache",
        action="store_true",
        help="compile every program afresh: neither read nor write the persistent "
        "compilation cache (also MOPA_COMPILE_CACHE=0; MOPA_COMPILE_CACHE_DIR "
        "moves it from ~/.cache/mopa/jax)",
    )
    parser.add_argument(
        "--numerics",
        choices=MODES,
        help="portable (the default): the same digits on every x86-64 processor; "
        "native: the fastest code for this processor (mopa.core.numerics). Chosen "
        "when mopa starts; also MOPA_NUMERICS",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    bench.add_parser(commands)
    envs.add_parsers(commands)
    train.add_parser(commands)
    experiment.add_parser(commands)
    reproduce.add_parser(commands)
    cotrain.add_parser(commands)
    pola.add_parsers(commands)
    lemol.add_parser(commands)
    tournament.add_parser(commands)
    league.add_parser(commands)
    verify.add_parser(commands)
    docs.add_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except UsageError as error:
        print(f"mopa: error: {error}", file=sys.stderr)
        return 2
    args.argv = list(sys.argv[1:] if argv is None else argv)  # what records keep
    from mopa.core.compile_cache import use_compile_cache
    from mopa.core.devices import use_cpu_devices, use_quick_compile

    try:
        if args.numerics is not None and args.numerics != numerics_mode():
            raise UsageError(
                f"--numerics {args.numerics}: this process already runs "
                f"{numerics_mode()} numerics; the mode is chosen when the mopa "
                "command starts (mopa --numerics MODE COMMAND ...)"
            )
        if hasattr(args, "check"):
            args.check(args)  # a command's own checks, before JAX starts
        check_record_output(args)
        use_compile_cache(enabled=not args.no_compile_cache)
        use_cpu_devices()
        if getattr(args, "profile", None) == "quick":
            use_quick_compile()  # a quick profile's time is mostly compilation
        return args.run(args) or 0
    except MopaError as error:
        print(f"mopa: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("mopa: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
