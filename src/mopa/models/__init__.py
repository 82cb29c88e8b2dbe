"""Flax modules only: MLP and GRU trunks, Q, actor and critic heads."""

from mopa.models.networks import (
    Actor,
    Critic,
    QNetwork,
    RecurrentQNetwork,
    Trunk,
    initial_carry,
)

__all__ = [
    "Actor",
    "Critic",
    "QNetwork",
    "RecurrentQNetwork",
    "Trunk",
    "initial_carry",
]
