"""The game registry: ``make(name, **overrides)`` builds any registered game.

Each registered game is a factory ``(name, **overrides) -> (env, params)``. Unknown
names and invalid fields raise errors that name the culprit.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Callable
from typing import Any

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

        return make_jaxmarl(name, **overrides)
    if name not in _REGISTRY:
        close = difflib.get_close_matches(name, _REGISTRY, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise UnknownNameError(
            f"unknown environment {name!r}{hint}; "
            f"registered: {', '.join(registered_envs())}"
        )
    return _REGISTRY[name](name, **overrides)


def split_overrides(
    name: str, structure_cls: type, params_cls: type, overrides: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Split ``overrides`` into structure fields and parameter fields.

    Raises:
        InvalidParameterError: an override names neither, or a structure field gets
            a value of the wrong type.
    """
    structure_fields = {
        f.name: f
        for f in dataclasses.fields(structure_cls)
        if f.init and f.name not in ("name", "base_params")
    }
    param_fields = {f.name for f in dataclasses.fields(params_cls)}
    structure, params = {}, {}
    for key, value in overrides.items():
        if key in structure_fields:
            expected = type(structure_fields[key].default)
            if expected in (int, bool) and not (
                isinstance(value, int)
                and (expected is not bool or isinstance(value, bool))
            ):
                raise InvalidParameterError(
                    f"{name}: {key} must be {expected.__name__}, got {value!r}"
                )
            structure[key] = value
        elif key in param_fields:
            params[key] = value
        else:
            known = sorted(param_fields | set(structure_fields))
            close = difflib.get_close_matches(key, known, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise InvalidParameterError(f"{name}: unknown parameter {key!r}{hint}")
    return structure, params
