"""What a Blue of the battalion reads of Red's strategy from its own observations:
the features of a step (its observation and Red's map position recovered from
it), the classifier's input over a prefix of recorded rows and Red's motion
between them, every prefix of a recorded episode as a classifier example, and
the classifier fitted on recorded episodes (:func:`fit_row_classifier`), and its
file (:func:`save_row_classifier`, :func:`load_row_classifier`).

The belief they make (:func:`row_classifier_logits_fn` in
:func:`~mopa.opponent.beliefs.update_prefix_belief`) never sees Red's type: it
reads what Blue observes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from mopa.core.checkpoint import read_msgpack, write_msgpack
from mopa.envs.battalion import BattalionParams
from mopa.opponent.beliefs import prefix_beliefs
from mopa.opponent.calibration import calibration_by_row, fit_temperature
from mopa.opponent.encoders import ClassifierConfig, ClassifierData, make_train

NUM_FEATURES = 19
"""Features per recorded step: Blue's 17 observations and Red's map position."""

CLASSIFIER_FORMAT = "mopa-wargame-intent-belief"
"""Format tag of a fitted belief classifier's file (:func:`save_row_classifier`)."""


def belief_features(obs: jax.Array, params: BattalionParams) -> jax.Array:
    """``[NUM_FEATURES]`` what the belief reads from one step: Blue's observation
    ``[17]`` and Red's map position (x / width, y / height) recovered from it
    (Blue's position plus the observed distance along the observed bearing)."""
    diagonal = jnp.sqrt(params.map_width**2 + params.map_height**2)
    distance = obs[6] * diagonal
    red_x = obs[0] + distance * obs[7] / params.map_width
    red_y = obs[1] + distance * obs[8] / params.map_height
    return jnp.concatenate([obs, jnp.stack([red_x, red_y])])


MOTION_FEATURES = (6, 17, 18)
"""Features whose change from one row to the next the classifier also reads:
the distance to Red and Red's map position (how Red moved)."""


MOTION_SCALE = 10.0
"""Scale of those changes (a row's move of 50 m reads 0.5)."""


def classifier_input(prefix: jax.Array, length: jax.Array) -> jax.Array:
    """``[R * (F + M) + 1]`` the classifier's input: the prefix rows ``[R, F]``
    (zeros past ``length``) flattened, the change of the :data:`MOTION_FEATURES`
    ``[R, M]`` from the row before (zeros in the first row and past ``length``,
    times :data:`MOTION_SCALE`) flattened, then ``length / R``."""
    rows = prefix.shape[0]
    index = jnp.asarray(MOTION_FEATURES)
    change = (prefix[1:, index] - prefix[:-1, index]) * MOTION_SCALE
    seen = (jnp.arange(1, rows) < length)[:, None]
    motion = jnp.concatenate(
        [jnp.zeros((1, index.size)), jnp.where(seen, change, 0.0)], 0
    )
    fraction = jnp.asarray(length, jnp.float32)[None] / rows
    return jnp.concatenate([prefix.reshape(-1), motion.reshape(-1), fraction])


def row_classifier_logits_fn(c_config: ClassifierConfig, c_params: Any):
    """The :data:`~mopa.opponent.beliefs.LogitsFn` of the belief classifier."""
    module = c_config.module()

    def logits_fn(prefix: jax.Array, length: jax.Array) -> jax.Array:
        return module.apply(c_params, classifier_input(prefix, length))

    return logits_fn


def prefix_examples(
    rows: np.ndarray, num_rows: np.ndarray, labels: np.ndarray
) -> ClassifierData:
    """Every prefix of every episode as a classifier example.

    Args:
        rows: ``[M, R, F]`` recorded rows (zeros past each episode's count).
        num_rows: ``[M]`` rows recorded in each episode (at least 1).
        labels: ``[M]`` each episode's strategy (its index in the family).

    Returns:
        :class:`ClassifierData` with one example per (episode, prefix length
        ``1..num_rows``), inputs as :func:`classifier_input`.
    """
    R = rows.shape[1]
    mask = np.arange(R)[None, :, None] < np.arange(1, R + 1)[:, None, None]  # [L, R, 1]
    prefixes, lengths, ys = [], [], []
    for m in range(rows.shape[0]):
        count = int(num_rows[m])
        prefixes.append(np.where(mask[:count], rows[m][None], 0.0))
        lengths.append(np.arange(1, count + 1))
        ys.append(np.full(count, labels[m], np.int32))
    x = jax.jit(jax.vmap(classifier_input))(
        jnp.asarray(np.concatenate(prefixes), jnp.float32),
        jnp.asarray(np.concatenate(lengths), jnp.int32),
    )
    return ClassifierData(x, jnp.asarray(np.concatenate(ys)))


def rows_seen(num_rows: np.ndarray, rows: int) -> np.ndarray:
    """``[M, R]`` whether each episode (``num_rows [...]`` recorded, flattened to
    ``[M]``) had reached each of the ``rows`` belief rows."""
    return np.arange(rows)[None, :] < np.asarray(num_rows).reshape(-1)[:, None]


class RowClassifier(NamedTuple):
    """A fitted belief classifier and what it was fitted and judged on."""

    params: Any
    temperature: float
    episodes: dict[str, int]  # fit, validation and test episodes
    num_prefixes: int  # fit examples (every prefix of every fit episode)
    heldout: dict[str, list[float]]  # calibration_by_row on the test episodes


def fit_row_classifier(
    config: ClassifierConfig,
    key: jax.Array,
    rows: np.ndarray,
    num_rows: np.ndarray,
    labels: np.ndarray,
    *,
    seed: int,
    num_bins: int,
) -> RowClassifier:
    """Fit the belief classifier on recorded episodes: a quarter of them (at least
    one) held out for test and a fifth of the rest for validation (a permutation
    drawn with ``seed``), every prefix of the others a training example, the
    softmax temperature fitted on the validation prefixes, and the held-out
    episodes' belief judged row by row (:func:`~mopa.opponent.calibration.
    calibration_by_row`).

    Args:
        rows: ``[M, R, F]`` recorded rows; ``num_rows``: ``[M]``; ``labels``:
            ``[M]`` each episode's strategy.
    """
    order = np.random.default_rng(seed).permutation(labels.size)
    n_test = max(1, labels.size // 4)
    n_val = max(1, (labels.size - n_test) // 5)
    test, val, fit = (
        order[:n_test],
        order[n_test : n_test + n_val],
        order[n_test + n_val :],
    )
    fit_data = prefix_examples(rows[fit], num_rows[fit], labels[fit])
    params, _ = jax.jit(make_train(config))(key, fit_data)
    val_data = prefix_examples(rows[val], num_rows[val], labels[val])
    val_logits = config.module().apply(params, val_data.x)
    temperature = float(fit_temperature(val_logits, val_data.labels))
    logits_fn = row_classifier_logits_fn(config, params)
    R, K = rows.shape[1], config.num_classes
    test_beliefs = jax.jit(
        jax.vmap(lambda prefix: prefix_beliefs(logits_fn, prefix, K, temperature))
    )(jnp.asarray(rows[test]))
    valid = rows_seen(num_rows[test], R)
    return RowClassifier(
        params,
        temperature,
        {"fit": int(fit.size), "validation": int(val.size), "test": int(test.size)},
        int(fit_data.labels.shape[0]),
        calibration_by_row(np.asarray(test_beliefs), valid, labels[test], num_bins),
    )


def save_row_classifier(path: str | Path, fitted: RowClassifier) -> Path:
    """Write a fitted classifier's weights and temperature as msgpack."""
    return write_msgpack(
        path,
        {
            "format": CLASSIFIER_FORMAT,
            "version": 1,
            "params": jax.tree.map(np.asarray, fitted.params),
            "temperature": fitted.temperature,
        },
    )


def load_row_classifier(path: str | Path) -> tuple[Any, float]:
    """``(params, temperature)`` of the classifier :func:`save_row_classifier`
    wrote."""
    data = read_msgpack(Path(path), CLASSIFIER_FORMAT)
    return jax.tree.map(jnp.asarray, data["params"]), float(data["temperature"])
