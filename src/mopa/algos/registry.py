"""Names of mopa's team learners: algorithm -> (config class, trainer factory)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mopa.algos.config import TrainConfig
from mopa.algos.iql.config import IQLConfig
from mopa.algos.mappo.config import MAPPOConfig
from mopa.errors import InvalidParameterError, UnknownNameError

ALGOS: dict[str, type[TrainConfig]] = {
    "iql": IQLConfig,
    "oa_iql": IQLConfig,
    "mappo": MAPPOConfig,
    "ippo": MAPPOConfig,
}
"""Every algorithm ``mopa train --algo`` accepts, with its config class."""


def config_class(algo: str) -> type[TrainConfig]:
    if algo not in ALGOS:
        raise UnknownNameError(
            f"unknown algorithm {algo!r}; choose from {', '.join(ALGOS)}"
        )
    return ALGOS[algo]


def make_config(algo: str, **fields: Any) -> TrainConfig:
    """The config of ``algo`` with ``fields`` set; unknown fields are named."""
    cls = config_class(algo)
    return cls.from_dict({**fields, "algo": algo})


def config_from_dict(data: dict[str, Any]) -> TrainConfig:
    """Rebuild a config saved with ``to_dict``."""
    if not isinstance(data, dict) or "algo" not in data:
        raise InvalidParameterError("a saved config must be a mapping with 'algo'")
    return config_class(data["algo"]).from_dict(data)


def trainer_factory(config: TrainConfig) -> Callable:
    """``make_trainer(config, game=None)`` of the config's algorithm."""
    if isinstance(config, IQLConfig):
        from mopa.algos.iql.train import make_trainer
    elif isinstance(config, MAPPOConfig):
        from mopa.algos.mappo.train import make_trainer
    else:
        raise InvalidParameterError(f"no trainer for {type(config).__name__}")
    return make_trainer
