"""``CosimEnv``: a Gymnasium environment over any scenario with an ``[agent]`` section.

::

    from cosim.gym import CosimEnv

    env = CosimEnv("scenarios/rl_site.toml")            # [agent] of the file
    obs, info = env.reset(seed=1)                        # a new Session, seeded
    obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
    info["terms"]                                        # every reward term, unweighted
    env.close()                                          # writes the run folder when record = true

One step holds the action for ``decision_s``; ``reward = Σ weight · term`` over the terms of
:mod:`cosim.gym.rewards`. ``terminated`` is True when the scenario reaches its end,
``truncated`` only when ``max_decisions`` stops it earlier. ``reset(seed=s)`` starts the
scenario with ``scenario.seed = s`` (without a seed, one drawn from the env's generator), on
a start day drawn from ``start_window`` when the section has one, or on
``options={"start": day}``. A reset builds the simulators whose set-up depends on the seed and
takes copies of the others set up before (:mod:`cosim.gym.snapshot`): the same episode as a
fresh env's.
"""

from __future__ import annotations

import warnings
from datetime import datetime
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces

from cosim.gym import guards as reward_guards
from cosim.gym import spec as specs
from cosim.gym.actions import Actuator
from cosim.gym.episode import Episode
from cosim.gym.observations import Observer
from cosim.errors import Problem, ScenarioError
from cosim.scenario import Scenario, load_scenario

SEED_MAX = 2**31 - 1


def load_direct(scenario: str | Path | Scenario, overrides: dict[str, Any] | None) -> Scenario:
    """The scenario validated for the direct engine (a Session's)."""
    if isinstance(scenario, Scenario):
        if overrides:
            return load_scenario(scenario.file, {**scenario.overrides, **overrides, "scenario.engine": "direct"})
        return scenario if scenario.engine == "direct" else load_scenario(
            scenario.file, {**scenario.overrides, "scenario.engine": "direct"})
    return load_scenario(scenario, {**(overrides or {}), "scenario.engine": "direct"})


#: The keys ``reset(options=...)`` takes.
RESET_OPTIONS = ("start",)


class UnknownResetOptionWarning(UserWarning):
    """``reset(options=...)`` got a key it does not know (and ignored it)."""


def draw_start(scn: Scenario, episode: specs.EpisodeSpec, rng: np.random.Generator,
               options: dict[str, Any] | None) -> datetime | None:
    """The start of the next episode: ``options["start"]``, a day drawn from the window, or None.

    A key other than ``start`` warns (:class:`UnknownResetOptionWarning`): a misspelt ``strt``
    would otherwise draw a random day without a word; it is not refused, as checkers such as
    PettingZoo's ``parallel_api_test`` pass options of their own.

    Raises:
        ScenarioError: ``options`` is not a dict, or its start is no date.
    """
    if options is not None and not isinstance(options, dict):
        raise ScenarioError(scn.file, [Problem("reset(options=...)", "give a dict, e.g. {'start': '2024-08-05'}, "
                                                                    "or None", options)])
    unknown = [str(key) for key in (options or {}) if key not in RESET_OPTIONS]
    if unknown:
        warnings.warn(f"reset(options=...): unknown option(s) {', '.join(unknown)} ignored; known: "
                      f"{', '.join(RESET_OPTIONS)} (a start day, e.g. '2024-08-05')", UnknownResetOptionWarning,
                      stacklevel=3)  # at the caller of reset
    if options and options.get("start") is not None:
        return specs.start_utc(scn, options["start"])
    if episode.start_window is None:
        return None
    days = specs.window_days(episode.start_window)
    return specs.start_utc(scn, days[int(rng.integers(len(days)))])


def observation_box(n: int) -> spaces.Box:
    return spaces.Box(-np.inf, np.inf, shape=(n,), dtype=np.float32)


class CosimEnv(gymnasium.Env):
    """A scenario as a Gymnasium environment (see the module docstring).

    Args:
        scenario: a scenario file (or a validated Scenario).
        overrides: dotted scenario keys replaced before validation (as ``--set``), e.g.
            ``{"scenario.duration_s": 21600}``.
        agent: a whole ``[agent]`` table replacing the file's.
        apply_actions: False ignores the actions and lets the scenario's own controllers drive
            the inputs (the rule-based baseline, through the same stepping and reward code).
        out_dir: where run folders go when ``record`` is on.
        report: also write ``report.html`` into each run folder.
        guards: run the reward guards (:mod:`cosim.gym.guards`: a weighted term no action can
            move, an action whose cost no term prices) and warn; False skips them (a vector env's
            workers, once checked).
        **keys: single ``[agent]`` keys replacing the section's (``decision_s=900``,
            ``reward={...}``, ``record=True``, ...).

    Raises:
        ScenarioError: a problem with the scenario or its ``[agent]`` section.
    """

    metadata = {"render_modes": []}

    def __init__(self, scenario: str | Path | Scenario, overrides: dict[str, Any] | None = None,
                 agent: dict[str, Any] | None = None, *, apply_actions: bool = True,
                 out_dir: str | Path = "runs", report: bool = False, guards: bool = True, **keys: Any):
        self.scn = load_direct(scenario, overrides)
        self.episode_spec, self.agent_spec = specs.single_agent(self.scn, agent, keys)
        if guards:
            reward_guards.warn(self.scn, reward_guards.reward_guards(self.scn, self.episode_spec,
                                                                     {"agent": self.agent_spec}))
        self.apply_actions = apply_actions
        self._episode = Episode(self.scn, self.episode_spec, out_dir, report)
        self._actuator = Actuator(self.agent_spec.actions)
        self._observer = Observer(self.agent_spec)
        self.action_space = self._actuator.space
        self.observation_space = observation_box(len(self._observer.names))
        self.observation_names: list[str] = self._observer.names
        self.action_names: list[str] = [a.name for a in self.agent_spec.actions]
        self.reward_weights: dict[str, float] = dict(self.agent_spec.reward)
        self.term_names: list[str] = self._episode.terms.names

    # -- the Gymnasium API ------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        scenario_seed = seed if seed is not None else int(self.np_random.integers(SEED_MAX))
        start = draw_start(self.scn, self.episode_spec, self.np_random, options)
        self._episode.start(scenario_seed, start)
        self._observer.reset(scenario_seed)
        obs = self._observer.observe(self._episode.engine, self._episode.utc)
        return obs, {"seed": scenario_seed, "start_utc": self._episode.utc.isoformat()}

    def step(self, action):
        settings, n_clipped = self._actuator.settings(action)
        terms = self._episode.decide(settings if self.apply_actions else [])
        reward = sum(weight * terms[name] for name, weight in self.reward_weights.items())
        obs = self._observer.observe(self._episode.engine, self._episode.utc)
        info = {"terms": terms, "time_s": self._episode.t_s, "n_actions_clipped": n_clipped}
        return obs, float(reward), self._episode.terminated, self._episode.truncated, info

    def close(self) -> None:
        """Close the episode's Session (writing its run folder when ``record`` is on)."""
        self._episode.close()

    # -- for baselines and users --------------------------------------------------------------------
    def idle_action(self) -> np.ndarray:
        """The action that leaves every knob as if unset (the do-nothing baseline)."""
        return self._actuator.idle()

    @property
    def run_dirs(self) -> list[Path]:
        """The run folders written so far (``record = true``), oldest first."""
        return list(self._episode.run_dirs)

    @property
    def eval_starts(self) -> list[datetime]:
        """The section's held-out start days (``eval_starts``) as start times."""
        return [specs.start_utc(self.scn, d) for d in self.episode_spec.eval_starts]

