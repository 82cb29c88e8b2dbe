"""Encoders of an opponent's hidden intent, fitted on its recorded episodes: the
pieces a belief over the intent is built from.

* :func:`fit_prefix_classifier`: a supervised classifier of the intent from the
  occupancy of a prefix of the opponent's path and its latest positions
  (:func:`~mopa.opponent.encoders.make_prefix_data`), its softmax temperature
  fitted on validation prefixes;
* :func:`fit_arrival_readout`: a JEPA predicting where the path arrives, read out
  against the intents' targets, its temperature fitted against the target nearest
  each validation episode's arrival (no intent label anywhere);
* :func:`fit_named_clones`: behaviour clones ``pi(a | s, z)`` per seed, ``z`` the
  intent one-hot, and clones whose ``z`` is a name the readout gives each episode,
  renamed round by round by the clone's own Bayes posterior
  (:func:`posterior_names`).

The data helpers read a :class:`~mopa.opponent.data.TrajectoryDataset` of the
pursuit game (the prey is the opponent): :func:`split_episodes`,
:func:`prey_lead_positions`, :func:`seed_parts` and :func:`clone_arrays`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from mopa.opponent import bc as bc_lib
from mopa.opponent.beliefs import (
    bayes_beliefs,
    fit_readout_temperature,
    prefix_beliefs,
)
from mopa.opponent.calibration import fit_temperature
from mopa.opponent.data import TrajectoryDataset, split
from mopa.opponent.encoders import (
    ClassifierConfig,
    JEPAConfig,
    make_jepa_data,
    make_prefix_data,
    make_train,
    predict_arrival,
)


# -- the data ---------------------------------------------------------------------
def split_episodes(dataset: TrajectoryDataset, seed: int) -> tuple:
    """``(fit, validation, test)`` chains, stratified by intent (a quarter held
    out for test, a fifth of the rest for validation)."""
    rest, test = split(dataset, 0.25, seed, stratify="intent")
    fit, validation = split(rest, 0.2, seed + 1, stratify="intent")
    return fit, validation, test


def prey_lead_positions(
    dataset: TrajectoryDataset, dt: float
) -> tuple[np.ndarray, np.ndarray]:
    """The prey's ``[M, T, 2]`` lead positions
    (:func:`~mopa.envs.pursuit.lead_position`: its position plus ``dt`` times its
    velocity, the first two numbers of its observation) and ``[M]`` intents of
    every episode."""
    positions = dataset.episodes("pos")[:, :, -1, :]
    velocities = dataset.episodes("obs.prey")[:, :, 0, :2]
    return positions + dt * velocities, dataset.episode_labels("intent")


def seed_parts(dataset: TrajectoryDataset) -> list:
    """``dataset``'s chains of each seed, by ``seed_index``."""
    seeds = dataset["seed_index"]
    return [dataset.select(np.flatnonzero(seeds == s)) for s in np.unique(seeds)]


def clone_arrays(
    dataset: TrajectoryDataset, K: int, labels: np.ndarray | None = None
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """The prey's observations without the intent ``[N, D]``, its actions ``[N]``
    and the one-hots ``[N, K]`` of every step of ``dataset``: of the intents, or
    of ``labels`` ``[M]`` (one per episode) if given."""
    obs = dataset.episodes("obs.prey")[:, :, 0, :]  # [M, T, D + K]
    actions = dataset.episodes("actions.prey")[:, :, 0]  # [M, T]
    if labels is None:
        labels = dataset.episode_labels("intent")
    z = np.repeat(np.eye(K)[labels][:, None, :], dataset.horizon, 1)
    return (
        jnp.asarray(obs[..., :-K].reshape(-1, obs.shape[-1] - K)),
        jnp.asarray(actions.reshape(-1)),
        jnp.asarray(z.reshape(-1, K)),
    )


def posterior_names(
    log_probs_fn: Callable[[jax.Array], jax.Array],
    dataset: TrajectoryDataset,
    K: int,
    epsilon: float,
) -> np.ndarray:
    """``[M]`` the argmax of the Bayes belief under ``log_probs_fn`` (``obs [D]
    -> log p(a | obs, k) [K, A]``) after each whole episode of ``dataset``: the
    intent the model reads in the episode's moves."""
    final = jax.jit(
        jax.vmap(lambda o, a: bayes_beliefs(log_probs_fn, o, a, K, epsilon)[-1])
    )(
        jnp.asarray(dataset.episodes("obs.prey")[:, :, 0, :]),
        jnp.asarray(dataset.episodes("actions.prey")[:, :, 0]),
    )
    return np.asarray(jnp.argmax(final, -1))


def names_right(names: list, parts: list) -> float:
    """The share of episodes whose name is their intent (a figure for a report;
    the names never see the intents)."""
    intents = [part.episode_labels("intent") for part in parts]
    return float(np.mean(np.concatenate(names) == np.concatenate(intents)))


# -- the encoders -----------------------------------------------------------------
class FittedEncoder(NamedTuple):
    """An encoder's weights, training metrics and fitted temperature."""

    params: Any
    metrics: Any
    temperature: Any


def fit_prefix_classifier(
    config: ClassifierConfig,
    key: jax.Array,
    fit: tuple[np.ndarray, np.ndarray],
    validation: tuple[np.ndarray, np.ndarray],
    *,
    grid_size: int,
    recent: int,
    lengths: tuple[int, ...],
) -> tuple[FittedEncoder, Any]:
    """The supervised prefix classifier, trained on every prefix of ``lengths``
    of the ``fit`` paths, its temperature fitted on the validation prefixes.

    Args:
        fit, validation: ``(positions [M, T, 2], intents [M])``.

    Returns:
        ``(the classifier, the validation prefixes'
        :class:`~mopa.opponent.encoders.ClassifierData`)``.
    """
    data = make_prefix_data(
        *fit, grid_size=grid_size, prefix_lengths=lengths, recent=recent
    )
    params, metrics = jax.jit(make_train(config))(key, data)
    v_data = make_prefix_data(
        *validation, grid_size=grid_size, prefix_lengths=lengths, recent=recent
    )
    v_logits = config.module().apply(params, v_data.x)
    return FittedEncoder(params, metrics, fit_temperature(v_logits, v_data.labels)), (
        v_data
    )


def fit_arrival_readout(
    config: JEPAConfig,
    key: jax.Array,
    positions: np.ndarray,
    validation: tuple[np.ndarray, Any],
    targets: np.ndarray,
    *,
    grid_size: int,
    recent: int,
    target_length: int,
    num_prefixes: int,
) -> FittedEncoder:
    """The JEPA with an arrival readout, trained on every cut of the ``positions
    [M, T, 2]``; no intent labels anywhere: the temperature of the readout against
    ``targets [K, 2]`` is fitted against the target nearest each validation
    path's arrival.

    Args:
        validation: ``(positions [V, T, 2], the features of their
            ``num_prefixes`` prefixes each [V num_prefixes, F], episode-major)``.
    """
    data = make_jepa_data(
        positions,
        grid_size=grid_size,
        cuts=tuple(range(1, positions.shape[1])),
        target_length=target_length,
        recent=recent,
    )
    params, metrics = jax.jit(make_train(config))(key, data)
    v_positions, v_x = validation
    arrival = predict_arrival(config, params, v_x)
    nearest = np.argmin(
        ((v_positions[:, -1, None, :] - targets[None]) ** 2).sum(-1), -1
    )
    pseudo_labels = np.repeat(nearest, num_prefixes)
    temperature = fit_readout_temperature(arrival, targets, pseudo_labels)
    return FittedEncoder(params, metrics, temperature)


def fit_named_clones(
    config: bc_lib.BCConfig,
    key: jax.Array,
    parts: list,
    names: list,
    K: int,
    *,
    rounds: int,
    rename: Callable[[Any, Any], np.ndarray],
) -> tuple[Any, Any, Any, float, list[float]]:
    """Behaviour clones ``pi(a | s, z)`` of each seed's prey on its episodes
    ``parts``, all trained in one vmapped call: with ``z`` the intent one-hot,
    and with ``z`` the episode's name (``names``, one ``[M]`` per part); then
    ``rounds`` times each episode is renamed by ``rename(clone params of the seed,
    part)`` and the named clones refitted (the clone's reading of the moves
    corrects the names of episodes whose first name was wrong).

    Returns:
        ``(clones [S, ...], named clones [S, ...], the first fit's metrics (the
        clones', then the named clones', on a leading axis), the named clones'
        final loss averaged over seeds, the share of names that are the intent
        before the first fit and after each round)``.
    """
    fit_arrays = [clone_arrays(part, K) for part in parts] + [
        clone_arrays(part, K, labels) for part, labels in zip(parts, names, strict=True)
    ]
    n = min(len(arrays[1]) for arrays in fit_arrays)
    stacked = [jnp.stack([arrays[i][:n] for arrays in fit_arrays]) for i in range(3)]
    both_params, both_metrics = jax.jit(jax.vmap(bc_lib.make_train(config)))(
        jax.random.split(key, len(fit_arrays)), *stacked
    )
    S = len(parts)
    clones = jax.tree.map(lambda x: x[:S], both_params)
    named = jax.tree.map(lambda x: x[S:], both_params)
    train_clones = jax.jit(jax.vmap(bc_lib.make_train(config)))
    named_loss = np.asarray(both_metrics.loss)[S:, -1].mean()
    right = [names_right(names, parts)]
    for r in range(rounds):
        names = [
            rename(jax.tree.map(lambda x, s=s: x[s], named), part)
            for s, part in enumerate(parts)
        ]
        arrays = [
            clone_arrays(part, K, labels)
            for part, labels in zip(parts, names, strict=True)
        ]
        stacked = [jnp.stack([a[i][:n] for a in arrays]) for i in range(3)]
        named, clone_metrics = train_clones(
            jax.random.split(jax.random.fold_in(key, r + 1), S), *stacked
        )
        named_loss = np.asarray(clone_metrics.loss)[:, -1].mean()
        right.append(names_right(names, parts))
    return clones, named, both_metrics, named_loss, right


def path_beliefs(
    logits_fn: Callable[[jax.Array, jax.Array], jax.Array],
    positions: np.ndarray,
    K: int,
    temperature: float,
    min_steps: int,
) -> jax.Array:
    """``[M, T, K]`` the prefix belief (:func:`~mopa.opponent.beliefs.
    prefix_beliefs`) at every step of each path ``positions [M, T, 2]``, from an
    encoder's ``logits_fn`` at ``temperature``."""
    return jax.jit(
        jax.vmap(
            lambda trajectory: prefix_beliefs(
                logits_fn, trajectory, K, temperature, min_steps
            )
        )
    )(jnp.asarray(positions))
