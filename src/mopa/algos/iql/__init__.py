"""Independent Q-learning per team, and its opponent-aware variant (OA-IQL)."""

from mopa.algos.iql.config import IQLConfig
from mopa.algos.iql.train import make_train, make_trainer

__all__ = ["IQLConfig", "make_train", "make_trainer"]
