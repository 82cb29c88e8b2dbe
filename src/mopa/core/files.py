"""Atomic file writes: a file is either left as it was or replaced whole; and the
check, before any work, that an output path can be written.

Used by every place that saves results (the CLI, reports, checkpoints), so a crash
or a full disk never leaves a half-written file where a good one stood, and a
command whose output could not be written fails before it creates anything.
"""

from __future__ import annotations

import json
import os
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from mopa.errors import PathError


def atomic_write(
    path: str | os.PathLike, write_fn: Callable[[IO[bytes]], None]
) -> Path:
    """Call ``write_fn(file)`` on a temporary file beside ``path``, then move it over
    ``path``.

    The temporary file is flushed and synced before ``os.replace``; on any error it
    is removed and ``path`` is untouched. Parent directories are created.

    Returns:
        ``path`` as a :class:`~pathlib.Path`.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        with open(temporary, "xb") as file:
            write_fn(file)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    return path


def write_json(path: str | os.PathLike, data: Any) -> Path:
    """Write ``data`` as indented JSON, atomically."""
    text = json.dumps(data, indent=2, sort_keys=False) + "\n"
    return atomic_write(path, lambda file: file.write(text.encode()))


def check_output_folder(path: str | os.PathLike, flag: str) -> Path:
    """Refuse a folder that a command could not create or write into: ``path``
    must be a folder or absent, and the nearest folder that exists (``path`` or
    an ancestor) writable. Nothing is created.

    Args:
        path: the output folder.
        flag: how the command line names it (``--out``), for the error.

    Raises:
        PathError: naming ``path`` and what is wrong.
    """
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise PathError(f"{flag} {path} is a file, not a folder")
    _check_writable_below(path, flag)
    return path


def check_output_file(path: str | os.PathLike, flag: str) -> Path:
    """Refuse a file that a command could not write: ``path`` must not be a
    folder, and the nearest folder that exists above it must be writable (the file
    is replaced atomically from beside it). Nothing is created.

    Raises:
        PathError: naming ``path`` and what is wrong.
    """
    path = Path(path)
    if path.is_dir():
        raise PathError(f"{flag} {path} is a folder, not a file")
    _check_writable_below(path.parent, flag, path)
    return path


def _check_writable_below(folder: Path, flag: str, target: Path | None = None) -> None:
    """Raise unless the nearest existing folder at or above ``folder`` takes new
    entries. Permission bits do not tell (root ignores them, and some file systems
    such as ``/proc`` refuse every new entry), so a folder is made there and
    removed again."""
    target = folder if target is None else target
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise PathError(f"{flag} {target}: {existing} is a file, not a folder")
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".mopa-check-", dir=existing))
    except OSError as error:
        raise PathError(
            f"{flag} {target}: cannot write in {existing} ({error.strerror})"
        ) from None
