"""mopa's research experiments as named, runnable declarations (``mopa experiment``).

Importing this package registers every experiment into :mod:`mopa.runs` (the
registry, the runner and ``mopa verify``), whose API it re-exports.
"""

from mopa.experiments import cotrain as _cotrain  # noqa: F401 - registers cotrain
from mopa.experiments import exp2 as _exp2  # noqa: F401 - registers exp2
from mopa.experiments import exp3 as _exp3  # noqa: F401 - registers exp3
from mopa.experiments import exp4 as _exp4  # noqa: F401 - registers exp4
from mopa.experiments import exp5 as _exp5  # noqa: F401 - registers exp5
from mopa.experiments import intent as _intent  # noqa: F401 - registers intent
from mopa.experiments import intent_population as _intent_population  # noqa: F401
from mopa.experiments import lemol as _lemol  # noqa: F401 - registers lemol
from mopa.experiments import pola as _pola  # noqa: F401 - registers pola-*
from mopa.experiments import reference as _reference  # noqa: F401
from mopa.experiments import wargame as _wargame  # noqa: F401 - wargame_ladder
from mopa.experiments import wargame_intent as _wargame_intent  # noqa: F401
from mopa.experiments import wargame_transfer as _wargame_transfer  # noqa: F401
from mopa.runs import *  # noqa: F403 - the runs' API, re-exported
from mopa.runs import __all__ as __all__
