"""Observations: the outputs an agent sees, the time features and the forecast windows, as one vector.

The order is :attr:`cosim.gym.spec.AgentSpec.observation_names` (``env.observation_names``):

1. the outputs of ``observations``, in the order listed (a glob pattern expands to the
   matching ``<entity>.<attr>`` in the scenario's entity and attribute order), each read at
   the last recording step of the decision just taken;
2. with ``time_features`` (default on): ``time.hour_sin``, ``time.hour_cos`` (UTC hour of day
   of the next decision, period 24 h) and ``time.dow_sin``, ``time.dow_cos`` (its UTC day of
   week, Monday = 0, period 7 days);
3. each forecast window: ``<entity>.<attr>@+<k·step_s>s`` for ``k = 0 … n − 1``, the signal's
   value at the next decision time plus ``k·step_s`` (a perfect forecast read from the data;
   past the data's end the last value it covers).

A missing value (an output that is None or NaN, e.g. before the first step of an episode,
or a bus in an island) becomes the last finite value of that observation in the episode, or
0 before there is one; a flag (bool) becomes 0 or 1. The vector is float32.
"""

from __future__ import annotations

import math
from datetime import datetime

import numpy as np

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
        grouped: dict[str, list[str]] = {}
        for name in spec.observations:
            eid, attr = name.split(".", 1)
            grouped.setdefault(eid, []).append(attr)
        self.requests = list(grouped.items())
        self.last = np.zeros(len(spec.observations))

    def reset(self) -> None:
        """Forget the last values (a new episode)."""
        self.last[:] = 0.0

    def observe(self, engine, utc: datetime) -> np.ndarray:
        """The vector at the end of the last decision, with time features and forecasts for ``utc``.

        Args:
            engine: the Session's :class:`~cosim.run.direct.DirectEngine`.
            utc: the time of the next decision.
        """
        values = self._outputs(engine)
        if self.spec.time_features:
            values += time_features(utc)
        for f in self.spec.forecasts:
            values += list(engine.entity_sim[f.entity].obj.forecast(f.attr, utc, f.n, f.step_s))
        return np.asarray(values, dtype=np.float32)

    def _outputs(self, engine) -> list[float]:
        raw = []
        for eid, attrs in self.requests:
            data = engine.entity_sim[eid].obj.get_data({eid: attrs})[eid]
            raw += [data.get(a) for a in attrs]
        out = []
        for i, value in enumerate(raw):
            number = _finite(value)
            if number is None:
                number = float(self.last[i])
            self.last[i] = number
            out.append(number)
        return out


def _finite(value) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None
