"""Actions: the space an agent acts in, and its action turned into held entity inputs.

The space is a ``Box(low, high)`` in the inputs' own units, one coordinate per action in
the order listed; an action with ``values`` takes, in a Box, the value nearest to the
coordinate. When every action has ``values`` the space is ``MultiDiscrete`` (each
coordinate an index into its ``values``).

An action outside the space is clipped to it (to the nearest index for MultiDiscrete) and
an :class:`ActionClippedWarning` says which coordinates were clipped; the step's info counts
them (``n_actions_clipped``), so a policy whose Gaussian overshoots keeps running. A NaN or
infinite coordinate is not clipped (a NaN has no side to clip to: it charged the battery at
its lowest bound): the step raises a ValueError naming it, before anything is applied.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
from gymnasium import spaces

from cosim.gym.spec import ActionSpec


class ActionClippedWarning(UserWarning):
    """An action was outside its bounds and was clipped to them."""


class Actuator:
    """One agent's action space and decoding (see the module docstring).

    Args:
        actions: the agent's actions, in order.
    """

    def __init__(self, actions: tuple[ActionSpec, ...]):
        self.actions = actions
        self.discrete = all(a.values is not None for a in actions)
        if self.discrete:
            self.space = spaces.MultiDiscrete([len(a.values) for a in actions])
            bounds = (self.space.nvec, getattr(self.space, "start", None))
        else:
            self.space = spaces.Box(np.array([a.low for a in actions], np.float32),
                                    np.array([a.high for a in actions], np.float32), dtype=np.float32)
            self._low, self._high = self.space.low.astype(float), self.space.high.astype(float)
            self._bounds = list(zip(self._low.tolist(), self._high.tolist()))
            #: per action: (its float32 bounds, its own bounds, entity, input, values)
            self._plan = [(low, high, a.low, a.high, a.entity, a.attr, a.values)
                          for (low, high), a in zip(self._bounds, actions)]
            bounds = (self.space.low, self.space.high)
        for array in bounds:  # read once, here: an edit in place afterwards would be ignored, so it fails
            if isinstance(array, np.ndarray):
                array.flags.writeable = False

    def idle(self) -> np.ndarray:
        """The action that leaves every knob as if unset (each action's ``idle``)."""
        if self.discrete:
            return np.array([a.values.index(a.idle) for a in self.actions], dtype=self.space.dtype)
        return np.array([a.idle for a in self.actions], dtype=np.float32)

    def settings(self, action) -> tuple[list[tuple[str, str, float]], int]:
        """``[(entity, input, value)]`` for ``action`` and how many coordinates were clipped."""
        try:
            raw = np.asarray(action, dtype=float).reshape(-1)
        except (TypeError, ValueError):
            raise ValueError(f"action {action!r} is not an array of numbers; {self._takes()}") from None
        if raw.shape != (len(self.actions),):
            raise ValueError(f"action has shape {np.shape(action)}; {self._takes()}")
        if not self.discrete:
            values = raw.tolist()
            if all(low < x < high for x, (low, high, *_) in zip(values, self._plan)):  # (finite too)
                return self._settings_of(values), 0  # np.clip leaves a value strictly inside as it is
        if not all(map(math.isfinite, raw.tolist())):
            named = ", ".join(f"{a.name} = {v}" for a, v in zip(self.actions, raw) if not np.isfinite(v))
            raise ValueError(f"action has non-finite value(s): {named}; nothing was applied. Give finite numbers "
                             f"(a policy that outputs NaN has diverged; the do-nothing action is idle_action())")
        if self.discrete:
            return self._discrete(raw)
        return self._continuous(raw)

    def _settings_of(self, values: list[float]) -> list[tuple[str, str, float]]:
        """``[(entity, input, value)]`` of coordinates within the space's bounds."""
        out = []
        for value, (_, _, low, high, entity, attr, choices) in zip(values, self._plan):
            value = min(max(value, low), high)  # float32 bounds may round past the input's own
            if choices is not None:
                value = min(choices, key=lambda v: abs(v - value))
            out.append((entity, attr, value))
        return out

    def _continuous(self, raw: np.ndarray) -> tuple[list[tuple[str, str, float]], int]:
        """A finite action with a coordinate at or outside the space's bounds: clipped by np.clip itself
        (at a bound, which zero, 0.0 or -0.0, it gives depends on its loop)."""
        outside = (raw < self._low) | (raw > self._high)
        clipped, n_outside = np.clip(raw, self._low, self._high).tolist(), int(outside.sum())
        self._warn(outside, raw)
        return self._settings_of(clipped), n_outside

    def _discrete(self, raw: np.ndarray) -> tuple[list[tuple[str, str, float]], int]:
        index = np.rint(raw)
        top = np.array([len(a.values) - 1 for a in self.actions])
        outside = (index < 0) | (index > top) | (index != raw)
        index = np.clip(index, 0, top).astype(int)
        self._warn(outside, raw)
        return [(a.entity, a.attr, a.values[i]) for a, i in zip(self.actions, index)], int(outside.sum())

    def _warn(self, outside: np.ndarray, raw: np.ndarray) -> None:
        if outside.any():
            named = ", ".join(f"{a.name} = {v:g} (allowed {self._allowed(a)})"
                              for a, v, o in zip(self.actions, raw, outside) if o)
            warnings.warn(f"action clipped to its bounds: {named}", ActionClippedWarning, stacklevel=5)  # at the caller of env.step

    def _takes(self) -> str:
        return f"this env takes {self.space.shape} ({', '.join(a.name for a in self.actions)})"

    def _allowed(self, action: ActionSpec) -> str:
        if self.discrete:
            return f"index 0..{len(action.values) - 1} of {list(action.values)}"
        return f"[{action.low:g}, {action.high:g}]"
