"""LeMOL's opponent model: an LSTM that reads the opponent's experience, step by
step and across episodes, and predicts the opponent's current action.

At step ``t`` the model predicts the opponent's action from its observation and
the LSTM state ``h_{t-1}``: ``p_t = head(h_{t-1}, o_t)``; after the step it reads
what the opponent saw and did, ``h_t = LSTM(h_{t-1}, embed(o_t, a_t))``. The state
is never reset between episodes, so it can track where the opponent is in its
learning rather than only what a fixed policy would do (Davies et al. 2020). The
model sees the opponent's observations and actions, the information MADDPG's
centralised critics already use. With ``memory=False`` the head sees a zero state:
a behaviour clone that ignores learning, the baseline LeMOL is measured against.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax

from mopa.algos.maddpg.losses import ACTION_SIZE, MLP

LSTMState = tuple[jax.Array, jax.Array]
"""``(cell [..., H], hidden [..., H])``."""


class OpponentModel(nn.Module):
    """Prediction head on an LSTM over the opponent's (observation, action)
    stream; see the module docstring. Outputs are logits (discrete moves) or
    pre-sigmoid action vectors (continuous), ``[..., 5]``."""

    hidden_dim: int = 64
    num_units: int = 64
    memory: bool = True

    def setup(self):
        self.embed = nn.Dense(self.hidden_dim)
        # No orthogonal init: its QR deadlocks the CPU runtime under vmap (see
        # mopa.models.networks).
        self.lstm = nn.OptimizedLSTMCell(
            self.hidden_dim, recurrent_kernel_init=nn.initializers.lecun_normal()
        )
        self.head = MLP(ACTION_SIZE, self.num_units)

    def predict(self, state: LSTMState, obs: jax.Array) -> jax.Array:
        """Output ``[5]`` for the opponent's observation ``obs`` ``[D]``."""
        hidden = state[1] if self.memory else jnp.zeros_like(state[1])
        return self.head(jnp.concatenate([hidden, obs], -1))

    def observe(self, state: LSTMState, obs: jax.Array, action: jax.Array) -> LSTMState:
        """The state after reading one step: observation ``[D]``, action ``[5]``."""
        x = nn.relu(self.embed(jnp.concatenate([obs, action], -1)))
        state, _ = self.lstm(state, x)
        return state

    def __call__(self, state: LSTMState, obs: jax.Array, action: jax.Array):
        return self.observe(state, obs, action), self.predict(state, obs)


def initial_state(hidden_dim: int) -> LSTMState:
    """The zero LSTM state at the start of a play-out."""
    return jnp.zeros((hidden_dim,)), jnp.zeros((hidden_dim,))


def prediction(out: jax.Array, discrete: bool) -> jax.Array:
    """What the agent reads from output ``out`` ``[..., 5]``: move probabilities
    (discrete) or the predicted force vector (continuous)."""
    return jax.nn.softmax(out) if discrete else jax.nn.sigmoid(out)


def prediction_loss(out: jax.Array, action: jax.Array, discrete: bool) -> jax.Array:
    """Per-step loss ``[...]`` of outputs ``[..., 5]`` against the opponent's
    action vectors ``[..., 5]``: cross-entropy for one-hot moves, squared error
    (summed over the 5 components) for force vectors."""
    if discrete:
        return optax.softmax_cross_entropy(out, action)
    return jnp.sum((jax.nn.sigmoid(out) - action) ** 2, -1)


def prediction_scores(
    pred: jax.Array, action: jax.Array, discrete: bool
) -> dict[str, jax.Array]:
    """Per-step scores ``[...]`` of predictions ``pred`` (from :func:`prediction`)
    against the opponent's action vectors, beside a uniform predictor's:

    * ``om_loss``: cross-entropy (discrete) or squared error (continuous);
    * ``om_uniform_loss``: the same for the uniform predictor (``log 5``, or the
      squared error of predicting 0.5, the mean of ``U[0, 1]``, everywhere);
    * ``om_accuracy`` (discrete only): the most likely move is the one played.
    """
    if discrete:
        return {
            "om_loss": -jnp.sum(action * jnp.log(pred + 1e-8), -1),
            "om_uniform_loss": jnp.full(pred.shape[:-1], jnp.log(ACTION_SIZE)),
            "om_accuracy": (jnp.argmax(pred, -1) == jnp.argmax(action, -1)).astype(
                jnp.float32
            ),
        }
    return {
        "om_loss": jnp.sum((pred - action) ** 2, -1),
        "om_uniform_loss": jnp.sum((0.5 - action) ** 2, -1),
    }
