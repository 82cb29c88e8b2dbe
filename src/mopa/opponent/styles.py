"""Opponent styles discovered without labels, and a population model fitted on them.

An opponent population seen only through its trajectories (no identities, no
intents) is modelled in three steps:

1. :func:`episode_features`: each episode of the opponent team becomes one
   vector, the mean of its agents' observations and the frequency of each of its
   actions over the episode (any game: observations are vectors, actions
   discrete).
2. :func:`discover_styles`: the features, standardised, are compressed by a VAE
   (:mod:`mopa.opponent.encoders`) and its latent means clustered by k-means
   (scikit-learn); the number of styles is given or chosen by the silhouette
   score. Each cluster is a *style*: episodes that play alike, whichever policy
   (or intent) played them.
3. :func:`fit_style_population`: one behaviour clone per style (and the pooled
   member), a :mod:`mopa.opponent.population` library with ``K = 1``: the online
   belief, the none-fits test and the planners' population model then work as for
   a labelled family.

True identities, where a caller has them, are for evaluation only
(:func:`style_purity`).
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from mopa.core.checks import check_fields
from mopa.errors import InvalidParameterError
from mopa.opponent.bc import BCConfig
from mopa.opponent.data import TrajectoryDataset
from mopa.opponent.encoders import VAEConfig, make_train_vae, vae_encode
from mopa.opponent.metrics import cluster as fit_clusters
from mopa.opponent.population import MemberData, PopulationConfig, fit_population


@dataclasses.dataclass(frozen=True, kw_only=True)
class StyleConfig:
    """How styles are found and cloned."""

    num_styles: int | None = None
    """Styles (clusters); ``None`` picks the count in ``[2, max_styles]`` with the
    best silhouette score."""
    max_styles: int = 6
    """Largest count tried when ``num_styles`` is ``None``."""
    latent_size: int = 4
    """The VAE's latent width (what k-means clusters)."""
    vae_hidden: tuple[int, ...] = (64,)
    """The VAE's hidden widths."""
    vae_updates: int = 1500
    """The VAE's Adam updates."""
    clone: BCConfig = dataclasses.field(
        default_factory=lambda: BCConfig(num_actions=5, hidden=(64, 64), num_epochs=5)
    )
    """Each style's clone (its ``num_actions`` must be the opponent's)."""
    pooled_member: bool = True
    """Add the family's average member (see :class:`PopulationConfig`)."""
    drop_obs_tail: int = 0
    """Trailing observation entries of the opponent that neither the features nor
    the clones read (what the modelling side cannot see, such as the opponent's
    own intent)."""
    seed: int = 0
    """k-means' seed (the VAE and clones take the caller's key)."""

    def __post_init__(self):
        check_fields(self)
        object.__setattr__(self, "vae_hidden", tuple(int(h) for h in self.vae_hidden))
        if self.num_styles is not None and self.num_styles < 1:
            raise InvalidParameterError(
                f"num_styles must be >= 1 or None, got {self.num_styles}"
            )
        if self.max_styles < 2:
            raise InvalidParameterError(
                f"max_styles must be >= 2, got {self.max_styles}"
            )
        if self.drop_obs_tail < 0:
            raise InvalidParameterError(
                f"drop_obs_tail must be >= 0, got {self.drop_obs_tail}"
            )
        for name in ("latent_size", "vae_updates"):
            if getattr(self, name) < 1:
                raise InvalidParameterError(
                    f"{name} must be >= 1, got {getattr(self, name)}"
                )

    def population_config(self) -> PopulationConfig:
        return PopulationConfig(
            clone=self.clone,
            pooled_member=self.pooled_member,
            drop_obs_tail=self.drop_obs_tail,
        )


class EpisodeSteps(NamedTuple):
    """Where each episode's steps are in a dataset."""

    chain: np.ndarray  # [E] the chain of each episode
    episode: np.ndarray  # [E] its index in the chain


class Styles(NamedTuple):
    """The styles found in a set of episodes."""

    labels: np.ndarray  # [E] int: each episode's style
    num_styles: int
    silhouette: dict[int, float]  # count tried -> silhouette score
    latents: np.ndarray  # [E, Z] the VAE latent means clustered


def episode_features(
    dataset: TrajectoryDataset, team: str, num_actions: int, drop_obs_tail: int = 0
) -> tuple[np.ndarray, EpisodeSteps]:
    """One row per whole episode of ``team``: the mean observation of its agents
    (without the last ``drop_obs_tail`` entries) and the frequency of each of its
    ``num_actions`` actions.

    Returns:
        ``(features [E, D - drop_obs_tail + num_actions], where)``.
    """
    width = dataset[f"obs.{team}"].shape[-1]
    if not 0 <= drop_obs_tail < width:
        raise InvalidParameterError(
            f"drop_obs_tail must be in [0, {width}), got {drop_obs_tail}"
        )
    actions = np.asarray(dataset[f"actions.{team}"])  # [C, S, A_t]
    if actions.size and (actions.min() < 0 or actions.max() >= num_actions):
        raise InvalidParameterError(
            f"{team!r}'s actions must be in [0, {num_actions}), got "
            f"[{actions.min()}, {actions.max()}]"
        )
    valid = np.asarray(dataset["valid"], bool)  # [C, S]
    episode = np.asarray(dataset["episode"])  # [C, S]
    steps_of = _episode_steps(dataset, team)
    rows, chains, episodes = [], [], []
    for c in range(valid.shape[0]):
        for e in np.unique(episode[c][valid[c]]):
            seen, taken = steps_of(c, e)
            seen = seen[:, : width - drop_obs_tail]
            counts = np.bincount(taken, minlength=num_actions)[:num_actions]
            rows.append(np.concatenate([seen.mean(0), counts / max(taken.size, 1)]))
            chains.append(c)
            episodes.append(int(e))
    if not rows:
        raise InvalidParameterError(f"the dataset holds no whole episode of {team!r}")
    where = EpisodeSteps(np.asarray(chains), np.asarray(episodes))
    return np.stack(rows).astype(np.float32), where


def _episode_steps(dataset: TrajectoryDataset, team: str):
    """``steps_of(chain, episode) -> (obs [n, D], actions [n])``: every valid step
    of ``team``'s agents in one episode (agents pooled), the arrays read once."""
    obs = np.asarray(dataset[f"obs.{team}"], np.float32)  # [C, S, A_t, D]
    actions = np.asarray(dataset[f"actions.{team}"])  # [C, S, A_t]
    valid = np.asarray(dataset["valid"], bool)  # [C, S]
    episode = np.asarray(dataset["episode"])  # [C, S]

    def steps_of(chain: int, index: int) -> tuple[np.ndarray, np.ndarray]:
        steps = valid[chain] & (episode[chain] == index)
        return (
            obs[chain, steps].reshape(-1, obs.shape[-1]),
            actions[chain, steps].reshape(-1),
        )

    return steps_of


def discover_styles(
    key: jax.Array, features: np.ndarray, config: StyleConfig
) -> Styles:
    """Cluster episodes by style (see the module docstring, step 2).

    Args:
        key: PRNG key of the VAE.
        features: ``[E, F]`` :func:`episode_features`.
        config: the discovery's settings.
    """
    features = np.asarray(features, np.float32)
    if features.ndim != 2 or not np.all(np.isfinite(features)):
        raise InvalidParameterError(
            f"features must be finite [E, F], got shape {features.shape}"
        )
    count = features.shape[0]
    wanted = config.num_styles or 2
    if count < max(wanted, 2) + 1:
        raise InvalidParameterError(
            f"{count} episodes are too few to find {wanted} styles"
        )
    scale = features.std(0)
    standard = (features - features.mean(0)) / np.where(scale > 1e-6, scale, 1.0)
    vae = VAEConfig(
        input_size=standard.shape[1],
        hidden=config.vae_hidden,
        latent_size=config.latent_size,
        num_updates=config.vae_updates,
        decoder_std=1.0,
        kl_warmup=min(500, config.vae_updates),
    )
    x = jnp.asarray(standard)
    params, _ = jax.jit(make_train_vae(vae))(key, x)
    latents = np.asarray(vae_encode(vae, params, x)[0], np.float64)

    def cluster(k: int) -> np.ndarray:
        return fit_clusters(latents, k, "kmeans", config.seed)

    if config.num_styles is not None:
        labels = cluster(config.num_styles)
        return Styles(labels, config.num_styles, {}, latents.astype(np.float32))
    from sklearn.metrics import silhouette_score

    scores, fits = {}, {}
    for k in range(2, min(config.max_styles, count - 1) + 1):
        fits[k] = cluster(k)
        if len(np.unique(fits[k])) < 2:
            continue
        scores[k] = float(silhouette_score(latents, fits[k]))
    best = max(scores, key=scores.get) if scores else 2
    return Styles(fits[best], best, scores, latents.astype(np.float32))


def style_members(
    dataset: TrajectoryDataset, team: str, where: EpisodeSteps, labels: np.ndarray
) -> list[MemberData]:
    """Every step of each style's episodes, one :class:`MemberData` per style
    (intent 0: the styles are the model's only latent)."""
    steps_of = _episode_steps(dataset, team)
    members = []
    for style in range(int(labels.max()) + 1):
        seen, taken = [], []
        chosen = labels == style
        for c, e in zip(where.chain[chosen], where.episode[chosen], strict=True):
            obs, actions = steps_of(c, e)
            seen.append(obs)
            taken.append(actions)
        if not seen:
            raise InvalidParameterError(f"style {style} has no episode")
        taken = np.concatenate(taken).astype(np.int32)
        members.append(MemberData(np.concatenate(seen), taken, np.zeros_like(taken)))
    return members


def fit_style_population(
    key: jax.Array,
    dataset: TrajectoryDataset,
    team: str,
    config: StyleConfig,
) -> tuple[PopulationConfig, Any, Styles]:
    """Discover ``team``'s styles in ``dataset`` and clone each.

    Returns:
        ``(population config, clone weights [M, ...], styles)``; ``M`` the styles
        (plus the pooled member), usable by every function of
        :mod:`mopa.opponent.population` and by
        :class:`~mopa.opponent.belief_game.BeliefObservation`.
    """
    key_vae, key_clones = jax.random.split(key)
    features, where = episode_features(
        dataset, team, config.clone.num_actions, config.drop_obs_tail
    )
    styles = discover_styles(key_vae, features, config)
    members = style_members(dataset, team, where, styles.labels)
    smallest = min(m.actions.size for m in members)
    clone = config.clone
    if clone.batch_size > smallest:
        clone = dataclasses.replace(clone, batch_size=smallest)
    population = dataclasses.replace(config.population_config(), clone=clone)
    clones, _ = fit_population(key_clones, population, members)
    return population, clones, styles


def style_purity(labels: np.ndarray, truth: np.ndarray) -> dict[str, float]:
    """How the styles found match known identities (evaluation only):
    ``{"ari", "purity"}`` (the adjusted Rand index, and the share of episodes
    whose style's most common identity is their own)."""
    from sklearn.metrics import adjusted_rand_score

    labels, truth = np.asarray(labels), np.asarray(truth)
    if labels.shape != truth.shape:
        raise InvalidParameterError(
            f"labels and truth must have one shape, got {labels.shape} and "
            f"{truth.shape}"
        )
    hits = 0
    for style in np.unique(labels):
        _, counts = np.unique(truth[labels == style], return_counts=True)
        hits += int(counts.max())
    return {
        "ari": float(adjusted_rand_score(truth, labels)),
        "purity": hits / max(labels.size, 1),
    }
