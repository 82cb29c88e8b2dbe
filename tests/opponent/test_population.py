"""The population opponent model and its joint belief over (intent, member): clones
recover known stochastic policies, the stacked fit equals cloning each member
alone, the belief finds the true (intent, member), equals brute-force Bayes over
whole matches, carries the style across episodes, says "none fits" (and stays
flat) on moves no member explains, refuses bad input by name, and plugs into the
lookahead planner under jit."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mopa.envs import make
from mopa.envs.pursuit import PREDATOR, PREY
from mopa.errors import InvalidParameterError
from mopa.opponent import population as P  # noqa: N812
from mopa.opponent.bc import BCConfig, bc_logits, init_bc_params, make_train
from mopa.opponent.data import TrajectoryDataset
from mopa.planning import (
    FallbackLatent,
    FunctionOpponentModel,
    LookaheadConfig,
    LookaheadParams,
    LookaheadPlayer,
    MCTSConfig,
    MCTSPlayer,
    PopulationModelParams,
    PopulationOpponentModel,
)
from mopa.policy import PolicySpec, init_params

# A family of M = 3 opponents with K = 2 intents on S = 4 states (one-hot
# observations) and A = 4 actions. Under (intent g, member m) in state s the
# opponent plays PREFERRED[g, m, s] with probability 0.6, the other two of actions
# 0-2 with 0.17 each and action 3 with 0.06: every pair of (g, m) prefers different
# actions in at least two states, and no member plays action 3 often.
PREFERRED = np.array(
    [
        [[0, 1, 2, 0], [1, 2, 0, 1], [2, 0, 1, 2]],
        [[0, 2, 1, 1], [1, 0, 2, 2], [2, 1, 0, 0]],
    ]
)  # [K, M, S]
K, M, S, A = 2, 3, 4, 4
RARE = 3


def true_probs() -> np.ndarray:
    """``[S, K, M, A]`` the family's policies."""
    probs = np.full((K, M, S, A), 0.17)
    probs[..., RARE] = 0.06
    np.put_along_axis(probs, PREFERRED[..., None], 0.6, -1)
    return probs.transpose(2, 0, 1, 3)


TRUE = true_probs()
OBS = np.eye(S, dtype=np.float32)


def sample_member(rng, member, num_examples):
    """``MemberData`` of ``member``: uniform states and intents, sampled actions."""
    states = rng.integers(S, size=num_examples)
    intents = rng.integers(K, size=num_examples)
    probs = TRUE[states, intents, member]  # [N, A]
    actions = (rng.random(num_examples)[:, None] > probs.cumsum(-1)).sum(-1)
    return P.MemberData(OBS[states], actions.astype(np.int32), intents.astype(np.int32))


CONFIG = P.PopulationConfig(
    clone=BCConfig(num_actions=A, hidden=(16,), lr=1e-2, num_epochs=25, batch_size=64),
    num_intents=K,
)


@pytest.fixture(scope="module")
def clones():
    """The clone library fitted on 1536 examples of each member."""
    rng = np.random.default_rng(0)
    members = [sample_member(rng, m, 1536) for m in range(M)]
    params, metrics = P.fit_population(jax.random.key(0), CONFIG, members)
    return params, metrics


def play(key, intent, member, num_steps):
    """``(states [T], actions [T])`` of the true member under ``intent``."""
    key_states, key_actions = jax.random.split(key)
    states = jax.random.randint(key_states, (num_steps,), 0, S)
    logits = jnp.log(jnp.asarray(TRUE, jnp.float32))[states, intent, member]
    return states, jax.random.categorical(key_actions, logits).astype(jnp.int32)


def run_episode(params, state, states, actions):
    """The belief after every step of one episode of a single opponent agent."""
    log_probs = P.population_log_probs(CONFIG, params, jnp.asarray(OBS)[states])
    return P.population_beliefs(state, log_probs[:, None], actions[:, None])


def last(states):
    return jax.tree.map(lambda x: x[-1], states)


# -- the model ------------------------------------------------------------------------
def test_clones_recover_each_members_policy(clones):
    params, metrics = clones
    assert len(metrics) == M and all(np.isfinite(m.loss).all() for m in metrics)
    log_probs = P.population_log_probs(CONFIG, params, jnp.asarray(OBS))
    assert log_probs.shape == (S, K, M, A)
    np.testing.assert_allclose(jnp.exp(log_probs).sum(-1), 1.0, rtol=1e-5)
    # KL(true || clone) for every (state, intent, member), nats.
    kl = np.sum(TRUE * (np.log(TRUE) - np.asarray(log_probs)), -1)
    assert kl.mean() < 0.03 and kl.max() < 0.15
    # Each clone is nearer its own policy than any other (g, m)'s.
    truth = TRUE.reshape(S, K * M, A)
    clone = np.asarray(log_probs).reshape(S, K * M, A)
    cross = np.sum(truth[:, :, None] * (np.log(truth[:, :, None]) - clone[:, None]), -1)
    np.testing.assert_array_equal(np.argmin(cross.mean(0), 1), np.arange(K * M))


def test_member_logits_is_one_entry_of_the_population_logits(clones):
    params, _ = clones
    every = P.population_logits(CONFIG, params, jnp.asarray(OBS))  # [S, K, M, A]
    one = jax.jit(P.member_logits, static_argnums=0)(
        CONFIG, params, jnp.int32(2), jnp.int32(1), jnp.asarray(OBS)
    )
    np.testing.assert_allclose(one, every[:, 1, 2], rtol=1e-5, atol=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("sizes", [(64, 64), (64, 96)], ids=["vmapped", "one-by-one"])
def test_fit_population_equals_cloning_each_member_alone(sizes):
    config = P.PopulationConfig(
        clone=BCConfig(num_actions=A, hidden=(8,), num_epochs=2, batch_size=32),
        num_intents=K,
        drop_obs_tail=1,
    )
    rng = np.random.default_rng(1)
    members = [sample_member(rng, m, n) for m, n in enumerate(sizes)]
    # A trailing entry the clones must not read.
    members = [
        d._replace(obs=np.concatenate([d.obs, rng.normal(size=(len(d.obs), 1))], 1))
        for d in members
    ]
    key = jax.random.key(2)
    params, metrics = P.fit_population(key, config, members)
    assert P.num_members(params) == 2
    train = jax.jit(make_train(config.clone))
    for m, (data, key_m) in enumerate(
        zip(members, jax.random.split(key, 2), strict=True)
    ):
        z = jnp.eye(K)[data.intents]
        alone, alone_metrics = train(
            key_m, jnp.asarray(data.obs[:, :S]), data.actions, z
        )
        mine = jax.tree.map(lambda x, m=m: x[m], params)
        jax.tree.map(
            lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5),
            mine,
            alone,
        )
        np.testing.assert_allclose(metrics[m].loss, alone_metrics.loss, rtol=1e-4)


@pytest.mark.slow
@pytest.mark.parametrize("sizes", [(64, 64), (64, 96)], ids=["vmapped", "one-by-one"])
def test_pooled_member_is_one_more_clone_of_every_members_data(sizes):
    config = P.PopulationConfig(
        clone=BCConfig(num_actions=A, hidden=(8,), num_epochs=2, batch_size=32),
        num_intents=K,
    )
    rng = np.random.default_rng(3)
    members = [sample_member(rng, m, n) for m, n in enumerate(sizes)]
    key = jax.random.key(4)
    params, _ = P.fit_population(key, config, members)
    pooled_config = P.PopulationConfig(**{**vars(config), "pooled_member": True})
    library, metrics = P.fit_population(key, pooled_config, members)
    assert P.num_members(library) == 3 and len(metrics) == 3
    # The members are the library without the pooled one, unchanged.
    jax.tree.map(lambda a, b: np.testing.assert_array_equal(a[:2], b), library, params)
    both = P.MemberData(*[np.concatenate(c) for c in zip(*members, strict=True)])
    alone, alone_metrics = jax.jit(make_train(config.clone))(
        jax.random.fold_in(key, 2), both.obs, both.actions, jnp.eye(K)[both.intents]
    )
    jax.tree.map(
        lambda a, b: np.testing.assert_allclose(a[2], b, rtol=1e-4, atol=1e-5),
        library,
        alone,
    )
    np.testing.assert_allclose(metrics[2].loss, alone_metrics.loss, rtol=1e-4)


@pytest.mark.slow
def test_pooled_member_predicts_an_unseen_member_better_than_any_one_clone():
    # Fitted on members 0 and 1; member 2 (unseen) prefers, in every (state,
    # intent), an action neither of them prefers. Exactly, a member's policy gives
    # member 2's moves -1.620 nats per move and the two members' average -1.556.
    config = P.PopulationConfig(**{**vars(CONFIG), "pooled_member": True})
    rng = np.random.default_rng(5)
    fitting = [sample_member(rng, m, 1536) for m in range(2)]
    library, _ = P.fit_population(jax.random.key(6), config, fitting)
    unseen = sample_member(rng, 2, 4000)
    log_probs = P.population_log_probs(config, library, jnp.asarray(unseen.obs))
    taken = log_probs[
        jnp.arange(len(unseen.actions)), unseen.intents, :, unseen.actions
    ]
    per_member = np.asarray(taken.mean(0))  # [3] mean log-likelihood per move
    assert per_member[2] > per_member[:2].max() + 0.04, per_member


def test_member_data_reads_valid_steps_and_episode_intents():
    # Two chains of two episodes of two steps; the prey team has two agents. In
    # chain 1 the second episode ended after one step, so its last step belongs to
    # a third episode (index 2) and is not valid.
    episode = np.array([[0, 0, 1, 1], [0, 0, 1, 2]], np.int32)
    obs = np.arange(2 * 4 * 2 * 3, dtype=np.float32).reshape(2, 4, 2, 3)
    actions = np.arange(2 * 4 * 2, dtype=np.int32).reshape(2, 4, 2) % 5
    intents = np.array([[3, 1], [0, 2]], np.int32)
    arrays = {
        "obs.prey": obs,
        "actions.prey": actions,
        "episode": episode,
        "valid": episode < 2,
        "intent": intents,
        "policy_id": np.zeros(2, np.int32),
    }
    header = {
        "format": "mopa-trajectories",
        "version": 1,
        "env": "toy",
        "team_names": ["prey"],
        "team_sizes": [2],
        "num_chains": 2,
        "episodes_per_chain": 2,
        "horizon": 2,
        "step_fields": ["actions.prey", "episode", "obs.prey", "valid"],
        "episode_fields": ["intent"],
        "chain_fields": ["policy_id"],
        "policy_names": [],
        "metadata": {},
    }
    data = P.member_data(TrajectoryDataset(header, arrays), "prey")
    # 7 valid steps x 2 agents, chain-major, agents innermost.
    assert data.obs.shape == (14, 3) and data.actions.shape == data.intents.shape
    np.testing.assert_array_equal(data.obs, obs.reshape(-1, 3)[:14])
    np.testing.assert_array_equal(data.actions, actions.reshape(-1)[:14])
    np.testing.assert_array_equal(
        data.intents, [3, 3, 3, 3, 1, 1, 1, 1, 0, 0, 0, 0, 2, 2]
    )
    blind = P.member_data(TrajectoryDataset(header, arrays), "prey", intent_field=None)
    np.testing.assert_array_equal(blind.intents, np.zeros(14))
    with pytest.raises(InvalidParameterError, match="intent_field"):
        P.member_data(TrajectoryDataset(header, arrays), "prey", intent_field="valid")


# -- the belief -----------------------------------------------------------------------
def episodes_of(rng, member, num_episodes, steps=12):
    """``(MemberEpisodes, intents [E])`` of ``member``: an intent per episode,
    uniform states, sampled actions; one agent."""
    intents = rng.integers(K, size=num_episodes)
    states = rng.integers(S, size=(num_episodes, steps))
    probs = TRUE[states, intents[:, None], member]  # [E, T, A]
    draws = rng.random((num_episodes, steps))[..., None]
    actions = (draws > probs.cumsum(-1)).sum(-1).astype(np.int32)
    episodes = P.MemberEpisodes(
        OBS[states][:, :, None], actions[:, :, None], np.ones((num_episodes, steps))
    )
    return episodes, intents


def test_episode_log_likelihoods_sum_each_episodes_moves(clones):
    params, _ = clones
    episodes, _ = episodes_of(np.random.default_rng(1), 1, 5)
    got = P.episode_log_likelihoods(CONFIG, params, 1, episodes)
    log_probs = np.asarray(P.population_log_probs(CONFIG, params, jnp.asarray(OBS)))
    for e in range(5):  # log_probs [S, K, M, A]
        states = episodes.obs[e, :, 0].argmax(-1)
        moves = episodes.actions[e, :, 0]
        np.testing.assert_allclose(
            got[e], log_probs[states, :, 1, moves].sum(0), rtol=1e-5
        )


def test_the_belief_at_an_episodes_end_skips_the_padded_steps(clones):
    """An episode that ended early, padded with other moves: the belief at its
    end (:func:`mopa.cotrain.model.last_beliefs`) is the belief after its played
    steps alone."""
    from mopa.cotrain.model import last_beliefs

    params, _ = clones
    episodes, _ = episodes_of(np.random.default_rng(2), 2, 3)
    played = np.arange(12) < np.array([[12], [8], [5]])  # [E, T]
    padded = P.MemberEpisodes(
        episodes.obs, np.where(played[..., None], episodes.actions, RARE), played
    )
    got = last_beliefs(CONFIG, params, padded, 0.05, 0.01)
    for e, length in enumerate((12, 8, 5)):
        alone = P.MemberEpisodes(
            episodes.obs[e : e + 1, :length],
            episodes.actions[e : e + 1, :length],
            np.ones((1, length), bool),
        )
        want = last_beliefs(CONFIG, params, alone, 0.05, 0.01)
        for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
            np.testing.assert_allclose(np.asarray(a)[e], np.asarray(b)[0], rtol=1e-5)


@pytest.mark.slow
def test_intents_are_found_from_a_rough_first_guess():
    """A first guess right for 60% of the episodes (the rest drawn at random):
    EM relabels them from the moves, within 3 points of the best any labeller
    can do (each episode's most likely intent under the true policies)."""
    rng = np.random.default_rng(3)
    drawn = [episodes_of(rng, m, 160) for m in range(M)]
    members = [episodes for episodes, _ in drawn]
    truth = [intents for _, intents in drawn]
    guess = [
        np.where(rng.random(len(t)) < 0.6, t, rng.integers(K, size=len(t)))
        for t in truth
    ]
    labels, changed = P.infer_intents(
        jax.random.key(0), CONFIG, members, guess, rounds=3
    )
    for m, (got, want, first) in enumerate(zip(labels, truth, guess, strict=True)):
        states = members[m].obs[:, :, 0].argmax(-1)  # [E, T]
        moves = members[m].actions[:, :, 0]
        log_true = np.log(TRUE[states, :, m, :])  # [E, T, K, A]
        best = np.take_along_axis(log_true, moves[:, :, None, None], -1)
        bayes = best[..., 0].sum(1).argmax(-1)  # [E]
        assert np.mean(bayes == want) > 0.9
        assert np.mean(first == want) < 0.85
        assert np.mean(got == want) >= np.mean(bayes == want) - 0.03
    assert len(changed) == 3 and changed[0] > 0.1 and changed[-1] < changed[0]
    same, none = P.infer_intents(jax.random.key(0), CONFIG, members, guess, rounds=0)
    assert none == [] and all(
        np.array_equal(a, b) for a, b in zip(same, guess, strict=True)
    )
    with pytest.raises(InvalidParameterError, match="one first guess per member"):
        P.infer_intents(jax.random.key(0), CONFIG, members, guess[:1], rounds=1)
    with pytest.raises(InvalidParameterError, match=r"intents must be \[160\]"):
        P.episodes_data(members[0], guess[0][:5])


def test_belief_concentrates_on_the_true_intent_and_member(clones):
    params, _ = clones
    prior = P.init_population_belief(K, M)
    pairs = list(itertools.product(range(K), range(M)))
    keys = jax.random.split(jax.random.key(3), len(pairs))

    @jax.jit
    def final(key, intent, member):
        states, actions = play(key, intent, member, 60)
        return last(run_episode(params, prior, states, actions))

    for key, (g, m) in zip(keys, pairs, strict=True):
        state = final(key, g, m)
        belief = P.joint_belief(state)
        np.testing.assert_allclose(belief.sum(), 1.0, rtol=1e-5)
        assert belief[g, m] > 0.95, (g, m, np.asarray(belief))
        assert not P.none_fits(state) and P.none_fits_probability(state) < 1e-3
        assert int(state.steps) == 60 == int(state.episode_steps)


@pytest.mark.slow
def test_style_carries_across_episodes_and_the_intent_resets(clones):
    params, _ = clones
    intent_prior = jnp.array([0.25, 0.75])
    prior = P.init_population_belief(K, M, intent_prior=intent_prior)
    states, actions = play(jax.random.key(4), 0, 2, 30)
    first = last(run_episode(params, prior, states, actions))
    assert P.member_belief(first)[2] > 0.95 and P.intent_belief(first)[0] > 0.95

    reset = P.reset_intent(first)
    np.testing.assert_allclose(P.intent_belief(reset), intent_prior, rtol=1e-5)
    np.testing.assert_allclose(
        P.member_belief(reset), P.member_belief(first), rtol=1e-5
    )
    np.testing.assert_allclose(
        reset.posterior.sum(0), first.posterior.sum(0), rtol=1e-5
    )
    assert reset.log_odds_none_fits == first.log_odds_none_fits
    assert int(reset.episode_steps) == 0 and int(reset.steps) == 30

    # The second episode (intent 1, same member) needs few steps to find the
    # intent: the style is already known.
    states, actions = play(jax.random.key(5), 1, 2, 10)
    second = last(run_episode(params, reset, states, actions))
    assert P.intent_belief(second)[1] > 0.9 and P.member_belief(second)[2] > 0.95
    fresh = last(run_episode(params, prior, states, actions))
    assert P.joint_belief(second)[1, 2] > P.joint_belief(fresh)[1, 2]


def least_likely_moves(params, state, states):
    """The moves of an adversary that always plays the action the belief's
    predictive finds least likely, and the belief after each."""
    log_probs = P.population_log_probs(CONFIG, params, jnp.asarray(OBS)[states])

    def step(state, log_probs):
        floored = (1 - P.DEFAULT_EPSILON) * jnp.exp(log_probs) + P.DEFAULT_EPSILON / A
        predictive = jnp.einsum("km,kma->a", state.posterior, floored)
        action = jnp.argmin(predictive).astype(jnp.int32)
        state = P.update_population_belief(state, log_probs[None], action[None])
        return state, state

    return jax.lax.scan(step, state, log_probs)[1]


@pytest.mark.parametrize("opponent", ["always-rare", "least-likely", "in-family"])
def test_moves_no_member_explains_say_none_fits_and_stay_flat(clones, opponent):
    params, _ = clones
    prior = P.init_population_belief(K, M)
    states, actions = play(jax.random.key(6), 1, 0, 40)
    if opponent == "least-likely":
        trace = least_likely_moves(params, prior, states)
    else:
        if opponent == "always-rare":
            actions = jnp.full_like(actions, RARE)
        trace = run_episode(params, prior, states, actions)
    state = last(trace)
    members = P.member_belief(state)
    if opponent == "in-family":
        assert not P.none_fits(state) and members[0] > 0.95
        assert float(trace.surprise.mean()) < 0
        return
    # log-odds start at logit(0.01) = -4.6 and every move adds > 0 nats.
    assert np.all(np.asarray(trace.surprise) > 0)
    assert np.all(np.diff(np.asarray(trace.log_odds_none_fits)) > 0)
    assert P.none_fits(state) and P.none_fits_probability(state) > 0.999
    # Flat over members (1/3 each), though the in-family posterior may be sharp.
    assert float(members.max()) < 0.34
    np.testing.assert_allclose(P.joint_belief(state), 1 / (K * M), atol=1e-3)
    assert P.excess_surprisal(state) > 20.0


def test_belief_equals_brute_force_bayes_over_a_match():
    """Two episodes (4 then 3 steps) of two opponent agents with random models:
    every posterior the scanned belief reports equals Bayes over all hypotheses
    (g1, g2, m) and "none fits", each likelihood a product over steps and agents."""
    rng = np.random.default_rng(7)
    K2, M3, A3, AGENTS, T1, T2 = 2, 3, 3, 2, 4, 3
    log_probs = np.asarray(
        jax.nn.log_softmax(rng.normal(size=(T1 + T2, AGENTS, K2, M3, A3)) * 2, -1)
    )
    actions = rng.integers(A3, size=(T1 + T2, AGENTS)).astype(np.int32)
    intent_prior, member_prior = np.array([0.3, 0.7]), np.array([0.5, 0.2, 0.3])
    fallback, eps = 0.2, 0.1

    prior = P.init_population_belief(
        K2,
        M3,
        intent_prior=intent_prior * 2,  # weights, normalised by the belief
        member_prior=member_prior,
        fallback_prior=fallback,
    )
    scan = jax.jit(P.population_beliefs)
    first = scan(prior, log_probs[:T1], actions[:T1], eps)
    second = scan(P.reset_intent(last(first)), log_probs[T1:], actions[T1:], eps)

    floored = (1 - eps) * np.exp(log_probs) + eps / A3  # [T, O, K, M, A]
    taken = np.take_along_axis(floored, actions[..., None, None, None], -1)[..., 0]
    step_lik = taken.prod(1)  # [T, K, M]

    def brute(t):
        """Posterior after step t: over (g, m) of t's episode given the family,
        P(none fits), and log p(moves | family)."""
        episode_1 = min(t + 1, T1)
        weights = {}
        for g1, g2, m in itertools.product(range(K2), range(K2), range(M3)):
            lik = np.prod(step_lik[:episode_1, g1, m])
            if t >= T1:
                lik *= np.prod(step_lik[T1 : t + 1, g2, m])
            weight = intent_prior[g1] * intent_prior[g2] * member_prior[m] * lik
            current = (g2 if t >= T1 else g1, m)
            weights[current] = weights.get(current, 0.0) + weight
        family = sum(weights.values())
        posterior = np.zeros((K2, M3))
        for (g, m), w in weights.items():
            posterior[g, m] = w / family
        none = fallback * A3 ** (-AGENTS * (t + 1))
        return posterior, none / (none + (1 - fallback) * family), np.log(family)

    for t in range(T1 + T2):
        states = first if t < T1 else second
        row = jax.tree.map(lambda x, i=t % T1 if t < T1 else t - T1: x[i], states)
        posterior, none, log_family = brute(t)
        np.testing.assert_allclose(row.posterior, posterior, rtol=1e-4, atol=1e-6)
        np.testing.assert_allclose(P.none_fits_probability(row), none, rtol=1e-4)
        np.testing.assert_allclose(row.log_likelihood, log_family, rtol=1e-5)
        flat = np.outer(intent_prior, member_prior)
        np.testing.assert_allclose(
            P.joint_belief(row), none * flat + (1 - none) * posterior, rtol=1e-4
        )
    # The scan equals one update at a time, un-jitted.
    state = prior
    for t in range(T1):
        state = P.update_population_belief(state, log_probs[t], actions[t], eps)
    jax.tree.map(
        lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5),
        state,
        last(first),
    )
    # A step that is not valid changes nothing.
    same = P.update_population_belief(state, log_probs[0], actions[0], eps, False)
    jax.tree.map(np.testing.assert_array_equal, same, state)


def test_a_zero_floor_rules_members_out_and_impossible_moves_say_none_fits():
    # Member 0 never plays action 1; member 1 plays both. One agent, K = 1, A = 2.
    log_probs = jnp.log(jnp.array([[[[1.0, 0.0], [0.5, 0.5]]]]))  # [O, K, M, A]
    state = P.init_population_belief(1, 2)
    state = P.update_population_belief(state, log_probs, jnp.array([1]), 0.0)
    np.testing.assert_allclose(state.posterior, [[0.0, 1.0]], atol=1e-7)
    # Action 1 again under a model where no member plays it: the posterior stays,
    # "none fits" becomes certain, and nothing is NaN.
    never = jnp.log(jnp.array([[[[1.0, 0.0], [1.0, 0.0]]]]))
    state = P.update_population_belief(state, never, jnp.array([1]), 0.0)
    np.testing.assert_allclose(state.posterior, [[0.0, 1.0]], atol=1e-7)
    assert float(P.none_fits_probability(state)) == 1.0
    np.testing.assert_allclose(P.joint_belief(state), [[0.5, 0.5]])
    assert not any(np.isnan(x).any() for x in jax.tree.leaves(state))


def bad_update(**overrides):
    args = {
        "state": P.init_population_belief(K, M),
        "log_probs": jnp.zeros((1, K, M, A)),
        "actions": jnp.zeros((1,), jnp.int32),
    }
    return lambda: P.update_population_belief(**{**args, **overrides})


CLONE = BCConfig(num_actions=A, hidden=(4,))


@pytest.mark.parametrize(
    ("field", "call"),
    [
        ("num_intents", lambda: P.init_population_belief(0, M)),
        ("num_members", lambda: P.init_population_belief(K, 0)),
        ("intent_prior", lambda: P.init_population_belief(K, M, intent_prior=[0.5])),
        (
            "intent_prior",
            lambda: P.init_population_belief(K, M, intent_prior=[np.nan, 1.0]),
        ),
        (
            "member_prior",
            lambda: P.init_population_belief(K, M, member_prior=[1.0, -1.0, 1.0]),
        ),
        ("fallback_prior", lambda: P.init_population_belief(K, M, fallback_prior=1)),
        ("epsilon", bad_update(epsilon=-0.1)),
        ("log_probs", bad_update(log_probs=jnp.zeros((1, K, M + 1, A)))),
        ("actions", bad_update(actions=jnp.zeros((2,), jnp.int32))),
        ("members", lambda: P.fit_population(jax.random.key(0), CONFIG, [])),
        (
            "members\\[0\\]: intents",
            lambda: P.fit_population(
                jax.random.key(0),
                CONFIG,
                [P.MemberData(OBS, np.zeros(S, np.int32), np.full(S, K))],
            ),
        ),
        ("num_intents", lambda: P.PopulationConfig(clone=CLONE, num_intents=0)),
        ("drop_obs_tail", lambda: P.PopulationConfig(clone=CLONE, drop_obs_tail=-1)),
        ("clone", lambda: P.PopulationConfig(clone=A)),
        (
            "belief",
            lambda: P.sample_population_latent(jax.random.key(0), jnp.ones(3)),
        ),
        ("num_opponents", lambda: PopulationOpponentModel(CONFIG, 1, 0)),
    ],
)
def test_bad_input_names_the_field(field, call):
    with pytest.raises(InvalidParameterError, match=field) as error:
        call()
    assert "\n" not in str(error.value)


# -- the planner ----------------------------------------------------------------------
@pytest.fixture(scope="module")
def intent_planning():
    """``tag_intent`` (the prey sees its intent, K = 4, at the end of its 18
    observations), a random predator network and three random prey clones (with
    output biases that make their moves differ)."""
    env, env_params = make("tag_intent")
    predator = PolicySpec(
        kind="q", num_agents=3, obs_size=16, num_actions=5, hidden=(16,)
    )
    config = P.PopulationConfig(
        clone=BCConfig(num_actions=5, hidden=(8,)), num_intents=4, drop_obs_tail=4
    )
    clone_params = jax.vmap(lambda k: init_bc_params(config.clone, k, 14, 4))(
        jax.random.split(jax.random.key(8), 3)
    )
    biases = 3.0 * jax.random.normal(jax.random.key(11), (3, 5))
    clone_params["params"]["Dense_0"]["bias"] = biases
    _, state = env.reset(jax.random.key(9), env_params)
    own = init_params(predator, jax.random.key(10))
    return env, env_params, predator, config, clone_params, own, state


@pytest.mark.slow
def test_population_model_hides_the_true_intent_and_samples_the_belief(
    intent_planning,
):
    env, env_params, _, config, clone_params, _, state = intent_planning
    model = PopulationOpponentModel(config, PREY)
    assert model.num_actions == 5 and model.num_opponents == 1
    belief = jnp.zeros((4, 3)).at[1, 2].set(0.5).at[3, 0].set(0.5)
    params = PopulationModelParams(clone_params, belief)
    draws = jax.jit(jax.vmap(model.sample_latent, in_axes=(None, 0)))(
        params, jax.random.split(jax.random.key(11), 2000)
    )
    cells = np.asarray(draws.intent) * 3 + np.asarray(draws.member)
    counts = np.bincount(cells, minlength=12)
    assert counts[5] + counts[9] == 2000 and abs(counts[5] - 1000) < 100
    latent = P.PopulationLatent(jnp.int32(1), jnp.int32(2))
    told = [
        model.logits(params, latent, env.observe(state.replace(intent=g), env_params))
        for g in (0, 3)
    ]
    np.testing.assert_array_equal(told[0], told[1])
    prey_obs = env.observe(state, env_params)[PREY][:, :14]
    member_2 = jax.tree.map(lambda x: x[2], clone_params)
    want = bc_logits(config.clone, member_2, prey_obs, jnp.eye(4)[jnp.array([1])])
    np.testing.assert_allclose(told[0], want, rtol=1e-5, atol=1e-6)


def test_greedy_population_model_plays_each_members_argmax(intent_planning):
    env, env_params, _, config, clone_params, _, state = intent_planning
    obs = env.observe(state, env_params)
    fallback = clone_told(config, 0)
    member = P.PopulationLatent(jnp.int32(3), jnp.int32(1))
    params = PopulationModelParams(
        clone_params,
        SURE,
        none_fits=jnp.float32(0.0),
        fallback_params=jax.tree.map(lambda x: x[2], clone_params),
    )

    def imagined(outside):
        return FallbackLatent(member, jnp.bool_(outside), jnp.zeros((0,)))

    for kwargs, latent in (
        ({}, member),
        ({"fallback": fallback}, imagined(False)),
    ):
        sampled = PopulationOpponentModel(config, PREY, **kwargs).logits(
            params, latent, obs
        )
        greedy = PopulationOpponentModel(config, PREY, greedy=True, **kwargs).logits(
            params, latent, obs
        )
        best = np.argmax(np.asarray(sampled), -1)
        np.testing.assert_array_equal(np.argmax(np.asarray(greedy), -1), best)
        assert np.all(np.isneginf(np.asarray(greedy)).sum(-1) == 4)
    # the fallback's own logits are left as they are
    np.testing.assert_allclose(
        PopulationOpponentModel(config, PREY, fallback=fallback, greedy=True).logits(
            params, imagined(True), obs
        ),
        fallback.logits(params.fallback_params, None, obs),
    )


def clone_told(config, intent):
    """One clone (its weights as ``params``) under a fixed intent, as a plain
    opponent model: what a sure belief on (intent, that member) must plan as."""
    return FunctionOpponentModel(
        lambda params, latent, obs: bc_logits(
            config.clone, params, obs[PREY][:, :14], jnp.eye(4)[jnp.array([intent])]
        ),
        num_opponents=1,
        num_actions=5,
    )


SURE = jnp.zeros((4, 3)).at[3, 1].set(1.0)  # intent 3, member 1


@pytest.mark.slow
def test_lookahead_plans_with_the_population_model_under_jit(intent_planning):
    env, env_params, predator, config, clone_params, own, state = intent_planning
    lookahead = LookaheadConfig(num_rollouts=2, horizon=3)
    player = LookaheadPlayer(
        env, PREDATOR, lookahead, PopulationOpponentModel(config, PREY), predator
    )
    obs = env.observe(state, env_params)[PREDATOR]
    carry, reset = jnp.zeros((3, 0)), jnp.ones((3,), bool)
    key = jax.random.key(12)

    # A sure belief on (intent 3, member 1) plans as that clone told intent 3.
    sure = SURE
    plan = jax.jit(player.plan)
    believed = plan(
        LookaheadParams(env_params, own, PopulationModelParams(clone_params, sure)),
        key,
        state,
        obs,
        carry,
        reset,
    )
    member_1 = jax.tree.map(lambda x: x[1], clone_params)
    reference = LookaheadPlayer(
        env, PREDATOR, lookahead, clone_told(config, 3), predator
    )
    plain = jax.jit(reference.plan)(
        LookaheadParams(env_params, own, member_1), key, state, obs, carry, reset
    )
    np.testing.assert_allclose(believed.scores, plain.scores, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(believed.actions, plain.actions)

    # Beliefs batched under one jit: each plan is the one planned alone, and a
    # belief on the other two members (whose moves differ) plans differently.
    def plan_with(belief):
        model_params = PopulationModelParams(clone_params, belief)
        return player.plan(
            LookaheadParams(env_params, own, model_params),
            key,
            state,
            obs,
            carry,
            reset,
        )

    others = P.joint_belief(
        P.init_population_belief(4, 3, member_prior=[1.0, 0.0, 1.0])
    )
    batched = jax.jit(jax.vmap(plan_with))(jnp.stack([others, sure]))
    assert batched.actions.shape == (2, 3) and np.isfinite(batched.scores).all()
    np.testing.assert_allclose(batched.scores[1], believed.scores, rtol=1e-5)
    np.testing.assert_allclose(
        batched.scores[0], jax.jit(plan_with)(others).scores, rtol=1e-5, atol=1e-6
    )
    assert not np.allclose(batched.scores[0], batched.scores[1])


@pytest.mark.slow
def test_tree_search_with_a_sure_belief_searches_as_that_clone(intent_planning):
    env, env_params, predator, config, clone_params, own, state = intent_planning
    search = MCTSConfig(num_simulations=16, num_particles=2, leaf_horizon=1)
    obs = env.observe(state, env_params)[PREDATOR]
    args = (jax.random.key(13), state, obs, jnp.zeros((3, 0)), jnp.ones((3,), bool))
    population = MCTSPlayer(
        env, PREDATOR, search, PopulationOpponentModel(config, PREY), predator
    )
    believed = jax.jit(population.plan)(
        LookaheadParams(env_params, own, PopulationModelParams(clone_params, SURE)),
        *args,
    )
    reference = MCTSPlayer(env, PREDATOR, search, clone_told(config, 3), predator)
    member_1 = jax.tree.map(lambda x: x[1], clone_params)
    plain = jax.jit(reference.plan)(LookaheadParams(env_params, own, member_1), *args)
    np.testing.assert_array_equal(believed.visit_counts, plain.visit_counts)
    np.testing.assert_allclose(believed.q_values, plain.q_values, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(believed.actions, plain.actions)
    assert int(believed.visit_counts.sum()) == 16


@pytest.mark.slow
def test_a_fallback_model_plays_when_none_fits(intent_planning):
    env, env_params, predator, config, clone_params, own, state = intent_planning
    # The fallback: member 0 told intent 2, as a plain model of its own.
    fallback = clone_told(config, 2)
    member_0 = jax.tree.map(lambda x: x[0], clone_params)
    model = PopulationOpponentModel(config, PREY, fallback=fallback)
    plain = PopulationOpponentModel(config, PREY)

    def params(none_fits):
        outside = jnp.float32(none_fits)
        return PopulationModelParams(clone_params, SURE, outside, member_0)

    keys = jax.random.split(jax.random.key(14), 500)
    sample = jax.jit(jax.vmap(model.sample_latent, in_axes=(None, 0)))
    # Never outside: the members drawn are those drawn without a fallback.
    never = sample(params(0.0), keys)
    alone = jax.vmap(plain.sample_latent, in_axes=(None, 0))(params(0.0), keys)
    assert not np.asarray(never.outside).any()
    np.testing.assert_array_equal(never.family.member, alone.member)
    np.testing.assert_array_equal(never.family.intent, alone.intent)
    # Outside about as often as none_fits says.
    share = float(np.mean(sample(params(0.3), keys).outside))
    assert abs(share - 0.3) < 0.06, share

    # A rollout imagines the fallback when outside, the member otherwise.
    obs = env.observe(state, env_params)
    always = model.sample_latent(params(1.0), jax.random.key(15))
    family = model.sample_latent(params(0.0), jax.random.key(15))
    np.testing.assert_allclose(
        model.logits(params(1.0), always, obs),
        fallback.logits(member_0, (), obs),
        rtol=1e-6,
    )
    np.testing.assert_allclose(
        model.logits(params(0.0), family, obs),
        plain.logits(params(0.0), family.family, obs),
        rtol=1e-6,
    )

    # A lookahead sure that none fits plans as the fallback model alone.
    lookahead = LookaheadConfig(num_rollouts=2, horizon=3)
    args = (
        jax.random.key(16),
        state,
        obs[PREDATOR],
        jnp.zeros((3, 0)),
        jnp.ones((3,), bool),
    )
    outside = jax.jit(LookaheadPlayer(env, PREDATOR, lookahead, model, predator).plan)(
        LookaheadParams(env_params, own, params(1.0)), *args
    )
    reference = jax.jit(
        LookaheadPlayer(env, PREDATOR, lookahead, fallback, predator).plan
    )(LookaheadParams(env_params, own, member_0), *args)
    np.testing.assert_allclose(outside.scores, reference.scores, rtol=1e-5, atol=1e-6)


def test_the_fallback_draws_its_latent_with_the_rollout_key(intent_planning):
    """Common random numbers: a rollout that imagines the fallback imagines what
    the fallback model alone would with the same key (a planner sure that none
    fits then plays the fallback's planner move for move)."""
    config, clone_params = intent_planning[3], intent_planning[4]
    fallback = FunctionOpponentModel(
        lambda p, z, o: jax.nn.one_hot(z, 5)[None],
        1,
        5,
        latent_fn=lambda p, key: jax.random.randint(key, (), 0, 5),
    )
    model = PopulationOpponentModel(config, PREY, fallback=fallback)
    params = PopulationModelParams(clone_params, SURE, jnp.float32(1.0), ())
    keys = jax.random.split(jax.random.key(17), 200)
    drawn = jax.vmap(model.sample_latent, in_axes=(None, 0))(params, keys)
    alone = jax.vmap(fallback.sample_latent, in_axes=(None, 0))((), keys)
    assert np.asarray(drawn.outside).all()
    np.testing.assert_array_equal(drawn.fallback, alone)
    assert len(np.unique(np.asarray(alone))) == 5


def test_a_fallback_of_another_shape_is_refused(intent_planning):
    config = intent_planning[3]
    wrong = FunctionOpponentModel(lambda p, z, o: jnp.zeros((1, 4)), 1, 4)
    with pytest.raises(InvalidParameterError, match="fallback: its logits must be"):
        PopulationOpponentModel(config, PREY, fallback=wrong)


def test_planner_belief_is_the_posterior_and_the_none_fits_probability():
    state = P.init_population_belief(2, 3, fallback_prior=0.2)
    state = P.update_population_belief(
        state, jnp.log(jnp.full((1, 2, 3, 4), 0.25)).at[0, 1, 2, 0].set(0.0), [0]
    )
    belief, none_fits = P.planner_belief(state)
    np.testing.assert_allclose(belief, state.posterior)
    assert float(none_fits) == pytest.approx(float(P.none_fits_probability(state)))
    np.testing.assert_allclose(
        P.joint_belief(state),
        none_fits * jnp.full((2, 3), 1 / 6) + (1 - none_fits) * belief,
        rtol=1e-6,
    )


def test_the_planning_prior_moves_only_the_planners_none_fits_probability():
    state = P.init_population_belief(2, 3, fallback_prior=0.01)
    # Two moves that every member gives probability 0.7 (the uniform 0.25): the
    # family gains log(0.7 / 0.25) nats per move, floored at eps = 0.05.
    member = jnp.log(jnp.full((1, 2, 3, 4), 0.1)).at[..., 0].set(jnp.log(0.7))
    for _ in range(2):
        state = P.update_population_belief(state, member, [0])
    floored = 0.95 * 0.7 + 0.05 / 4
    evidence = 2 * (np.log(0.25) - np.log(floored))  # for "none fits", < 0
    np.testing.assert_allclose(
        state.log_odds_none_fits - state.log_odds_prior, evidence, rtol=1e-5
    )
    # Without a planning prior: the belief's own none-fits probability.
    _, own = P.planner_belief(state)
    assert float(own) == pytest.approx(float(P.none_fits_probability(state)))
    # With one: the same evidence from the planner's prior.
    posterior, planning = P.planner_belief(state, 0.9)
    np.testing.assert_allclose(posterior, state.posterior)
    expected = 1 / (1 + np.exp(-(evidence + np.log(0.9 / 0.1))))
    assert float(planning) == pytest.approx(expected, rel=1e-5)
    # The prior the belief started from gives the belief's own probability back.
    assert float(P.planner_belief(state, 0.01)[1]) == pytest.approx(float(own))
    # The flag and what a user reads do not move.
    assert float(P.none_fits_probability(state)) < 0.01
    with pytest.raises(InvalidParameterError, match=r"planning_prior must be in"):
        P.planner_belief(state, 1.0)


def test_the_recognition_rule_mirrors_the_flag():
    """With the prior 1 - p the planner turns to the family (w < 0.5) at the
    likelihood ratio at which the flag, from p, would say "none fits"."""
    p = 0.01
    assert P.recognition_prior(p) == pytest.approx(0.99)
    c = (1 - p) / p  # 99: the ratio either call needs

    def after(log_ratio_for_none_fits):
        state = P.init_population_belief(1, 1, fallback_prior=p)
        return state.replace(
            log_odds_none_fits=state.log_odds_prior + log_ratio_for_none_fits
        )

    for margin, family in ((-0.05, False), (0.05, True)):
        # "none fits" over the family by c * e^margin: the flag flips at c.
        flagged = after(np.log(c) + margin)
        assert bool(P.none_fits(flagged)) is (margin > 0)
        # The family over "none fits" by c * e^margin: the planner flips at c.
        recognised = after(-(np.log(c) + margin))
        _, w = P.planner_belief(recognised, P.recognition_prior(p))
        assert bool(w < 0.5) is family
    with pytest.raises(InvalidParameterError, match="fallback_prior must be in"):
        P.recognition_prior(0.0)


def test_a_clone_library_file_round_trips_and_refuses_another_format(tmp_path):
    from mopa.core.checkpoint import write_msgpack
    from mopa.errors import CheckpointError

    clones = {"dense": {"kernel": np.arange(24, dtype=np.float32).reshape(2, 3, 4)}}
    path = P.save_clones(tmp_path / "clones.msgpack", clones)
    loaded = P.load_clones(path)
    np.testing.assert_array_equal(loaded["dense"]["kernel"], clones["dense"]["kernel"])
    assert isinstance(loaded["dense"]["kernel"], jax.Array)
    write_msgpack(tmp_path / "other.msgpack", {"format": "mopa-policy", "version": 1})
    with pytest.raises(CheckpointError, match="format"):
        P.load_clones(tmp_path / "other.msgpack")
    with pytest.raises(CheckpointError, match="no clones"):
        P.load_clones(tmp_path / "missing.msgpack")


def test_held_out_report_reads_the_belief_and_the_likelihoods(clones):
    """Episodes of members 0 and 2: the report's figures are held_out_likelihoods'
    per move, the best clone in hindsight is one of those two, the population
    beats the uniform model, and the intent belief learns through the episode
    (its accuracy at the last step above the first step's)."""
    params, _ = clones
    rng = np.random.default_rng(3)
    opponents = {}
    for member in (0, 2):
        episodes, intents = episodes_of(rng, member, 40, steps=16)
        opponents[f"m{member}"] = (
            jnp.asarray(episodes.obs),
            jnp.asarray(episodes.actions),
            intents,
        )
    names = ["m0", "m1", "m2"]
    report = P.held_out_report(
        CONFIG, params, opponents, names, epsilon=0.01, fallback_prior=0.01,
        calibration_bins=5,
    )  # fmt: skip
    assert report["num_episodes"] == 80
    assert len(report["accuracy_by_step"]) == len(report["ece_by_step"]) == 16
    assert report["accuracy_by_step"][-1] > report["accuracy_by_step"][0]
    ll = report["log_likelihood_per_move"]
    _, alone_ll, each = P.held_out_likelihoods(
        CONFIG, params, *opponents["m0"][:2], 0.01, 0.01
    )
    assert ll["per_prey"]["m0"]["population"] == pytest.approx(alone_ll / (40 * 16))
    assert ll["best_clone"] in ("m0", "m2")
    assert ll["per_clone"][ll["best_clone"]] == ll["best_single_clone"]
    assert ll["uniform"] == pytest.approx(-np.log(A))
    assert ll["population"] > ll["uniform"]
    best = names.index(ll["best_clone"])
    assert ll["per_prey"]["m0"]["best_single_clone"] == pytest.approx(
        each[best] / (40 * 16)
    )
