"""Atomic file writes: a file is either left as it was or replaced whole.

Used by every place that saves results (the CLI, reports, checkpoints), so a crash
or a full disk never leaves a half-written file where a good one stood.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any


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
