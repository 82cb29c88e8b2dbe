"""Configuration of MAPPO (centralised critic) and IPPO (per-agent critics)."""

from __future__ import annotations

import dataclasses

from mopa.algos.config import TrainConfig
from mopa.errors import InvalidParameterError

PPO_ALGOS = ("mappo", "ippo")
ACTIVATIONS = ("tanh", "relu", "gelu")
CRITIC_INPUTS = ("state", "all_obs")
"""What ``mappo``'s centralised critic reads (see ``MAPPOConfig.critic_input``)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class MAPPOConfig(TrainConfig):
    """PPO with one shared actor per team. ``mappo``: the team's critic sees the
    game's global state plus the team's own observations (never the other team's
    private inputs), or with ``critic_input="all_obs"`` every agent's observation;
    ``ippo``: each agent's critic sees only its own observation. The defaults are
    the research's MAPPO settings (Exp 4, Exp 6) but for its networks (two ReLU
    layers of 128) and critic input: see the ``research_*`` presets."""

    algo: str = "mappo"
    """``mappo`` (centralised critic) or ``ippo`` (per-agent critics)."""
    num_envs: int = 32
    num_steps: int = 128
    """Rollout length per update."""
    lr: float = 3e-4
    """Adam learning rate (actor and critic)."""
    anneal_lr: bool = True
    """Decay the learning rate linearly to 0 over the run."""
    gamma: float = 0.99
    """Discount."""
    gae_lambda: float = 0.95
    """GAE lambda."""
    clip_eps: float = 0.2
    """PPO ratio clip (also clips the value update)."""
    ent_coef: float = 0.01
    """Entropy bonus weight."""
    vf_coef: float = 0.5
    """Value loss weight."""
    update_epochs: int = 4
    """Passes over each rollout."""
    num_minibatches: int = 4
    """Minibatches per pass; must divide ``num_envs x num_steps``."""
    max_grad_norm: float = 0.5
    """Global gradient-norm clip (actor and critic separately)."""
    hidden: tuple[int, ...] = (128,)
    """Widths of the actor's and the critic's hidden layers (the research's
    "hidden 128" is two layers of 128; mopa's lighter default is one)."""
    activation: str = "tanh"
    """Hidden activation."""
    agent_id: bool = True
    """Append each agent's one-hot index in its team to its inputs."""
    critic_input: str = "state"
    """``mappo``'s critic input. ``state``: the game's global state and the team's
    own observations, so another team's private inputs (the prey's intent) stay
    private. ``all_obs``: every agent's raw observation concatenated, the research's
    world state (in ``tag_intent`` it holds the prey's intent one-hot)."""
    bootstrap_truncation: bool = True
    """Bootstrap the value of the final state when an episode is cut by the step
    limit (False treats truncation as termination, as many reference trainers
    do)."""

    def __post_init__(self):
        super().__post_init__()
        if self.algo not in PPO_ALGOS:
            raise InvalidParameterError(
                f"algo must be one of {PPO_ALGOS} for MAPPOConfig, got {self.algo!r}"
            )
        if self.critic_input not in CRITIC_INPUTS:
            raise InvalidParameterError(
                f"critic_input must be one of {CRITIC_INPUTS}, got "
                f"{self.critic_input!r}"
            )
        if self.critic_input != "state" and not self.centralised:
            raise InvalidParameterError(
                f"critic_input={self.critic_input!r} needs algo='mappo': ippo's "
                "critics read one agent's observation"
            )
        if self.activation not in ACTIVATIONS:
            raise InvalidParameterError(
                f"activation must be one of {ACTIVATIONS}, got {self.activation!r}"
            )
        object.__setattr__(self, "hidden", tuple(self.hidden))
        if not self.hidden or min(self.hidden) < 1:
            raise InvalidParameterError(
                f"hidden must be positive widths, got {self.hidden}"
            )
        self.check_positive(
            "lr", "clip_eps", "update_epochs", "num_minibatches", "max_grad_norm"
        )
        for name in ("gamma", "gae_lambda"):
            self.check_range(name, 0.0, 1.0)
        for name in ("ent_coef", "vf_coef"):
            if getattr(self, name) < 0:
                raise InvalidParameterError(
                    f"{name} must be >= 0, got {getattr(self, name)}"
                )
        if self.steps_per_update % self.num_minibatches:
            raise InvalidParameterError(
                f"num_minibatches ({self.num_minibatches}) must divide num_envs x "
                f"num_steps ({self.steps_per_update})"
            )

    @property
    def centralised(self) -> bool:
        return self.algo == "mappo"

    @property
    def minibatch_size(self) -> int:
        return self.steps_per_update // self.num_minibatches
