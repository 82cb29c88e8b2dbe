"""The research's side of ``benchmarks/research_iql.py``: run in the research's own
virtual environment (jax 0.4.38, its JaxMARL revision), never in mopa's. It imports
the research's modules from ``CHECKOUT/src`` and measures with them; it does not
import mopa.

Two commands, each writing one JSON file:

* ``eval``: greedy play of the teams a research training run saved (its
  ``SAVE_PATH``), ``--episodes`` episodes per seed in the research's own test
  wrapper stack (``CTRolloutManager(MPELogWrapper(env))``, the one its trainers'
  greedy test uses), each a single 26-transition JaxMARL episode. Per episode: the
  predators' captures over the 26 transitions and over the first 25 (mopa's
  episode), from the rewards the game pays, and the predators' logged return at
  the episode's end (what the research's test metric averages).
* ``update``: one IQL update of the research's trainer on one stored episode: its
  ``make_train`` run for a single update of one game (26 steps, a replay holding
  that one episode, a batch of one), once with learning off (the initial
  parameters) and once with it on (the parameters after the one gradient step,
  and the loss it logged); with the episode, so that mopa's loss and optimiser can
  take the same step from the same parameters.
* ``rollout``: the research's games (the static game of Exp 2 with each shaping
  variant, the resource game of Exp 4) from ``--states`` reset states, stepped
  with uniformly random actions through ``step_env`` (no auto-reset) for 25
  transitions; positions, velocities, rewards, observations and resource flags at
  every step, so that mopa's games can be stepped from the same states and
  actions and compared.

Usage (the research's interpreter)::

    VENV/bin/python benchmarks/research_code_side.py eval --checkout CHECKOUT \\
        --save-path DIR --alg ql_teams_static_baseline --script iql_teams \\
        --seeds 3 --episodes 128 --out FILE
    VENV/bin/python benchmarks/research_code_side.py rollout --checkout CHECKOUT \\
        --states 256 --out FILE
    VENV/bin/python benchmarks/research_code_side.py update --checkout CHECKOUT \\
        --out FILE
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

ENV_NAME = "MPE_simple_tag_v3"
"""The JaxMARL game every research IQL config names (its subclasses add to it)."""

ROLLOUT_CONFIGS = {
    "static_baseline": "ql_teams_static_baseline",
    "static_cw": "ql_teams_static_cw",
    "static_ccw": "ql_teams_static_ccw",
    "resources_random": "ql_teams_resources_random",
}
"""The games ``rollout`` steps, by the research config that builds each."""


def _import_research(checkout: Path, script: str):
    sys.path.insert(0, str(checkout / "src"))
    return importlib.import_module(script)


def _load_config(checkout: Path, alg: str) -> dict:
    """The research's merged config (``configs/config.yaml`` with ``alg``)."""
    from omegaconf import OmegaConf

    base = OmegaConf.to_container(OmegaConf.load(checkout / "configs/config.yaml"))
    alg_config = OmegaConf.to_container(
        OmegaConf.load(checkout / f"configs/alg/{alg}.yaml")
    )
    base.pop("defaults", None)
    return {**base, **alg_config}


def _team_agents(env) -> dict[str, list[str]]:
    return {
        "pred": [a for a in env.agents if a.startswith("adversary")],
        "prey": [a for a in env.agents if a.startswith("agent")],
    }


def _network(module, script: str, team: str, teams, action_dim: int, hidden: int):
    opponent = {"pred": "prey", "prey": "pred"}[team]
    if script == "iql_teams":
        return module.RNNQNetwork(action_dim=action_dim, hidden_dim=hidden)
    if script == "iql_teams_oa_mlp":
        return module.MLPQOppNetwork(
            action_dim=action_dim,
            hidden_dim=hidden,
            opp_n_agents=len(teams[opponent]),
        )
    return module.MLPQNetwork(action_dim=action_dim, hidden_dim=hidden)


def greedy_episodes(
    module, script, env, config, team_params, key, episodes, steps
) -> dict:
    """Play ``episodes`` greedy episodes of ``steps`` steps; per-step predator
    rewards ``[steps, episodes]``, done flags and logged predator returns."""
    from jaxmarl.wrappers.baselines import CTRolloutManager

    wrapped = CTRolloutManager(env, batch_size=episodes)
    teams = _team_agents(env)
    hidden = int(config["HIDDEN_SIZE"])
    nets = {
        t: _network(module, script, t, teams, wrapped.max_action_space, hidden)
        for t in teams
    }
    recurrent = script == "iql_teams"

    def q_values(team, params, carry, obs, dones):
        stacked = jnp.stack([obs[a] for a in teams[team]])  # [A, E, D]
        if recurrent:
            resets = jnp.stack([dones[a] for a in teams[team]])
            carry, q = jax.vmap(nets[team].apply, in_axes=(None, 0, 0, 0))(
                params, carry, stacked[:, None], resets[:, None]
            )
            return carry, q[:, 0]
        out = jax.vmap(nets[team].apply, in_axes=(None, 0))(params, stacked)
        return carry, out[0] if isinstance(out, tuple) else out

    def step(state, key):
        env_state, obs, dones, carries = state
        actions, new_carries = {}, {}
        for team in teams:
            carry, q = q_values(team, team_params[team], carries[team], obs, dones)
            new_carries[team] = carry
            greedy = jnp.argmax(q, -1)
            actions.update({a: greedy[i] for i, a in enumerate(teams[team])})
        obs, env_state, rewards, dones, infos = wrapped.batch_step(
            key, env_state, actions
        )
        pred = teams["pred"]
        pred_index = jnp.array([env.agents.index(a) for a in pred])
        logged = infos["returned_episode_returns"][..., pred_index].mean(-1)
        out = (rewards[pred[0]], dones["__all__"], logged)
        return (env_state, obs, dones, new_carries), out

    key_reset, key_steps = jax.random.split(key)
    obs, env_state = wrapped.batch_reset(key_reset)
    dones = {a: jnp.zeros(episodes, bool) for a in [*env.agents, "__all__"]}
    carries = {
        t: (
            module.ScannedRNN.initialize_carry(hidden, len(teams[t]), episodes)
            if recurrent
            else None
        )
        for t in teams
    }
    _, (rewards, done, logged) = jax.lax.scan(
        step,
        (env_state, obs, dones, carries),
        jax.random.split(key_steps, steps),
    )
    return {"rewards": rewards, "done": done, "logged": logged}


def command_eval(args) -> dict:
    from jaxmarl.wrappers.baselines import load_params

    module = _import_research(args.checkout, args.script)
    config = _load_config(args.checkout, args.alg)
    env, _ = module.env_from_config(dict(config))
    alg_name = config["ALG_NAME"]
    folder = args.save_path / ENV_NAME
    capture_reward = 10.0
    per_seed = []
    for seed in range(args.seeds):
        team_params = {
            t: load_params(
                str(folder / f"{alg_name}_{ENV_NAME}_{t}_seed0_vmap{seed}.safetensors")
            )
            for t in ("pred", "prey")
        }
        played = jax.jit(
            lambda p, k: greedy_episodes(
                module, args.script, env, config, p, k, args.episodes, args.steps
            )
        )(team_params, jax.random.fold_in(jax.random.PRNGKey(args.seed), seed))
        rewards = np.asarray(played["rewards"], np.float64)  # [T, E]
        done = np.asarray(played["done"])
        first_end = int(np.argmax(done.all(axis=1)))  # every game ends together
        logged = np.asarray(played["logged"], np.float64)[first_end]
        per_seed.append(
            {
                "episode_transitions": first_end + 1,
                "captures": (rewards[: first_end + 1].sum(0) / capture_reward).tolist(),
                "captures_25": (rewards[:25].sum(0) / capture_reward).tolist(),
                "logged_predator_return": logged.tolist(),
            }
        )
    return {
        "alg": args.alg,
        "script": args.script,
        "episodes": args.episodes,
        "num_agents": env.num_agents,
        "seeds": per_seed,
    }


UPDATE_CONFIGS = {
    "exp2_cw": ("iql_teams", "ql_teams_static_cw"),
    "exp3_iql": ("iql_teams_mlp", "ql_teams_mlp_simple_tag"),
    "exp3_oa_iql": ("iql_teams_oa_mlp", "ql_teams_oa_mlp_simple_tag"),
    "exp4_iql_random": ("iql_teams_mlp", "ql_teams_resources_random"),
}
"""The trainers ``update`` steps once, by the research script and config."""

ONE_UPDATE = {
    "NUM_ENVS": 1,
    "NUM_STEPS": 26,
    "TOTAL_TIMESTEPS": 26,
    "BUFFER_SIZE": 32,
    "BUFFER_BATCH_SIZE": 1,
    "TEST_DURING_TRAINING": False,
    "WANDB_MODE": "disabled",
}
"""One update of one game whose replay holds only the episode it just played, so
the batch of one is that episode."""


def command_update(args) -> dict:
    out = {}
    for name, (script, alg) in UPDATE_CONFIGS.items():
        module = _import_research(args.checkout, script)
        config = {**_load_config(args.checkout, alg), **ONE_UPDATE}
        env, _ = module.env_from_config(dict(config))
        runs = {}
        for learn, starts in (("before", 10**9), ("after", 0)):
            train = module.make_train({**config, "LEARNING_STARTS": starts}, env)
            result = jax.jit(train)(jax.random.PRNGKey(args.seed))
            runs[learn] = result
        states, buffer_state = runs["after"]["runner_state"][:2]
        episode = jax.tree.map(lambda x: x[0, 0], buffer_state.experience)
        metrics = runs["after"]["metrics"]
        tolist = lambda tree: jax.tree.map(lambda x: np.asarray(x).tolist(), tree)  # noqa: E731
        out[name] = {
            "script": script,
            "config": alg,
            "settings": {k: config[k] for k in ("LR", "MAX_GRAD_NORM", "GAMMA")},
            "agents": list(env.agents),
            "episode": tolist(
                {
                    "obs": episode.obs,
                    "actions": episode.actions,
                    "rewards": episode.rewards,
                    "dones": episode.dones,
                }
            ),
            "params_before": {
                t: tolist(s.params)
                for t, s in runs["before"]["runner_state"][0].items()
            },
            "params_after": {t: tolist(s.params) for t, s in states.items()},
            "loss": {
                t: float(np.asarray(metrics[f"{t}/loss"])[-1]) for t in ("pred", "prey")
            },
        }
    return out


def command_rollout(args) -> dict:
    module = _import_research(args.checkout, "iql_teams_mlp")
    games = {}
    for game, alg in ROLLOUT_CONFIGS.items():
        config = _load_config(args.checkout, alg)
        env, _ = module.env_from_config(dict(config))
        base = env._env  # under MPELogWrapper
        agents = base.agents
        key = jax.random.fold_in(jax.random.PRNGKey(args.seed), len(games))
        key_reset, key_actions = jax.random.split(key)

        def play(key_reset, key_actions, base=base, agents=agents):
            _, state = base.reset(key_reset)
            actions = jax.random.randint(key_actions, (args.steps, len(agents)), 0, 5)

            def step(state, action):
                acts = {a: action[i] for i, a in enumerate(agents)}
                obs, new_state, rewards, _, _ = base.step_env(
                    jax.random.PRNGKey(0), state, acts
                )
                record = {
                    "pos": new_state.p_pos,
                    "vel": new_state.p_vel,
                    "rewards": jnp.stack([rewards[a] for a in agents]),
                    "obs": {a: obs[a] for a in agents},
                }
                if hasattr(new_state, "collected"):
                    record["collected"] = new_state.collected
                return new_state, record

            _, records = jax.lax.scan(step, state, actions)
            start = {"pos": state.p_pos, "vel": state.p_vel}
            if hasattr(state, "resource_pos"):
                start["resource_pos"] = state.resource_pos
            return start, actions, records

        keys_reset = jax.random.split(key_reset, args.states)
        keys_actions = jax.random.split(key_actions, args.states)
        start, actions, records = jax.jit(jax.vmap(play))(keys_reset, keys_actions)
        tolist = lambda tree: jax.tree.map(lambda x: np.asarray(x).tolist(), tree)  # noqa: E731
        games[game] = {
            "config": alg,
            "agents": list(agents),
            "start": tolist(start),
            "actions": tolist(actions),
            "steps": tolist(records),
        }
    return {"states": args.states, "transitions": args.steps, "games": games}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    options = {
        "eval": {"--save-path": Path, "--alg": str, "--script": str},
        "rollout": {},
        "update": {},
    }
    for name, required in options.items():
        sub = commands.add_parser(name)
        for flag, kind in {"--checkout": Path, "--out": Path, **required}.items():
            sub.add_argument(flag, type=kind, required=True)
        sub.add_argument("--seed", type=int, default=0)
    commands.choices["eval"].add_argument("--seeds", type=int, default=3)
    commands.choices["eval"].add_argument("--episodes", type=int, default=128)
    commands.choices["eval"].add_argument("--steps", type=int, default=30)
    commands.choices["rollout"].add_argument("--states", type=int, default=256)
    commands.choices["rollout"].add_argument("--steps", type=int, default=25)
    args = parser.parse_args()
    result = {
        "eval": command_eval,
        "rollout": command_rollout,
        "update": command_update,
    }[args.command](args)
    args.out.write_text(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
