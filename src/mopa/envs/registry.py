"""The game registry: ``make(name, **overrides)`` builds any registered game.

Each registered game is a factory ``(name, **overrides) -> (env, params)``. Unknown
names and invalid fields raise errors that name the culprit.
"""

from __future__ import annotations

import difflib
import math
import typing
from collections.abc import Callable
from typing import Any

from mopa.core.checks import (
    check_fits_32_bits,
    check_fits_memory,
    check_numeric_array,
    check_value,
    field_kinds,
)
from mopa.envs.base import Env
from mopa.errors import InvalidParameterError, UnknownNameError

EnvFactory = Callable[..., tuple[Env, Any]]

_REGISTRY: dict[str, EnvFactory] = {}


def register(name: str, factory: EnvFactory) -> None:
    """Register ``factory(name, **overrides) -> (env, params)`` under ``name``."""
    if name in _REGISTRY:
        raise ValueError(f"an environment called {name!r} is already registered")
    _REGISTRY[name] = factory


def registered_envs() -> list[str]:
    """Names of every registered game, sorted."""
    return sorted(_REGISTRY)


def make(name: str, **overrides: Any) -> tuple[Env, Any]:
    """Build the registered game ``name``.

    Args:
        name: a name from :func:`registered_envs`, or ``"jaxmarl:<id>"`` for any
            JaxMARL environment (see :mod:`mopa.envs.jaxmarl_adapter`).
        **overrides: structure fields (team sizes, counts) or parameter fields.

    Returns:
        ``(env, params)``: the game and its parameter pytree (defaults plus
        ``overrides``), validated.

    Raises:
        UnknownNameError: ``name`` is not registered.
        InvalidParameterError: an override is unknown or has an invalid value.
    """
    if name.startswith("jaxmarl:"):
        from mopa.envs.jaxmarl_adapter import make_jaxmarl  # imports JaxMARL lazily

        env, params = make_jaxmarl(name, **overrides)
    elif name not in _REGISTRY:
        close = difflib.get_close_matches(name, _REGISTRY, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise UnknownNameError(
            f"unknown environment {name!r}{hint}; "
            f"registered: {', '.join(registered_envs())}"
        )
    else:
        env, params = _REGISTRY[name](name, **overrides)
    observation_bytes = 4 * sum(
        size * math.prod(env.observation_space(t).shape)
        for t, size in enumerate(env.team_sizes)
    )
    check_fits_memory(name, observation_bytes, "one step's observations")
    return env, params


def split_overrides(
    name: str, structure_cls: type, params_cls: type, overrides: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Split ``overrides`` into structure fields and parameter fields.

    Raises:
        InvalidParameterError: an override names neither, or gets a value of the
            wrong type (a string for a number, a number for a flag), NaN or an
            infinity (:func:`mopa.core.checks.check_value`; parameters may be
            arrays, to be vmapped).
    """
    structure_fields = {
        key: kind
        for key, kind in field_kinds(structure_cls).items()
        if key not in ("name", "base_params")
    }
    param_fields = field_kinds(params_cls)
    structure, params = {}, {}
    for key, value in overrides.items():
        if key in structure_fields:
            structure[key] = _checked(name, key, value, structure_fields[key], False)
        elif key in param_fields:
            params[key] = _checked(name, key, value, param_fields[key], True)
        else:
            known = sorted(set(param_fields) | set(structure_fields))
            close = difflib.get_close_matches(key, known, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise InvalidParameterError(f"{name}: unknown parameter {key!r}{hint}")
    return structure, params


def _checked(name: str, key: str, value: Any, kind: Any, arrays: bool) -> Any:
    """``value`` of the field ``key`` checked against its annotation ``kind``.

    Parameters become 32-bit arrays, so their numbers must fit one; array fields
    (``obstacle_pos``) must hold finite numbers.
    """
    label = f"{name}: {'parameter ' if arrays else ''}{key}"
    if kind in (int, float, bool) or typing.get_origin(kind) is not None:
        value = check_value(label, value, kind, arrays=arrays)
    elif arrays and kind is not Any:
        value = check_numeric_array(label, value)
    if arrays:
        check_fits_32_bits(label, value)
    return value
