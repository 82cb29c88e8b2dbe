"""Blue's model of red's population: the population model of
:mod:`mopa.opponent.population`, fitted on red's current population and read back.

One member per red checkpoint of the population (blue's league records which
checkpoint played each episode: the identity of a *recorded* episode is blue's to
use; the pooled member last), each an intent-conditioned clone. Red's intent is
private: with ``intent_labels="inferred"`` (the default) each episode's intent is
found without labels (:func:`mopa.opponent.population.infer_intents`, hard EM
from a first guess on red's public behaviour: :func:`first_guess`), and with
``"true"`` the game's recorded intents are used (a variant that reads red's
private labels, named as such wherever it is reported). Red's true intents and
identities serve only to score what was found.

The data: ``data_episodes`` episodes of every red checkpoint (its seeds in turn)
against blue as it plays (its policy's mode, in its own game), as blue's league
records them.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from mopa.core.checkpoint import FORMAT_VERSION, read_msgpack, write_msgpack
from mopa.envs.pursuit import INTENT_CORNERS, PursuitEnv
from mopa.errors import InvalidParameterError
from mopa.eval.intervals import mean_interval
from mopa.opponent.data import TrajectoryDataset, concatenate, generate
from mopa.opponent.population import (
    MemberEpisodes,
    PopulationBeliefState,
    PopulationConfig,
    episodes_data,
    fit_population,
    infer_intents,
    init_population_belief,
    intent_belief,
    member_belief,
    member_episodes,
    none_fits_probability,
    population_beliefs,
    population_log_probs,
)
from mopa.players import Player

MODEL_FORMAT = "mopa.cotrain.population_model"
INTENT_LABELS = ("inferred", "true")
"""How the model's clones learn red's intents: found without labels, or red's
recorded intents (the variant that reads red's private labels)."""


# -- files ---------------------------------------------------------------------------
def write_model(path: Path, population: PopulationConfig, clones: Any) -> Path:
    """The model (its config and clone weights) as a msgpack file."""
    return write_msgpack(
        path,
        {
            "format": MODEL_FORMAT,
            "version": FORMAT_VERSION,
            "population": json.dumps(dataclasses.asdict(population)),
            "clones": jax.tree.map(np.asarray, clones),
        },
    )


def read_model(path: Path) -> tuple[PopulationConfig, Any]:
    """``(config, clone weights [M, ...])`` of a :func:`write_model` file."""
    data = read_msgpack(path, MODEL_FORMAT)
    population = PopulationConfig(**json.loads(data["population"]))
    return population, jax.tree.map(jnp.asarray, data["clones"])


# -- the data ------------------------------------------------------------------------
def record_red(
    game: Any,
    params: Any,
    blue: Player,
    blue_params: Any,
    red: Player,
    red_params: Any,
    key: jax.Array,
    episodes: int,
) -> TrajectoryDataset:
    """``episodes`` episodes of one red checkpoint (params ``[R, ...]``, its seeds
    in turn) against blue (one seed's params), one chain each, blue first."""
    seeds = int(jax.tree.leaves(red_params)[0].shape[0])
    parts = []
    for r in range(seeds):
        count = len(range(r, episodes, seeds))
        if count == 0:
            continue
        parts.append(
            generate(
                game,
                params,
                (blue, red),
                (blue_params, jax.tree.map(lambda x, r=r: x[r], red_params)),
                jax.random.fold_in(key, r),
                num_chains=count,
            )
        )
    return concatenate(parts) if len(parts) > 1 else parts[0]


def first_guess(env: Any, episodes: MemberEpisodes, num_intents: int) -> np.ndarray:
    """Each episode's first intent label ``[E]`` from red's public behaviour: with
    one intent, 0; in a pursuit game with intent corners, the corner whose
    direction is nearest red's mean velocity over the episode (the prey heads for
    its corner when it can)."""
    count = len(episodes.valid)
    if num_intents == 1:
        return np.zeros(count, np.int32)
    if not isinstance(env, PursuitEnv) or env.num_intents != num_intents:
        raise InvalidParameterError(
            f"intent_labels 'inferred' needs a first guess of {num_intents} "
            f"intents: a pursuit game with intent corners, got {env.name}"
        )
    valid = np.asarray(episodes.valid, np.float64)[..., None]
    velocity = np.asarray(episodes.obs)[:, :, 0, 0:2]  # the prey's own velocity
    heading = (velocity * valid).sum(1) / np.maximum(valid.sum(1), 1.0)
    return np.argmax(heading @ INTENT_CORNERS.T, 1).astype(np.int32)


def fit_red_model(
    key: jax.Array,
    env: Any,
    population: PopulationConfig,
    datasets: list[TrajectoryDataset],
    red_team: str,
    *,
    intent_labels: str,
    intent_rounds: int,
) -> tuple[Any, dict[str, Any]]:
    """The clone library of red's population, one member per dataset (each a red
    checkpoint's episodes), and what the fit found.

    Returns:
        ``(clones, facts)``: the weights (leaves ``[M (+1), ...]``) and
        ``{"intent_labels", "em_relabelled", "label_accuracy", "clone_accuracy"}``
        (the share of episodes whose label is red's true intent, where the data
        records it: an evaluation, never an input).
    """
    if intent_labels not in INTENT_LABELS:
        raise InvalidParameterError(
            f"intent_labels must be one of {INTENT_LABELS}, got {intent_labels!r}"
        )
    episodes = [member_episodes(d, red_team) for d in datasets]
    K = population.num_intents
    truth = [
        d.episode_labels("intent") if "intent" in d.header["episode_fields"] else None
        for d in datasets
    ]
    key_em, key_fit = jax.random.split(key)
    changed: list[float] = []
    if K == 1:
        labels = [np.zeros(len(e.valid), np.int32) for e in episodes]
    elif intent_labels == "true":
        if any(t is None for t in truth):
            raise InvalidParameterError(
                "intent_labels 'true' needs the game's recorded intents"
            )
        labels = [np.asarray(t, np.int32) for t in truth]
    else:
        guesses = [first_guess(env, e, K) for e in episodes]
        labels, changed = infer_intents(
            key_em, population, episodes, guesses, rounds=intent_rounds
        )
    data = [episodes_data(e, g) for e, g in zip(episodes, labels, strict=True)]
    clones, metrics = fit_population(key_fit, population, data)
    accuracy = None
    if K > 1 and all(t is not None for t in truth):
        hits = np.concatenate(
            [np.asarray(g) == np.asarray(t) for g, t in zip(labels, truth, strict=True)]
        )
        accuracy = float(hits.mean())
    return clones, {
        "intent_labels": intent_labels if K > 1 else None,
        "em_relabelled": changed,
        "label_accuracy": accuracy,
        "clone_accuracy": [float(np.asarray(m.accuracy)[-1]) for m in metrics],
    }


# -- the belief on a red -------------------------------------------------------------
def last_beliefs(
    population: PopulationConfig,
    clones: Any,
    episodes: MemberEpisodes,
    epsilon: float,
    fallback_prior: float,
) -> PopulationBeliefState:
    """The belief at the end of each episode (leaves ``[E, ...]``), as a belief
    game holds it then: from the model's priors, updated by each of red's recorded
    moves (:func:`~mopa.opponent.population.population_beliefs`; a padded step
    past an episode's end leaves it unchanged)."""
    obs, actions = jnp.asarray(episodes.obs), jnp.asarray(episodes.actions)
    log_probs = population_log_probs(population, clones, obs)  # [E, T, A, K, M, n]
    K, M = log_probs.shape[-3:-1]
    start = init_population_belief(K, M, fallback_prior=fallback_prior)
    states = jax.vmap(lambda lp, a, v: population_beliefs(start, lp, a, epsilon, v))(
        log_probs, actions.astype(jnp.int32), jnp.asarray(episodes.valid)
    )
    return jax.tree.map(lambda x: x[:, -1], states)


def belief_on_episodes(
    beliefs: Any, intents: np.ndarray | None, member: int | None
) -> dict[str, Any]:
    """How the beliefs at the episodes' last steps (a
    :class:`~mopa.opponent.population.PopulationBeliefState` with leading ``[E]``,
    :func:`last_beliefs`) read one red: the share of episodes whose intent
    marginal's argmax is red's true intent (``intents [E]``, an evaluation;
    ``None`` where there is none), whose member marginal's argmax is ``member``
    (the red's own member of the model; ``None`` when it has none) and the
    none-fits probability, each with its 95% interval over episodes."""
    out: dict[str, Any] = {"member": member}
    if intents is not None:
        guessed = np.argmax(np.asarray(jax.vmap(intent_belief)(beliefs)), -1)
        out["intent_accuracy"] = mean_interval(
            (guessed == np.asarray(intents)).astype(np.float64)
        )
    else:
        out["intent_accuracy"] = None
    if member is not None:
        found = np.argmax(np.asarray(jax.vmap(member_belief)(beliefs)), -1)
        out["member_accuracy"] = mean_interval((found == member).astype(np.float64))
    else:
        out["member_accuracy"] = None
    out["none_fits"] = mean_interval(
        np.asarray(jax.vmap(none_fits_probability)(beliefs), np.float64)
    )
    return out
