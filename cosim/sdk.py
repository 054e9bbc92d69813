"""What adapters import: the simulator base classes, parameter types, units and roles.

An adapter module ``adapters/<name>.py`` (or package ``adapters/<name>/``) defines one
subclass of :class:`CosimSim` (usually of :class:`SingleModelSim`); the registry finds it by
scanning the folder, so adding a simulator needs no list to be edited. The adapter name in a
scenario is the module name. Adapters import this module and nothing else of cosim's core.

A single-model adapter (:class:`SingleModelSim`) declares ``MODEL``, ``PARAMS`` (pydantic
model of an entity's params), ``ROLE`` (:mod:`cosim.roles`), ``INPUTS``, ``OUTPUTS`` and
``PHYSICS`` (the plain-Python model class, built from the params), and implements
``advance(obj, time_s, inputs) -> outputs``; META, entity creation and the step loop come
from the base. A multi-model adapter subclasses :class:`CosimSim` and declares:

* ``META`` — mosaik META; build each model with :func:`model_meta` so it lists its
  ``inputs``, ``outputs`` and ``role`` (cosim extensions mosaik ignores) next to ``attrs``.
* ``SimParams`` — pydantic model of the ``[sims.<id>]`` keys besides ``adapter``.
* ``ModelParams`` — ``{model: pydantic model}`` of each entity's params.

and implements ``setup()`` (after init), ``create_entity(eid, model, params)`` and
``step_entities(time_s, inputs)``; outputs go into ``self.out[eid][attr]``. Both may define:

* ``meta_for(sim_params)`` — when the attributes depend on the parameters
  (a grid's buses, a CSV file's columns).
* ``check(sim_params, ctx)`` — extra validation needing the scenario's time window
  (e.g. does the data cover the run?). Returns problem strings; one starting with
  ``"warning: "`` is a warning (printed, kept in metadata.json), not a problem.
* ``check_entity(model, params, ctx, sim_params)`` — the same, for one entity's params.
* ``check_scenario(scn)`` — warnings that need the whole validated scenario (a controller's
  loop gain against the grid element its connections feed); called once per adapter class
  the scenario uses, after every entity and connection is valid. Returns warning sentences,
  each naming its place (``entities.<id>: ...``); default none.
* ``entity_inputs(model, params)`` — inputs that exist only for some entities (a cluster's
  per-fleet knobs); declare the model ``any_inputs`` for mosaik, and cosim's validator still
  accepts only ``inputs`` plus these.
* ``listing()`` — extra lines for ``cosim list`` (the datacenter's scheduling policies).
* ``input_bounds(model, params, sim_params)`` — ``{input: (low, high)}`` an entity accepts (a
  GPU's cap range, a battery's power limits, an FMU's min/max): the default bounds of a learning
  agent's actions (:mod:`cosim.gym`); default none. ``settable_bounds`` adds, for every other
  input, the physically plausible range of its unit (:data:`INPUT_RANGES`): what
  ``Session.set`` and the live API refuse values outside of. Every input must have one (the
  contract test checks): an input whose unit has no range there needs an ``input_bounds`` entry.
* ``forecast(attr, start_utc, n, step_s)`` — the next ``n`` values of an output, ``step_s``
  apart from ``start_utc`` (a signal read ahead from its file): a learning agent's forecast
  window; default None (this simulator cannot look ahead).
* ``EXAMPLE`` — params the contract test uses to start it: ``{"sim": {...},
  "models": {model: {...}}, "single": [models created once per sim]}``; relative paths
  resolve from ``scenarios/``, ``{tmp}`` is a temporary folder. An optional ``"span_s"`` caps
  the simulated seconds the generic stepping tests run it for (a simulator whose cost grows
  with simulated time, such as ANDES's 30 integration steps per second; default: theirs).

A step that raises :class:`EndRun` ends the run early and cleanly (status ``ok``, the
exception's message as the reason); any other exception fails it. A grid whose power flow
does not converge raises :class:`PowerFlowNotConverged` (the run's ``metadata.json`` then
says ``error_type = "PowerFlowNotConverged"``: a verdict about the grid, not a crash).

Every ``init`` receives ``start_utc`` (ISO 8601), ``step_s``, ``duration_s`` and
``seed`` from the scenario, besides the simulator's own params, and mosaik's
``time_resolution``: the scenario's ``tick_s``, the seconds of one integer mosaik time step
(1.0 by default; 0.1 or 0.01 for sub-second studies, any ``1/n`` s down to 1 ms). mosaik counts
time in ticks; :class:`CosimSim` converts at the boundary, so ``step_entities`` and
``advance`` get ``time_s`` in **seconds** (an int at whole seconds, as always; else the float
``ticks / ticks_per_s``) and ``self.step_s`` is the step in seconds (an int, or a float as the
scenario gave it). Where a count of steps is needed, use the exact integers ``self.time_ticks`` (the current
step's time in ticks) and ``self.step_ticks``, never ``time_s // step_s`` on floats.
"""

from __future__ import annotations

import copy
import ctypes
import functools
import hashlib
import importlib.util
import math
import operator
import re
import sys
import warnings
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Annotated, Any, ClassVar
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import mosaik_api_v3
import numpy as np
from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, ValidationInfo, model_validator

from cosim.errors import PowerFlowNotConverged, Problem  # noqa: F401 — Problem: check_scenario's problems
from cosim.roles import POWER_ATTR, ROLES, check_role
from cosim.units import DIMENSIONLESS, UNIT_SUFFIXES, has_unit_suffix, unit_of

__all__ = ["CosimSim", "DataFile", "DIMENSIONLESS", "EndRun", "INPUT_RANGES", "NoParams", "meta", "POWER_ATTR",
           "Params", "PowerFlowNotConverged", "ROLES", "STRICT_PARAMS", "ScenarioContext", "SingleModelSim",
           "TimeZone", "as_tuple", "UNIT_SUFFIXES", "has_unit_suffix", "load_library", "library_agrees",
           "note_acceleration", "CPartWarning", "c_parts", "accelerations", "run_accelerations", "said_accelerations",
           "model_meta", "parse_utc", "sanitise", "sum_inputs", "ticks_per_s", "to_ticks", "unit_of", "unit_range"]


#: Folders whose files are devices or the system's own state, never data.
SYSTEM_DIRS = ("/proc", "/sys", "/dev")


def _as_path(value: Any) -> Any:
    if isinstance(value, str):
        return Path(value)
    if not isinstance(value, Path):
        raise ValueError("give a file path as a string, e.g. \"data/loads/trace.csv\"")
    return value


def _resolve_existing_file(value: Path, info: ValidationInfo) -> Path:
    base_dir = (info.context or {}).get("base_dir")
    path = Path(value).expanduser()
    if not path.is_absolute() and base_dir is not None:
        path = Path(base_dir) / path
    try:
        path = path.resolve()
        if any(path == Path(d) or Path(d) in path.parents for d in SYSTEM_DIRS):
            raise ValueError(f"{path} is a device or system file, not data; give a data file (CSV, Parquet, ...)")
        found = path.is_file()
    except OSError as exc:  # a name too long for the file system, a loop of links
        raise ValueError(f"not a usable file path ({exc.strerror or exc})") from None
    if not found:
        raise ValueError(f"data file not found: {path}")
    return path


#: A data file path. Relative paths resolve from the scenario file's folder (passed as
#: ``context={"base_dir": ...}`` to ``model_validate``); the file must exist and be a regular
#: file outside /proc, /sys and /dev.
DataFile = Annotated[Path, BeforeValidator(_as_path), AfterValidator(_resolve_existing_file)]


def _known_time_zone(value: str | None) -> str | None:
    if value is None:
        return None
    try:
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError, OSError):  # OSError: a "name" too long to be a file
        raise ValueError("unknown time zone; give an IANA name such as 'America/New_York', 'Europe/Berlin' or "
                         "'Etc/GMT+5'") from None
    return value


#: A time zone of the IANA database (checked when the scenario is validated, also when unused).
TimeZone = Annotated[str, AfterValidator(_known_time_zone)]


def as_tuple(value: Any) -> Any:
    """A TOML array as a tuple (strict models take tuples only; use with ``BeforeValidator``)."""
    return tuple(value) if isinstance(value, list) else value


#: Parameter models: unknown keys are an error; numbers are numbers (a quoted "2.4" or a
#: ``true`` is refused, not coerced) and finite (inf and NaN are refused unless a field says so).
STRICT_PARAMS = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)


class EndRun(Exception):
    """Raised by a simulator's step to end the run cleanly (an FMU that asks to terminate): the
    engines stop, keep the rows recorded so far, and report status ``ok`` with ``reason`` = the
    message. Name the simulator and the time in it."""


class NoParams(BaseModel):
    """No parameters accepted."""

    model_config = STRICT_PARAMS


#: The largest magnitude a parameter of each unit may have: past any real plant or study, so a
#: typo (1e300 hours of warm-up, 10^15 replicas) is refused before it hangs a run. Sentinels
#: meaning "no limit" (1e9 MW) stay inside.
MAGNITUDE_LIMITS: dict[str, float] = {
    "mw": 1e9, "mvar": 1e9, "mva": 1e9, "kw": 1e12, "w": 1e15, "mwh": 1e12, "kwh": 1e15, "gwh": 1e9,
    "h": 87_600.0, "min": 5.3e7, "s": 3.2e9, "ms": 3.2e12, "c": 1e4, "gpu_h": 1e12, "": 1e9,
    # angles, lengths (altitudes, hub heights: 100 km is above any of them), per-unit values and
    # fractions (gains, droops, efficiencies), frequencies, rates, prices, hours of the day
    "deg": 360.0, "m": 1e5, "pu": 1e6, "frac": 1e7, "ratio": 1e6, "hz": 1e6, "k": 1e4, "per_s": 1e6,
    "j": 1e18, "gj": 1e6, "g_kwh": 1e5, "usd_mwh": 1e7, "utc": 1e5,
    # impedances (a fault's resistance: 1 Mohm is an open circuit for any feeder)
    "ohm": 1e6,
}
#: The limit of a unit :data:`MAGNITUDE_LIMITS` does not list (no number escapes a limit). [-]
MAGNITUDE_LIMIT_OTHER = 1e9


def magnitude_problem(name: str, value: Any) -> str | None:
    """Why ``value`` (a number, or a list of them) of the param ``name`` is beyond any real plant or
    study (:data:`MAGNITUDE_LIMITS` for its unit), or None."""
    values = value if isinstance(value, (list, tuple)) else [value]
    unit = unit_of(name) or ""
    limit = MAGNITUDE_LIMITS.get(unit, MAGNITUDE_LIMIT_OTHER)
    for item in values:
        if isinstance(item, bool) or not isinstance(item, (int, float)):
            continue
        if abs(item) > limit:
            return (f"{name} = {item!r} is beyond any real plant or study (at most {limit:g} for a value in "
                    f"{unit or 'count'}); check the number and its unit")
    return None


class Params(BaseModel):
    """Base for parameter models: unknown keys are an error; numbers strict, finite and within
    :data:`MAGNITUDE_LIMITS` for their unit (counts ``n_*``: at most 1e9).

    ``TIME_CONSTANTS`` names the params (dotted for a nested model: ``"perc1.t_recon_s"``) that
    set a response time of the model: validation warns when one is positive and shorter than the
    simulator's step (the step cannot resolve it, so the result depends on the step)."""

    model_config = STRICT_PARAMS
    TIME_CONSTANTS: ClassVar[tuple[str, ...]] = ()

    @model_validator(mode="after")
    def _physical_magnitudes(self):
        for name in type(self).model_fields:
            problem = magnitude_problem(name, getattr(self, name))
            if problem is not None:
                raise ValueError(problem)
        return self


#: The finest tick: 1 ms (the recorder's time stamps are in milliseconds). [1/s]
MAX_TICKS_PER_S = 1000


def ticks_per_s(tick_s: float) -> int:
    """Ticks in one second for a tick of ``tick_s`` seconds (1.0 -> 1, 0.1 -> 10, 0.01 -> 100).

    Raises:
        ValueError: ``tick_s`` is not ``1/n`` of a second that is a whole number of milliseconds
            (``n`` divides 1000: 1, 0.5, 0.25, 0.2, 0.1, 0.05, 0.02, 0.01, ..., 0.001).
    """
    if isinstance(tick_s, bool) or not isinstance(tick_s, (int, float)) or not 0 < tick_s <= 1.0:
        raise ValueError(f"tick_s = {tick_s!r}: give the tick as 1/n of a second, e.g. 1.0, 0.1 or 0.01")
    n = round(1.0 / tick_s)
    if n > MAX_TICKS_PER_S or MAX_TICKS_PER_S % n or abs(n * tick_s - 1.0) > 1e-9:
        raise ValueError(f"tick_s = {tick_s!r}: give the tick as 1/n of a second in whole milliseconds "
                         "(n divides 1000), e.g. 1.0, 0.5, 0.1, 0.01 or 0.001")
    return n


def to_ticks(seconds: float, n_per_s: int) -> int:
    """``seconds`` as a whole number of ticks (``n_per_s`` ticks a second); never rounds silently.

    Raises:
        ValueError: ``seconds`` is not a whole number of ticks (0.25 s at a 0.1 s tick).
    """
    exact = seconds * n_per_s
    n = round(exact)
    if abs(exact - n) > 1e-9 * max(1.0, abs(exact)):
        raise ValueError(f"{seconds!r} s is not a whole number of {1 / n_per_s:g} s ticks; give a multiple of the "
                         "tick (scenario.tick_s)")
    return int(n)


@dataclass(frozen=True)
class ScenarioContext:
    """What an adapter's ``check`` may need to know about the scenario.

    Attributes:
        start_utc: the run's start.
        duration_s: its length. [s]
        step_s: the step of the sim being checked (its own ``step_s``, else the scenario's). [s]
        seed: the scenario seed. [-]
        tick_s: the time resolution (one mosaik time step). [s]
    """

    start_utc: datetime
    duration_s: int
    step_s: float
    seed: int
    tick_s: float = 1.0

    @property
    def end_utc(self) -> datetime:
        return self.start_utc + timedelta(seconds=self.duration_s)


def model_meta(
    inputs: list[str] | tuple[str, ...] = (),
    outputs: list[str] | tuple[str, ...] = (),
    params: type[BaseModel] | None = None,
    any_inputs: bool = False,
    role: str | None = None,
    detail: list[str] | tuple[str, ...] = (),
) -> dict[str, Any]:
    """Build the META entry of one model.

    Args:
        inputs: attributes other simulators may set. [unit-suffixed names]
        outputs: attributes this model reports. [unit-suffixed names]
        params: pydantic model of the entity params (their names go into ``params``).
        any_inputs: accept inputs of any name (the recorder).
        role: what the model is for (:data:`cosim.roles.ROLES`); every model declares one.
        detail: outputs (among ``outputs``) a run records only on request: one per bus, line or
            device of a network, say. By default a run records every other output.
    """
    attrs = list(dict.fromkeys([*inputs, *outputs]))
    meta: dict[str, Any] = {
        "public": True,
        # ``eid`` lets the world name each entity after its scenario key.
        "params": ["eid", *(params.model_fields if params else [])],
        "attrs": attrs,
        "inputs": list(inputs),
        "outputs": list(outputs),
    }
    if role is not None:
        meta["role"] = check_role(role)
    if any_inputs:
        meta["any_inputs"] = True
    if detail:
        meta["detail"] = list(detail)
    return meta


#: Physically plausible range of an input by its unit suffix, where its adapter states none
#: (``CosimSim.settable_bounds``). Wide on purpose: they refuse nonsense (a temperature below
#: absolute zero, a negative irradiance), not unusual studies; an adapter states tighter ones.
INPUT_RANGES: dict[str, tuple[float, float]] = {
    "": (0.0, 1.0),  # flags (``in_service``, ``event_active``): off or on
    "c": (-90.0, 150.0),  # [degC] air: -89.2 degC (Vostok, 1983) up; water loops and chips below 150
    "k": (-200.0, 200.0),  # [K] temperature differences
    "pu": (0.0, 2.0),  # per unit: 0 de-energised, 2 far above any ANSI C84.1 or IEEE 1547 trip
    "frac": (0.0, 1.0),
    "pct": (0.0, 1000.0),
    "hz": (40.0, 70.0),  # a 50 or 60 Hz system's frequency, far past any under/over-frequency trip
    "w_m2": (0.0, 1500.0),  # irradiance: the solar constant is 1361 W/m2 (Kopp & Lean 2011)
    "m_s": (0.0, 120.0),  # wind: the highest gust measured is 113 m/s (WMO, Barrow Island 1996)
    "g_kwh": (0.0, 2000.0),  # carbon intensity: coal's life-cycle median is 820 g/kWh (IPCC AR5 WGIII, Annex III)
    "usd_mwh": (-10_000.0, 100_000.0),  # price: caps are $5,000/MWh (ERCOT) and +-9,999 EUR/MWh (EU intraday)
    "s": (0.0, 31_622_400.0),  # durations: up to a leap year
    "ms": (0.0, 3_600_000.0),  # latencies: up to an hour
    "mw": (-100_000.0, 100_000.0),  # a measured power: 100 GW exceeds any one site's or area's flow
    "mvar": (-100_000.0, 100_000.0),
}


def unit_range(attr: str) -> tuple[float, float] | None:
    """The plausible range (:data:`INPUT_RANGES`) of input ``attr`` by its unit, or None. [unit of attr]"""
    unit = unit_of(attr)
    return None if unit is None else INPUT_RANGES.get(unit)


def sanitise(name: Any) -> str:
    """An element name as an attribute-safe id: lower case ``[a-z0-9_]``, or ``""``. The one rule of
    every grid engine (pandapower, OpenDSS, ANDES), so that an element has one id on each."""
    if name is None or (isinstance(name, float) and math.isnan(name)):
        return ""
    return re.sub(r"[^a-z0-9]+", "_", str(name).lower()).strip("_")


def meta(models: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """A time-based simulator's META from its models' entries (:func:`model_meta`)."""
    return {"api_version": "3.0", "type": "time-based", "models": dict(models)}


def parse_utc(text: str | datetime) -> datetime:
    """Parse an ISO 8601 timestamp into an aware UTC datetime."""
    value = text if isinstance(text, datetime) else datetime.fromisoformat(str(text))
    if value.tzinfo is None:
        value = value.replace(tzinfo=timezone.utc)
    return value.astimezone(timezone.utc)


class CosimSim(mosaik_api_v3.Simulator):
    """A time-based mosaik simulator with validated params and summed inputs."""

    META: ClassVar[dict[str, Any]] = meta({})
    SimParams: ClassVar[type[BaseModel]] = NoParams
    ModelParams: ClassVar[dict[str, type[BaseModel]]] = {}
    EXAMPLE: ClassVar[dict[str, Any]] = {}

    def __init__(self) -> None:
        # the class META until ``init`` puts this simulator's own copy (of ``meta_for``) in its place;
        # mosaik_api_v3 copies its top level, and nothing edits ``meta`` before ``init``
        super().__init__(self.META)
        self.out: dict[str, dict[str, Any]] = {}
        self._getters: dict[tuple[str, ...], Any] = {}  # get_data: requested attrs -> tuple getter
        self.models: dict[str, str] = {}

    # -- hooks for validation (no simulator is started for these) ------------------
    @classmethod
    def meta_for(cls, sim_params: BaseModel) -> dict[str, Any]:
        """META for these sim params; the class META unless overridden."""
        return cls.META

    @classmethod
    def check(cls, sim_params: BaseModel, ctx: ScenarioContext) -> list[str]:
        """Extra problems with these params for this scenario window. A text starting with
        ``"warning: "`` is not a problem: validation adds it to the scenario's warnings."""
        return []

    @classmethod
    def check_entity(cls, model: str, params: BaseModel | None, ctx: ScenarioContext,
                     sim_params: BaseModel | None = None) -> list[str]:
        """Extra problems with one entity's params (given its sim's params) for this scenario window."""
        return []

    @classmethod
    def check_scenario(cls, scn: Any) -> list[Any]:
        """Warnings (texts) about this adapter's entities in the validated scenario ``scn``, and
        :class:`Problem` s (key path, message, value) for what stops it: a mistake that shows only
        across entities or connections (validation fails with them, before any step). Default none."""
        return []

    @classmethod
    def entity_inputs(cls, model: str, params: BaseModel | None) -> list[str]:
        """Extra input attributes of one entity, from its params (default: none)."""
        return []

    @classmethod
    def listing(cls) -> list[str]:
        """Extra lines ``cosim list`` shows under the adapter (its plug-in choices; default: none)."""
        return []

    @classmethod
    def input_bounds(cls, model: str, params: BaseModel | None,
                     sim_params: BaseModel | None = None) -> dict[str, tuple[float, float]]:
        """``{input: (low, high)}`` one entity accepts, from its params and its sim's (default: none
        known). [input units]"""
        return {}

    @classmethod
    def refused_inputs(cls, model: str, params: BaseModel | None,
                       sim_params: BaseModel | None = None) -> dict[str, str]:
        """``{input: why}`` for inputs this entity must not be given from outside (a live ``PUT``),
        given its params: a value there would stop the run (default: none)."""
        return {}

    @classmethod
    def settable_bounds(cls, model: str, params: BaseModel | None,
                        sim_params: BaseModel | None = None) -> dict[str, tuple[float, float]]:
        """``{input: (low, high)}`` for every input of one entity: :meth:`input_bounds`, else its
        unit's plausible range (:data:`INPUT_RANGES`); an input with neither is left out (and
        refused by the contract test). [input units]"""
        meta = cls.META if sim_params is None else cls.meta_for(sim_params)
        desc = meta.get("models", {}).get(model, {})
        names = [*desc.get("inputs", []), *cls.entity_inputs(model, params)]
        stated = cls.input_bounds(model, params, sim_params)
        bounds = {}
        for name in names:
            low, high = stated.get(name, (-math.inf, math.inf))
            plausible = unit_range(name) or (-math.inf, math.inf)  # an open end: the unit's range closes it
            low, high = (low if math.isfinite(low) else plausible[0]), (high if math.isfinite(high) else plausible[1])
            if math.isfinite(low) and math.isfinite(high):
                bounds[name] = (float(low), float(high))
        return bounds

    def built_from(self) -> frozenset[str] | None:
        """Which scenario-wide ``init`` arguments (``start_utc``, ``duration_s``, ``seed``) this
        simulator's state after set-up (``init``, ``create``, ``setup_done``) depends on, when a deep
        copy of it taken then is a faithful new start: a copy set up under other values of the rest,
        with the attributes ``init`` keeps them in set anew, steps as a new simulator would (a gym
        reset restores such a copy instead of building again). None, the default: no copy (state
        outside this object, e.g. a solver's engine or an FMU instance, or not checked)."""
        return None

    def accelerations(self) -> dict[str, dict[str, Any]]:
        """The faster paths that give the same numbers this simulator took in its run, by name: ``{"on": bool,
        "detail": str}`` each (e.g. the grid's ``opendss_yprim_reads``: whether an OpenDSS feeder's loadings and
        losses came from currents computed from the Yprims, and if not why). The engine gathers them at the end
        of a run into its ``metadata.json``'s ``accelerations``, beside the process's own
        (:func:`note_acceleration`); one run's say nothing of another's made in the same process (default:
        none)."""
        return {}

    def prepare_starts(self, starts_utc: list[datetime]) -> None:
        """Runs of this scenario may later start at each of ``starts_utc`` (a gym's start days),
        with this simulator's parameters: work that depends only on the start may be done for all
        of them at once now, for the simulators those runs build, provided each gets the same
        numbers as it would alone (default: nothing)."""

    def release(self, eid: str, attr: str) -> None:
        """Input ``attr`` of ``eid`` is no longer held from outside (``Session.set(..., None)``): an
        adapter that keeps the last value of an input it is not sent returns it to the scenario's
        own value here (default: nothing to do)."""

    def forecast(self, attr: str, start_utc: datetime, n: int, step_s: float) -> list[float] | None:
        """The next ``n`` values of output ``attr`` at ``start_utc + k * step_s`` (None: cannot look ahead)."""
        return None

    # -- mosaik API -------------------------------------------------------------------
    def init(self, sid, time_resolution=1.0, *, start_utc, step_s, duration_s, seed, **params):
        self.sid = sid
        #: seconds of one mosaik time step (the scenario's tick_s) and ticks in a second
        self.tick_s = float(time_resolution)
        self.ticks_per_s = ticks_per_s(self.tick_s)
        self.start_utc = parse_utc(start_utc)
        self.step_s = step_s  # [s], as the scenario gave it (an int, or a float below a second)
        self.step_ticks = to_ticks(step_s, self.ticks_per_s)
        self.time_ticks = 0  # the current step's time in ticks
        self.duration_s = int(duration_s)
        self.seed = int(seed)
        self.params = self.SimParams.model_validate(params)
        self.meta = copy.deepcopy(self.meta_for(self.params))
        self.meta.setdefault("api_version", "3.0")
        self.setup()
        return self.meta

    def create(self, num, model, eid=None, **params):
        models = self.meta.get("models", {})
        if model not in models:
            raise ValueError(f"unknown model {model!r}; this adapter has: {', '.join(models) or 'none'}")
        created = []
        for i in range(num):
            name = eid if (eid is not None and num == 1) else f"{eid or model}_{i}"
            model_params = self._validate_model_params(model, params)
            self.out[name] = {}
            self.models[name] = model
            self.create_entity(name, model, model_params)
            created.append({"eid": name, "type": model})
        return created

    def step(self, time, inputs, max_advance):
        return self.step_collapsed(time, sum_inputs(inputs))

    def look_ahead(self, steps: list[tuple[int, dict[str, dict[str, Any]]]]) -> None:
        """A hint: the steps this simulator is about to take, in order, as ``(time, inputs)``
        with the inputs collapsed as :meth:`step_collapsed` gets them (default: ignored).

        The direct engine gives it to a simulator whose inputs do not depend on the rest of the
        run (weather into PV) before stepping it through a block of steps ahead of the rest
        (:mod:`cosim.run.direct`). An adapter may compute those steps' outputs at once (as
        arrays) and serve them as its steps come; the steps are still taken one by one with
        their own inputs, and their results must be those of the steps taken without the hint,
        to the bit (mosaik never gives it). A step whose inputs differ from the hint's is
        computed as usual."""

    def step_collapsed(self, time, inputs: dict[str, dict[str, Any]]) -> int:
        """:meth:`step` with the inputs already collapsed as :func:`sum_inputs` does (the direct
        engine builds them so, skipping mosaik's per-source dicts); the next step time."""
        self.time_ticks = int(time)
        self.step_entities(self.seconds(self.time_ticks), inputs)
        return self.time_ticks + self.step_ticks

    def seconds(self, ticks: int) -> int | float:
        """Simulation time of mosaik time ``ticks`` in seconds: an int at whole seconds (what
        adapters always got at a 1 s tick), else ``ticks / ticks_per_s``. [s]"""
        if self.ticks_per_s == 1:  # (the usual tick: the ticks are the seconds)
            return ticks
        whole, part = divmod(ticks, self.ticks_per_s)
        return whole if not part else ticks / self.ticks_per_s

    def get_data(self, outputs):
        """``{eid: {attr: value}}`` of the requested outputs (None for one not produced yet).

        One C-level ``itemgetter`` per requested attribute list (kept by the list's contents)
        instead of a Python loop over the attributes; an attribute missing from the entity's
        outputs falls back to the loop with ``None``. When the request is exactly the entity's
        outputs, the entity's dict is copied whole (its own key order: readers look up by name).
        """
        return _data_of(self, self._data_plan(outputs))

    def data_reader(self, outputs: dict[str, list[str]]) -> Callable[[], dict[str, dict[str, Any]]]:
        """``get_data(outputs)`` as a function of no arguments, for a request asked after every step
        (the direct engine's): the request's getters are looked up once, not at every call. Only
        for :class:`CosimSim`'s own ``get_data`` (an adapter with its own is asked through it)."""
        return functools.partial(_data_of, self, self._data_plan(outputs))

    def _data_plan(self, outputs: dict[str, list[str]]) -> list[tuple[str, tuple[str, ...], Any, frozenset[str]]]:
        """``[(eid, attrs, their getter, attrs as a set), ...]`` of a request, in its order."""
        plan = []
        getters = self._getters
        for eid, attrs in outputs.items():
            key = tuple(attrs)
            entry = getters.get(key)
            if entry is None:
                entry = getters[key] = (tuple_getter(key), frozenset(key))
            plan.append((eid, key, *entry))
        return plan

    def _data_of(self, plan: list[tuple[str, tuple[str, ...], Any, frozenset[str]]]) -> dict[str, dict[str, Any]]:
        """``{eid: {attr: value}}`` of a request's plan (:meth:`_data_plan`); the C form's counterpart (:data:`_data_of`)."""
        data = {}
        out = self.out
        for eid, key, getter, names in plan:
            values = out[eid]
            if values.keys() == names:  # every output of the entity asked for (the recorder's "*"): one copy
                data[eid] = dict(values)
                continue
            try:
                data[eid] = dict(zip(key, getter(values)))
            except KeyError:
                data[eid] = {attr: values.get(attr) for attr in key}
        return data

    # -- for subclasses ------------------------------------------------------------
    def setup(self) -> None:
        """Called once after ``init``: build the model from ``self.params``."""

    def create_entity(self, eid: str, model: str, params: BaseModel | None) -> None:
        raise NotImplementedError

    def step_entities(self, time_s: float, inputs: dict[str, dict[str, Any]]) -> None:
        raise NotImplementedError

    def utc(self, time_s: float) -> datetime:
        """The UTC datetime of simulation time ``time_s``."""
        return self.start_utc + timedelta(seconds=time_s)

    def rng(self, eid: str) -> np.random.Generator:
        """A random generator seeded by the scenario seed and the entity id (deterministic)."""
        return np.random.default_rng([self.seed, zlib.crc32(eid.encode())])

    def _validate_model_params(self, model: str, params: dict[str, Any]) -> BaseModel | None:
        cls = self.ModelParams.get(model)
        if cls is None:
            if params:
                raise ValueError(f"model {model} takes no params, got {sorted(params)}")
            return None
        return cls.model_validate(params)


class SingleModelSim(CosimSim):
    """An adapter of one model: META, entities and the step loop built from declarations.

    Subclasses set ``MODEL`` (the model name), ``PARAMS`` (pydantic model of an entity's
    params, or None), ``ROLE``, ``INPUTS``, ``OUTPUTS`` (and ``ANY_INPUTS``), ``PHYSICS`` (the
    model class; ``build`` calls ``PHYSICS(params)`` unless overridden) and implement
    :meth:`advance`. An adapter whose attributes depend on its params overrides ``meta_for``
    and returns :meth:`single_meta` with them.
    """

    MODEL: ClassVar[str] = ""
    PARAMS: ClassVar[type[BaseModel] | None] = None
    ROLE: ClassVar[str | None] = None
    INPUTS: ClassVar[tuple[str, ...]] = ()
    OUTPUTS: ClassVar[tuple[str, ...]] = ()
    ANY_INPUTS: ClassVar[bool] = False
    PHYSICS: ClassVar[Any] = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.__dict__.get("MODEL"):
            cls.META = cls.single_meta()
            cls.ModelParams = {cls.MODEL: cls.PARAMS} if cls.PARAMS is not None else {}

    @classmethod
    def single_meta(cls, outputs: list[str] | tuple[str, ...] | None = None,
                    inputs: list[str] | tuple[str, ...] | None = None, role: str | None = None,
                    model: str | None = None) -> dict[str, Any]:
        """META of the one model, with other ``outputs``/``inputs``/``role``/name when given."""
        desc = model_meta(inputs=cls.INPUTS if inputs is None else inputs,
                          outputs=cls.OUTPUTS if outputs is None else outputs,
                          params=cls.PARAMS, any_inputs=cls.ANY_INPUTS, role=role or cls.ROLE)
        return meta({model or cls.MODEL: desc})

    def setup(self) -> None:
        self.entities: dict[str, Any] = {}

    def create_entity(self, eid: str, model: str, params: BaseModel | None) -> None:
        self.entities[eid] = self.build(eid, params)

    def build(self, eid: str, params: BaseModel | None) -> Any:
        """The model object of one entity (default ``PHYSICS(params)``; None without PHYSICS)."""
        return self.PHYSICS(params) if self.PHYSICS is not None else None

    def step_entities(self, time_s: float, inputs: dict[str, dict[str, Any]]) -> None:
        for eid, obj in self.entities.items():
            self.out[eid] = self.advance(obj, time_s, inputs.get(eid, {}))

    def advance(self, obj: Any, time_s: float, inputs: dict[str, Any]) -> dict[str, Any]:
        """One step of one entity over ``[time_s, time_s + step_s)``: its outputs."""
        raise NotImplementedError


#: Types of output values no one can change after they are handed out (a reader sees what the
#: step gave; anything else may be an object its adapter changes later, and is copied where kept)
PLAIN_TYPES = frozenset({float, int, bool, str, type(None)})


def tuple_getter(attrs: tuple[str, ...]):
    """``values -> tuple of values[attr]`` for ``attrs`` (a tuple also for one attribute or none)."""
    if len(attrs) == 1:
        only = attrs[0]
        return lambda values: (values[only],)
    return operator.itemgetter(*attrs) if attrs else (lambda values: ())


def sum_inputs(inputs: dict[str, dict[str, dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Collapse mosaik inputs ``{eid: {attr: {src: value}}}`` to ``{eid: {attr: value}}``.

    Several sources into one attribute are summed (the point of connection draws IT plus
    cooling power); ``None`` values (a source with nothing to say yet) are skipped, and an
    attribute whose every source is ``None`` is left out.
    """
    collapsed: dict[str, dict[str, Any]] = {}
    for eid, attrs in inputs.items():
        values: dict[str, Any] = {}
        for attr, sources in attrs.items():
            if len(sources) == 1:  # the usual case: one source, no list to build
                for only in sources.values():
                    if only is not None:
                        values[attr] = only
                continue
            present = [v for v in sources.values() if v is not None]
            if not present:
                continue
            values[attr] = present[0] if len(present) == 1 else sum(present)
        collapsed[eid] = values
    return collapsed


class CPartWarning(UserWarning):
    """An adapter's C part is not used (not built, or built from another text of its source): its Python/numpy
    form runs, with the same results, slower. ``make build`` builds it."""


#: what this process did with each C part it tried to load, by name (:func:`c_parts`)
_C_PARTS: dict[str, dict[str, Any]] = {}
#: other switches of a faster path that gives the same numbers, by name (:func:`note_acceleration`)
_ACCELERATIONS: dict[str, dict[str, Any]] = {}


def _c_part_name(path: Path) -> str:
    """``<package>/<file>`` for a library in the adapters' folder (``grid/_kernels.so``), else its path."""
    path = Path(path).resolve()
    spec = importlib.util.find_spec("cosim.adapters")  # (the repository's adapters/, or an installed copy)
    roots = [Path(root).resolve() for root in (spec.submodule_search_locations or [])] if spec else []
    if path.parent.parent in roots:
        return f"{path.parent.name}/{path.name}"
    core = Path(__file__).resolve().parent  # the core's own (cosim/run/_engine.so)
    return f"cosim/{path.relative_to(core)}" if path.is_relative_to(core) else str(path)


def _source_sha256(source: Path) -> str | None:
    try:
        return hashlib.sha256(source.read_bytes()).hexdigest()
    except OSError:
        return None


def _note_c_part(path: Path, status: str, source_sha256: str | None, built_sha256: str | None) -> None:
    """Record what became of a C part; warn once per library and process when it is not used because
    ``make build`` did not build it from its source as it is now."""
    name = _c_part_name(path)
    first = name not in _C_PARTS
    _C_PARTS[name] = {"used": status == "used", "status": status, "source_sha256": source_sha256,
                      "built_from_sha256": built_sha256}
    if status != "used" and first:
        why = {"not built": "is not built", "stale": "was built from another text of its source",
               "no source": "has no C source beside it to check it against",
               "not loadable": "is not a library this process can load"}[status]
        warnings.warn(f"{path} {why}: its Python/numpy form runs instead (the same results, slower); "
                      "run `make build` to build it", CPartWarning, stacklevel=3)


def load_library(path: Path, *, keep_gil: bool = False) -> ctypes.CDLL | None:
    """An adapter's compiled C part (``make build``: ``adapters/<package>/_name.so`` from ``_name.c``), or None:
    not built, not loadable, or built from another text than its source's now. ``make build`` compiles the
    source's SHA-256 into the library (``cosim_source_sha256()``), so an edited source, a library copied from
    another checkout or one built by hand is not trusted, whatever the files' times say; the adapter's Python
    form runs instead, and a :class:`CPartWarning` (once per library and process) names the file and the fix.
    Either way the outcome is recorded for the run's ``metadata.json`` (:func:`c_parts`); an adapter that then
    rejects a loaded library (its numbers not numpy's on this machine) says so with :func:`library_agrees`.
    ``keep_gil``: calls keep the GIL (``ctypes.PyDLL``; for short calls that never call into Python)."""
    source = _source_sha256(Path(path).with_suffix(".c"))
    try:
        lib = (ctypes.PyDLL if keep_gil else ctypes.CDLL)(str(path))
        stamp = lib.cosim_source_sha256
    except AttributeError:
        _note_c_part(path, "stale", source, None)  # built without the source's SHA-256 (by hand)
        return None
    except OSError:
        _note_c_part(path, "not loadable" if Path(path).exists() else "not built", source, None)
        return None
    stamp.argtypes, stamp.restype = [], ctypes.c_char_p
    built = (stamp() or b"").decode("ascii", "replace")
    status = "no source" if source is None else "used" if built == source else "stale"
    _note_c_part(path, status, source, built)
    return lib if status == "used" else None


def _engine_c(path: Path | None = None) -> Any:
    """The direct engine's bookkeeping in C (``cosim/run/_engine.so``, ``make build``): a module whose functions
    stand in for :meth:`CosimSim._data_of` and two of :class:`cosim.run.direct.DirectEngine`'s (the same dicts, lists
    and values; ``tests/run/test_engine_c.py`` compares each with its Python form on every shape it takes), or None
    (not built, stale, or built for another Python's major.minor version): the Python forms run, noted as every C
    part's outcome is."""
    path = path or Path(__file__).with_name("run") / "_engine.so"
    lib = load_library(path, keep_gil=True)
    if lib is None:
        return None
    built_for = 0
    if hasattr(lib, "cosim_python_hexversion"):
        lib.cosim_python_hexversion.argtypes, lib.cosim_python_hexversion.restype = [], ctypes.c_ulong
        built_for = lib.cosim_python_hexversion()
    if built_for >> 16 != sys.hexversion >> 16:  # another major.minor: its objects may be laid out otherwise
        _C_PARTS[_c_part_name(path)].update(used=False, status="not loadable")
        warnings.warn(f"{path} was built for Python {built_for >> 24}.{(built_for >> 16) & 0xFF}, not this "
                      f"{sys.version_info.major}.{sys.version_info.minor}: its Python form runs instead (the same "
                      "results, slower); run `make build` to build it", CPartWarning, stacklevel=2)
        return None
    make = lib.cosim_engine_module
    make.argtypes, make.restype = [], ctypes.py_object
    try:
        return make()
    except Exception as exc:  # noqa: BLE001 — its init failed (an object it needs is missing): the Python forms run
        _C_PARTS[_c_part_name(path)].update(used=False, status="not loadable")
        warnings.warn(f"{path} could not make its module ({type(exc).__name__}: {exc}): its Python form runs instead "
                      "(the same results, slower); run `make build` to build it again", CPartWarning, stacklevel=2)
        return None


def library_agrees(lib: ctypes.CDLL | None, agrees: bool, status: str = "disagrees") -> ctypes.CDLL | None:
    """``lib`` when the adapter's own check found its numbers to be the Python/numpy form's on this machine
    (``agrees``), else None, recorded for :func:`c_parts` with ``status`` (``disagrees``, or what else the
    adapter found missing, e.g. ``no numpy ddot``: the Python/numpy form runs; no warning, as no build mends it)."""
    if lib is None:
        return None
    if not agrees:
        _C_PARTS[_c_part_name(Path(lib._name))].update(used=False, status=status)
    return lib if agrees else None


def note_acceleration(name: str, on: bool, detail: str = "") -> bool:
    """Record whether a faster path that is not a C part (a solver's kept analysis) is on in this process,
    for the ``metadata.json`` of every run it makes (:func:`accelerations`); returns ``on``. A path one run's
    simulator takes or not is that run's alone: :meth:`CosimSim.accelerations` says it."""
    _ACCELERATIONS[name] = {"on": bool(on), "detail": detail}
    return bool(on)


def c_parts() -> dict[str, dict[str, Any]]:
    """Every C part this process tried to load, by name (``grid/_kernels.so``): ``used`` (True: its calls run),
    ``status`` (``used``, ``not built``, ``stale``, ``no source``, ``not loadable``, ``disagrees``), the SHA-256
    of its source now and the one it was built from."""
    return {name: dict(entry) for name, entry in sorted(_C_PARTS.items())}


def said_accelerations(sims: Any) -> list[tuple[str, dict[str, dict[str, Any]]]]:
    """``[(sid, {name: {"on", "detail"}}), ...]``: what each of ``(sid, simulator object)`` says of its own
    faster paths (:meth:`CosimSim.accelerations`); one without the method (a plain mosaik simulator) says
    nothing. An ``accelerations()`` that raises must not fail a run that went well: it warns, and its entry
    says so."""
    said = []
    for sid, sim in sims:
        method = getattr(sim, "accelerations", None)
        if not callable(method):
            continue
        try:
            entries = {str(name): {"on": bool(entry["on"]), "detail": str(entry.get("detail", ""))}
                       for name, entry in method().items()}
        except Exception as exc:  # noqa: BLE001 — metadata of a run that went well
            warnings.warn(f"simulator {sid!r}: accelerations() raised {type(exc).__name__}: {exc}; "
                          "metadata.json says so instead", RuntimeWarning, stacklevel=2)
            entries = {f"{sid}.accelerations": {"on": False, "detail": f"{type(exc).__name__}: {exc}"}}
        said.append((sid, entries))
    return said


def run_accelerations(said: list[tuple[str, dict[str, dict[str, Any]]]]) -> dict[str, dict[str, Any]]:
    """A run's accelerations by name from what its simulators said (:func:`said_accelerations`): a name
    several say (two feeders) is on only where all are, its detail each one's, by sid."""
    by_name: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for sid, entries in said:
        for name, entry in entries.items():
            by_name.setdefault(name, []).append((sid, entry))
    found: dict[str, dict[str, Any]] = {}
    for name, by_sim in sorted(by_name.items()):
        if len(by_sim) == 1:
            found[name] = dict(by_sim[0][1])
        else:
            found[name] = {"on": all(entry["on"] for _, entry in by_sim),
                           "detail": "; ".join(f"{sid}: {entry['detail']}" for sid, entry in by_sim)}
    return found


def accelerations() -> dict[str, dict[str, Any]]:
    """The faster paths other than C parts recorded in this process (:func:`note_acceleration`), by name:
    ``on`` and a ``detail``."""
    return {name: dict(entry) for name, entry in sorted(_ACCELERATIONS.items())}


#: the direct engine's bookkeeping in C, or None (:func:`_engine_c`)
ENGINE_C = _engine_c()
#: ``CosimSim._data_of(sim, plan)``: its C form when built
_data_of = ENGINE_C.data_of if ENGINE_C is not None else CosimSim._data_of
