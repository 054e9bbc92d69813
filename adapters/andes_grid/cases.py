"""An ANDES case: reading it (a shipped case, an ANDES file, or a PSS/E RAW or MATPOWER case with its
DYR), what in its dynamic data the run cannot use, its buses and machines, and the integration step.

ANDES itself is imported on first use (sympy and its generated code: ~0.4 s).
"""

from __future__ import annotations

import difflib
import logging
import math
import tempfile
from collections import Counter
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

import cosim.adapters.andes_grid.perc1_record as record

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


def _andes():
    import andes  # noqa: PLC0415 — sympy/numba code: ~0.4 s, only for scenarios that use this adapter
    # its errors come back as ours; no debug log file (ANDES writes one by default: ~14 % of a sub-step); a log
    # path given, as without one ANDES makes a new empty /tmp/andes-* folder at every call, file or not
    andes.config_logger(stream_level=logging.CRITICAL, file=False, log_path=tempfile.gettempdir())
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
