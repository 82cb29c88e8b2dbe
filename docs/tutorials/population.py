"""Model a family of opponents on your own game and plan against the belief.

``mopa.opponent.population`` fits a family of opponents as a clone library (one
behaviour clone per member, conditioned on an intent) and keeps an online belief
over (intent, member) with a "none fits" test: moves no member explains drive
``none_fits_probability`` towards 1 and the belief back to its prior.
``mopa.planning.PopulationOpponentModel`` lets a planner draw its imagined
opponents from that belief.

Here the game is ``adversary`` with discrete moves, and the family is three
scripted adversaries of our own (any mopa ``Player`` will do): they head for
landmark 0, landmark 1 or the first good agent. The good team watches one
episode of the second, then plans its first move of the next game. Its network is
untrained here, so the lookahead scores rewards only (``leaf_weight=0``).
"""

# --8<-- [start:code]
import dataclasses

import jax
import jax.numpy as jnp

import mopa.envs
from mopa import opponent, planning
from mopa.players import PolicyPlayer, initial_player_carry
from mopa.policy import PolicySpec, init_params

env, params = mopa.envs.make("adversary", continuous_actions=False)


@dataclasses.dataclass(frozen=True)
class Heads:  # a scripted adversary (a mopa Player): heads for what it is told
    num_agents: int = 1
    carry_size: int = 0

    def act(self, target, key, state, obs, carry, reset):
        offset = obs.reshape(1, -1, 2)[:, target]  # landmark 0, 1 or good agent 0
        axis = jnp.argmax(jnp.abs(offset), -1)  # move along the longer axis
        ahead = jnp.take_along_axis(offset, axis[:, None], -1)[:, 0] > 0
        return 1 + 2 * axis + ahead, carry  # 1 -x, 2 +x, 3 -y, 4 +y


spec = PolicySpec(kind="q", num_agents=2, obs_size=10, num_actions=5, hidden=(16,))
good, good_params = PolicyPlayer(spec), init_params(spec, jax.random.key(0))


def record(target, key):  # 16 episodes of adversary `target` against the good team
    weights = (target, good_params)
    return opponent.generate(env, params, (Heads(), good), weights, key, num_chains=16)


fits = [record(target, jax.random.key(1)) for target in range(3)]
members = [opponent.member_data(d, "adversary", intent_field=None) for d in fits]
clone = opponent.BCConfig(
    num_actions=5, hidden=(64,), lr=1e-2, num_epochs=40, batch_size=50
)
config = opponent.PopulationConfig(clone=clone)  # K = 1 intent: the game has none
clones, _ = opponent.fit_population(jax.random.key(2), config, members)

seen = record(1, jax.random.key(3))  # new episodes of member 1; watch the first
belief = opponent.init_population_belief(num_intents=1, num_members=3)
observe = jax.jit(opponent.observe_opponent, static_argnums=0)  # one compiled update
for t in range(25):
    obs_t, actions_t = seen["obs.adversary"][0, t], seen["actions.adversary"][0, t]
    belief = observe(config, clones, belief, obs_t, actions_t)
    if t % 6 == 0:
        print(t, opponent.member_belief(belief), opponent.none_fits_probability(belief))

lookahead = planning.LookaheadConfig(num_rollouts=8, horizon=5, leaf_weight=0.0)
model = planning.PopulationOpponentModel(config, team=env.team_index("adversary"))
planner = planning.LookaheadPlayer(env, "good", lookahead, model, spec)
model_params = planning.PopulationModelParams(clones, opponent.joint_belief(belief))
plan_params = planning.LookaheadParams(params, good_params, model_params)
obs, state = env.reset(jax.random.key(5), params)  # next game; obs[1]: good team
carry, reset = initial_player_carry(planner), jnp.ones(2, bool)
act = jax.jit(planner.act)  # the planner's whole decision, compiled
actions, _ = act(plan_params, jax.random.key(6), state, obs[1], carry, reset)
# --8<-- [end:code]
