"""The typed sections of a scenario file and the validated :class:`Scenario` they make."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    field_validator,
    model_validator,
)

from cosim.roles import ROLES, RunRoles
from cosim.sdk import ScenarioContext, as_tuple, ticks_per_s, to_ticks

#: Keys of ``[sims.<id>]`` that belong to cosim, not to the adapter.
SIM_KEYS = ("adapter", "step_s", "cmd", "connect", "process")
#: Keys of ``[entities.<id>]`` that belong to cosim, not to the model: ``role`` gives the
#: entity another role than its model's, ``roles`` a role per output column.
ENTITY_KEYS = ("sim", "model", "role", "roles")
SECTIONS = ("scenario", "sims", "entities", "connect", "record", "kpis")
#: Sim ids the engines use for their own simulators start with this (the recorder is ``_recorder``
#: on both): a scenario's may not.
RESERVED_SIM_PREFIX = "_"
#: Tables the core accepts without interpreting them: ``[agent]`` and ``[agents.<name>]`` are read
#: (and validated) by :mod:`cosim.gym`, ``[reproduce]`` by ``cosim reproduce``; a plain run ignores them.
FOREIGN_SECTIONS = ("agent", "agents", "reproduce")


class _Strict(BaseModel):
    # numbers are numbers and finite: a quoted "3600", a `true` for a seed, inf are refused
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)


#: Dates a run may cover (the data, pandas and the time zone database all handle these). [UTC]
FIRST_START = datetime(1900, 1, 1, tzinfo=timezone.utc)
LAST_END = datetime(2200, 1, 1, tzinfo=timezone.utc)
#: The longest run: 100 years of simulated time. [s]
MAX_DURATION_S = 100 * 366 * 86_400
#: The run folder is ``<name>-<UTC stamp>``: keep the name well below the file system's 255.
MAX_NAME_CHARS = 100


class ScenarioSection(_Strict):
    """``[scenario]``: what is studied, when, at which step."""

    name: str
    description: str = ""
    start: datetime
    duration_s: int = Field(gt=0, le=MAX_DURATION_S)
    #: a step in seconds: whole (60) or, with a sub-second tick, a multiple of it (0.1) [s]
    step_s: int | float = Field(gt=0, le=MAX_DURATION_S)
    #: the time resolution: seconds of one mosaik time step, 1/n s (1.0, 0.1, 0.01, ... 0.001) [s]
    tick_s: float = 1.0
    seed: int = Field(default=0, ge=0, le=2**32 - 1)
    engine: Literal["mosaik", "direct"] = "mosaik"
    rt_factor: float | None = Field(default=None, gt=0, le=1e6)
    #: direct engine: step the simulators that take no inputs in a worker process on another
    #: core, ahead of the rest ("auto": when the machine and the run's length make it pay off)
    ahead: Literal["auto", "on", "off"] = "auto"
    #: share of non-converged grid steps above which the run is "degraded" rather than "ok" [-]
    nonconverged_max_frac: float = Field(default=0.0, ge=0, le=1)
    #: how long a simulator process may take to start (default: 30 s, more on a busy machine) [s]
    start_timeout_s: float | None = Field(default=None, gt=0, le=3600)
    #: with simulators in other processes: a run without a finished step for this long fails [s]
    stall_timeout_s: float | None = Field(default=300.0, gt=0, le=MAX_DURATION_S)

    @field_validator("name")
    @classmethod
    def _folder_safe(cls, value: str) -> str:
        if not value or not all(c.isalnum() or c in "_.-" for c in value):
            raise ValueError("use letters, digits, '_', '.' or '-' (it names the run folder), e.g. 'campus_day'")
        if len(value) > MAX_NAME_CHARS:
            raise ValueError(f"{len(value)} characters; it names the run folder: use at most {MAX_NAME_CHARS}")
        return value

    @field_validator("tick_s")
    @classmethod
    def _tick(cls, value: float) -> float:
        ticks_per_s(value)  # raises with the fix
        return value

    @field_validator("start")
    @classmethod
    def _utc(cls, value: datetime) -> datetime:
        if value.tzinfo is None:
            raise ValueError("give the start in UTC, e.g. 2024-07-15T00:00:00Z")
        value = value.astimezone(timezone.utc)
        if not FIRST_START <= value < LAST_END:
            raise ValueError(f"give a start between {FIRST_START:%Y} and {LAST_END:%Y}, e.g. 2024-07-15T00:00:00Z")
        return value

    @model_validator(mode="after")
    def _end_in_range(self) -> "ScenarioSection":
        if self.start + timedelta(seconds=self.duration_s) > LAST_END:
            raise ValueError(f"start + duration_s ends after {LAST_END:%Y-%m-%d}; shorten the run or start earlier")
        return self


class SimSpec(_Strict):
    """``[sims.<id>]``: which adapter, where it runs, its own params."""

    adapter: str
    step_s: int | float | None = Field(default=None, gt=0, le=MAX_DURATION_S)
    cmd: str | None = None
    connect: str | None = Field(default=None, pattern=r"^[^:\s]+:\d+$")
    process: str = Field(default="inline", pattern=r"^(inline|subprocess)$")
    params: dict[str, Any] = {}


def _known_role(value: str | None) -> str | None:
    if value is not None and value not in ROLES:
        raise ValueError(f"unknown role; roles: {', '.join(ROLES)}")
    return value


class EntitySpec(_Strict):
    """``[entities.<id>]``: one entity of a sim's model, with its params (and optional roles)."""

    sim: str
    model: str
    role: str | None = None
    roles: dict[str, str] = {}
    params: dict[str, Any] = {}

    @field_validator("role")
    @classmethod
    def _entity_role(cls, value: str | None) -> str | None:
        return _known_role(value)

    @field_validator("roles")
    @classmethod
    def _column_roles(cls, value: dict[str, str]) -> dict[str, str]:
        for attr, role in value.items():
            if role not in ROLES:
                raise ValueError(f"{attr} = {role!r}: unknown role; roles: {', '.join(ROLES)}")
        return value


def _no_infinity(value: Any) -> Any:
    if isinstance(value, float) and math.isinf(value):
        raise ValueError("give a finite number (or nan for 'no value yet': knobs read it as unconstrained)")
    return value


#: A delayed connection's start value: a number, a flag, or nan ("no value yet"; a knob such as
#: ``p_limit_mw`` reads NaN as unconstrained); infinities are refused.
InitialValue = Annotated[StrictBool | Annotated[float, Field(allow_inf_nan=True)], AfterValidator(_no_infinity)]


class ConnectSpec(_Strict):
    """``[[connect]]``: attributes from ``src`` to ``dst``; feedback edges are delayed."""

    src: str
    dst: str
    attrs: list[str | Annotated[tuple[str, str], BeforeValidator(as_tuple)]] = Field(min_length=1)
    time_shifted: bool = False
    weak: bool = False
    initial_data: dict[str, InitialValue] = {}

    def pairs(self) -> list[tuple[str, str]]:
        return [(a, a) if isinstance(a, str) else (a[0], a[1]) for a in self.attrs]


class RecordSpec(_Strict):
    """``[record]``: which outputs go to ``timeseries.parquet`` (glob patterns on ``entity.attr``).

    Without ``include`` a run records every output except the ones an adapter marks as detail
    (one per bus, line, transformer, phase or device of a network), and of those the ones a KPI
    reads (``cosim/scenario/record.py``); ``include = ["*"]`` records everything.
    """

    include: list[str] | None = None
    exclude: list[str] = []
    step_s: int | float | None = Field(default=None, gt=0, le=MAX_DURATION_S)
    chunk_rows: int = Field(default=1440, gt=0, le=10_000_000)
    #: write what is buffered (a crash-safe segment of its own) at least this often: a killed run
    #: loses at most about twice this much wall time of recording (at most 2 s: within 5 s always) [s]
    flush_s: float = Field(default=1.0, ge=0.01, le=2.0)


class KpiTables(dict):
    """``[kpis]``: block name -> its validated parameters, the block's own model (``Block.params`` of
    ``cosim/kpis/<block>.py``; defaults for a block the scenario gives no table). ``scn.kpis.swing``
    reads like ``scn.kpis["swing"]``."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(f"no KPI block with parameters named {name!r}") from None


@dataclass
class Scenario:
    """A validated scenario, ready for an engine."""

    file: Path
    base_dir: Path
    scenario: ScenarioSection
    sims: dict[str, SimSpec]
    entities: dict[str, EntitySpec]
    connect: list[ConnectSpec]
    record: RecordSpec
    raw: dict[str, Any]
    #: validated params per sim / entity, JSON-ready (paths absolute)
    sim_params: dict[str, dict[str, Any]] = field(default_factory=dict)
    entity_params: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: META per sim (from the adapter, for these params)
    metas: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: validated sim params as the adapter's own pydantic models
    sim_models: dict[str, BaseModel] = field(default_factory=dict)
    #: ``--set``/sweep overrides applied on top of the file (dotted keys)
    overrides: dict[str, Any] = field(default_factory=dict)
    #: inputs that exist only for one entity (``CosimSim.entity_inputs``)
    entity_extra_inputs: dict[str, list[str]] = field(default_factory=dict)
    #: things that run but deserve a word (printed by the CLI, kept in metadata.json)
    warnings: list[str] = field(default_factory=list)
    #: ``[kpis]``: KPI block parameters, checked by each block (cosim/kpis/<block>.py)
    kpis: KpiTables = field(default_factory=KpiTables)

    @property
    def context(self) -> ScenarioContext:
        s = self.scenario
        return ScenarioContext(s.start, s.duration_s, s.step_s, s.seed, s.tick_s)

    def sim_step_s(self, sim_id: str) -> int | float:
        return self.sims[sim_id].step_s or self.scenario.step_s

    @property
    def ticks_per_s(self) -> int:
        """mosaik time steps in one second (1 / ``tick_s``). [1/s]"""
        return ticks_per_s(self.scenario.tick_s)

    def ticks(self, seconds: float) -> int:
        """``seconds`` in whole mosaik time steps (validation made every step a whole number). [-]"""
        return to_ticks(seconds, self.ticks_per_s)

    @property
    def until_ticks(self) -> int:
        """The run's end in mosaik time steps (nothing steps at it). [-]"""
        return self.ticks(self.scenario.duration_s)

    @property
    def n_record_steps(self) -> int:
        """Rows a complete run records. [-]"""
        return self.until_ticks // self.ticks(self.record_step_s)

    @property
    def engine(self) -> str:
        return self.scenario.engine

    @property
    def record_step_s(self) -> int | float:
        """The recorder's step: ``[record] step_s`` or the scenario's."""
        return self.record.step_s or self.scenario.step_s

    def model_meta(self, entity_id: str) -> dict[str, Any]:
        entity = self.entities[entity_id]
        return self.metas[entity.sim]["models"][entity.model]

    def outputs(self, entity_id: str) -> list[str]:
        meta = self.model_meta(entity_id)
        return list(meta.get("outputs", meta.get("attrs", [])))

    def inputs(self, entity_id: str) -> list[str]:
        """Inputs another simulator (or a Session) may set on the entity."""
        meta = self.model_meta(entity_id)
        return [*meta.get("inputs", meta.get("attrs", [])), *self.entity_extra_inputs.get(entity_id, [])]

    def role(self, entity_id: str) -> str:
        """The entity's role: its own ``role`` key, else its model's."""
        return self.entities[entity_id].role or self.model_meta(entity_id).get("role") or "other"

    def roles(self) -> RunRoles:
        """Every entity's role and the columns given roles of their own."""
        columns = {f"{eid}.{attr}": role for eid, spec in self.entities.items() for attr, role in spec.roles.items()}
        return RunRoles({eid: self.role(eid) for eid in self.entities}, columns)

    def links(self) -> dict[str, set[str]]:
        """entity -> the entities it feeds through connections."""
        out: dict[str, set[str]] = {}
        for conn in self.connect:
            out.setdefault(conn.src, set()).add(conn.dst)
        return out

    def entity_info(self) -> dict[str, dict[str, Any]]:
        """Per entity: sim, adapter, model, role and (for grid elements) bus, for ``metadata.json``."""
        info = {}
        for eid, spec in self.entities.items():
            entry = {"sim": spec.sim, "adapter": self.sims[spec.sim].adapter, "model": spec.model,
                     "role": self.role(eid)}
            bus = self.entity_params.get(eid, {}).get("bus")
            if bus is not None:
                entry["bus"] = str(bus)
            info[eid] = entry
        return info
