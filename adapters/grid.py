"""Grid adapter: a network solved each step, by pandapower/lightsim2grid or by OpenDSS.

Two engines behind one adapter (``engine`` in ``[sims.<id>]``; the entities, attribute
names and KPIs are the same, so swapping the grid is changing two keys):

* ``engine = "pandapower"`` (default): a balanced pandapower network, described below.
* ``engine = "opendss"``: an unbalanced three-phase OpenDSS circuit (``grid_models``'s
  ``ieee13``/``ieee34``/``ieee123`` feeders or any ``.dss`` file) with its regulators and
  capacitors, solved by DSS-Extensions (:mod:`adapters._grid_opendss`). Extra keys:
  ``regulators = "auto" | "fixed"``, ``tap_positions = {<regcontrol> = <steps>}`` and
  ``control_mode = "static" | "time"`` (time-delayed regulator action on the sim clock).
  Besides ``bus_<id>_vm_pu`` (the mean of the bus's phases) the Grid reports
  ``bus_<id>_<a|b|c>_vm_pu`` per phase, ``reg_<id>_tap_count`` (tap position, steps from
  neutral) and ``reg_<id>_tap_pu`` per regulator, ``cap_<id>_in_service`` and
  ``cap_<id>_q_mvar`` per capacitor and ``n_tap_changes`` (cumulative tap operations);
  ``vm_min_pu``/``vm_max_pu`` span every phase. Elements take ``phases = "abc"``
  (balanced three-phase, default) or a subset (``"a"``, ``"bc"``…, power split equally).

The pandapower engine:

The network is defined in pandapower (a ``grid_models`` catalogue name, ``simbench:<code>``
or a pandapower JSON file). :class:`PowerFlow` converts it once with pandapower's own
``_pd2ppc`` (so switches, bus fusing, out-of-service elements and transformer models are
exactly pandapower's), keeps the admittance matrices, and per step only rebuilds the bus
injections and runs lightsim2grid's KLU Newton-Raphson warm-started from the previous
voltages. A line switched in or out of service rebuilds the matrices. Results (voltages,
loadings, losses, slack import) are computed as pandapower's ``runpp`` reports them.

Entities:

* ``Grid`` (one per sim): outputs ``vm_min_pu``, ``vm_max_pu``, ``p_import_mw`` and
  ``q_import_mvar`` (at the slack, positive = import from upstream), ``losses_mw`` (lines
  and transformers), ``max_loading_pct``, ``converged``, ``n_nonconverged`` and per element
  ``bus_<id>_vm_pu``, ``line_<id>_loading_pct``, ``trafo_<id>_loading_pct``; inputs
  ``line_<id>_in_service``. ``<id>`` is the element name sanitised to ``[a-z0-9_]`` (its
  index when the name is missing or not unique).
* ``Load``, ``Sgen``, ``Storage``: ``bus=`` attaches a new element at that bus (name or
  index), ``element=`` drives an existing one. Inputs and outputs ``p_mw`` [MW] and
  ``q_mvar`` [Mvar] (consumer convention for Load and Storage, generator convention for
  Sgen, as pandapower's tables), output ``vm_pu`` at the element's bus. An input replaces
  the background profile of that element from then on.

Background profiles (SimBench's 15-minute year) are mapped to the scenario time by day of
year and time of day, so any scenario year works; each value holds for its quarter hour.
A line out of service (or in an island) reports 0 % loading; buses in an island report NaN
voltages, as pandapower does. When the power flow does not converge the Grid outputs hold
their last values, ``converged`` is False and ``n_nonconverged`` counts up (or, with
``on_nonconvergence = "fail"``, the step raises).
"""

from __future__ import annotations

import json
import math
import re
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np
import pandapower as pp
from pydantic import ValidationInfo, field_validator, model_validator

import grid_models
from adapters._base import CosimSim, Params, ScenarioContext, model_meta
from adapters._grid_backend import GridBackend, opendss_circuit_info, opendss_grid_outputs

KINDS = ("load", "sgen", "storage")
#: Sign turning a table's p_mw into a bus injection (consumer convention for load, storage).
INJECTION_SIGN = {"load": -1.0, "sgen": 1.0, "storage": -1.0}
MODEL_KIND = {"Load": "load", "Sgen": "sgen", "Storage": "storage"}
GRID_OUTPUTS = (
    "vm_min_pu", "vm_max_pu", "p_import_mw", "q_import_mvar", "losses_mw", "max_loading_pct",
    "converged", "n_nonconverged",
)
ELEMENT_ATTRS = ("p_mw", "q_mvar")
#: pandapower's ``runpp`` defaults, kept so results agree with it.
MAX_ITERATION = 10
TOLERANCE_MVA = 1e-8


def sanitise(name: Any) -> str:
    """An element name as an attribute-safe id: lower case ``[a-z0-9_]``, or ``""``."""
    if name is None or (isinstance(name, float) and math.isnan(name)):
        return ""
    return re.sub(r"[^a-z0-9]+", "_", str(name).lower()).strip("_")


def element_ids(table) -> list[str]:
    """Unique attribute ids of a pandapower table's rows: sanitised names, else the index."""
    names = [sanitise(n) for n in table["name"]] if "name" in table else [""] * len(table)
    counts: dict[str, int] = {}
    for name in names:
        counts[name] = counts.get(name, 0) + 1
    ids = [n if n and counts[n] == 1 else "" for n in names]
    taken = set(ids)
    for pos, idx in enumerate(table.index):
        if not ids[pos]:
            ids[pos] = str(idx) if str(idx) not in taken else f"i{idx}"
            taken.add(ids[pos])
    return ids


class PowerFlow:
    """A pandapower net solved repeatedly with only its injections and line states changing.

    Args:
        net: the network; this object owns and edits it (new elements, line states).
        solver: ``"lightsim2grid"`` (fast path) or ``"pandapower"`` (``pp.runpp`` each solve).
    """

    def __init__(self, net, solver: str = "lightsim2grid") -> None:
        self.net = net
        voltage_dependent = any(
            col in net.load and net.load[col].astype(float).abs().sum() > 0
            for col in ("const_z_p_percent", "const_i_p_percent", "const_z_q_percent", "const_i_q_percent",
                        "const_z_percent", "const_i_percent")
        )
        # Voltage-dependent loads make Sbus a function of V: leave them to pandapower.
        self.solver = "pandapower" if voltage_dependent else solver
        self.ids = {table: element_ids(net[table]) for table in ("bus", "line", "trafo")}
        n_bus = len(net.bus)
        self.vm_pu = np.full(n_bus, np.nan)
        self.line_loading_pct = np.full(len(net.line), np.nan)
        self.trafo_loading_pct = np.full(len(net.trafo), np.nan)
        self.p_import_mw = self.q_import_mvar = self.losses_mw = math.nan
        self._stale = True
        self._V: np.ndarray | None = None
        self._solved_once = False  # pandapower path: warm start from results
        self._options_set = False
        self._read_tables()

    # -- editing the net ---------------------------------------------------------------
    def locate_bus(self, ref: str | int) -> int:
        """Position in ``net.bus`` of the bus named (or sanitised-named, or indexed) ``ref``."""
        return self._locate("bus", ref)

    def locate(self, kind: str, ref: str | int) -> int:
        """Position in ``net[kind]`` of an existing element by name, id or index."""
        return self._locate(kind, ref)

    def attach(self, kind: str, bus: str | int, p_mw: float, q_mvar: float, name: str) -> int:
        """Add a new ``kind`` element at ``bus``; return its position in ``net[kind]``."""
        bus_index = self.net.bus.index[self.locate_bus(bus)]
        create = {"load": pp.create_load, "sgen": pp.create_sgen, "storage": pp.create_storage}[kind]
        extra = {"max_e_mwh": 0.0} if kind == "storage" else {}
        create(self.net, bus=bus_index, p_mw=p_mw, q_mvar=q_mvar, name=name, **extra)
        self._stale = True
        self._read_tables()
        return len(self.net[kind]) - 1

    def set_line_in_service(self, pos: int, in_service: bool) -> None:
        """Switch line ``pos`` (position in ``net.line``); the matrices rebuild on the next solve."""
        column = self.net.line["in_service"]
        if bool(column.iat[pos]) != in_service:
            self.net.line.loc[self.net.line.index[pos], "in_service"] = in_service
            self._stale = True

    def bus_of(self, kind: str, pos: int) -> int:
        """Position in ``net.bus`` of the bus element ``pos`` of ``kind`` stands on."""
        return int(self.net.bus.index.get_loc(self.net[kind]["bus"].iat[pos]))

    def element_vm_pu(self, kind: str, pos: int) -> float:
        """Voltage at the bus of element ``pos`` of ``kind``. [pu]"""
        return float(self.vm_pu[self.bus_of(kind, pos)])

    # -- solving -----------------------------------------------------------------------
    def solve(self, p_mw: dict[str, np.ndarray], q_mvar: dict[str, np.ndarray]) -> bool:
        """Solve with these element powers (table order, table sign); True when converged.

        On failure the previous results are kept and the next solve warm-starts from the
        last converged voltages.
        """
        if self.solver == "pandapower":
            return self._solve_pandapower(p_mw, q_mvar)
        if self._stale:
            self._build()
        p_all = np.concatenate([p_mw[k] for k in KINDS]) * self._inj_factor
        q_all = np.concatenate([q_mvar[k] for k in KINDS]) * self._inj_factor
        n = self._n_bus
        s_el = np.bincount(self._inj_bus, p_all, n + 1)[:n] + 1j * np.bincount(self._inj_bus, q_all, n + 1)[:n]
        sbus = self._s_const + s_el / self._base_mva
        try:
            ok = self._nr.solve(self._ybus, self._V, sbus, self._ref, self._slack_w, self._pv, self._pq,
                                MAX_ITERATION, TOLERANCE_MVA)
        except Exception:  # lightsim2grid raises on singular Jacobians: a non-convergence too
            ok = False
        if not ok:
            return False
        v = self._nr.get_Vm() * np.exp(1j * self._nr.get_Va())
        if not np.all(np.isfinite(v)):
            return False
        self._V, self._sbus = v, sbus
        self._results(v, sbus)
        return True

    def _results(self, v: np.ndarray, sbus: np.ndarray) -> None:
        self.vm_pu = np.append(np.abs(v), np.nan)[self._bus_map]
        i_f, i_t = self._yf @ v, self._yt @ v
        loading = np.append(np.maximum(np.abs(i_f) * self._c_f, np.abs(i_t) * self._c_t), 0.0)
        self.line_loading_pct = loading[self._line_br]
        self.trafo_loading_pct = loading[self._trafo_br]
        s_loss = v[self._f] * np.conj(i_f) + v[self._t] * np.conj(i_t)
        self.losses_mw = float(s_loss.real[self._loss_br].sum() * self._base_mva)
        s_ref = v[self._ref] * np.conj(self._y_ref @ v)
        s_import = ((s_ref - sbus[self._ref]).sum() + self._s_gen_ref) * self._base_mva
        self.p_import_mw, self.q_import_mvar = float(s_import.real), float(s_import.imag)

    def _solve_pandapower(self, p_mw, q_mvar) -> bool:
        for kind in KINDS:
            if len(self.net[kind]):
                self.net[kind]["p_mw"] = p_mw[kind]
                self.net[kind]["q_mvar"] = q_mvar[kind]
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                pp.runpp(self.net, init="results" if self._solved_once else "auto")
        except Exception:  # LoadflowNotConverged and numerical failures alike
            self._solved_once = False
            return False
        self._solved_once = True
        net = self.net
        self.vm_pu = net.res_bus.vm_pu.to_numpy(float)
        self.line_loading_pct = net.res_line.loading_percent.to_numpy(float)
        self.trafo_loading_pct = net.res_trafo.loading_percent.to_numpy(float)
        self.losses_mw = float(net.res_line.pl_mw.sum() + net.res_trafo.pl_mw.sum())
        self.p_import_mw = float(net.res_ext_grid.p_mw.sum())
        self.q_import_mvar = float(net.res_ext_grid.q_mvar.sum())
        return True

    # -- building the solver model ------------------------------------------------------
    def _read_tables(self) -> None:
        """The tabulated element powers (the values used when nothing overrides them)."""
        self.p0 = {k: self.net[k]["p_mw"].to_numpy(float).copy() for k in KINDS}
        self.q0 = {k: self.net[k]["q_mvar"].to_numpy(float).copy() for k in KINDS}

    def _build(self) -> None:
        """Convert the net with pandapower's ppc builder; keep what each solve needs."""
        from lightsim2grid.algorithm import NRSing_KLU
        from pandapower.pd2ppc import _pd2ppc
        from pandapower.pf.ppci_variables import _get_pf_variables_from_ppci
        from pandapower.pypower.idx_brch import F_BUS, T_BUS
        from pandapower.pypower.idx_bus import BASE_KV, PD, QD, SL_FAC
        from pandapower.pypower.makeSbus import makeSbus
        from pandapower.pypower.makeYbus import makeYbus

        net = self.net
        if not self._options_set:  # options of this pandapower version, not a JSON file's
            self._init_options()
            self._options_set = True
        net._pd2ppc_lookups = {k: np.array([], dtype=np.int64)
                               for k in ("bus", "bus_dc", "ext_grid", "gen", "branch", "branch_dc")}
        saved = {k: (net[k]["p_mw"].copy(), net[k]["q_mvar"].copy()) for k in KINDS}
        for kind in KINDS:  # element injections are added per solve, the rest is constant
            net[kind]["p_mw"] = 0.0
            net[kind]["q_mvar"] = 0.0
        try:
            _, ppci = _pd2ppc(net)
        finally:
            for kind, (p, q) in saved.items():
                net[kind]["p_mw"], net[kind]["q_mvar"] = p, q
        base_mva, bus, gen, branch, *_, ref, pv, pq, _on, _gbus, v0, _ref_gens = _get_pf_variables_from_ppci(ppci)
        ybus, yf, yt = makeYbus(base_mva, bus, branch)
        self._s_const = makeSbus(base_mva, bus, gen)
        self._s_gen_ref = (self._s_const[ref] + (bus[ref, PD] + 1j * bus[ref, QD]) / base_mva).sum()
        n = self._n_bus = bus.shape[0]
        self._base_mva = float(base_mva)
        self._ybus, self._yf, self._yt = ybus.tocsc(), yf.tocsr(), yt.tocsr()
        self._y_ref = ybus.tocsr()[ref, :]
        self._ref, self._pv, self._pq = ref.astype(int), pv.astype(int), pq.astype(int)
        weights = bus[:, SL_FAC].astype(float)
        if not weights[ref].any():
            weights[ref] = 1.0 / len(ref)
        self._slack_w = weights
        self._V = self._initial_voltages(ppci, v0)
        self._nr = NRSing_KLU()

        lookup = net._pd2ppc_lookups["bus"]
        bus_map = lookup[net.bus.index.to_numpy()]
        self._bus_map = np.where((bus_map >= 0) & (bus_map < n), bus_map, n)
        inj_bus, inj_factor = [], []
        for kind in KINDS:
            table = net[kind]
            at = lookup[table["bus"].to_numpy(int)] if len(table) else np.zeros(0, int)
            at = np.where((at >= 0) & (at < n), at, n)
            inj_bus.append(at)
            factor = table["scaling"].to_numpy(float) * table["in_service"].to_numpy(bool)
            inj_factor.append(INJECTION_SIGN[kind] * factor)
        self._inj_bus = np.concatenate(inj_bus).astype(np.int64)
        self._inj_factor = np.concatenate(inj_factor)

        self._f = branch[:, F_BUS].real.astype(int)
        self._t = branch[:, T_BUS].real.astype(int)
        self._map_branches(ppci, bus[:, BASE_KV].real, base_mva)
        self._stale = False

    @staticmethod
    def _initial_voltages(ppci, v0: np.ndarray) -> np.ndarray:
        """Set-point magnitudes with DC power-flow angles, as pandapower's ``init="dc"``.

        A flat start fails on nets whose transformers shift the phase (SimBench's Dyn5
        units turn the MV side by 150 degrees); the DC solution carries those shifts.
        """
        from pandapower.pf.run_dc_pf import _run_dc_pf
        from pandapower.pypower.idx_bus import VA

        magnitude = np.where(np.isfinite(v0), np.abs(v0), 1.0)
        try:
            angle = np.deg2rad(_run_dc_pf(ppci)["bus"][:, VA].real)
        except Exception:  # no DC solution: start flat, NR may still converge
            angle = np.zeros(len(v0))
        angle = np.where(np.isfinite(angle), angle, 0.0)
        return magnitude * np.exp(1j * angle)

    def _map_branches(self, ppci, base_kv: np.ndarray, base_mva: float) -> None:
        """Per in-service branch: loading factors; per line and trafo: its branch or none."""
        net = self.net
        in_service = ppci["internal"]["branch_is"]
        n_br = int(in_service.sum())
        position = np.where(in_service, np.cumsum(in_service) - 1, n_br)
        ranges = net._pd2ppc_lookups["branch"]
        self._c_f, self._c_t = np.zeros(n_br), np.zeros(n_br)
        kv_f, kv_t = base_kv[self._f], base_kv[self._t]
        loss = []
        for table in ("line", "trafo"):
            if table not in ranges:
                setattr(self, f"_{table}_br", np.full(len(net[table]), n_br))
                continue
            start, stop = ranges[table]
            br = position[start:stop]
            setattr(self, f"_{table}_br", br)
            ok = br < n_br
            df = net[table]
            if table == "line":
                i_max = (df.max_i_ka * df.df * df.parallel).to_numpy(float)
                rating_f = rating_t = np.sqrt(3) * i_max
            else:  # loading by rated current, pandapower's default trafo_loading="current"
                rated = (df.sn_mva * df.parallel * df.df).to_numpy(float)
                rating_f = rated / df.vn_hv_kv.to_numpy(float)
                rating_t = rated / df.vn_lv_kv.to_numpy(float)
            with np.errstate(divide="ignore"):
                self._c_f[br[ok]] = 100.0 * base_mva / (kv_f[br[ok]] * rating_f[ok])
                self._c_t[br[ok]] = 100.0 * base_mva / (kv_t[br[ok]] * rating_t[ok])
            loss.append(br[ok])
        self._loss_br = np.concatenate(loss) if loss else np.zeros(0, int)

    def _init_options(self) -> None:
        """Let pandapower set its run options (``_pd2ppc`` reads them); the result is unused."""
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                pp.runpp(self.net, numba=False, max_iteration=MAX_ITERATION, tolerance_mva=TOLERANCE_MVA)
        except Exception:
            pass  # options are set before the solve; a failing base case is no obstacle

    def _locate(self, table: str, ref: str | int) -> int:
        return locate_in(self.net, table, ref, self.ids.get(table))


def locate_in(net, table: str, ref: str | int, ids: list[str] | None = None) -> int:
    """Position of element ``ref`` (name, sanitised id or index) in ``net[table]``."""
    df = net[table]
    text = str(ref).strip()
    names = df["name"].astype(str).tolist() if "name" in df else []
    if text in names:
        return names.index(text)
    ids = ids or element_ids(df)
    if text in ids:
        return ids.index(text)
    if re.fullmatch(r"-?\d+", text) and int(text) in df.index:
        return int(df.index.get_loc(int(text)))
    sample = ", ".join(names[:6] if any(n not in ("None", "nan") for n in names) else map(str, df.index[:6]))
    raise ValueError(f"unknown {table} {ref!r} in this network ({len(df)} in net.{table}, e.g. {sample}); "
                     f"give a {table} name or index")


class SimParams(Params):
    """Parameters of a grid simulator (``[sims.<id>]`` with ``adapter = "grid"``).

    ``engine`` picks the solver: ``"pandapower"`` (``network`` a catalogue name,
    ``simbench:<code>`` or a pandapower JSON file; ``network_params``, ``profiles`` and
    ``solver`` apply) or ``"opendss"`` (``network`` an OpenDSS feeder of the catalogue or a
    ``.dss`` file; ``regulators``, ``tap_positions`` and ``control_mode`` apply: ``"auto"``
    lets OpenDSS's RegControls move the taps, ``"fixed"`` holds every regulator at its
    ``tap_positions`` entry [steps from neutral] or at its initial tap; ``control_mode =
    "static"`` settles the controls within every solve, ``"time"`` runs OpenDSS's time-based
    control queue on the simulation clock, so a regulator waits its delay (OpenDSS default
    15 s, then 2 s per tap) as a real one does).
    """

    network: str
    engine: Literal["pandapower", "opendss"] = "pandapower"
    network_params: dict[str, Any] = {}
    profiles: bool = True
    solver: Literal["lightsim2grid", "pandapower"] = "lightsim2grid"
    on_nonconvergence: Literal["hold", "fail"] = "hold"
    regulators: Literal["auto", "fixed"] = "auto"
    tap_positions: dict[str, int] = {}
    control_mode: Literal["static", "time"] = "static"

    @field_validator("network")
    @classmethod
    def _resolve_json(cls, value: str, info: ValidationInfo) -> str:
        """Relative JSON and DSS paths resolve from the scenario file's folder."""
        base_dir = (info.context or {}).get("base_dir")
        if value.lower().endswith((".json", ".dss")) and base_dir is not None and not Path(value).is_absolute():
            return str((Path(base_dir) / value).resolve())
        return value

    @model_validator(mode="after")
    def _engine_options(self) -> "SimParams":
        if self.engine == "pandapower" and (self.regulators != "auto" or self.tap_positions
                                            or self.control_mode != "static"):
            raise ValueError('regulators, tap_positions and control_mode apply to engine = "opendss"')
        if self.engine == "opendss" and self.network_params:
            raise ValueError('network_params apply to engine = "pandapower" catalogue networks')
        return self


class ElementParams(Params):
    """A Load, Sgen or Storage: a new element at ``bus`` or an existing ``element``.

    ``bus`` and ``element`` are matched against the names in the net first, then against
    the sanitised ids, then against the pandapower index (so on ``ieee33``, ``bus = "18"``
    is Baran & Wu's bus 18, index 17). ``p_mw`` [MW] and ``q_mvar`` [Mvar] are the initial
    values; for an existing element they apply only when given, otherwise the element
    follows its profile (or tabulated value) until the first input arrives.
    """

    bus: str | int | None = None
    element: str | int | None = None
    p_mw: float = 0.0
    q_mvar: float = 0.0
    phases: str = "abc"

    @field_validator("phases")
    @classmethod
    def _phase_set(cls, value: str) -> str:
        """``"abc"`` (balanced three-phase) or a subset of a, b, c; returned in a-b-c order."""
        text = value.strip().lower()
        if not text or set(text) - set("abc") or len(set(text)) != len(text):
            raise ValueError("give 'abc' (balanced three-phase) or a subset of a, b, c such as 'a' or 'bc'")
        return "".join(ph for ph in "abc" if ph in text)

    @model_validator(mode="after")
    def _exactly_one_place(self) -> "ElementParams":
        if (self.bus is None) == (self.element is None):
            raise ValueError("give exactly one of bus (attach a new element) or element (an existing one)")
        return self


@dataclass
class _Attached:
    kind: str
    pos: int
    bus_pos: int
    p_mw: float | None  # None: follow the background profile / tabulated value
    q_mvar: float | None


class GridSim(CosimSim):
    """mosaik adapter of :class:`PowerFlow`."""

    SimParams: ClassVar = SimParams
    ModelParams: ClassVar = {model: ElementParams for model in MODEL_KIND}
    EXAMPLE: ClassVar = {
        "sim": {"network": "ieee33"},
        "models": {"Grid": {}, "Load": {"bus": "18", "p_mw": 1.0}, "Sgen": {"bus": "18", "p_mw": 0.5},
                   "Storage": {"bus": "33"}},
        "single": ["Grid"],
    }
    _META_CACHE: ClassVar[dict[str, dict[str, Any]]] = {}

    # -- validation hooks ---------------------------------------------------------------
    @classmethod
    def meta_for(cls, sim_params: SimParams) -> dict[str, Any]:
        if sim_params.engine == "opendss":
            info = opendss_circuit_info(grid_models.dss_file(sim_params.network))
            return _build_meta(info.ids, opendss_grid_outputs(info))
        key = json.dumps([sim_params.network, sim_params.network_params], sort_keys=True, default=str)
        if key not in cls._META_CACHE:
            net = grid_models.load_network(sim_params.network, **sim_params.network_params)
            cls._META_CACHE[key] = _build_meta({t: element_ids(net[t]) for t in ("bus", "line", "trafo")})
        return cls._META_CACHE[key]

    @classmethod
    def check(cls, sim_params: SimParams, ctx: ScenarioContext) -> list[str]:
        try:
            cls.meta_for(sim_params)
            if sim_params.engine == "opendss":
                info = opendss_circuit_info(grid_models.dss_file(sim_params.network))
                regs = {r.lower() for r in info.regs}
                unknown = [k for k in sim_params.tap_positions if k.lower() not in regs]
                if unknown:
                    return [f"tap_positions: unknown regulator(s) {unknown}; this circuit's RegControls: "
                            f"{', '.join(info.regs) or 'none'}"]
                if sim_params.tap_positions and sim_params.regulators != "fixed":
                    return ['tap_positions apply with regulators = "fixed"; set it, or drop tap_positions']
        except (ValueError, TypeError, OSError) as exc:
            return [f"network {sim_params.network!r}: {exc}"]
        return []

    @classmethod
    def check_entity(cls, model: str, params: ElementParams | None, ctx: ScenarioContext,
                     sim_params: SimParams | None = None) -> list[str]:
        """An unknown bus or element is named at validation, before any simulator starts."""
        if params is None or sim_params is None:
            return []
        if sim_params.engine == "opendss":
            return _opendss_entity_problems(model, params, sim_params)
        if params.phases != "abc":
            return [f"phases = {params.phases!r}: the pandapower engine is balanced; "
                    'use phases = "abc" or engine = "opendss"']
        net = grid_models.load_network(sim_params.network, **sim_params.network_params)
        table, ref = ("bus", params.bus) if params.bus is not None else (MODEL_KIND[model], params.element)
        try:
            locate_in(net, table, ref)
        except ValueError as exc:
            return [str(exc)]
        return []

    # -- mosaik hooks -------------------------------------------------------------------
    def setup(self) -> None:
        p = self.params
        self.flow: GridBackend
        if p.engine == "opendss":
            from adapters._grid_opendss import OpenDssFlow

            self.flow = OpenDssFlow(grid_models.dss_file(p.network), regulators=p.regulators,
                                    tap_positions=p.tap_positions, control_mode=p.control_mode)
        else:
            net = grid_models.load_network(p.network, **p.network_params)
            self.flow = PowerFlow(net, solver=p.solver)
        self.grid_eid: str | None = None
        self.attached: dict[str, _Attached] = {}
        self.n_nonconverged = 0
        self._line_attr = {f"line_{i}_in_service": pos for pos, i in enumerate(self.flow.ids["line"])}
        self._bus_attrs = [f"bus_{i}_vm_pu" for i in self.flow.ids["bus"]]
        self._line_attrs = [f"line_{i}_loading_pct" for i in self.flow.ids["line"]]
        self._trafo_attrs = [f"trafo_{i}_loading_pct" for i in self.flow.ids["trafo"]]
        self._profiles = self._load_profiles() if p.profiles and p.engine == "pandapower" else []

    def create_entity(self, eid: str, model: str, params: ElementParams | None) -> None:
        if model == "Grid":
            if self.grid_eid is not None:
                raise ValueError(f"grid sim {self.sid}: one Grid entity per sim, already have {self.grid_eid}")
            self.grid_eid = eid
            self._fill_grid_outputs(converged=False)
            return
        kind = MODEL_KIND[model]
        if params.phases != "abc" and self.params.engine != "opendss":
            raise ValueError(f"{eid}: phases = {params.phases!r} needs engine = \"opendss\" (pandapower is balanced)")
        if params.bus is not None:
            extra = {"phases": params.phases} if self.params.engine == "opendss" else {}
            pos = self.flow.attach(kind, params.bus, params.p_mw, params.q_mvar, name=eid, **extra)
            entity = _Attached(kind, pos, self.flow.bus_of(kind, pos), params.p_mw, params.q_mvar)
        else:
            pos = self.flow.locate(kind, params.element)
            given = params.model_fields_set
            entity = _Attached(kind, pos, self.flow.bus_of(kind, pos),
                               params.p_mw if "p_mw" in given else None,
                               params.q_mvar if "q_mvar" in given else None)
        self.attached[eid] = entity
        self.out[eid] = {"p_mw": math.nan, "q_mvar": math.nan, "vm_pu": math.nan}

    def step_entities(self, time_s: int, inputs: dict[str, dict[str, Any]]) -> None:
        self._apply_inputs(inputs)
        p_mw, q_mvar = self._injections(time_s)
        clock = {"time_s": time_s} if self.params.engine == "opendss" else {}
        converged = self.flow.solve(p_mw, q_mvar, **clock)
        if not converged:
            self.n_nonconverged += 1
            if self.params.on_nonconvergence == "fail":
                raise RuntimeError(
                    f"grid sim {self.sid}: power flow did not converge at {self.utc(time_s).isoformat()} "
                    f"(t = {time_s} s); set on_nonconvergence = \"hold\" to keep the last values"
                )
        self._fill_grid_outputs(converged)
        if converged:
            for eid, e in self.attached.items():
                self.out[eid] = {"p_mw": float(p_mw[e.kind][e.pos]), "q_mvar": float(q_mvar[e.kind][e.pos]),
                                 "vm_pu": self.flow.element_vm_pu(e.kind, e.pos)}

    def finalize(self) -> None:
        if self.params.engine == "opendss":
            self.flow.close()

    # -- helpers ------------------------------------------------------------------------
    def _apply_inputs(self, inputs: dict[str, dict[str, Any]]) -> None:
        for eid, values in inputs.items():
            if eid == self.grid_eid:
                for attr, value in values.items():
                    self.flow.set_line_in_service(self._line_attr[attr], bool(value >= 0.5))
                continue
            entity = self.attached[eid]
            if "p_mw" in values:
                entity.p_mw = float(values["p_mw"])
            if "q_mvar" in values:
                entity.q_mvar = float(values["q_mvar"])

    def _injections(self, time_s: int) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        """Element powers for this step: tables, then profiles, then entity values."""
        p = {k: v.copy() for k, v in self.flow.p0.items()}
        q = {k: v.copy() for k, v in self.flow.q0.items()}
        if self._profiles:
            row = self._profile_row(time_s)
            for target, kind, pos, values in self._profiles:
                target_arr = p if target == "p" else q
                target_arr[kind][pos] = values[min(row, len(values) - 1)]
        for e in self.attached.values():
            if e.p_mw is not None:
                p[e.kind][e.pos] = e.p_mw
            if e.q_mvar is not None:
                q[e.kind][e.pos] = e.q_mvar
        return p, q

    def _profile_row(self, time_s: int) -> int:
        """Row of the profile year at the same day of year and time of day. [-]"""
        t = self.utc(time_s)
        seconds = (t.timetuple().tm_yday - 1) * 86_400 + t.hour * 3600 + t.minute * 60 + t.second
        return seconds // self._profile_step_s

    def _load_profiles(self) -> list[tuple[str, str, np.ndarray, np.ndarray]]:
        tables = grid_models.load_profiles(self.params.network, **self.params.network_params)
        self._profile_step_s = grid_models.profile_step_s(self.params.network) or 900
        out = []
        for key, frame in (tables or {}).items():
            kind, column = key.split(".")
            if kind not in KINDS or column not in ELEMENT_ATTRS:
                continue
            pos = self.flow.net[kind].index.get_indexer(frame.columns)
            keep = pos >= 0
            out.append((column[0], kind, pos[keep], frame.to_numpy()[:, keep]))
        return out

    def _fill_grid_outputs(self, converged: bool) -> None:
        if self.grid_eid is None:
            return
        out = self.out[self.grid_eid]
        out["converged"] = bool(converged)
        out["n_nonconverged"] = self.n_nonconverged
        if not converged and "vm_min_pu" in out:
            return  # hold the last good values
        f = self.flow
        vm = f.vm_pu
        loadings = np.concatenate([f.line_loading_pct, f.trafo_loading_pct])
        extremes = getattr(f, "node_vm_pu", vm)  # OpenDSS: extremes over every phase
        out["vm_min_pu"] = float(np.nanmin(extremes)) if np.isfinite(extremes).any() else math.nan
        out["vm_max_pu"] = float(np.nanmax(extremes)) if np.isfinite(extremes).any() else math.nan
        out["p_import_mw"], out["q_import_mvar"], out["losses_mw"] = f.p_import_mw, f.q_import_mvar, f.losses_mw
        out["max_loading_pct"] = float(np.nanmax(loadings)) if np.isfinite(loadings).any() else math.nan
        out.update(zip(self._bus_attrs, vm.tolist()))
        out.update(zip(self._line_attrs, f.line_loading_pct.tolist()))
        out.update(zip(self._trafo_attrs, f.trafo_loading_pct.tolist()))
        if self.params.engine == "opendss":
            out.update(f.device_outputs())


def _opendss_entity_problems(model: str, params: ElementParams, sim_params: SimParams) -> list[str]:
    """An unknown bus or load, or phases the bus does not have, named before any simulator starts."""
    from adapters._grid_opendss import sanitise as dss_sanitise
    from adapters._grid_opendss import unknown_bus_message

    try:
        path = grid_models.dss_file(sim_params.network)
        info = opendss_circuit_info(path)
    except ValueError as exc:
        return [str(exc)]
    if params.element is not None:
        if model != "Load":
            return [f"element = {params.element!r}: the opendss engine drives existing loads only"]
        if not any(str(params.element).lower() in (n.lower(), dss_sanitise(n)) for n in info.loads):
            return [f"unknown load {params.element!r} in {path.name} (e.g. {', '.join(info.loads[:6])})"]
        return []
    ref = str(params.bus).strip()
    match = [i for i, b in enumerate(info.buses) if ref.lower() == b.lower() or ref == dss_sanitise(b)]
    if not match:
        return [unknown_bus_message(ref, info.buses, path.name)]
    have = info.bus_phases[match[0]]
    if set(params.phases) - set(have):
        return [f"bus {ref!r} has phases {have!r}, not {params.phases!r}; set phases to a subset of {have!r}"]
    return []


def _build_meta(ids: dict[str, list[str]], extra_outputs: list[str] = ()) -> dict[str, Any]:
    grid_outputs = [*GRID_OUTPUTS, *(f"bus_{i}_vm_pu" for i in ids["bus"]),
                    *(f"line_{i}_loading_pct" for i in ids["line"]),
                    *(f"trafo_{i}_loading_pct" for i in ids["trafo"]), *extra_outputs]
    models = {"Grid": model_meta(inputs=[f"line_{i}_in_service" for i in ids["line"]], outputs=grid_outputs)}
    for model in MODEL_KIND:
        models[model] = model_meta(inputs=ELEMENT_ATTRS, outputs=[*ELEMENT_ATTRS, "vm_pu"], params=ElementParams)
    return {"api_version": "3.0", "type": "time-based", "models": models}
