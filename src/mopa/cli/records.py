"""The repository's record folders (``results/``, ``benchmarks/``) from the CLI:
every command that writes figures declares its output with
:func:`add_record_flags`, and :func:`check_record_output` refuses, before any work,
to write one of those folders from a dirty tree unless ``--allow-dirty`` is given.
A benchmark writes its rows with :func:`write_benchmark` (or, row by row,
:class:`BenchmarkRecord`), which records beside them the command line that
produced them, so ``mopa verify`` can run it again."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mopa.core.files import write_json
from mopa.core.runinfo import check_clean_for, run_metadata


def add_record_flags(
    parser: argparse.ArgumentParser,
    output: Callable[[argparse.Namespace], Path | None],
) -> None:
    """Give ``parser`` the ``--allow-dirty`` flag and declare where it writes.

    Args:
        parser: a command that writes results or benchmark figures.
        output: ``output(args)`` is the folder or file the command will write
            (``None``: it writes none).
    """
    parser.add_argument(
        "--allow-dirty",
        action="store_true",
        help="write into the repository's results/ or benchmarks/ even with "
        "uncommitted changes (meta.json then records the dirty tree)",
    )
    parser.set_defaults(record_output=output)


def check_record_output(args: argparse.Namespace) -> None:
    """Refuse a command that would write the repository's record folders from a
    dirty tree (see :func:`mopa.core.runinfo.check_clean_for`)."""
    output = getattr(args, "record_output", None)
    path = None if output is None else output(args)
    if path is not None:
        check_clean_for(path, args.allow_dirty)


def benchmark_meta_path(rows_path: Path) -> Path:
    """Where a benchmark's metadata lies beside its rows (``NAME.meta.json``)."""
    return rows_path.with_name(rows_path.stem + ".meta.json")


def verify_record_path(checked: Path) -> Path:
    """Where ``mopa verify`` keeps the record of verifying ``checked``
    (:func:`mopa.runs.verify.verify_record`): ``verify.json`` inside a
    result folder, ``NAME.verify.json`` beside a benchmark's ``NAME.json``."""
    if checked.is_dir():
        return checked / "verify.json"
    return checked.with_name(f"{checked.stem}.verify.json")


def write_benchmark(
    args: argparse.Namespace, rows: Any, config: dict[str, Any]
) -> None:
    """Write a benchmark's ``rows`` to ``args.json`` and its metadata beside them:
    ``config`` plus ``command`` (``bench KIND``) and ``argv``, the command line
    after ``mopa`` (set by :func:`mopa.cli.main.main`). The git state is read before
    anything is written: rewriting a tracked benchmark file must not make the
    record call its own tree dirty."""
    BenchmarkRecord(args, config).finish(rows)


class BenchmarkRecord:
    """A benchmark's rows written as each is measured, then once more at the end.

    A run cut short (a time limit on a lent machine, a killed process) keeps the
    rows it measured; until :meth:`finish`, the metadata beside them says how many
    there are (``"partial": {"rows": n}``), so a cut-short file is never taken for
    a whole one. The metadata, git state included, is read once, when the record
    is made: make it before the first measurement, so it records the source that
    ran and the rows rewriting a tracked file cannot make it call its tree dirty.

    Args:
        args: the command's arguments (``json``: where the rows go, ``None`` for
            nowhere; ``bench``, ``argv``: as :func:`write_benchmark` reads them).
        config: the benchmark's settings, recorded in the metadata.
    """

    def __init__(self, args: argparse.Namespace, config: dict[str, Any]):
        self.path: Path | None = args.json
        self.rows: list[Any] = []
        self._meta = None
        if self.path is not None:
            config = {"command": f"bench {args.bench}", "argv": args.argv, **config}
            self._meta = run_metadata(config)

    def add(self, row: Any) -> None:
        """Append one measured row and write every row so far."""
        self.rows.append(row)
        if self._meta is not None:
            self._write(self.rows, {**self._meta, "partial": {"rows": len(self.rows)}})

    def finish(self, rows: Any = None, **config: Any) -> None:
        """Write the whole benchmark: ``rows`` (default: the rows added), and the
        metadata with ``config`` (settings known only at the end) added."""
        if self._meta is None:
            return
        meta = {**self._meta, "config": {**self._meta["config"], **config}}
        self._write(self.rows if rows is None else rows, meta)
        print(f"wrote {self.path}")

    def _write(self, rows: Any, meta: dict[str, Any]) -> None:
        write_json(self.path, rows)
        write_json(benchmark_meta_path(self.path), meta)


def limit_columns(row: dict[str, Any]) -> str:
    """A benchmark row's matmul shape, matmul GFLOP/s and fraction as printed
    columns (``-`` where the row has no layer; :func:`mopa.bench.compute.
    matmul_limit`'s fields)."""
    shape, limit, fraction = "-", "-", "-"
    if row["matmul_shape"] is not None:
        shape = "x".join(map(str, row["matmul_shape"]))
        limit = f"{row['matmul_gflop_s']:.1f}"
        fraction = f"{row['matmul_fraction']:.3f}"
    return f"{shape:>16s} {limit:>10s} {fraction:>8s}"
