"""The one validation path for values that reach a config or a game's parameters,
whether they come from the command line (``--set``, ``--env-set``), a JSON file
or Python: type, finiteness, range, and sizes that fit the machine.

Every failure raises :class:`~mopa.errors.InvalidParameterError` naming the field.
JSON has no tuples and reads counts such as ``2e6`` as floats, so a list where a
tuple is expected becomes a tuple, and a whole-number float where an integer is
expected becomes an ``int``; a string where a number is expected, NaN, or an
infinity is refused.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import numbers
import os
import types
import typing
from collections.abc import Mapping
from typing import Any

import numpy as np

from mopa.errors import InvalidParameterError

MAX_SEED = 2**32 - 1
"""Largest seed: ``jax.random.key`` keeps 32 bits of it, so larger seeds would
silently repeat smaller ones."""
MAX_COUNT = 2**31 - 1
"""Largest loop count or array length: JAX counts in 32-bit integers."""
FLOAT32_MAX = float(np.finfo(np.float32).max)
"""Largest float32: a larger number becomes an infinity in a JAX array."""


# -- one value against its annotation ------------------------------------------------
def check_value(name: str, value: Any, kind: Any, *, arrays: bool = False) -> Any:
    """``value`` checked against the annotation ``kind``; returns it normalised
    (lists to tuples, whole floats to ints, mappings to nested configs).

    Checked kinds: ``int``, ``float``, ``bool``, ``str``, tuples of those,
    ``X | None``, ``X | Y`` and dataclass configs (built from a mapping); any other
    annotation (``Any``, arrays, callables, games) is left to its owner.

    Args:
        name: the field, for the error.
        value: the value given.
        kind: the field's resolved annotation.
        arrays: accept numeric arrays for ``int`` and ``float`` fields, and boolean
            arrays for ``bool`` fields (game parameters, which may be vmapped).

    Raises:
        InvalidParameterError: ``value`` does not fit ``kind``.
    """
    origin = typing.get_origin(kind)
    if origin in (typing.Union, types.UnionType):
        options = typing.get_args(kind)
        if value is None and type(None) in options:
            return None
        errors = []
        for option in options:
            if option is type(None):
                continue
            try:
                return check_value(name, value, option, arrays=arrays)
            except InvalidParameterError as error:
                errors.append(error)
        if len(errors) == 1:
            raise errors[0]
        raise InvalidParameterError(
            f"{name} must be {describe(kind)}, got {value!r}"
        ) from None
    if origin is tuple:
        return _check_tuple(name, value, typing.get_args(kind))
    if kind in (int, float, bool) and arrays and _is_array(value):
        return _check_array(name, value, kind)
    if kind is bool:
        if not isinstance(value, bool | np.bool_):
            raise InvalidParameterError(f"{name} must be true or false, got {value!r}")
        return value
    if kind is int:
        if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Real):
            raise InvalidParameterError(f"{name} must be a whole number, got {value!r}")
        if isinstance(value, numbers.Integral):
            return int(value)
        if not (math.isfinite(value) and float(value).is_integer()):
            raise InvalidParameterError(f"{name} must be a whole number, got {value!r}")
        return int(value)
    if kind is float:
        if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Real):
            raise InvalidParameterError(f"{name} must be a number, got {value!r}")
        try:
            finite = math.isfinite(value)
        except OverflowError:  # an integer beyond every float
            finite = False
        if not finite:
            raise InvalidParameterError(f"{name} must be finite, got {value!r}")
        return value
    if kind is str:
        if not isinstance(value, str):
            raise InvalidParameterError(f"{name} must be a string, got {value!r}")
        return value
    if isinstance(kind, type) and dataclasses.is_dataclass(kind):
        if isinstance(value, kind):
            return value
        if not isinstance(value, Mapping):
            raise InvalidParameterError(
                f"{name} must be {describe(kind)}, got {value!r}"
            )
        names = {f.name for f in dataclasses.fields(kind) if f.init}
        unknown = sorted(set(value) - names)
        if unknown:
            raise InvalidParameterError(
                f"{name}: unknown {kind.__name__} field {unknown[0]!r}"
            )
        return kind(**value)
    return value


def describe(kind: Any) -> str:
    """How an error names what ``kind`` expects."""
    origin = typing.get_origin(kind)
    if origin in (typing.Union, types.UnionType):
        options = [o for o in typing.get_args(kind) if o is not type(None)]
        text = " or ".join(describe(o) for o in options)
        return f"{text} or null" if len(options) < len(typing.get_args(kind)) else text
    if origin is tuple:
        args = typing.get_args(kind)
        if len(args) == 2 and args[1] is Ellipsis:
            return f"a list of {_plural(args[0])}"
        return f"a list of {len(args)} ({', '.join(describe(a) for a in args)})"
    if isinstance(kind, type) and dataclasses.is_dataclass(kind):
        return f"a {kind.__name__} (an object of its fields)"
    return {
        int: "a whole number",
        float: "a number",
        bool: "true or false",
        str: "a string",
    }.get(kind, "a value")


def _plural(kind: Any) -> str:
    if isinstance(kind, type) and dataclasses.is_dataclass(kind):
        return f"{kind.__name__} objects"
    text = describe(kind)
    plurals = {
        "a whole number": "whole numbers",
        "a number": "numbers",
        "a string": "strings",
        "true or false": "booleans",
    }
    return plurals.get(text, f"values ({text})")


def _check_tuple(name: str, value: Any, args: tuple[Any, ...]) -> tuple:
    if isinstance(value, Mapping) and len(args) == 2 and args[1] is Ellipsis:
        value = tuple(sorted(value.items()))  # {field: value} for (field, value) pairs
    if not isinstance(value, list | tuple):
        raise InvalidParameterError(
            f"{name} must be {describe(tuple[args])}, got {value!r}"
        )
    if len(args) == 2 and args[1] is Ellipsis:
        kinds = [args[0]] * len(value)
    elif len(value) != len(args):
        raise InvalidParameterError(
            f"{name} must be {describe(tuple[args])}, got {value!r}"
        )
    else:
        kinds = list(args)
    return tuple(
        check_value(f"{name}[{i}]", item, kind)
        for i, (item, kind) in enumerate(zip(value, kinds, strict=True))
    )


def _is_array(value: Any) -> bool:
    return hasattr(value, "dtype") and hasattr(value, "shape")


def _check_array(name: str, value: Any, kind: type) -> Any:
    array = np.asarray(value)
    if kind is bool:
        if array.dtype != np.bool_:
            raise InvalidParameterError(
                f"{name} must be true or false, got an array of {array.dtype}"
            )
        return value
    if not (
        np.issubdtype(array.dtype, np.integer)
        or (kind is float and np.issubdtype(array.dtype, np.floating))
    ):
        raise InvalidParameterError(
            f"{name} must be {_plural(kind)}, got an array of {array.dtype}"
        )
    if not np.all(np.isfinite(array)):
        raise InvalidParameterError(f"{name} must be finite, got {array.tolist()}")
    return value


def check_numeric_array(name: str, value: Any) -> np.ndarray:
    """``value`` (a nested list or an array) as an array of finite numbers.

    Raises:
        InvalidParameterError: it holds anything but finite numbers.
    """
    try:
        array = np.asarray(value)
    except ValueError:  # ragged lists
        raise InvalidParameterError(
            f"{name} must be an array of numbers, got {value!r}"
        ) from None
    if array.dtype.kind not in "iuf":
        raise InvalidParameterError(
            f"{name} must be an array of numbers, got {value!r}"
        )
    if not np.all(np.isfinite(array)):
        raise InvalidParameterError(f"{name} must be finite, got {array.tolist()}")
    return array


def check_fits_32_bits(name: str, value: Any) -> None:
    """Raise unless the numbers of ``value`` survive the 32-bit array JAX makes
    of them: integers within ``MAX_COUNT``, floats within ``FLOAT32_MAX``."""
    array = np.asarray(value)
    if array.dtype.kind not in "iuf":
        return
    limit = FLOAT32_MAX if array.dtype.kind == "f" else MAX_COUNT
    if np.any(np.abs(array.astype(np.float64)) > limit):
        raise InvalidParameterError(
            f"{name} must be within +-{limit:.4g} (a 32-bit number), got "
            f"{array.tolist()}"
        )


# -- every field of a config ---------------------------------------------------------
@functools.cache
def field_kinds(cls: type) -> dict[str, Any]:
    """``{field: resolved annotation}`` of the dataclass ``cls``'s init fields."""
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls) if f.init}


def check_fields(config: Any) -> None:
    """Check every field of the frozen dataclass ``config`` against its annotation
    (see :func:`check_value`), normalising the values in place; the first thing a
    config's ``__post_init__`` does, so the range checks after it compare numbers.

    Raises:
        InvalidParameterError: naming the first field whose value does not fit.
    """
    for name, kind in field_kinds(type(config)).items():
        value = getattr(config, name)
        checked = check_value(name, value, kind)
        if checked is not value:
            object.__setattr__(config, name, checked)


def check_positive(config: Any, *names: str) -> None:
    """Raise naming the first of ``names`` whose value is not > 0."""
    for name in names:
        value = getattr(config, name)
        if not value > 0:
            raise InvalidParameterError(f"{name} must be > 0, got {value}")


def check_interval(
    name: str,
    value: float,
    low: float,
    high: float,
    *,
    open_low: bool = False,
    open_high: bool = False,
) -> None:
    """Raise unless ``value`` lies between ``low`` and ``high`` (each bound included
    unless ``open_low`` / ``open_high``); NaN never does. The message writes the
    interval as ``[low, high]``, ``(low, high]``, ... The one range check: the
    helpers below name its common intervals. A value that is not a real number
    (text, a flag, ``None``, a vector) is refused as such."""
    try:
        if isinstance(value, str | bytes | bool):
            raise TypeError
        number = float(value)
    except (TypeError, ValueError):
        raise InvalidParameterError(f"{name} must be a number, got {value!r}") from None
    above = low < number if open_low else low <= number
    below = number < high if open_high else number <= high
    if not (above and below):
        interval = (
            f"{'(' if open_low else '['}{low:g}, {high:g}{')' if open_high else ']'}"
        )
        raise InvalidParameterError(f"{name} must be in {interval}, got {value}")


def check_range(config: Any, name: str, low: float, high: float) -> None:
    """Raise unless ``low <= config.name <= high``."""
    check_interval(name, getattr(config, name), low, high)


def check_unit(name: str, value: float) -> None:
    """Raise unless ``0 <= value <= 1`` (a weight, ratio or threshold that may be
    either end, e.g. an EMA decay, a GAE lambda or a promotion threshold)."""
    check_interval(name, value, 0.0, 1.0)


def check_probability(name: str, value: float) -> None:
    """Raise unless ``0 < value < 1`` (a probability strictly inside the interval,
    e.g. a prior whose log-odds must be finite, or a held-out fraction that leaves
    both parts non-empty)."""
    check_interval(name, value, 0.0, 1.0, open_low=True, open_high=True)


def check_fraction(name: str, value: float) -> None:
    """Raise unless ``0 <= value < 1`` (a share that may be zero but not whole,
    e.g. a likelihood floor or a smoothing weight)."""
    check_interval(name, value, 0.0, 1.0, open_high=True)


def check_discount(name: str, value: float) -> None:
    """Raise unless ``0 < value <= 1`` (a discount factor, or a share that may be
    whole but not empty)."""
    check_interval(name, value, 0.0, 1.0, open_low=True)


def check_seed(name: str, value: int) -> None:
    """Raise unless ``0 <= value <= MAX_SEED``."""
    if value < 0:
        raise InvalidParameterError(f"{name} must be >= 0, got {value}")
    if value > MAX_SEED:
        raise InvalidParameterError(f"{name} must be <= 2**32 - 1, got {value}")


def check_count(name: str, value: int, low: int = 1) -> None:
    """Raise unless ``low <= value <= MAX_COUNT`` (a loop count or array length)."""
    if value < low:
        raise InvalidParameterError(f"{name} must be >= {low}, got {value}")
    if value > MAX_COUNT:
        raise InvalidParameterError(f"{name} must be <= 2**31 - 1, got {value}")


def check_counts(name: str, values: list[int]) -> None:
    """Raise unless every one of ``values`` is a count in [1, MAX_COUNT]."""
    if any(v < 1 for v in values):
        raise InvalidParameterError(f"{name} must all be >= 1, got {values}")
    for value in values:
        check_count(name, value)


# -- declared ranges of fields ------------------------------------------------------
BOUNDS = "bounds"
"""Metadata key of a field's :class:`Bounds` (:func:`bounded`)."""


@dataclasses.dataclass(frozen=True)
class Bounds:
    """The values a numeric field may take: an interval (each end included unless
    ``open_low`` / ``open_high``), or a few ``choices``. ``Bounds()`` allows every
    finite number."""

    low: float = -math.inf
    high: float = math.inf
    open_low: bool = False
    open_high: bool = False
    choices: tuple[float, ...] | None = None

    def holds(self, value: Any) -> bool:
        """Whether every number of ``value`` (a scalar or an array) is allowed."""
        array = np.asarray(value, np.float64)
        if self.choices is not None:
            return bool(np.all(np.isin(array, self.choices)))
        above = array > self.low if self.open_low else array >= self.low
        below = array < self.high if self.open_high else array <= self.high
        return bool(np.all(above & below & np.isfinite(array)))

    def describe(self) -> str:
        """How an error says what is allowed: ``>= 0``, ``in (0, 1]``, ..."""
        if self.choices is not None:
            *rest, last = (f"{c:g}" for c in self.choices)
            return f"{', '.join(rest)} or {last}" if rest else last
        low, high = math.isfinite(self.low), math.isfinite(self.high)
        if low and high:
            return (
                f"in {'(' if self.open_low else '['}{self.low:g}, {self.high:g}"
                f"{')' if self.open_high else ']'}"
            )
        if low:
            return f"{'>' if self.open_low else '>='} {self.low:g}"
        if high:
            return f"{'<' if self.open_high else '<='} {self.high:g}"
        return "finite"


def bounded(default: Any = dataclasses.MISSING, **bounds: Any) -> Any:
    """A dataclass field (also of a ``flax.struct`` dataclass, as a pytree leaf)
    whose allowed values are ``Bounds(**bounds)``, checked by
    :func:`check_bounds`. ``default`` may be a ``default_factory`` given by that
    keyword instead."""
    factory = bounds.pop("default_factory", dataclasses.MISSING)
    return dataclasses.field(
        default=default,
        default_factory=factory,
        metadata={BOUNDS: Bounds(**bounds)},
    )


def field_bounds(cls: Any) -> dict[str, Bounds]:
    """``{field: Bounds}`` of the dataclass (or instance) ``cls``'s bounded
    fields."""
    return {
        f.name: f.metadata[BOUNDS]
        for f in dataclasses.fields(cls)
        if BOUNDS in f.metadata
    }


def check_bounds(
    owner: str, obj: Any, label: str = "", extra: Mapping[str, Bounds] | None = None
) -> None:
    """Raise naming the first bounded field of the dataclass ``obj`` (a game's
    structure or its parameters, concrete) whose value lies outside its
    :class:`Bounds`: ``"{owner}: {label}{field} must be >= 0, got -1.0"``.

    Args:
        extra: bounds that hold as well (a game variant's own), checked after
            the fields' declared ones.

    Raises:
        InvalidParameterError: a value outside its field's bounds.
    """
    for name, bounds in [*field_bounds(obj).items(), *(extra or {}).items()]:
        value = getattr(obj, name)
        if value is None or bounds.holds(value):
            continue
        shown = np.asarray(value).tolist()
        raise InvalidParameterError(
            f"{owner}: {label}{name} must be {bounds.describe()}, got {shown}"
        )


# -- sizes that fit the machine ------------------------------------------------------
def host_memory_bytes() -> int:
    """This machine's physical memory in bytes."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def check_fits_memory(name: str, num_bytes: int, what: str) -> None:
    """Raise naming ``name`` if ``what`` (``num_bytes`` bytes) would not fit in
    this machine's memory."""
    available = host_memory_bytes()
    if num_bytes > available:
        raise InvalidParameterError(
            f"{name} is too large: {what} would take {_gib(num_bytes)}, and this "
            f"machine has {_gib(available)}"
        )


def tree_bytes(tree: Any) -> int:
    """Bytes of every array leaf of ``tree`` (arrays, or the shapes
    ``jax.eval_shape`` gives: nothing need be allocated to size a run)."""
    return sum(
        math.prod(np.shape(leaf)) * leaf.dtype.itemsize for leaf in _array_leaves(tree)
    )


def largest_leaf(tree: Any) -> str:
    """The path of ``tree``'s largest array leaf (``.buffer.obs``), for an error
    that says where the bytes go."""
    import jax

    leaves = jax.tree_util.tree_leaves_with_path(tree)
    path, _ = max(
        leaves,
        key=lambda item: tree_bytes(item[1]),
        default=((), None),
    )
    return jax.tree_util.keystr(path)


def _array_leaves(tree: Any) -> list:
    import jax

    return [leaf for leaf in jax.tree.leaves(tree) if hasattr(leaf, "dtype")]


def _gib(num_bytes: float) -> str:
    return f"{num_bytes / 2**30:.3g} GiB"


# -- switches in the environment -----------------------------------------------------
OFF_WORDS = ("0", "false", "no", "off")
"""Values of an on/off environment variable that turn its setting off (any case,
surrounding spaces ignored); any other value, or none, leaves it on."""


def switched_off(name: str) -> bool:
    """Whether environment variable ``name`` turns its setting off
    (:data:`OFF_WORDS`)."""
    return os.environ.get(name, "").strip().lower() in OFF_WORDS
