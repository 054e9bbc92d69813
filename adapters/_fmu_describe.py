"""Locating an FMU and describing it for cosim: variables, their scenario names and unit
conversions (the naming rules are in the docstring of ``adapters/fmu.py``)."""

from __future__ import annotations

import logging
import re
import tomllib
import xml.etree.ElementTree as ET
import zipfile
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from pydantic import field_validator

from cosim import thermal_fmus
from cosim.thermal_fmus import build as fmu_build

from cosim.sdk import Params
from cosim.sdk import has_unit_suffix

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
}
_REAL = {"Real", "Float64", "Float32"}
_INT = {"Integer", "Int8", "UInt8", "Int16", "UInt16", "Int32", "UInt32", "Int64", "UInt64", "Enumeration"}
_BOOL = {"Boolean"}


class FmuError(RuntimeError):
    """An FMU that cannot be loaded, or a call into it that failed (names FMU, variable, time)."""



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

    def meta(self, role: str | None = None) -> dict[str, Any]:
        """The model's META entry; its role given, or inferred from its outputs (see :func:`infer_role`)."""
        inputs, outputs = self.inputs, self.outputs
        return {"public": True, "params": ["eid", *self.settable], "attrs": [*inputs, *outputs],
                "inputs": inputs, "outputs": outputs, "role": role or infer_role(outputs)}


def infer_role(outputs: list[str]) -> str:
    """An FMU's role from what it reports: a cooling plant's electricity (``p_cooling_mw``, its
    fans included), air handler fans alone (``p_fans_mw``), else ``other`` (no part in the
    energy accounting)."""
    if "p_cooling_mw" in outputs:
        return "cooling"
    if "p_fans_mw" in outputs:
        return "air_handler"
    return "other"


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
    import fmpy  # fmpy loads ctypes and lxml: only when an FMU is looked at

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

