"""MAPPO (centralised critic) and IPPO (per-agent critics) with one actor per team."""

from mopa.algos.mappo.config import MAPPOConfig
from mopa.algos.mappo.train import make_train, make_trainer

__all__ = ["MAPPOConfig", "make_train", "make_trainer"]
