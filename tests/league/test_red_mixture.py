"""A Red drawn per episode from a mixture of the league's scripted types: the
game overrides name every league type and carry the normalised weights, a single
type matches :func:`scripted_red_kwargs`, and a bad mixture is refused."""

import pytest

from mopa.errors import InvalidParameterError
from mopa.league.evaluation import (
    LEAGUE_REDS,
    red_mixture_kwargs,
    scripted_red_kwargs,
)


def test_the_weights_are_normalised_over_every_red_type():
    kwargs = red_mixture_kwargs((("L1", 1.0), ("L5", 3.0), ("L1", 0.0)))
    assert kwargs["red"] == ",".join(LEAGUE_REDS)
    probs = kwargs["red_probs"]
    assert len(probs) == 12 and sum(probs) == pytest.approx(1.0)
    # L1 (index 0) 1 of 4, L5 (index 4) 3 of 4, every other type 0
    assert probs[0] == 0.25 and probs[4] == 0.75
    assert all(p == 0.0 for i, p in enumerate(probs) if i not in (0, 4))


def test_one_type_is_the_scripted_reds_overrides():
    assert red_mixture_kwargs((("L3", 2.0),)) == scripted_red_kwargs("L3")


@pytest.mark.parametrize(
    ("mixture", "message"),
    [
        ((("rush", 1.0),), "'rush' is not one of"),
        ((("L1", -1.0), ("L2", 2.0)), "weight of L1 is negative"),
        ((("L1", 0.0),), "sum to 0"),
    ],
)
def test_a_bad_mixture_is_refused(mixture, message):
    with pytest.raises(InvalidParameterError, match=message):
        red_mixture_kwargs(mixture)
