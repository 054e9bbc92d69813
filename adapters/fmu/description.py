"""Locating an FMU and describing it for cosim: variables, their scenario names and unit
conversions (the naming rules are in the docstring of ``adapters/fmu/sim.py``)."""

from __future__ import annotations

import logging
import math
import re
import tomllib
import xml.etree.ElementTree as ET
import zipfile
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import field_validator

from cosim import thermal_fmus
from cosim.thermal_fmus import build as fmu_build

from cosim.adapters.fmu.archive import archive_problem

from cosim.sdk import EndRun, Params, has_unit_suffix, unit_of

LOG = logging.getLogger("cosim.fmu")
SHIPPED_DIR = Path(thermal_fmus.__file__).resolve().parent

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
    "%": ("pct", {"pct": (1.0, 0.0), "frac": (0.01, 0.0), "ratio": (0.01, 0.0)}),
    "1/s": ("per_s", {"per_s": (1.0, 0.0)}),
    "Hz": ("hz", {"hz": (1.0, 0.0)}),
    "N": ("kn", {"kn": (1e-3, 0.0), "n": (1.0, 0.0)}),
    "rad": ("rad", {"rad": (1.0, 0.0)}),
    "deg": ("deg", {"deg": (1.0, 0.0)}),
    "kWh": ("mwh", {"mwh": (1e-3, 0.0), "kwh": (1.0, 0.0)}),
    "MWh": ("mwh", {"mwh": (1.0, 0.0), "kwh": (1e3, 0.0)}),
    "bar": ("kpa", {"kpa": (100.0, 0.0), "bar": (1.0, 0.0), "pa": (1e5, 0.0)}),
    "kPa": ("kpa", {"kpa": (1.0, 0.0), "pa": (1e3, 0.0), "bar": (0.01, 0.0)}),
    "h": ("h", {"h": (1.0, 0.0), "s": (3600.0, 0.0), "min": (60.0, 0.0)}),
    "kg/h": ("kg_s", {"kg_s": (1 / 3600, 0.0)}),
    "l/s": ("l_s", {"l_s": (1.0, 0.0), "m3_s": (1e-3, 0.0)}),
}
#: Any other unit keeps its SI value under a suffix derived from the unit string
#: (:func:`derived_suffix`: ``m/s2`` -> ``_m_s2``), when ``cosim.units`` accepts it as one.
_REAL = {"Real", "Float64", "Float32"}
_INT = {"Integer", "Int8", "UInt8", "Int16", "UInt16", "Int32", "UInt32", "Int64", "UInt64", "Enumeration"}
_BOOL = {"Boolean"}


class FmuError(RuntimeError):
    """An FMU that cannot be loaded, or a call into it that failed (names FMU, variable, time)."""


class FmuEnded(EndRun):
    """The FMU ended the simulation itself: it asked to terminate, or discarded a step. The
    run ends cleanly (status ``ok``) with this message, naming FMU and time, as its reason."""


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

    @field_validator("scale")
    @classmethod
    def _invertible(cls, value: float | None) -> float | None:
        if value == 0:
            raise ValueError("scale = 0 cannot be inverted for inputs; give the factor from FMU to scenario units")
        return value


AttrMap = dict[str, str | AttrSpec]


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
    from fmpy import read_model_description  # fmpy loads ctypes and lxml: only when an FMU is looked at

    name = Path(path).name
    too_big = archive_problem(Path(path))  # sizes, names, DTD: before anything is parsed
    if too_big:
        raise FmuError(f"{name}: {too_big}")
    not_fmu = _not_an_fmu(Path(path))
    if not_fmu:
        raise FmuError(f"{name}: {not_fmu}")
    try:
        return read_model_description(path, validate=True)
    except Exception as exc:  # fmpy raises zipfile, lxml and its own errors for a broken file
        problems = getattr(exc, "problems", None)
        detail = "; ".join(problems[:5]) if problems else f"{type(exc).__name__}: {exc}"
        raise FmuError(f"{name}: cannot read the model description: {detail}") from exc


#: What an FMU is, for messages about a file that is not one.
FMU_FIX = ("export it again from the modelling tool as an FMI 2.0 or 3.0 FMU (a zip archive with "
           "modelDescription.xml at its top level)")


def _not_an_fmu(path: Path) -> str:
    """Why ``path`` is not an FMU cosim can read (not a zip, no model description, an FMI version
    other than 2 or 3), before fmpy's schema check names it in its own terms; ``""`` otherwise."""
    if not zipfile.is_zipfile(path):
        return f"cannot read the model description: not a zip archive (not an FMU, or a truncated one); {FMU_FIX}"
    try:
        with zipfile.ZipFile(path) as zf:
            if "modelDescription.xml" not in zf.namelist():
                return f"cannot read the model description: the zip archive has none (not an FMU); {FMU_FIX}"
            root = ET.fromstring(zf.read("modelDescription.xml"))
    except (zipfile.BadZipFile, ET.ParseError, OSError):
        return ""  # fmpy's reader names what is broken
    version = root.get("fmiVersion", "")
    if version.split(".")[0] not in ("2", "3"):
        return f"fmiVersion = {version!r}: cosim runs FMI 2.0 and 3.0 FMUs; {FMU_FIX}"
    return ""


def read_description(path: Path):
    """The fmpy ``ModelDescription`` of an FMU (cached by path, size and mtime)."""
    stat = path.stat()
    return _read_description(str(path), stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=64)
def _relative_names(path: str, mtime_ns: int) -> frozenset[str]:
    """Names of variables and types declared ``relativeQuantity="true"`` (temperature
    differences). fmpy 0.3 does not read this attribute, so it is read here."""
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
    """One FMU variable (or one element of an FMI 3.0 array variable) as a scenario attribute."""

    var: str
    attr: str
    vr: int
    kind: Literal["real", "int", "bool"]
    causality: str
    variability: str
    scale: float = 1.0
    offset: float = 0.0
    accessor: str = "Float64"  # fmpy's get<accessor>/set<accessor>: Real, Float32, Int16, Boolean, ...
    index: int = 0  # position in the flattened array (row-major); 0 for a scalar
    size: int = 1  # elements of the variable: 1 for a scalar
    start: float = 0.0  # the model description's start value, an array's element before it is set [FMU unit]
    low: float | None = None  # the model description's min and max, where it gives them [FMU unit]
    high: float | None = None

    @property
    def continuous_input(self) -> bool:
        """A Real input that model exchange may set in continuous-time mode (FMI 2.0 3.2.3, 3.0 3.2.1);
        every other settable variable waits for event mode."""
        return self.kind == "real" and self.causality == "input" and self.variability == "continuous"

    def to_fmu(self, value: float) -> float:
        return (value - self.offset) / self.scale

    def from_fmu(self, value: float) -> float:
        return value * self.scale + self.offset

    def bounds(self) -> tuple[float | None, float | None]:
        """The model description's min and max in scenario units (None where it gives none). [attr unit]"""
        ends = [None if v is None else float(f"{self.from_fmu(v):.12g}") for v in (self.low, self.high)]
        if None not in ends and ends[0] > ends[1]:  # a negative scale swaps them
            ends.reverse()
        return ends[0], ends[1]


@dataclass
class Interface:
    """What the scenario sees of one FMU: its model name and ports, by attribute name, and the
    variables it leaves out (``left_out``: ``"name (why)"``, shown as a validation warning)."""

    path: Path
    description: Any
    model: str
    kind: Literal["cs", "me"]
    ports: dict[str, Port] = field(default_factory=dict)
    left_out: list[str] = field(default_factory=list)

    @property
    def inputs(self) -> list[str]:
        return [a for a, p in self.ports.items() if p.causality == "input" or p.variability == "tunable"]

    @property
    def outputs(self) -> list[str]:
        return [a for a, p in self.ports.items() if p.causality == "output"]

    @property
    def settable(self) -> list[str]:
        return [a for a, p in self.ports.items() if p.causality in ("input", "parameter")]

    def meta(self, role: str | None = None) -> dict[str, Any]:
        """The model's META entry; its role given, or inferred from its outputs (see :func:`infer_role`)."""
        inputs, outputs = self.inputs, self.outputs
        return {"public": True, "params": ["eid", *self.settable], "attrs": [*inputs, *outputs],
                "inputs": inputs, "outputs": outputs, "role": role or infer_role(outputs)}

    def warnings(self) -> list[str]:
        """What validation should say about this FMU without refusing it (empty when nothing)."""
        found = []
        if self.left_out:
            found.append(f"{self.path.name} leaves out {len(self.left_out)} variable(s) cosim cannot map: "
                         f"{'; '.join(self.left_out)}")
        if not self.ports:
            found.append(f"{self.path.name} has no input, output or parameter cosim can connect or record")
        return found


def infer_role(outputs: list[str]) -> str:
    """An FMU's role from what it reports: a cooling plant's electricity (``p_cooling_mw``, its
    fans included), air handler fans alone (``p_fans_mw``), else ``other`` (no part in the
    energy accounting)."""
    if "p_cooling_mw" in outputs:
        return "cooling"
    if "p_fans_mw" in outputs:
        return "air_handler"
    return "other"


# -- naming --------------------------------------------------------------------------------------------
@dataclass
class _Name:
    """A variable's scenario name as stem + unit suffix (array elements go between the two)."""

    stem: str
    suffix: str
    scale: float = 1.0
    offset: float = 0.0

    def attr(self, index: tuple[int, ...] = ()) -> str:
        return "_".join([self.stem, *(str(i) for i in index), *([self.suffix] if self.suffix else [])])


class _Refused(str):
    """Why a variable named explicitly (``attrs``) cannot be mapped: a problem of the scenario."""


class _LeftOut(str):
    """Why a variable named automatically cannot be mapped: it is left out, with a warning."""


def _split(name: str) -> tuple[str, str]:
    """``("t_room", "c")`` for ``t_room_c``; a dimensionless name (``n_jobs``) is all stem."""
    suffix = unit_of(name) or ""
    return (name[: -len(suffix) - 1], suffix) if suffix else (name, "")


def derived_suffix(unit: str) -> str:
    """A unit string as a suffix: ``m/s2`` -> ``m_s2``, ``W/(m2.K)`` -> ``w_m2_k`` (lower case, every
    run of other characters one ``_``). It names the unit; it does not parse it."""
    return re.sub(r"[^a-z0-9]+", "_", unit.lower()).strip("_")


def _unit(var, relative_names: frozenset[str] = frozenset()) -> tuple[str | None, bool]:
    declared = getattr(var, "declaredType", None)
    unit = var.unit or (declared.unit if declared is not None else None)
    relative = var.name in relative_names or (declared is not None and declared.name in relative_names)
    return unit, relative


def _auto_name(var, kind: str, relative_names: frozenset[str]) -> _Name | _LeftOut:
    """The scenario name of a variable without explicit mapping, or why it is left out."""
    base = re.sub(r"\W+", "_", var.name).strip("_").lower()
    unit, relative = _unit(var, relative_names)
    if kind != "real" or unit in (None, "", "1"):
        if has_unit_suffix(base):
            return _Name(*_split(base))
        return _Name(base, "ratio" if kind != "bool" else "frac")
    if unit in UNIT_MAP:
        suffix = "k" if unit == "K" and relative else UNIT_MAP[unit][0]
        return _Name(base, suffix, *UNIT_MAP[unit][1][suffix])
    suffix = derived_suffix(unit)  # SI as it is, under the unit's own name
    if not suffix or not has_unit_suffix(f"{base}_{suffix}"):
        return _LeftOut(f"{var.name!r} (unit {unit!r}: no unit suffix follows from it; map it in attrs: "
                        f"\"{var.name}\" = {{ name = \"{base}_<suffix>\", scale = ..., offset = ... }})")
    return _Name(base, suffix)


def _explicit(var, spec: str | AttrSpec, kind: str, relative_names: frozenset[str]) -> _Name | _Refused:
    spec = AttrSpec(name=spec) if isinstance(spec, str) else spec
    if not has_unit_suffix(spec.name):
        return _Refused(f"attrs.{var.name} = {spec.name!r}: the attribute needs a unit suffix (e.g. _mw, _c, _kg_s)")
    stem, suffix = _split(spec.name)
    if spec.scale is not None or spec.offset is not None:
        return _Name(stem, suffix, spec.scale if spec.scale is not None else 1.0, spec.offset or 0.0)
    unit, relative = _unit(var, relative_names)
    if kind != "real" or unit in (None, "", "1"):
        return _Name(stem, suffix)
    table = dict(UNIT_MAP.get(unit, ("", {}))[1])
    table.setdefault(derived_suffix(unit), (1.0, 0.0))
    for known in sorted(table, key=len, reverse=True):
        if known and spec.name.endswith("_" + known):
            scale, offset = table[known]
            return _Name(spec.name[: -len(known) - 1], known, scale, 0.0 if relative else offset)
    return _Refused(f"attrs.{var.name} = {spec.name!r}: no conversion from the FMU unit {unit!r} to this "
                    f"suffix; use one of {', '.join('_' + s for s in table if s)} or give scale and offset")


def _accessor(var_type: str, fmi_version: str) -> str:
    """The fmpy getter/setter suffix for a variable type (``getReal``, ``getInt16``, ...)."""
    if var_type == "Enumeration":
        return "Integer" if fmi_version.startswith("2") else "Int64"
    return var_type


def _kind(var_type: str) -> Literal["real", "int", "bool"] | None:
    return "real" if var_type in _REAL else "int" if var_type in _INT else "bool" if var_type in _BOOL else None


def _starts(var, size: int) -> list[float]:
    """The start value(s) of a variable as numbers (0 where none is given). [FMU unit]"""
    text = (var.start or "").replace("true", "1").replace("false", "0").split()
    try:
        values = [float(v) for v in text]
    except ValueError:
        values = []
    return values if len(values) == size else [values[0] if len(values) == 1 else 0.0] * size


def _number(text: Any) -> float | None:
    """A min or max attribute as a finite number (None when absent or not one). [FMU unit]"""
    try:
        value = float(str(text).replace("true", "1").replace("false", "0")) if text is not None else None
    except ValueError:
        return None
    return value if value is not None and math.isfinite(value) else None


def _elements(var) -> list[tuple[int, ...]]:
    """1-based indices of every element of an array variable, row-major (``[()]`` for a scalar)."""
    shape = tuple(getattr(var, "shape", None) or ())
    return [()] if not shape else [tuple(int(i) + 1 for i in idx) for idx in np.ndindex(*shape)]


# -- describing one FMU ------------------------------------------------------------------------------
def _interface_kind(path: Path, md, interface: str) -> Literal["cs", "me"]:
    offered = [k for k, part in (("cs", md.coSimulation), ("me", md.modelExchange)) if part is not None]
    if not offered and getattr(md, "scheduledExecution", None) is not None:
        raise FmuError(f"{path.name}: scheduled execution is not supported; cosim runs co-simulation or model "
                       "exchange FMUs (this one offers only scheduled execution)")
    kind = offered[0] if interface == "auto" and offered else interface
    if kind not in offered:
        raise FmuError(f"{path.name}: interface = {interface!r} but the FMU offers "
                       f"{', '.join(offered) or 'neither co-simulation nor model exchange'}")
    return kind


def describe(fmu: str, attrs: AttrMap | None = None, interface: str = "auto") -> Interface:
    """Read an FMU's model description and map its variables to scenario attributes.

    A variable named automatically that cannot be mapped (a string, binary or clock; an array
    without a fixed size; a unit that gives no suffix; a name taken by another) is left out and
    listed in :attr:`Interface.left_out`; an explicit mapping (``attrs``) that cannot be
    followed is an error.

    Raises:
        FmuError: unreadable FMU, invalid model description, unsupported interface or FMI
            version, or explicit mappings that cannot be followed (all problems in one message).
    """
    path = fmu_file(fmu)
    md = read_description(path)
    if not md.fmiVersion or md.fmiVersion.split(".")[0] not in ("2", "3"):
        raise FmuError(f"{path.name}: FMI {md.fmiVersion} is not supported; export FMI 2.0 or 3.0")
    kind = _interface_kind(path, md, interface)
    mapping = {**sidecar_attrs(path), **(attrs or {})}
    relative = _relative_names(str(path), path.stat().st_mtime_ns)
    unknown = sorted(set(mapping) - {v.name for v in md.modelVariables})
    problems = [f"attrs.{name}: the FMU has no variable of that name" for name in unknown]
    result = Interface(path, md, re.sub(r"\W", "_", md.modelName or path.stem), kind)
    explicit: set[str] = set()
    for var in md.modelVariables:
        if var.causality not in ("input", "output", "parameter") or mapping.get(var.name) == "skip":
            continue
        kind_of = _kind(var.type)
        if kind_of is None:
            result.left_out.append(f"{var.name!r} ({var.type}: no numeric column)")
            continue
        named = (_explicit(var, mapping[var.name], kind_of, relative) if var.name in mapping
                 else _auto_name(var, kind_of, relative))
        if isinstance(named, _Refused):
            problems.append(named)
            continue
        if isinstance(named, _LeftOut):
            result.left_out.append(named)
            continue
        elements = _elements(var)
        starts = _starts(var, len(elements))
        for i, index in enumerate(elements):
            attr = named.attr(index)
            if attr in result.ports:
                taken = result.ports[attr].var
                if var.name in mapping or taken in explicit:
                    problems.append(f"variables {taken!r} and {var.name!r} both map to {attr!r}; rename one in attrs")
                else:
                    result.left_out.append(f"{var.name!r} (its name {attr!r} is taken by {taken!r}; rename one in attrs)")
                break
            result.ports[attr] = Port(var.name, attr, var.valueReference, kind_of, var.causality,
                                      var.variability or "continuous", named.scale, named.offset,
                                      _accessor(var.type, md.fmiVersion), i, len(elements), starts[i],
                                      _number(var.min), _number(var.max))
        if var.name in mapping:
            explicit.add(var.name)
    if problems:
        raise FmuError(f"{path.name}: " + "; ".join(problems))
    return result


def binary_path(iface: Interface) -> str:
    """Where this platform's shared library sits inside the FMU (``binaries/linux64/x.so``)."""
    import fmpy  # fmpy loads ctypes and lxml: only when an FMU is looked at

    md = iface.description
    part = md.coSimulation if iface.kind == "cs" else md.modelExchange
    folder = fmpy.platform if md.fmiVersion.startswith("2") else fmpy.platform_tuple
    return f"binaries/{folder}/{part.modelIdentifier}{fmpy.sharedLibraryExtension}"


def binary_problems(iface: Interface) -> list[str]:
    """Whether the FMU holds a shared library for this platform (empty list when it does)."""
    wanted = binary_path(iface)
    with zipfile.ZipFile(iface.path) as zf:
        names = zf.namelist()
    if wanted in names:
        return []
    present = sorted({n.split("/")[1] for n in names if n.startswith("binaries/") and n.count("/") >= 2})
    hint = "; it ships sources/: compile them with fmpy.util.compile_platform_binary" if any(
        n.startswith("sources/") for n in names) else ""
    return [f"{iface.path.name}: no binary for this platform ({wanted}); it has binaries for "
            f"{', '.join(present) or 'no platform'}{hint}"]
