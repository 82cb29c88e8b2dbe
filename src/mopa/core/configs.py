"""Configs saved as JSON next to their weights: rebuilding a frozen config
dataclass from its dict, with one clear error for a bad one."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from mopa.errors import InvalidParameterError


def config_from_kinds(data: Mapping[str, Any], kinds: Mapping[str, type], noun: str):
    """Rebuild a config from a dict holding its ``kind`` and its fields (lists
    become tuples, as the frozen configs keep them).

    Args:
        data: the dict (a config's ``to_dict()``).
        kinds: ``{kind: config class}``.
        noun: what the configs are, for the error (e.g. ``"encoder"``).

    Raises:
        InvalidParameterError: unknown kind or field, or an invalid value.
    """
    data = dict(data)
    kind = data.pop("kind", None)
    if kind not in kinds:
        raise InvalidParameterError(
            f"{noun} kind must be one of {sorted(kinds)}, got {kind!r}"
        )
    cls = kinds[kind]
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - names)
    if unknown:
        raise InvalidParameterError(f"unknown {cls.__name__} field {unknown[0]!r}")
    frozen = {k: tuple(v) if isinstance(v, list) else v for k, v in data.items()}
    return cls(**frozen)
