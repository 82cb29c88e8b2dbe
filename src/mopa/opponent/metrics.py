"""Standard metrics of an opponent representation, as thin wrappers over
scikit-learn (nothing here is hand-rolled):

* :func:`probe_accuracy`: a linear probe (standardised features, logistic
  regression) cross-validated over folds that keep each episode (``groups``) on one
  side; :func:`probe_accuracy_split` for a given train/test split;
* :func:`cluster_scores`: adjusted Rand index and normalised mutual information of
  k-means or Gaussian-mixture clusters against the true labels;
* :func:`gmm_bic`: the Bayesian information criterion of Gaussian mixtures over a
  range of component counts, and the count it prefers.

Host-side (NumPy in, floats out) and deterministic given ``seed``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from mopa.errors import InvalidParameterError
from mopa.opponent.data import split_indices
from mopa.opponent.encoders import fit_vae, latent_means

CLUSTER_METHODS = ("kmeans", "gmm")


class ClusterScores(NamedTuple):
    """Agreement of a clustering with the true labels."""

    ari: float  # adjusted Rand index (0 at chance, 1 perfect)
    nmi: float  # normalised mutual information (0 independent, 1 perfect)
    assignments: np.ndarray  # [N] cluster of each example


class BICResult(NamedTuple):
    """Gaussian-mixture BIC over component counts."""

    num_components: tuple[int, ...]  # the counts tried
    bic: tuple[float, ...]  # BIC of each (lower is better)
    best: int  # the count with the lowest BIC


def probe_accuracy(
    features: Any,
    labels: Any,
    groups: Any | None = None,
    num_folds: int = 5,
    seed: int = 0,
    regularization: float = 1.0,
) -> float:
    """Mean held-out accuracy of a linear probe over ``num_folds`` folds.

    The probe is ``StandardScaler -> LogisticRegression(C=regularization)``. Folds
    are ``StratifiedGroupKFold`` when ``groups`` is given (every example of one
    group, e.g. the windows of one episode, falls in the same fold, so the probe is
    never tested on an episode it was trained on) and ``StratifiedKFold`` otherwise;
    both shuffled with ``seed``.

    Args:
        features: ``[N, F]`` representations.
        labels: ``[N]`` classes (e.g. the specialist or the intent).
        groups: ``[N]`` episode ids, or ``None`` when every row is its own episode.
        num_folds: cross-validation folds (>= 2).
        seed: shuffling seed.
        regularization: inverse L2 strength ``C``.
    """
    from sklearn.model_selection import (
        StratifiedGroupKFold,
        StratifiedKFold,
        cross_val_score,
    )

    features, labels = _check_features(features, labels)
    if num_folds < 2:
        raise InvalidParameterError(f"num_folds must be >= 2, got {num_folds}")
    if groups is None:
        folds = StratifiedKFold(num_folds, shuffle=True, random_state=seed)
    else:
        groups = np.asarray(groups)
        if groups.shape != labels.shape:
            raise InvalidParameterError(
                f"groups must have shape {labels.shape}, got {groups.shape}"
            )
        folds = StratifiedGroupKFold(num_folds, shuffle=True, random_state=seed)
    scores = cross_val_score(
        linear_probe(regularization, seed), features, labels, groups=groups, cv=folds
    )
    return float(np.mean(scores))


def probe_accuracy_split(
    train_features: Any,
    train_labels: Any,
    test_features: Any,
    test_labels: Any,
    seed: int = 0,
    regularization: float = 1.0,
) -> float:
    """Accuracy on the test set of a linear probe fit on the training set (split
    by episode beforehand, e.g. with the trajectory datasets' episode splits)."""
    train_features, train_labels = _check_features(train_features, train_labels)
    test_features, test_labels = _check_features(test_features, test_labels)
    probe = linear_probe(regularization, seed).fit(train_features, train_labels)
    return float(probe.score(test_features, test_labels))


def linear_probe(regularization: float = 1.0, seed: int = 0):
    """The probe: an unfitted ``StandardScaler -> LogisticRegression`` pipeline."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    if regularization <= 0:
        raise InvalidParameterError(f"regularization must be > 0, got {regularization}")
    return make_pipeline(
        StandardScaler(),
        LogisticRegression(C=regularization, max_iter=2000, random_state=seed),
    )


def cluster_scores(
    features: Any,
    labels: Any,
    num_clusters: int,
    method: str = "kmeans",
    seed: int = 0,
) -> ClusterScores:
    """Cluster ``features`` and score the clusters against ``labels``.

    Args:
        features: ``[N, F]`` representations (e.g. VAE latent means).
        labels: ``[N]`` true classes.
        num_clusters: clusters to fit.
        method: ``"kmeans"`` (``KMeans``, 10 restarts) or ``"gmm"``
            (``GaussianMixture``, full covariances, 5 restarts).
        seed: the clustering's ``random_state``.

    Returns:
        :class:`ClusterScores` from ``adjusted_rand_score`` and
        ``normalized_mutual_info_score``.
    """
    from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score

    features, labels = _check_features(features, labels)
    assignments = cluster(features, num_clusters, method, seed)
    return ClusterScores(
        ari=float(adjusted_rand_score(labels, assignments)),
        nmi=float(normalized_mutual_info_score(labels, assignments)),
        assignments=assignments,
    )


def cluster(features: Any, num_clusters: int, method: str = "kmeans", seed: int = 0):
    """Cluster assignments ``[N]`` of ``features [N, F]``; see
    :func:`cluster_scores`."""
    from sklearn.cluster import KMeans
    from sklearn.mixture import GaussianMixture

    if method not in CLUSTER_METHODS:
        raise InvalidParameterError(
            f"method must be one of {CLUSTER_METHODS}, got {method!r}"
        )
    if num_clusters < 1:
        raise InvalidParameterError(f"num_clusters must be >= 1, got {num_clusters}")
    features = np.asarray(features, np.float64)
    if method == "kmeans":
        model = KMeans(num_clusters, n_init=10, random_state=seed)
    else:
        model = GaussianMixture(num_clusters, n_init=5, random_state=seed)
    return np.asarray(model.fit_predict(features))


def gmm_bic(
    features: Any,
    num_components: Sequence[int] = (1, 2, 3, 4, 5, 6),
    seed: int = 0,
    covariance_type: str = "full",
) -> BICResult:
    """``GaussianMixture(k).bic(features)`` for every ``k`` in ``num_components``.

    A drop in BIC from ``k = 1`` to the best ``k`` says the representation is
    multi-modal (Exp 2's "Reading B"); the best ``k`` is its guess at the number
    of modes.

    Args:
        features: ``[N, F]`` representations.
        num_components: the component counts to try.
        seed: the mixtures' ``random_state``.
        covariance_type: as in scikit-learn (``"full"``, ``"diag"``, ...).
    """
    from sklearn.mixture import GaussianMixture

    features = np.asarray(features, np.float64)
    if features.ndim != 2:
        raise InvalidParameterError(
            f"features must be [N, F], got shape {features.shape}"
        )
    counts = tuple(int(k) for k in num_components)
    if not counts or min(counts) < 1:
        raise InvalidParameterError(
            f"num_components must be positive counts, got {counts}"
        )
    bic = tuple(
        float(
            GaussianMixture(
                k, covariance_type=covariance_type, n_init=3, random_state=seed
            )
            .fit(features)
            .bic(features)
        )
        for k in counts
    )
    return BICResult(num_components=counts, bic=bic, best=counts[int(np.argmin(bic))])


def _check_features(features: Any, labels: Any) -> tuple[np.ndarray, np.ndarray]:
    features = np.asarray(features, np.float64)
    labels = np.asarray(labels)
    if features.ndim != 2 or labels.shape != features.shape[:1]:
        raise InvalidParameterError(
            f"features must be [N, F] and labels [N], got shapes {features.shape} "
            f"and {labels.shape}"
        )
    return features, labels


def score_latents(
    train_z: np.ndarray,
    train_labels: np.ndarray,
    test_z: np.ndarray,
    test_labels: np.ndarray,
    num_clusters: int,
    seed: int,
) -> dict[str, float]:
    """ARI / NMI of k-means on the held-out latents, and a linear probe fit on the
    training latents and scored on the held-out ones."""
    clusters = cluster_scores(test_z, test_labels, num_clusters, "kmeans", seed)
    probe = probe_accuracy_split(train_z, train_labels, test_z, test_labels, seed)
    return {"ari": clusters.ari, "nmi": clusters.nmi, "probe": probe}


def score_vae_seeds(
    config: Any,
    features: np.ndarray,
    train: np.ndarray,
    test: np.ndarray,
    labellings: Sequence[tuple[np.ndarray, int]],
    num_seeds: int,
    base_seed: int,
) -> tuple[list[list[dict[str, float]]], Any]:
    """A VAE sweep over encoder seeds: for each seed ``s`` a VAE
    (:func:`~mopa.opponent.encoders.fit_vae`, seed ``base_seed + s``) fitted on
    ``features[train]`` ``[N, D]``, its latent means scored against every
    labelling (:func:`score_latents` on the ``train`` and ``test`` indices).

    Args:
        config: the :class:`~mopa.opponent.encoders.VAEConfig`.
        labellings: ``(labels [N], number of clusters)`` pairs.

    Returns:
        ``(scores, first)``: per labelling, the scores of every seed; the first
        seed's VAE weights.
    """
    scores: list[list[dict[str, float]]] = [[] for _ in labellings]
    first = None
    for encoder_seed in range(num_seeds):
        params = fit_vae(config, features[train], base_seed + encoder_seed)
        first = params if encoder_seed == 0 else first
        z = latent_means(config, params, features)
        for out, (labels, clusters) in zip(scores, labellings, strict=True):
            out.append(
                score_latents(
                    z[train], labels[train], z[test], labels[test], clusters,
                    encoder_seed,
                )
            )  # fmt: skip
    return scores, first


def subsampled_probe(
    features: np.ndarray,
    labels: np.ndarray,
    sizes: Sequence[int],
    repeats: int,
    test_fraction: float,
    seed: int,
) -> dict[str, dict[str, float]]:
    """``{SIZE: {"mean", "std", "p05", "repeats"}}``: held-out accuracy of the
    linear probe (:func:`probe_accuracy_split`) refit on ``repeats`` random subsets
    of SIZE of the examples ``features [N, D]`` (sizes above ``N`` are skipped),
    each label of ``labels [N]`` keeping its share, each subset split by
    :func:`~mopa.opponent.data.split_indices` (stratified, ``test_fraction``)."""
    rng = np.random.default_rng(seed)
    classes = [np.flatnonzero(labels == label) for label in np.unique(labels)]
    out = {}
    for size in sizes:
        if size > len(labels):
            continue
        scores = []
        for repeat in range(repeats):
            subset = np.concatenate(
                [
                    rng.permutation(members)[: round(size * len(members) / len(labels))]
                    for members in classes
                ]
            )
            train_index, test_index = split_indices(
                len(subset), test_fraction, seed + repeat, labels[subset]
            )
            scores.append(
                probe_accuracy_split(
                    features[subset[train_index]],
                    labels[subset[train_index]],
                    features[subset[test_index]],
                    labels[subset[test_index]],
                    seed,
                )
            )
        scores = np.asarray(scores)
        out[str(size)] = {
            "mean": float(scores.mean()),
            "std": float(scores.std(ddof=1)) if len(scores) > 1 else 0.0,
            "p05": float(np.percentile(scores, 5)),
            "repeats": len(scores),
        }
    return out
