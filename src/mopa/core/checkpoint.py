"""Checkpoints: policy files and resumable training state, in msgpack.

Two formats, both written atomically (temporary file, then rename) and both plain
msgpack maps of strings, numbers and arrays, so loading one never executes code:

* a *policy checkpoint* holds, for every learning team, the spec that rebuilds its
  network and its parameters (a leading seed axis), plus the run's config, package
  versions and git SHA; :func:`mopa.policy.read_policy_file` reads it back
  without training code;
* a *train state* holds every leaf of a trainer's carry (parameters, optimiser
  state, replay buffer, environment states, random keys) and the number of
  finished chunks, so a killed run resumes exactly where it stopped.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import serialization

from mopa.core.files import atomic_write
from mopa.errors import CheckpointError

POLICY_FORMAT = "mopa-policy"
STATE_FORMAT = "mopa-train-state"
FORMAT_VERSION = 1
POLICY_FILE = "checkpoint.msgpack"
STATE_FILE = "train_state.msgpack"


def write_msgpack(path: str | Path, data: dict[str, Any]) -> Path:
    """Write ``data`` (strings, numbers, arrays, nested maps) as msgpack,
    atomically."""
    payload = serialization.msgpack_serialize(data)
    return atomic_write(path, lambda file: file.write(payload))


def check_header(
    path: Path, header: Any, expected_format: str, version: int = FORMAT_VERSION
) -> None:
    """Raise :class:`CheckpointError` unless ``header`` is a map naming
    ``expected_format`` and ``version``."""
    if not isinstance(header, dict) or header.get("format") != expected_format:
        found = header.get("format") if isinstance(header, dict) else None
        raise CheckpointError(
            f"{path} is not a {expected_format} file (format {found!r})"
        )
    if header.get("version") != version:
        raise CheckpointError(
            f"{path} has format version {header.get('version')!r}; "
            f"this mopa reads version {version}"
        )


def read_msgpack(
    path: str | Path,
    expected_format: str,
    version: int = FORMAT_VERSION,
    noun: str = "checkpoint",
) -> dict[str, Any]:
    """Read a msgpack map written by :func:`write_msgpack` and check its
    ``format`` and ``version`` entries. Never executes code.

    Args:
        noun: what the file is, for error messages (``"checkpoint"``, ...).

    Raises:
        CheckpointError: missing or unreadable file, or another format or version.
    """
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"no {noun} at {path}")
    try:
        data = serialization.msgpack_restore(path.read_bytes())
    except Exception as error:  # msgpack raises many types on corrupt input
        raise CheckpointError(
            f"{path} is not a readable mopa {noun} ({type(error).__name__})"
        ) from None
    check_header(path, data, expected_format, version)
    return data


def write_policy_checkpoint(
    path: str | Path,
    *,
    algo: str,
    env: str,
    env_overrides: dict[str, Any],
    config: dict[str, Any],
    meta: dict[str, Any],
    teams: dict[str, tuple[dict[str, Any], Any]],
) -> Path:
    """Write a policy checkpoint.

    Args:
        teams: ``{team name: (policy spec dict, params with a leading seed axis)}``.
    """
    data = {
        "format": POLICY_FORMAT,
        "version": FORMAT_VERSION,
        "algo": algo,
        "env": env,
        "env_overrides": json.dumps(env_overrides),
        "config": json.dumps(config),
        "meta": json.dumps(meta),
        "teams": {
            name: {
                "spec": json.dumps(spec),
                "params": serialization.to_state_dict(jax.device_get(params)),
            }
            for name, (spec, params) in teams.items()
        },
    }
    return write_msgpack(path, data)


# -- resumable train state ------------------------------------------------------------
def _is_key(leaf: Any) -> bool:
    return isinstance(leaf, jax.Array) and jnp.issubdtype(
        leaf.dtype, jax.dtypes.prng_key
    )


def write_train_state(
    path: str | Path, *, algo: str, config: dict[str, Any], chunk: int, carry: Any
) -> Path:
    """Write every leaf of a trainer carry and the number of finished chunks."""
    leaves = jax.tree.leaves(carry)
    arrays = {
        str(i): np.asarray(jax.random.key_data(x) if _is_key(x) else x)
        for i, x in enumerate(leaves)
    }
    data = {
        "format": STATE_FORMAT,
        "version": FORMAT_VERSION,
        "algo": algo,
        "config": json.dumps(config, sort_keys=True),
        "chunk": int(chunk),
        "leaves": arrays,
    }
    return write_msgpack(path, data)


def read_train_state(
    path: str | Path, *, algo: str, config: dict[str, Any], template: Any
) -> tuple[int, Any]:
    """Read a train state written for ``algo`` and ``config``.

    Args:
        template: a carry of the right structure (e.g. the trainer's fresh carry);
            every saved leaf must match its shape and dtype.

    Returns:
        ``(finished chunks, carry)``.

    Raises:
        CheckpointError: corrupt file, another algorithm, another config, or leaves
            that do not fit ``template``.
    """
    data = read_msgpack(path, STATE_FORMAT)
    if data.get("algo") != algo:
        raise CheckpointError(
            f"{path} is a checkpoint of algorithm {data.get('algo')!r}, not {algo!r}"
        )
    if data.get("config") != json.dumps(config, sort_keys=True):
        raise CheckpointError(
            f"{path} was written by a run with another config; "
            "use a new --out folder or the same settings"
        )
    leaves, treedef = jax.tree.flatten(template)
    saved = data.get("leaves") or {}
    if len(saved) != len(leaves):
        raise CheckpointError(
            f"{path} holds {len(saved)} arrays, the trainer needs {len(leaves)}"
        )
    restored = []
    for i, like in enumerate(leaves):
        value = np.asarray(saved[str(i)])
        if _is_key(like):
            want = jax.random.key_data(like)
            if value.shape != want.shape or value.dtype != want.dtype:
                raise CheckpointError(f"{path}: random key {i} does not fit")
            restored.append(
                jax.random.wrap_key_data(value, impl=jax.random.key_impl(like))
            )
            continue
        like = np.asarray(like)
        if value.shape != like.shape or value.dtype != like.dtype:
            raise CheckpointError(
                f"{path}: array {i} has shape {value.shape} {value.dtype}, "
                f"expected {like.shape} {like.dtype}"
            )
        restored.append(jnp.asarray(value))
    return int(data["chunk"]), jax.tree.unflatten(treedef, restored)


def check_params_fit(
    expected: Any, params: Any, error: type[Exception], where: str, what: str
) -> None:
    """Raise ``error`` unless ``params`` has exactly the arrays of ``expected`` (a
    tree of arrays or shape structs, e.g. ``jax.eval_shape`` of an init), with the
    same shapes. ``where`` starts the message (a path or an argument name);
    ``what`` names what the weights must fit (e.g. ``"the vae config"``)."""
    from flax import traverse_util

    want = traverse_util.flatten_dict(serialization.to_state_dict(expected))
    try:
        got = traverse_util.flatten_dict(serialization.to_state_dict(params))
    except (TypeError, ValueError, AttributeError):
        raise error(f"{where}: the weights are not a nested dict of arrays") from None
    if set(got) != set(want):
        name = "/".join(sorted(set(want) ^ set(got))[0])
        raise error(f"{where}: the weights do not fit {what} ({name})")
    for name, spec in want.items():
        shape = tuple(np.shape(got[name]))
        if shape != tuple(spec.shape):
            raise error(
                f"{where}: weight {'/'.join(name)} has shape {shape}, {what} "
                f"needs {tuple(spec.shape)}"
            )


def write_config_params(
    path: str | Path,
    format_name: str,
    version: int,
    config: dict[str, Any],
    params: Any,
    metadata: dict[str, Any] | None = None,
) -> Path:
    """Write a model file: ``config`` and ``metadata`` as JSON strings beside the
    weights ``params`` (arrays), under a format header, atomically
    (:func:`write_msgpack`)."""
    data = {
        "format": format_name,
        "version": version,
        "config": json.dumps(config),
        "metadata": json.dumps(metadata or {}),
        "params": serialization.to_state_dict(jax.device_get(params)),
    }
    return write_msgpack(path, data)
