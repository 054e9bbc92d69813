"""The pandapower engine of the grid adapter: the net stays defined in pandapower and each
step is solved with lightsim2grid's Newton solver on pandapower's own internal model
(switches, islands and out-of-service elements handled as ``runpp`` handles them), warm-
started from the previous voltages; a topology change rebuilds that model once. The arithmetic
around the solve runs in C when ``make build`` compiled ``_kernels.c`` (same numbers, bit for
bit, checked at load time and in tests/adapters/test_grid_kernels.py), else in numpy."""

from __future__ import annotations

import copy
import ctypes
import math
import threading
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pandapower as pp
import pandapower.auxiliary as aux
import pandapower.build_branch as build_branch
import pandapower.topology as topology
from scipy import sparse

#: ``a.sum()`` without ndarray.sum's Python wrapper (it calls this ufunc reduction; same sums)
_sum = np.add.reduce

try:  # the loop scipy's ``csr @ vector`` runs, without its dispatch (~10 µs a step); same sums
    from scipy.sparse._sparsetools import csr_matvec as _csr_matvec
except ImportError:  # another scipy layout: the operator
    _csr_matvec = None
import lightsim2grid
from lightsim2grid.algorithm import NRSing_KLU
from pandapower.pd2ppc import _pd2ppc
from pandapower.pf.ppci_variables import _get_pf_variables_from_ppci
from pandapower.pf.run_dc_pf import _run_dc_pf
from pandapower.pypower.idx_brch import F_BUS, T_BUS
from pandapower.pypower.idx_bus import BASE_KV, PD, QD, SL_FAC, VA
from pandapower.pypower.makeSbus import makeSbus
from pandapower.pypower.makeYbus import makeYbus

from cosim.adapters.grid.pandapower_tables import (  # noqa: F401  (the engine's names, read here too)
    ELEMENT_ATTRS,
    ELEMENT_VOLTAGE_OUTPUTS,
    GRID_OUTPUTS,
    INJECTION_SIGN,
    KINDS,
    MAX_ITERATION,
    MODEL_KIND,
    SERVED_ATTR,
    TOLERANCE_MVA,
    element_ids,
    locate_in,
    sanitise,
    slack_problems,
    unsupplied_bus_problem,
    unsupplied_buses,
)
from cosim.sdk import library_agrees, load_library, note_acceleration


class PowerFlow:
    """A pandapower net solved repeatedly with only its injections and line states changing.

    Args:
        net: the network; this object owns and edits it (new elements, line states).
        solver: ``"lightsim2grid"`` (fast path) or ``"pandapower"`` (``pp.runpp`` each solve).
        key: what ``net`` is as loaded (hashable, e.g. the catalogue name and its parameters),
            or None. With a key, the solver model built for the net plus the same elements
            attached in the same order is kept in this process and the next PowerFlow of that
            key and those elements starts from a copy of it instead of converting the net
            again (a Gymnasium env's reset builds the same grid every episode); a line or shunt
            switched before the first solve makes the net another one, built and not kept.
    """

    def __init__(self, net, solver: str = "lightsim2grid", key: Any = None) -> None:
        self.net = net
        #: ``net`` is shared with copies of this object (:meth:`__deepcopy__`): copied before an edit
        self._net_shared = False
        #: the net keys a restored model left to write into ``net`` once this object owns it (:meth:`_restore`)
        self._net_pending: dict[str, Any] | None = None
        self._recipe: tuple | None = None if key is None else (key,)
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
        #: the Newton solver was told that nothing but Sbus and V change from its last solve (:func:`_tell_solver`)
        self._analysis_kept = False
        #: ``(V0, Sbus)`` of the solve that built the analysis the solver keeps (a copy's solver replays it, :meth:`_solver`)
        self._analysis_from: tuple[np.ndarray, np.ndarray] | None = None
        #: the next solve may be skipped when its injections are the last solve's to the bit (:meth:`_solve_newton`):
        #: that solve went through the C kernels, started with the analysis kept, found the mismatch below the
        #: tolerance before any iteration (no factorization: the solver's state is as before) and so gave back V bit
        #: for bit as it started from it (``_v_solved``, the kernels' last V, still the start). Its outcome is then a
        #: function of V, Sbus and the model alone: the same call again gives the same V, and the kernels the same
        #: results from it. Anything else (a failure, a rebuild, numpy's forms, a copy) clears it.
        self._repeat = False
        self._v_solved: np.ndarray | None = None
        #: solves skipped so (:attr:`_repeat`)
        self.n_repeats = 0
        self._solved_once = False  # pandapower path: warm start from results
        self._options_set = False
        #: the per-step arithmetic in C (adapters/grid/_kernels.c) when built; same numbers as numpy
        #: (False: numpy's forms, from the next solve on)
        self.use_kernels = True
        self._kernels: _Kernels | None = None
        #: the band :meth:`set_band` gave; the summary the C kernels computed with the last converged solve
        #: and its voltages and loadings in one array (bus, line, trafo order; ``vm_pu`` and the loadings are
        #: views of it) (None: not computed; the adapter then takes numpy's forms of the same numbers)
        self._band: tuple | None = None
        self.summary: list[float] | None = None
        self.element_values: np.ndarray | None = None
        self._read_tables()

    # -- copies ----------------------------------------------------------------------------
    def __deepcopy__(self, memo: dict) -> "PowerFlow":
        """A copy that shares the pandapower net with this object until either edits it (copy on
        write, :meth:`_own_net`): a gym reset copies a flow set up once, and steps that switch no
        line or shunt never edit the net (the lightsim2grid path reads it only when it builds the
        solver model). Everything else is copied, but for lightsim2grid's solver (it cannot be copied)
        and the C kernels, both made anew for the copy (:meth:`_solver`, :meth:`_Kernels.make`): the copy
        solves as this object would, to the bit."""
        new = object.__new__(type(self))
        memo[id(self)] = new
        self._net_shared = True
        for name, value in self.__dict__.items():
            if name not in _NOT_COPIED:
                new.__dict__[name] = copy.deepcopy(value, memo)
        new.net = self.net
        new._fresh_copy(self)
        return new

    def __getstate__(self) -> dict[str, Any]:
        """Pickled: everything but the solver and the C kernels, made anew when unpickled (as for a deep copy)."""
        state = {name: value for name, value in self.__dict__.items() if name not in ("_nr", "_kernels")}
        if "_nr" in self.__dict__:
            state["_nr"] = None  # made at the next solve (_solver)
        state["_net_shared"] = False  # the pickle holds its own net
        state["_kernels"] = self._kernels is not None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._repeat = False
        if self._inj is not None:
            self._point_views()
        self._kernels = _Kernels.make(self) if state["_kernels"] else None

    def _fresh_copy(self, original: "PowerFlow") -> None:
        """This copy's own solver (made at its next solve, :meth:`_solver`) and C kernels (for its arrays)."""
        if "_nr" in original.__dict__:
            self._nr = None
        self._repeat = False
        if self._inj is not None:
            self._point_views()
        self._kernels = _Kernels.make(self) if original._kernels is not None else None

    def _own_net(self) -> None:
        """Before an edit of ``net``: a net shared with copies becomes this object's own copy, with
        the keys a restored model left pending (:meth:`_restore`) written in."""
        if self._net_shared:
            self.net = copy.deepcopy(self.net)
            self._net_shared = False
        if self._net_pending is not None:
            for name, value in self._net_pending.items():
                self.net[name] = copy.deepcopy(value)
            self._net_pending = None

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
        self._own_net()
        create = {"load": pp.create_load, "sgen": pp.create_sgen, "storage": pp.create_storage}[kind]
        extra = {"max_e_mwh": 0.0} if kind == "storage" else {}
        create(self.net, bus=bus_index, p_mw=p_mw, q_mvar=q_mvar, name=name, **extra)
        if self._recipe is not None:
            self._recipe += ((kind, int(bus_index), float(p_mw), float(q_mvar), str(name)),)
        self._stale = True
        self._read_tables()
        return len(self.net[kind]) - 1

    def set_line_in_service(self, pos: int, in_service: bool) -> None:
        """Switch line ``pos`` (position in ``net.line``); the matrices rebuild on the next solve."""
        column = self.net.line["in_service"]
        if bool(column.iat[pos]) != in_service:
            self._own_net()
            self.net.line.loc[self.net.line.index[pos], "in_service"] = in_service
            self._stale = True
            self._recipe = None  # another net than the key's

    def set_shunt_step(self, pos: int, step: float | None) -> None:
        """Set shunt ``pos``'s step (position in ``net.shunt``; rounded; a step outside
        ``[0, max_step]`` is refused; ``None``/NaN leaves it); the matrices rebuild on the next solve."""
        if step is None or not math.isfinite(step):
            return
        shunt = self.net.shunt
        top = int(shunt["max_step"].iat[pos]) if "max_step" in shunt and shunt["max_step"].notna().iat[pos] else 1
        value = int(round(step))
        if not 0 <= value <= top:
            raise ValueError(f"shunt_{element_ids(shunt)[pos]}_set_count = {step:g}: the shunt has steps 0 to {top} "
                             "(its max_step); give a step inside them")
        if int(shunt["step"].iat[pos]) != value:
            self._own_net()
            shunt = self.net.shunt
            shunt.loc[shunt.index[pos], "step"] = value
            self._stale = True
            self._recipe = None  # another net than the key's

    def n_lines_out(self) -> int:
        """Lines out of service (``net.line.in_service`` False, the network's own included). [-]"""
        return int((~self.net.line["in_service"].astype(bool)).sum())

    def bus_of(self, kind: str, pos: int) -> int:
        """Position in ``net.bus`` of the bus element ``pos`` of ``kind`` stands on."""
        # kept: the pandas lookups cost ~20 µs, and the adapter asks for every element each step
        key = (kind, pos)
        if key not in self._bus_pos:
            self._bus_pos[key] = int(self.net.bus.index.get_loc(self.net[kind]["bus"].iat[pos]))
        return self._bus_pos[key]

    def element_vm_pu(self, kind: str, pos: int) -> float:
        """Voltage at the bus of element ``pos`` of ``kind``. [pu]"""
        return float(self.vm_pu[self.bus_of(kind, pos)])

    def element_node_vm_pu(self, kind: str, pos: int) -> np.ndarray:
        """The element's phase voltages: one, its bus's (a balanced net). [pu]"""
        return self.vm_pu[self.bus_of(kind, pos):self.bus_of(kind, pos) + 1]

    @property
    def node_vm_pu(self) -> np.ndarray:
        """Voltage per node: per bus (one node per bus in a balanced net). [pu]"""
        return self.vm_pu

    @property
    def node_bus(self) -> np.ndarray:
        """Bus position of each node."""
        return np.arange(len(self.vm_pu), dtype=np.int64)

    def dead_bus_mask(self) -> np.ndarray:
        """Per bus (``net.bus`` order): True where the network as it stands has no voltage to give
        (out of service, or no path of in-service branches and closed switches to a source)."""
        net = self.net
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            dead = set(topology.unsupplied_buses(net))
        mask = net.bus.index.isin(list(dead))
        if "in_service" in net.bus:
            mask |= ~net.bus.in_service.to_numpy(bool)
        return np.asarray(mask, dtype=bool)

    def default_excluded_buses(self) -> list[int]:
        """Bus positions left out of the all-bus voltage outputs: the slack (``ext_grid``) buses."""
        buses = self.net.ext_grid.bus[self.net.ext_grid.in_service.astype(bool)] if len(self.net.ext_grid) else []
        return sorted({int(self.net.bus.index.get_loc(b)) for b in buses})

    def set_band(self, monitored: np.ndarray, v_low_pu: float, v_high_pu: float, dead_at_start: np.ndarray) -> None:
        """Let the C kernels compute the Grid's summary with each converged solve (:attr:`summary`:
        extremes of ``vm_pu`` and of the loadings, the band statistics of the ``monitored`` bus
        positions, the count of dead buses and of those not dead in ``dead_at_start``)."""
        self._band = (np.asarray(monitored, np.int64), float(v_low_pu), float(v_high_pu),
                      np.asarray(dead_at_start, bool))
        if self._kernels is not None:
            self._kernels, self._repeat = _Kernels.make(self), False

    def injection_buffers(self) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        """Per-kind arrays of element powers holding the tables' values (:attr:`p0`, :attr:`q0`), to be written
        and passed to :meth:`solve` step after step: views into the arrays the C kernels read, so a solve reads
        them as they are instead of gathering them. (Anything else passed to :meth:`solve` is gathered.) New
        arrays after an element is attached."""
        if self._inj is None:
            p_all = np.concatenate([self.p0[k] for k in KINDS])
            q_all = np.concatenate([self.q0[k] for k in KINDS])
            self._inj = (p_all, q_all, {}, {})
            self._point_views()
            if self._kernels is not None:  # they read these arrays from now on
                self._kernels, self._repeat = _Kernels.make(self), False
        return self._inj[2], self._inj[3]

    def _point_views(self) -> None:
        """Make the per-kind arrays of :meth:`injection_buffers` views into its two arrays again (in place: a
        caller holds the dicts; a copy's arrays are copies, not views)."""
        p_all, q_all, p_views, q_views = self._inj
        start = 0
        for kind in KINDS:
            stop = start + len(self.p0[kind])
            p_views[kind], q_views[kind] = p_all[start:stop], q_all[start:stop]
            start = stop

    # -- solving -----------------------------------------------------------------------
    def solve(self, p_mw: dict[str, np.ndarray], q_mvar: dict[str, np.ndarray]) -> bool:
        """Solve with these element powers (table order, table sign); True when converged.

        On failure the previous results are kept and the next solve warm-starts from the
        last converged voltages.
        """
        if self.solver == "pandapower":
            self.summary = self.element_values = None
            return self._solve_pandapower(p_mw, q_mvar)
        if self._stale:
            self._build()
        kept = self._analysis_kept
        if self._solve_newton(p_mw, q_mvar):
            return True
        if not kept:
            return False
        # KLU refactored with the pivots of its first factorization: the failure (no convergence, a NaN) may
        # be theirs, so the same solve again from the same start with everything rebuilt (the failed solve
        # told the solver so), as it always was
        return self._solve_newton(p_mw, q_mvar)

    def _solve_newton(self, p_mw: dict[str, np.ndarray], q_mvar: dict[str, np.ndarray]) -> bool:
        kernels = self._kernels if self.use_kernels else None
        if kernels is not None:
            sbus, same_sbus = kernels.sbus(p_mw, q_mvar)
            if same_sbus and self._repeat and self._V is self._v_solved:
                # the last solve again (the same injections, from the voltages it started from and returned):
                # its results stand, to the bit (:attr:`_repeat`)
                self.n_repeats += 1
                return True
        else:
            p_all = np.concatenate([p_mw[k] for k in KINDS]) * self._inj_factor
            q_all = np.concatenate([q_mvar[k] for k in KINDS]) * self._inj_factor
            n = self._n_bus
            s_el = np.bincount(self._inj_bus, p_all, n + 1)[:n] + 1j * np.bincount(self._inj_bus, q_all, n + 1)[:n]
            sbus = self._s_const + s_el / self._base_mva
        self.summary = self.element_values = None
        self._repeat = False
        kept, from_solved = self._analysis_kept, self._V is self._v_solved
        ok = self._newton(sbus)
        if ok != self._analysis_kept and _KEEP_ANALYSIS:
            # converged: the next solve changes only Sbus and the start V, so the solver keeps the Jacobian's
            # pattern and KLU's analysis and refactors; not converged: both rebuilt next time, as at first
            _tell_solver(self._nr, nothing_changed=ok)
            self._analysis_kept = ok
        if not ok:
            return False
        vm, va = self._nr.get_Vm(), self._nr.get_Va()
        if kernels is not None:  # the check below and the results in C
            v = kernels.results(self, vm, va)
            if v is None:
                return False
            # V came back bit for bit as it went in (the kernels' last V), converged before any iteration: the same
            # injections next time make the same solve (_repeat)
            self._repeat = kept and from_solved and kernels.same_v and self._nr.get_nb_iter() == 0
            self._V = self._v_solved = v
            self._sbus = sbus
            return True
        if not (math.isfinite(_sum(vm)) and math.isfinite(_sum(va))):  # a NaN or inf anywhere
            return False
        v = vm * np.exp(1j * va)
        self._V, self._sbus = v, sbus
        self._results(v, sbus)
        return True

    def _newton(self, sbus: np.ndarray) -> bool:
        """lightsim2grid's Newton solve from the last converged voltages (``self._V`` is left as it is)."""
        nr = self._nr if self._nr is not None else self._solver()
        if not self._analysis_kept and _KEEP_ANALYSIS:  # this solve builds the analysis the next ones keep: a copy replays it
            self._analysis_from = (self._V.copy(), sbus.copy())
        return _solve(nr, self, self._V, sbus)

    def _solver(self) -> NRSing_KLU:
        """A new solver in the state of the one this object's original had when it was copied (:meth:`__deepcopy__`):
        the analysis it kept (the Jacobian's pattern, KLU's analysis and its pivots, which later refactorizations
        keep) is the one the solve that built it made, so that solve is made again, its results dropped."""
        nr = self._nr = NRSing_KLU()
        if self._analysis_kept:
            v0, sbus = self._analysis_from
            rebuilt = _solve(nr, self, v0.copy(), sbus)
            _tell_solver(nr, nothing_changed=rebuilt)
            self._analysis_kept = rebuilt
        return nr

    def _results(self, v: np.ndarray, sbus: np.ndarray) -> None:
        # the solved values go into buffers one longer than needed: the last entry (NaN / 0)
        # is what positions without a solved value (a bus out of service, no branch) read
        vm_ext, loading = self._vm_ext, self._loading_ext
        np.abs(v, out=vm_ext[:-1])
        self.vm_pu = vm_ext[self._bus_map]
        currents = _matvec(self._y_out, v)  # [Yf; Yt; Ybus rows of the slack]: one product a step
        n_br = self._n_br
        i_f, i_t = currents[:n_br], currents[n_br:2 * n_br]
        np.maximum(np.abs(i_f) * self._c_f, np.abs(i_t) * self._c_t, out=loading[:-1])
        self.line_loading_pct = loading[self._line_br]
        self.trafo_loading_pct = loading[self._trafo_br]
        s_loss = v[self._f] * np.conj(i_f) + v[self._t] * np.conj(i_t)
        self.losses_mw = float(_sum(s_loss.real[self._loss_br]) * self._base_mva)
        s_ref = v[self._ref] * np.conj(currents[2 * n_br:])
        s_import = (_sum(s_ref - sbus[self._ref]) + self._s_gen_ref) * self._base_mva
        self.p_import_mw, self.q_import_mvar = float(s_import.real), float(s_import.imag)

    def _solve_pandapower(self, p_mw, q_mvar) -> bool:
        self._own_net()
        for kind in KINDS:
            if len(self.net[kind]):
                self.net[kind]["p_mw"] = p_mw[kind]
                self.net[kind]["q_mvar"] = q_mvar[kind]
        # warm start from the last results, unless they have NaN (buses that were de-energised: a
        # start from NaN never converges once they are fed again); then pandapower's own start
        warm = self._solved_once and bool(np.isfinite(self.net.res_bus.vm_pu.to_numpy(float)).all())
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                pp.runpp(self.net, init="results" if warm else "auto")
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
        self._bus_pos: dict[tuple[str, int], int] = {}  # bus_of, read again after an edit
        self.p0 = {k: self.net[k]["p_mw"].to_numpy(float).copy() for k in KINDS}
        self.q0 = {k: self.net[k]["q_mvar"].to_numpy(float).copy() for k in KINDS}
        #: ``(p, q, p per kind, q per kind)``: the element powers a caller writes and the solve reads (one array
        #: each, the kinds' views into it: :meth:`injection_buffers`); None until asked for
        self._inj: tuple | None = None

    def _build(self) -> None:
        """Convert the net with pandapower's ppc builder; keep what each solve needs (or copy
        it from the model built before for the same key and elements, :data:`_BUILT`)."""
        recipe = self._recipe
        if recipe is not None and recipe in _BUILT:
            self._restore(_BUILT[recipe])
            return
        with _python_helpers():
            self._build_model()
        if recipe is not None:
            _BUILT[recipe] = self._snapshot()
            while len(_BUILT) > _BUILT_MAX:  # a hosting scan or a sweep builds many variants: keep the newest
                del _BUILT[next(iter(_BUILT))]

    def _snapshot(self) -> dict[str, Any]:
        """Copies of what :meth:`_build_model` set (the C kernels' buffers and the Newton solver
        are made anew on restore)."""
        model = {name: copy.deepcopy(getattr(self, name)) for name in _MODEL_ATTRS}
        net = {name: copy.deepcopy(self.net[name]) for name in _MODEL_NET_KEYS if name in self.net}
        return {"model": model, "net": net}

    def _restore(self, built: dict[str, Any]) -> None:
        for name, value in built["model"].items():  # the model's arrays are read only: shared, but the state
            setattr(self, name, copy.deepcopy(value) if name in _MODEL_STATE else value)
        if self._net_shared:  # written when this object first edits the net (the solve never reads them)
            self._net_pending = built["net"]
        else:
            for name, value in built["net"].items():
                self.net[name] = copy.deepcopy(value)
        self._options_set = True
        self._nr, self._analysis_kept, self._analysis_from, self._repeat = NRSing_KLU(), False, None, False
        self._kernels = _Kernels.make(self)
        self._stale = False

    def _build_model(self) -> None:
        self._own_net()  # the conversion writes lookups and options into the net
        net = self.net
        if not self._options_set:  # options of this pandapower version, not a JSON file's
            self._init_options()
            self._options_set = True
        # The first Newton start: DC angles of the net *with* its loads (a start from "all
        # generation, no load" put case300's angles at +-178 deg and 8 pandapower cases never
        # converged where runpp does); the model itself is built without the element injections.
        ppci_loaded = self._ppci(net)
        saved = {k: (net[k]["p_mw"].copy(), net[k]["q_mvar"].copy()) for k in KINDS}
        for kind in KINDS:  # element injections are added per solve, the rest is constant
            net[kind]["p_mw"] = 0.0
            net[kind]["q_mvar"] = 0.0
        try:
            ppci = self._ppci(net)
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
        self._n_br = yf.shape[0]
        self._y_out = sparse.vstack([self._yf, self._yt, ybus.tocsr()[ref, :]], format="csr")
        # int32: the index type lightsim2grid's solve takes (int64 arrays were converted every call,
        # ~4 µs of a ~45 µs solve on ieee33; the same numbers)
        self._ref, self._pv, self._pq = ref.astype(np.int32), pv.astype(np.int32), pq.astype(np.int32)
        weights = bus[:, SL_FAC].astype(float)
        if not weights[ref].any():
            weights[ref] = 1.0 / len(ref)
        self._slack_w = weights
        self._V = self._initial_voltages(ppci_loaded, v0)
        self._nr, self._analysis_kept, self._analysis_from, self._repeat = NRSing_KLU(), False, None, False

        lookup = net._pd2ppc_lookups["bus"]
        bus_map = lookup[net.bus.index.to_numpy()]
        self._bus_map = np.where((bus_map >= 0) & (bus_map < n), bus_map, n)
        self._vm_ext = np.append(np.zeros(n), np.nan)  # |V| per solved bus, then NaN (_results)
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
        self._kernels = _Kernels.make(self)
        self._stale = False

    @staticmethod
    def _ppci(net):
        """pandapower's internal model of ``net`` as it is now (``_pd2ppc`` with fresh lookups)."""
        net._pd2ppc_lookups = {k: np.array([], dtype=np.int64)
                               for k in ("bus", "bus_dc", "ext_grid", "gen", "branch", "branch_dc")}
        return _pd2ppc(net)[1]

    @staticmethod
    def _initial_voltages(ppci, v0: np.ndarray) -> np.ndarray:
        """Set-point magnitudes with DC power-flow angles, as pandapower's ``init="dc"``.

        A flat start fails on nets whose transformers shift the phase (SimBench's Dyn5
        units turn the MV side by 150 degrees); the DC solution carries those shifts.
        """
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
        self._loading_ext = np.zeros(n_br + 1)  # loading per branch, then 0 (_results)
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


#: What a copy does not copy (:meth:`PowerFlow.__deepcopy__`): the net (shared until edited), lightsim2grid's solver
#: (not copyable: made anew) and the C kernels (made for the copy's arrays)
_NOT_COPIED = frozenset({"net", "_nr", "_kernels"})

#: The solver models built so far in this process, by net key and attached elements (PowerFlow's ``key``).
_BUILT: dict[tuple, dict[str, Any]] = {}
#: At most this many are kept (oldest dropped first): a reset rebuilds the same few; variants differ.
_BUILT_MAX = 8
#: The attributes :meth:`PowerFlow._build_model` sets (besides ``_nr``, ``_kernels`` and ``_stale``).
_MODEL_ATTRS = ("_s_const", "_s_gen_ref", "_n_bus", "_base_mva", "_ybus", "_yf", "_yt", "_n_br", "_y_out", "_ref",
                "_pv", "_pq", "_slack_w", "_V", "_bus_map", "_vm_ext", "_inj_bus", "_inj_factor", "_f", "_t",
                "_c_f", "_c_t", "_loading_ext", "_line_br", "_trafo_br", "_loss_br")
#: Of these, what a solve changes (in place: ``_vm_ext``, ``_loading_ext``; replaced: ``_V``): each flow copies it;
#: the rest (admittances, maps, factors) no step writes, and flows of one model share it
_MODEL_STATE = ("_V", "_vm_ext", "_loading_ext")
#: What the conversion leaves in the net that a later call may read (pandapower's options and lookups).
_MODEL_NET_KEYS = ("_options", "_pd2ppc_lookups", "_is_elements", "_isolated_buses")

_SWAP_LOCK = threading.Lock()

#: lightsim2grid's Newton solver keeps the Jacobian's sparsity pattern and KLU's symbolic analysis from one solve
#: to the next when its solver control (C++ ``AlgoControl``: 14 flags, all True from the constructor) says that
#: nothing but Sbus and V changed: its own ``LSGrid`` and batch classes tell it so, but the Python classes of
#: its algorithms have no method for it, so each call rebuilds both (~15-30 µs of a 33-bus step, ~3 ms of a
#: 3,000-bus one). The control's place in the object, read from the headers of this version:
#: ``(version, byte offset in the C++ object, size)``. Kept analysis, refactored Jacobian: the same numbers to
#: the bit as rebuilt on every network and catalogue scenario tried (tests/adapters/test_grid_keep_analysis.py).
#: KLU refactors with the pivots its first factorization chose; a fresh factorization chooses the same while
#: they stay the diagonal's. An operating point where it would choose others could differ in the last bits
#: (a failure is solved again rebuilt, :meth:`PowerFlow.solve`).
_SOLVER_CONTROL = ("1.2.0", 144, 14)


def _solver_control_address(nr: NRSing_KLU) -> int:
    """Address of ``nr``'s solver control: pybind11 keeps the C++ object's address right after the Python
    object's header (the simple layout of its instances)."""
    return ctypes.c_void_p.from_address(id(nr) + object.__basicsize__).value + _SOLVER_CONTROL[1]


def _tell_solver(nr, nothing_changed: bool) -> None:
    """Set ``nr``'s solver control: nothing changed (keep the analysis) or everything did (rebuild it). Only
    on lightsim2grid's own solver object (a wrapper, as a benchmark's recorder, is left alone)."""
    if type(nr) is NRSing_KLU:
        ctypes.memset(_solver_control_address(nr), 0 if nothing_changed else 1, _SOLVER_CONTROL[2])


def _control_found() -> bool:
    """The installed lightsim2grid is the version the control's place was read for, a new solver holds
    exactly its constructor's 14 True flags there, and clearing them does what they mean: on a 3-bus feeder,
    a second solve keeps the first one's analysis (one reset, analysis and factorization for both) and gives the voltages of a
    solver that rebuilt everything (a version string says little: builds of one version differ). Else
    (False) the analysis is rebuilt at every solve."""
    if lightsim2grid.__version__ != _SOLVER_CONTROL[0] or object.__basicsize__ != 16:
        return False
    nr = NRSing_KLU()
    if ctypes.string_at(_solver_control_address(nr), _SOLVER_CONTROL[2]) != b"\x01" * _SOLVER_CONTROL[2]:
        return False
    y_line = 1.0 / (0.01 + 0.03j)
    ybus = sparse.csc_matrix(np.array([[y_line, -y_line, 0], [-y_line, 2 * y_line, -y_line], [0, -y_line, y_line]]))
    v0, ref, pv, pq = np.ones(3, complex), np.array([0], np.int32), np.zeros(0, np.int32), np.array([1, 2], np.int32)
    weights = np.array([1.0, 0.0, 0.0])
    loads = (np.array([0, -0.5 - 0.2j, -0.3 - 0.1j]), np.array([0, -0.6 - 0.2j, -0.2 - 0.1j]))
    try:
        ok = nr.solve(ybus, v0, loads[0], ref, weights, pv, pq, 10, 1e-10)
        _tell_solver(nr, nothing_changed=True)
        ok = ok and nr.solve(ybus, v0, loads[1], ref, weights, pv, pq, 10, 1e-10)
        fresh = NRSing_KLU()
        ok = ok and fresh.solve(ybus, v0, loads[1], ref, weights, pv, pq, 10, 1e-10)
        stats = nr.get_linear_solver_stats()
        return bool(ok) and (stats.nb_reset, stats.nb_analyze, stats.nb_factorize) == (1, 1, 1) \
            and np.array_equal(nr.get_V(), fresh.get_V())
    except Exception:  # noqa: BLE001 — whatever went wrong, the analysis is rebuilt at every solve
        return False
    finally:
        _tell_solver(nr, nothing_changed=False)


#: keep the solver's analysis between solves (:data:`_SOLVER_CONTROL`)
_KEEP_ANALYSIS = note_acceleration("pandapower_keep_analysis", _control_found(),
                                   f"lightsim2grid {lightsim2grid.__version__} (its solver control's place is "
                                   f"known for {_SOLVER_CONTROL[0]})")


@contextmanager
def _python_helpers():
    """pandapower's plain-Python forms of the three small helpers its ppc builder jits with numba
    (``set_elements_oos``, ``set_isolated_buses_oos``, ``get_values``: element-in-service flags and
    a table lookup, the same values either way; pandapower ships them for installs without numba).

    The builder runs a few times per run (at the start, after a switching change), where loading
    the jitted forms from numba's cache cost ~0.7 s per process (numba's start-up), most of a
    day's first step. Swapped back afterwards; a pandapower without these names keeps its own.
    One build at a time (a lock): two threads building at once would otherwise restore each other's swap.
    """
    swaps = [(aux, "set_elements_oos", getattr(aux, "_python_set_elements_oos", None)),
             (aux, "set_isolated_buses_oos", getattr(aux, "_python_set_isolated_buses_oos", None)),
             (build_branch, "get_values", getattr(aux, "_get_values", None))]
    swaps = [(module, name, plain) for module, name, plain in swaps if plain is not None and hasattr(module, name)]
    with _SWAP_LOCK:
        saved = [(module, name, getattr(module, name)) for module, name, _ in swaps]
        try:
            for module, name, plain in swaps:
                setattr(module, name, plain)
            yield
        finally:
            for module, name, original in saved:
                setattr(module, name, original)


def _matvec(matrix: sparse.csr_matrix, v: np.ndarray) -> np.ndarray:
    """``matrix @ v`` for a CSR matrix and a complex vector: scipy's own loop, called directly."""
    if _csr_matvec is None or matrix.format != "csr" or matrix.dtype != np.complex128 or v.dtype != np.complex128:
        return matrix @ v
    rows, cols = matrix.shape
    result = np.zeros(rows, dtype=np.complex128)
    _csr_matvec(rows, cols, matrix.indptr, matrix.indices, matrix.data, v, result)
    return result


def _solve(nr: NRSing_KLU, flow: PowerFlow, v0: np.ndarray, sbus: np.ndarray) -> bool:
    """lightsim2grid's Newton solve of ``flow``'s model from ``v0`` with injections ``sbus``; True when converged."""
    try:
        return bool(nr.solve(flow._ybus, v0, sbus, flow._ref, flow._slack_w, flow._pv, flow._pq,
                             MAX_ITERATION, TOLERANCE_MVA))
    except Exception:  # lightsim2grid raises on singular Jacobians: a non-convergence too
        return False


def _address(array: np.ndarray) -> int:
    return array.__array_interface__["data"][0]


def _load_kernels(lib_path: Path = Path(__file__).with_name("_kernels.so")):
    """``adapters/grid/_kernels.so`` (``make build``), or None: not built from its C source as it is now
    (an edited source is not trusted until rebuilt), not loadable (:func:`cosim.sdk.load_library`), or not
    numpy's numbers on this machine (:func:`_agrees_with_numpy`); then numpy does the work."""
    # its calls keep the GIL (CDLL releases and retakes it around each call); the kernels are short and never
    # call into Python, and the machine code run is the same
    lib = load_library(lib_path, keep_gil=True)
    if lib is None:
        return None
    ptr, i64 = ctypes.c_void_p, ctypes.c_int64
    for name in ("cosim_sbus_s", "cosim_voltages_s", "cosim_results_s"):
        getattr(lib, name).argtypes = [ptr]
    lib.cosim_results_s.restype = None
    lib.cosim_sbus_s.restype = lib.cosim_voltages_s.restype = i64
    lib.cosim_solved_s.argtypes = [ptr]
    lib.cosim_solved_s.restype = i64
    lib.cosim_set_abs_fused.argtypes = [ctypes.c_int]
    for name in ("cosim_csum", "cosim_cabs", "cosim_exp_j"):
        getattr(lib, name).argtypes = [i64, ptr, ptr]
    lib.cosim_sum.argtypes = [i64, ptr]
    lib.cosim_sum.restype = ctypes.c_double
    lib.cosim_set_fused.argtypes = [ctypes.c_int]
    lib.cosim_cmul.argtypes = [i64, ptr, ptr, ptr]
    lib.cosim_matvec.argtypes = [i64, ptr, ptr, ptr, ptr, ptr]
    return library_agrees(lib, _agrees_with_numpy(lib))


def _agrees_with_numpy(lib) -> bool:
    """Set the C product to the one this machine's numpy computes (fused or not: its SIMD loop
    fuses where the CPU has FMA) and check it, the CSR product against scipy's and the sum against
    numpy's ``add.reduce``, bit for bit on random numbers; False (numpy does the work) when one
    does not agree. (The whole kernels are compared with numpy by the tests, not here.) Run once per
    process, at import."""
    rng = np.random.default_rng(12345)
    reals = rng.standard_normal(4099) * 10.0 ** rng.integers(-8, 8, 4099)
    complexes = reals + 1j * rng.standard_normal(4099)
    got = np.zeros(1, np.complex128)
    for n in (*range(300), 1000, 4099):  # every block shape of numpy's pairwise sum, and its halving
        a, z = reals[:n], complexes[:n]
        lib.cosim_csum(n, _address(z), _address(got))
        if lib.cosim_sum(n, _address(a)) != np.add.reduce(a) or got[0] != np.add.reduce(z):
            return False
    if not _abs_agrees(lib, rng):
        return False
    pairs = []
    for n in (1, 3, 7, 8, 33, 100, 4096):  # numpy's loops may take another path for short arrays
        a = rng.standard_normal(n) * 10.0 ** rng.integers(-8, 8, n) + 1j * rng.standard_normal(n)
        b = rng.standard_normal(n) + 1j * rng.standard_normal(n) * 10.0 ** rng.integers(-8, 8, n)
        pairs.append((a, b, a * b))
    for fused in (1, 0):
        lib.cosim_set_fused(fused)
        agree = True
        for a, b, expected in pairs:
            got = np.empty(len(a), np.complex128)
            lib.cosim_cmul(len(a), _address(a), _address(b), _address(got))
            agree = agree and np.array_equal(got, expected)
        if agree:
            break
    else:
        return False
    va = rng.standard_normal(257) * 10.0 ** rng.integers(-8, 2, 257)
    e = np.empty(257, np.complex128)
    lib.cosim_exp_j(257, _address(va), _address(e))
    if not np.array_equal(e, np.exp(1j * va)):
        return False
    matrix = sparse.random(64, 64, density=0.1, random_state=7, format="csr", dtype=np.complex128)
    matrix.data = matrix.data + 1j * rng.standard_normal(matrix.nnz)
    x = rng.standard_normal(64) + 1j * rng.standard_normal(64)
    indptr, indices = matrix.indptr.astype(np.int32), matrix.indices.astype(np.int32)
    y = np.empty(64, np.complex128)
    lib.cosim_matvec(64, _address(indptr), _address(indices), _address(matrix.data), _address(x), _address(y))
    return bool(np.array_equal(y, _matvec(matrix, x)))


def _abs_agrees(lib, rng) -> bool:
    """Set the C complex abs to numpy's on this machine (its 1 + r * r fused or not) and check it on
    random numbers spanning the exponents, with zeros, infinities and NaN among them."""
    special = [0.0, -0.0, np.inf, -np.inf, np.nan, 5e-324, 1e-310, 1.0]
    z = []
    for n in (1, 2, 3, 7, 8, 9, 33, 100, 1001):  # numpy's SIMD loop and its tails
        re = rng.standard_normal(n) * 10.0 ** rng.integers(-300, 300, n)
        with np.errstate(all="ignore"):  # (some overflow to inf, 1j * inf has a NaN: more special values)
            im = re * 10.0 ** rng.integers(-20, 20, n) if n % 2 else rng.standard_normal(n) * 10.0 ** rng.integers(-300, 300, n)
            z.append(re + 1j * im)
    z.append(np.array([complex(a, b) for a in special for b in special]))
    for fused in (1, 0):
        lib.cosim_set_abs_fused(fused)
        agree = True
        for values in z:
            got = np.empty(len(values))
            lib.cosim_cabs(len(values), _address(values), _address(got))
            agree = agree and np.array_equal(got, np.abs(values), equal_nan=True)
        if agree:
            return True
    return False


_KERNELS = _load_kernels()


class _Kernels:
    """The C forms of :meth:`PowerFlow.solve`'s injection sum and of :meth:`PowerFlow._results` for
    one built model: fixed buffers, and per C function one int64 array of its arguments (addresses
    and sizes, made once). What the numpy forms hand out fresh every step (V, sbus, the bus voltages
    and loadings) is copied out of the buffers, so a caller keeping one keeps its values.
    """

    @classmethod
    def make(cls, flow: "PowerFlow") -> "_Kernels | None":
        """The kernels of ``flow``'s built model, or None: library not loaded, or the model does not :meth:`fit`."""
        return cls(flow) if _KERNELS is not None and cls.fits(flow) else None

    @staticmethod
    def fits(flow: "PowerFlow") -> bool:
        """The model's arrays have the lengths the C code indexes them by (else numpy does the work:
        a mismatch would be an out-of-bounds access in C, where numpy raises)."""
        n, n_br, y = flow._n_bus, flow._n_br, flow._y_out
        n_el = sum(len(flow.p0[k]) for k in KINDS)
        return (len(flow._inj_bus) == len(flow._inj_factor) == n_el and len(flow._s_const) == n
                and len(flow._vm_ext) == n + 1 and len(flow._loading_ext) == n_br + 1
                and len(flow._c_f) == len(flow._c_t) == len(flow._f) == len(flow._t) == n_br
                and y.shape == (2 * n_br + len(flow._ref), n) and y.nnz < 2 ** 31
                and all(0 <= int(a.min(initial=0)) and int(a.max(initial=0)) <= top for a, top in
                        ((flow._inj_bus, n), (flow._f, n - 1), (flow._t, n - 1), (flow._ref, n - 1),
                         (flow._loss_br, n_br - 1), (flow._bus_map, n), (flow._line_br, n_br), (flow._trafo_br, n_br)))
                and (flow._band is None or all(0 <= int(p) < len(flow._bus_map) for p in flow._band[0])))

    def __init__(self, flow: "PowerFlow") -> None:
        self.keep: list[np.ndarray] = []  # every array whose address is passed

        def fixed(array, dtype) -> int:
            array = np.ascontiguousarray(array, dtype=dtype)
            self.keep.append(array)
            return _address(array)

        def spec(values) -> ctypes.c_void_p:
            array = np.array(values, dtype=np.int64)
            self.keep.append(array)
            return ctypes.c_void_p(_address(array))

        flow._v_solved = None  # (not the V in these new buffers: PowerFlow._repeat)
        n, n_br = flow._n_bus, flow._n_br
        n_el = sum(len(flow.p0[k]) for k in KINDS)
        self.p_all, self.q_all = np.zeros(n_el), np.zeros(n_el)
        self.views: tuple = (None, None)  # the flow's injection_buffers when the arrays read are theirs
        if flow._inj is not None and len(flow._inj[0]) == len(flow._inj[1]) == n_el:
            self.p_all, self.q_all, *self.views = flow._inj
        self.sbus_buf = np.zeros(n, np.complex128)
        self.sbus_spec = spec([n_el, fixed(self.p_all, float), fixed(self.q_all, float), fixed(flow._inj_factor, float),
                               fixed(flow._inj_bus, np.int64), n, fixed(flow._s_const, np.complex128),
                               fixed(np.array([flow._base_mva]), float), fixed(np.zeros(2 * n), float),
                               fixed(self.sbus_buf, np.complex128)])
        y = flow._y_out
        n_rows = y.shape[0]
        # the model's own buffers are the ones written (PowerFlow reads _vm_ext and _loading_ext)
        flow._vm_ext = np.ascontiguousarray(flow._vm_ext, dtype=float)
        flow._loading_ext = np.ascontiguousarray(flow._loading_ext, dtype=float)
        self.vm, self.va, self.e = np.zeros(n), np.zeros(n), np.zeros(n, np.complex128)
        self.vc = np.zeros(n + n_rows, np.complex128)  # v, then the currents
        self.v = self.vc[:n]  # (a view: results copies v out of it)
        self.mag = np.zeros(n + n_rows)
        self.loss_re = np.zeros(len(flow._loss_br))
        self.ref_s = np.zeros(len(flow._ref), np.complex128)
        n_net, n_line, n_trafo = len(flow._bus_map), len(flow._line_br), len(flow._trafo_br)
        self.out = np.zeros(n_net + n_line + n_trafo)  # vm_pu, line and trafo loadings, one block
        self.cut = (n_net, n_net + n_line)
        out, vc = fixed(self.out, float), fixed(self.vc, np.complex128)
        self.voltages_spec = spec([n, fixed(self.vm, float), fixed(self.e, np.complex128), n_rows,
                                   fixed(y.indptr, np.int32), fixed(y.indices, np.int32), fixed(y.data, np.complex128), vc])
        # the Grid's summary (cosim_summary) when the adapter gave its band (PowerFlow.set_band)
        self.summary = np.zeros(9) if flow._band is not None else None
        if flow._band is not None:
            monitored, low, high, dead0 = flow._band
            n_mon = len(monitored)
            summary = [1, n_net, out, n_line + n_trafo, out + 8 * n_net, n_mon, fixed(monitored, np.int64),
                       fixed(np.array([low]), float), fixed(np.array([high]), float), len(dead0), fixed(dead0, np.uint8),
                       fixed(np.zeros(n_mon), float), fixed(np.zeros(n_mon), float), fixed(self.summary, float)]
        else:
            summary = [0]
        self.results_spec = spec([
            n, vc, fixed(self.mag, float), fixed(flow._vm_ext, float), n_br, fixed(flow._f, np.int64),
            fixed(flow._t, np.int64), fixed(flow._c_f, float), fixed(flow._c_t, float), fixed(flow._loading_ext, float),
            len(flow._loss_br), fixed(flow._loss_br, np.int64), fixed(self.loss_re, float),
            len(flow._ref), fixed(flow._ref, np.int64), _address(self.sbus_buf), fixed(self.ref_s, np.complex128),
            n_net, fixed(flow._bus_map, np.int64), out,
            n_line, fixed(flow._line_br, np.int64), out + 8 * n_net,
            n_trafo, fixed(flow._trafo_br, np.int64), out + 8 * (n_net + n_line),
            *summary,
        ])
        self.totals = np.zeros(3)  # losses, p_import, q_import
        self.same_v = False  # results: V came out bit for bit as the last call's
        self.solved_spec = spec([
            self.voltages_spec.value, self.results_spec.value, n, fixed(self.vm, float),
            fixed(self.va, float), fixed(self.e, np.complex128), n + n_rows, vc, fixed(self.mag, float),
            len(flow._loss_br), fixed(self.loss_re, float), len(flow._ref), fixed(self.ref_s, np.complex128),
            fixed(np.array([flow._s_gen_ref], np.complex128), np.complex128), fixed(np.array([flow._base_mva]), float),
            fixed(self.totals, float),
        ])

    def sbus(self, p_mw: dict[str, np.ndarray], q_mvar: dict[str, np.ndarray]) -> tuple[np.ndarray, bool]:
        """``PowerFlow.solve``'s bus injections (the numpy form beside it) and whether they are the last call's,
        bit for bit. The array is the kernels' own, written again by the next call (the results read it)."""
        if p_mw is not self.views[0] or q_mvar is not self.views[1]:  # not already the arrays read
            np.concatenate([p_mw[k] for k in KINDS], out=self.p_all)
            np.concatenate([q_mvar[k] for k in KINDS], out=self.q_all)
        same = _KERNELS.cosim_sbus_s(self.sbus_spec)
        return self.sbus_buf, same == 1

    def results(self, flow: "PowerFlow", vm: np.ndarray, va: np.ndarray) -> np.ndarray | None:
        """:meth:`PowerFlow.solve`'s finiteness check, then ``v = vm * exp(1j * va)`` and
        :meth:`PowerFlow._results` into ``flow``, for the injections of the last :meth:`sbus` call (kept in
        its buffer), in one C call; returns v, a new array (None: a NaN or inf in vm or va)."""
        self.vm[:] = vm
        self.va[:] = va
        solved = _KERNELS.cosim_solved_s(self.solved_spec)
        if not solved:
            return None
        self.same_v = solved == 2  # V bit for bit the last call's
        out = self.out.copy()
        a, b = self.cut
        flow.vm_pu, flow.line_loading_pct, flow.trafo_loading_pct = out[:a], out[a:b], out[b:]
        flow.losses_mw, flow.p_import_mw, flow.q_import_mvar = self.totals.tolist()
        if self.summary is not None:
            flow.summary, flow.element_values = self.summary.tolist(), out
        return self.v.copy()
