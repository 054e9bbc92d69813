"""Forecast error models (cosim/gym/forecasts.py ForecastError, cosim/gym/observations.py with_error):
none is the oracle, persistence repeats the last observed value, gaussian is seeded noise whose
spread grows like the square root of the lead; a wrong ``error`` table is one clear problem."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from cosim.errors import ScenarioError
from cosim.gym import CosimEnv
from cosim.gym.observations import with_error
from cosim.gym.forecasts import ForecastError, ForecastSpec

ROOT = Path(__file__).resolve().parents[2]
SITE = ROOT / "scenarios" / "rl_site.toml"
TWO_HOURS = {"scenario.duration_s": 7200}
CARBON = {"signal": "grid_ci.ci_g_kwh", "n": 6, "step_s": 3600}


def observations(error: dict | None, seed: int, n_steps: int = 3) -> tuple[list[str], np.ndarray]:
    """The observation vectors of an rl_site episode whose one forecast (carbon, 6 h) has ``error``."""
    forecast = dict(CARBON, **({"error": error} if error is not None else {}))
    env = CosimEnv(SITE, TWO_HOURS, forecasts=[forecast], guards=False)
    seen = [env.reset(seed=seed)[0]]
    for _ in range(n_steps):
        seen.append(env.step(env.idle_action())[0])
    env.close()
    return env.observation_names, np.array(seen)


def window(names: list[str], obs: np.ndarray) -> np.ndarray:
    return obs[:, [i for i, n in enumerate(names) if "@+" in n]]


def test_persistence_repeats_the_last_observed_value():
    names, obs = observations({"model": "persistence"}, seed=1)
    _, oracle = observations(None, seed=1)
    observed = obs[1:, names.index("grid_ci.ci_g_kwh")]  # after a step: the signal's last output
    np.testing.assert_array_equal(window(names, obs)[1:], np.repeat(observed[:, None], 6, axis=1))
    assert not np.allclose(window(names, oracle)[1:], window(names, obs)[1:])  # the oracle sees the hours ahead


def test_the_default_is_the_oracle():
    names, obs = observations(None, seed=1)
    _, none = observations({"model": "none"}, seed=1)
    np.testing.assert_array_equal(obs, none)
    assert len(set(window(names, obs)[1].tolist())) > 1  # PJM's carbon changes over 6 h


def test_gaussian_is_the_same_for_a_seed_and_differs_between_seeds():
    error = {"model": "gaussian", "sigma_frac": 0.1}
    names, first = observations(error, seed=3)
    _, again = observations(error, seed=3)
    _, other = observations(error, seed=4)
    _, offset = observations(dict(error, seed_offset=1), seed=3)
    _, oracle = observations(None, seed=3)
    np.testing.assert_array_equal(first, again)
    ahead = window(names, first)[:, 1:]  # lead >= 1 h: noisy
    assert not np.allclose(ahead, window(names, other)[:, 1:])
    assert not np.allclose(ahead, window(names, offset)[:, 1:])
    assert not np.allclose(ahead, window(names, oracle)[:, 1:])
    np.testing.assert_allclose(window(names, first)[:, 0], window(names, oracle)[:, 0])  # lead 0: no error


def test_gaussian_error_is_unbiased_and_grows_like_the_square_root_of_the_lead():
    spec = ForecastSpec("x", "ci_g_kwh", 7, 3600, ForecastError("gaussian", 0.1))
    rng = np.random.default_rng(0)
    exact = [400.0] * 7
    draws = np.array([with_error(exact, spec, rng) for _ in range(20_000)]) / 400.0 - 1.0  # relative errors
    assert np.all(draws[:, 0] == 0.0)
    std = draws.std(axis=0)
    assert np.all(np.abs(draws.mean(axis=0)[1:]) < 4 * std[1:] / math.sqrt(len(draws)))  # mean error ~0
    np.testing.assert_allclose(std[1:], 0.1 * np.sqrt(np.arange(1, 7)), rtol=0.03)  # sigma_frac * sqrt(lead_h)
    assert np.all(np.diff(std) > 0)
    half_hourly = ForecastSpec("x", "ci_g_kwh", 3, 1800, ForecastError("gaussian", 0.1))
    spread = np.array([with_error([1.0] * 3, half_hourly, rng) for _ in range(20_000)]).std(axis=0)
    assert spread[2] == pytest.approx(0.1, rel=0.03)  # one hour ahead, whatever the window's step


@pytest.mark.parametrize(("error", "expected"), [
    ({"model": "gausian"}, "agent.forecasts[0].error.model = 'gausian': unknown forecast error model; give one of "
                           "none, persistence, gaussian"),
    ({"model": "gaussian"}, "agent.forecasts[0].error.sigma_frac: required by the gaussian model"),
    ({"model": "gaussian", "sigma_frac": -0.1}, "agent.forecasts[0].error.sigma_frac = -0.1: give the relative error"),
    ({"model": "gaussian", "sigma_frac": 0.1, "seed_offset": 1.5},
     "agent.forecasts[0].error.seed_offset = 1.5: give a whole number >= 0"),
    ({"model": "persistence", "sigma_frac": 0.1},
     "agent.forecasts[0].error.sigma_frac = 0.1: not a key of the 'persistence' error model, which takes model"),
    ("gaussian", "agent.forecasts[0].error = 'gaussian': must be a table, e.g. error = { model = \"gaussian\""),
])
def test_a_wrong_error_table_is_one_clear_problem(error, expected):
    with pytest.raises(ScenarioError) as raised:
        CosimEnv(SITE, TWO_HOURS, forecasts=[dict(CARBON, error=error)], guards=False)
    text = str(raised.value)
    assert "rl_site.toml: 1 problem" in text and expected in text
