"""Exps 2-4 component by component: mopa's games and IQL update against the
research's own code, from the same states, actions, batches and parameters.

Reads what ``research_code_side.py`` wrote in the research's environment:

* ``--rollouts`` (its ``rollout`` command): the research's static game (Exp 2, each
  shaping variant) and resource game (Exp 4) stepped with ``step_env`` from reset
  states with random actions. mopa's game of the matching ``research_*`` preset
  is given each start state (positions, velocities, obstacles, resources) and the
  same actions, and the two are compared transition by transition: positions,
  velocities, every agent's reward and every observation (the prey's resource
  inputs reordered from mopa's per-resource ``(dx, dy, flag)`` to the research's
  positions then flags). How often captures, shaping bonuses, collections and
  boundary penalties happened is counted, so a match is known to cover them.
* ``--updates`` (its ``update`` command): one update of the research's trainer on
  one stored episode, its parameters before and after and its logged TD loss.
  mopa's loss (:func:`mopa.algos.iql.train.make_loss_fn`) and optimiser
  (:func:`~mopa.algos.iql.train.make_optimiser`) of the matching preset take the
  same step from the same parameters on the same episode. The research's inputs
  are every observation zero-padded to the largest plus a one-hot over all four
  agents; mopa's are the team's observation plus a one-hot over the team. The
  first layer's rows are mapped accordingly (the research's padding rows and
  other agents' one-hot rows see only zeros, so its update leaves them as they
  are, which is checked too).

Writes ``--out`` (JSON) and ``--out`` with ``.meta.json``::

    JAX_PLATFORMS=cpu python benchmarks/research_components.py \\
        --rollouts WORK/research/rollouts.json --updates WORK/research/updates.json \\
        --out benchmarks/research_components.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from mopa.core.devices import use_cpu_devices

use_cpu_devices()  # as the mopa command does, before JAX starts

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from mopa.algos.common import team_infos  # noqa: E402
from mopa.algos.iql.train import (  # noqa: E402
    Segment,
    make_loss_fn,
    make_optimiser,
    team_specs,
)
from mopa.algos.presets import preset  # noqa: E402
from mopa.core.runinfo import check_clean_for, run_metadata  # noqa: E402
from mopa.envs import PREDATOR, PREY, make  # noqa: E402

GAME_PRESETS = {
    "static_baseline": "research_iql_rnn_tag_static_baseline",
    "static_cw": "research_iql_rnn_tag_static_cw",
    "static_ccw": "research_iql_rnn_tag_static_ccw",
    "resources_random": "research_iql_tag_resources_random",
}
"""mopa's game for each research game the rollouts step."""

UPDATE_PRESETS = {
    "exp2_cw": "research_iql_rnn_tag_static_cw",
    "exp3_iql": "research_iql_tag",
    "exp3_oa_iql": "research_oa_iql_tag",
    "exp4_iql_random": "research_iql_tag_resources_random",
}
"""mopa's trainer for each research trainer the update dump steps."""

TEAMS = {"pred": PREDATOR, "prey": PREY}


def _arrays(tree):
    """A JSON tree (maps of nested lists) with every list an array."""
    if isinstance(tree, dict):
        return {k: _arrays(v) for k, v in tree.items()}
    return jnp.asarray(tree)


def _max_abs(a, b) -> float:
    return float(np.max(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64))))


# -- the games -----------------------------------------------------------------------
def research_prey_layout(prey_obs: jax.Array, num_resources: int) -> jax.Array:
    """mopa's prey observation ``[..., 14 + 3R]`` in the research's layout: the
    resources' relative positions ``[2R]``, then their flags ``[R]``."""
    if not num_resources:
        return prey_obs
    base = prey_obs[..., : prey_obs.shape[-1] - 3 * num_resources]
    per = prey_obs[..., base.shape[-1] :].reshape(*prey_obs.shape[:-1], -1, 3)
    rel = per[..., :2].reshape(*prey_obs.shape[:-1], -1)
    return jnp.concatenate([base, rel, per[..., 2]], -1)


def compare_game(name: str, recorded: dict) -> dict:
    env, params = make(preset(GAME_PRESETS[name]).env, **dict(
        preset(GAME_PRESETS[name]).env_overrides
    ))  # fmt: skip
    N = env.num_agents
    start = {k: jnp.asarray(v, jnp.float32) for k, v in recorded["start"].items()}
    actions = jnp.asarray(recorded["actions"], jnp.int32)  # [S, T, N]
    _, template = env.reset(jax.random.key(0), params)

    def play(start, actions):
        fields = {
            "pos": start["pos"][:N],
            "vel": start["vel"][:N],
            "obstacle_pos": start["pos"][N:],
        }
        if env.num_resources:
            fields["resource_pos"] = start["resource_pos"]
        state = template.replace(**fields)

        def step(state, action):
            team_actions = (action[: env.num_predators], action[env.num_predators :])
            obs, state, rewards, _, _, info = env.step(
                jax.random.key(0), state, team_actions, params
            )
            record = {
                "pos": state.pos,
                "vel": state.vel,
                "rewards": jnp.concatenate(rewards),
                "predator_obs": obs[PREDATOR],
                "prey_obs": research_prey_layout(obs[PREY], env.num_resources),
                "captures": info["captures"],
                "shaping": info["prey_shaping"],
                "collect": info["prey_collect"],
                "boundary": info["prey_boundary"],
            }
            return state, record

        return jax.lax.scan(step, state, actions)[1]

    mine = jax.jit(jax.vmap(play))(start, actions)
    theirs = recorded["steps"]
    agents = recorded["agents"]
    P = env.num_predators
    their_pos = np.asarray(theirs["pos"])
    result = {
        "preset": GAME_PRESETS[name],
        "transitions": int(np.prod(actions.shape[:2])),
        "max_abs_diff": {
            "pos": _max_abs(mine["pos"], their_pos[..., :N, :]),
            "vel": _max_abs(mine["vel"], np.asarray(theirs["vel"])[..., :N, :]),
            "rewards": _max_abs(mine["rewards"], theirs["rewards"]),
            "predator_obs": max(
                _max_abs(mine["predator_obs"][..., i, :], theirs["obs"][agents[i]])
                for i in range(P)
            ),
            "prey_obs": _max_abs(mine["prey_obs"][..., 0, :], theirs["obs"][agents[P]]),
        },
        "obstacles_fixed": bool(
            np.all(their_pos[..., N:, :] == np.asarray(start["pos"])[:, None, N:, :])
        ),
        "events": {
            "steps_with_captures": int(np.sum(np.asarray(mine["captures"]) > 0)),
            "steps_with_shaping_bonus": int(np.sum(np.asarray(mine["shaping"]) != 0)),
            "steps_with_collection": int(np.sum(np.asarray(mine["collect"]) > 0)),
            "steps_with_boundary_penalty": int(
                np.sum(np.asarray(mine["boundary"]) < 0)
            ),
        },
    }
    if "collected" in theirs:
        result["max_abs_diff"]["collected"] = _max_abs(
            mine["prey_obs"][..., 0, -env.num_resources :], theirs["collected"]
        )
    return result


# -- one IQL update ------------------------------------------------------------------
def _layers(tree: dict) -> dict:
    """``{role: {kernel, bias}}`` of either library's Q-network parameters: the
    first dense layer (``in``), the second or the GRU (``mid``), the Q head and the
    opponent head."""
    p = tree["params"]
    if "Trunk_0" in p:  # mopa's MLP
        return {
            "in": p["Trunk_0"]["Dense_0"],
            "mid": p["Trunk_0"]["Dense_1"],
            "q": p["q_head"],
            **({"opp": p["opp_head"]} if "opp_head" in p else {}),
        }
    if "GRUCell_0" in p:  # mopa's GRU
        return {"in": p["Dense_0"], "mid": p["GRUCell_0"], "q": p["q_head"]}
    if "ScannedRNN_0" in p:  # the research's GRU
        return {
            "in": p["Dense_0"],
            "mid": p["ScannedRNN_0"]["GRUCell_0"],
            "q": p["Dense_1"],
        }
    return {  # the research's MLP
        "in": p["Dense_0"],
        "mid": p["Dense_1"],
        "q": p["Dense_2"],
        **({"opp": p["Dense_3"]} if "Dense_3" in p else {}),
    }


def input_rows(obs_size: int, padded_size: int, agent_index: list[int]) -> np.ndarray:
    """Rows of the research's first-layer kernel that mopa's rows stand for: the
    observation's, then each team agent's one-hot row."""
    return np.concatenate(
        [np.arange(obs_size), padded_size + np.asarray(agent_index, np.int64)]
    )


def to_mopa(research: dict, mopa_template: dict, rows: np.ndarray) -> dict:
    """The research's parameters in mopa's tree (first-layer rows mapped)."""
    theirs = _layers(_arrays(research))
    mine = _layers(mopa_template)
    mapped = jax.tree.map(lambda _, t: t, mine, theirs)
    mapped["in"] = {**mapped["in"], "kernel": theirs["in"]["kernel"][rows]}
    out = jax.tree.map(lambda x: x, mopa_template)
    p = out["params"]
    if "Trunk_0" in p:
        p["Trunk_0"]["Dense_0"], p["Trunk_0"]["Dense_1"] = mapped["in"], mapped["mid"]
        p["q_head"] = mapped["q"]
        if "opp_head" in p:
            p["opp_head"] = mapped["opp"]
    else:
        p["Dense_0"], p["GRUCell_0"], p["q_head"] = (
            mapped["in"],
            mapped["mid"],
            mapped["q"],
        )
    return out


def research_batch(episode: dict, agents: list[str], infos, specs) -> Segment:
    """mopa's batch of one from the research's stored episode (26 steps): each
    team's observations without the padding and one-hot, next observations (the
    26th's is a stand-in: that step is masked out of mopa's losses as it is out of
    the research's), rewards, actions, no terminations, and episode starts at
    steps 0 and 25 (mopa's 25-transition episode)."""
    names = {"pred": [a for a in agents if a.startswith("adversary")]}
    names["prey"] = [a for a in agents if a.startswith("agent")]
    obs, next_obs, rewards, actions = {}, {}, {}, []
    for team, index in TEAMS.items():
        size = infos[index].obs_size
        o = jnp.stack(
            [jnp.asarray(episode["obs"][a])[:, :size] for a in names[team]], 1
        )  # [T, A, D]
        nxt = jnp.concatenate([o[1:], o[-1:]])
        r = jnp.stack([jnp.asarray(episode["rewards"][a]) for a in names[team]], 1)
        act = jnp.stack([jnp.asarray(episode["actions"][a]) for a in names[team]], 1)
        if index in specs:
            obs[str(index)], next_obs[str(index)] = o[None], nxt[None]
            rewards[str(index)] = r[None].astype(jnp.float32)
        actions.append(act[None].astype(jnp.int32))
    T = actions[0].shape[1]
    first = jnp.zeros((1, T), bool).at[:, 0].set(True).at[:, T - 1].set(True)
    hidden = {
        str(t): jnp.zeros((1, spec.num_agents, spec.carry_size))
        for t, spec in specs.items()
    }
    return Segment(
        obs=obs,
        next_obs=next_obs,
        rewards=rewards,
        hidden=hidden,
        actions=tuple(actions),
        terminated=jnp.zeros((1, T), bool),
        first=first,
    )


def padding_of(episode: dict, agents: list[str]) -> int:
    """The research's padded observation size (its inputs less the one-hot)."""
    return len(episode["obs"][agents[0]][0]) - len(agents)


def compare_update(name: str, dumped: dict) -> dict:
    config = preset(UPDATE_PRESETS[name])
    env, _ = make(config.env, **dict(config.env_overrides))
    infos = team_infos(env)
    specs = team_specs(config, infos)
    agents = dumped["agents"]
    episode = dumped["episode"]
    padded = padding_of(episode, agents)
    batch = research_batch(episode, agents, infos, specs)
    optimiser = make_optimiser(config)
    out = {"preset": UPDATE_PRESETS[name], "teams": {}}
    for team, index in TEAMS.items():
        spec = specs[index]
        team_agents = [
            agents.index(a)
            for a in agents
            if a.startswith("adversary" if team == "pred" else "agent")
        ]
        rows = input_rows(infos[index].obs_size, padded, team_agents)
        from mopa.policy import init_params

        template = init_params(spec, jax.random.key(0))
        before = to_mopa(dumped["params_before"][team], template, rows)
        after_theirs = to_mopa(dumped["params_after"][team], template, rows)
        loss_fn = make_loss_fn(config, spec, index, len(infos))
        (_, stats), grads = jax.value_and_grad(loss_fn, has_aux=True)(
            before, before, batch
        )
        updates, _ = optimiser.update(grads, optimiser.init(before), before)
        after_mine = jax.tree.map(lambda p, u: p + u, before, updates)
        step_theirs = jax.tree.map(lambda a, b: a - b, after_theirs, before)
        step_mine = jax.tree.map(lambda a, b: a - b, after_mine, before)
        unmapped = np.setdiff1d(np.arange(padded + len(agents)), rows)
        kernel_before = np.asarray(
            _layers(dumped["params_before"][team])["in"]["kernel"]
        )
        kernel_after = np.asarray(_layers(dumped["params_after"][team])["in"]["kernel"])
        out["teams"][team] = {
            "td_loss": {
                "research": dumped["loss"][team],
                "mopa": float(stats["td_loss"]),
            },
            "step_max_abs": max(
                float(np.max(np.abs(x))) for x in jax.tree.leaves(step_theirs)
            ),
            "step_max_abs_diff": max(
                _max_abs(a, b)
                for a, b in zip(
                    jax.tree.leaves(step_mine),
                    jax.tree.leaves(step_theirs),
                    strict=True,
                )
            ),
            "unmapped_rows_moved": _max_abs(
                kernel_before[unmapped], kernel_after[unmapped]
            ),
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rollouts", type=Path, required=True)
    parser.add_argument("--updates", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    check_clean_for(args.out)
    meta = run_metadata({k: str(v) for k, v in vars(args).items()})
    rollouts = json.loads(args.rollouts.read_text())
    updates = json.loads(args.updates.read_text())
    results = {
        "games": {
            name: compare_game(name, recorded)
            for name, recorded in rollouts["games"].items()
        },
        "updates": {
            name: compare_update(name, dumped) for name, dumped in updates.items()
        },
    }
    args.out.write_text(json.dumps(results, indent=1) + "\n")
    args.out.with_suffix(".meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
