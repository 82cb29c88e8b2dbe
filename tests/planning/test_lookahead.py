"""The Monte-Carlo lookahead planner and its opponent models: greedy at horizon 0,
rollout scores against a plain-loop reference, a certain capture found by hand,
batch independence, the two modes agreeing, the intent model, config errors."""

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mopa.bench.compute import program_flops
from mopa.envs import make
from mopa.envs.pursuit import PREDATOR, PREY
from mopa.errors import InvalidParameterError
from mopa.planning import (
    FunctionOpponentModel,
    IntentConditionedModel,
    IntentModelParams,
    LookaheadConfig,
    LookaheadParams,
    LookaheadPlayer,
    OpponentHeadModel,
    PolicyOpponentModel,
    joint_actions,
)
from mopa.players import PolicyPlayer
from mopa.policy import PolicySpec, agent_inputs, init_params

HIDDEN = (16,)
NUM_STATES = 48


def q_spec(num_agents, obs_size, kind="q", head=0):
    return PolicySpec(
        kind=kind,
        num_agents=num_agents,
        obs_size=obs_size,
        num_actions=5,
        hidden=HIDDEN,
        num_opponents=head,
        opponent_actions=5 if head else 0,
    )


@pytest.fixture(scope="module")
def tag():
    env, env_params = make("tag")
    predator = q_spec(3, 16, head=1)
    prey = q_spec(1, 14)
    weights = {
        "predator": init_params(predator, jax.random.key(1)),
        "prey": init_params(prey, jax.random.key(2)),
    }
    keys = jax.random.split(jax.random.key(3), NUM_STATES)
    obs, states = jax.jit(jax.vmap(env.reset, in_axes=(0, None)))(keys, env_params)
    return env, env_params, predator, prey, weights, obs, states


def first_step(batch=()):
    """``(carry [.., 3, 0], reset [.., 3])`` for a feed-forward team of three."""
    return jnp.zeros((*batch, 3, 0)), jnp.ones((*batch, 3), bool)


def q_values(spec, params, obs):
    return spec.module().apply(params, agent_inputs(spec, obs))[0]


@pytest.mark.parametrize("mode", ["per_agent", "joint"])
def test_horizon_zero_is_the_greedy_policy(tag, mode):
    env, env_params, predator, prey, weights, obs, states = tag
    player = LookaheadPlayer(
        env,
        "predator",
        LookaheadConfig(horizon=0, mode=mode),
        PolicyOpponentModel(prey, PREY),
        predator,
    )
    params = LookaheadParams(env_params, weights["predator"], weights["prey"])
    keys = jax.random.split(jax.random.key(4), NUM_STATES)
    carry, reset = first_step((NUM_STATES,))
    planned, _ = jax.jit(jax.vmap(player.act, in_axes=(None, 0, 0, 0, 0, 0)))(
        params, keys, states, obs[PREDATOR], carry, reset
    )
    greedy, _ = jax.vmap(PolicyPlayer(predator).act, in_axes=(None, 0, 0, 0, 0, 0))(
        weights["predator"], keys, states, obs[PREDATOR], carry, reset
    )
    np.testing.assert_array_equal(planned, greedy)
    assert planned.dtype == jnp.int32 and len(np.unique(planned)) > 1


def test_horizon_zero_with_a_recurrent_policy_keeps_its_carry(tag):
    env, env_params, _, prey, weights, obs, states = tag
    spec = q_spec(3, 16, kind="rnn_q")
    own = init_params(spec, jax.random.key(5))
    player = LookaheadPlayer(
        env,
        PREDATOR,
        LookaheadConfig(horizon=0),
        PolicyOpponentModel(prey, PREY),
        spec,
    )
    carry = jax.random.normal(jax.random.key(6), (3, spec.carry_size))
    reset = jnp.array([False, True, False])
    one = jax.tree.map(lambda x: x[0], (states, obs[PREDATOR]))
    args = (jax.random.key(7), one[0], one[1], carry, reset)
    actions, new_carry = jax.jit(player.act)(
        LookaheadParams(env_params, own, weights["prey"]), *args
    )
    want_actions, want_carry = jax.jit(PolicyPlayer(spec).act)(own, *args)
    np.testing.assert_array_equal(actions, want_actions)
    np.testing.assert_array_equal(new_carry, want_carry)


def reference_scores(player, params, key, state, obs, sample_opponent, candidates):
    """The scores of ``candidates`` (per-agent indices ``agent x 5 + action``) by a
    plain Python loop over candidates, rollouts and steps, following the key
    schedule in :mod:`mopa.planning.lookahead`."""
    env, config = player.env, player.config
    step, observe = jax.jit(env.step), jax.jit(env.observe)
    predator, prey = player.own_spec, player.opponent_model.spec
    own_q = jax.jit(functools.partial(q_values, predator, params.own_params))
    prey_q = jax.jit(functools.partial(q_values, prey, params.opponent_params))
    greedy = np.asarray(jnp.argmax(own_q(obs), -1))
    scores = []
    for c in candidates:
        agent, action = divmod(c, 5)
        root = greedy.copy()
        root[agent] = action
        rollout_key = (
            key if config.common_random_numbers else jax.random.fold_in(key, c)
        )
        total = 0.0
        for k in jax.random.split(rollout_key, config.num_rollouts):
            _, key_steps = jax.random.split(k)
            s, o = state, observe(state, params.env_params)
            ret, alive = 0.0, True
            for t, key_t in enumerate(jax.random.split(key_steps, config.horizon)):
                key_opponent, key_env = jax.random.split(key_t)
                own = root if t == 0 else np.argmax(own_q(o[PREDATOR]), -1)
                opponent = sample_opponent(key_opponent, prey_q(o[PREY]))
                o, s, rewards, terminated, truncated, _ = step(
                    key_env,
                    s,
                    (jnp.asarray(own, jnp.int32), opponent),
                    params.env_params,
                )
                if alive:
                    ret += config.gamma**t * float(np.mean(rewards[PREDATOR]))
                alive = alive and not bool(terminated | truncated)
            if alive:
                leaf = float(np.mean(np.max(own_q(o[PREDATOR]), -1)))
                ret += config.gamma**config.horizon * config.leaf_weight * leaf
            total += ret
        scores.append(total / config.num_rollouts)
    return np.array(scores)


def near_prey_state(states, index, step):
    """State ``index`` with the predators placed around the prey (so rollouts
    capture) at episode step ``step``."""
    state = jax.tree.map(lambda x: x[index], states)
    prey = state.pos[3]
    offsets = jnp.array([[0.15, 0.0], [-0.1, 0.12], [0.0, -0.2]])
    return state.replace(
        pos=state.pos.at[:3].set(prey + offsets), step=jnp.asarray(step, jnp.int32)
    )


@pytest.mark.parametrize(
    ("greedy_opponent", "num_rollouts", "common", "steps", "candidates"),
    [(True, 1, True, (0, 23), range(15)), (False, 2, False, (0,), range(5, 10))],
    ids=["deterministic-opponent", "sampled-opponent-independent-keys"],
)
@pytest.mark.slow
def test_scores_equal_a_hand_computed_rollout(
    tag, greedy_opponent, num_rollouts, common, steps, candidates
):
    env, env_params, predator, prey, weights, obs, states = tag
    config = LookaheadConfig(
        num_rollouts=num_rollouts,
        horizon=3,
        gamma=0.9,
        leaf_weight=0.5,
        common_random_numbers=common,
    )
    model = PolicyOpponentModel(prey, PREY, greedy=greedy_opponent)
    player = LookaheadPlayer(env, PREDATOR, config, model, predator)
    params = LookaheadParams(env_params, weights["predator"], weights["prey"])
    if greedy_opponent:

        def sample_opponent(key, q):
            return jnp.argmax(q, -1).astype(jnp.int32)
    else:

        def sample_opponent(key, q):
            return jax.random.categorical(key, q).astype(jnp.int32)

    plan = jax.jit(player.plan)
    key = jax.random.key(8)
    # At step 23 of 25 the episode ends on the rollout's second step, so the third
    # reward and the leaf must be dropped.
    for index, step in enumerate(steps):
        state = near_prey_state(states, index, step)
        own_obs = env.observe(state, env_params)[PREDATOR]
        scores = plan(params, key, state, own_obs, *first_step()).scores
        want = reference_scores(
            player, params, key, state, own_obs, sample_opponent, candidates
        )
        np.testing.assert_allclose(
            scores.reshape(-1)[np.asarray(candidates)], want, rtol=1e-5, atol=1e-5
        )
        # Rollouts that capture (so the reward term is exercised, not the leaf only).
        assert np.abs(want).max() > 5.0


def capture_state(states):
    """Predator 0 at distance 0.14 left of a still prey (contact below 0.125);
    its teammates and the obstacles far away."""
    state = jax.tree.map(lambda x: x[0], states)
    pos = jnp.array([[-0.14, 0.0], [-0.8, -0.8], [0.8, -0.8], [0.0, 0.0]])
    return state.replace(
        pos=pos,
        vel=jnp.zeros_like(state.vel),
        obstacle_pos=jnp.array([[5.0, 5.0], [-5.0, 5.0]]),
        step=jnp.zeros((), jnp.int32),
    )


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["per_agent", "joint"])
def test_planner_finds_a_certain_capture(tag, mode):
    env, env_params, predator, _, weights, _, states = tag
    still_prey = FunctionOpponentModel(
        lambda params, latent, obs: jnp.where(jnp.arange(5) == 0, 0.0, -jnp.inf)[None],
        num_opponents=1,
        num_actions=5,
    )
    config = LookaheadConfig(num_rollouts=1, horizon=2, leaf_weight=0.0, mode=mode)
    player = LookaheadPlayer(env, PREDATOR, config, still_prey, predator)
    state = capture_state(states)
    obs = env.observe(state, env_params)[PREDATOR]
    plan = jax.jit(player.plan)(
        LookaheadParams(env_params, weights["predator"], ()),
        jax.random.key(9),
        state,
        obs,
        *first_step(),
    )
    # Positions move by the previous velocity: +x at the root gives velocity
    # accel x dt = 3 x 0.1 = 0.3, so step 2 moves predator 0 by 0.03 to distance
    # 0.11 < 0.125: one capture, 10 to every predator, discounted once: 9.5.
    assert plan.actions[0] == 2
    scores = np.asarray(plan.scores)
    if mode == "per_agent":
        np.testing.assert_allclose(scores[0], [0, 0, 9.5, 0, 0], atol=1e-5)
    else:
        first_is_right = joint_actions(3, 5)[:, 0] == 2
        np.testing.assert_allclose(scores, np.where(first_is_right, 9.5, 0), atol=1e-5)


@pytest.fixture(scope="module")
def sampled_planners(tag):
    """Jitted, batched ``plan`` of both modes against a sampling opponent head."""
    env, env_params, predator, _, weights, _, _ = tag
    params = LookaheadParams(env_params, weights["predator"], weights["predator"])
    planners = {}
    for mode in ("per_agent", "joint"):
        player = LookaheadPlayer(
            env,
            PREDATOR,
            LookaheadConfig(num_rollouts=2, horizon=2, mode=mode),
            OpponentHeadModel(predator, PREDATOR),
            predator,
        )
        batched = jax.jit(jax.vmap(player.plan, in_axes=(None, 0, 0, 0, 0, 0)))
        planners[mode] = functools.partial(batched, params)
    return planners


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["per_agent", "joint"])
def test_actions_are_always_valid_and_keys_repeat(tag, sampled_planners, mode):
    *_, obs, states = tag
    keys = jax.random.split(jax.random.key(10), NUM_STATES)
    plan = sampled_planners[mode](
        keys, states, obs[PREDATOR], *first_step((NUM_STATES,))
    )
    actions = np.asarray(plan.actions)
    assert actions.dtype == np.int32 and actions.shape == (NUM_STATES, 3)
    assert actions.min() >= 0 and actions.max() < 5
    assert np.isfinite(plan.scores).all()
    again = sampled_planners[mode](
        keys, states, obs[PREDATOR], *first_step((NUM_STATES,))
    )
    np.testing.assert_array_equal(again.scores, plan.scores)
    other_keys = jax.random.split(jax.random.key(11), NUM_STATES)
    other = sampled_planners[mode](
        other_keys, states, obs[PREDATOR], *first_step((NUM_STATES,))
    )
    assert not np.array_equal(other.scores, plan.scores)


def test_own_head_read_in_the_q_pass_equals_a_separate_head(tag, sampled_planners):
    """With ``opponent_params=()`` the head comes from the own weights in the same
    forward pass as the Q-values; the decisions are those of a separate model."""
    env, env_params, predator, _, weights, obs, states = tag
    keys = jax.random.split(jax.random.key(13), NUM_STATES)
    separate = sampled_planners["per_agent"](
        keys, states, obs[PREDATOR], *first_step((NUM_STATES,))
    )
    player = LookaheadPlayer(
        env,
        PREDATOR,
        LookaheadConfig(num_rollouts=2, horizon=2, mode="per_agent"),
        OpponentHeadModel(predator, PREDATOR),
        predator,
    )
    shared = jax.jit(jax.vmap(player.plan, in_axes=(None, 0, 0, 0, 0, 0)))(
        LookaheadParams(env_params, weights["predator"], ()),
        keys,
        states,
        obs[PREDATOR],
        *first_step((NUM_STATES,)),
    )
    np.testing.assert_allclose(shared.scores, separate.scores, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(shared.actions, separate.actions)


@pytest.mark.slow
def test_batch_elements_are_independent(tag, sampled_planners):
    env, env_params, predator, _, weights, obs, states = tag
    planner = sampled_planners["joint"]
    keys = jax.random.split(jax.random.key(12), NUM_STATES)
    batch = planner(keys, states, obs[PREDATOR], *first_step((NUM_STATES,)))
    # Each element alone (unbatched) gives the same decision.
    player = LookaheadPlayer(
        env,
        PREDATOR,
        LookaheadConfig(num_rollouts=2, horizon=2, mode="joint"),
        OpponentHeadModel(predator, PREDATOR),
        predator,
    )
    alone = jax.jit(player.plan)
    params = LookaheadParams(env_params, weights["predator"], weights["predator"])
    for i in (0, 17, 47):
        one = alone(
            params,
            keys[i],
            jax.tree.map(lambda x, i=i: x[i], states),
            obs[PREDATOR][i],
            *first_step(),
        )
        np.testing.assert_allclose(one.scores, batch.scores[i], rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(one.actions, batch.actions[i])
    # Moving element 0's agents changes nothing for the others.
    moved = states.replace(pos=states.pos.at[0].set(-states.pos[0]))
    moved_obs = jax.vmap(env.observe, in_axes=(0, None))(moved, env_params)
    changed = planner(keys, moved, moved_obs[PREDATOR], *first_step((NUM_STATES,)))
    assert not np.array_equal(changed.scores[0], batch.scores[0])
    np.testing.assert_array_equal(changed.scores[1:], batch.scores[1:])
    np.testing.assert_array_equal(changed.actions[1:], batch.actions[1:])


@pytest.mark.slow
def test_the_root_step_runs_no_own_network_and_one_opponent_move_per_rollout(tag):
    """The root step plays the candidate (no own network) and draws the opponents'
    move once, not once per candidate. At ``H = 3`` without a leaf the last step's
    moves reach no return (``tag`` scores a step before its move), so both
    networks are needed only at the middle step: widening either adds ``C K``
    forward passes' FLOPs (``C`` = 125 joint candidates, ``K`` rollouts), where
    running them at the root too would add ``2 C K``."""
    env, env_params, _, _, _, obs, states = tag
    state = jax.tree.map(lambda x: x[0], states)
    C, K = 125, 3

    def flops(hidden_own, hidden_prey):
        own = dataclasses.replace(q_spec(3, 16), hidden=hidden_own)
        prey = dataclasses.replace(q_spec(1, 14), hidden=hidden_prey)
        player = LookaheadPlayer(
            env,
            PREDATOR,
            LookaheadConfig(num_rollouts=K, horizon=3, mode="joint", leaf_weight=0),
            PolicyOpponentModel(prey, PREY),
            own,
        )
        params = LookaheadParams(
            env_params,
            init_params(own, jax.random.key(1)),
            init_params(prey, jax.random.key(2)),
        )
        plan = program_flops(
            player.plan,
            params,
            jax.random.key(0),
            state,
            obs[PREDATOR][0],
            *first_step(),
        )
        forwards = [
            program_flops(functools.partial(q_values, spec), weights, x)
            for spec, weights, x in (
                (own, params.own_params, obs[PREDATOR][0]),
                (prey, params.opponent_params, obs[PREY][0]),
            )
        ]
        return plan, forwards

    base, (own_small, prey_small) = flops((16,), (16,))
    wide_own, (own_big, _) = flops((256,), (16,))
    wide_prey, (_, prey_big) = flops((16,), (256,))
    np.testing.assert_allclose(
        wide_own - base, C * K * (own_big - own_small), rtol=0.05
    )
    np.testing.assert_allclose(
        wide_prey - base, C * K * (prey_big - prey_small), rtol=0.05
    )


@pytest.mark.slow
def test_modes_agree_with_one_planning_agent():
    env, env_params = make("tag", num_predators=1)
    predator, prey = q_spec(1, 12), q_spec(1, 10)
    params = LookaheadParams(
        env_params,
        init_params(predator, jax.random.key(13)),
        init_params(prey, jax.random.key(14)),
    )
    obs, state = env.reset(jax.random.key(15), env_params)
    scores = {}
    for mode in ("per_agent", "joint"):
        player = LookaheadPlayer(
            env,
            PREDATOR,
            LookaheadConfig(num_rollouts=2, horizon=2, mode=mode),
            PolicyOpponentModel(prey, PREY, temperature=0.5),
            predator,
        )
        plan = jax.jit(player.plan)(
            params,
            jax.random.key(16),
            state,
            obs[PREDATOR],
            jnp.zeros((1, 0)),
            jnp.ones((1,), bool),
        )
        scores[mode] = plan
    np.testing.assert_allclose(
        scores["per_agent"].scores[0], scores["joint"].scores, rtol=1e-6
    )
    np.testing.assert_array_equal(scores["per_agent"].actions, scores["joint"].actions)


def test_opponent_head_model_mixes_the_team_predictions(tag):
    env, env_params, predator, _, weights, obs, _ = tag
    team_obs = obs[PREDATOR][0]
    head = predator.module().apply(
        weights["predator"], agent_inputs(predator, team_obs)
    )[1]
    probs = jax.nn.softmax(head, -1)  # [3 agents, 1 prey, 5]
    all_obs = (team_obs, obs[PREY][0])
    mixed = OpponentHeadModel(predator, PREDATOR).logits(
        weights["predator"], (), all_obs
    )
    np.testing.assert_allclose(jnp.exp(mixed), probs.mean(0), rtol=1e-5)
    np.testing.assert_allclose(jnp.exp(mixed).sum(-1), 1.0, rtol=1e-5)
    second = OpponentHeadModel(predator, PREDATOR, agent=1)
    np.testing.assert_allclose(
        jnp.exp(second.logits(weights["predator"], (), all_obs)), probs[1], rtol=1e-5
    )


def test_policy_opponent_model_greedy_and_temperature(tag):
    _, _, _, prey, weights, obs, _ = tag
    all_obs = (obs[PREDATOR][0], obs[PREY][0])
    q = q_values(prey, weights["prey"], obs[PREY][0])  # [1, 5]
    boltzmann = PolicyOpponentModel(prey, PREY, temperature=0.5)
    np.testing.assert_allclose(boltzmann.logits(weights["prey"], (), all_obs), q / 0.5)
    one_hot = PolicyOpponentModel(prey, PREY, greedy=True).logits(
        weights["prey"], (), all_obs
    )
    np.testing.assert_array_equal(
        jax.nn.softmax(one_hot, -1), jax.nn.one_hot(jnp.argmax(q, -1), 5)
    )


@pytest.fixture(scope="module")
def intent_game():
    env, env_params = make("tag_intent")
    predator = q_spec(3, 16)
    prey = q_spec(1, 18)
    weights = (
        init_params(predator, jax.random.key(17)),
        init_params(prey, jax.random.key(18)),
    )
    _, state = env.reset(jax.random.key(19), env_params)
    return env, env_params, predator, prey, weights, state.replace(intent=jnp.int32(2))


def test_intent_model_puts_the_sampled_intent_in_the_prey_observation(intent_game):
    env, env_params, _, prey, weights, state = intent_game
    model = IntentConditionedModel(PolicyOpponentModel(prey, PREY), num_intents=4)
    belief = jnp.array([0.0, 1.0, 0.0, 0.0])
    model_params = IntentModelParams(weights[1], belief)
    latent = model.sample_latent(model_params, jax.random.key(20))
    assert int(latent) == 1
    logits = model.logits(model_params, latent, env.observe(state, env_params))
    as_intent_1 = env.observe(state.replace(intent=jnp.int32(1)), env_params)
    np.testing.assert_allclose(logits, q_values(prey, weights[1], as_intent_1[PREY]))
    # A half-half belief draws only those two intents, about equally often.
    half = IntentModelParams(weights[1], jnp.array([0.5, 0.0, 0.5, 0.0]))
    draws = jax.vmap(model.sample_latent, in_axes=(None, 0))(
        half, jax.random.split(jax.random.key(21), 2000)
    )
    counts = np.bincount(np.asarray(draws), minlength=4)
    assert counts[1] == counts[3] == 0 and abs(counts[0] - 1000) < 100


@pytest.mark.slow
def test_intent_planner_with_a_sure_belief_equals_the_prey_told_that_intent(
    intent_game,
):
    env, env_params, predator, prey, weights, state = intent_game
    config = LookaheadConfig(num_rollouts=2, horizon=2)
    policy = PolicyOpponentModel(prey, PREY)
    intent_player = LookaheadPlayer(
        env, PREDATOR, config, IntentConditionedModel(policy, 4), predator
    )
    told = state.replace(intent=jnp.int32(3))
    obs = env.observe(told, env_params)[PREDATOR]
    key = jax.random.key(22)
    believed = jax.jit(intent_player.plan)(
        LookaheadParams(
            env_params,
            weights[0],
            IntentModelParams(weights[1], jnp.array([0.0, 0.0, 0.0, 1.0])),
        ),
        key,
        state,  # the true intent (2) is not what the imagined prey follows
        obs,
        *first_step(),
    )
    plain_player = LookaheadPlayer(env, PREDATOR, config, policy, predator)
    plain = jax.jit(plain_player.plan)(
        LookaheadParams(env_params, weights[0], weights[1]),
        key,
        told,
        obs,
        *first_step(),
    )
    np.testing.assert_allclose(believed.scores, plain.scores, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(believed.actions, plain.actions)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("num_rollouts", 0),
        ("horizon", -1),
        ("gamma", 1.5),
        ("mode", "tree"),
        ("leaf_weight", float("nan")),
    ],
)
def test_config_errors_name_the_field(field, value):
    with pytest.raises(InvalidParameterError, match=field):
        LookaheadConfig(**{field: value})


def test_player_errors_name_what_does_not_fit(tag):
    env, env_params, predator, prey, weights, obs, states = tag
    config = LookaheadConfig()
    model = PolicyOpponentModel(prey, PREY)
    with pytest.raises(InvalidParameterError, match="own_spec: obs_size"):
        LookaheadPlayer(env, PREDATOR, config, model, q_spec(3, 15))
    with pytest.raises(InvalidParameterError, match="team: unknown team 'wolf'"):
        LookaheadPlayer(env, "wolf", config, model, predator)
    three = FunctionOpponentModel(lambda *_: jnp.zeros((3, 5)), 3, 5)
    with pytest.raises(InvalidParameterError, match="opponent_model: predicts 3"):
        LookaheadPlayer(env, PREDATOR, config, three, predator)
    with pytest.raises(InvalidParameterError, match="leaf_fn"):
        LookaheadPlayer(env, PREDATOR, config, model, q_spec(3, 16, kind="actor"))
    with pytest.raises(InvalidParameterError, match="no opponent head"):
        OpponentHeadModel(prey, PREY)
    narrow = FunctionOpponentModel(lambda *_: jnp.zeros((1, 4)), 1, 5)
    player = LookaheadPlayer(env, PREDATOR, config, narrow, predator)
    with pytest.raises(InvalidParameterError, match=r"logits have shape \(1, 4\)"):
        jax.eval_shape(
            player.plan,
            LookaheadParams(env_params, weights["predator"], ()),
            jax.random.key(0),
            jax.tree.map(lambda x: x[0], states),
            obs[PREDATOR][0],
            *first_step(),
        )
    assert hash(LookaheadPlayer(env, "predator", config, model, predator)) == hash(
        LookaheadPlayer(env, PREDATOR, config, model, predator)
    )
