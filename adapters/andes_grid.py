"""Transmission dynamics: an ANDES time-domain (transient stability) simulation stepped by cosim.

ANDES (Cui, Li & Tomsovic, "Hybrid symbolic-numeric framework for power system modeling and
analysis", IEEE Trans. Power Systems 36(2), 2021; PyPI ``andes``) integrates the full
differential-algebraic model of a transmission case: synchronous machines (GENROU), their
exciters, stabilisers and governors, the network's algebraic equations. This adapter steps it at
the simulator's ``step_s`` (the scenario's ``tick_s`` or a multiple), so a datacenter campus, a
ride-through model or a controller can sit at a bus of a standard case and exchange P, Q, V and f
with it every step.

``[sims.<id>]`` keys:

* ``case``: a case shipped with ANDES, with its dynamic data: ``ieee14``, ``ieee39`` (the New
  England 39-bus system, 10 machines), ``wecc`` (the WECC 179-bus system, 29 machines),
  ``kundur`` (two areas, four machines); the path of an ANDES case file (``.xlsx`` / ``.json``);
  or a power-flow case, a PSS/E RAW (``.raw``, v32-v35) or MATPOWER (``.m``), with its dynamic
  data in ``dyr`` (a PSS/E DYR, read by ANDES's own reader: ``andes.load(raw, addfile=dyr)``; a
  MATPOWER case's generators take the machine ids 1, 2, ... at each bus). Both paths are relative
  to the scenario. Checked before the run: a RAW or MATPOWER case without ``dyr``; DYR records of
  models ANDES does not have (one problem naming each model, its count, the file and what the run
  does without it; ``skip_unsupported_dyr = true`` runs without them); DYR records at buses the
  case does not have. The case's own scripted events (Toggle, Fault, Alter devices) are moved
  past the end of the run: only the events of the scenario happen.
* ``dt_s``: ANDES's integration step (implicit trapezoid); each cosim step is ``step_s / dt_s``
  sub-steps, so ``dt_s`` must divide ``step_s`` (default: the largest divisor of the step not above
  1/30 s, ANDES's own default). ``step_s`` may be at most 1 s: the campus's P is held over a
  step, and a longer hold is not a transient-stability study.
* ``faults = [[t_s, duration_s, bus, x_pu], ...]``: three-phase bus faults through a reactance
  ``x_pu`` (system base, 100 MVA; smaller is deeper), each on from ``t_s`` for ``duration_s``. A
  fault is a shunt admittance ``1 / (j x_pu)`` at the bus, switched at the simulator's steps (so
  ``t_s`` and ``duration_s`` are whole steps).
* ``gen_trips = [[t_s, gen], ...]``: a synchronous machine (its ANDES idx, e.g. ``"GENROU_1"``)
  tripped at ``t_s``.

The background loads keep ANDES's TDS load model (constant impedance, ANDES's ``PQ`` default).

Entities:

* ``Grid`` (one per sim): outputs ``f_hz`` (the centre-of-inertia frequency: machine speeds
  weighted by their inertia ``M * Sn``), ``f_nadir_hz`` / ``f_zenith_hz`` (lowest / highest since
  the start, over the sub-steps), ``rocof_hz_s`` (COI frequency change over the last step / step),
  ``vm_min_pu`` / ``vm_max_pu`` over the buses, ``delta_spread_deg`` (largest rotor-angle
  difference between machines), ``p_load_mw`` (every load's draw), ``p_gen_mw`` (the machines'
  electrical power), per machine ``gen_<id>_f_hz`` and ``gen_<id>_p_mw``, per bus
  ``bus_<id>_vm_pu``.
* ``Load`` (``bus = <bus number or name>``; an unknown one is refused naming the nearest names, a
  name several buses share asks for the number): a load that cosim drives. Inputs ``p_mw`` and
  ``q_mvar`` (consumer sign); outputs ``p_mw``, ``q_mvar`` (what it asked for, as on the other grid
  engines), ``p_served_mw`` (what it drew at the end of the step: an impedance set at the step's
  start voltage, so it follows the voltage inside the step; with a native PERC1, its constant power
  times its connected shares), ``vm_pu`` (its bus voltage at the end
  of the step), ``vm_min_pu`` (lowest over the step's
  sub-steps: a 100 ms dip shows also at 1 s steps), ``f_hz`` (the bus frequency of an ANDES
  ``BusFreq`` measurement at the bus), ``rocof_hz_s``, and ``p_connected_frac`` /
  ``q_connected_frac`` (PERC1's shares at the end of the step, 0 once its frequency trip has acted;
  1 without it: connect them to a ``ride_through``'s ``p_grid_connected_frac`` /
  ``q_grid_connected_frac`` so its UPS accounting carries the ceased share). With ``perc1 = {...}``
  (``ride_through``'s PERC1 keys) or ``perc1_dyr = "<record>.dyr"`` (``cosim model-record``'s
  output; ``perc1_id`` picks the record) the load is a PERC1 device inside ANDES
  (``adapters/_andes_perc1.py``): it draws ``p_mw``/``q_mvar`` at constant power times its shares,
  which ANDES evaluates at every iteration of every sub-step.

Coupling: at step ``t`` the Load's input power is set (without PERC1: as the impedance that draws
exactly that power at the bus voltage of ``t``) and the case is integrated over ``[t, t + step_s)``; the outputs
of step ``t`` describe that interval: the state at its end and the extremes inside it. The first
step's input is the initial operating point: the power flow and ANDES's initialisation are solved
with it, so the run starts in equilibrium. A machine pair losing synchronism (ANDES's criterion:
rotor angles more than 180° apart) ends the run early and cleanly (status ok, the reason names
the time); an integration that does not converge fails it, and the outputs of that step are NaN
(the loads' asked ``p_mw``/``q_mvar`` excepted), so a Session or a live run that reads them after
the failure never reads the last solved step's values as this one's. No cosim input isolates a bus
here (no line inputs or trips), so ANDES has no de-energised outputs.
A case ANDES cannot start fails with
the step that failed: setup, power flow, or TDS initialisation (the largest mismatch named).

Example::

    [sims.tgrid]
    adapter = "andes_grid"
    case = "ieee39"
    faults = [[10.0, 0.1, 16, 0.05]]

    [entities.pcc]
    sim = "tgrid"
    model = "Load"
    bus = 16
"""

from __future__ import annotations

import difflib
import logging
import math
from collections import Counter
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any, ClassVar

import numpy as np
import yaml
from pydantic import BeforeValidator, Field, ValidationInfo, field_validator

from cosim.adapters import _perc1_record as record
from cosim.adapters.ride_through import Perc1Params
from cosim.sdk import CosimSim, EndRun, Params, ScenarioContext, as_tuple, meta, model_meta, to_ticks

#: Cases shipped with ANDES (with their dynamic data) by short name.
CASES = {"ieee14": "ieee14/ieee14_full.xlsx", "ieee39": "ieee39/ieee39_full.xlsx",
         "wecc": "wecc/wecc_full.xlsx", "kundur": "kundur/kundur_full.xlsx"}
#: ANDES's default integration step. [s]
DT_DEFAULT_S = 1.0 / 30.0
#: The longest step this adapter takes. [s]
STEP_MAX_S = 1.0
#: ANDES's system base. [MVA]
S_BASE_MVA = 100.0
#: A time far past any run: where the case's own scripted events are moved. [s]
NEVER_S = 1e9
#: Case files ANDES reads by suffix: its own formats, and power-flow formats that need a DYR beside.
OWN_SUFFIXES = (".xlsx", ".json")
FLOW_SUFFIXES = (".raw", ".m")
#: The synchronous machine models whose speeds make the centre-of-inertia frequency.
MACHINES = ("GENROU", "GENCLS")
#: What a missing dynamic record leaves out, by the PSS/E model name's start (PSS/E model library naming).
KIND_OF = (("GEN", "the machine is left out of the dynamics (its bus keeps a constant injection)"),
           (("ES", "EX", "IEEET", "IEEEX", "SCRX", "SEXS", "REXS", "AC", "DC", "ST"),
            "the machine runs with a constant field voltage (no exciter)"),
           (("TG", "GGOV", "HYGOV", "IEEEG", "IEESGO", "GAST", "WSIEG", "WEHGOV", "DEGOV"),
            "the machine runs with constant mechanical power (no governor)"),
           (("PSS", "STAB", "IEEEST", "ST2CUT"), "the machine runs without its stabiliser (less damping)"),
           (("CLOD", "CMLD", "LD", "IEEL", "CIM", "MOTOR", "EXTL"), "the load stays a constant impedance"),
           (("REGC", "REEC", "REPC", "WT", "PVD", "DER"), "the inverter-based unit is left out of the dynamics"),
           (("LV", "UV", "FRQ", "VTG", "DIST", "REL", "TIOCR"), "the relay never acts"))
#: ANDES models whose devices are scripted events, and their time parameters.
EVENT_TIMES = {"Toggle": ("t",), "Alter": ("t",), "Fault": ("tf", "tc")}

GRID_OUTPUTS = ("f_hz", "f_nadir_hz", "f_zenith_hz", "rocof_hz_s", "vm_min_pu", "vm_max_pu", "delta_spread_deg",
                "p_load_mw", "p_gen_mw")
LOAD_INPUTS = ("p_mw", "q_mvar")
LOAD_OUTPUTS = ("p_mw", "q_mvar", "p_served_mw", "vm_pu", "vm_min_pu", "f_hz", "rocof_hz_s", "p_connected_frac", "q_connected_frac")


def _resolve(value: str | None, info: ValidationInfo) -> str | None:
    base_dir = (info.context or {}).get("base_dir")
    if value is not None and value not in CASES and base_dir is not None and not Path(value).is_absolute():
        return str((Path(base_dir) / value).resolve())
    return value


def _rows(value: Any) -> Any:
    return tuple(as_tuple(v) for v in value) if isinstance(value, list) else value


def _andes():
    import andes  # noqa: PLC0415 — sympy/numba code: ~0.4 s, only for scenarios that use this adapter
    # its errors come back as ours; no debug log file (ANDES writes one by default: ~14 % of a sub-step)
    andes.config_logger(stream_level=logging.CRITICAL, file=False)
    logging.getLogger("andes").setLevel(logging.CRITICAL)
    return andes


def case_path(case: str) -> str:
    """The file of ``case`` (a shipped name or a path).

    Raises:
        ValueError: an unknown name or a missing file, naming the choices.
    """
    if case in CASES:
        return _andes().get_case(CASES[case])
    path = Path(case)
    if path.suffix.lower() not in OWN_SUFFIXES + FLOW_SUFFIXES or not path.is_file():
        raise ValueError(f"case = {case!r}: give one of {', '.join(CASES)} (shipped with ANDES), an ANDES case "
                         "file (.xlsx or .json), or a PSS/E RAW (.raw) or MATPOWER (.m) case with its dyr, that exists")
    return str(path)


def needs_dyr(case: str) -> bool:
    """A power-flow case (RAW, MATPOWER): its dynamic data comes from a DYR file."""
    return case not in CASES and Path(case).suffix.lower() in FLOW_SUFFIXES


def _dyr_tables(dyr: str) -> dict[str, Any]:
    """The DYR's records by model name (ANDES's own DYR reader). [pandas frames]"""
    from andes.io.psse import _read_dyr_dict  # noqa: PLC0415 — ANDES's parser, the one the run uses

    _andes()
    return _read_dyr_dict(dyr)


def _dyr_supported() -> set[str]:
    import andes.io  # noqa: PLC0415

    with open(Path(andes.io.__file__).parent / "psse-dyr.yaml") as f:
        return set(yaml.safe_load(f))


def _what_without(model: str) -> str:
    name = model.upper()
    if name == record.MODEL:
        return "cosim's PERC1: give the campus's Load perc1_dyr = this file instead"
    for prefixes, text in KIND_OF:
        if name.startswith(prefixes):
            return text
    return "the devices it describes are left out of the dynamics"


def dyr_problems(case: str, dyr: str, skip_unsupported: bool = False) -> list[str]:
    """What in ``dyr`` the run cannot use: records of models ANDES does not have (one problem, unless
    ``skip_unsupported``), records at buses that are not in the case (one problem)."""
    try:
        tables = _dyr_tables(dyr)
    except Exception as exc:  # noqa: BLE001 — a file ANDES's reader cannot parse
        return [f"dyr = {dyr!r}: ANDES could not read it ({type(exc).__name__}: {exc}); give a PSS/E dynamic data "
                "file (records 'IBUS 'MODEL' ID ... /')"]
    problems = []
    supported = _dyr_supported()
    unsupported = {m: len(t) for m, t in tables.items() if m not in supported}
    if unsupported and not skip_unsupported:
        listed = "; ".join(f"{m} x{n} ({_what_without(m)})" for m, n in sorted(unsupported.items()))
        problems.append(f"dyr = {dyr!r}: ANDES has no model for {sum(unsupported.values())} record(s): {listed}. "
                        "Without them the run goes on as said for each; set skip_unsupported_dyr = true to run so, or "
                        "replace them with models ANDES has (andes.io psse-dyr.yaml lists them)")
    stat = Path(case).stat()
    buses = {str(b) for b in _raw_buses(case, (stat.st_mtime_ns, stat.st_size))}
    missing = Counter()
    for model, table in tables.items():
        if len(table.columns):
            for bus in table.iloc[:, 0]:
                if isinstance(bus, str):  # ANDES's own event records (Toggle, Alter) name a model, not a bus
                    continue
                key = str(int(bus)) if float(bus).is_integer() else str(bus)
                if key not in buses:
                    missing[(model, key)] += 1
    if missing:
        listed = ", ".join(f"{m} at bus {b}" + (f" x{n}" if n > 1 else "") for (m, b), n in sorted(missing.items()))
        problems.append(f"dyr = {dyr!r}: {sum(missing.values())} record(s) at buses that are not in case {case!r}: "
                        f"{listed}; fix the bus numbers, or give the RAW that goes with this DYR")
    return problems


@lru_cache(maxsize=8)
def _raw_buses(case: str, _version: tuple[int, int]) -> tuple[Any, ...]:
    """The bus numbers of a power-flow case (cached per file version: a notebook may edit it)."""
    system = _andes().load(case_path(case), setup=False, no_output=True, default_config=True)
    return tuple(system.Bus.idx.v) if system is not None else ()


def load_case(case: str, dyr: str | None = None):
    """An ANDES ``System`` of ``case`` (and its ``dyr``), not yet set up, its scripted events moved past the run."""
    andes = _andes()
    path = case_path(case)
    fix = ("give an ANDES case file (.xlsx or .json, e.g. written by andes.io.xlsx.write) with its Bus table, or a "
           "PSS/E RAW / MATPOWER case with its dyr")
    if needs_dyr(case) and not dyr:
        raise ValueError(f"case = {case!r}: a power-flow case without dynamic data; give dyr = '<file>.dyr' (its "
                         "PSS/E dynamic data, path relative to the scenario) for a transient-stability study")
    if dyr and not needs_dyr(case):
        raise ValueError(f"dyr = {dyr!r}: a DYR goes with a PSS/E RAW (.raw) or MATPOWER (.m) case; case = {case!r} "
                         "has its dynamic data in it: drop dyr")
    if dyr and not Path(dyr).is_file():
        raise ValueError(f"dyr = {dyr!r}: no such file; give the PSS/E dynamic data file (path relative to the scenario)")
    matpower = Path(case).suffix.lower() == ".m"
    kwargs = {"addfile": dyr} if dyr and not matpower else {}
    with _AndesLog() as log:
        try:
            system = andes.load(path, setup=False, no_output=True, default_config=True, **kwargs)
            if system is not None and dyr and matpower and not _add_dyr_to_matpower(system, dyr):
                system = None
        except Exception as exc:  # a file ANDES cannot parse (a JSON syntax error is a ValueError too)
            raise ValueError(f"case = {case!r}: ANDES could not read it ({type(exc).__name__}: {exc}); {fix}") from None
    if system is None and dyr:
        explained = dyr_problems(case, dyr, skip_unsupported=True)
        if explained:
            raise ValueError("; ".join(explained))
    if system is None:
        said = f" (ANDES: {'; '.join(log.errors[-3:])})" if log.errors else ""
        where = f"case = {case!r} with dyr = {dyr!r}" if dyr else f"case = {case!r}"
        raise ValueError(f"{where}: ANDES could not read it{said}; {fix}")
    if not system.Bus.n:
        raise ValueError(f"case = {case!r}: ANDES read no buses from it (is it an ANDES case?); {fix}")
    if not sum(getattr(system, m).n for m in MACHINES):
        raise ValueError(f"case = {case!r}: no synchronous machine ({' or '.join(MACHINES)}), so no frequency to "
                         "simulate; give a case with its dynamic data (e.g. ANDES's ieee14_full.xlsx, or ieee14.raw "
                         "with dyr = 'ieee14.dyr')")
    for model, names in EVENT_TIMES.items():
        for name in names:
            values = getattr(system, model).__dict__[name].v
            for i in range(len(values)):
                values[i] = NEVER_S
    return system


def _add_dyr_to_matpower(system, dyr: str) -> bool:
    """Read ``dyr`` into a MATPOWER case with ANDES's DYR reader. A DYR names a machine by bus and
    machine id; a MATPOWER case has no ids, so its generators at a bus get the ids 1, 2, ... in the
    case's order (slack first), PSS/E's default."""
    import andes.io.psse  # noqa: PLC0415

    seen: Counter = Counter()
    for model in (system.Slack, system.PV):
        for i, bus in enumerate(model.bus.v):
            seen[bus] += 1
            model.subidx.v[i] = seen[bus]
    return bool(andes.io.psse.read_add(system, dyr))


class _AndesLog(logging.Handler):
    """Collects what ANDES logs at warning and above while reading a case (its messages name the record)."""

    def __init__(self):
        super().__init__(level=logging.WARNING)
        self.errors: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno >= logging.ERROR:
            self.errors.append(record.getMessage().strip())

    def __enter__(self):
        logger = logging.getLogger("andes")
        self._level = logger.level
        logger.setLevel(logging.WARNING)
        logger.addHandler(self)
        return self

    def __exit__(self, *exc):
        logger = logging.getLogger("andes")
        logger.removeHandler(self)
        logger.setLevel(self._level)
        return False


def machines(system) -> list[tuple[Any, int]]:
    """``(model, uid)`` of every synchronous machine, GENROU first."""
    return [(getattr(system, m), i) for m in MACHINES for i in range(getattr(system, m).n)]


def case_info(case: str, dyr: str | None = None) -> dict[str, Any]:
    """``{"buses": {idx: name}, "vn_kv": {idx: kV}, "gens": [idx], "f_hz": nominal}`` of a case
    (cached per case, and per modification of a case file: a notebook may edit it between runs)."""
    versions = []
    for file in (case, dyr):
        path = Path(file) if file else None
        stat = path.stat() if path is not None and path.is_file() else None
        versions.append((stat.st_mtime_ns, stat.st_size) if stat else None)
    return _case_info(case, dyr, tuple(versions))


@lru_cache(maxsize=8)
def _case_info(case: str, dyr: str | None, _version: tuple) -> dict[str, Any]:
    system = load_case(case, dyr)
    buses = {_key(i): str(n).strip() for i, n in zip(system.Bus.idx.v, system.Bus.name.v)}
    vn = {_key(i): float(v) for i, v in zip(system.Bus.idx.v, system.Bus.Vn.v)}
    return {"buses": buses, "vn_kv": vn, "gens": [str(m.idx.v[i]) for m, i in machines(system)],
            "f_hz": float(system.config.freq)}


def _key(idx: Any) -> str:
    return str(idx)


def sanitise(name: Any) -> str:
    """An ANDES idx as an attribute id: lower case, ``[a-z0-9_]``."""
    return "".join(c if c.isalnum() else "_" for c in str(name).lower()).strip("_")


def find_bus(case: str, bus: Any, dyr: str | None = None) -> str:
    """The bus idx (as text) of ``bus``, given as idx or name.

    Raises:
        ValueError: unknown bus, naming the nearest names and numbers.
    """
    info = case_info(case, dyr)
    if _key(bus) in info["buses"]:
        return _key(bus)
    by_name = {n.lower(): i for i, n in info["buses"].items()}
    named = [i for i, n in info["buses"].items() if n.lower() == str(bus).strip().lower()]
    if len(named) > 1:
        levels = ", ".join(f"{i} at {info['vn_kv'][i]:g} kV" for i in named)
        raise ValueError(f"bus {bus!r} names {len(named)} buses of case {case!r} ({levels}): give the bus number")
    if named:
        return named[0]
    near = difflib.get_close_matches(str(bus).strip().lower(), list(by_name) + list(info["buses"]), n=5, cutoff=0.5)
    known = [f"{by_name.get(n, n)} ({info['buses'][by_name.get(n, n)]})" for n in near]
    known = known or [f"{i} ({n})" for i, n in list(info["buses"].items())[:8]]
    raise ValueError(f"unknown bus {bus!r} in case {case!r}; the nearest: {', '.join(dict.fromkeys(known))} "
                     f"({len(info['buses'])} buses); give a bus number or name of the case")


def default_dt_s(step_s: float) -> float:
    """The largest ``step_s / n`` not above ANDES's 1/30 s. [s]"""
    return step_s / max(1, math.ceil(step_s / DT_DEFAULT_S - 1e-9))


class SimParams(Params):
    """``[sims.<id>]`` of ``adapter = "andes_grid"`` (module docstring).

    Attributes:
        case: a shipped case name, an ANDES case file, or a PSS/E RAW / MATPOWER case.
        dyr: the PSS/E dynamic data of a RAW / MATPOWER case (path relative to the scenario).
        skip_unsupported_dyr: run without the DYR records ANDES has no model for (else refused).
        dt_s: ANDES integration step; None: the largest divisor of the step up to 1/30 s. [s]
        faults: ``[[t_s, duration_s, bus, x_pu], ...]``. [s, s, -, pu]
        gen_trips: ``[[t_s, gen], ...]``. [s, -]
    """

    case: str = "ieee39"
    dyr: str | None = None
    skip_unsupported_dyr: bool = False
    dt_s: float | None = Field(default=None, gt=0, le=STEP_MAX_S)
    faults: Annotated[tuple[tuple[float, float, int | str, float], ...], BeforeValidator(_rows)] = ()
    gen_trips: Annotated[tuple[tuple[float, str], ...], BeforeValidator(_rows)] = ()
    #: the largest |p_mw| and |q_mvar| a Load takes from outside (``Session.set``, the live API):
    #: ten times the 100 MVA system base by default [MW]
    load_p_max_mw: float = Field(default=10 * S_BASE_MVA, gt=0, allow_inf_nan=False)

    @field_validator("case", "dyr")
    @classmethod
    def _resolve_file(cls, value: str | None, info: ValidationInfo) -> str | None:
        """A relative case or DYR file resolves from the scenario file's folder."""
        return _resolve(value, info)

    @field_validator("faults")
    @classmethod
    def _faults(cls, value):
        for t_s, duration_s, bus, x_pu in value:
            if t_s < 0 or duration_s <= 0 or x_pu <= 0:
                raise ValueError(f"fault ({t_s:g}, {duration_s:g}, {bus!r}, {x_pu:g}): give t_s >= 0, duration_s > 0 "
                                 "and x_pu > 0 (the fault reactance on the 100 MVA base)")
        return value


class LoadParams(Params):
    """A cosim-driven load at ``bus`` (number or name); ``p_mw``/``q_mvar`` hold until the first input. [MW, Mvar]

    Attributes:
        perc1: PERC1 ceasing and reconnection inside ANDES (``ride_through``'s ``perc1`` keys); None: off.
        perc1_dyr: a DYR file with this load's PERC1 record (``cosim model-record`` writes one), instead
            of ``perc1`` (path relative to the scenario).
        perc1_id: the record's id in ``perc1_dyr``.
    """

    bus: int | str
    p_mw: float = 0.0
    q_mvar: float = 0.0
    perc1: Perc1Params | None = None
    perc1_dyr: str | None = None
    perc1_id: str = "1"

    @field_validator("perc1_dyr")
    @classmethod
    def _resolve_dyr(cls, value: str | None, info: ValidationInfo) -> str | None:
        return _resolve(value, info)


def perc1_of(params: LoadParams, bus: str) -> Perc1Params | None:
    """The load's PERC1 parameters: its ``perc1``, or its record in ``perc1_dyr`` at ``bus``.

    Raises:
        ValueError: both given; the record missing, malformed or out of order (naming file and key).
    """
    if params.perc1 is not None and params.perc1_dyr is not None:
        raise ValueError("perc1 and perc1_dyr both given: keep one (perc1_dyr reads the parameters from a record)")
    if params.perc1_dyr is None:
        return params.perc1
    if not Path(params.perc1_dyr).is_file():
        raise ValueError(f"perc1_dyr = {params.perc1_dyr!r}: no such file; give the DYR record file "
                         "(`cosim model-record` writes perc1.dyr)")
    values = record.find_record(params.perc1_dyr, bus, params.perc1_id)
    try:
        return Perc1Params(**values)
    except ValueError as exc:
        text = "; ".join(_record_error(e) for e in exc.errors()) if hasattr(exc, "errors") else str(exc)
        raise ValueError(f"perc1_dyr = {params.perc1_dyr!r} (bus {bus}, id {params.perc1_id!r}): {text}") from None


def _record_error(err: dict[str, Any]) -> str:
    """One pydantic error of a record's values, naming the column (``Tfl``), its key and the value."""
    message = err["msg"].removeprefix("Value error, ")
    if not err["loc"]:
        return message  # a check over several values names them itself
    key = str(err["loc"][0])
    column = next((name for name, (k, _u, _m) in record.PARAMS.items() if k == key), key)
    return f"column {column} ({key}) = {err.get('input')!r}: {message}"


class AndesGridSim(CosimSim):
    """mosaik adapter of an ANDES time-domain simulation (models ``Grid`` and ``Load``)."""

    SimParams: ClassVar = SimParams
    ModelParams: ClassVar = {"Grid": Params, "Load": LoadParams}
    # span_s: the tick test integrates 20 s + 60 s (2 x 2,400 sub-steps at ~5 ms) instead of its half hour
    EXAMPLE: ClassVar = {"sim": {"case": "ieee14"}, "models": {"Grid": {}, "Load": {"bus": 9, "p_mw": 10.0}},
                         "single": ["Grid"], "span_s": 80}

    @classmethod
    def input_bounds(cls, model: str, params: Any, sim_params: SimParams | None = None) -> dict[str, tuple[float, float]]:
        """A Load's powers within +-``load_p_max_mw``. [MW, Mvar]"""
        top = SimParams.model_fields["load_p_max_mw"].default if sim_params is None else sim_params.load_p_max_mw
        return {"p_mw": (-top, top), "q_mvar": (-top, top)} if model == "Load" else {}

    def release(self, eid: str, attr: str) -> None:
        """A Load's power no longer held from outside: back to its params' value."""
        if eid in self.loads and attr in LOAD_INPUTS:
            self.loads[eid][attr] = self._load_params[eid][attr]

    @classmethod
    def meta_for(cls, sim_params: SimParams) -> dict[str, Any]:
        info = case_info(sim_params.case, sim_params.dyr)
        grid_out = [*GRID_OUTPUTS, *(f"gen_{sanitise(g)}_{a}" for g in info["gens"] for a in ("f_hz", "p_mw")),
                    *(f"bus_{sanitise(b)}_vm_pu" for b in info["buses"])]
        return meta({"Grid": model_meta(outputs=grid_out, params=Params, role="grid"),
                     "Load": model_meta(LOAD_INPUTS, LOAD_OUTPUTS, LoadParams, role="grid_element")})

    @classmethod
    def bus_number(cls, sim_params: SimParams, bus: Any) -> int | str:
        """The case's number of ``bus`` (given by number or name), for a DYR record."""
        idx = find_bus(sim_params.case, bus, sim_params.dyr)
        return int(idx) if idx.isdigit() else idx

    @classmethod
    def check(cls, sim_params: SimParams, ctx: ScenarioContext) -> list[str]:
        p = sim_params
        if p.dyr is not None and needs_dyr(p.case) and Path(p.dyr).is_file() and Path(p.case).is_file():
            problems = dyr_problems(p.case, p.dyr, p.skip_unsupported_dyr)
            if problems:
                return problems
        try:
            info = case_info(p.case, p.dyr)
        except ValueError as exc:
            return [str(exc)]
        problems = []
        if ctx.step_s > STEP_MAX_S + 1e-12:
            problems.append(f"step_s = {ctx.step_s:g}: ANDES is stepped at most every {STEP_MAX_S:g} s (the campus "
                            "power is held over a step); set step_s = 0.1 (or tick_s and step_s at most 1)")
        dt = sim_params.dt_s
        if dt is not None and abs(ctx.step_s / dt - round(ctx.step_s / dt)) > 1e-6:
            problems.append(f"dt_s = {dt:g} does not divide step_s = {ctx.step_s:g}: give dt_s = step_s / n, e.g. "
                            f"{default_dt_s(ctx.step_s):g}")
        tps = round(1.0 / ctx.tick_s)
        for k, (t_s, duration_s, bus, _x) in enumerate(sim_params.faults):
            try:
                find_bus(sim_params.case, bus, sim_params.dyr)
            except ValueError as exc:
                problems.append(f"faults[{k}]: {exc}")
            for name, value in (("t_s", t_s), ("duration_s", duration_s)):
                try:
                    ticks = to_ticks(value, tps)
                except ValueError:
                    ticks = None
                if ticks is None or ticks % to_ticks(ctx.step_s, tps):
                    problems.append(f"faults[{k}].{name} = {value:g} is not a whole number of steps of {ctx.step_s:g} "
                                    "s: faults switch at this simulator's steps")
        for k, (_t, gen) in enumerate(sim_params.gen_trips):
            if str(gen) not in info["gens"]:
                problems.append(f"gen_trips[{k}]: unknown machine {gen!r}; this case has {', '.join(info['gens'])}")
        return problems

    @classmethod
    def check_entity(cls, model: str, params: Any, ctx: ScenarioContext, sim_params: Any = None) -> list[str]:
        if model != "Load" or params is None or sim_params is None:
            return []
        try:
            case_info(sim_params.case, sim_params.dyr)
        except ValueError:
            return []  # the sim's own check reports it
        try:
            bus = find_bus(sim_params.case, params.bus, sim_params.dyr)
        except ValueError as exc:
            return [f"bus = {params.bus!r}: {exc}"]
        try:
            perc1 = perc1_of(params, bus)
        except ValueError as exc:
            return [str(exc)]
        if perc1 is not None and abs(perc1.f_nominal_hz - case_info(sim_params.case, sim_params.dyr)["f_hz"]) > 1e-9:
            return [f"perc1.f_nominal_hz = {perc1.f_nominal_hz:g}: the case runs at "
                    f"{case_info(sim_params.case, sim_params.dyr)['f_hz']:g} Hz; set f_nominal_hz to it"]
        return []

    # -- life cycle ---------------------------------------------------------------------------
    def setup(self) -> None:
        p = self.params
        self.native_uid: dict[str, int] = {}
        self.system = load_case(p.case, p.dyr)
        self.info = case_info(p.case, p.dyr)
        self.dt_s = p.dt_s if p.dt_s is not None else default_dt_s(self.step_s)
        self.n_sub = max(1, round(self.step_s / self.dt_s))
        self.loads: dict[str, dict[str, Any]] = {}
        self._load_params: dict[str, dict[str, float]] = {}  # each Load's own p_mw, q_mvar
        self.grid_eid: str | None = None
        self.started = False
        self.fault_uids: list[int] = []

    def create_entity(self, eid: str, model: str, params: Any) -> None:
        if model == "Grid":
            self.grid_eid = eid
            return
        bus = find_bus(self.params.case, params.bus, self.params.dyr)
        self._load_params[eid] = {"p_mw": params.p_mw, "q_mvar": params.q_mvar}
        self.loads[eid] = {"bus": bus, "p_mw": params.p_mw, "q_mvar": params.q_mvar, "pq": f"cosim_{eid}",
                           "bf": f"cosim_bf_{eid}", "perc1": perc1_of(params, bus), "native": f"cosim_perc1_{eid}"}

    def _start(self, inputs: dict[str, dict[str, Any]]) -> None:
        """Add the loads (at their first-step power), faults and trips; power flow; TDS init."""
        ss, p = self.system, self.params
        bus_idx = {str(i): i for i in ss.Bus.idx.v}
        if any(load["perc1"] is not None for load in self.loads.values()):
            from cosim.adapters._andes_perc1 import register  # noqa: PLC0415 — ANDES code only when used

            register(ss)
        for eid, load in self.loads.items():
            load.update({k: float(inputs.get(eid, {}).get(k, load[k])) for k in LOAD_INPUTS})
            b = bus_idx[load["bus"]]
            ss.add("PQ", {"idx": load["pq"], "name": load["pq"], "bus": b, "Vn": self.info["vn_kv"][load["bus"]],
                          "p0": load["p_mw"] / S_BASE_MVA, "q0": load["q_mvar"] / S_BASE_MVA})
            ss.add("BusFreq", {"idx": load["bf"], "bus": b})
            if load["perc1"] is not None:  # the PQ carries the power flow and t = 0; PERC1 from the first step
                values = load["perc1"].model_dump()
                ss.add("PERC1", {"idx": load["native"], "name": load["native"], "bus": b, "busf": load["bf"],
                                 "p0": load["p_mw"] / S_BASE_MVA, "q0": load["q_mvar"] / S_BASE_MVA,
                                 **{name: float(values[key]) for name, (key, _u, _m) in record.PARAMS.items()}})
        self.faults = []
        for k, (t_s, duration_s, bus, x_pu) in enumerate(p.faults):
            idx = f"cosim_fault_{k}"
            ss.add("PQ", {"idx": idx, "name": idx, "bus": bus_idx[find_bus(p.case, bus, p.dyr)],
                          "Vn": self.info["vn_kv"][find_bus(p.case, bus, p.dyr)], "p0": 0.0, "q0": 0.0})
            self.faults.append((to_ticks(t_s, self.ticks_per_s), to_ticks(t_s + duration_s, self.ticks_per_s), idx,
                                1.0 / x_pu))
        for t_s, gen in p.gen_trips:
            model = next(m for m in MACHINES if gen in [str(i) for i in getattr(ss, m).idx.v])
            ss.add("Toggle", {"model": model, "dev": gen, "t": float(t_s)})
        if not ss.setup():
            raise RuntimeError(f"{self.sid}: ANDES could not set up case {p.case!r} (step failed: setup, before the "
                               "power flow); check the case's data (ANDES's log names the device)")
        ss.PFlow.run()
        if not ss.PFlow.converged:
            raise RuntimeError(f"{self.sid}: case {p.case!r} has no power-flow solution with the cosim loads "
                               f"({self._load_text()}) (step failed: power flow); lower the load or move it to a "
                               "stronger bus")
        tds = ss.TDS.config
        # one integration step per TDS.run call, ended exactly at tf: tstep above the sub-step keeps ANDES's
        # own step control from leaving a float residue before tf
        tds.tstep, tds.no_tqdm, tds.save_every, tds.tf = 10.0 * self.step_s, 1, 0, 0.0
        ss.TDS.init()
        mismatch, where = self._init_mismatch() if ss.TDS.initialized and ss.TDS.test_ok is False else (0.0, "")
        if mismatch > ss.TDS.config.tol:
            raise RuntimeError(f"{self.sid}: ANDES's initialisation of case {p.case!r} leaves the dynamic models out "
                               f"of equilibrium (step failed: TDS initialisation, after a converged power flow; "
                               f"largest mismatch {mismatch:.3g} in {where}): the dynamic data do not fit the power "
                               "flow (a limit or a setpoint); check the case's dynamic data")
        if not ss.TDS.initialized:
            raise RuntimeError(f"{self.sid}: ANDES could not initialise the dynamic models of case {p.case!r} with "
                               f"the cosim loads ({self._load_text()}) (step failed: TDS initialisation, after a "
                               "converged power flow); check the case's dynamic data or the load")
        self.uid = {eid: ss.PQ.idx2uid(load["pq"]) for eid, load in self.loads.items()}
        self.bf_uid = {eid: ss.BusFreq.idx2uid(load["bf"]) for eid, load in self.loads.items()}
        self.bus_uid = {eid: ss.Bus.idx2uid(bus_idx[load["bus"]]) for eid, load in self.loads.items()}
        self.native_uid = {eid: ss.PERC1.idx2uid(load["native"]) for eid, load in self.loads.items()
                           if load["perc1"] is not None}
        self.fault_uids = [ss.PQ.idx2uid(idx) for _a, _b, idx, _y in self.faults]
        self.machines = machines(ss)
        self.weights = np.array([m.M.v[i] * m.Sn.v[i] for m, i in self.machines])
        self.f0_hz = self.info["f_hz"]
        self.f_coi_hz = self._coi_hz()
        self.f_min_hz = self.f_max_hz = self.f_coi_hz
        self.started = True

    def _init_mismatch(self) -> tuple[float, str]:
        """The largest equation residual after ANDES's initialisation, and its variable, over the devices
        in service (a device switched off, e.g. a governor with u = 0, keeps residuals that never act)."""
        ss = self.system
        dae = ss.dae
        residual = np.abs(np.asarray(dae.fg, dtype=float)).copy()
        for model in ss.models.values():
            if not model.n or "u" not in model.__dict__:
                continue
            off = np.asarray(model.u.v) == 0
            if not off.any():
                continue
            for var in model.cache.all_vars.values():
                if var.__class__.__name__.startswith("Ext") or not hasattr(var, "a") or len(var.a) != model.n:
                    continue
                offset = 0 if var.v_code == "x" else dae.n
                residual[offset + np.asarray(var.a)[off]] = 0.0
        worst = int(np.argmax(residual))
        names = list(dae.x_name) + list(dae.y_name)
        return float(residual[worst]), names[worst]

    def _load_text(self) -> str:
        return ", ".join(f"{eid}: {ld['p_mw']:g} MW at bus {ld['bus']}" for eid, ld in self.loads.items()) or "none"

    def _coi_hz(self) -> float:
        omega = np.array([m.omega.v[i] for m, i in self.machines])
        return float((omega * self.weights).sum() / self.weights.sum() * self.f0_hz)

    # -- stepping ----------------------------------------------------------------------------
    def step_entities(self, time_s: float, inputs: dict[str, dict[str, Any]]) -> None:
        if not self.started:
            self._start(inputs)
        ss = self.system
        v = ss.Bus.v.v
        for eid, load in self.loads.items():
            given = inputs.get(eid, {})
            for attr in LOAD_INPUTS:
                if attr in given:
                    load[attr] = float(given[attr])
            if eid in self.native_uid:  # PERC1 draws it (constant power times its shares); the PQ is empty
                ss.PERC1.p0.v[self.native_uid[eid]] = load["p_mw"] / S_BASE_MVA
                ss.PERC1.q0.v[self.native_uid[eid]] = load["q_mvar"] / S_BASE_MVA
                ss.PQ.Req.v[self.uid[eid]] = ss.PQ.Xeq.v[self.uid[eid]] = 0.0
                continue
            vm2 = max(float(v[self.bus_uid[eid]]), 1e-3) ** 2
            ss.PQ.Req.v[self.uid[eid]] = load["p_mw"] / S_BASE_MVA / vm2
            ss.PQ.Xeq.v[self.uid[eid]] = load["q_mvar"] / S_BASE_MVA / vm2
        for (on, off, _idx, y_pu), uid in zip(self.faults, self.fault_uids):
            ss.PQ.Xeq.v[uid] = y_pu if on <= self.time_ticks < off else 0.0
        vm_min = {eid: math.inf for eid in self.loads}
        f_start = self.f_coi_hz
        for k in range(1, self.n_sub + 1):
            self._substep(time_s + k * self.step_s / self.n_sub, time_s)
            for eid in self.loads:
                vm_min[eid] = min(vm_min[eid], float(v[self.bus_uid[eid]]))
            self.f_coi_hz = self._coi_hz()
            self.f_min_hz, self.f_max_hz = min(self.f_min_hz, self.f_coi_hz), max(self.f_max_hz, self.f_coi_hz)
        self._outputs(vm_min, (self.f_coi_hz - f_start) / self.step_s)

    def _substep(self, t_end_s: float, step_start_s: float) -> None:
        ss = self.system
        ss.TDS.config.tf = t_end_s
        ss.TDS.run(no_summary=True)
        if abs(ss.dae.t - t_end_s) < 1e-9:
            ss.dae.t = np.float64(t_end_s)
        if ss.TDS.busted:
            message = ss.TDS.err_msg or "integration stopped"
            if "criteria" in message:
                raise EndRun(f"{self.sid}: machines lost synchronism at t = {float(ss.dae.t):.3f} s (ANDES's criterion: "
                             "rotor angles more than 180 degrees apart); the step from "
                             f"{step_start_s:g} s is the last recorded")
            self._unsolved_outputs()
            raise RuntimeError(f"{self.sid}: ANDES's integration did not converge at t = {float(ss.dae.t):.3f} s "
                               f"({message}); try a smaller dt_s or a less severe event")
        if ss.dae.t != t_end_s:  # never report a step that ANDES did not reach
            self._unsolved_outputs()
            raise RuntimeError(f"{self.sid}: ANDES stopped at t = {float(ss.dae.t):.6f} s short of {t_end_s:.6f} s "
                               "without an error of its own; try another dt_s")

    def _unsolved_outputs(self) -> None:
        """Every output NaN but the loads' asked powers: the step did not integrate."""
        for eid, load in self.loads.items():
            self.out[eid] = {**dict.fromkeys(LOAD_OUTPUTS, math.nan), "p_mw": load["p_mw"], "q_mvar": load["q_mvar"]}
        if self.grid_eid is not None:
            info = self.info
            names = [*GRID_OUTPUTS, *(f"gen_{sanitise(g)}_{a}" for g in info["gens"] for a in ("f_hz", "p_mw")),
                     *(f"bus_{sanitise(b)}_vm_pu" for b in info["buses"])]
            self.out[self.grid_eid] = dict.fromkeys(names, math.nan)

    def _outputs(self, vm_min: dict[str, float], rocof_hz_s: float) -> None:
        ss, f0 = self.system, self.f0_hz
        v = ss.Bus.v.v
        for eid, load in self.loads.items():
            vm = float(v[self.bus_uid[eid]])
            if eid in self.native_uid:
                n = self.native_uid[eid]
                on = float(ss.PERC1.SH.on[n])  # 0 once the frequency trip has acted
                p_share, q_share = float(ss.PERC1.LP_y.v[n]) * on, float(ss.PERC1.LQ_y.v[n]) * on
                p_served_mw = float(ss.PERC1.p0.v[n]) * p_share * S_BASE_MVA
            else:
                p_share = q_share = 1.0
                p_served_mw = float(ss.PQ.Req.v[self.uid[eid]]) * vm * vm * S_BASE_MVA
            self.out[eid] = {"p_mw": load["p_mw"], "q_mvar": load["q_mvar"], "p_served_mw": p_served_mw, "vm_pu": vm, "vm_min_pu": vm_min[eid],
                             "f_hz": float(ss.BusFreq.f.v[self.bf_uid[eid]]) * f0,
                             "rocof_hz_s": rocof_hz_s, "p_connected_frac": p_share, "q_connected_frac": q_share}
        if self.grid_eid is None:
            return
        delta = np.degrees([m.delta.v[i] for m, i in self.machines])
        pe = np.array([m.Pe.v[i] for m, i in self.machines])
        pq = ss.PQ
        p_load = float((pq.Req.v * v[ss.Bus.idx2uid(pq.bus.v)] ** 2).sum()) * S_BASE_MVA
        p_load += sum(self.out[eid]["p_served_mw"] for eid in self.native_uid)
        out = {"f_hz": self.f_coi_hz, "f_nadir_hz": self.f_min_hz, "f_zenith_hz": self.f_max_hz,
               "rocof_hz_s": rocof_hz_s, "vm_min_pu": float(v.min()), "vm_max_pu": float(v.max()),
               "delta_spread_deg": float(delta.max() - delta.min()), "p_load_mw": p_load,
               "p_gen_mw": float(pe.sum()) * S_BASE_MVA}
        for g, (m, i), pe_i in zip(self.info["gens"], self.machines, pe):
            out[f"gen_{sanitise(g)}_f_hz"] = float(m.omega.v[i]) * f0
            out[f"gen_{sanitise(g)}_p_mw"] = float(pe_i) * S_BASE_MVA
        for b, vb in zip(self.info["buses"], v):
            out[f"bus_{sanitise(b)}_vm_pu"] = float(vb)
        self.out[self.grid_eid] = out
