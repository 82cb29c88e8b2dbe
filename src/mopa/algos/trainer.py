"""The shape of every team learner: ``init`` and ``update`` as pure functions, and
the whole run as one scan.

``make_train(config) -> train(key) -> TrainOutput`` is what each algorithm exposes;
``jax.jit(jax.vmap(train))(keys)`` runs seeds in parallel with metric arrays
``[seed, update]``. The host-side driver (:mod:`mopa.algos.driver`) runs the same
``update`` in jitted chunks instead, to report progress and save resumable state.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax

from mopa.algos.config import TrainConfig
from mopa.policy import PolicySpec


class Trainer(NamedTuple):
    """An algorithm instantiated for one config and game."""

    config: TrainConfig
    init: Callable[[jax.Array], Any]
    """``key -> carry``: the state of a fresh run (one seed)."""
    update: Callable[[Any], tuple[Any, dict]]
    """``carry -> (carry, metrics)``: one collect-and-learn update; metrics are
    scalars."""
    policies: Callable[[Any], dict[str, tuple[PolicySpec, Any]]]
    """``carry -> {team: (spec, params)}`` for every learning team."""
    team_names: tuple[str, ...]
    learners: Callable[[Any], dict[str, Any]] | None = None
    """``carry -> {team: weights}``: everything a learning team has learned (for
    MAPPO its actor's and its critic's weights), what a warm start resumes from;
    ``None`` where the algorithm has no warm start."""
    warm_start: Callable[[Any, dict[str, Any]], Any] | None = None
    """``(carry, {team: weights as learners gives them}) -> carry``: a fresh run's
    carry with those teams' weights in place of the initial ones (their
    optimiser's state fresh)."""


class TrainOutput(NamedTuple):
    carry: Any
    """Final trainer state."""
    metrics: dict
    """Per-update metrics ``[update]`` (``[seed, update]`` once vmapped)."""


def scan_train(trainer: Trainer) -> Callable[[jax.Array], TrainOutput]:
    """The whole run as one pure function of the key (outer ``lax.scan``)."""

    def train(key: jax.Array) -> TrainOutput:
        carry = trainer.init(key)
        carry, metrics = jax.lax.scan(
            lambda c, _: trainer.update(c),
            carry,
            length=trainer.config.num_updates,
        )
        return TrainOutput(carry, metrics)

    return train


def seed_keys(config: TrainConfig) -> jax.Array:
    """``[num_seeds]`` keys, seed ``i`` being ``fold_in(key(config.seed), i)``."""
    base = jax.random.key(config.seed)
    return jax.vmap(lambda i: jax.random.fold_in(base, i))(
        jax.numpy.arange(config.num_seeds)
    )
