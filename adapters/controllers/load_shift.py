"""Cross-site load shifting: inference replicas (with their requests) move between datacenters
on one feeder when a site's own voltage control is exhausted and its bus is still out of band.

OpenG2G's ``LoadShiftController`` (gpu2grid/openg2g, ``openg2g/controller/load_shift.py`` and
``docs/examples/multi-dc-coordination.md``; GPU-to-Grid, arXiv:2602.05116) and its rules:

1. **Warm start only**: a replica moves only to a site that already runs the model (at least one
   active replica) and has a warm spare for it, a deployed replica not serving
   (``spare = replicas - active``); nothing is cold-started, nothing is created.
2. **Last resort**: a site starts shifting only when its own control is exhausted (the connected
   ``exhausted_<site>_frac``, e.g. ``rule_voltage``'s, is 1; a site with none connected has no
   control of its own and counts as exhausted) and its voltage is still out of band; it goes on
   (a latch) until its voltage is ``margin_pu`` inside the band, even if its own control starts
   releasing meanwhile (with ``margin_pu = 0``, the default, this is OpenG2G's condition).
3. **Directional**: under-voltage (its ``vm_min`` < ``v_low_pu``) moves load *out* to the site with
   the highest ``vm_min`` that is itself in band; over-voltage (``vm_max`` > ``v_high_pu``) moves
   load *in* from the site with the lowest ``vm_max`` that is in band. (``margin_pu`` is cosim's
   addition: shifting carries a site a little inside the band, so its own control can release
   without falling straight back out.)
4. **Capacity-aware and incremental**: ``n = max(1, n_gpus_per_shift // n_gpus_per_replica)`` replicas
   per shift, cut to the destination's spares and to what the source may give while keeping
   ``n_active_min`` serving; one shift per violated site per step, then ``hold_s`` before that
   site shifts again.

A moved replica carries its share of the source's requests: with ``D_i`` the mean demand routed
to site ``i`` [req/s] (initially its own ``rate_req_s``) and ``a_i`` its active replicas, moving
``n`` replicas from ``i`` to ``j`` moves ``δ = n · D_i / a_i``: ``D_i -= δ``, ``D_j += δ``, so
``Σ D`` is conserved exactly and the per-replica load at the source is unchanged. Outputs to
each site's Cluster (``<fleet>`` its fleet's name; connect renamed, time-shifted):
``replicas_<site>_frac = a_i / replicas_i`` → ``replicas_<fleet>_frac`` and
``demand_<site>_ratio = D_i / rate_i`` → ``demand_<fleet>_ratio``. The Cluster scales its own
arrival process by the ratio, so the moved requests follow the destination's arrival shape:
the totals are conserved per step exactly when the sites share the arrival trace and diurnal
parameters (as the catalogue scenarios do), on the mean otherwise. Replicas do not move back
when the violation clears (as OpenG2G's).

Carbon-aware variant (sites in different grid zones; off unless ``ci_gap_g_kwh`` is set): in a
step where no site is shifting for voltage, one shift moves ``n`` replicas from the site with the
highest connected carbon intensity ``ci_<site>_g_kwh`` to the one with the lowest, when the gap
exceeds ``ci_gap_g_kwh`` and both are ``margin_pu`` inside the band (so the move cannot start a
violation the voltage rules would then undo), warm spares and ``hold_s`` as above (the idea of
Carbon Explorer / Google's carbon-aware load shifting between sites; the rule here is cosim's).

Sites are named by the sim's ``sites`` (name them after the Cluster entities they steer: the
``load_shift`` KPI block then reports each site's throughput and latency from that entity).

Model ``LoadShift``. Inputs per site ``vm_min_<site>_pu``, ``vm_max_<site>_pu`` (connect the
site's grid element ``vm_phase_min_pu`` / ``vm_phase_max_pu``, renamed) and optional
``exhausted_<site>_frac`` and ``ci_<site>_g_kwh`` (the carbon variant). Outputs per site ``replicas_<site>_frac``, ``demand_<site>_ratio``,
``n_active_<site>``, ``n_moved_in_<site>`` (net replicas received so far, negative = given away)
and ``moved_in_<site>_per_s`` (net demand received [req/s]), and ``n_shifts``.

Example::

    [sims.shift]
    adapter = "load_shift"
    sites = ["up", "down"]

    [entities.shift]
    sim = "shift"
    model = "LoadShift"
    n_gpus_per_replica = 4
    replicas = { up = 200, down = 200 }
    active = { up = 150, down = 100 }
    rate_req_s = { up = 1500.0, down = 1000.0 }
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import Field, model_validator

from cosim.sdk import Params, SingleModelSim


class SimParams(Params):
    """Params of one load_shift simulator: the site names (the Cluster entities it steers)."""

    sites: list[str] = Field(min_length=2)

    @model_validator(mode="after")
    def _distinct(self):
        if len(set(self.sites)) != len(self.sites):
            raise ValueError(f"sites {self.sites} name a site twice")
        bad = [s for s in self.sites if not s.replace("_", "").isalnum() or s.lower() != s]
        if bad:
            raise ValueError(f"sites {bad}: use lower-case letters, digits and _ (they name attributes)")
        return self


class LoadShiftParams(Params):
    """Params of one ``LoadShift`` entity (one model served at every site).

    Attributes:
        n_gpus_per_replica: GPUs of one replica of the model. [-]
        n_gpus_per_shift: GPUs' worth of replicas moved per shift (OpenG2G default 8). [-]
        replicas: deployed replicas per site (the Cluster fleet's ``replicas``: active + warm spares). [-]
        active: replicas serving at the start per site (default: all deployed). [-]
        rate_req_s: each site's own mean demand (its fleet's ``rate_req_s``). [1/s]
        n_active_min: replicas a source keeps serving (>= 1 keeps the model warm there). [-]
        v_low_pu, v_high_pu: the band. [pu]
        margin_pu: a violated site shifts until this far inside the band. [pu]
        hold_s: a site waits this long after a shift before it triggers another. [s]
        ci_gap_g_kwh: carbon variant: shift when the sites' intensities differ by more; None = off. [g/kWh]
        enabled: ``false`` never shifts (the no-coordination baseline).
    """

    n_gpus_per_replica: int = Field(ge=1)
    n_gpus_per_shift: int = Field(default=8, ge=1)
    replicas: dict[str, int]
    active: dict[str, int] = {}
    rate_req_s: dict[str, float]
    n_active_min: int = Field(default=1, ge=0)
    v_low_pu: float = Field(default=0.95, gt=0)
    v_high_pu: float = Field(default=1.05, gt=0)
    margin_pu: float = Field(default=0.0, ge=0)
    hold_s: float = Field(default=0.0, ge=0)
    ci_gap_g_kwh: float | None = Field(default=None, ge=0)
    enabled: bool = True

    @model_validator(mode="after")
    def _consistent(self):
        if self.v_low_pu >= self.v_high_pu:
            raise ValueError(f"v_low_pu = {self.v_low_pu:g} is not below v_high_pu = {self.v_high_pu:g}")
        for site, n in self.replicas.items():
            if n < 0:
                raise ValueError(f"replicas: {site} = {n} is negative")
        for site, n in self.active.items():
            if site in self.replicas and not 0 <= n <= self.replicas[site]:
                raise ValueError(f"active: {site} = {n} is outside [0, replicas = {self.replicas[site]}]")
        for site, rate in self.rate_req_s.items():
            if rate <= 0:
                raise ValueError(f"rate_req_s: {site} = {rate:g} must be positive")
        return self


class Shifter:
    """The rules over the sites' replica counts and demand (plain Python).

    Args:
        params: per-site capacities and demand.
        sites: the site names, in priority order (ties and evaluation order).
    """

    def __init__(self, params: LoadShiftParams, sites: list[str]):
        self.p, self.sites = params, list(sites)
        self.deployed = {s: params.replicas[s] for s in sites}
        self.active = {s: params.active.get(s, params.replicas[s]) for s in sites}
        self.active0 = dict(self.active)
        self.rate = {s: params.rate_req_s[s] for s in sites}
        self.demand = dict(self.rate)
        self.n_shifts = 0
        self._last_s = dict.fromkeys(sites, -math.inf)
        self._latched: dict[str, str | None] = dict.fromkeys(sites)
        self.n_per_shift = max(1, params.n_gpus_per_shift // params.n_gpus_per_replica)

    def spare(self, site: str) -> int:
        """Warm spares at ``site``: deployed replicas not serving. [-]"""
        return self.deployed[site] - self.active[site]

    def movable(self, site: str) -> int:
        """Replicas ``site`` may give away, keeping ``n_active_min``. [-]"""
        return max(self.active[site] - self.p.n_active_min, 0)

    def move(self, src: str, dst: str, n: int) -> float:
        """Move ``n`` replicas and their demand share from ``src`` to ``dst``; the demand moved. [-> 1/s]"""
        if n <= 0 or n > self.movable(src) or n > self.spare(dst) or self.active[dst] < 1:
            raise ValueError(f"cannot move {n} replicas {src} -> {dst}: active {self.active}, "
                             f"deployed {self.deployed}")
        delta = n * self.demand[src] / self.active[src]
        self.active[src] -= n
        self.active[dst] += n
        self.demand[src] -= delta
        self.demand[dst] += delta
        self.n_shifts += 1
        return delta

    def update(self, time_s: float, vm_min: dict[str, float | None], vm_max: dict[str, float | None],
               exhausted: dict[str, float | None], ci: dict[str, float | None] | None = None) -> None:
        """Apply the rules once for the measured site voltages (and carbon intensities). [s, pu, pu, -, g/kWh]"""
        p = self.p
        if not p.enabled:
            return
        low = {s: _or(vm_min.get(s), math.nan) for s in self.sites}
        high = {s: _or(vm_max.get(s), math.nan) for s in self.sites}

        def in_band(s: str) -> bool:
            return math.isfinite(low[s]) and math.isfinite(high[s]) and low[s] >= p.v_low_pu and high[s] <= p.v_high_pu

        def ready(s: str) -> bool:
            return time_s - self._last_s[s] >= p.hold_s - 1e-9

        for site in self.sites:
            ex = exhausted.get(site)
            saturated = ex is None or not math.isfinite(ex) or ex >= 0.5
            under = math.isfinite(low[site]) and low[site] < p.v_low_pu
            over = math.isfinite(high[site]) and high[site] > p.v_high_pu
            # the latch: set by a violation with the site's control saturated, held until the site
            # is margin_pu inside the band (with margin_pu = 0: exactly OpenG2G's condition)
            if under and saturated:
                self._latched[site] = "under"
            elif over and saturated:
                self._latched[site] = "over"
            if self._latched[site] == "under" and not low[site] < p.v_low_pu + p.margin_pu:
                self._latched[site] = None
            if self._latched[site] == "over" and not high[site] > p.v_high_pu - p.margin_pu:
                self._latched[site] = None
            if not ready(site) or self._latched[site] is None:
                continue
            if self._latched[site] == "under":  # under: move load out
                cands = [s for s in self.sites if s != site and in_band(s) and self.active[s] >= 1
                         and self.spare(s) >= 1 and ready(s)]
                if not cands or self.movable(site) < 1:
                    continue
                dst = max(cands, key=lambda s: (low[s], -self.sites.index(s)))
                src = site
            else:  # over: move load in
                cands = [s for s in self.sites if s != site and in_band(s) and self.movable(s) >= 1 and ready(s)]
                if not cands or self.spare(site) < 1 or self.active[site] < 1:
                    continue
                src = min(cands, key=lambda s: (high[s], self.sites.index(s)))
                dst = site
            n = min(self.n_per_shift, self.movable(src), self.spare(dst))
            self.move(src, dst, n)
            self._last_s[src] = self._last_s[dst] = time_s
        if p.ci_gap_g_kwh is not None and ci and not any(self._latched.values()):
            self._carbon_shift(time_s, low, high, ci)

    def _carbon_shift(self, time_s: float, low: dict[str, float], high: dict[str, float],
                      ci: dict[str, float | None]) -> None:
        """One move from the highest- to the lowest-carbon site, both with margin inside the band."""
        p = self.p
        known = {s: c for s, c in ci.items() if c is not None and math.isfinite(c) and s in self.active}
        safe = [s for s in known if math.isfinite(low[s]) and math.isfinite(high[s])
                and low[s] >= p.v_low_pu + p.margin_pu and high[s] <= p.v_high_pu - p.margin_pu
                and time_s - self._last_s[s] >= p.hold_s - 1e-9]
        srcs = [s for s in safe if self.movable(s) >= 1]
        dsts = [s for s in safe if self.spare(s) >= 1 and self.active[s] >= 1]
        if not srcs or not dsts:
            return
        src = max(srcs, key=lambda s: (known[s], -self.sites.index(s)))
        dst = min(dsts, key=lambda s: (known[s], self.sites.index(s)))
        if src == dst or known[src] - known[dst] <= p.ci_gap_g_kwh:
            return
        self.move(src, dst, min(self.n_per_shift, self.movable(src), self.spare(dst)))
        self._last_s[src] = self._last_s[dst] = time_s

    def outputs(self) -> dict[str, float]:
        out: dict[str, float] = {"n_shifts": self.n_shifts}
        for s in self.sites:
            out[f"replicas_{s}_frac"] = self.active[s] / self.deployed[s] if self.deployed[s] else 0.0
            out[f"demand_{s}_ratio"] = self.demand[s] / self.rate[s]
            out[f"n_active_{s}"] = self.active[s]
            out[f"n_moved_in_{s}"] = self.active[s] - self.active0[s]
            out[f"moved_in_{s}_per_s"] = self.demand[s] - self.rate[s]
        return out


def site_inputs(sites: list[str]) -> list[str]:
    return [a for s in sites for a in (f"vm_min_{s}_pu", f"vm_max_{s}_pu", f"exhausted_{s}_frac", f"ci_{s}_g_kwh")]


def site_outputs(sites: list[str]) -> list[str]:
    return ["n_shifts", *(a for s in sites for a in (f"replicas_{s}_frac", f"demand_{s}_ratio", f"n_active_{s}",
                                                    f"n_moved_in_{s}", f"moved_in_{s}_per_s"))]


class LoadShiftSim(SingleModelSim):
    """Cross-site replica shifting (model ``LoadShift``)."""

    MODEL, PARAMS, ROLE = "LoadShift", LoadShiftParams, "controller"
    INPUTS, OUTPUTS = (), ("n_shifts",)
    SimParams = SimParams
    EXAMPLE = {"sim": {"sites": ["up", "down"]},
               "models": {"LoadShift": {"n_gpus_per_replica": 4, "replicas": {"up": 10, "down": 10},
                                        "active": {"up": 8, "down": 5}, "rate_req_s": {"up": 80.0, "down": 50.0}}}}

    @classmethod
    def meta_for(cls, sim_params: SimParams) -> dict[str, Any]:
        return cls.single_meta(inputs=site_inputs(sim_params.sites), outputs=site_outputs(sim_params.sites))

    @classmethod
    def check_entity(cls, model, params, ctx, sim_params=None) -> list[str]:
        if sim_params is None or params is None:
            return []
        problems = []
        for key in ("replicas", "rate_req_s"):
            missing = [s for s in sim_params.sites if s not in getattr(params, key)]
            if missing:
                problems.append(f"{key}: give every site of the sim's sites; missing {missing}")
        for key in ("replicas", "active", "rate_req_s"):
            unknown = sorted(set(getattr(params, key)) - set(sim_params.sites))
            if unknown:
                problems.append(f"{key}: {unknown} are not among the sim's sites {sim_params.sites}")
        return problems

    def build(self, eid: str, params: LoadShiftParams) -> Shifter:
        return Shifter(params, self.params.sites)

    def advance(self, shifter: Shifter, time_s: float, inputs: dict[str, Any]) -> dict[str, Any]:
        sites = self.params.sites
        shifter.update(time_s, {s: _number(inputs.get(f"vm_min_{s}_pu")) for s in sites},
                       {s: _number(inputs.get(f"vm_max_{s}_pu")) for s in sites},
                       {s: _number(inputs.get(f"exhausted_{s}_frac")) for s in sites},
                       {s: _number(inputs.get(f"ci_{s}_g_kwh")) for s in sites})
        return shifter.outputs()


def _number(value: Any) -> float | None:
    return None if value is None else float(value)


def _or(value: float | None, default: float) -> float:
    return default if value is None else value
