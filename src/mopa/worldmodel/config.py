"""Configs of the learned world models: the ensemble of state-space dynamics
models (:class:`SSMConfig`) and the JEPA latent world model
(:class:`JEPAWorldConfig`).

Both are frozen, keyword-only and hashable (static arguments of the jitted
training function); :meth:`WorldModelConfig.to_dict` and :func:`config_from_dict`
turn them into JSON and back for the model files.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, ClassVar

from mopa.core.checks import check_fields, check_unit
from mopa.core.configs import config_from_kinds
from mopa.errors import InvalidParameterError
from mopa.models.networks import ACTIVATIONS


@dataclasses.dataclass(frozen=True, kw_only=True)
class WorldModelConfig:
    """Settings every world model shares.

    The modelled state of a game with ``N`` agents is the flat feature vector
    ``[4N]``: every agent's position, then every agent's velocity
    (:func:`mopa.worldmodel.data.state_features`); the joint action is ``N``
    discrete actions, one-hot encoded.
    """

    kind: ClassVar[str] = ""

    num_agents: int
    """Agents ``N`` whose positions and velocities are modelled (all teams)."""
    num_actions: int = 5
    """Discrete actions per agent (one-hot width)."""
    hidden: tuple[int, ...] = (128, 128)
    """Widths of the hidden layers of every network."""
    activation: str = "relu"
    """Hidden activation: ``relu``, ``tanh`` or ``gelu``."""
    num_updates: int = 3000
    """Adam updates in one training run."""
    batch_size: int = 256
    """Windows per update, drawn uniformly with replacement."""
    learning_rate: float = 1e-3
    """Adam step size."""
    max_grad_norm: float = 0.0
    """Clip the gradient's global norm to this (0 turns clipping off)."""
    rollout_steps: int = 1
    """Steps ``H`` the model is rolled open-loop inside each training window (its
    loss averages the ``H`` predictions; 1 is one-step training)."""

    def __post_init__(self):
        check_fields(self)
        object.__setattr__(self, "hidden", tuple(int(h) for h in self.hidden))
        for name in (
            "num_agents",
            "num_actions",
            "num_updates",
            "batch_size",
            "learning_rate",
            "rollout_steps",
        ):
            value = getattr(self, name)
            if not value > 0:
                raise InvalidParameterError(f"{name} must be > 0, got {value!r}")
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
                f"max_grad_norm must be >= 0, got {self.max_grad_norm!r}"
            )

    @property
    def state_size(self) -> int:
        """Size of the modelled state: positions and velocities, ``4N``."""
        return 4 * self.num_agents

    @property
    def action_size(self) -> int:
        """Size of the one-hot joint action, ``N x num_actions``."""
        return self.num_agents * self.num_actions

    def to_dict(self) -> dict[str, Any]:
        """The fields as plain JSON values, with ``kind``."""
        return {"kind": self.kind, **json.loads(json.dumps(dataclasses.asdict(self)))}


@dataclasses.dataclass(frozen=True, kw_only=True)
class SSMConfig(WorldModelConfig):
    """An ensemble of MLP dynamics models in the game's state space: each member
    maps (state, joint action) to the normalised change of the state."""

    kind: ClassVar[str] = "ssm"

    num_members: int = 5
    """Ensemble members ``E``, trained together (vmapped), each on its own
    minibatches and from its own initialisation."""

    def __post_init__(self):
        super().__post_init__()
        if not self.num_members > 0:
            raise InvalidParameterError(
                f"num_members must be > 0, got {self.num_members!r}"
            )


@dataclasses.dataclass(frozen=True, kw_only=True)
class JEPAWorldConfig(WorldModelConfig):
    """A JEPA latent world model: an encoder of the state, a latent transition
    conditioned on the joint action, an EMA target encoder, and a readout of the
    state (positions and velocities) from stop-gradient latents."""

    kind: ClassVar[str] = "jepa_world"

    latent_size: int = 32
    """Size ``Z`` of the latent."""
    predictor_hidden: tuple[int, ...] = (128, 128)
    """Widths of the latent transition's hidden layers."""
    ema_decay: float = 0.99
    """Target encoder update ``target <- decay * target + (1 - decay) * encoder``."""
    normalize: bool = True
    """L2-normalise predicted and target latents before the squared error."""
    variance_weight: float = 1.0
    """Weight of the variance hinge on the online latents (each latent unit's
    batch standard deviation kept above 1, as VICReg; normalised latents are
    scaled by ``sqrt(Z)`` first) that keeps the encoder from collapsing; 0 turns
    it off. No reconstruction is involved."""
    covariance_weight: float = 1.0
    """Weight of the covariance penalty on the online latents (the squared
    off-diagonal covariances over ``Z``, as VICReg), which spreads the state's
    information over the latent's units; 0 turns it off."""
    readout_weight: float = 1.0
    """Weight of the readout's squared error (on stop-gradient latents)."""

    def __post_init__(self):
        super().__post_init__()
        object.__setattr__(
            self, "predictor_hidden", tuple(int(h) for h in self.predictor_hidden)
        )
        if not self.latent_size > 0:
            raise InvalidParameterError(
                f"latent_size must be > 0, got {self.latent_size!r}"
            )
        if not self.predictor_hidden or any(h < 1 for h in self.predictor_hidden):
            raise InvalidParameterError(
                "predictor_hidden must be a non-empty tuple of widths >= 1, "
                f"got {self.predictor_hidden}"
            )
        check_unit("ema_decay", self.ema_decay)
        for name in ("variance_weight", "covariance_weight", "readout_weight"):
            if getattr(self, name) < 0:
                raise InvalidParameterError(
                    f"{name} must be >= 0, got {getattr(self, name)!r}"
                )


CONFIG_KINDS: dict[str, type[WorldModelConfig]] = {
    cls.kind: cls for cls in (SSMConfig, JEPAWorldConfig)
}


def config_from_dict(data: dict[str, Any]) -> WorldModelConfig:
    """Rebuild a config from :meth:`WorldModelConfig.to_dict`'s output.

    Raises:
        InvalidParameterError: unknown kind or field, or an invalid value.
    """
    return config_from_kinds(data, CONFIG_KINDS, "world model")
