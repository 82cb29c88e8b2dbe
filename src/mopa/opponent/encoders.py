"""Training, inference and files of the opponent encoders: an MLP-VAE, a JEPA with
an arrival readout, and a supervised strategy classifier.

Each encoder follows one pattern::

    params, metrics = jax.jit(make_train(config))(key, data)
    z = encode(config, params, x)                     # x [..., D] -> [..., Z]
    save_encoder(path, config, params); config, params = load_encoder(path)

``train`` is pure and jittable: a ``lax.scan`` over ``config.num_updates`` Adam
updates, each on ``config.batch_size`` examples drawn uniformly (with replacement)
from ``data``; ``metrics`` maps names to ``[num_updates]`` arrays. The modules are
in :mod:`mopa.models.encoders`; inputs are flat representations (see
:mod:`mopa.opponent.representations`, e.g. an occupancy histogram reshaped to
``[G x G]``).

* **VAE** (:class:`VAEConfig`, data ``x [N, D]``): the ELBO (Kingma and Welling,
  2014) with the KL weight warmed up linearly from ``beta / kl_warmup`` to
  ``beta`` over the first ``kl_warmup`` updates. ``likelihood="gaussian"`` is a
  Gaussian of fixed standard deviation ``decoder_std`` (the reconstruction term is
  the squared error over ``2 decoder_std^2`` plus a constant: "MSE");
  ``"bernoulli"`` reads the decoder's outputs as logits and each input in
  ``[0, 1]`` as a soft target (binary cross-entropy), which suits occupancy cells.
  :func:`vae_encode` gives ``(mean, logvar)``; :func:`encode` the mean.
* **JEPA** (:class:`JEPAConfig`, data :class:`JEPAData`): the context encoder
  reads the representation of a trajectory's first ``t`` steps, the predictor
  maps its latent to the latent that an EMA copy of the encoder (the *target*
  encoder, never trained by gradient) gives the *following* window; the loss is
  the squared distance of the two (after L2 normalisation, as BYOL, when
  ``normalize``), with no reconstruction. The target weights follow
  ``target <- ema_decay * target + (1 - ema_decay) * encoder`` after every update.
  A linear readout on the stop-gradient latent predicts a future quantity, by
  default the agent's arrival position (:func:`make_jepa_data`);
  :func:`predict_arrival` applies it. ``params`` is ``{"online", "target"}``.
* **Classifier** (:class:`ClassifierConfig`, data :class:`ClassifierData`): an MLP
  with softmax cross-entropy, optional label smoothing. For online use it is
  trained on *prefixes of random length* (:func:`make_prefix_data`): each example
  is the normalised occupancy of a trajectory's first ``l`` steps for several
  ``l``. A normalised histogram has the same scale at every length, so one
  network serves every prefix, and short, ambiguous prefixes are seen in training
  with their true labels. :func:`predict_proba` gives ``[..., K]``.

Files are msgpack maps of strings and arrays (the config as JSON beside the
weights), written atomically; loading checks every array against the shapes the
config implies and never executes code.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from mopa.core.checkpoint import (
    check_params_fit,
    read_msgpack,
    write_config_params,
)
from mopa.core.checks import check_fields, check_fraction, check_unit
from mopa.core.configs import config_from_kinds
from mopa.errors import CheckpointError, InvalidParameterError
from mopa.models.encoders import JEPA, VAE, Classifier
from mopa.models.networks import ACTIVATIONS
from mopa.opponent.representations import (
    ARENA_BOUNDS,
    occupancy,
    prefix_occupancies,
    recent_positions,
)

ENCODER_FORMAT = "mopa-encoder"
FORMAT_VERSION = 1
LIKELIHOODS = ("gaussian", "bernoulli")


# -- configs ---------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True, kw_only=True)
class EncoderConfig:
    """Settings every encoder shares."""

    kind: ClassVar[str] = ""

    input_size: int
    """Size ``D`` of the flat representation the encoder reads."""
    hidden: tuple[int, ...] = (128, 128)
    """Widths of the hidden layers (the VAE's decoder uses them reversed)."""
    activation: str = "relu"
    """Hidden activation: ``relu``, ``tanh`` or ``gelu``."""
    num_updates: int = 2000
    """Adam updates in one training run."""
    batch_size: int = 128
    """Examples per update, drawn uniformly with replacement."""
    learning_rate: float = 1e-3
    """Adam step size."""
    max_grad_norm: float = 0.0
    """Clip the gradient's global norm to this (0 turns clipping off)."""

    def __post_init__(self):
        check_fields(self)
        object.__setattr__(self, "hidden", tuple(int(h) for h in self.hidden))
        self._check_positive("input_size", "num_updates", "batch_size", "learning_rate")
        if not self.hidden or any(h < 1 for h in self.hidden):
            raise InvalidParameterError(
                f"hidden must be a non-empty tuple of widths >= 1, got {self.hidden}"
            )
        if self.activation not in ACTIVATIONS:
            raise InvalidParameterError(
                f"activation must be one of {sorted(ACTIVATIONS)}, "
                f"got {self.activation!r}"
            )
        if self.max_grad_norm < 0:
            raise InvalidParameterError(
                f"max_grad_norm must be >= 0, got {self.max_grad_norm}"
            )

    def _check_positive(self, *names: str) -> None:
        for name in names:
            value = getattr(self, name)
            if not value > 0:
                raise InvalidParameterError(f"{name} must be > 0, got {value}")

    def to_dict(self) -> dict[str, Any]:
        """The fields as plain JSON values, with ``kind``."""
        return {"kind": self.kind, **json.loads(json.dumps(dataclasses.asdict(self)))}


@dataclasses.dataclass(frozen=True, kw_only=True)
class VAEConfig(EncoderConfig):
    """An MLP-VAE over a flat representation."""

    kind: ClassVar[str] = "vae"

    latent_size: int = 8
    """Size ``Z`` of the latent."""
    likelihood: str = "gaussian"
    """Reconstruction term: ``gaussian`` (fixed std, squared error) or
    ``bernoulli`` (binary cross-entropy on inputs in [0, 1])."""
    decoder_std: float = 0.1
    """Standard deviation of the Gaussian likelihood."""
    beta: float = 1.0
    """Final weight of the KL term."""
    kl_warmup: int = 500
    """Updates over which the KL weight rises linearly to ``beta`` (0: none)."""

    def __post_init__(self):
        super().__post_init__()
        self._check_positive("latent_size", "decoder_std")
        if self.likelihood not in LIKELIHOODS:
            raise InvalidParameterError(
                f"likelihood must be one of {LIKELIHOODS}, got {self.likelihood!r}"
            )
        if self.beta < 0:
            raise InvalidParameterError(f"beta must be >= 0, got {self.beta}")
        if self.kl_warmup < 0:
            raise InvalidParameterError(f"kl_warmup must be >= 0, got {self.kl_warmup}")

    def module(self) -> VAE:
        return VAE(self.hidden, self.latent_size, self.input_size, self.activation)


@dataclasses.dataclass(frozen=True, kw_only=True)
class JEPAConfig(EncoderConfig):
    """A JEPA: context encoder, predictor, EMA target encoder, linear readout."""

    kind: ClassVar[str] = "jepa"

    latent_size: int = 16
    """Size ``Z`` of the latent."""
    predictor_hidden: tuple[int, ...] = (128,)
    """Widths of the predictor's hidden layers."""
    ema_decay: float = 0.99
    """Target encoder update ``target <- decay * target + (1 - decay) * encoder``."""
    normalize: bool = True
    """L2-normalise predicted and target latents before the squared error."""
    readout_size: int = 2
    """Outputs of the linear readout (2: an arrival position)."""
    readout_weight: float = 1.0
    """Weight of the readout's squared error in the loss."""

    def __post_init__(self):
        super().__post_init__()
        object.__setattr__(
            self, "predictor_hidden", tuple(int(h) for h in self.predictor_hidden)
        )
        self._check_positive("latent_size", "readout_size")
        if not self.predictor_hidden or any(h < 1 for h in self.predictor_hidden):
            raise InvalidParameterError(
                "predictor_hidden must be a non-empty tuple of widths >= 1, "
                f"got {self.predictor_hidden}"
            )
        check_unit("ema_decay", self.ema_decay)
        if self.readout_weight < 0:
            raise InvalidParameterError(
                f"readout_weight must be >= 0, got {self.readout_weight}"
            )

    def module(self) -> JEPA:
        return JEPA(
            self.hidden,
            self.latent_size,
            self.predictor_hidden,
            self.readout_size,
            self.activation,
        )


@dataclasses.dataclass(frozen=True, kw_only=True)
class ClassifierConfig(EncoderConfig):
    """A supervised softmax classifier over ``num_classes`` strategies."""

    kind: ClassVar[str] = "classifier"

    num_classes: int
    """Number of strategies ``K``."""
    label_smoothing: float = 0.0
    """Mix this much of the uniform distribution into the one-hot targets."""

    def __post_init__(self):
        super().__post_init__()
        if self.num_classes < 2:
            raise InvalidParameterError(
                f"num_classes must be >= 2, got {self.num_classes}"
            )
        check_fraction("label_smoothing", self.label_smoothing)

    def module(self) -> Classifier:
        return Classifier(self.hidden, self.num_classes, self.activation)


CONFIG_KINDS: dict[str, type[EncoderConfig]] = {
    cls.kind: cls for cls in (VAEConfig, JEPAConfig, ClassifierConfig)
}


def config_from_dict(data: dict[str, Any]) -> EncoderConfig:
    """Rebuild a config from :meth:`EncoderConfig.to_dict`'s output.

    Raises:
        InvalidParameterError: unknown kind or field, or an invalid value.
    """
    return config_from_kinds(data, CONFIG_KINDS, "encoder")


# -- data ------------------------------------------------------------------------------
class JEPAData(NamedTuple):
    """JEPA training pairs."""

    context: jax.Array  # [N, D] representation of what has been seen
    target: jax.Array  # [N, D] representation of the window that follows
    readout: jax.Array  # [N, R] the future quantity the readout predicts


class ClassifierData(NamedTuple):
    """Labelled examples."""

    x: jax.Array  # [N, D]
    labels: jax.Array  # [N] int in [0, K)


def make_jepa_data(
    positions: jax.Array,
    *,
    grid_size: int,
    cuts: Sequence[int],
    target_length: int,
    context_window: int | None = None,
    arrival_offset: int | None = None,
    recent: int = 0,
    bounds: tuple[float, float] = ARENA_BOUNDS,
) -> JEPAData:
    """JEPA pairs from trajectories, one per (trajectory, cut).

    For cut ``t`` the context is the occupancy of steps ``[0, t)`` (or of the last
    ``context_window`` of them), the target the occupancy of steps
    ``[t, t + target_length)``, and the readout target the position at step
    ``t - 1 + arrival_offset`` (the last step when ``arrival_offset`` is None:
    the "arrival position"). Steps past the end are clipped to the last one.

    Args:
        positions: ``[M, T, 2]`` one agent's positions per trajectory (episodes,
            or chains of episodes).
        grid_size: histogram cells per axis ``G``.
        cuts: context lengths ``t``, each in ``[1, T - 1]``.
        target_length: steps in the target window.
        recent: if > 0, the context and the target each also carry the last
            ``recent`` positions before their end (``t`` and ``t + target_length``,
            :func:`~mopa.opponent.representations.recent_positions`).

    Returns:
        :class:`JEPAData` with ``N = M x len(cuts)`` (trajectory-major),
        ``D = G x G + 2 x recent`` and ``R = 2``.
    """
    num_steps = positions.shape[1]
    cuts = tuple(int(t) for t in cuts)
    if not cuts or any(not 1 <= t < num_steps for t in cuts):
        raise InvalidParameterError(
            f"cuts must be non-empty and in [1, {num_steps - 1}], got {cuts}"
        )
    if target_length < 1:
        raise InvalidParameterError(f"target_length must be >= 1, got {target_length}")
    if recent < 0:
        raise InvalidParameterError(f"recent must be >= 0, got {recent}")
    cut_array = jnp.asarray(cuts)

    def one(trajectory):  # [T, 2]
        prefixes = prefix_occupancies(trajectory, grid_size, context_window, bounds)
        context = prefixes[cut_array - 1].reshape(len(cuts), -1)
        target = jax.vmap(
            lambda t: occupancy(trajectory, grid_size, t, t + target_length, bounds)
        )(cut_array).reshape(len(cuts), -1)
        if recent:
            last = lambda end: recent_positions(trajectory, end, recent)  # noqa: E731
            context = jnp.concatenate([context, jax.vmap(last)(cut_array)], -1)
            ends = jnp.minimum(cut_array + target_length, num_steps)
            target = jnp.concatenate([target, jax.vmap(last)(ends)], -1)
        if arrival_offset is None:
            arrival = jnp.broadcast_to(trajectory[-1], (len(cuts), 2))
        else:
            arrival = trajectory[
                jnp.minimum(cut_array - 1 + arrival_offset, num_steps - 1)
            ]
        return context, target, arrival

    context, target, arrival = jax.vmap(one)(jnp.asarray(positions))
    flat = lambda a: a.reshape(-1, a.shape[-1])  # noqa: E731
    return JEPAData(flat(context), flat(target), flat(arrival))


def make_prefix_data(
    positions: jax.Array,
    labels: jax.Array,
    *,
    grid_size: int,
    prefix_lengths: Sequence[int],
    window: int | None = None,
    recent: int = 0,
    bounds: tuple[float, float] = ARENA_BOUNDS,
) -> ClassifierData:
    """Classifier examples from every trajectory at several prefix lengths.

    Args:
        positions: ``[M, T, 2]`` one agent's positions per trajectory.
        labels: ``[M]`` each trajectory's strategy.
        grid_size: histogram cells per axis ``G``.
        prefix_lengths: prefix lengths ``l`` in ``[1, T]``; example ``(m, l)`` is
            the occupancy of trajectory ``m``'s first ``l`` steps (its last
            ``window`` of them if ``window`` is given).
        recent: if > 0, each example also carries the prefix's last ``recent``
            positions (:func:`~mopa.opponent.representations.recent_positions`).

    Returns:
        :class:`ClassifierData` with ``N = M x len(prefix_lengths)``
        (trajectory-major) and ``D = G x G + 2 x recent``.
    """
    num_steps = positions.shape[1]
    lengths = tuple(int(n) for n in prefix_lengths)
    if not lengths or any(not 1 <= n <= num_steps for n in lengths):
        raise InvalidParameterError(
            f"prefix_lengths must be non-empty and in [1, {num_steps}], got {lengths}"
        )
    if recent < 0:
        raise InvalidParameterError(f"recent must be >= 0, got {recent}")
    index = jnp.asarray(lengths) - 1

    def one(trajectory):
        prefixes = prefix_occupancies(trajectory, grid_size, window, bounds)
        x = prefixes[index].reshape(len(lengths), -1)
        if recent:
            last = lambda end: recent_positions(trajectory, end, recent)  # noqa: E731
            x = jnp.concatenate([x, jax.vmap(last)(index + 1)], -1)
        return x

    x = jax.vmap(one)(jnp.asarray(positions))
    labels = jnp.repeat(jnp.asarray(labels, jnp.int32), len(lengths))
    return ClassifierData(x.reshape(-1, x.shape[-1]), labels)


# -- shared training pieces ------------------------------------------------------------
class FitState(NamedTuple):
    """The carry of a training scan."""

    params: Any  # trained variables
    opt_state: Any
    target_params: Any  # JEPA's EMA target encoder variables; {} for others
    update: jax.Array  # [] int32 updates done


UpdateFn = Callable[[FitState, Any, jax.Array], tuple[FitState, dict]]


def _optimiser(config: EncoderConfig) -> optax.GradientTransformation:
    adam = optax.adam(config.learning_rate)
    if config.max_grad_norm > 0:
        return optax.chain(optax.clip_by_global_norm(config.max_grad_norm), adam)
    return adam


def _num_examples(config: EncoderConfig, data: Any) -> int:
    sizes = {int(leaf.shape[0]) for leaf in jax.tree.leaves(data)}
    if len(sizes) != 1 or 0 in sizes:
        raise InvalidParameterError(
            f"{config.kind} data: every array needs the same non-zero number of "
            f"examples on its first axis, got {sorted(sizes)}"
        )
    return sizes.pop()


def _check_width(config: EncoderConfig, name: str, x: Any) -> None:
    if x.ndim != 2 or x.shape[1] != config.input_size:
        raise InvalidParameterError(
            f"{config.kind} data {name} must be [N, {config.input_size}] "
            f"(input_size), got {tuple(x.shape)}"
        )


def _fit(
    config: EncoderConfig,
    state: FitState,
    update_fn: UpdateFn,
    data: Any,
    key: jax.Array,
) -> tuple[FitState, dict]:
    """``config.num_updates`` updates in a ``lax.scan``, each on a uniform
    minibatch of ``data`` (leaves ``[N, ...]``)."""
    num_examples = _num_examples(config, data)

    def body(state, key_t):
        key_batch, key_loss = jax.random.split(key_t)
        index = jax.random.randint(key_batch, (config.batch_size,), 0, num_examples)
        batch = jax.tree.map(lambda a: a[index], data)
        return update_fn(state, batch, key_loss)

    return jax.lax.scan(body, state, jax.random.split(key, config.num_updates))


# -- VAE -------------------------------------------------------------------------------
def init_params(config: EncoderConfig, key: jax.Array) -> Any:
    """Fresh parameters of ``config``'s encoder (for JEPA ``{"online", "target"}``,
    the target a copy of the online encoder)."""
    x = jnp.zeros((1, config.input_size))
    module = config.module()
    if isinstance(config, VAEConfig):
        key_init, key_sample = jax.random.split(key)
        return module.init(key_init, x, key_sample)
    variables = module.init(key, x)
    if isinstance(config, JEPAConfig):
        return {"online": variables, "target": _encoder_part(variables)}
    return variables


def kl_weight(config: VAEConfig, update: jax.Array) -> jax.Array:
    """The KL weight at update ``update`` (0-based): ``beta x min(1, (update + 1) /
    kl_warmup)``, or ``beta`` without warm-up."""
    if config.kl_warmup == 0:
        return jnp.asarray(config.beta, jnp.float32)
    ramp = jnp.minimum(1.0, (update + 1) / config.kl_warmup)
    return config.beta * ramp.astype(jnp.float32)


def vae_terms(
    config: VAEConfig, params: Any, x: jax.Array, key: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """Per-example reconstruction negative log-likelihood and KL (one sample).

    ``KL(N(m, e^v) || N(0, 1)) = 1/2 sum(e^v + m^2 - 1 - v)``; the Gaussian NLL is
    ``1/2 sum((x - mu)^2 / s^2 + log(2 pi s^2))``.

    Args:
        x: ``[B, D]`` representations.

    Returns:
        ``(nll [B], kl [B])``; the ELBO is ``-(nll + kl)``.
    """
    decoded, mean, logvar = config.module().apply(params, x, key)
    if config.likelihood == "gaussian":
        std = config.decoder_std
        nll = 0.5 * jnp.sum(
            ((x - decoded) / std) ** 2 + jnp.log(2 * jnp.pi * std**2), axis=-1
        )
    else:
        nll = jnp.sum(optax.sigmoid_binary_cross_entropy(decoded, x), axis=-1)
    kl = 0.5 * jnp.sum(jnp.exp(logvar) + mean**2 - 1.0 - logvar, axis=-1)
    return nll, kl


def vae_elbo(config: VAEConfig, params: Any, x: jax.Array, key: jax.Array) -> jax.Array:
    """``[B]`` one-sample ELBO estimate of each row of ``x`` ``[B, D]``."""
    nll, kl = vae_terms(config, params, x, key)
    return -(nll + kl)


def _vae_update(config: VAEConfig) -> UpdateFn:
    optimiser = _optimiser(config)

    def update(state: FitState, x: jax.Array, key: jax.Array):
        beta = kl_weight(config, state.update)

        def loss_fn(params):
            nll, kl = vae_terms(config, params, x, key)
            return jnp.mean(nll + beta * kl), (jnp.mean(nll), jnp.mean(kl))

        (loss, (nll, kl)), grads = jax.value_and_grad(loss_fn, has_aux=True)(
            state.params
        )
        updates, opt_state = optimiser.update(grads, state.opt_state, state.params)
        params = optax.apply_updates(state.params, updates)
        metrics = {
            "loss": loss,
            "nll": nll,
            "kl": kl,
            "elbo": -(nll + kl),
            "beta": beta,
        }
        return state._replace(
            params=params, opt_state=opt_state, update=state.update + 1
        ), metrics

    return update


def make_train_vae(config: VAEConfig) -> Callable:
    """``train(key, x [N, D]) -> (params, metrics)``; metrics ``loss`` (the
    annealed objective), ``nll``, ``kl``, ``elbo`` (at KL weight 1) and ``beta``,
    each ``[num_updates]`` batch means."""
    update = _vae_update(config)

    def train(key: jax.Array, x: jax.Array):
        _check_width(config, "x", x)
        key_init, key_fit = jax.random.split(key)
        params = init_params(config, key_init)
        state = FitState(params, _optimiser(config).init(params), {}, jnp.int32(0))
        state, metrics = _fit(config, state, update, x, key_fit)
        return state.params, metrics

    return train


def vae_encode(
    config: VAEConfig, params: Any, x: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """``[..., D] -> (mean [..., Z], logvar [..., Z])`` of ``q(z | x)``."""
    return config.module().apply(params, x, method=VAE.encode)


# -- JEPA ------------------------------------------------------------------------------
def _encoder_part(variables: Any) -> Any:
    """The encoder's weights of JEPA variables, as variables of a JEPA that has
    only an encoder (applied with ``method=JEPA.encode``)."""
    return {"params": {"encoder": variables["params"]["encoder"]}}


def ema(target: Any, online: Any, decay: float) -> Any:
    """``decay * target + (1 - decay) * online``, leaf by leaf."""
    return jax.tree.map(lambda t, o: decay * t + (1.0 - decay) * o, target, online)


def jepa_loss(
    config: JEPAConfig, params: Any, target_params: Any, batch: JEPAData
) -> tuple[jax.Array, dict]:
    """The JEPA objective on a batch.

    ``loss = mean ||p(f(c)) - sg(f_target(x))||^2 + readout_weight * mean ||r(sg(f(c)))
    - y||^2`` with ``f`` the online encoder, ``p`` the predictor, ``f_target`` the
    EMA encoder, ``r`` the readout and ``sg`` stop-gradient; the first term's
    vectors are L2-normalised first when ``config.normalize``.

    Args:
        params: the online variables (encoder, predictor, readout).
        target_params: the target encoder's variables (no gradient flows to them).
        batch: :class:`JEPAData` with ``[B, ...]`` leaves.

    Returns:
        ``(loss, {"prediction": ..., "readout": ...})``.
    """
    module = config.module()
    _, predicted, read = module.apply(params, batch.context)
    target = jax.lax.stop_gradient(
        module.apply(target_params, batch.target, method=JEPA.encode)
    )
    if config.normalize:
        predicted = _l2_normalise(predicted)
        target = _l2_normalise(target)
    prediction = jnp.mean(jnp.sum((predicted - target) ** 2, -1))
    readout = jnp.mean(jnp.sum((read - batch.readout) ** 2, -1))
    loss = prediction + config.readout_weight * readout
    return loss, {"prediction": prediction, "readout": readout}


def _l2_normalise(z: jax.Array) -> jax.Array:
    return z / jnp.sqrt(jnp.sum(z * z, -1, keepdims=True) + 1e-12)


def jepa_init(config: JEPAConfig, key: jax.Array) -> FitState:
    """The training carry before the first update: fresh online variables, the
    target a copy of their encoder, a fresh optimiser over the online variables
    only."""
    params = init_params(config, key)
    online = params["online"]
    return FitState(
        online, _optimiser(config).init(online), params["target"], jnp.int32(0)
    )


def jepa_update(
    config: JEPAConfig, state: FitState, batch: JEPAData, key: jax.Array | None = None
) -> tuple[FitState, dict]:
    """One Adam step on the online variables, then the EMA step of the target.

    ``key`` is unused (the JEPA loss is deterministic); it keeps the signature of
    the other encoders' updates.
    """
    del key
    (loss, metrics), grads = jax.value_and_grad(jepa_loss, argnums=1, has_aux=True)(
        config, state.params, state.target_params, batch
    )
    optimiser = _optimiser(config)
    updates, opt_state = optimiser.update(grads, state.opt_state, state.params)
    params = optax.apply_updates(state.params, updates)
    target = ema(state.target_params, _encoder_part(params), config.ema_decay)
    state = FitState(params, opt_state, target, state.update + 1)
    return state, {"loss": loss, **metrics}


def make_train_jepa(config: JEPAConfig) -> Callable:
    """``train(key, data: JEPAData) -> (params, metrics)``; ``params`` is
    ``{"online": variables, "target": encoder variables}``; metrics ``loss``,
    ``prediction`` and ``readout``, each ``[num_updates]``."""

    def train(key: jax.Array, data: JEPAData):
        _check_width(config, "context", data.context)
        _check_width(config, "target", data.target)
        if data.readout.ndim != 2 or data.readout.shape[1] != config.readout_size:
            raise InvalidParameterError(
                f"jepa data readout must be [N, {config.readout_size}] "
                f"(readout_size), got {tuple(data.readout.shape)}"
            )
        key_init, key_fit = jax.random.split(key)
        state = jepa_init(config, key_init)
        update = lambda s, b, k: jepa_update(config, s, b, k)  # noqa: E731
        state, metrics = _fit(config, state, update, data, key_fit)
        return {"online": state.params, "target": state.target_params}, metrics

    return train


def jepa_encode(config: JEPAConfig, params: Any, x: jax.Array) -> jax.Array:
    """``[..., D] -> [..., Z]``: the online (context) encoder's latent."""
    return config.module().apply(params["online"], x, method=JEPA.encode)


def predict_arrival(config: JEPAConfig, params: Any, x: jax.Array) -> jax.Array:
    """``[..., D] -> [..., readout_size]``: the readout of the context latent, e.g.
    the predicted arrival position of the agent whose prefix ``x`` represents."""
    module = config.module()
    z = module.apply(params["online"], x, method=JEPA.encode)
    return module.apply(params["online"], z, method=JEPA.read)


# -- classifier ------------------------------------------------------------------------
def classifier_loss(
    config: ClassifierConfig, params: Any, batch: ClassifierData
) -> tuple[jax.Array, dict]:
    """Mean softmax cross-entropy against label-smoothed one-hots, and accuracy."""
    logits = config.module().apply(params, batch.x)
    onehot = jax.nn.one_hot(batch.labels, config.num_classes)
    targets = optax.smooth_labels(onehot, config.label_smoothing)
    loss = jnp.mean(optax.softmax_cross_entropy(logits, targets))
    accuracy = jnp.mean(jnp.argmax(logits, -1) == batch.labels)
    return loss, {"accuracy": accuracy}


def make_train_classifier(config: ClassifierConfig) -> Callable:
    """``train(key, data: ClassifierData) -> (params, metrics)``; metrics ``loss``
    and ``accuracy`` (on each update's batch), each ``[num_updates]``."""
    optimiser = _optimiser(config)

    def update(state: FitState, batch: ClassifierData, key: jax.Array):
        del key
        (loss, metrics), grads = jax.value_and_grad(
            classifier_loss, argnums=1, has_aux=True
        )(config, state.params, batch)
        updates, opt_state = optimiser.update(grads, state.opt_state, state.params)
        params = optax.apply_updates(state.params, updates)
        state = state._replace(
            params=params, opt_state=opt_state, update=state.update + 1
        )
        return state, {"loss": loss, **metrics}

    def train(key: jax.Array, data: ClassifierData):
        _check_width(config, "x", data.x)
        key_init, key_fit = jax.random.split(key)
        params = init_params(config, key_init)
        state = FitState(params, optimiser.init(params), {}, jnp.int32(0))
        state, metrics = _fit(config, state, update, data, key_fit)
        return state.params, metrics

    return train


def predict_proba(config: ClassifierConfig, params: Any, x: jax.Array) -> jax.Array:
    """``[..., D] -> [..., K]``: the softmax over strategies (rows sum to 1)."""
    return jax.nn.softmax(config.module().apply(params, x), axis=-1)


# -- every encoder ---------------------------------------------------------------------
def make_train(config: EncoderConfig) -> Callable:
    """The ``train(key, data) -> (params, metrics)`` of ``config``'s encoder (data
    ``x [N, D]`` for the VAE, :class:`JEPAData`, :class:`ClassifierData`)."""
    if isinstance(config, VAEConfig):
        return make_train_vae(config)
    if isinstance(config, JEPAConfig):
        return make_train_jepa(config)
    if isinstance(config, ClassifierConfig):
        return make_train_classifier(config)
    raise InvalidParameterError(f"not an encoder config: {type(config).__name__}")


def encode(config: EncoderConfig, params: Any, x: jax.Array) -> jax.Array:
    """``[..., D] -> [..., Z]``: the VAE's posterior mean, the JEPA's context
    latent, or the classifier's last hidden layer."""
    if isinstance(config, VAEConfig):
        return vae_encode(config, params, x)[0]
    if isinstance(config, JEPAConfig):
        return jepa_encode(config, params, x)
    if isinstance(config, ClassifierConfig):
        return config.module().apply(params, x, method=Classifier.features)
    raise InvalidParameterError(f"not an encoder config: {type(config).__name__}")


# -- files -----------------------------------------------------------------------------
def save_encoder(
    path: str | Path,
    config: EncoderConfig,
    params: Any,
    metadata: dict[str, Any] | None = None,
) -> Path:
    """Write ``config`` (JSON) and ``params`` (arrays) as one msgpack file,
    atomically. ``metadata`` is any JSON-able dict kept beside them."""
    _check_params(config, params, InvalidParameterError, "params")
    return write_config_params(
        path, ENCODER_FORMAT, FORMAT_VERSION, config.to_dict(), params, metadata
    )


def load_encoder(path: str | Path) -> tuple[EncoderConfig, Any]:
    """Read ``(config, params)`` written by :func:`save_encoder`.

    Raises:
        CheckpointError: missing or corrupt file, another format or version, a bad
            config, or weights that do not fit the config.
    """
    path = Path(path)
    data = read_msgpack(path, ENCODER_FORMAT, FORMAT_VERSION, noun="encoder file")
    try:
        config = config_from_dict(json.loads(data["config"]))
    except (KeyError, TypeError, ValueError) as error:
        raise CheckpointError(f"{path}: bad encoder config ({error})") from None
    params = jax.tree.map(jnp.asarray, data.get("params"))
    _check_params(config, params, CheckpointError, str(path))
    return config, params


def _check_params(
    config: EncoderConfig, params: Any, error: type[Exception], where: str
) -> None:
    """Raise ``error`` unless ``params`` has exactly the arrays ``config`` needs."""
    expected = jax.eval_shape(lambda k: init_params(config, k), jax.random.key(0))
    check_params_fit(expected, params, error, where, f"the {config.kind} config")


@functools.lru_cache(maxsize=16)
def _vae_train(config: VAEConfig):
    """One jitted trainer per config, so a sweep compiles once per data shape."""
    return jax.jit(make_train(config))


def fit_vae(config: VAEConfig, features: np.ndarray, seed: int) -> Any:
    """VAE parameters trained on ``features [N, D]`` with encoder seed ``seed``."""
    params, _ = _vae_train(config)(
        jax.random.key(seed), np.asarray(features, np.float32)
    )
    return params


def latent_means(config: VAEConfig, params: Any, features: np.ndarray) -> np.ndarray:
    """``[N, Z]`` posterior means of ``features [N, D]``."""
    mean, _ = vae_encode(config, params, np.asarray(features, np.float32))
    return np.asarray(mean)
