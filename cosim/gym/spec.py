"""The ``[agent]`` and ``[agents.<name>]`` sections: parsed and validated into what an env needs.

A scenario's core validator accepts these tables without reading them; this module checks
them against the validated scenario (its entities, inputs, outputs, roles and data window)
and collects every problem into one :class:`~cosim.errors.ScenarioError`, as the core does.

``[agent]`` holds the episode keys (shared by every agent of the scenario) and, for a
single-agent env, the agent keys; each ``[agents.<name>]`` holds the agent keys of one agent
of a parallel env (whose episode keys come from ``[agent]``):

* episode: ``decision_s`` (default the scenario step), ``start_window = [first, last]``
  (start days drawn at reset), ``eval_starts = [...]`` (held-out start days for
  :mod:`cosim.gym.evaluate`), ``max_decisions`` (a time limit: ``truncated``), ``record``.
* agent: ``actions`` (``[[agent.actions]]`` with ``input``, ``low``, ``high``, ``values``,
  ``idle``), ``observations``, ``time_features``, ``forecasts`` (``signal``, ``n``, ``step_s``,
  ``error``: the forecast's error model; parsed by :mod:`cosim.gym.forecasts`), ``reward``.

``cosim validate`` also runs the reward guards of :mod:`cosim.gym.guards` (a weighted term no
action can move, an action whose cost no weighted term prices) through
``cosim.gym.check_scenario``: they are warnings, kept in the scenario's ``warnings`` (printed by
``cosim validate``, written to ``metadata.json``).
"""

from __future__ import annotations

import dataclasses
import fnmatch
import math
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone
from typing import Any

import numpy as np

from cosim import registry
from cosim.errors import Problem, ScenarioError, few
from cosim.gym._check import is_table, number, unknown
from cosim.gym.forecasts import ForecastSpec, parse_forecasts
from cosim.gym.rewards import TERMS, available_terms
from cosim.scenario import Scenario

EPISODE_KEYS = ("decision_s", "start_window", "eval_starts", "max_decisions", "record")
AGENT_KEYS = ("actions", "observations", "time_features", "forecasts", "reward")
ACTION_KEYS = ("input", "low", "high", "values", "idle")
#: An adapter's check text with this prefix is a warning, not a problem (as in cosim.scenario.validate).
WARNING_PREFIX = "warning: "
#: Names of the time features, in observation order.
TIME_FEATURES = ("time.hour_sin", "time.hour_cos", "time.dow_sin", "time.dow_cos")


@dataclass(frozen=True)
class ActionSpec:
    """One action: an entity input, its bounds, optional discrete values and its idle value.

    Attributes:
        entity, attr: the input set with ``Session.set``.
        low, high: the bounds (clipped to, with a warning). [the input's unit]
        values: the discrete choices, or None for a continuous action. [the input's unit]
        idle: the value that leaves the knob as if unset (the do-nothing baseline). [the input's unit]
    """

    entity: str
    attr: str
    low: float
    high: float
    values: tuple[float, ...] | None
    idle: float

    @property
    def name(self) -> str:
        return f"{self.entity}.{self.attr}"


@dataclass(frozen=True)
class AgentSpec:
    """What one agent sets, sees and is rewarded for."""

    actions: tuple[ActionSpec, ...]
    observations: tuple[str, ...]
    time_features: bool
    forecasts: tuple[ForecastSpec, ...]
    reward: dict[str, float]

    @property
    def observation_names(self) -> list[str]:
        """The order of the observation vector: outputs, time features, forecast windows."""
        names = list(self.observations) + (list(TIME_FEATURES) if self.time_features else [])
        return names + [n for f in self.forecasts for n in f.names]


@dataclass(frozen=True)
class EpisodeSpec:
    """How an episode runs.

    Attributes:
        decision_s: how long each action is held. [s]
        start_window: first and last start day drawn at reset (UTC dates), or None.
        eval_starts: held-out start days for evaluation (UTC dates).
        max_decisions: decisions after which an episode is truncated, or None.
        record: write each episode's run folder.
    """

    decision_s: int
    start_window: tuple[date, date] | None
    eval_starts: tuple[date, ...]
    max_decisions: int | None
    record: bool


# -- entry points ---------------------------------------------------------------------------
def single_agent(scn: Scenario, agent: dict[str, Any] | None = None,
                 keys: dict[str, Any] | None = None) -> tuple[EpisodeSpec, AgentSpec]:
    """The episode and the agent of a single-agent env: ``[agent]`` (or ``agent``, replacing it),
    with ``keys`` replacing single keys.

    Raises:
        ScenarioError: every problem of the section, each naming its key, value and fix.
    """
    table = merged(scn.raw.get("agent") if agent is None else agent, keys)
    problems: list[Problem] = []
    unknown(table, "agent", (*EPISODE_KEYS, *AGENT_KEYS), problems)
    episode = episode_spec(scn, table, "agent", problems)
    if "actions" not in table:
        problems.append(Problem("agent.actions", "required: the inputs the agent sets, e.g. "
                                                 '[[agent.actions]] input = "bess.p_set_mw"'))
    spec = agent_spec(scn, table, "agent", problems, episode)
    _raise(scn, problems)
    return episode, spec


def parallel_agents(scn: Scenario, agents: dict[str, dict[str, Any]] | None = None,
                    keys: dict[str, Any] | None = None) -> tuple[EpisodeSpec, dict[str, AgentSpec]]:
    """The episode (``[agent]``'s episode keys, ``keys`` replacing them) and every
    ``[agents.<name>]`` of a parallel env (``agents`` replacing them).

    Raises:
        ScenarioError: every problem, each naming its key, value and fix.
    """
    problems: list[Problem] = []
    shared = merged({k: v for k, v in _table(scn.raw.get("agent")).items() if k in EPISODE_KEYS}, keys)
    unknown(shared, "agent", EPISODE_KEYS, problems)
    episode = episode_spec(scn, shared, "agent", problems)
    tables = _table(scn.raw.get("agents") if agents is None else agents)
    if not tables:
        problems.append(Problem("agents", "no agents: give one [agents.<name>] section per agent, e.g. "
                                          "[agents.battery] with its actions, observations and reward"))
    specs = _agents(scn, tables, problems, episode)
    _raise(scn, problems)
    return episode, specs


def check_scenario(scn: Scenario) -> None:
    """Validate whichever of ``[agent]`` and ``[agents.<name>]`` the scenario has (the sections only;
    ``cosim validate`` runs :func:`cosim.gym.guards.check_scenario`, which adds the reward guards).

    Raises:
        ScenarioError: every problem found.
    """
    problems: list[Problem] = []
    table = _table(scn.raw.get("agent"))
    if "agent" in scn.raw:
        unknown(table, "agent", (*EPISODE_KEYS, *AGENT_KEYS), problems)
    # without [agent] the episode takes its defaults, whose problems belong to no section checked here
    episode = episode_spec(scn, table, "agent", problems if "agent" in scn.raw else [])
    if "agent" in scn.raw and any(k in table for k in AGENT_KEYS):
        agent_spec(scn, table, "agent", problems, episode)
    if "agents" in scn.raw:
        _agents(scn, _table(scn.raw.get("agents")), problems, episode)
    _raise(scn, problems)


def merged(table: Any, keys: dict[str, Any] | None) -> dict[str, Any]:
    """A section's keys with ``keys`` replacing single ones (keyword arguments of an env)."""
    return {**_table(table), **(keys or {})}


def start_utc(scn: Scenario, day: date | datetime | str) -> datetime:
    """The start of an episode on ``day``: that UTC date at the scenario's own start time of day.

    Raises:
        ScenarioError: ``day`` is not a date, or a time of day other than the scenario's (an
            episode cannot start there; it was silently moved to the scenario's time before).
    """
    parsed = _as_date(day)
    if parsed is None:
        raise ScenarioError(scn.file, [Problem("start", "give a date, e.g. 2024-08-05", day)])
    start = datetime.combine(parsed, scn.scenario.start.timetz()).astimezone(timezone.utc)
    given = day if isinstance(day, datetime) else None
    if isinstance(day, str) and len(day.strip()) > 10:
        try:
            given = datetime.fromisoformat(day.strip().replace("Z", "+00:00"))
        except ValueError:
            raise ScenarioError(scn.file, [Problem("start", "give a date, e.g. 2024-08-05", day)]) from None
    if given is not None:
        given = given.replace(tzinfo=timezone.utc) if given.tzinfo is None else given.astimezone(timezone.utc)
        if given != start:
            raise ScenarioError(scn.file, [Problem("start", f"an episode starts at the scenario's own time of day "
                                                            f"({start:%H:%M} UTC); give the date alone, e.g. "
                                                            f"{parsed.isoformat()}", day)])
    return start


# -- the episode ------------------------------------------------------------------------------
def episode_spec(scn: Scenario, table: dict[str, Any], where: str, problems: list[Problem]) -> EpisodeSpec:
    """The episode keys of ``table`` (problems appended, defaults where a key is wrong)."""
    steps = (scn.scenario.step_s, scn.record_step_s)
    if scn.scenario.tick_s != 1.0 or not all(isinstance(s, int) for s in steps):
        problems.append(Problem("scenario.tick_s", "the learning environments step whole seconds: give tick_s = 1.0 "
                                "and whole-second steps for a scenario with [agent]", scn.scenario.tick_s))
        steps = tuple(max(1, int(s)) for s in steps)
    step_s = math.lcm(*steps)
    decision_s = _decision_s(scn, table.get("decision_s", step_s), step_s, f"{where}.decision_s", problems)
    window = _window(scn, table.get("start_window"), f"{where}.start_window", problems)
    evals = _eval_starts(scn, table.get("eval_starts", []), f"{where}.eval_starts", problems)
    limit = table.get("max_decisions")
    if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 1):
        problems.append(Problem(f"{where}.max_decisions", "give a whole number >= 1 (decisions before the "
                                                          "episode is truncated), or leave it out", limit))
        limit = None
    record = table.get("record", False)
    if not isinstance(record, bool):
        problems.append(Problem(f"{where}.record", "give true or false", record))
        record = False
    return EpisodeSpec(decision_s, window, evals, limit, record)


def _decision_s(scn: Scenario, value: Any, step_s: int, where: str, problems: list[Problem]) -> int:
    duration = scn.scenario.duration_s
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        problems.append(Problem(where, f"give whole seconds > 0, a multiple of the step ({step_s} s)", value))
        return step_s
    if value % step_s:
        lower = max(step_s, value // step_s * step_s)
        problems.append(Problem(where, f"not a multiple of the scenario's step {step_s} s (scenario.step_s and "
                                       f"record.step_s); use {lower} or {lower + step_s}", value))
        return step_s
    if value > duration:
        problems.append(Problem(where, f"longer than the episode (scenario.duration_s = {duration}); "
                                       f"use at most {duration}", value))
        return step_s
    return value


def _window(scn: Scenario, value: Any, where: str, problems: list[Problem]) -> tuple[date, date] | None:
    if value is None:
        return None
    days = [_as_date(v) for v in value] if isinstance(value, list) else []
    if len(days) != 2 or None in days or days[0] > days[1]:
        problems.append(Problem(where, "give [first, last] start days, first <= last, e.g. "
                                       "[2024-06-03, 2024-07-28]", value))
        return None
    for day in days:
        _check_start(scn, day, where, problems)
    return days[0], days[1]


def _eval_starts(scn: Scenario, value: Any, where: str, problems: list[Problem]) -> tuple[date, ...]:
    days = [_as_date(v) for v in value] if isinstance(value, list) else [None]
    if None in days:
        problems.append(Problem(where, "give a list of start days, e.g. [2024-08-05, 2024-08-06]", value))
        return ()
    for day in days:
        _check_start(scn, day, where, problems)
    return tuple(days)


def _check_start(scn: Scenario, day: date, where: str, problems: list[Problem]) -> None:
    """An episode starting on ``day`` must pass the adapters' window checks too (data coverage)."""
    start = start_utc(scn, day)
    if start == scn.scenario.start:
        return
    found = shifted_problems(scn, start)
    if found:
        problems.append(Problem(where, f"an episode starting {day} would not run: {found[0]} "
                                       f"({len(found)} problem(s)); move the day into the data", str(day)))


def shifted_problems(scn: Scenario, start: datetime) -> list[Problem]:
    """What the adapters' window checks (``check``, ``check_entity``) say of ``scn`` moved to ``start``
    (their warnings left out: validation already gave them for the scenario's own start)."""
    ctx = dataclasses.replace(scn.context, start_utc=start)
    found = []
    for sid, sim in scn.sims.items():
        cls = registry.adapter_class(sim.adapter)
        found += [Problem(f"sims.{sid}", text) for text in cls.check(scn.sim_models[sid], ctx)
                  if not text.startswith(WARNING_PREFIX)]
    for eid, entity in scn.entities.items():
        cls = registry.adapter_class(scn.sims[entity.sim].adapter)
        sim_ctx = dataclasses.replace(ctx, step_s=scn.sim_step_s(entity.sim))
        texts = cls.check_entity(entity.model, _entity_model(scn, eid), sim_ctx, scn.sim_models.get(entity.sim))
        found += [Problem(f"entities.{eid}", text) for text in texts if not text.startswith(WARNING_PREFIX)]
    return found


def _entity_model(scn: Scenario, eid: str):
    """An entity's params as its adapter's pydantic model (None for a model without params)."""
    entity = scn.entities[eid]
    params_cls = registry.adapter_class(scn.sims[entity.sim].adapter).ModelParams.get(entity.model)
    if params_cls is None:
        return None
    return params_cls.model_validate(scn.entity_params[eid], context={"base_dir": scn.base_dir})


def _as_date(value: Any) -> date | None:
    if isinstance(value, datetime):
        return value.astimezone(timezone.utc).date() if value.tzinfo else value.date()
    if isinstance(value, date):
        return value
    if isinstance(value, str):
        try:
            return date.fromisoformat(value[:10])
        except ValueError:
            return None
    return None


# -- one agent ---------------------------------------------------------------------------------
def agent_spec(scn: Scenario, table: dict[str, Any], where: str, problems: list[Problem],
               episode: EpisodeSpec) -> AgentSpec:
    """The agent keys of ``table`` (problems appended; what is wrong is left out); ``episode`` gives
    the decision times a forecast archive must cover."""
    actions = _actions(scn, table.get("actions", []), f"{where}.actions", problems)
    observations = _observations(scn, table.get("observations", []), f"{where}.observations", problems)
    time_features = table.get("time_features", True)
    if not isinstance(time_features, bool):
        problems.append(Problem(f"{where}.time_features", "give true or false (hour of day and day of week as "
                                                          "sin/cos)", time_features))
        time_features = True
    forecasts = parse_forecasts(scn, table.get("forecasts", []), f"{where}.forecasts", problems,
                                decision_times(scn, episode))
    reward = _reward(scn, table.get("reward", {}), f"{where}.reward", problems)
    return AgentSpec(tuple(actions), tuple(observations), time_features, tuple(forecasts), reward)


def _agents(scn: Scenario, tables: dict[str, Any], problems: list[Problem],
            episode: EpisodeSpec) -> dict[str, AgentSpec]:
    specs: dict[str, AgentSpec] = {}
    owner: dict[str, str] = {}
    for name, body in tables.items():
        where = f"agents.{name}"
        if not isinstance(body, dict):
            problems.append(Problem(where, "must be a table ([agents.<name>] with actions, observations, reward)",
                                    body))
            continue
        shared = [k for k in body if k in EPISODE_KEYS]
        for key in shared:
            problems.append(Problem(f"{where}.{key}", "an episode key: the agents decide together, so it goes "
                                                      "in [agent]", body[key]))
        unknown({k: v for k, v in body.items() if k not in EPISODE_KEYS}, where, AGENT_KEYS, problems)
        if "actions" not in body:
            problems.append(Problem(f"{where}.actions", "required: the inputs this agent sets"))
        specs[name] = agent_spec(scn, body, where, problems, episode)
        for action in specs[name].actions:
            if action.name in owner:
                problems.append(Problem(f"{where}.actions", f"{action.name} is already set by agent "
                                                            f"{owner[action.name]!r}; give each input one agent",
                                        action.name))
            owner.setdefault(action.name, name)
    return specs


def _actions(scn: Scenario, value: Any, where: str, problems: list[Problem]) -> list[ActionSpec]:
    if not isinstance(value, list) or not value:
        problems.append(Problem(where, 'give a non-empty list of [[...actions]] tables, each with input = '
                                       '"<entity>.<input>"', value))
        return []
    found: list[ActionSpec] = []
    for i, body in enumerate(value):
        action = _action(scn, body, f"{where}[{i}]", problems)
        if action is None:
            continue
        if any(a.name == action.name for a in found):
            problems.append(Problem(f"{where}[{i}].input", "set by an earlier action already; give each input "
                                                           "once", action.name))
            continue
        found.append(action)
    return found


def _action(scn: Scenario, body: Any, where: str, problems: list[Problem]) -> ActionSpec | None:
    before = len(problems)
    if not is_table(body, where, ACTION_KEYS, '{ input = "bess.p_set_mw" }', problems):
        return None
    eid, attr = _input_name(scn, body.get("input"), f"{where}.input", problems)
    if eid is None:
        return None
    values = _values(body.get("values"), f"{where}.values", problems)
    default = _default_bounds(scn, eid, attr)
    low, high = _bounds(body, values, default, where, f"{eid}.{attr}", problems)
    if len(problems) > before:
        return None
    hard = _settable_bounds(scn, eid, attr)
    for key, value, inside in (("low", low, hard is None or low >= hard[0]), ("high", high, hard is None or high <= hard[1])):
        if not inside:  # Session.set would refuse it at the step
            problems.append(Problem(f"{where}.{key}", f"outside what {eid}.{attr} accepts from outside, "
                                                      f"[{hard[0]:g}, {hard[1]:g}]; bound it inside", value))
    if len(problems) > before:
        return None
    idle = _idle(body.get("idle"), low, high, values, f"{where}.idle", problems)
    if values is not None and any(not low <= v <= high for v in values):
        problems.append(Problem(f"{where}.values", f"outside [low, high] = [{low:g}, {high:g}]", list(values)))
    return None if len(problems) > before else ActionSpec(eid, attr, low, high, values, idle)


def _input_name(scn: Scenario, name: Any, where: str, problems: list[Problem]) -> tuple[str | None, str]:
    if not isinstance(name, str) or "." not in name:
        problems.append(Problem(where, 'give "<entity>.<input>", e.g. "bess.p_set_mw"', name))
        return None, ""
    eid, attr = name.split(".", 1)
    if eid not in scn.entities:
        problems.append(Problem(where, f"unknown entity {eid!r}; known: {few(list(scn.entities))}", name))
        return None, ""
    inputs = scn.inputs(eid)
    if attr not in inputs:
        problems.append(Problem(where, f"{eid} has no input {attr!r}; inputs: {few(inputs) or 'none'}", name))
        return None, ""
    return eid, attr


def _default_bounds(scn: Scenario, eid: str, attr: str) -> tuple[float, float] | None:
    """The adapter's bounds of the input (``CosimSim.input_bounds``), when it knows them."""
    entity = scn.entities[eid]
    cls = registry.adapter_class(scn.sims[entity.sim].adapter)
    bounds = cls.input_bounds(entity.model, _entity_model(scn, eid), scn.sim_models.get(entity.sim))
    if attr not in bounds or not all(math.isfinite(float(b)) for b in bounds[attr]):
        return None  # none known, or open-ended (a limit without a rating): the action must give low and high
    return tuple(map(float, bounds[attr]))


def _settable_bounds(scn: Scenario, eid: str, attr: str) -> tuple[float, float] | None:
    """The bounds ``Session.set`` holds the input to (``CosimSim.settable_bounds``), when there are any."""
    entity = scn.entities[eid]
    cls = registry.adapter_class(scn.sims[entity.sim].adapter)
    return cls.settable_bounds(entity.model, _entity_model(scn, eid), scn.sim_models.get(entity.sim)).get(attr)


def _values(value: Any, where: str, problems: list[Problem]) -> tuple[float, ...] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not value or not all(number(v) for v in value):
        problems.append(Problem(where, "give a non-empty list of numbers (the discrete choices), e.g. "
                                       "[0.0, 0.5, 1.0]", value))
        return None
    return tuple(float(v) for v in value)


def _bounds(body: dict[str, Any], values: tuple[float, ...] | None, default: tuple[float, float] | None,
            where: str, name: str, problems: list[Problem]) -> tuple[float, float]:
    fallback = (min(values), max(values)) if values else default
    bounds = []
    for i, key in enumerate(("low", "high")):
        given = body.get(key)
        if given is None and fallback is None:
            problems.append(Problem(f"{where}.{key}", f"the adapter gives no default bounds for {name}; give low "
                                                      "and high in the input's unit"))
            bounds.append(0.0)
        elif given is not None and not number(given):
            problems.append(Problem(f"{where}.{key}", "give a finite number in the input's unit", given))
            bounds.append(0.0)
        else:
            bounds.append(float(given if given is not None else fallback[i]))
    low, high = bounds
    if not low < high and not any(p.path.startswith(where) for p in problems):
        problems.append(Problem(f"{where}.high", f"must be above low = {low:g}", high))
    if default is not None and not any(p.path.startswith(where) for p in problems):
        for key, value, inside in (("low", low, low >= default[0]), ("high", high, high <= default[1])):
            if not inside:
                problems.append(Problem(f"{where}.{key}", f"outside what {name} accepts, [{default[0]:g}, "
                                                          f"{default[1]:g}] (from its adapter); bound it inside", value))
    return low, high


def _idle(value: Any, low: float, high: float, values: tuple[float, ...] | None, where: str,
          problems: list[Problem]) -> float:
    if value is None:
        value = 0.0 if low <= 0.0 <= high else high
        return min(values, key=lambda v: abs(v - value)) if values else value
    if not number(value) or not low <= value <= high or (values and float(value) not in values):
        allowed = f"one of {list(values)}" if values else f"a number in [{low:g}, {high:g}]"
        problems.append(Problem(where, f"give {allowed} (the value that leaves the knob as if unset)", value))
        return low
    return float(value)


def _observations(scn: Scenario, value: Any, where: str, problems: list[Problem]) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        problems.append(Problem(where, 'give a list of "<entity>.<output>" names or glob patterns, e.g. '
                                       '["bess.soc_frac", "feeder.bus_*_vm_pu"]', value))
        return []
    outputs = [f"{eid}.{attr}" for eid in scn.entities for attr in scn.outputs(eid)]
    found: list[str] = []
    for i, pattern in enumerate(value):
        hits = [name for name in outputs if fnmatch.fnmatchcase(name, pattern)]
        if not hits:
            near = [o for o in outputs if o.split(".")[0] == pattern.split(".")[0]] or outputs
            problems.append(Problem(f"{where}[{i}]", f"matches no output; e.g. {few(near, 8)}", pattern))
        found += [h for h in hits if h not in found]
    return found


def _reward(scn: Scenario, value: Any, where: str, problems: list[Problem]) -> dict[str, float]:
    if not isinstance(value, dict):
        problems.append(Problem(where, "give a table of term = weight, e.g. { energy_cost_usd = -1.0 }", value))
        return {}
    available = available_terms(scn)
    weights = {}
    for term, weight in value.items():
        if term not in TERMS:
            problems.append(Problem(f"{where}.{term}", f"unknown reward term; terms: {', '.join(TERMS)}", weight))
        elif not number(weight):
            problems.append(Problem(f"{where}.{term}", "give a finite number (costs take negative weights)", weight))
        elif available[term] is not None:
            problems.append(Problem(f"{where}.{term}", f"not available in this scenario: {available[term]}", weight))
        else:
            weights[term] = float(weight)
    return weights


# -- helpers -----------------------------------------------------------------------------------
def _table(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, dict) else {}


def _raise(scn: Scenario, problems: list[Problem]) -> None:
    if problems:
        raise ScenarioError(scn.file, problems)


def decision_times(scn: Scenario, episode: EpisodeSpec) -> np.ndarray:
    """Every decision time of the episodes ``episode`` runs (from the scenario's start, each
    ``start_window`` day and each ``eval_starts`` day; the last one at the episode's end),
    ascending. [UTC epoch s]"""
    days = (window_days(episode.start_window) if episode.start_window else []) + list(episode.eval_starts)
    starts = {scn.scenario.start.timestamp()} | {start_utc(scn, d).timestamp() for d in days}
    duration = scn.scenario.duration_s
    offsets = np.minimum(np.arange(-(-duration // episode.decision_s) + 1) * episode.decision_s, duration)
    return np.unique(np.add.outer(np.array(sorted(starts)), offsets.astype(float)))


def window_days(window: tuple[date, date]) -> list[date]:
    """Every start day of a window, first to last."""
    first, last = window
    return [first + timedelta(days=k) for k in range((last - first).days + 1)]


def episode_starts(scn: Scenario, episode: EpisodeSpec) -> list[datetime]:
    """The start times an env may reset to on its own or for evaluation: every day of the start
    window and the held-out days (none when the section names neither)."""
    days = [*(window_days(episode.start_window) if episode.start_window is not None else []), *episode.eval_starts]
    return [start_utc(scn, day) for day in days]
