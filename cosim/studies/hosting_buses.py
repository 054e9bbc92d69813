"""The buses of a hosting-capacity study: where the load goes, and whose voltages are checked.

:func:`feeder_bus_table` lists a grid's buses on either engine (pandapower: ``net.bus``;
OpenDSS: every bus of the compiled circuit) with their nominal voltage, phases and whether the
grid leaves them out of its all-bus voltage outputs by default (the slack / source bus and the
terminals of regulator transformers). :class:`VoltageBuses` says which of them the voltage
criterion applies to:

* every bus the grid monitors (the default: all but the source and regulator terminals);
* ``primary``: the distribution primary, buses of nominal 1 to 35 kV line to line (ANSI C84.1's
  medium-voltage class tops at 34.5 kV), so 120/240 V secondaries and a transmission-level
  source bus are out;
* a nominal-voltage range (``kv_min``/``kv_max``, line to line) [kV];
* a list of bus names.

The study passes the complement to the grid as ``exclude_buses``, so the grid's
``allbus_vm_min_pu``/``allbus_vm_max_pu`` are taken over exactly the chosen buses.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from cosim import grid_models
from cosim.adapters.grid.backend import opendss_circuit_info
from cosim.adapters.grid.pandapower_flow import element_ids
from cosim.errors import Problem, ScenarioError, few
from cosim.scenario import Scenario

#: The distribution primary's nominal voltages, line to line (ANSI C84.1 medium voltage). [kV]
PRIMARY_KV = (1.0, 35.0)


@dataclass(frozen=True)
class FeederBus:
    """One bus of a grid, as a study sees it."""

    ref: str | int          # what ``bus`` / ``exclude_buses`` take: its name (pandapower: or its id)
    id: str                 # its id in the grid's outputs (``bus_<id>_vm_pu``)
    vn_kv: float            # nominal line-to-line voltage (NaN when the file gives none) [kV]
    phases: str             # "abc", "a", ... ("abc" on the balanced pandapower engine)
    source: bool            # slack / source bus or regulator terminal (left out by default)


@dataclass(frozen=True)
class VoltageBuses:
    """Which buses the voltage criterion applies to (see the module docstring).

    ``names`` wins when given; else ``primary`` and the kV range (intersected) filter every bus
    but the source and regulator terminals. Nothing given: the grid's own monitored buses.
    """

    names: tuple[str, ...] = ()
    primary: bool = False
    kv_min: float | None = None
    kv_max: float | None = None

    @classmethod
    def parse(cls, spec: Any, where: str = "voltage_buses") -> VoltageBuses:
        """From a study file's or the CLI's value: ``"all"``, ``"primary"``, ``"NAME,NAME"``, a list of
        names, or a table ``{kv_min = 1.0, kv_max = 35.0}`` (either bound may be left out).

        Raises:
            ScenarioError: naming the value and the forms accepted.
        """
        if spec is None or spec == "all":
            return cls()
        if spec == "primary":
            return cls(primary=True)
        if isinstance(spec, str) and spec.strip():
            return cls(names=tuple(n.strip() for n in spec.split(",") if n.strip()))
        if isinstance(spec, list) and spec and all(isinstance(n, (str, int)) and not isinstance(n, bool)
                                                   for n in spec):
            return cls(names=tuple(str(n) for n in spec))
        if isinstance(spec, dict) and spec and set(spec) <= {"kv_min", "kv_max"}:
            bounds = {k: v for k, v in spec.items()}
            if all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0
                   for v in bounds.values()):
                made = cls(kv_min=bounds.get("kv_min"), kv_max=bounds.get("kv_max"))
                made.check(where)
                return made
        raise ScenarioError(where, [Problem(where, 'give "all", "primary", a list of bus names, or a nominal '
                                                   'line-to-line range { kv_min = 1.0, kv_max = 35.0 } [kV]', spec)])

    def check(self, where: str = "voltage_buses") -> None:
        if self.kv_min is not None and self.kv_max is not None and self.kv_min > self.kv_max:
            raise ScenarioError(where, [Problem(where, "kv_min is above kv_max", (self.kv_min, self.kv_max))])

    @property
    def is_default(self) -> bool:
        return not self.names and not self.primary and self.kv_min is None and self.kv_max is None

    def bounds_kv(self) -> tuple[float, float]:
        """The nominal line-to-line range chosen (``primary`` and ``kv_min``/``kv_max`` intersected). [kV]"""
        low, high = PRIMARY_KV if self.primary else (0.0, math.inf)
        return (max(low, self.kv_min if self.kv_min is not None else 0.0),
                min(high, self.kv_max if self.kv_max is not None else math.inf))

    def describe(self) -> str:
        if self.names:
            return f"buses {few(list(self.names), 6)}"
        if self.is_default:
            return "every bus but the source and regulator terminals"
        low, high = self.bounds_kv()
        span = f"{low:g}-{high:g} kV" if math.isfinite(high) else f"{low:g} kV and up"
        return f"{'primary ' if self.primary else ''}buses of nominal {span} line to line"

    def select(self, buses: list[FeederBus], network: str) -> list[FeederBus]:
        """The chosen buses of ``buses``.

        Raises:
            ScenarioError: a name the grid does not have, or a choice that leaves no bus.
        """
        where = "voltage_buses"
        if self.names:
            by_name = {str(b.ref).lower(): b for b in buses}
            unknown = [n for n in self.names if n.lower() not in by_name]
            if unknown:
                known, missing = [str(b.ref) for b in buses], [repr(u) for u in unknown]
                raise ScenarioError(where, [Problem(where, f"{network} has no bus {few(missing, 6)}; its buses: "
                                                           f"{few(known, 8)}", list(self.names))])
            return [by_name[n.lower()] for n in self.names]
        low, high = self.bounds_kv()
        chosen = [b for b in buses if not b.source and low <= b.vn_kv <= high]
        if not chosen:
            levels = sorted({round(b.vn_kv, 3) for b in buses if not math.isnan(b.vn_kv)})
            raise ScenarioError(where, [Problem(where, f"{network} has none of the {self.describe()}; its nominal "
                                                       f"voltages: {', '.join(f'{v:g}' for v in levels)} kV")])
        return chosen

    def exclude_override(self, buses: list[FeederBus], network: str) -> list[str] | None:
        """The grid's ``exclude_buses`` that leaves exactly the chosen buses; None for the default."""
        if self.is_default:
            return None
        chosen = {id(b) for b in self.select(buses, network)}
        return [str(b.ref) for b in buses if id(b) not in chosen]


def grid_sim_params(scn: Scenario, grid_entity: str) -> tuple[str, dict[str, Any]]:
    """The grid sim's id and validated params."""
    sim = scn.entities[grid_entity].sim
    return sim, scn.sim_params[sim]


def feeder_bus_table(scn: Scenario, grid_entity: str) -> list[FeederBus]:
    """Every bus of the grid of ``grid_entity`` (see the module docstring)."""
    _, params = grid_sim_params(scn, grid_entity)
    if params.get("engine", "pandapower") == "opendss":
        info = opendss_circuit_info(grid_models.dss_file(params["network"], scn.base_dir))
        skip = {*info.source_buses, *info.reg_buses}
        kv = info.bus_kv_base or (0.0,) * len(info.buses)
        return [FeederBus(name, bus_id, kv_ln * math.sqrt(3) if kv_ln > 0 else math.nan, phases, pos in skip)
                for pos, (name, bus_id, phases, kv_ln) in enumerate(zip(info.buses, info.ids["bus"], info.bus_phases,
                                                                         kv))]
    net = grid_models.load_network(params["network"], scn.base_dir, **params.get("network_params", {}))
    slack = set(net.ext_grid.bus) | (set(net.gen.bus[net.gen.slack]) if "slack" in net.gen else set())
    names = list(net.bus.name)
    unique = all(isinstance(n, str) and n for n in names) and len(set(names)) == len(names)
    ids = element_ids(net.bus)
    return [FeederBus(net.bus.name.at[i] if unique else ids[pos], ids[pos], float(net.bus.vn_kv.at[i]), "abc",
                      i in slack)
            for pos, i in enumerate(net.bus.index)]


def placement_buses(buses: list[FeederBus], phases: str = "abc") -> list[str | int]:
    """Where a load of ``phases`` can go: every bus but the source and regulator terminals that has them."""
    return [b.ref for b in buses if not b.source and set(phases) <= set(b.phases)]


def grid_has_controls(scn: Scenario, grid_entity: str) -> bool:
    """Whether the grid moves its own taps or capacitors as the load grows (OpenDSS RegControls, or
    capacitors that CapControls may switch, with ``regulators = "auto"``): where violations may come
    and go with the load. The pandapower engine holds every tap and shunt where the network has them."""
    _, params = grid_sim_params(scn, grid_entity)
    if params.get("engine", "pandapower") != "opendss" or params.get("regulators", "auto") != "auto":
        return False
    info = opendss_circuit_info(grid_models.dss_file(params["network"], scn.base_dir))
    return bool(info.regs or info.caps)
