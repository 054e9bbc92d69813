"""FMU: runs any FMU (FMI 2.0 or 3.0; co-simulation, or model exchange through fmpy's solvers).

One simulator runs one FMU file; each entity is one instance of it, and the model name is
the FMU's ``modelName`` (``ChillerPlant``). The attributes come from the model description:
inputs and tunable parameters are mosaik inputs, outputs are mosaik outputs, and every
input or parameter may be given a start value as an entity key. FMUs stay SI inside; names
and units are mapped once, at this boundary:

* automatically, from the variable's unit: ``q_load`` [W] becomes ``q_load_mw`` [MW],
  ``t_wet`` [K] becomes ``t_wet_c`` [°C] (a ``relativeQuantity`` K becomes ``_k``),
  ``water`` [m3] stays ``water_m3``; a name that already ends with a unit suffix and has no
  unit stays as it is, and a dimensionless one gets ``_ratio``;
* or explicitly, by an ``[attrs]`` table in a sidecar file ``<fmu stem>.attrs.toml`` next to
  the FMU, overridden by ``attrs`` in the scenario: ``"T_room" = "t_room_c"`` (conversion
  from the FMU unit to the suffix) or ``"x" = { name = "x_m", scale = 0.01, offset = 0 }``
  (``scenario = fmu * scale + offset``), or ``"y" = "skip"`` to leave a variable out.

Shipped FMUs (``thermal_fmus/``) are named (``fmu = "ChillerPlant"``) and built on first use
when missing or stale; any other FMU is a path (relative to the scenario's folder).

Timing: at mosaik time ``t`` the inputs are set and the FMU advances over ``[t, t + step_s)``
(``fmi2DoStep``, or the model-exchange solver); the outputs reported at ``t`` are the
values at the end of that interval, so a quasi-steady output (plant power) matches the
inputs it was computed from.

Example ``[sims]`` entry::

    cooling = { adapter = "fmu", fmu = "ChillerPlant", step_s = 60 }
"""

from __future__ import annotations

import logging
import re
import shutil
import time as _time
import tomllib
from ctypes import byref, c_double, c_uint32
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator

from adapters._base import CosimSim, Params, ScenarioContext
from cosim.units import has_unit_suffix

LOG = logging.getLogger("cosim.fmu")
ROOT = Path(__file__).resolve().parents[1]
SHIPPED_DIR = ROOT / "thermal_fmus"

#: FMU unit -> (default suffix, {suffix: (scale, offset)}): ``scenario = si * scale + offset``.
UNIT_MAP: dict[str, tuple[str, dict[str, tuple[float, float]]]] = {
    "K": ("c", {"c": (1.0, -273.15), "k": (1.0, 0.0)}),
    "degC": ("c", {"c": (1.0, 0.0)}),
    "W": ("mw", {"mw": (1e-6, 0.0), "kw": (1e-3, 0.0), "w": (1.0, 0.0), "gw": (1e-9, 0.0)}),
    "kW": ("mw", {"mw": (1e-3, 0.0), "kw": (1.0, 0.0), "w": (1e3, 0.0)}),
    "MW": ("mw", {"mw": (1.0, 0.0), "kw": (1e3, 0.0)}),
    "J": ("mwh", {"mwh": (1 / 3.6e9, 0.0), "kwh": (1 / 3.6e6, 0.0), "wh": (1 / 3600, 0.0),
                  "j": (1.0, 0.0), "mj": (1e-6, 0.0), "gj": (1e-9, 0.0)}),
    "kg/s": ("kg_s", {"kg_s": (1.0, 0.0)}),
    "m3": ("m3", {"m3": (1.0, 0.0), "l": (1e3, 0.0)}),
    "m3/s": ("m3_s", {"m3_s": (1.0, 0.0), "l_s": (1e3, 0.0), "m3_h": (3600.0, 0.0)}),
    "kg": ("kg", {"kg": (1.0, 0.0)}),
    "s": ("s", {"s": (1.0, 0.0), "min": (1 / 60, 0.0), "h": (1 / 3600, 0.0)}),
    "Pa": ("kpa", {"kpa": (1e-3, 0.0), "pa": (1.0, 0.0), "bar": (1e-5, 0.0)}),
    "W/K": ("kw_k", {"kw_k": (1e-3, 0.0), "w_k": (1.0, 0.0)}),
    "J/K": ("mj_k", {"mj_k": (1e-6, 0.0), "j_k": (1.0, 0.0)}),
    "m": ("m", {"m": (1.0, 0.0), "km": (1e-3, 0.0)}),
    "m/s": ("m_s", {"m_s": (1.0, 0.0)}),
    "W/m2": ("w_m2", {"w_m2": (1.0, 0.0)}),
    "V": ("v", {"v": (1.0, 0.0), "kv": (1e-3, 0.0)}),
    "A": ("a", {"a": (1.0, 0.0), "ka": (1e-3, 0.0)}),
    "1": ("ratio", {"ratio": (1.0, 0.0), "frac": (1.0, 0.0), "pct": (100.0, 0.0)}),
}
_REAL = {"Real", "Float64", "Float32"}
_INT = {"Integer", "Int8", "UInt8", "Int16", "UInt16", "Int32", "UInt32", "Int64", "UInt64", "Enumeration"}
_BOOL = {"Boolean"}


class FmuError(RuntimeError):
    """An FMU that cannot be loaded, or a call into it that failed (names FMU, variable, time)."""


# -- parameters -----------------------------------------------------------------------------------
class AttrSpec(Params):
    """How one FMU variable appears in the scenario: ``scenario = fmu * scale + offset``.

    Attributes:
        name: the scenario attribute, with its unit suffix.
        scale, offset: explicit conversion; when both are left out, the conversion follows
            from the FMU unit and the suffix of ``name`` (:data:`UNIT_MAP`).
    """

    name: str
    scale: float | None = None
    offset: float | None = None


AttrMap = dict[str, str | AttrSpec]


class SimParams(Params):
    """Params of one FMU simulator (the ``[sims.<id>]`` keys besides ``adapter`` and ``step_s``).

    Attributes:
        fmu: a shipped model name (``ChillerPlant``, see ``thermal_fmus/``) or a ``.fmu`` path;
            relative paths resolve from the scenario's folder.
        attrs: FMU variable -> scenario attribute (or ``"skip"``); overrides the sidecar file.
        interface: ``auto`` prefers co-simulation when the FMU offers both; ``cs`` or ``me``
            forces one.
        solver: model-exchange integrator: ``CVode`` (variable step, fmpy's SUNDIALS) or
            ``Euler`` (fixed step of ``solver_step_s``).
        solver_step_s: Euler step, or the largest CVode step; default ``step_s / 10``. [s]
        rtol: CVode relative tolerance. [-]
        log: pass the FMU's debug log messages on (errors are always kept). [-]
    """

    fmu: str
    attrs: AttrMap = {}
    interface: Literal["auto", "cs", "me"] = "auto"
    solver: Literal["CVode", "Euler"] = "CVode"
    solver_step_s: float | None = None
    rtol: float = 1e-6
    log: bool = False

    @field_validator("fmu")
    @classmethod
    def _resolve(cls, value: str, info: ValidationInfo) -> str:
        if not is_path(value):
            return value  # a shipped model: resolved (and built) when first used
        path = Path(value).expanduser()
        base_dir = (info.context or {}).get("base_dir")
        if not path.is_absolute() and base_dir is not None:
            path = Path(base_dir) / path
        path = path.resolve()
        if not path.is_file():
            raise ValueError(f"FMU file not found: {path}")
        return str(path)


class EntityParams(BaseModel):
    """Start values of one instance: ``<scenario attribute> = value`` for any input or
    parameter, in scenario units (checked against the model description by validation)."""

    model_config = ConfigDict(extra="allow")


class _EveryModel(dict):
    """``ModelParams`` for an adapter whose model names come from the FMU it runs."""

    def get(self, key, default=None):
        return EntityParams

    def __getitem__(self, key):
        return EntityParams

    def __contains__(self, key):
        return True


# -- locating and describing an FMU -----------------------------------------------------------------
def is_path(value: str) -> bool:
    return value.lower().endswith(".fmu") or "/" in value or "\\" in value


def shipped_models() -> list[str]:
    return sorted(p.parent.name for p in SHIPPED_DIR.glob("*/modelDescription.xml"))


def fmu_file(fmu: str) -> Path:
    """The ``.fmu`` file for a path or a shipped model name (built when missing or stale)."""
    if is_path(fmu):
        return Path(fmu)
    if fmu not in shipped_models():
        raise FmuError(f"fmu = {fmu!r}: no shipped model of that name; shipped: "
                       f"{', '.join(shipped_models()) or 'none'} (or give a path ending in .fmu)")
    from thermal_fmus import build as fmu_build

    try:
        return fmu_build.build(fmu)
    except fmu_build.BuildError as exc:
        raise FmuError(f"fmu = {fmu!r}: cannot build it: {exc}") from exc


def sidecar_attrs(path: Path) -> AttrMap:
    """The ``[attrs]`` table of ``<stem>.attrs.toml`` next to the FMU (or in its source folder)."""
    candidates = [path.with_suffix(".attrs.toml")]
    if path.parent == SHIPPED_DIR / "build":
        candidates.append(SHIPPED_DIR / path.stem / "attrs.toml")
    for sidecar in candidates:
        if sidecar.is_file():
            try:
                table = tomllib.loads(sidecar.read_text()).get("attrs", {})
            except tomllib.TOMLDecodeError as exc:
                raise FmuError(f"{sidecar}: not valid TOML: {exc}") from exc
            return {k: (v if isinstance(v, str) else AttrSpec.model_validate(v)) for k, v in table.items()}
    return {}


@lru_cache(maxsize=64)
def _read_description(path: str, mtime_ns: int, size: int):
    from fmpy import read_model_description

    name = Path(path).name
    try:
        return read_model_description(path, validate=True)
    except Exception as exc:  # fmpy raises zipfile, lxml and its own errors for a broken file
        problems = getattr(exc, "problems", None)
        detail = "; ".join(problems[:5]) if problems else f"{type(exc).__name__}: {exc}"
        raise FmuError(f"{name}: cannot read the model description: {detail}") from exc


def read_description(path: Path):
    """The fmpy ``ModelDescription`` of an FMU (cached by path, size and mtime)."""
    stat = path.stat()
    return _read_description(str(path), stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=64)
def _relative_names(path: str, mtime_ns: int) -> frozenset[str]:
    """Names of variables and types declared ``relativeQuantity="true"`` (temperature
    differences). fmpy 0.3 does not read this attribute, so it is read here."""
    import xml.etree.ElementTree as ET
    import zipfile

    with zipfile.ZipFile(path) as zf:
        root = ET.fromstring(zf.read("modelDescription.xml"))
    names = set()
    for parent in root.iter():
        for child in [parent, *list(parent)]:
            if child.get("relativeQuantity") in ("true", "1"):
                names.add(child.get("name") or parent.get("name"))
    return frozenset(n for n in names if n)


@dataclass
class Port:
    """One FMU variable as a scenario attribute."""

    var: str
    attr: str
    vr: int
    kind: Literal["real", "int", "bool"]
    causality: str
    variability: str
    scale: float = 1.0
    offset: float = 0.0
    accessor: str = "Float64"  # fmpy's get<accessor>/set<accessor>: Real, Float32, Int16, Boolean, ...

    def to_fmu(self, value: float) -> float:
        return (value - self.offset) / self.scale

    def from_fmu(self, value: float) -> float:
        return value * self.scale + self.offset


@dataclass
class Interface:
    """What the scenario sees of one FMU: its model name and ports, by attribute name."""

    path: Path
    description: Any
    model: str
    kind: Literal["cs", "me"]
    ports: dict[str, Port] = field(default_factory=dict)

    @property
    def inputs(self) -> list[str]:
        return [a for a, p in self.ports.items() if p.causality == "input" or p.variability == "tunable"]

    @property
    def outputs(self) -> list[str]:
        return [a for a, p in self.ports.items() if p.causality == "output"]

    @property
    def settable(self) -> list[str]:
        return [a for a, p in self.ports.items() if p.causality in ("input", "parameter")]

    def meta(self) -> dict[str, Any]:
        inputs, outputs = self.inputs, self.outputs
        return {"public": True, "params": ["eid", *self.settable], "attrs": [*inputs, *outputs],
                "inputs": inputs, "outputs": outputs}


def _unit(var, relative_names: frozenset[str] = frozenset()) -> tuple[str | None, bool]:
    declared = getattr(var, "declaredType", None)
    unit = var.unit or (declared.unit if declared is not None else None)
    relative = var.name in relative_names or (declared is not None and declared.name in relative_names)
    return unit, relative


def _auto_name(var, kind: str, relative_names: frozenset[str]) -> tuple[str, float, float] | str:
    """``(attr, scale, offset)`` for a variable without explicit mapping, or a problem text."""
    base = re.sub(r"\W+", "_", var.name).strip("_").lower()
    unit, relative = _unit(var, relative_names)
    if kind != "real" or unit in (None, "", "1"):
        if has_unit_suffix(base):
            return base, 1.0, 0.0
        return f"{base}_ratio" if kind != "bool" else f"{base}_frac", 1.0, 0.0
    if unit not in UNIT_MAP:
        return (f"variable {var.name!r} has unit {unit!r}, which has no automatic mapping (known: "
                f"{', '.join(UNIT_MAP)}); map it in attrs: \"{var.name}\" = {{ name = \"{base}_<suffix>\", "
                "scale = ..., offset = ... } or \"skip\"")
    suffix = "k" if unit == "K" and relative else UNIT_MAP[unit][0]
    scale, offset = UNIT_MAP[unit][1][suffix]
    return f"{base}_{suffix}", scale, offset


def _explicit(var, spec: str | AttrSpec, kind: str, relative_names: frozenset[str]) -> tuple[str, float, float] | str:
    spec = AttrSpec(name=spec) if isinstance(spec, str) else spec
    if not has_unit_suffix(spec.name):
        return f"attrs.{var.name} = {spec.name!r}: the attribute needs a unit suffix (e.g. _mw, _c, _kg_s)"
    if spec.scale is not None or spec.offset is not None:
        return spec.name, spec.scale if spec.scale is not None else 1.0, spec.offset or 0.0
    unit, relative = _unit(var, relative_names)
    if kind != "real" or unit in (None, "", "1"):
        return spec.name, 1.0, 0.0
    table = UNIT_MAP.get(unit, ("", {}))[1]
    for suffix in sorted(table, key=len, reverse=True):
        if spec.name.endswith("_" + suffix):
            scale, offset = table[suffix]
            return spec.name, scale, 0.0 if relative else offset
    return (f"attrs.{var.name} = {spec.name!r}: no conversion from the FMU unit {unit!r} to this "
            f"suffix; use one of {', '.join('_' + s for s in table) or 'none'} or give scale and offset")


def _accessor(var_type: str, fmi_version: str) -> str:
    """The fmpy getter/setter suffix for a variable type (``getReal``, ``getInt16``, ...)."""
    if var_type == "Enumeration":
        return "Integer" if fmi_version.startswith("2") else "Int64"
    return var_type


def describe(fmu: str, attrs: AttrMap | None = None, interface: str = "auto") -> Interface:
    """Read an FMU's model description and map its variables to scenario attributes.

    Raises:
        FmuError: unreadable FMU, invalid model description, unsupported interface or FMI
            version, or variables that cannot be named (all problems in one message).
    """
    path = fmu_file(fmu)
    md = read_description(path)
    if not md.fmiVersion or md.fmiVersion.split(".")[0] not in ("2", "3"):
        raise FmuError(f"{path.name}: FMI {md.fmiVersion} is not supported; export FMI 2.0 or 3.0")
    offered = [k for k, part in (("cs", md.coSimulation), ("me", md.modelExchange)) if part is not None]
    kind = offered[0] if interface == "auto" and offered else interface
    if kind not in offered:
        raise FmuError(f"{path.name}: interface = {interface!r} but the FMU offers "
                       f"{', '.join(offered) or 'neither co-simulation nor model exchange'}")
    mapping = {**sidecar_attrs(path), **(attrs or {})}
    relative = _relative_names(str(path), path.stat().st_mtime_ns)
    unknown = sorted(set(mapping) - {v.name for v in md.modelVariables})
    problems = [f"attrs.{name}: the FMU has no variable of that name" for name in unknown]
    model = re.sub(r"\W", "_", md.modelName or path.stem)
    result = Interface(path, md, model, kind)
    for var in md.modelVariables:
        if var.causality not in ("input", "output", "parameter") or mapping.get(var.name) == "skip":
            continue
        kind_of = "real" if var.type in _REAL else "int" if var.type in _INT else "bool" if var.type in _BOOL else None
        if kind_of is None or getattr(var, "dimensions", None):
            continue  # strings, binaries, clocks and arrays have no scalar attribute
        named = (_explicit(var, mapping[var.name], kind_of, relative) if var.name in mapping
                 else _auto_name(var, kind_of, relative))
        if isinstance(named, str):
            problems.append(named)
            continue
        attr, scale, offset = named
        if attr in result.ports:
            problems.append(f"variables {result.ports[attr].var!r} and {var.name!r} both map to {attr!r}; rename one in attrs")
            continue
        result.ports[attr] = Port(var.name, attr, var.valueReference, kind_of, var.causality,
                                  var.variability or "continuous", scale, offset, _accessor(var.type, md.fmiVersion))
    if problems:
        raise FmuError(f"{path.name}: " + "; ".join(problems))
    return result


def binary_problems(iface: Interface) -> list[str]:
    """Whether the FMU holds a shared library for this platform (empty list when it does)."""
    import zipfile

    import fmpy

    md = iface.description
    part = md.coSimulation if iface.kind == "cs" else md.modelExchange
    folder = fmpy.platform if md.fmiVersion.startswith("2") else fmpy.platform_tuple
    wanted = f"binaries/{folder}/{part.modelIdentifier}{fmpy.sharedLibraryExtension}"
    with zipfile.ZipFile(iface.path) as zf:
        names = zf.namelist()
    if wanted in names:
        return []
    present = sorted({n.split("/")[1] for n in names if n.startswith("binaries/") and n.count("/") >= 2})
    hint = "; it ships sources/: compile them with fmpy.util.compile_platform_binary" if any(
        n.startswith("sources/") for n in names) else ""
    return [f"{iface.path.name}: no binary for this platform ({wanted}); it has binaries for "
            f"{', '.join(present) or 'no platform'}{hint}"]


# -- running one instance ------------------------------------------------------------------------------
class FmuInstance:
    """One running FMU instance (no mosaik): set inputs, step, read outputs, in scenario units.

    Args:
        iface: the FMU as :func:`describe` maps it.
        unzipdir: the FMU extracted (shared by the instances of one simulator).
        name: instance name (the entity id), used in messages.
        start_values: ``{attr: value}`` for inputs and parameters. [scenario units]
        start_s, step_s: simulation start and communication step. [s]
        solver, solver_step_s, rtol: model-exchange integration (see :class:`SimParams`).
        log: ask the FMU for debug messages.
    """

    def __init__(self, iface: Interface, unzipdir: str, name: str, start_values: dict[str, Any],
                 start_s: float = 0.0, step_s: float = 60.0, solver: str = "CVode",
                 solver_step_s: float | None = None, rtol: float = 1e-6, log: bool = False):
        self.iface = iface
        self.name = name
        self.label = f"{iface.path.name} ({name})"
        self.messages: list[str] = []
        self.fmu_time_s = 0.0  # wall time spent inside FMU calls [s]
        self.n_steps = 0
        self.time_s = start_s
        self.fmi3 = iface.description.fmiVersion.startswith("3")
        self.solver_name = solver
        self.solver_step_s = solver_step_s or step_s / 10
        self.rtol = rtol
        self.log = log
        bad = sorted(set(start_values) - set(iface.settable))
        if bad:
            raise FmuError(f"{self.label}: no input or parameter {', '.join(bad)}; settable: {', '.join(iface.settable)}")
        outputs = [iface.ports[a] for a in iface.outputs]
        fast = "Float64" if self.fmi3 else "Real"  # read with one preallocated call per step
        self._out_real = [p for p in outputs if p.accessor == fast]
        self._out_other = [p for p in outputs if p.accessor != fast]
        self._out_vr = (c_uint32 * len(self._out_real))(*[p.vr for p in self._out_real])
        self._out_buf = (c_double * len(self._out_real))()
        self._call("instantiate", lambda: self._instantiate(unzipdir, log))
        self._initialize(start_values, start_s)

    # -- errors -----------------------------------------------------------------------------------
    def _logger(self, status: int, category, message) -> None:
        text = message.decode("utf-8", "replace") if isinstance(message, bytes) else str(message)
        self.messages.append(text)
        del self.messages[:-20]  # the last few explain a failure; older ones are history
        if self.log:
            LOG.info("%s: %s", self.label, text)

    def _call(self, what: str, fn, variable: str | None = None):
        start = _time.perf_counter()
        try:
            return fn()
        except FmuError:
            raise
        except Exception as exc:  # fmpy raises FMICallException, OSError, ctypes errors
            said = f"; the FMU said: {' | '.join(self.messages[-3:])}" if self.messages else ""
            var = f", variable {variable!r}" if variable else ""
            raise FmuError(f"{self.label} at t = {self.time_s:g} s{var}: {what} failed: {exc}{said}") from exc
        finally:
            self.fmu_time_s += _time.perf_counter() - start

    # -- lifecycle ----------------------------------------------------------------------------------
    def _instantiate(self, unzipdir: str, log: bool) -> None:
        from fmpy import fmi2, fmi3

        md = self.iface.description
        part = md.coSimulation if self.iface.kind == "cs" else md.modelExchange
        common = dict(unzipDirectory=unzipdir, modelIdentifier=part.modelIdentifier, instanceName=self.name)
        if self.fmi3:
            cls = fmi3.FMU3Slave if self.iface.kind == "cs" else fmi3.FMU3Model
            self.fmu = cls(guid=md.instantiationToken, **common)
            self._log_cb = lambda env, status, category, message: self._logger(status, category, message)
            self.fmu.instantiate(loggingOn=log, logMessage=self._log_cb)
            return
        cls = fmi2.FMU2Slave if self.iface.kind == "cs" else fmi2.FMU2Model
        self.fmu = cls(guid=md.guid, **common)
        self._callbacks = _fmi2_callbacks(self._logger)
        self.fmu.instantiate(callbacks=self._callbacks, loggingOn=log)

    def _initialize(self, start_values: dict[str, Any], start_s: float) -> None:
        ports = self.iface.ports
        values = [(ports[a], v) for a, v in start_values.items()]
        if not self.fmi3:
            self._call("fmi2SetupExperiment", lambda: self.fmu.setupExperiment(startTime=start_s))
        self._set(values, "setting start values")
        if self.fmi3:
            self._call("fmi3EnterInitializationMode", lambda: self.fmu.enterInitializationMode(startTime=start_s))
        else:
            self._call("fmi2EnterInitializationMode", self.fmu.enterInitializationMode)
        self._call("ExitInitializationMode", self.fmu.exitInitializationMode)
        if self.iface.kind == "me":
            self._start_continuous_time(start_s)

    def close(self) -> None:
        """Terminate and free the instance (errors here are ignored: the run is over)."""
        fmu, self.fmu = getattr(self, "fmu", None), None
        if fmu is None:
            return
        for step in (fmu.terminate, fmu.freeInstance):
            try:
                step()
            except Exception:  # an FMU in an error state may refuse to terminate
                pass

    # -- values -------------------------------------------------------------------------------------
    def _set(self, values: list[tuple[Port, Any]], what: str) -> None:
        for port, value in values:
            try:
                number = float(value)
            except (TypeError, ValueError):
                raise FmuError(f"{self.label} at t = {self.time_s:g} s, variable {port.var!r} "
                               f"({port.attr} = {value!r}): {what}: not a number") from None
            if number != number or number in (float("inf"), float("-inf")):
                raise FmuError(f"{self.label} at t = {self.time_s:g} s, variable {port.var!r} "
                               f"({port.attr} = {value!r}): {what}: not finite")
            si = port.to_fmu(number)
            self._call(f"{what} ({port.attr} = {number:g})", lambda: self._set_one(port, si), port.var)

    def _set_one(self, port: Port, si: float) -> None:
        value = si if port.kind == "real" else int(round(si)) if port.kind == "int" else bool(si)
        getattr(self.fmu, "set" + port.accessor)([port.vr], [value])

    def set_inputs(self, values: dict[str, Any]) -> None:
        """Set inputs and tunable parameters. [scenario units]"""
        ports = self.iface.ports
        self._set([(ports[a], v) for a, v in values.items() if a in ports], "setting an input")

    def outputs(self) -> dict[str, Any]:
        """Every output. [scenario units]"""
        out: dict[str, Any] = {}
        if self._out_real:
            self._call("getting outputs", self._read_reals)
            for port, value in zip(self._out_real, self._out_buf):
                out[port.attr] = port.from_fmu(value)
        for port in self._out_other:
            getter = getattr(self.fmu, "get" + port.accessor)
            out[port.attr] = port.from_fmu(self._call("getting outputs", lambda: getter([port.vr])[0], port.var))
        return out

    def _read_reals(self) -> None:
        n = len(self._out_real)
        if self.fmi3:
            self.fmu.fmi3GetFloat64(self.fmu.component, self._out_vr, n, self._out_buf, n)
        else:
            self.fmu.fmi2GetReal(self.fmu.component, self._out_vr, n, self._out_buf)

    # -- time -----------------------------------------------------------------------------------------
    def step(self, time_s: float, step_s: float) -> None:
        """Advance from ``time_s`` over ``step_s`` with the inputs as set. [s]"""
        self.time_s = time_s
        if self.iface.kind == "cs":
            self._call("doStep", lambda: self._do_step(time_s, step_s))
        else:
            self._call("model-exchange step", lambda: self._integrate(time_s + step_s))
        self.time_s = time_s + step_s
        self.n_steps += 1

    def _do_step(self, time_s: float, step_s: float) -> None:
        if self.fmi3:
            event, terminate, early, last = self.fmu.doStep(time_s, step_s)
            if terminate:
                raise FmuError(f"{self.label} at t = {time_s:g} s: the FMU asked to terminate the simulation")
        else:
            self.fmu.doStep(currentCommunicationPoint=time_s, communicationStepSize=step_s)

    def _start_continuous_time(self, time_s: float) -> None:
        from fmpy.simulation import ForwardEuler

        self._event_update()
        self._call("EnterContinuousTimeMode", self.fmu.enterContinuousTimeMode)
        md = self.iface.description
        nx, nz = md.numberOfContinuousStates, md.numberOfEventIndicators
        args = dict(nx=nx, nz=nz, get_x=self.fmu.getContinuousStates, set_x=self.fmu.setContinuousStates,
                    get_dx=self.fmu.getContinuousStateDerivatives if self.fmi3 else self.fmu.getDerivatives,
                    get_z=self.fmu.getEventIndicators, input=_NoInput())
        if self.solver_name == "Euler" or nx == 0:
            self.solver = ForwardEuler(**args)
        else:
            from fmpy.sundials import CVodeSolver

            self.solver = CVodeSolver(get_nominals=self.fmu.getNominalsOfContinuousStates, set_time=self.fmu.setTime,
                                      startTime=time_s, maxStep=self.solver_step_s, relativeTolerance=self.rtol, **args)

    def _event_update(self) -> None:
        update = self.fmu.updateDiscreteStates if self.fmi3 else self.fmu.newDiscreteStates
        self.next_event_s = None
        for _ in range(100):
            needed, terminate, _nominals, _values, defined, next_time = update()
            if terminate:
                raise FmuError(f"{self.label} at t = {self.time_s:g} s: the FMU asked to terminate the simulation")
            self.next_event_s = next_time if defined else None
            if not needed:
                return
        raise FmuError(f"{self.label} at t = {self.time_s:g} s: event iteration did not converge in 100 rounds")

    def _integrate(self, end_s: float) -> None:
        fixed = self.solver_name == "Euler" or self.iface.description.numberOfContinuousStates == 0
        time_s = self.time_s
        self.fmu.setTime(time_s)
        if not fixed:  # inputs may have jumped since the last step: restart the multistep history
            self.solver.reset(time_s)
        while time_s < end_s - 1e-9:
            target = min(end_s, time_s + self.solver_step_s) if fixed else end_s
            if self.next_event_s is not None and time_s < self.next_event_s < target:
                target = self.next_event_s
            state_event, _roots, time_s = self.solver.step(time_s, target)
            self.fmu.setTime(time_s)
            completed = self.fmu.completedIntegratorStep()
            step_event = completed[0]
            time_event = self.next_event_s is not None and abs(time_s - self.next_event_s) < 1e-9
            if state_event or step_event or time_event:
                self.fmu.enterEventMode()
                self._event_update()
                self.fmu.enterContinuousTimeMode()
                self.solver.reset(time_s)


class _NoInput:
    """fmpy's solvers call ``input.apply``; inputs are held over a mosaik step, so it does nothing."""

    def apply(self, *args, **kwargs) -> None:
        return None


def _fmi2_callbacks(logger):
    from fmpy import calloc, free
    from fmpy.fmi2 import (fmi2CallbackAllocateMemoryTYPE, fmi2CallbackFreeMemoryTYPE, fmi2CallbackFunctions,
                           fmi2CallbackLoggerTYPE)

    callbacks = fmi2CallbackFunctions()
    callbacks.logger = fmi2CallbackLoggerTYPE(lambda env, name, status, category, message: logger(status, category, message))
    callbacks.allocateMemory = fmi2CallbackAllocateMemoryTYPE(calloc)
    callbacks.freeMemory = fmi2CallbackFreeMemoryTYPE(free)
    try:  # fmpy's native proxy formats printf-style messages before they reach Python
        from fmpy.logging import addLoggerProxy

        addLoggerProxy(byref(callbacks))
    except Exception:
        pass
    return callbacks


# -- mosaik adapter ---------------------------------------------------------------------------------------
class FmuSim(CosimSim):
    """Instances of one FMU as mosaik entities (model name = the FMU's ``modelName``)."""

    META = {"api_version": "3.0", "type": "time-based", "models": {}}
    SimParams = SimParams
    ModelParams = _EveryModel()
    EXAMPLE = {
        "sim": {"fmu": "ChillerPlant"},
        "models": {"ChillerPlant": {"q_chiller_ref_mw": 1.4, "t_chw_supply_setpoint_c": 12.0}},
    }

    @classmethod
    def interface(cls, sim_params: SimParams) -> Interface:
        try:
            return describe(sim_params.fmu, sim_params.attrs, sim_params.interface)
        except FmuError as exc:
            raise ValueError(str(exc)) from exc

    @classmethod
    def check(cls, sim_params: SimParams, ctx: ScenarioContext | None) -> list[str]:
        """Problems found before anything starts: a binary for this platform must be inside."""
        try:
            return binary_problems(describe(sim_params.fmu, sim_params.attrs, sim_params.interface))
        except FmuError as exc:
            return [str(exc)]

    @classmethod
    def meta_for(cls, sim_params: SimParams) -> dict[str, Any]:
        iface = cls.interface(sim_params)
        return {**cls.META, "models": {iface.model: iface.meta()}}

    @classmethod
    def check_entity(cls, model: str, params: BaseModel | None, ctx: ScenarioContext,
                     sim_params: BaseModel | None = None) -> list[str]:
        """Every entity key must be an input or parameter of the FMU, with a numeric value."""
        if sim_params is None or params is None:
            return []
        iface = cls.interface(sim_params)
        problems = []
        for key, value in (params.model_extra or {}).items():
            if key not in iface.settable:
                problems.append(f"{key}: {iface.path.name} has no input or parameter of that name; "
                                f"settable: {', '.join(iface.settable)}")
            elif isinstance(value, bool) or not isinstance(value, (int, float)):
                problems.append(f"{key} = {value!r}: give a number (in the unit of the suffix)")
        return problems

    def setup(self) -> None:
        from fmpy import extract

        self.iface = self.interface(self.params)
        self.instances: dict[str, FmuInstance] = {}
        try:
            self.unzipdir = extract(str(self.iface.path))
        except Exception as exc:
            raise FmuError(f"{self.iface.path.name}: cannot extract the FMU: {exc}") from exc

    def create_entity(self, eid: str, model: str, params: BaseModel | None) -> None:
        if model != self.iface.model:
            raise ValueError(f"unknown model {model!r}; this FMU's model is {self.iface.model}")
        p = self.params
        self.instances[eid] = FmuInstance(self.iface, self.unzipdir, eid, dict(params.model_extra or {}),
                                          step_s=self.step_s, solver=p.solver, solver_step_s=p.solver_step_s,
                                          rtol=p.rtol, log=p.log)

    def step_entities(self, time_s: int, inputs: dict[str, dict[str, Any]]) -> None:
        for eid, inst in self.instances.items():
            inst.set_inputs(inputs.get(eid, {}))
            inst.step(float(time_s), float(self.step_s))
            self.out[eid] = inst.outputs()

    def finalize(self) -> None:
        for inst in getattr(self, "instances", {}).values():
            inst.close()
        unzipdir = getattr(self, "unzipdir", None)
        if unzipdir:
            shutil.rmtree(unzipdir, ignore_errors=True)
