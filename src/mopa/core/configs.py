"""Configs saved as JSON next to their weights: rebuilding a frozen config
dataclass from its dict, with one clear error for a bad one."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping
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
    return cls(**{k: frozen_value(v) for k, v in data.items()})


def frozen_value(value: Any) -> Any:
    """A JSON value as a frozen config keeps it: a list becomes a tuple."""
    return tuple(value) if isinstance(value, list) else value


def replace_from_json(config: Any, changes: Iterable[tuple[str, str]]) -> Any:
    """``config`` with fields changed, each value given as JSON text (``("eval_
    episodes", "20")``, ``("out_of_family", '["evader"]')``).

    Raises:
        InvalidParameterError: a field the config lacks, text that is not JSON, or
            a value the config refuses.
    """
    names = {f.name for f in dataclasses.fields(config)}
    values = {}
    for field, text in changes:
        if field not in names:
            raise InvalidParameterError(
                f"{field!r} is not a field of {type(config).__name__}"
            )
        try:
            values[field] = frozen_value(json.loads(text))
        except ValueError:
            raise InvalidParameterError(
                f"{field}: the value must be JSON, got {text!r}"
            ) from None
    return dataclasses.replace(config, **values)
