"""The interface every grid engine offers the grid adapter, and the OpenDSS engine's metadata.

The grid adapter (``adapters/grid/``) drives an engine through :class:`GridBackend`;
``PowerFlow`` (pandapower/lightsim2grid, ``pandapower_flow.py``) and ``OpenDssFlow``
(``opendss_flow.py``) implement it. Adding an engine is one class with these members
plus a branch in ``GridSim.setup``/``meta_for``.
"""

from __future__ import annotations

import dataclasses
import math
from functools import lru_cache
from pathlib import Path
from typing import Protocol

import numpy as np

from cosim.adapters.grid.opendss_flow import circuit_info, compile_circuit, device_attrs, isolated_buses, new_engine


class GridBackend(Protocol):
    """What the grid adapter needs from an engine (element positions are per kind)."""

    #: attribute ids of ``bus``, ``line`` and ``trafo`` (and engine extras), in result order
    ids: dict[str, list[str]]
    #: tabulated element powers by kind (``load``, ``sgen``, ``storage``) [MW], [Mvar]
    p0: dict[str, np.ndarray]
    q0: dict[str, np.ndarray]
    #: results of the last converged solve: per bus [pu], per line/trafo [%], totals [MW]
    vm_pu: np.ndarray
    line_loading_pct: np.ndarray
    trafo_loading_pct: np.ndarray
    p_import_mw: float
    q_import_mvar: float
    losses_mw: float

    def attach(self, kind: str, bus: str | int, p_mw: float, q_mvar: float, name: str) -> int:
        """A new element at ``bus`` (the OpenDSS engine also takes ``phases="abc"``)."""
    def locate(self, kind: str, ref: str | int) -> int: ...
    def bus_of(self, kind: str, pos: int) -> int: ...
    def element_vm_pu(self, kind: str, pos: int) -> float: ...
    def set_line_in_service(self, pos: int, in_service: bool) -> None: ...
    def n_lines_out(self) -> int: ...
    def solve(self, p_mw: dict[str, np.ndarray], q_mvar: dict[str, np.ndarray]) -> bool:
        """True when converged (the OpenDSS engine also takes ``time_s``, its control clock)."""


def phase_set(value: str) -> str:
    """A grid element's phases: ``"abc"`` (balanced three-phase) or a subset of a, b, c, in any case
    and order, returned lower case in a-b-c order; a ValueError saying what to give otherwise."""
    text = value.strip().lower()
    if not text or set(text) - set("abc") or len(set(text)) != len(text):
        raise ValueError("give 'abc' (balanced three-phase) or a subset of a, b, c such as 'a' or 'bc'")
    return "".join(ph for ph in "abc" if ph in text)


def opendss_circuit_info(path: str | Path):
    """Buses, phases and devices of an OpenDSS file (cached per file and modification time)."""
    return _compiled(*_file_key(path))[0]


@dataclasses.dataclass(frozen=True)
class CircuitSize:
    """What bounds a circuit's inputs: the Σ |kW| of its loads and generators, each regulator's
    tap range from neutral (MinTap..MaxTap, in ``CircuitInfo.regs`` order) and each capacitor's
    number of steps (in ``CircuitInfo.caps`` order). [MW, steps]"""

    tabulated_mw: float
    tap_ranges: tuple[tuple[int, int], ...]
    cap_steps: tuple[int, ...]


def opendss_circuit_size(path: str | Path) -> CircuitSize:
    """The size of an OpenDSS file's circuit, read by the engine that read its info (DSS-Python never
    frees an engine: ~1.5 MiB each), cached with it."""
    return _compiled(*_file_key(path))[1]


def _file_key(path: str | Path) -> tuple[str, int]:
    path = Path(path).resolve()
    return str(path), path.stat().st_mtime_ns if path.is_file() else 0


@lru_cache(maxsize=16)
def _compiled(path: str, _mtime_ns: int):
    dss = new_engine()
    compile_circuit(dss, Path(path))
    info = circuit_info(dss)
    size = _circuit_size(dss, info)  # the file's own values, before the solve below
    return dataclasses.replace(info, isolated_buses=isolated_buses(dss, info.buses)), size


def _circuit_size(dss, info) -> CircuitSize:
    total_kw = 0.0
    for table in (dss.Loads, dss.Generators):
        for name in table.AllNames() if table.Count() else []:
            table.Name(name)
            total_kw += abs(table.kW())
    taps = []
    for reg in info.regs:
        dss.RegControls.Name(reg)
        dss.Transformers.Name(dss.RegControls.Transformer())
        dss.Transformers.Wdg(dss.RegControls.TapWinding())
        low, high, n = dss.Transformers.MinTap(), dss.Transformers.MaxTap(), dss.Transformers.NumTaps()
        step = (high - low) / n
        taps.append((math.ceil((low - 1) / step - 1e-9), math.floor((high - 1) / step + 1e-9)))
    caps = []
    for cap in info.caps:
        dss.Capacitors.Name(cap)
        caps.append(dss.Capacitors.NumSteps())
    return CircuitSize(total_kw / 1000.0, tuple(taps), tuple(caps))


def opendss_grid_outputs(info) -> list[str]:
    """The Grid outputs the OpenDSS engine adds to the common ones."""
    return ["n_tap_changes", *(attr for group in device_attrs(info) for attr in group)]
