"""mopa's exception types.

Every error a user can cause by bad input derives from :class:`MopaError`, so the
CLI can turn it into one clear line and exit code 2 instead of a traceback.
"""

from __future__ import annotations


class MopaError(Exception):
    """Base class for errors caused by bad input to mopa."""


class UnknownNameError(MopaError, ValueError):
    """A name (environment, algorithm, preset, ...) that mopa does not know."""


class InvalidParameterError(MopaError, ValueError):
    """A parameter or config field with an invalid value; the message names it."""


class InvalidActionError(MopaError, ValueError):
    """Actions of the wrong shape, dtype or range were passed to an environment."""


class CheckpointError(MopaError, ValueError):
    """A checkpoint or run folder that is missing, corrupt, or does not fit."""


class UsageError(MopaError, ValueError):
    """Command-line arguments that do not parse (an unknown flag, a missing one, a
    word where a number is expected)."""


class PathError(MopaError, ValueError):
    """A path of the wrong kind (a file for a folder), holding something it should
    not (a corrupt league database), or where nothing can be written."""


class MissingPathError(PathError, FileNotFoundError):
    """A file or folder that should exist and does not."""
