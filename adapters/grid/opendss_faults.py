"""Faults on an OpenDSS feeder, solved where they happen, and the voltages a campus sees per phase.

A fault is an OpenDSS ``Fault`` element (a resistance between conductors, or to ground) at a
named bus, present from ``t_s`` until it is cleared ``clearing_s`` later. The grid adapter's
OpenDSS engine (``faults = [...]`` in ``[sims.<grid>]``) adds one disabled ``Fault`` per entry
after compiling the circuit and, at each step, enables the faults whose interval holds the step's
start time ``[t_s, t_s + clearing_s)`` before it solves. Kinds (phases ``a``/``b``/``c`` = nodes 1/2/3):

* ``slg``: single line to ground, ``phases`` one phase (default ``a``):
  ``New Fault.<n> phases=1 bus1=<bus>.1 bus2=<bus>.0 r=<r_ohm>``;
* ``ll``: line to line, two phases (default ``ab``): ``phases=1 bus1=<bus>.1 bus2=<bus>.2``;
* ``llg``: two lines to ground, two phases (default ``ab``): ``phases=2 bus1=<bus>.1.2 bus2=<bus>.0.0``;
* ``3ph``: all three phases to ground: ``phases=3 bus1=<bus>.1.2.3 bus2=<bus>.0.0.0``.

While a fault is on, the step is solved with every load as a constant admittance (OpenDSS
``Set LoadModel=Admittance``: each load's kW/kvar at its rated voltage; a direct solve, no Newton
iterations, as OpenDSS's own fault studies model loads; constant-power loads do not converge
with a bolted fault on the feeder) and with the control loop off (``Set ControlMode=Off``:
regulators and capacitor controls act over seconds, not within a 100 ms fault, and must not
move their taps on the faulted voltages); the step after the clearing goes back to the
engine's power-flow load model and control mode. The voltages are those of a quasi-static
phasor solution: no DC offset, no transient of the clearing, and the network as a steady
state at every step (a step of 0.1 s or finer resolves a fault's duration; the clearing time is
rounded to steps).

A campus (any attached Load, Sgen, Storage) sees per step its bus's phase voltages ``va_pu``,
``vb_pu``, ``vc_pu`` (phase to neutral, in pu of the bus's base; NaN for a phase the bus lacks),
the positive-sequence voltage ``v1_pu`` = ``|Va + a·Vb + a²·Vc| / 3`` (a = e^{j2π/3}; on a
bus with fewer than three phases, the mean of its phases' magnitudes) and ``v_worst_pu``, the
phase voltage of the element's phases farthest from 1 pu (the lowest in a sag). Ride-through
logic (``adapters/ride_through.py``) acts on one of the two (``voltage_definition``).
"""

from __future__ import annotations

import cmath
import difflib
import math
from typing import Literal

from pydantic import Field, model_validator

from cosim.sdk import Params

#: the outputs every attached element of the OpenDSS engine reports [pu]
PHASE_OUTPUTS = ("va_pu", "vb_pu", "vc_pu", "v1_pu", "v_worst_pu")
PHASE_NODES = {"a": 1, "b": 2, "c": 3}
#: phases each kind of fault takes, and the default when ``phases`` is not given
KIND_PHASES = {"slg": (1, "a"), "ll": (2, "ab"), "llg": (2, "ab"), "3ph": (3, "abc")}
#: the rotation operator of symmetrical components
A_OP = cmath.exp(2j * math.pi / 3)


class OpenDssFault(Params):
    """One fault of ``faults = [...]`` (grid sim, ``engine = "opendss"``).

    Attributes:
        bus: the OpenDSS bus name where the fault happens.
        kind: ``slg``, ``ll``, ``llg`` or ``3ph``.
        phases: the faulted phases (``a``, ``b``, ``c``); default ``a`` (slg), ``ab`` (ll, llg), ``abc`` (3ph).
        r_ohm: the fault resistance (per phase, to ground or between the phases). [ohm]
        t_s: when the fault starts, from the scenario start. [s]
        clearing_s: how long until protection clears it. [s]
    """

    bus: str
    kind: Literal["slg", "ll", "llg", "3ph"] = "slg"
    phases: str | None = None
    r_ohm: float = Field(default=0.01, ge=1e-4)
    t_s: float = Field(ge=0)
    clearing_s: float = Field(gt=0)

    @model_validator(mode="after")
    def _phases(self):
        count, default = KIND_PHASES[self.kind]
        if self.phases is None:
            self.phases = default
        text = self.phases.lower()
        if len(text) != count or set(text) - set("abc") or len(set(text)) != count:
            raise ValueError(f"a {self.kind} fault takes {count} distinct phase{'s' if count > 1 else ''} of "
                             f"a/b/c; got phases = {self.phases!r} (e.g. {default!r})")
        self.phases = "".join(sorted(text))
        return self

    @property
    def t_clear_s(self) -> float:
        return self.t_s + self.clearing_s


def fault_command(fault: OpenDssFault, name: str, bus: str) -> str:
    """The OpenDSS command that defines ``fault`` (disabled) as ``Fault.<name>`` at ``bus``."""
    nodes = [PHASE_NODES[p] for p in fault.phases]
    if fault.kind == "ll":
        bus1, bus2, n = f"{bus}.{nodes[0]}", f"{bus}.{nodes[1]}", 1
    else:
        n = len(nodes)
        bus1 = f"{bus}." + ".".join(str(k) for k in nodes)
        bus2 = f"{bus}." + ".".join("0" for _ in nodes)
    return f"New Fault.{name} phases={n} bus1={bus1} bus2={bus2} r={fault.r_ohm:g} enabled=no"


def fault_problems(faults: list[OpenDssFault], buses: list[str], bus_phases: list[str], step_s: float,
                   where: str = "faults") -> list[str]:
    """Each fault at an unknown bus (with the nearest names), on a phase its bus lacks, or cleared
    faster than the grid sim's step (the step could not see it): one problem each."""
    problems = []
    lower = {b.lower(): i for i, b in enumerate(buses)}
    for k, fault in enumerate(faults):
        key = f"{where}[{k}]"
        pos = lower.get(fault.bus.strip().lower())
        if pos is None:
            near = difflib.get_close_matches(fault.bus.strip().lower(), list(lower), n=4, cutoff=0.4)
            hint = f"nearest: {', '.join(buses[lower[n]] for n in near)}" if near else f"e.g. {', '.join(buses[:6])}"
            problems.append(f"{key}.bus = {fault.bus!r}: no such bus in the feeder ({hint}); give an OpenDSS bus name")
        else:
            missing = "".join(p for p in fault.phases if p not in bus_phases[pos])
            if missing:
                problems.append(f"{key}.phases = {fault.phases!r}: bus {buses[pos]!r} has phases "
                                f"{bus_phases[pos] or 'none'}, not {missing}; fault phases it has")
        if fault.clearing_s < step_s - 1e-9:
            problems.append(f"{key}.clearing_s = {fault.clearing_s:g}: shorter than the grid's step "
                            f"({step_s:g} s), so no step would see the fault; give clearing_s >= {step_s:g} s "
                            "or a finer step_s for the grid sim")
    return problems


class FaultSchedule:
    """The faults of one OpenDSS circuit: defined once, switched on and off by the simulation clock."""

    def __init__(self, dss, faults: list[OpenDssFault], buses: list[str]):
        self.dss = dss
        lower = {b.lower(): b for b in buses}
        self.faults = list(faults)
        self.names = [f"cosim_fault_{k}" for k in range(len(self.faults))]
        self.on = [False] * len(self.faults)
        for fault, name in zip(self.faults, self.names):
            bus = lower.get(fault.bus.strip().lower())
            if bus is None:
                raise ValueError(f"fault at unknown bus {fault.bus!r}")
            dss.Text.Command(fault_command(fault, name, bus))

    def active(self, time_s: float) -> list[bool]:
        """Which faults hold the step starting at ``time_s``: ``t_s <= time_s < t_s + clearing_s``."""
        return [f.t_s - 1e-9 <= time_s < f.t_clear_s - 1e-9 for f in self.faults]

    def apply(self, time_s: float, control_mode: str = "static") -> bool:
        """Enable and disable the faults for the step at ``time_s`` (and switch the solution options
        when the feeder turns faulted or healthy: :func:`set_fault_solution`); True while any fault is on."""
        was = any(self.on)
        for k, now in enumerate(self.active(time_s)):
            if now != self.on[k]:
                self.dss.Text.Command(f"Fault.{self.names[k]}.enabled={'yes' if now else 'no'}")
                self.on[k] = now
        if any(self.on) != was:
            set_fault_solution(self.dss, any(self.on), control_mode)
        return any(self.on)


def set_fault_solution(dss, faulted: bool, control_mode: str) -> None:
    """The solution options of a faulted step (loads as admittances, controls off), or back to the
    power flow's (constant-power loads; ``control_mode`` ``static`` or ``time``)."""
    if faulted:
        dss.Text.Command("Set LoadModel=Admittance")
        dss.Text.Command("Set ControlMode=Off")
    else:
        dss.Text.Command("Set LoadModel=PowerFlow")
        dss.Text.Command(f"Set ControlMode={'Time' if control_mode == 'time' else 'Static'}")


def bus_phase_voltages(dss, bus: str) -> dict[str, complex]:
    """The complex phase-to-neutral voltages of ``bus``'s phase nodes, in pu of its base, by phase."""
    dss.Circuit.SetActiveBus(bus)
    base_v = float(dss.Bus.kVBase()) * 1e3
    raw = dss.Bus.Voltages()
    nodes = dss.Bus.Nodes()
    out = {}
    for k, node in enumerate(nodes):
        phase = {1: "a", 2: "b", 3: "c"}.get(int(node))
        if phase and base_v > 0:
            out[phase] = complex(raw[2 * k], raw[2 * k + 1]) / base_v
    return out


def phase_outputs(phasors: dict[str, complex], element_phases: str) -> dict[str, float]:
    """``va_pu``, ``vb_pu``, ``vc_pu``, ``v1_pu`` and ``v_worst_pu`` (see the module docstring). [pu]"""
    out = {f"v{p}_pu": abs(phasors[p]) if p in phasors else math.nan for p in "abc"}
    if all(p in phasors for p in "abc"):
        out["v1_pu"] = abs(phasors["a"] + A_OP * phasors["b"] + A_OP * A_OP * phasors["c"]) / 3.0
    else:
        mags = [abs(v) for v in phasors.values()]
        out["v1_pu"] = sum(mags) / len(mags) if mags else math.nan
    own = [abs(phasors[p]) for p in element_phases if p in phasors]
    out["v_worst_pu"] = max(own, key=lambda v: abs(v - 1.0)) if own else math.nan
    return out
