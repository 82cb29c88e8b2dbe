"""Flax modules only: MLP and GRU trunks, Q, actor and critic heads, and the
opponent encoders (VAE, JEPA, classifier)."""

from mopa.models.encoders import JEPA, MLP, VAE, Classifier
from mopa.models.networks import (
    Actor,
    Critic,
    QNetwork,
    RecurrentQNetwork,
    Trunk,
    initial_carry,
)

__all__ = [
    "JEPA",
    "MLP",
    "VAE",
    "Actor",
    "Classifier",
    "Critic",
    "QNetwork",
    "RecurrentQNetwork",
    "Trunk",
    "initial_carry",
]
