"""Jitted functions whose traced programs are kept across processes.

The persistent compilation cache (:mod:`mopa.core.compile_cache`) spares a later
process XLA's compilation, but not the work before it: JAX still runs the Python
function to trace it into a program and lowers that program to StableHLO, and only
then can it look the compiled program up. For the main job's evaluation that work
is most of a warm run (the players' searches and rollouts, traced once per
protocol). :func:`stored_jit` is :func:`jax.jit` that also keeps the lowered program
itself (:func:`jax.export.export`, serialized) in the cache folder, so a later
process that calls the function with the same static arguments and the same kinds
of arrays loads the program and calls it without running the Python function at
all.

A stored program is used only when everything that shapes it is known to be the
same, so a stale program is never run. Its key is a hash of:

- the function (module and name) and every static argument, walked field by field
  (:func:`fingerprint`); a static argument that cannot be walked (an object of a
  class outside mopa and the libraries below, a closure, a lambda) turns storage
  off for that call, which then runs as plain :func:`jax.jit`;
- every dynamic argument's tree structure (each node's type and static data,
  walked the same way), shape, dtype, weak type and sharding;
- the source of every mopa module, the versions of Python, JAX, jaxlib, Flax,
  Optax, chex, mctx and NumPy, the backend and its devices, the numerics mode
  (:mod:`mopa.core.numerics`) and every global JAX setting
  (``jax.config.values``; a setting changed only inside a thread-local context
  manager is not seen).

The source is hashed as the files hold it: a mopa function replaced while a
process runs (monkeypatched) is not seen by the key, so such a process should turn
storage off (:func:`use_program_store` with ``None``).

A process calls a stored program the same way whether it just stored it or loaded
it (the deserialized program, under :func:`jax.jit`), so the first and the later
runs compile the same module and compute the same numbers, and the compilation
cache serves the later ones. Storage is on exactly when the compilation cache is
(:func:`mopa.core.compile_cache.use_compile_cache` calls
:func:`use_program_store`), in its ``programs`` folder. Each file is written whole
(:func:`~mopa.core.files.atomic_write`) and carries the SHA-256 of its contents; a
file that fails the check or does not deserialize is ignored and written again.
Reading one never runs Python code: it is a flatbuffer holding StableHLO.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import functools
import hashlib
import inspect
import types
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import jax
import numpy as np

from mopa.core.files import atomic_write
from mopa.core.numerics import numerics_mode
from mopa.core.runinfo import package_versions

_MAGIC = b"mopa-program 1\n"
"""Each stored file: this line, the SHA-256 (hex) of the payload and a newline, then
the payload (:meth:`jax.export.Exported.serialize`)."""

_KNOWN_PACKAGES = ("mopa", "jax", "jaxlib", "flax", "optax", "chex", "mctx", "numpy")
"""Top-level packages whose classes and functions a static argument may name: their
code is covered by the key (mopa's source, the others' versions)."""

_folder: Path | None = None
_programs: dict[str, Callable[..., Any] | None] = {}
"""Programs looked up in this process, by key (``None``: stored nowhere, run plain)."""


def use_program_store(folder: str | Path | None) -> None:
    """Keep and look up programs in ``folder``, or nowhere when ``None``."""
    global _folder
    _folder = None if folder is None else Path(folder)
    _programs.clear()


def program_store_folder() -> Path | None:
    """Where programs are kept now (``None``: storage is off)."""
    return _folder


class UnknownValueError(Exception):
    """A value :func:`fingerprint` cannot describe completely."""


def fingerprint(value: Any) -> str:
    """A text that determines ``value`` completely, the same in every process.

    Walks tuples, lists, dicts, sets, dataclasses (every field), other mopa objects
    (every attribute), enums, arrays (their bytes), meshes, :func:`functools.partial`
    and plain Python values; names classes and functions by module and qualified
    name, only those of mopa and of the libraries whose versions the key holds.

    Raises:
        UnknownValueError: ``value`` holds anything else.
    """
    if isinstance(value, enum.Enum):
        return f"enum:{_name(type(value))}.{value.name}"
    if value is None or type(value) in (bool, int, str, bytes):
        return f"{type(value).__name__}:{value!r}"
    if type(value) is float:
        return f"float:{value.hex()}"
    if isinstance(value, (type, types.FunctionType, types.BuiltinFunctionType)):
        return f"name:{_name(value)}"
    if isinstance(value, jax.core.Tracer):
        raise UnknownValueError("a traced value")
    if isinstance(value, (np.ndarray, np.generic, jax.Array)):
        kind = str(value.dtype)
        if jax.dtypes.issubdtype(value.dtype, jax.dtypes.extended):  # PRNG keys
            value = jax.random.key_data(value)
        array = np.asarray(value)
        digest = hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest()
        return f"array:{kind}:{array.dtype}{array.shape}:{digest}"
    if isinstance(value, np.dtype):
        return f"dtype:{value}"
    if isinstance(value, jax.sharding.Mesh):
        devices = [(d.platform, d.id) for d in value.devices.flat]
        return (
            f"mesh:{value.devices.shape}:{devices}:{value.axis_names}:"
            f"{getattr(value, 'axis_types', None)}"
        )
    if isinstance(value, functools.partial):
        return (
            f"partial({fingerprint(value.func)},{fingerprint(value.args)},"
            f"{fingerprint(value.keywords)})"
        )
    if dataclasses.is_dataclass(value):
        fields = ",".join(
            f"{field.name}={fingerprint(getattr(value, field.name))}"
            for field in dataclasses.fields(value)
        )
        return f"{_name(type(value))}({fields})"
    if isinstance(value, tuple) and hasattr(type(value), "_fields"):  # NamedTuple
        return f"{_name(type(value))}{fingerprint(tuple(value))}"
    if type(value) in (tuple, list):
        return f"{type(value).__name__}[{','.join(map(fingerprint, value))}]"
    if type(value) in (set, frozenset):
        return f"set[{','.join(sorted(map(fingerprint, value)))}]"
    if type(value) is dict:
        items = sorted(f"{fingerprint(k)}:{fingerprint(v)}" for k, v in value.items())
        return f"dict[{','.join(items)}]"
    if type(value).__module__.split(".")[0] == "mopa" and hasattr(value, "__dict__"):
        # A plain mopa object: its class's code (in the key) and its attributes.
        attributes = ",".join(
            f"{name}={fingerprint(item)}" for name, item in sorted(vars(value).items())
        )
        return f"{_name(type(value))}({attributes})"
    raise UnknownValueError(f"a {type(value).__module__}.{type(value).__qualname__}")


def _name(thing: Any) -> str:
    """``module:qualname`` of a class or function of a known package."""
    module = getattr(thing, "__module__", None) or ""
    qualname = getattr(thing, "__qualname__", "")
    if (
        module.split(".")[0] not in _KNOWN_PACKAGES
        or "<locals>" in qualname
        or "<lambda>" in qualname
        or getattr(thing, "__closure__", None)
    ):
        raise UnknownValueError(f"{module}.{qualname}")
    return f"{module}:{qualname}"


@functools.cache
def _installation() -> str:
    """mopa's source and the versions of what it traces through, as one hash."""
    versions = package_versions(_KNOWN_PACKAGES[1:])
    digest = hashlib.sha256(repr(sorted(versions.items())).encode())
    root = Path(__file__).resolve().parents[1]  # the mopa package
    for path in sorted(root.rglob("*.py")):
        digest.update(str(path.relative_to(root)).encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def _context() -> str:
    """The backend, its devices, every global JAX setting and the numerics mode
    (portable mode lowers dots its own way, :mod:`mopa.core.numerics`)."""
    devices = [(d.platform, d.device_kind, d.id) for d in jax.devices()]
    settings = sorted((k, repr(v)) for k, v in jax.config.values.items())
    return f"{jax.default_backend()}:{devices}:{settings}:{numerics_mode()}"


def _structure(tree: Any) -> str:
    """A tree structure's nodes, each by its type and its auxiliary data (for a
    Flax struct, its static fields), walked like a static argument.

    Raises:
        UnknownValueError: a node of an unknown type or with unknown data.
    """
    data = tree.node_data()
    if data is None:
        return "*"
    node_type, aux = data
    builtin = node_type.__module__ == "builtins"
    name = node_type.__name__ if builtin else _name(node_type)
    children = ",".join(map(_structure, tree.children()))
    return f"{name}<{fingerprint(aux)}>({children})"


def _argument_kinds(leaves: Sequence[Any]) -> str:
    kinds = []
    for leaf in leaves:
        aval = jax.typeof(leaf)
        kind = f"{aval.str_short(short_dtypes=True)}:{getattr(aval, 'weak_type', '')}"
        if isinstance(leaf, jax.Array):
            kind += f":{leaf.sharding!r}"
        kinds.append(kind)
    return ";".join(kinds)


def stored_jit(
    fun: Callable[..., Any], *, static_argnames: Sequence[str] = ()
) -> Callable[..., Any]:
    """:func:`jax.jit` of ``fun`` whose lowered programs are kept in the program
    store (see the module docstring) and loaded by later processes.

    ``fun`` is stored only if it is a module-level function of mopa (or of a
    library the key names): the key covers no other code, so any other function
    runs as plain :func:`jax.jit`. Its parameters must all be nameable (no
    ``*args``, ``**kwargs`` or positional-only parameters). ``static_argnames``
    are those of :func:`jax.jit`. The function's output may hold tuples, lists,
    dicts, ``None`` and NamedTuples registered with
    :func:`jax.export.register_namedtuple_serialization`; a call whose output
    holds other nodes runs as plain :func:`jax.jit`. Called under a trace (inside
    another jitted function), it is plain :func:`jax.jit` as well.

    The wrapper's ``plain`` attribute is the plain :func:`jax.jit` of ``fun``.
    """
    signature = inspect.signature(fun)
    for parameter in signature.parameters.values():
        nameable = (parameter.POSITIONAL_OR_KEYWORD, parameter.KEYWORD_ONLY)
        if parameter.kind not in nameable:
            raise TypeError(
                f"stored_jit: {fun.__qualname__}'s parameter {parameter.name} "
                "cannot be passed by name"
            )
    static_argnames = tuple(static_argnames)
    for name in static_argnames:
        if name not in signature.parameters:
            raise TypeError(f"stored_jit: {fun.__qualname__} has no parameter {name}")
    plain = jax.jit(fun, static_argnames=static_argnames)
    try:
        function_name = _name(fun)
    except UnknownValueError:  # code the key does not cover: never stored
        function_name = None

    @functools.wraps(fun)
    def call(*args: Any, **kwargs: Any) -> Any:
        folder = _folder
        if folder is None or function_name is None:
            return plain(*args, **kwargs)
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        static = {n: v for n, v in bound.arguments.items() if n in static_argnames}
        dynamic = {n: v for n, v in bound.arguments.items() if n not in static_argnames}
        leaves, tree = jax.tree.flatten(dynamic)
        if any(isinstance(leaf, jax.core.Tracer) for leaf in leaves):
            return plain(*args, **kwargs)
        try:
            statics = fingerprint(static)
            structure = _structure(tree)
        except UnknownValueError:
            return plain(*args, **kwargs)
        key = hashlib.sha256(
            "\n".join(
                (
                    function_name,
                    statics,
                    structure,
                    _argument_kinds(leaves),
                    _installation(),
                    _context(),
                )
            ).encode()
        ).hexdigest()
        if key not in _programs:
            path = folder / f"{key}.program"
            program = _load(path)
            if program is None:
                program = _store(path, fun, static, tree, leaves)
            _programs[key] = program
        program = _programs[key]
        if program is None:
            return plain(*args, **kwargs)
        return program(*leaves)

    call.plain = plain
    return call


def _load(path: Path) -> Callable[..., Any] | None:
    """The program stored at ``path``, or ``None`` (none there, or a bad file)."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    header = len(_MAGIC) + 64 + 1
    payload = data[header:]
    if (
        data[: len(_MAGIC)] != _MAGIC
        or data[len(_MAGIC) : header - 1].decode("ascii", "replace")
        != hashlib.sha256(payload).hexdigest()
    ):
        return None
    try:
        exported = jax.export.deserialize(bytearray(payload))
    except Exception:  # a file of another layout: written again
        return None
    return jax.jit(exported.call)


def _store(
    path: Path, fun: Callable[..., Any], static: dict, tree: Any, leaves: list
) -> Callable[..., Any] | None:
    """Trace and lower ``fun`` for these arguments, write the program to ``path``
    and return it loaded back; ``None`` when it cannot be stored (then the call
    runs as plain :func:`jax.jit`)."""

    def flat(*flat_leaves):
        return fun(**jax.tree.unflatten(tree, flat_leaves), **static)

    try:
        payload = bytes(jax.export.export(jax.jit(flat))(*leaves).serialize())
    except Exception:  # an output tree or an effect that cannot be serialized
        return None
    digest = hashlib.sha256(payload).hexdigest().encode()
    with contextlib.suppress(OSError):  # a full disk, a read-only folder: keep none
        atomic_write(path, lambda file: file.write(_MAGIC + digest + b"\n" + payload))
    return jax.jit(jax.export.deserialize(bytearray(payload)).call)
