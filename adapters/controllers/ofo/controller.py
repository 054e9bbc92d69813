"""The OFO controller's iteration: the voltage duals, the primal step on the allowances, the battery and
the pause, and the per-site signals (Dall'Anese & Simonetto's regularised primal-dual; the equations
are in ``sim.py``'s docstring)."""

from __future__ import annotations

import math

import numpy as np

from cosim.adapters.controllers.ofo.fleets import FleetBatch
from cosim.adapters.controllers.ofo.params import OFOParams
from cosim.adapters.controllers.ofo.sensitivity import FeederSensitivity

__all__ = ["EXHAUSTED_TOL_FRAC", "OFOController"]

#: how close to its limit a site's allowance counts as there (``exhausted_<site>_frac``) [-]
EXHAUSTED_TOL_FRAC = 1e-3


class OFOController:
    """The primal-dual iteration (plain Python, the model's solves aside).

    Args:
        params: band, steps, costs, ratings and knob ranges.
        sensitivity: the feeder model (None: :meth:`set_sensitivity` gives ``J`` directly).
    """

    def __init__(self, params: OFOParams, sensitivity: FeederSensitivity | None = None):
        self.p = params
        self.model = sensitivity
        self.us = np.ones(params.n_sites)  # the allowances, one per site
        self.x_p, self.x_q = 0.0, 0.0
        self.x_f = 0.0          # share of the flexible training jobs paused
        self.paused_gpu_h = 0.0  # GPU-hours of flexible training deferred so far
        self.rows: list[str] = []          # the monitored bus-phases measured, in J's row order
        self.lam = np.zeros(0)
        self.lam_bar = np.zeros(0)
        self.jac: np.ndarray | None = None  # (n_rows, n_controls) pu per unit of x
        self._taps: dict[str, float] = {}
        self._sensed_at_s: float | None = None
        self.fleets = [FleetBatch(f) for f in params.fleets]
        self.dc_col: np.ndarray | None = None  # pu per MW of datacenter power, J's rows

    @property
    def u(self) -> float:
        """The (first) site's allowance. [-]"""
        return float(self.us[0])

    @u.setter
    def u(self, value: float) -> None:
        self.us[0] = value

    # -- sensitivities ---------------------------------------------------------------
    def set_sensitivity(self, rows: list[str], jac: np.ndarray) -> None:
        """``J`` (pu per unit of each control: u (one per site with ``sites``), then x_p, x_q with a
        battery, then x_f with the pause control), by row name."""
        if self.rows != rows:
            self.rows, self.lam, self.lam_bar = list(rows), np.zeros(len(rows)), np.zeros(len(rows))
        jac = np.asarray(jac, dtype=float)
        self.jac = jac.reshape(len(rows), len(self.controls())) if jac.size or rows else np.zeros((0, len(self.controls())))

    def _sense(self, time_s: float, measured: dict[str, float], site: dict[str, float],
               taps: dict[str, float]) -> None:
        p, model = self.p, self.model
        due = (self.jac is None or taps != self._taps
               or (p.sensitivity_interval_s > 0 and time_s - self._sensed_at_s >= p.sensitivity_interval_s))
        if model is None or not due:
            return
        if p.sites:
            dc_mw = [site.get(f"p_dc_{s.name}_mw", 0.0) for s in p.sites]
            dc_mvar = [site.get(f"q_dc_{s.name}_mvar", 0.0) for s in p.sites]
        else:
            dc_mw, dc_mvar = site.get("p_dc_mw", 0.0), site.get("q_dc_mvar", 0.0)
        cols = model.compute(dc_mw, dc_mvar, site.get("p_bat_mw", self.x_p * p.p_bat_max_mw),
                             self.x_q * p.s_bat_max_mva, taps)
        wanted = set(model.flow.monitored_phase_attrs(p.exclude_buses))
        names = model.flow.phase_attrs
        jac = [s.p_flex_mw * cols[f"dc_{s.name}"] for s in p.sites] if p.sites else [p.p_flex_mw * cols["dc"]]
        if p.has_battery:
            jac += [p.p_bat_max_mw * cols["bat_p"], p.s_bat_max_mva * cols["bat_q"]]
        if p.has_pause:  # pausing lowers the datacenter's power: the datacenter's column, negated
            jac.append(-p.p_pause_mw * cols["dc"])
        live = np.isfinite(np.column_stack(jac)).all(axis=1)  # a dead bus (behind an open switch) has no row
        keep = [i for i, n in enumerate(names) if n in wanted and n in measured and live[i]]
        self.set_sensitivity([names[i] for i in keep], np.column_stack(jac)[keep])
        self.dc_col = cols["dc"][keep]
        self._taps, self._sensed_at_s = dict(taps), time_s

    # -- one step --------------------------------------------------------------------
    def update(self, time_s: float, measured: dict[str, float], site: dict[str, float] | None = None,
               taps: dict[str, float] | None = None, dt_s: float = 1.0) -> None:
        """One dual and one primal step on the measured voltages (``bus_<id>_<ph>_vm_pu``) for the
        next ``dt_s`` (the control step: the GPU-hours a pause defers). [pu, s]"""
        p = self.p
        if not p.enabled:
            self.us[:], self.x_p, self.x_q, self.x_f = 1.0, 0.0, 0.0, 0.0
            return
        self._step(time_s, measured, site, taps, dt_s)
        self.paused_gpu_h += self.x_f * p.n_gpus_pause * dt_s / 3600.0

    def _step(self, time_s, measured, site, taps, dt_s: float) -> None:
        p = self.p
        self._sense(time_s, measured, site or {}, taps or {})
        if self.jac is None or not self.rows:
            return
        v = np.array([measured.get(r, math.nan) for r in self.rows])
        seen = np.isfinite(v)
        v = np.where(seen, v, 0.5 * (p.v_low_pu + p.v_high_pu))  # a missing reading adds no pressure
        rho, decay = p.dual_step_per_pu, p.dual_decay_pu
        self.lam = np.maximum(self.lam + rho * (p.v_low_pu + p.margin_pu - v - decay * self.lam), 0.0)
        self.lam_bar = np.maximum(self.lam_bar + rho * (v - p.v_high_pu + p.margin_pu - decay * self.lam_bar), 0.0)
        x = self.controls()
        n_u = p.n_sites
        bat = slice(n_u, n_u + 2) if p.has_battery else slice(n_u, n_u)
        rest = np.zeros_like(x)
        rest[:n_u] = 1.0
        grad_f = p.regularisation_frac * (x - rest)
        grad_f[:n_u] -= p.cost_compute_frac
        grad_f[bat] += p.cost_battery_frac * x[bat]
        if p.has_pause:  # d/dx_f of cost_pause · x_f · n_gpus_pause · dt / 3600 (GPU-hours deferred this step)
            grad_f[-1] += p.cost_pause_per_gpu_h * p.n_gpus_pause * dt_s / 3600.0
        grad = grad_f + self.jac.T @ (self.lam_bar - self.lam)
        if not p.dc_control:
            grad[:n_u] = 0.0
        if not p.battery_control:
            grad[bat] = 0.0
        if p.has_pause and not p.pause_control:
            grad[-1] = 0.0
        if self.fleets:  # per-fleet batches take the datacenter's part; the allowance stays at 1
            grad[0] = 0.0
            if p.dc_control and self.dc_col is not None:
                eta_per_kw = float((self.lam_bar - self.lam) @ self.dc_col) / 1000.0
                frac = (site or {}).get("replicas_frac", 1.0)
                for fleet in self.fleets:
                    fleet.step(p, eta_per_kw, frac)
        self._set_controls(x - p.primal_step_frac * grad)

    def controls(self) -> np.ndarray:
        """The normalised controls: ``u`` (one per site); with a battery ``x_p``, ``x_q``; with the pause ``x_f``. [-]"""
        us = self.us.tolist()
        x = [*us, self.x_p, self.x_q] if self.p.has_battery else us
        return np.array([*x, self.x_f] if self.p.has_pause else x)

    def _set_controls(self, x: np.ndarray) -> None:
        """Project onto X: the allowance range, the pausable range, the battery's P rating and its
        inverter circle."""
        p = self.p
        if p.sites:
            for i, s in enumerate(p.sites):
                low = p.u_min_frac if s.u_min_frac is None else s.u_min_frac
                self.us[i] = float(min(max(x[i], low), 1.0))
        else:
            self.u = float(min(max(x[0], p.u_min_frac), 1.0))
        if p.has_pause:
            self.x_f = float(min(max(x[-1], 0.0), p.pause_max_frac))
        if not p.has_battery:
            return
        x_p = float(np.clip(x[p.n_sites], -1.0, 1.0)) if p.p_bat_max_mw > 0 else 0.0
        x_q = float(np.clip(x[p.n_sites + 1], -1.0, 1.0)) if p.s_bat_max_mva > 0 else 0.0
        p_mw, q_mvar = x_p * p.p_bat_max_mw, x_q * p.s_bat_max_mva
        s = math.hypot(p_mw, q_mvar)
        if p.s_bat_max_mva > 0 and s > p.s_bat_max_mva:  # radial projection onto the circle
            p_mw, q_mvar = p_mw * p.s_bat_max_mva / s, q_mvar * p.s_bat_max_mva / s
        self.x_p = p_mw / p.p_bat_max_mw if p.p_bat_max_mw > 0 else 0.0
        self.x_q = q_mvar / p.s_bat_max_mva if p.s_bat_max_mva > 0 else 0.0

    def outputs(self, n_updates: int = 0) -> dict[str, float]:
        """The knobs at the current controls and the duals' summary."""
        p = self.p
        if p.sites:
            knobs = {}
            for i, (s, u) in enumerate(zip(p.sites, self.us.tolist())):
                knobs.update(self._knobs(u, f"_{s.name}"))
                knobs[f"exhausted_{s.name}_frac"] = float(self.exhausted(i))
        else:
            knobs = self._knobs(self.u, "")
        return {**knobs, "p_bat_set_mw": self.x_p * p.p_bat_max_mw,
                "q_bat_mvar": self.x_q * p.s_bat_max_mva,
                "lambda_under_sum_per_pu": float(self.lam.sum()), "lambda_over_sum_per_pu": float(self.lam_bar.sum()),
                "n_duals_active": int((self.lam > 0).sum() + (self.lam_bar > 0).sum()),
                "n_sensitivity_updates": n_updates, **self.fleet_outputs(), **self.pause_outputs()}

    def exhausted(self, i: int) -> bool:
        """Site ``i``'s own control is at its limit while its bus still violates (``sites`` only): its
        allowance within :data:`EXHAUSTED_TOL_FRAC` of its lowest with an under-voltage dual active on
        one of its bus's monitored phases, or at 1 with an over-voltage dual active there (as
        ``rule_voltage``'s ``exhausted_frac``: batch at its floor, or at its top in an over-voltage); with
        ``shift_when_throttled`` also while :meth:`cheaper_elsewhere`."""
        p = self.p
        site = p.sites[i]
        # exactly bus_<bus>_<ph>_vm_pu: a prefix would also take bus <bus>_1's phases
        names = {f"bus_{site.dc_bus.strip().lower()}_{ph}_vm_pu" for ph in "abc"}
        own = np.array([r.lower() in names for r in self.rows], dtype=bool)
        if not own.any():
            return False
        low = p.u_min_frac if site.u_min_frac is None else site.u_min_frac
        u = float(self.us[i])
        under = bool((self.lam[own] > 0).any()) and u <= low + EXHAUSTED_TOL_FRAC
        over = bool((self.lam_bar[own] > 0).any()) and u >= 1.0 - EXHAUSTED_TOL_FRAC
        return under or over or (p.shift_when_throttled and self.cheaper_elsewhere(i))

    def cheaper_elsewhere(self, i: int) -> bool:
        """Site ``i`` is throttled (allowance below 1) with under-voltage duals active, and another site
        at allowance 1 has a lower price per MW at the current duals, ``(λ̄ - λ)ᵀ ∂v/∂P_k`` (``jac``'s
        column over that site's ``p_flex_mw``): a MW moved there relieves the bus-phases the duals
        price, so shifting load beats throttling it (``shift_when_throttled``)."""
        p = self.p
        if self.jac is None or not (self.lam > 0).any() or self.us[i] >= 1.0 - EXHAUSTED_TOL_FRAC:
            return False
        eta = self.lam_bar - self.lam
        price = [float(eta @ self.jac[:, k]) / s.p_flex_mw for k, s in enumerate(p.sites)]
        return any(price[k] < price[i] for k in range(len(p.sites))
                   if k != i and self.us[k] >= 1.0 - EXHAUSTED_TOL_FRAC)

    def _knobs(self, u: float, tag: str) -> dict[str, float]:
        """The knobs at allowance ``u``, named with ``tag`` before the unit (``""``: one site). [-, W, MW, -]"""
        p = self.p
        limit = math.nan if p.p_limit_min_mw is None else p.p_limit_min_mw + u * (p.p_limit_max_mw - p.p_limit_min_mw)
        return {f"n_batch_max{tag}": float(round(p.n_batch_min + u * (p.n_batch_max - p.n_batch_min))),
                f"p_cap{tag}_w": p.p_cap_min_w + u * (p.p_cap_max_w - p.p_cap_min_w), f"p_limit{tag}_mw": limit,
                f"allowance{tag}_frac": u}

    def pause_outputs(self) -> dict[str, float]:
        """The pause command, the power and GPUs it pauses, the GPU-hours deferred so far. [-, MW, -, GPU-h]"""
        p = self.p
        if not p.has_pause:
            return {}
        return {"pause_flexible_frac": self.x_f, "p_paused_mw": self.x_f * p.p_pause_mw,
                "n_gpus_paused": self.x_f * p.n_gpus_pause, "paused_gpu_h": self.paused_gpu_h}

    def fleet_outputs(self) -> dict[str, float]:
        """Per fleet: its batch size and its ITL there; how many fleets miss their deadline. [-, ms, -]"""
        if not self.fleets:
            return {}
        out: dict[str, float] = {}
        for fleet in self.fleets:
            out[f"n_batch_max_{fleet.spec.name}"] = float(fleet.batch)
            out[f"itl_{fleet.spec.name}_ms"] = 1e3 * fleet.itl_s(fleet.x_applied)
        out["n_itl_misses"] = sum(1e3 * f.itl_s(f.x_applied) > f.spec.itl_deadline_ms for f in self.fleets)
        return out

