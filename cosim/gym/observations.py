"""Observations: the outputs an agent sees, the time features and the forecast windows, as one vector.

The order is :attr:`cosim.gym.spec.AgentSpec.observation_names` (``env.observation_names``):

1. the outputs of ``observations``, in the order listed (a glob pattern expands to the
   matching ``<entity>.<attr>`` in the scenario's entity and attribute order), each read at
   the last recording step of the decision just taken;
2. with ``time_features`` (default on): ``time.hour_sin``, ``time.hour_cos`` (UTC hour of day
   of the next decision, period 24 h) and ``time.dow_sin``, ``time.dow_cos`` (its UTC day of
   week, Monday = 0, period 7 days);
3. each forecast window: ``<entity>.<attr>@+<k·step_s>s`` for ``k = 0 … n − 1``, the signal's
   value at the next decision time plus ``k·step_s`` (past the data's end the last value it
   covers), with the forecast's ``error`` model (:class:`cosim.gym.forecasts.ForecastError`):

   * ``none`` (default): an **oracle**, the future values read exactly from the data file or
     the tariff (right for a published tariff, optimistic for carbon, weather or prices);
   * ``persistence``: every lead is the signal's last observed value (its output at the last
     recording step of the decision just taken; at an episode's first decision, before any
     step, its value at the decision time);
   * ``gaussian``: the oracle's value ``x_k`` times ``1 + e_k``, where ``e_0 = 0`` and
     ``e_k = e_{k-1} + N(0, sigma_frac² · step_s / 3600 s)``: a random walk over the lead, so
     the error's standard deviation is ``sigma_frac · sqrt(k · step_s / 3600 s)`` (grows like
     the square root of the lead; ``sigma_frac`` one hour ahead). Each decision draws a fresh
     window. The noise of forecast ``j`` (its place in ``forecasts``) comes from
     ``numpy.random.default_rng([seed, seed_offset, j])`` with ``seed`` the episode's
     scenario seed (``reset(seed=...)``): the same seed gives the same observations.
   * ``archive``: lead 0 is the signal's value at the decision time (as for ``none``); lead
     ``k >= 1`` is the archive file's forecast for target ``t + k·step_s`` (``t`` the decision
     time) from the latest issue made at or before ``t`` that covers the target (a file without
     ``issued_utc`` is one issue, known from the start); between an issue's target times its
     value is held (``interpolation = "hold"``, the default) or interpolated (``"linear"``),
     and its last target lasts one more interval, as the signals adapter reads its data
     (:mod:`cosim.gym.forecasts`). No randomness: the same for every seed.

A missing value (an output that is None or NaN, e.g. before the first step of an episode,
or a bus in an island) becomes the last finite value of that observation in the episode, or
0 before there is one; a flag (bool) becomes 0 or 1. The vector is float32.
"""

from __future__ import annotations

import math
from datetime import datetime

import numpy as np

from cosim.gym.forecasts import ForecastSpec
from cosim.gym.outputs import OutputReader
from cosim.gym.spec import AgentSpec


def time_features(utc: datetime) -> list[float]:
    """``[hour_sin, hour_cos, dow_sin, dow_cos]`` of a UTC time. [-]"""
    hour = utc.hour + utc.minute / 60.0 + utc.second / 3600.0
    day = utc.weekday()
    return [math.sin(2 * math.pi * hour / 24.0), math.cos(2 * math.pi * hour / 24.0),
            math.sin(2 * math.pi * day / 7.0), math.cos(2 * math.pi * day / 7.0)]


class Observer:
    """Builds one agent's observation vector from a running engine (see the module docstring).

    Args:
        spec: the agent's observations, time features and forecasts.
    """

    def __init__(self, spec: AgentSpec):
        self.spec = spec
        self.names = spec.observation_names
        self.last = [0.0] * len(spec.observations)  # each observation's last finite value
        self._engine = None  # the engine the readers below read from
        self._read: OutputReader | None = None  # its outputs of ``observations``
        self.rngs = self._rngs(0)

    def reset(self, seed: int = 0) -> None:
        """Forget the last values and seed the forecasts' errors (a new episode with scenario seed ``seed``)."""
        self.last = [0.0] * len(self.last)
        self.rngs = self._rngs(seed)

    def _rngs(self, seed: int) -> list[np.random.Generator]:
        return [np.random.default_rng([int(seed) % 2**63, f.error.seed_offset, j])
                for j, f in enumerate(self.spec.forecasts)]

    def observe(self, engine, utc: datetime) -> np.ndarray:
        """The vector at the end of the last decision, with time features and forecasts for ``utc``.

        Args:
            engine: the Session's :class:`~cosim.run.direct.DirectEngine`.
            utc: the time of the next decision.
        """
        values = self._outputs(engine)
        if self.spec.time_features:
            values += time_features(utc)
        for f, rng in zip(self.spec.forecasts, self.rngs):
            obj = engine.entity_sim[f.entity].obj
            exact = list(obj.forecast(f.attr, utc, f.n, f.step_s))
            last = _finite(obj.get_data({f.entity: [f.attr]})[f.entity].get(f.attr)) \
                if f.error.model == "persistence" else None
            archived = f.error.archive.leads(utc, f.n, f.step_s) if f.error.model == "archive" else None
            values += with_error(exact, f, rng, last, archived)
        return np.asarray(values, dtype=np.float32)

    def _outputs(self, engine) -> list[float]:
        if engine is not self._engine:  # a new episode's Session
            self._engine, self._read = engine, OutputReader(engine, self.spec.observations)
        values, last = self._read(), self.last
        for i, value in enumerate(values):
            number = _finite(value)
            if number is None:
                values[i] = last[i]
            else:
                values[i] = last[i] = number
        return values


def with_error(exact: list[float], forecast: ForecastSpec, rng: np.random.Generator,
               last: float | None = None, archived: list[float] | None = None) -> list[float]:
    """A forecast window after its error model (module docstring): ``exact`` the oracle's values,
    ``last`` the signal's last observed value (persistence; None: nothing observed yet),
    ``archived`` the archive's values at leads 1 … n − 1 (archive). [signal's unit]"""
    model = forecast.error.model
    if model == "archive":
        return exact[:1] + list(archived)
    if model == "persistence":
        return [exact[0] if last is None else last] * len(exact)
    if model == "gaussian":
        step_sigma = forecast.error.sigma_frac * math.sqrt(forecast.step_s / 3600.0)
        walk = np.concatenate([[0.0], np.cumsum(rng.normal(0.0, step_sigma, len(exact) - 1))])
        return [float(x * (1.0 + e)) for x, e in zip(exact, walk)]
    return exact


def _finite(value) -> float | None:
    if type(value) is float:  # (the usual case, without the try)
        return value if math.isfinite(value) else None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None
