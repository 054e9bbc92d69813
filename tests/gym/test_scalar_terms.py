"""The reward terms in plain floats (:mod:`cosim.gym.scalar_terms`) equal the arrays' of
:mod:`cosim.gym.rewards` to the bit, decision after decision (the state of the peak and the
cumulative delay carried on), on random rows with NaN, ±0, ±inf and values of every magnitude."""

from __future__ import annotations

import copy
import struct
from pathlib import Path

import numpy as np
import pytest

from cosim.gym import scalar_terms
from cosim.gym.rewards import RewardTerms
from cosim.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[2]
SPECIAL = [np.nan, 0.0, -0.0, np.inf, -np.inf, 1.0, -1.0, 100.0, 100.0000001, 0.95, 1.05]


def bits(x: float) -> bytes:
    return struct.pack("<d", x)


def random_rows(rng: np.random.Generator, n_rows: int, n_columns: int) -> list[list[float]]:
    values = rng.standard_normal((n_rows, n_columns)) * 10.0 ** rng.integers(-12, 12, (n_rows, n_columns))
    special = rng.random((n_rows, n_columns)) < 0.3
    values[special] = rng.choice(SPECIAL, size=int(special.sum()))
    return values.tolist()


#: between them every term: rl_site the site's and the IT terms, default.toml unmet cooling,
#: campus_pv_battery.toml an export price column
@pytest.mark.parametrize("scenario", ["rl_site.toml", "rl_voltage.toml", "default.toml", "campus_pv_battery.toml"])
@pytest.mark.filterwarnings("ignore::UserWarning")
def test_scalar_terms_equal_the_arrays_to_the_bit(scenario):
    terms = RewardTerms(load_scenario(ROOT / "scenarios" / scenario, {"scenario.engine": "direct"}))
    assert terms.names  # every term of the scenario is compared
    arrays, scalars = terms, copy.deepcopy(terms)
    rng = np.random.default_rng(43)
    for decision in range(2000):
        n_rows = 1 + decision % (scalar_terms.MAX_ROWS - 1)
        rows = random_rows(rng, n_rows, len(terms.columns))
        with np.errstate(invalid="ignore", over="ignore"):  # inf - inf and the like, on purpose
            expected = arrays.compute(np.array(rows), arrays.columns)
        got = scalars.compute_rows(rows)
        assert list(got) == list(expected)
        for name in expected:
            assert bits(got[name]) == bits(expected[name]) or (np.isnan(got[name]) and np.isnan(expected[name])), \
                (name, rows, got[name], expected[name])
        assert {k: bits(v) for k, v in scalars.state.items()} == {k: bits(v) for k, v in arrays.state.items()}


def test_many_rows_go_through_the_arrays(monkeypatch):
    """A decision of 8 rows or more is summed pairwise by numpy: the scalar path is not used."""
    terms = RewardTerms(load_scenario(ROOT / "scenarios" / "rl_site.toml", {"scenario.engine": "direct"}))
    monkeypatch.setattr(scalar_terms, "compute", lambda *a: pytest.fail("scalar path used for 8 rows"))
    terms.compute_rows(random_rows(np.random.default_rng(1), scalar_terms.MAX_ROWS, len(terms.columns)))


def test_every_reward_term_has_its_plain_float_form():
    from cosim.gym.rewards import TERMS

    assert set(scalar_terms.TERMS) == set(TERMS)
