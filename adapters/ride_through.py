"""Ride-through at a facility's point of connection: UPS transfer to backup on a disturbance.

``RideThrough`` sits between a facility (its demand ``p_load_mw``, ``q_load_mvar``, e.g. a
datacenter's ``p_mw``/``q_mvar``) and the grid (its output ``p_mw``, ``q_mvar`` is what the grid
sees). Each step it checks the voltage ``vm_pu`` (the bus voltage, 1.0 unless connected) times
the sag factor ``vm_sag_pu`` (``adapters/faults.py``; its ``t_sag_s`` is how long the sag
lasts inside the step) and the frequency ``f_hz`` against:

* a **voltage ride-through curve**: points ``(vm_pu, t_s)``: the facility rides through a
  voltage below ``vm_pu`` for at most ``t_s`` (time under it accumulates while the voltage stays
  below, and resets when it recovers). ``curve = "itic"``: the ITI (CBEMA) curve's lower
  boundary (ITI, *ITI (CBEMA) Curve Application Note*, 2000: any voltage for 20 ms, 70 % for
  0.5 s, 80 % for 10 s, 90 % steady) as ``(0.7, 0.02), (0.8, 0.5), (0.9, 10)``; ``"semi_f47"``:
  SEMI F47-0706 (50 % for 200 ms, 70 % for 0.5 s, 80 % for 1 s; below 50 % not required) as
  ``(0.5, 0), (0.7, 0.2), (0.8, 0.5), (0.9, 1.0)`` (the last point is ours: the standard
  ends at 1 s); ``"none"``; or your own ``curve_points``;
* a **dip counter** (``n_dips_to_trip``): N dips below ``dip_vm_pu`` within ``dip_window_s``
  trip even when each rode through: the logic NERC's review of the 10 July 2024 Virginia event
  (six faults in 82 s from auto-reclosing; ~1,500 MW of data centers transferred to backup) points
  to (secondary sources describe UPS logic counting ~3 disturbances a minute);
* a **frequency band** ``[f_min_hz, f_max_hz]`` (off by default), left for ``f_delay_s``.

Outside them the facility **transfers to backup** within the step: the grid draw drops to 0,
the UPS battery carries the load (``e_ups_mwh``, default ``ups_autonomy_s`` = 5 min of the
first step's load) until the standby generator takes over after ``genset_start_s`` (10 s:
NFPA 110 "Type 10"; None: no generator); when the UPS is empty before that the load is lost
(``p_unserved_mw``; the GPUs stop). After ``off_s`` on backup (None: it stays off, as in 2024
when the reconnection was manual) the facility returns, ramping its grid draw back over
``ramp_s``. Back on the grid, the **UPS recharges** from the grid: it draws ``p_recharge_mw`` on top
of the facility's demand (``recharge_mw``, default 10 % of the first step's load: our pick, not
a standard) and stores ``recharge_efficiency_frac`` of it (default 0.95, our pick) until full, so
the grid serves the energy the UPS gave on backup divided by the efficiency; the last step draws
only what fills it. The UPS does not recharge while any of the load is on backup (during the
ramp it waits), nor from the generator.

Outputs: ``p_mw``/``q_mvar`` (grid draw, consumer sign, the recharge included), ``p_lost_mw``
(demand not drawn from the grid), ``p_ups_mw``, ``p_genset_mw``, ``p_unserved_mw``,
``p_recharge_mw``, ``p_backup_mw`` (the facility's demand minus the grid draw = UPS + generator
+ unserved − recharge: the demand the grid did not serve, net of what it gave back to the UPS;
generator sign, the site accounting's ``backup`` role — it includes ``p_unserved_mw`` so that the
site's import is what the grid served; the backup's own supply is ``p_ups_mw + p_genset_mw``), ``e_ups_mwh``, ``in_service`` (on the grid), ``n_trips``, ``t_backup_s`` (time on
backup so far).

Example ``[entities]`` entry::

    ups = { sim = "rt", model = "RideThrough", curve = "itic", n_dips_to_trip = 3 }
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field

from cosim.sdk import Params, SingleModelSim, as_tuple

OUTPUTS = ("p_mw", "q_mvar", "p_lost_mw", "p_ups_mw", "p_genset_mw", "p_unserved_mw", "p_recharge_mw",
           "p_backup_mw", "e_ups_mwh", "in_service", "n_trips", "t_backup_s")
INPUTS = ("p_load_mw", "q_load_mvar", "vm_pu", "vm_sag_pu", "t_sag_s", "f_hz")

#: The default recharge draw as a share of the first step's load (our pick: a UPS charger a tenth
#: of the UPS rating; ``recharge_mw`` sets it). [-]
RECHARGE_FRAC = 0.1

CURVES: dict[str, tuple[tuple[float, float], ...]] = {
    "itic": ((0.7, 0.02), (0.8, 0.5), (0.9, 10.0)),
    "semi_f47": ((0.5, 0.0), (0.7, 0.2), (0.8, 0.5), (0.9, 1.0)),
    "none": (),
}


def _pairs(value: Any) -> Any:
    return tuple(as_tuple(v) for v in value) if isinstance(value, list) else value


class RideThroughParams(Params):
    """Params of one ``RideThrough`` entity (see the module docstring).

    Attributes:
        curve: ``itic``, ``semi_f47`` or ``none``.
        curve_points: ``[[vm_pu, t_s], ...]`` instead of ``curve``. [pu, s]
        n_dips_to_trip: dips within ``dip_window_s`` that trip; 0 is off. [-]
        dip_vm_pu: a dip is a voltage below this. [pu]
        dip_window_s: the counter's window. [s]
        f_min_hz, f_max_hz: the frequency band; None is no limit. [Hz]
        f_delay_s: time outside the band before the transfer. [s]
        e_ups_mwh: UPS energy; None: ``ups_autonomy_s`` of the first step's load. [MWh]
        ups_autonomy_s: UPS autonomy at the first step's load. [s]
        genset_start_s: from the transfer to the generator carrying the load; None: none. [s]
        off_s: time on backup before returning; None: stays on backup (manual return). [s]
        ramp_s: ramp of the grid draw back to the full load after the return. [s]
        recharge_mw: the UPS's recharge draw from the grid; None: 10 % of the first step's load;
            0: no recharge. [MW]
        recharge_efficiency_frac: the share of the recharge draw stored in the UPS. [-]
    """

    curve: Literal["itic", "semi_f47", "none"] = "itic"
    curve_points: Annotated[tuple[tuple[float, float], ...] | None, BeforeValidator(_pairs)] = None
    n_dips_to_trip: int = Field(default=0, ge=0)
    dip_vm_pu: float = Field(default=0.9, gt=0, le=1.0)
    dip_window_s: float = Field(default=60.0, gt=0)
    f_min_hz: float | None = Field(default=None, gt=0)
    f_max_hz: float | None = Field(default=None, gt=0)
    f_delay_s: float = Field(default=0.0, ge=0)
    e_ups_mwh: float | None = Field(default=None, ge=0)
    ups_autonomy_s: float = Field(default=300.0, ge=0)
    genset_start_s: float | None = Field(default=10.0, ge=0)
    off_s: float | None = Field(default=None, ge=0)
    ramp_s: float = Field(default=0.0, ge=0)
    recharge_mw: float | None = Field(default=None, ge=0)
    recharge_efficiency_frac: float = Field(default=0.95, gt=0, le=1.0)

    @property
    def points(self) -> tuple[tuple[float, float], ...]:
        return self.curve_points if self.curve_points is not None else CURVES[self.curve]


class RideThrough:
    """The transfer logic and the backup's energy (plain Python)."""

    def __init__(self, p: RideThroughParams):
        self.p = p
        self.under_s = [0.0] * len(p.points)  # time below each curve point's voltage
        self.dips: list[float] = []
        self.in_dip = False
        self.f_out_s = 0.0
        self.on_grid, self.n_trips = True, 0
        self.t_trip_s: float | None = None
        self.t_return_s: float | None = None
        self.t_backup_s = 0.0
        self.e_ups_mwh = p.e_ups_mwh
        self.e_full_mwh = p.e_ups_mwh
        self.recharge_mw = p.recharge_mw

    def _voltage_trip(self, time_s: float, vm_pu: float, exposed_s: float) -> bool:
        tripped = False
        for k, (v_limit, t_limit) in enumerate(self.p.points):
            self.under_s[k] = self.under_s[k] + exposed_s if vm_pu < v_limit else 0.0
            tripped |= self.under_s[k] > t_limit + 1e-9
        if vm_pu < self.p.dip_vm_pu and not self.in_dip:
            self.dips.append(time_s)
        self.in_dip = vm_pu < self.p.dip_vm_pu
        self.dips = [t for t in self.dips if t > time_s - self.p.dip_window_s]
        return tripped or 0 < self.p.n_dips_to_trip <= len(self.dips)

    def _frequency_trip(self, f_hz: float | None, dt_s: float) -> bool:
        p = self.p
        outside = f_hz is not None and ((p.f_min_hz is not None and f_hz < p.f_min_hz)
                                        or (p.f_max_hz is not None and f_hz > p.f_max_hz))
        self.f_out_s = self.f_out_s + dt_s if outside else 0.0
        return outside and self.f_out_s >= p.f_delay_s - 1e-9

    def step(self, time_s: float, dt_s: float, m: dict[str, Any]) -> dict[str, Any]:
        p_load, q_load = float(m.get("p_load_mw", 0.0)), float(m.get("q_load_mvar", 0.0))
        if self.e_ups_mwh is None:
            self.e_ups_mwh = max(p_load, 0.0) * self.p.ups_autonomy_s / 3600.0
            self.e_full_mwh = self.e_ups_mwh
        if self.recharge_mw is None:
            self.recharge_mw = RECHARGE_FRAC * max(p_load, 0.0)
        sag = float(m.get("vm_sag_pu", 1.0))
        vm = float(m.get("vm_pu", 1.0)) * sag
        exposed = float(m.get("t_sag_s", dt_s)) if sag < 1.0 and "t_sag_s" in m else dt_s
        volt = self._voltage_trip(time_s, vm, exposed)
        freq = self._frequency_trip(m.get("f_hz"), dt_s)
        if self.on_grid and (volt or freq):
            self.on_grid, self.t_trip_s, self.t_return_s = False, time_s, None
            self.n_trips += 1
        elif not self.on_grid and self.p.off_s is not None and time_s - self.t_trip_s >= self.p.off_s - 1e-9:
            self.on_grid, self.t_return_s = True, time_s
        return self._split(time_s, dt_s, p_load, q_load)

    def _grid_share(self, time_s: float) -> float:
        if not self.on_grid:
            return 0.0
        if self.t_return_s is None or self.p.ramp_s <= 0:
            return 1.0
        return min(1.0, (time_s - self.t_return_s) / self.p.ramp_s)

    def _split(self, time_s: float, dt_s: float, p_load: float, q_load: float) -> dict[str, Any]:
        share = self._grid_share(time_s)
        backup = (1.0 - share) * p_load
        genset = ups = unserved = 0.0
        if backup > 0:
            since = time_s - self.t_trip_s if self.t_trip_s is not None else 0.0
            if self.p.genset_start_s is not None and since >= self.p.genset_start_s - 1e-9:
                genset = backup
            else:
                ups = min(backup, self.e_ups_mwh * 3600.0 / dt_s)
                unserved = backup - ups
                self.e_ups_mwh = max(self.e_ups_mwh - ups * dt_s / 3600.0, 0.0)
        if share < 1.0:
            self.t_backup_s += dt_s
        recharge = self._recharge(dt_s) if share >= 1.0 else 0.0
        grid = share * p_load + recharge
        return {"p_mw": grid, "q_mvar": share * q_load, "p_lost_mw": (1.0 - share) * p_load,
                "p_ups_mw": ups, "p_genset_mw": genset, "p_unserved_mw": unserved, "p_recharge_mw": recharge,
                "p_backup_mw": p_load - grid, "e_ups_mwh": self.e_ups_mwh,
                "in_service": self.on_grid, "n_trips": self.n_trips, "t_backup_s": self.t_backup_s}

    def _recharge(self, dt_s: float) -> float:
        """The recharge draw over this step (the last one fills the UPS exactly); stores it. [MW]"""
        room_mwh = self.e_full_mwh - self.e_ups_mwh
        if room_mwh <= 0 or self.recharge_mw <= 0:
            return 0.0
        eff = self.p.recharge_efficiency_frac
        draw = min(self.recharge_mw, room_mwh * 3600.0 / (dt_s * eff))
        self.e_ups_mwh = self.e_full_mwh if draw < self.recharge_mw else self.e_ups_mwh + draw * eff * dt_s / 3600.0
        return draw


class RideThroughSim(SingleModelSim):
    """Ride-through at points of connection (model ``RideThrough``)."""

    MODEL, PARAMS, ROLE, PHYSICS = "RideThrough", RideThroughParams, "backup", RideThrough
    INPUTS, OUTPUTS = INPUTS, OUTPUTS
    EXAMPLE = {"models": {"RideThrough": {"curve": "itic", "n_dips_to_trip": 3, "off_s": 5.0, "ramp_s": 2.0,
                                          "recharge_mw": 0.5}}}

    def advance(self, rt: RideThrough, time_s: float, inputs: dict[str, Any]) -> dict[str, Any]:
        return rt.step(float(time_s), float(self.step_s), inputs)
