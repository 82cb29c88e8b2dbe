"""A league learner's head start: record a scripted teacher, fit the learner's
actor to its moves (behaviour cloning with label smoothing) and write it as the
policy checkpoint a training run starts from (``init_checkpoint``).

The battalion's teacher is
:func:`~mopa.envs.battalion_wrappers.cover_teacher_action`, a Blue that fights
from cover; ``mopa experiment wargame_ladder`` starts its PPO run from its clone.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from mopa.core import checkpoint
from mopa.core.checks import check_fields, check_fraction
from mopa.core.runinfo import run_metadata
from mopa.envs import make
from mopa.envs.battalion_wrappers import cover_teacher_action
from mopa.errors import InvalidParameterError
from mopa.league.training import TrainingConfig, learner_spec
from mopa.policy import agent_inputs, fit_actor


@dataclasses.dataclass(frozen=True, kw_only=True)
class CloneConfig:
    """Behaviour cloning of :func:`cover_teacher_action` into the learner's actor
    (the start of the PPO run)."""

    num_episodes: int = 512
    """Teacher episodes recorded (against the training mixture's Red)."""
    num_updates: int = 3000
    """Adam steps of the cross-entropy fit."""
    batch_size: int = 2048
    """Recorded steps per Adam step (drawn uniformly with replacement)."""
    lr: float = 1e-3
    """Adam learning rate."""
    label_smoothing: float = 0.1
    """Probability mass spread uniformly over all actions in the targets, so that
    the cloned actor still explores when PPO takes over."""
    hold_until: float = 0.3
    """The teacher's ``hold_until``."""
    close_range: float = 120.0
    """The teacher's ``close_range``, metres."""
    critic_warmup_chunks: int = 1
    """PPO chunks at the start during which the cloned actor is held while the
    fresh critic learns."""
    seed: int = 0
    """Seed of the recorded episodes, the initial weights and the minibatches."""

    def __post_init__(self):
        check_fields(self)
        for name in ("num_episodes", "num_updates", "batch_size"):
            if getattr(self, name) < 1:
                raise InvalidParameterError(
                    f"{name} must be >= 1, got {getattr(self, name)}"
                )
        if self.lr <= 0:
            raise InvalidParameterError(f"lr must be > 0, got {self.lr}")
        check_fraction("label_smoothing", self.label_smoothing)
        if self.critic_warmup_chunks < 0:
            raise InvalidParameterError(
                f"critic_warmup_chunks must be >= 0, got {self.critic_warmup_chunks}"
            )


def teacher_episodes(
    env: Any, params: Any, clone: CloneConfig, key: jax.Array
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Play ``clone.num_episodes`` episodes of :func:`cover_teacher_action`.

    Returns:
        ``(obs [E, T, D], actions [E, T], live [E, T])``: Blue's observation and
        the teacher's action at every step, and whether the episode was still
        running (steps after its end are padding).
    """
    num_steps = int(params.max_steps)

    def episode(key):
        key_reset, key_run = jax.random.split(key)
        obs, state = env.reset(key_reset, params)

        def body(carry, key_step):
            obs, state, live = carry
            own = obs[0][0]
            action = cover_teacher_action(
                own, params, clone.hold_until, clone.close_range
            )
            obs, state, _, terminated, truncated, _ = env.step(
                key_step, state, (action[None],), params
            )
            return (obs, state, live & ~(terminated | truncated)), (own, action, live)

        init = (obs, state, jnp.ones((), bool))
        _, out = jax.lax.scan(body, init, jax.random.split(key_run, num_steps))
        return out

    keys = jax.random.split(key, clone.num_episodes)
    return jax.jit(jax.vmap(episode))(keys)


def clone_blue(
    training: TrainingConfig, clone: CloneConfig, folder: Path, progress
) -> dict[str, Any]:
    """Record the teacher against ``training``'s game, fit the learner's actor to
    it and write it as a policy checkpoint ``folder/cloned.msgpack`` (the
    ``init_checkpoint`` of the PPO run).

    Returns:
        ``{"checkpoint", "samples", "teacher_agreement", "final_loss",
        "wall_s"}``; the agreement is the greedy cloned actor's share of
        recorded steps on which it picks the teacher's action.
    """
    start = time.perf_counter()
    overrides = {**dict(training.game_kwargs), "discrete": True}
    env, params = make(training.game, **overrides)
    spec = learner_spec(env, 0, training)
    key_play, key_fit = jax.random.split(jax.random.key(clone.seed))
    obs, actions, live = teacher_episodes(env, params, clone, key_play)
    live = np.asarray(live).reshape(-1)
    obs = np.asarray(obs).reshape(live.size, -1)[live]
    actions = np.asarray(actions).reshape(-1)[live]
    params_actor, losses = fit_actor(
        spec,
        obs[:, None, :],  # one agent
        actions[:, None],
        key_fit,
        num_updates=clone.num_updates,
        batch_size=clone.batch_size,
        lr=clone.lr,
        label_smoothing=clone.label_smoothing,
    )
    logits = spec.module().apply(params_actor, agent_inputs(spec, obs[:, None, :]))
    agreement = float(np.mean(np.argmax(np.asarray(logits)[:, 0], -1) == actions))
    path = checkpoint.write_policy_checkpoint(
        folder / "cloned.msgpack",
        algo="bc",
        env=training.game,  # the one-team game (terrain_obs needs it)
        env_overrides=overrides,
        config={"training": training.identity(), "clone": dataclasses.asdict(clone)},
        meta=run_metadata(dataclasses.asdict(clone)),
        teams={"blue": (spec.to_dict(), jax.tree.map(lambda x: x[None], params_actor))},
    )
    wall_s = time.perf_counter() - start
    progress(
        f"clone: {len(actions)} teacher steps, agreement {agreement:.3f}, "
        f"loss {losses[-1]:.3f}, {wall_s:.0f} s"
    )
    return {
        "checkpoint": str(path),
        "samples": int(len(actions)),
        "teacher_agreement": agreement,
        "final_loss": float(losses[-1]),
        "wall_s": wall_s,
    }
