"""The grid adapter's OpenDSS engine: an unbalanced three-phase feeder solved each step.

:class:`OpenDssFlow` compiles an OpenDSS circuit (``grid_models/*.dss`` or any user file)
in its own DSS-Extensions engine context (``opendssdirect.py``), so several grid sims in
one process never share a circuit. Per step it writes the attached elements' kW/kvar and
runs OpenDSS's snapshot solution with its control loop (regulator taps, capacitor
controls); results are read back in bulk.

What it reports, named like the pandapower engine (ids are OpenDSS names sanitised to
``[a-z0-9_]``):

* ``vm_pu`` per bus: the mean of its phase-to-neutral voltage magnitudes, in pu of the
  bus's base voltage (OpenDSS ``Set VoltageBases``); ``phase_vm_pu`` per bus and phase
  (``a``, ``b``, ``c`` = nodes 1, 2, 3; neutral and other nodes are ignored).
  ``vm_min_pu``/``vm_max_pu`` are the extremes over every phase, not over the means.
* line and transformer loading: the largest conductor current at terminal 1 as a
  percentage of the element's normal rating (OpenDSS ``normamps``; ``normhkva`` for
  transformers), as OpenDSS's ``export capacity`` computes it.
* ``p_import_mw``/``q_import_mvar``: power delivered by the circuit's source;
  ``losses_mw``: losses of every power-delivery element (lines, transformers, regulators).
  Loadings and losses come from the elements' currents, computed as OpenDSS computes them
  (from each element's Yprim, in C) or read from OpenDSS in bulk, equal to the bit to OpenDSS's
  own reads (:mod:`.opendss_reads`); so do the voltage magnitudes.
* regulators (transformers driven by a RegControl): tap position [steps from neutral]
  and tap ratio [pu]; capacitors: in service (any step closed) and Mvar delivered.

Attached elements (the adapter's Load, Sgen and Storage) are OpenDSS loads at a named bus,
Y-connected: one three-phase load for ``phases="abc"``, one single-phase load per phase
otherwise (the power split equally between the phases). By default they are OpenDSS's
default load: constant power (``model=1``) between ``vminpu = 0.95`` and ``vmaxpu = 1.05``,
constant impedance outside (OpenDSS's own defaults, so an attached element behaves as a load
written in any ``.dss`` file does, and as OpenG2G's datacenter loads do); ``load_model``,
``vmin_pu`` and ``vmax_pu`` change them per element. Below ``vmin_pu`` OpenDSS serves the
element as an impedance: the feeder then carries ``p_mw · (v / vmin_pu)²``, less than the
element's ``p_mw`` (which reports the setpoint; ``p_import_mw`` shows what the feeder
carried; the adapter's ``p_served_mw`` output is what the element drew, and the run's guards warn
when 1 % or more of an element's energy went unserved). cosim used 0.5-1.5 pu before 2026-12. A
generator is a load with negative power.

Monitored bus-phases (the all-bus voltage outputs of the grid adapter): every phase node of
every bus except the circuit's source bus(es) (the buses of its Vsources) and both terminal
buses of every regulator transformer (those a RegControl drives), as OpenG2G excludes
``sourcebus``, ``650`` and ``rg60`` on IEEE 13 (:meth:`OpenDssFlow.default_excluded_buses`).
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from cosim.adapters.grid.opendss_guard import dss_file_problems, quoted, refusal
from cosim.adapters.grid.opendss_reads import ACCELERATION, NodeVolts, PdReads
from cosim.adapters.grid.pandapower_tables import sanitise  # the one id rule of both engines

PHASE_NODES = {"a": 1, "b": 2, "c": 3}
NODE_PHASE = {v: k for k, v in PHASE_NODES.items()}
KINDS = ("load", "sgen", "storage")
#: Sign turning an element's p_mw (consumer convention for load and storage) into load kW.
LOAD_SIGN = {"load": 1.0, "sgen": -1.0, "storage": 1.0}
#: Attached loads: constant power (model 1) inside [vminpu, vmaxpu], constant impedance outside;
#: OpenDSS's defaults (cosim used 0.5-1.5 pu before 2026-12). [-, pu, pu]
LOAD_MODEL, V_MIN_PU, V_MAX_PU = 1, 0.95, 1.05
#: Power-flow iterations per solve (OpenDSS's default is 15). [-]
MAX_ITERATIONS = 30
#: Below this a node counts as de-energised (OpenDSS leaves ~1e-100 pu on isolated buses). [pu]
ISOLATED_PU = 1e-6


def unique_ids(names: list[str]) -> list[str]:
    """Sanitised ids, made unique with a numeric suffix where two names sanitise alike."""
    ids, seen = [], {}
    for name in names:
        base = sanitise(name) or "x"
        n = seen.get(base, 0)
        seen[base] = n + 1
        ids.append(base if n == 0 else f"{base}_{n}")
    return ids


def new_engine():
    """A fresh DSS-Extensions engine context that never changes the working directory.

    DSS-Python keeps every context it creates until the process ends (its registries of contexts,
    ``WeakKeyDictionary`` objects whose values hold their keys, never let one go): ~1.5 MiB each
    on IEEE 8500, so a process running a feeder many times grows by that much per run.
    """
    import opendssdirect  # loads the DSS C-API library: only for the OpenDSS engine

    dss = opendssdirect.NewContext()
    dss.Basic.AllowChangeDir(False)
    return dss


@dataclass
class _Element:
    """An attached (or driven) element: its OpenDSS loads and the share of power each takes."""

    kind: str
    bus_pos: int
    phases: str
    loads: list[str]
    shares: list[float]
    nodes: list[int] = field(default_factory=list)  # positions in the node voltage vector


@dataclass(frozen=True)
class CircuitInfo:
    """What validation needs to know about a circuit: its buses, phases and elements."""

    buses: list[str]
    bus_phases: list[str]
    lines: list[str]
    trafos: list[str]
    regs: list[str]
    caps: list[str]
    loads: list[str]
    #: positions (in ``buses``) of the Vsources' buses and of the regulator transformers' terminals
    source_buses: tuple[int, ...] = ()
    reg_buses: tuple[int, ...] = ()
    #: lines (not switches) whose file gives no ampacity: OpenDSS rates them at its default 400 A
    #: (a LineCode or a bare Line) or at 0 A (a LineGeometry whose wires have none)
    unrated_lines: tuple[str, ...] = ()
    #: base voltage of each bus, in ``buses`` order (0: none, the file sets no VoltageBases for it) [kV]
    bus_kv_base: tuple[float, ...] = ()
    #: positions (in ``buses``) of the buses left without a source in the file's own solve (filled
    #: by validation, which solves the file once: :func:`isolated_buses`)
    isolated_buses: tuple[int, ...] = ()

    @functools.cached_property
    def ids(self) -> dict[str, list[str]]:
        return {"bus": unique_ids(self.buses), "line": unique_ids(self.lines), "trafo": unique_ids(self.trafos),
                "reg": unique_ids(self.regs), "cap": unique_ids(self.caps)}


def compile_circuit(dss, path: Path) -> None:
    """Compile ``path`` into engine ``dss``; raise ValueError with OpenDSS's message on failure
    (and before OpenDSS sees it, when the file holds a command that writes files or runs programs)."""
    if not path.is_file():
        raise ValueError(f"OpenDSS file not found: {path}")
    unsafe = dss_file_problems(path)
    if unsafe:
        raise ValueError(refusal(path, unsafe))
    try:
        dss.Text.Command("Clear")
        dss.Text.Command(f"Compile {quoted(path)}")
    except Exception as exc:  # DSSException: a syntax or reference error in the file
        text = " ".join(str(exc).split())  # OpenDSS's message spans lines: one line, whole (its reason comes last)
        raise ValueError(f"{path.name}: OpenDSS cannot compile it: {text}") from exc
    try:
        name = dss.Circuit.Name()
    except Exception:  # DSSException "There is no active circuit!" (an empty file, one without a circuit)
        name = ""
    if not name:
        raise ValueError(f"{path.name}: defines no circuit (it needs a 'New Circuit.<name>' line)")
    if dss.Circuit.NumBuses() == 0:
        dss.Solution.Solve()


def circuit_info(dss) -> CircuitInfo:
    """Buses (with their phases a/b/c), lines, non-regulator transformers, regulators, capacitors."""
    buses, phases, kv_base = [], [], []
    for name in dss.Circuit.AllBusNames():
        dss.Circuit.SetActiveBus(name)
        buses.append(name)
        phases.append("".join(NODE_PHASE[n] for n in sorted(dss.Bus.Nodes()) if n in NODE_PHASE))
        kv_base.append(float(dss.Bus.kVBase()))
    regs = list(dss.RegControls.AllNames()) if dss.RegControls.Count() else []
    reg_trafos = set()
    for reg in regs:
        dss.RegControls.Name(reg)
        reg_trafos.add(dss.RegControls.Transformer().lower())
    all_trafos = dss.Transformers.AllNames() if dss.Transformers.Count() else []
    trafos = [t for t in all_trafos if t.lower() not in reg_trafos]
    position = {b.lower(): i for i, b in enumerate(buses)}
    sources = [f"vsource.{n}" for n in (dss.Vsources.AllNames() if dss.Vsources.Count() else [])]
    return CircuitInfo(
        buses=buses, bus_phases=phases,
        lines=list(dss.Lines.AllNames()) if dss.Lines.Count() else [],
        trafos=trafos, regs=regs,
        caps=list(dss.Capacitors.AllNames()) if dss.Capacitors.Count() else [],
        loads=list(dss.Loads.AllNames()) if dss.Loads.Count() else [],
        source_buses=_terminal_buses(dss, sources, position, first_only=True),
        reg_buses=_terminal_buses(dss, [f"transformer.{t}" for t in sorted(reg_trafos)], position),
        unrated_lines=unrated_lines(dss),
        bus_kv_base=tuple(kv_base),
    )


def isolated_buses(dss, buses: list[str]) -> tuple[int, ...]:
    """Positions of the buses that one solve of the compiled circuit leaves de-energised (every node
    at ~0 V: no path to a Vsource); empty when the circuit does not solve (the run says so then)."""
    try:
        dss.Solution.Solve()
        if not dss.Solution.Converged():
            return ()
    except Exception:  # a singular system: nothing can be said before the run
        return ()
    # every node's voltage magnitude in one read (AllBusVmag follows AllNodeNames' order), the
    # highest per bus: the same magnitudes Bus.VMagAngle gives bus by bus [V]
    highest: dict[str, float] = {}
    volts = dss.to_dss_python().ActiveCircuit.AllBusVmag.tolist()
    for node, v in zip(dss.Circuit.AllNodeNames(), volts):
        bus = node.rpartition(".")[0].lower()
        if v > highest.get(bus, -1.0):
            highest[bus] = v
    return tuple(pos for pos, name in enumerate(buses)
                 if name.lower() in highest and highest[name.lower()] < ISOLATED_PU)


#: OpenDSS's ampacity of a line or line code that is given none. [A]
DSS_DEFAULT_NORMAMPS = 400.0


def unrated_lines(dss) -> tuple[str, ...]:
    """The lines of the compiled circuit whose rating the file never gives (switches excepted).

    OpenDSS rates such a line itself: 400 A for a ``LineCode`` without ``normamps`` or a bare
    ``Line``, 0 A for a ``LineGeometry`` whose wires have none, so its loading KPIs measure
    OpenDSS's default, not a conductor. What the file set is read from the circuit's JSON
    export (DSS-Extensions writes only the properties a script set); a line that carries its
    code's default 400 A counts as unrated even if the script repeats ``normamps=400`` on it.
    """
    try:
        circuit = json.loads(dss.Circuit.ToJSON(0))
    except Exception:  # an engine without the JSON export: nothing can be said
        return ()
    named = {kind: {str(e.get("Name", "")).lower(): e for e in circuit.get(kind, [])}
             for kind in ("LineCode", "LineGeometry", "WireData", "CNData", "TSData")}

    def wire_rated(ref: str) -> bool:
        kind, _, name = ref.partition(".")
        return "NormAmps" in named.get(kind, {}).get(name.lower(), {})

    found = []
    for line in circuit.get("Line", []):
        if line.get("Switch"):
            continue
        code, geometry = line.get("LineCode"), line.get("Geometry")
        if code:
            rated = ("NormAmps" in named["LineCode"].get(str(code).lower(), {})
                     or line.get("NormAmps", DSS_DEFAULT_NORMAMPS) != DSS_DEFAULT_NORMAMPS)
        elif geometry:
            geo = named["LineGeometry"].get(str(geometry).lower(), {})
            rated = "NormAmps" in geo or all(wire_rated(str(w)) for w in geo.get("Conductors", ["?"]))
        else:
            rated = "NormAmps" in line
        if not rated:
            found.append(str(line.get("Name", "")))
    return tuple(found)


def _terminal_buses(dss, elements: list[str], position: dict[str, int], first_only: bool = False) -> tuple[int, ...]:
    """Positions of the buses the named circuit elements connect (only the first terminal's: sources)."""
    found: list[int] = []
    for element in elements:
        dss.Circuit.SetActiveElement(element)
        names = dss.CktElement.BusNames()
        for name in names[:1] if first_only else names:
            pos = position.get(name.split(".")[0].lower())
            if pos is not None and pos not in found:
                found.append(pos)
    return tuple(sorted(found))


class OpenDssFlow:
    """An OpenDSS circuit solved repeatedly with only attached element powers changing.

    Args:
        path: the circuit's ``.dss`` file.
        regulators: ``"auto"`` (OpenDSS RegControls move the taps) or ``"fixed"`` (every
            regulator held at its position in ``tap_positions``, else at its initial tap).
        tap_positions: tap positions [steps from neutral] by regulator (RegControl) name.
        control_mode: ``"static"`` (controls settle within every solve: a sequence of steady
            states) or ``"time"`` (OpenDSS's time-based control queue: each RegControl waits its
            ``Delay``, then moves one tap per ``TapDelay``; the clock is the simulation time).
            In ``"time"`` mode the first solve settles the controls statically, as a feeder in
            steady state before the study starts.
        max_control_iterations: OpenDSS control iterations per solve (tap moves). [-]
        info: what :func:`circuit_info` reads from this file once compiled, when the caller has it
            already (it takes ~0.5 s on IEEE 8500); None: read it here.
    """

    def __init__(self, path: str | Path, regulators: str = "auto", tap_positions: dict[str, int] | None = None,
                 control_mode: str = "static", max_control_iterations: int = 50,
                 info: CircuitInfo | None = None) -> None:
        if control_mode not in ("static", "time"):
            raise ValueError(f"control_mode = {control_mode!r}: give 'static' or 'time'")
        self.control_mode = control_mode
        self._solved_once = False
        self.path = Path(path)
        self.dss = dss = new_engine()
        # the same engine through DSS-Python, whose bulk reads are numpy arrays (opendssdirect's are
        # lists: building and converting a list of 8,531 voltages took longer than reading them)
        self._arrays = dss.to_dss_python().ActiveCircuit
        compile_circuit(dss, self.path)
        dss.Solution.MaxControlIterations(max_control_iterations)
        dss.Solution.MaxIterations(MAX_ITERATIONS)
        self._restart = False
        #: the control loop is held off (a fault is on: adapters/grid/opendss_faults.py)
        self.controls_held = False
        self.info = info if info is not None else circuit_info(dss)
        self.ids = self.info.ids
        self.bus_phases = self.info.bus_phases
        self._bus_index = {b.lower(): i for i, b in enumerate(self.info.buses)}
        self.elements: dict[str, list[_Element]] = {k: [] for k in KINDS}
        self.p0: dict[str, np.ndarray] = {k: np.zeros(0) for k in KINDS}
        self.q0: dict[str, np.ndarray] = {k: np.zeros(0) for k in KINDS}
        self._regs_fixed = regulators == "fixed"
        self._held_taps: dict[int, int | None] = {}
        self._caps_owned: set[int] = set()
        #: each owned capacitor's states and the CapControls disabled when an input took it (release_cap)
        self._caps_before: dict[int, tuple[list[int], list[str]]] = {}
        self._fix_taps(tap_positions or {})
        self._node_map_stale = True
        self._attrs = device_attrs(self.info)
        self.n_tap_changes = 0
        self._last_taps: np.ndarray | None = None
        self._reg_windings: list[tuple[str, int]] | None = None
        #: taps or capacitor steps may have moved outside a solve's control loop: read them after the next
        self._devices_stale = True
        nan = math.nan
        self.vm_pu = np.full(len(self.info.buses), nan)
        self.node_vm_pu = np.zeros(0)
        #: the loadings and losses of a solve that has not settled yet: read when first asked (_read_currents)
        self._currents_pending = False
        #: a PD element's Yprim may have changed since the currents were last read: an edit of the circuit
        #: by any path (OpenDSS flags it: :meth:`solve`), a failed solve or one whose control loop acted (it ran
        #: more than one iteration), a new reader (:meth:`_map_nodes`)
        self._y_changed = True
        self._unknown = (np.full(len(self.info.lines), nan), np.full(len(self.info.trafos), nan), nan)
        self._line_loading_pct, self._trafo_loading_pct, self._losses_mw = self._unknown
        self.tap_count = np.full(len(self.info.regs), nan)
        self.tap_pu = np.full(len(self.info.regs), nan)
        self.cap_in_service = [False] * len(self.info.caps)
        self._opened_lines: set[int] = set()  # lines set_line_in_service opened
        self.cap_q_mvar = np.full(len(self.info.caps), nan)
        self.p_import_mw = self.q_import_mvar = nan

    # -- editing the circuit -----------------------------------------------------------------
    def locate_bus(self, ref: str | int) -> int:
        """Position of the bus named (case-insensitive) or sanitised-named ``ref`` (:func:`bus_position`)."""
        pos = bus_position(self.info, ref)
        if pos is None:
            raise ValueError(unknown_bus_message(str(ref).strip(), self.info.buses, self.path.name))
        return pos

    def attach(self, kind: str, bus: str | int, p_mw: float, q_mvar: float, name: str,
               phases: str = "abc", load_model: int = LOAD_MODEL, vmin_pu: float = V_MIN_PU,
               vmax_pu: float = V_MAX_PU) -> int:
        """Add an OpenDSS load for a ``kind`` element at ``bus`` on ``phases``; return its position.

        ``load_model`` is OpenDSS's load ``model`` (1 constant P and Q, 2 constant impedance,
        5 constant current, ...), held between ``vmin_pu`` and ``vmax_pu`` (constant impedance
        outside). [-, pu, pu]
        """
        self._read_currents()
        bus_pos = self.locate_bus(bus)
        bus_name = self.info.buses[bus_pos]
        have = self.bus_phases[bus_pos]
        missing = "".join(ph for ph in phases if ph not in have)
        if missing:
            raise ValueError(f"bus {bus_name!r} has phases {have or 'none'}, not {missing}; "
                             f"set phases to a subset of {have!r}")
        self.dss.Circuit.SetActiveBus(bus_name)
        kv_ln = self.dss.Bus.kVBase()
        if not kv_ln > 0:
            raise ValueError(f"bus {bus_name!r} has no base voltage: add it to 'Set VoltageBases' in {self.path.name}")
        stem = f"cosim_{sanitise(name)}_{sum(len(v) for v in self.elements.values())}"
        common = f"conn=wye model={int(load_model)} vminpu={vmin_pu:g} vmaxpu={vmax_pu:g} kw=0 kvar=0"
        if phases == "abc":
            loads = [stem]
            self.dss.Text.Command(
                f"New Load.{stem} bus1={bus_name}.1.2.3 phases=3 kv={kv_ln * math.sqrt(3):.6f} {common}")
        else:
            loads = [f"{stem}_{ph}" for ph in phases]
            for ph, load in zip(phases, loads):
                self.dss.Text.Command(
                    f"New Load.{load} bus1={bus_name}.{PHASE_NODES[ph]} phases=1 kv={kv_ln:.6f} {common}")
        shares = [1.0 / len(loads)] * len(loads)
        return self._register(_Element(kind, bus_pos, phases, loads, shares), p_mw, q_mvar)

    def locate(self, kind: str, ref: str | int) -> int:
        """Drive an existing OpenDSS load named ``ref`` (kind ``load`` only); return its position."""
        if kind != "load":
            raise ValueError(f"the opendss engine drives existing loads only; attach a new {kind} with bus=")
        names = {n.lower(): n for n in self.info.loads}
        ids = dict(zip(unique_ids(self.info.loads), self.info.loads))
        text = str(ref).strip()
        load = names.get(text.lower()) or ids.get(text)
        if load is None:
            sample = ", ".join(self.info.loads[:6])
            raise ValueError(f"unknown load {text!r} in {self.path.name} ({len(self.info.loads)} loads, "
                             f"e.g. {sample}); give an OpenDSS load name")
        self.dss.Loads.Name(load)
        p_mw, q_mvar = self.dss.Loads.kW() / 1e3, self.dss.Loads.kvar() / 1e3
        bus = self.dss.CktElement.BusNames()[0].split(".")[0]
        nodes = [int(n) for n in self.dss.CktElement.BusNames()[0].split(".")[1:] if n.isdigit()]
        phases = "".join(NODE_PHASE[n] for n in nodes if n in NODE_PHASE) or self.bus_phases[self.locate_bus(bus)]
        return self._register(_Element("load", self.locate_bus(bus), phases, [load], [1.0]), p_mw, q_mvar)

    def bus_of(self, kind: str, pos: int) -> int:
        return self.elements[kind][pos].bus_pos

    def element_vm_pu(self, kind: str, pos: int) -> float:
        """Mean voltage over the phases the element is connected to. [pu]"""
        nodes = self.elements[kind][pos].nodes
        return float(np.mean(self.node_vm_pu[nodes])) if nodes and len(self.node_vm_pu) else math.nan

    def element_served_mw(self, kind: str, pos: int) -> float:
        """Active power the element's OpenDSS loads drew in the last solve, in the element's own sign
        (consumer for load/storage, producer for sgen). Below a load's ``vminpu`` OpenDSS serves it as
        an impedance, so this falls short of the setpoint. [MW]"""
        dss, total_kw = self.dss, 0.0
        for name in self.elements[kind][pos].loads:
            dss.Circuit.SetActiveElement(f"Load.{name}")
            total_kw += float(dss.CktElement.TotalPowers()[0])
        return LOAD_SIGN[kind] * total_kw / 1e3

    def element_node_vm_pu(self, kind: str, pos: int) -> np.ndarray:
        """Voltage of each phase the element is connected to. [pu]"""
        nodes = self.elements[kind][pos].nodes
        return self.node_vm_pu[nodes] if nodes and len(self.node_vm_pu) else np.full(1, np.nan)

    @property
    def node_bus(self) -> np.ndarray:
        """Bus position of each entry of ``node_vm_pu`` (valid after the first converged solve)."""
        return self._node_bus if not self._node_map_stale else np.zeros(0, dtype=np.int64)

    def default_excluded_buses(self) -> list[int]:
        """Bus positions left out of the all-bus voltage outputs: source buses, regulator terminals."""
        return sorted({*self.info.source_buses, *self.info.reg_buses})

    @property
    def phase_attrs(self) -> list[str]:
        """``bus_<id>_<phase>_vm_pu`` of every phase node, in :meth:`phase_vm_pu`'s order."""
        return self._attrs[0]

    def phase_vm_pu(self) -> np.ndarray:
        """The last solve's voltage of every phase node, named by :attr:`phase_attrs`. [pu]"""
        if not len(self.node_vm_pu):
            return np.full(len(self.phase_attrs), np.nan)
        return np.append(self.node_vm_pu, np.nan)[self._phase_attr_nodes]

    def monitored_phase_attrs(self, exclude_buses: list[str] | None = None) -> list[str]:
        """The per-phase voltage names of the monitored bus-phases: all but ``exclude_buses``
        (default: :meth:`default_excluded_buses`, the source and regulator terminals)."""
        excluded = (self.default_excluded_buses() if exclude_buses is None
                    else [self.locate_bus(b) for b in exclude_buses])
        skip = {self.ids["bus"][i] for i in excluded}
        return [f"bus_{i}_{ph}_vm_pu" for i, phases in zip(self.ids["bus"], self.bus_phases) if i not in skip
                for ph in phases]

    def hold_taps_pu(self, taps_pu: dict[str, float]) -> bool:
        """Disable the RegControls and set the regulators' taps (ratio, pu) by regulator id or
        name; True when any tap changed (the operating point moved)."""
        self._read_currents()
        self._devices_stale = True
        dss, changed = self.dss, False
        by_id = dict(zip(self.ids["reg"], self.info.regs))
        names = {r.lower(): r for r in self.info.regs}
        for key, tap in taps_pu.items():
            reg = by_id.get(key) or names.get(str(key).lower())
            if reg is None:
                raise ValueError(f"unknown regulator {key!r}; the circuit's RegControls: {', '.join(self.info.regs)}")
            dss.RegControls.Name(reg)
            trafo, winding = dss.RegControls.Transformer(), dss.RegControls.TapWinding()
            dss.Text.Command(f"RegControl.{reg}.enabled=false")
            dss.Transformers.Name(trafo)
            dss.Transformers.Wdg(winding)
            if abs(dss.Transformers.Tap() - float(tap)) > 1e-9:
                dss.Transformers.Tap(float(tap))
                changed = True
        return changed

    def set_tap_count(self, reg_pos: int, steps: float | None) -> None:
        """Hold regulator ``reg_pos`` at ``steps`` from neutral (its RegControl disabled), or hand
        it back to its RegControl (``None``/NaN; with ``regulators = "auto"``). Acts on changes only."""
        held = None if steps is None or not math.isfinite(steps) else int(round(steps))
        if self._held_taps.get(reg_pos) == held:
            return
        self._read_currents()
        self._devices_stale = True
        self._held_taps[reg_pos] = held
        dss, reg = self.dss, self.info.regs[reg_pos]
        if held is None:
            if not self._regs_fixed:
                dss.Text.Command(f"RegControl.{reg}.enabled=true")
            return
        dss.RegControls.Name(reg)
        trafo, winding = dss.RegControls.Transformer(), dss.RegControls.TapWinding()
        dss.Text.Command(f"RegControl.{reg}.enabled=false")
        dss.Transformers.Name(trafo)
        dss.Transformers.Wdg(winding)
        dss.Transformers.Tap(self._tap_ratio(reg, held, f"reg_{self.ids['reg'][reg_pos]}_tap_set_count"))

    def release_cap(self, cap_pos: int) -> None:
        """Capacitor ``cap_pos`` no longer owned by its input: the states it had when the input took
        it, and its CapControls enabled again (those the input disabled)."""
        if cap_pos not in self._caps_owned:
            return
        self._read_currents()
        self._caps_owned.discard(cap_pos)
        self._devices_stale = True
        before, disabled = self._caps_before.pop(cap_pos)
        dss = self.dss
        for ctl in disabled:
            dss.Text.Command(f"CapControl.{ctl}.enabled=true")
        dss.Capacitors.Name(self.info.caps[cap_pos])
        if list(dss.Capacitors.States()) != before:
            dss.Capacitors.States(before)

    def set_cap_count(self, cap_pos: int, steps: float | None) -> None:
        """Close the first ``steps`` steps of capacitor ``cap_pos`` and open the rest (rounded; a count
        outside ``[0, NumSteps]`` is refused, as the taps' are); ``None``/NaN leaves it as it is. A
        CapControl on the capacitor is disabled from the first command (the input owns it, also when
        the first command equals the present state). Acts on changes only."""
        self._read_currents()
        self._devices_stale = True
        if steps is None or not math.isfinite(steps):
            return
        dss, cap = self.dss, self.info.caps[cap_pos]
        dss.Capacitors.Name(cap)
        n = dss.Capacitors.NumSteps()
        closed = int(round(steps))
        if not 0 <= closed <= n:
            raise ValueError(f"cap_{self.ids['cap'][cap_pos]}_set_count = {steps:g}: capacitor {cap} has {n} "
                             f"step{'s' if n != 1 else ''}; give a count from 0 to {n}")
        if cap_pos not in self._caps_owned:
            self._caps_owned.add(cap_pos)
            before, disabled = list(dss.Capacitors.States()), []
            for ctl in (dss.CapControls.AllNames() if dss.CapControls.Count() else []):
                dss.CapControls.Name(ctl)
                if dss.CapControls.Capacitor().lower() == cap.lower() and dss.CktElement.Enabled():
                    dss.Text.Command(f"CapControl.{ctl}.enabled=false")
                    disabled.append(ctl)
            self._caps_before[cap_pos] = (before, disabled)
            dss.Capacitors.Name(cap)
        states = [1] * closed + [0] * (n - closed)
        if list(dss.Capacitors.States()) != states:
            dss.Capacitors.States(states)

    def set_line_in_service(self, pos: int, in_service: bool) -> None:
        """Close (True) or open (False) both terminals of line ``pos``."""
        self._read_currents()
        verb = "Close" if in_service else "Open"
        line = self.info.lines[pos]
        self.dss.Text.Command(f"{verb} Line.{line} 1")
        self.dss.Text.Command(f"{verb} Line.{line} 2")
        (self._opened_lines.discard if in_service else self._opened_lines.add)(pos)

    def n_lines_out(self) -> int:
        """Lines opened by :meth:`set_line_in_service` (a line the file leaves open is not counted). [-]"""
        return len(self._opened_lines)

    # -- solving ---------------------------------------------------------------------------
    def solve(self, p_mw: dict[str, np.ndarray], q_mvar: dict[str, np.ndarray], time_s: float = 0) -> bool:
        """Solve with these element powers (consumer sign for load/storage, producer for sgen).

        ``time_s`` is the simulation time [s], the clock of ``control_mode = "time"``.
        """
        dss = self.dss
        # Whatever edited a PD element since the last solve (this class's inputs, a fault switched by the
        # adapter, a command on self.dss), OpenDSS marks the system Y invalid until the solve rebuilds it:
        # the one place the held Yprims learn of edits (a load's kW leaves it be)
        self._y_changed = self._y_changed or bool(dss.Solution.SystemYChanged())
        # the last solve's loadings and losses, unread, are replaced by this solve's
        self._currents_pending = False
        self._line_loading_pct, self._trafo_loading_pct, self._losses_mw = self._unknown
        for kind in KINDS:
            sign = LOAD_SIGN[kind]
            for element, p, q in zip(self.elements[kind], p_mw[kind], q_mvar[kind]):
                for load, share in zip(element.loads, element.shares):
                    dss.Loads.Name(load)
                    dss.Loads.kW(sign * float(p) * 1e3 * share)
                    dss.Loads.kvar(sign * float(q) * 1e3 * share)
        if self._restart:  # after a failure: re-initialise (zero-load start) instead of the bad state
            dss.Text.Command("Set Mode=Snapshot")
        if self.control_mode == "time" and not self.controls_held:  # a faulted step holds them off
            timed = self._solved_once
            dss.Text.Command(f"Set ControlMode={'Time' if timed else 'Static'}")
            dss.Solution.Hour(int(time_s // 3600))
            dss.Solution.Seconds(float(time_s % 3600))
        ok = False
        try:
            dss.Solution.Solve()
            ok = bool(dss.Solution.Converged())
        except Exception:  # a singular system or a control loop that does not settle
            pass
        if ok:
            if self._node_map_stale:
                self._map_nodes()
            node_vm = self._node_volts.read()
            ok = bool(np.all(np.isfinite(node_vm)))
        self._restart = not ok
        if not ok:  # its control loop may have moved taps that the next solve does not move again
            self._devices_stale = True
        self._y_changed = self._y_changed or not ok or self.controls_held or dss.Solution.ControlIterations() != 1
        self._solved_once = self._solved_once or ok
        if ok:
            # an isolated (de-energised) bus reports ~0 V in OpenDSS; NaN, as pandapower reports it
            self._read_results(np.where(node_vm < ISOLATED_PU, np.nan, node_vm))
        return ok

    def _read_results(self, node_vm: np.ndarray) -> None:
        dss = self.dss
        self.node_vm_pu = node_vm[self._phase_nodes]
        sums = np.bincount(self._node_bus, self.node_vm_pu, len(self.info.buses))
        with np.errstate(invalid="ignore", divide="ignore"):
            self.vm_pu = sums / self._bus_node_count
        self._currents_pending = True
        p_kw, q_kvar = dss.Circuit.TotalPower()
        self.p_import_mw, self.q_import_mvar = -p_kw / 1e3, -q_kvar / 1e3
        self._read_devices()

    # The loadings and losses come from every PD element's currents (opendss_reads.py: OpenDSS's own
    # read of them costs about half a power flow on IEEE 8500, the kernel's a fifth of that): they are
    # read when first asked after a solve, and before anything edits the circuit (so a late reader
    # still gets that solve's values).
    @property
    def line_loading_pct(self) -> np.ndarray:
        """Each line's loading in the last solve. [%]"""
        self._read_currents()
        return self._line_loading_pct

    @property
    def trafo_loading_pct(self) -> np.ndarray:
        """Each transformer's loading in the last solve (regulators excepted). [%]"""
        self._read_currents()
        return self._trafo_loading_pct

    @property
    def losses_mw(self) -> float:
        """Losses of every power-delivery element in the last solve. [MW]"""
        self._read_currents()
        return self._losses_mw

    def _read_currents(self) -> None:
        if not self._currents_pending:
            return
        self._currents_pending = False
        reads = self._pd_reads
        if reads.exact is None:  # the circuit's first read (since its elements were mapped): Yprims read anew
            reads.check()
            self._y_changed = False
        loading, losses_w = reads.read(self._y_changed)
        self._y_changed = False
        n_lines = len(self._line_pd)
        self._line_loading_pct, self._trafo_loading_pct = loading[:n_lines], loading[n_lines:]
        self._losses_mw = losses_w / 1e6

    def _read_devices(self) -> None:
        dss = self.dss
        if self._reg_windings is None:  # each RegControl's transformer and winding: fixed by the file
            self._reg_windings = []
            for reg in self.info.regs:
                dss.RegControls.Name(reg)
                self._reg_windings.append((dss.RegControls.Transformer(), dss.RegControls.TapWinding()))
        # Taps and capacitor steps move only by a control action (a static solve then iterates its
        # control loop more than once) or by this class's own commands (which mark them stale); a
        # solve that settled in one control iteration leaves them where the last reading found them.
        settled = (not self._devices_stale and self.control_mode == "static" and not self.controls_held
                   and dss.Solution.ControlIterations() == 1)
        self._devices_stale = self.controls_held  # the step after a held one reads them again
        if not settled:
            for i, (reg, (trafo, winding)) in enumerate(zip(self.info.regs, self._reg_windings)):
                dss.RegControls.Name(reg)
                self.tap_count[i] = dss.RegControls.TapNumber()
                dss.Transformers.Name(trafo)
                dss.Transformers.Wdg(winding)
                self.tap_pu[i] = dss.Transformers.Tap()
        if self._last_taps is not None:
            self.n_tap_changes += int(np.abs(self.tap_count - self._last_taps).sum())
        self._last_taps = self.tap_count.copy()
        for i, cap in enumerate(self.info.caps):
            dss.Capacitors.Name(cap)
            if not settled:
                self.cap_in_service[i] = any(s == 1 for s in dss.Capacitors.States())
            self.cap_q_mvar[i] = -sum(dss.CktElement.Powers()[1::2]) / 1e3

    def accelerations(self) -> dict[str, dict[str, object]]:
        """Which path this circuit's loadings and losses were read by (:attr:`.PdReads.acceleration`), once read."""
        reads = getattr(self, "_pd_reads", None)
        said = reads.acceleration if reads is not None else None
        return {} if said is None else {ACCELERATION: dict(said)}

    def close(self) -> None:
        """Release the circuit (the engine context stays until garbage collection)."""
        self._read_currents()
        self.dss.Text.Command("Clear")

    def device_outputs(self, solved: bool = True, phases: bool = True) -> dict[str, float | bool | int]:
        """Per-phase bus voltages (without them for ``phases`` False: :meth:`phase_vm_pu` has them),
        regulator taps, capacitor states and ``n_tap_changes``; with ``solved`` False (the last solve
        failed) the voltages and capacitor powers are NaN, as nothing solved them (the taps and
        capacitor states are the devices' settings, known either way)."""
        per_phase, tap_count, tap_pu, cap_on, cap_q = self._attrs
        out: dict[str, float | bool | int] = {"n_tap_changes": self.n_tap_changes}
        if not phases:
            pass
        elif len(self.node_vm_pu) and solved:
            out.update(zip(per_phase, self.phase_vm_pu().tolist()))
        else:
            out.update(dict.fromkeys(per_phase, math.nan))
        out.update(zip(tap_count, [int(t) if np.isfinite(t) else math.nan for t in self.tap_count]))
        out.update(zip(tap_pu, self.tap_pu.tolist()))
        out.update(zip(cap_on, list(self.cap_in_service)))
        out.update(zip(cap_q, self.cap_q_mvar.tolist() if solved else [math.nan] * len(cap_q)))
        return out

    # -- internals ---------------------------------------------------------------------------
    def _register(self, element: _Element, p_mw: float, q_mvar: float) -> int:
        kind = element.kind
        self.elements[kind].append(element)
        self.p0[kind] = np.append(self.p0[kind], p_mw)
        self.q0[kind] = np.append(self.q0[kind], q_mvar)
        self._node_map_stale = True
        return len(self.elements[kind]) - 1

    def _map_nodes(self) -> None:
        """Positions of phase nodes a/b/c in OpenDSS's node vector, by bus; PD element positions."""
        dss = self.dss
        phase_nodes, node_bus, where = [], [], {}
        for k, node in enumerate(dss.Circuit.AllNodeNames()):
            bus, _, number = node.rpartition(".")
            if number.isdigit() and int(number) in NODE_PHASE and bus.lower() in self._bus_index:
                where[(bus.lower(), int(number))] = len(phase_nodes)
                phase_nodes.append(k)
                node_bus.append(self._bus_index[bus.lower()])
        self._phase_nodes = np.asarray(phase_nodes, dtype=np.int64)
        self._node_bus = np.asarray(node_bus, dtype=np.int64)
        self._bus_node_count = np.bincount(self._node_bus, minlength=len(self.info.buses)).astype(float)
        self._bus_node_count[self._bus_node_count == 0] = np.nan
        for kind in KINDS:
            for e in self.elements[kind]:
                bus = self.info.buses[e.bus_pos].lower()
                e.nodes = [where[(bus, PHASE_NODES[ph])] for ph in e.phases if (bus, PHASE_NODES[ph]) in where]
        self._phase_attr_nodes = np.asarray(
            [where.get((bus.lower(), PHASE_NODES[ph]), -1) for bus, phases in zip(self.info.buses, self.bus_phases)
             for ph in phases], dtype=np.int64)
        pd = {n.lower(): i for i, n in enumerate(dss.PDElements.AllNames())}
        self._line_pd = np.asarray([pd[f"line.{n.lower()}"] for n in self.info.lines], dtype=np.int64)
        self._trafo_pd = np.asarray([pd[f"transformer.{n.lower()}"] for n in self.info.trafos], dtype=np.int64)
        kv_base = {bus.lower(): kv for bus, kv in zip(self.info.buses, self.info.bus_kv_base)}
        self._node_volts = NodeVolts(self._arrays, kv_base)
        self._pd_reads = PdReads(dss, np.concatenate([self._line_pd, self._trafo_pd]), self._node_volts.volts)
        self._node_map_stale = False
        self._y_changed = True

    def _fix_taps(self, tap_positions: dict[str, int]) -> None:
        """Disable the RegControls and set each regulator's tap (``fixed`` mode)."""
        self._devices_stale = True
        names = {r.lower(): r for r in self.info.regs}
        unknown = [k for k in tap_positions if k.lower() not in names]
        if unknown:
            raise ValueError(f"tap_positions: unknown regulator(s) {unknown}; the circuit's RegControls: "
                             f"{', '.join(self.info.regs) or 'none'}")
        if tap_positions and not self._regs_fixed:
            raise ValueError('tap_positions apply with regulators = "fixed"; set it, or drop tap_positions')
        if not self._regs_fixed:
            return
        dss = self.dss
        given = {k.lower(): int(v) for k, v in tap_positions.items()}
        for reg in self.info.regs:
            dss.RegControls.Name(reg)
            trafo, winding = dss.RegControls.Transformer(), dss.RegControls.TapWinding()
            dss.Text.Command(f"RegControl.{reg}.enabled=false")
            if reg.lower() in given:
                dss.Transformers.Name(trafo)
                dss.Transformers.Wdg(winding)
                dss.Transformers.Tap(self._tap_ratio(reg, given[reg.lower()], f"tap_positions.{reg}"))

    def _tap_ratio(self, reg: str, steps: int, key: str) -> float:
        """The ratio of ``steps`` from neutral on the selected winding; a count past the regulator's own
        MinTap/MaxTap is refused (OpenDSS would set it without a word and report the voltage it gives). [pu]"""
        dss = self.dss
        low, high, n = dss.Transformers.MinTap(), dss.Transformers.MaxTap(), dss.Transformers.NumTaps()
        step = (high - low) / n
        ratio = 1.0 + steps * step
        if not low - 1e-9 <= ratio <= high + 1e-9:
            raise ValueError(f"{key} = {steps}: regulator {reg} has taps from {round((low - 1) / step)} to "
                             f"{round((high - 1) / step)} steps ({low:g}-{high:g} pu); give a count inside them")
        return ratio


def bus_position(info, ref: str | int) -> int | None:
    """Position in ``info.buses`` of the bus named (case-insensitive) or sanitised-named ``ref``, as
    :meth:`OpenDssFlow.locate_bus` finds it (for checks before the flow exists); None if no bus is."""
    text = str(ref).strip()
    names = [b.lower() for b in info.buses]
    if text.lower() in names:
        return names.index(text.lower())
    return info.ids["bus"].index(text) if text in info.ids["bus"] else None


def unknown_bus_message(ref: str, buses: list[str], where: str) -> str:
    sample = ", ".join(buses[:8])
    return f"unknown bus {ref!r} in {where} ({len(buses)} buses, e.g. {sample}); give an OpenDSS bus name"


def device_attrs(info: CircuitInfo) -> tuple[list[str], list[str], list[str], list[str], list[str]]:
    """Attribute names: per-phase bus voltages, tap positions, tap ratios, capacitor states and Mvar."""
    ids = info.ids
    per_phase = [f"bus_{i}_{ph}_vm_pu" for i, phases in zip(ids["bus"], info.bus_phases) for ph in phases]
    return (per_phase, [f"reg_{i}_tap_count" for i in ids["reg"]], [f"reg_{i}_tap_pu" for i in ids["reg"]],
            [f"cap_{i}_in_service" for i in ids["cap"]], [f"cap_{i}_q_mvar" for i in ids["cap"]])
