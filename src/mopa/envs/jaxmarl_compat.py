"""Conversions between mopa's pursuit games and JaxMARL's ``MPE_simple_tag_v3``.

Used to check mopa's ``tag`` step by step against JaxMARL (injecting the same state
into both) and by anyone moving states or observations between the two libraries.
JaxMARL names agents ``adversary_i`` (predators) then ``agent_j`` (prey), keeps
landmarks after the agents in one entity array, and gives each predator only the
last agent's velocity; see ``../shared/reference/pursuit.md``.
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp

from mopa.envs.base import TeamArrays
from mopa.envs.pursuit import PREDATOR, PREY, PursuitEnv, PursuitState

JAXMARL_TAG = "MPE_simple_tag_v3"


def make_jaxmarl_tag(env: PursuitEnv, max_steps: int = 25) -> Any:
    """JaxMARL's simple_tag with the same team sizes and obstacle count as ``env``."""
    import jaxmarl  # prints two harmless lines about submoduled environments

    return jaxmarl.make(
        JAXMARL_TAG,
        num_good_agents=env.num_prey,
        num_adversaries=env.num_predators,
        num_obs=env.num_obstacles,
        max_steps=max_steps,
        action_type="Discrete",
    )


def jaxmarl_agent_names(env: PursuitEnv) -> list[str]:
    """JaxMARL's agent names for ``env``'s agents, in mopa's agent order."""
    return [f"adversary_{i}" for i in range(env.num_predators)] + [
        f"agent_{j}" for j in range(env.num_prey)
    ]


def to_jaxmarl_state(env: PursuitEnv, state: PursuitState) -> Any:
    """JaxMARL ``State`` holding the same bodies as ``state`` (one game, unbatched)."""
    from jaxmarl.environments.mpe.simple import State

    num_entities = env.num_agents + env.num_obstacles
    return State(
        p_pos=jnp.concatenate([state.pos, state.obstacle_pos]),
        p_vel=jnp.concatenate([state.vel, jnp.zeros((env.num_obstacles, 2))]).reshape(
            num_entities, 2
        ),
        c=jnp.zeros((env.num_agents, 2)),
        done=jnp.zeros((), bool),
        step=state.step,
    )


def to_jaxmarl_actions(env: PursuitEnv, actions: TeamArrays) -> dict[str, Any]:
    """mopa's per-team actions as JaxMARL's dict keyed by agent name."""
    flat = jnp.concatenate([actions[PREDATOR], actions[PREY]])
    return {name: flat[i] for i, name in enumerate(jaxmarl_agent_names(env))}


def to_jaxmarl_obs(env: PursuitEnv, obs: TeamArrays) -> dict[str, Any]:
    """mopa's observations in JaxMARL's layout, keyed by agent name.

    The prey's layout is the same. A predator's differs only in velocities: mopa
    appends every prey's velocity, JaxMARL only the last agent's, so the earlier
    prey velocities are dropped. Extra inputs (resources, intents, beliefs) have no
    JaxMARL counterpart and must not be present.
    """
    if env.num_resources or env.num_intents:
        raise ValueError(f"{env.name} has observations JaxMARL's simple_tag lacks")
    names = jaxmarl_agent_names(env)
    keep = env.predator_obs_size - 2 * env.num_prey  # everything before prey velocities
    predator = jnp.concatenate(
        [obs[PREDATOR][:, :keep], obs[PREDATOR][:, -2:]], axis=-1
    )
    result = {names[i]: predator[i] for i in range(env.num_predators)}
    result.update(
        {names[env.num_predators + j]: obs[PREY][j] for j in range(env.num_prey)}
    )
    return result
