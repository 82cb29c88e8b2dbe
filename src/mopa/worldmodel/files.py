"""World model files: the config (JSON) and the weights (arrays) in one msgpack
map, written atomically; loading checks every array against the shapes the
config implies and never executes code."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp

from mopa.core.checkpoint import (
    check_params_fit,
    read_msgpack,
    write_config_params,
)
from mopa.errors import CheckpointError, InvalidParameterError
from mopa.worldmodel import jepa, ssm
from mopa.worldmodel.config import SSMConfig, WorldModelConfig, config_from_dict

WORLD_MODEL_FORMAT = "mopa-world-model"
FORMAT_VERSION = 1


def init_params(config: WorldModelConfig, key: jax.Array) -> Any:
    """Fresh (untrained) parameters of ``config``'s model."""
    if isinstance(config, SSMConfig):
        return ssm.init_params(config, key)
    return jepa.init_params(config, key)


def save_world_model(
    path: str | Path,
    config: WorldModelConfig,
    params: Any,
    metadata: dict[str, Any] | None = None,
) -> Path:
    """Write ``config`` and ``params`` (and the JSON-able ``metadata``, e.g. the
    model's measured error) as one msgpack file, atomically."""
    _check_params(config, params, InvalidParameterError, "params")
    return write_config_params(
        path, WORLD_MODEL_FORMAT, FORMAT_VERSION, config.to_dict(), params, metadata
    )


def load_world_model(path: str | Path) -> tuple[WorldModelConfig, Any, dict]:
    """Read ``(config, params, metadata)`` written by :func:`save_world_model`.

    Raises:
        CheckpointError: missing or corrupt file, another format or version, a bad
            config, or weights that do not fit the config.
    """
    path = Path(path)
    data = read_msgpack(path, WORLD_MODEL_FORMAT, FORMAT_VERSION, noun="world model")
    try:
        config = config_from_dict(json.loads(data["config"]))
        metadata = json.loads(data.get("metadata", "{}"))
    except (KeyError, TypeError, ValueError) as error:
        raise CheckpointError(f"{path}: bad world model config ({error})") from None
    params = jax.tree.map(jnp.asarray, data.get("params"))
    _check_params(config, params, CheckpointError, str(path))
    return config, params, metadata


def _check_params(
    config: WorldModelConfig, params: Any, error: type[Exception], where: str
) -> None:
    """Raise ``error`` unless ``params`` has exactly the arrays ``config`` needs."""
    expected = jax.eval_shape(lambda k: init_params(config, k), jax.random.key(0))
    check_params_fit(expected, params, error, where, f"the {config.kind} config")
