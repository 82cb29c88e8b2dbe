"""Configs from JSON: a field changed from JSON text, lists kept as tuples."""

import pytest

from mopa.core.configs import frozen_value, replace_from_json
from mopa.errors import InvalidParameterError
from mopa.experiments.intent_population import PROFILES

QUICK = PROFILES["quick"]


def test_fields_change_from_json_text_and_lists_become_tuples():
    config = replace_from_json(
        QUICK, [("eval_episodes", "7"), ("out_of_family", '["evader"]')]
    )
    assert config.eval_episodes == 7
    assert config.out_of_family == ("evader",)
    assert config.seed == QUICK.seed  # the rest unchanged
    assert frozen_value([1, 2]) == (1, 2) and frozen_value(3) == 3


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (("no_such_field", "1"), "'no_such_field' is not a field"),
        (("eval_episodes", "ten"), "eval_episodes: the value must be JSON"),
        (("out_of_family", '["nobody"]'), "out_of_family must be keys of"),
    ],
)
def test_a_bad_change_names_what_is_wrong(change, words):
    with pytest.raises(InvalidParameterError, match=words):
        replace_from_json(QUICK, [change])
