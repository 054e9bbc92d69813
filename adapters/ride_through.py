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

**PERC1-equivalent ceasing and reconnection** (``perc1 = {...}``, off unless given): NERC's Level 3
alert on large computational loads (2026) makes PERC1 or an equivalent the minimum dynamic load
model. Our equivalent follows PowerWorld's public description of PERC1 (Power Electronic
Reconnecting and Ceasing load, built on EPRI's LDEV1; PowerWorld Simulator help, "Load
Characteristic Model: PERC1", 2025), not its block diagram, which we have not seen:

* **ceasing**: below ``vt1_pu`` a share of the load ceases drawing from the grid, rising linearly
  to all of it at ``vt0_pu`` (and likewise above ``vt2_pu`` to all at ``vt3_pu``), times
  ``fcease_frac`` (the share that can cease at all). The ceased share latches at the deepest
  voltage of the disturbance (PVD1's partial-trip convention);
* **reconnection**: once the voltage has been back inside ``[vt1_pu, vt2_pu]`` for
  ``t_recon_delay_s``, the share reconnects linearly over ``t_recon_s``, but only ``frecon_frac``
  of what ceased comes back: after a full cease the load settles at
  ``1 − fcease_frac + frecon_frac · fcease_frac`` of its demand (PERC1's Frecon); the part that
  does not reconnect stays on backup;
* **P and Q paths**: the connected share passes a lead-lag ``(1 + s·tap_s)/(1 + s·tbp_s)`` for P
  and ``(1 + s·taq_s)/(1 + s·tbq_s)`` for Q (a time constant of 0 drops the lag; a lead that
  would push the share above 1 is clipped at 1: the grid never serves more than the demand);
* **frequency**: outside the deadband ``[f_nominal_hz − dbfl_hz, f_nominal_hz + dbfh_hz]`` the P
  share changes by ``kpf_frac_per_hz`` per Hz beyond the band (0 by default: the deadbands only
  matter with a sensitivity; a positive value is a load that rises with frequency);
* **frequency trip** (off by default): below ``f_trip_low_hz`` for ``t_f_trip_low_s``, or above
  ``f_trip_high_hz`` for ``t_f_trip_high_s``, the whole model trips: both shares go to 0 at once
  (whatever ``fcease_frac``, past the lead-lags) and stay there for the rest of the run (no
  reconnection, also not after the UPS logic's ``off_s``, which times only the UPS logic's own
  trips; the load rides its backup meanwhile, ``in_service`` staying 1). The timer counts only while
  the frequency is beyond its threshold, which must lie outside the deadband
  (``f_trip_low_hz < f_nominal_hz − dbfl_hz``, ``f_trip_high_hz > f_nominal_hz + dbfh_hz``), and
  restarts from 0 each time the frequency comes back; 0 for a threshold turns that side off. This
  is the common form of the under-/over-frequency trip of inverter and load models (PSS/E's DER_A
  model, DERA1: ``fl``/``fh`` in Hz with the timers ``tfl``/``tfh``, as listed in NREL-Sienna's
  PowerSystems.jl, ``AggregateDistributedGenerationA``), not PowerWorld's PERC1 definition, which
  we could not read. Here the frequency is the ``f_hz`` input (a step late when it comes back
  time-shifted from the grid): the trip acts from the first step whose start is at least the
  pickup time past the first step that saw the frequency beyond the threshold.

The defaults (``vt0_pu`` 0.5, ``vt1_pu`` 0.7, ``vt2_pu`` 1.2, ``vt3_pu`` 1.3, everything can cease
and reconnects after 1 s, no lags, deadbands ±36 mHz: the widest governor deadband NERC
BAL-001-TRE allows) are our picks, not PowerWorld's: set them from the facility's data.

For a datacenter, ceasing means the rectifiers stop drawing and the IT load rides on the UPS:
the ceased share goes through the same backup path as a transfer (UPS, then the generator after
``genset_start_s``), so the energy balance holds; ``p_connected_frac`` / ``q_connected_frac``
give the shares the grid sees (1 without ``perc1``). The UPS transfer logic acts on top: a
transfer takes all of the load off the grid whatever PERC1's share.

Outputs: ``p_mw``/``q_mvar`` (grid draw, consumer sign, the recharge included), ``p_lost_mw``
(demand not drawn from the grid), ``p_ups_mw``, ``p_genset_mw``, ``p_unserved_mw``,
``p_recharge_mw``, ``p_backup_mw`` (the facility's demand minus the grid draw = UPS + generator
+ unserved − recharge: the demand the grid did not serve, net of what it gave back to the UPS;
generator sign, the site accounting's ``backup`` role — it includes ``p_unserved_mw`` so that the
site's import is what the grid served; the backup's own supply is ``p_ups_mw + p_genset_mw``), ``e_ups_mwh``, ``in_service`` (on the grid), ``n_trips``, ``t_backup_s`` (time on
backup so far), ``p_connected_frac``, ``q_connected_frac`` (PERC1's shares).

**Voltage definition** (``voltage_definition``): with an unbalanced grid (the grid adapter's OpenDSS
engine reports ``v1_pu`` and ``v_worst_pu`` per element: ``adapters/_grid_opendss_faults.py``) the
logic acts on the positive-sequence voltage (``"positive_sequence"``, the default: input ``v1_pu``)
or on the worst phase's (``"worst_phase"``: input ``v_worst_pu``); where that input is not connected
(or NaN) it acts on ``vm_pu`` (a balanced engine's bus voltage, both definitions at once). The
outputs ``vm_acted_pu`` (the voltage acted on, the sag included) and
``ceasing_positive_sequence_frac`` / ``ceasing_worst_phase_frac`` (the share PERC1 would cease at
this step's voltage by each definition, before latching; 0 without ``perc1``) let a run say which
definition decided a cessation: a single-line-to-ground fault can leave the positive sequence at
0.8 pu while one phase is near 0 (EPRI's DCFlex ride-through work: compliance can flip with the
definition).

**PERC1 inside the grid model** (inputs ``p_grid_connected_frac``, ``q_grid_connected_frac``): when
the point of connection is an ``andes_grid`` ``Load`` with its own (native) PERC1, connect that
Load's ``p_connected_frac``/``q_connected_frac`` back to these inputs (time-shifted, like the
voltage). The backup accounting (UPS energy, generator, unserved, ``p_lost_mw``,
``p_backup_mw``, recharge) then counts the share the native PERC1 ceased, as it does for this
model's own ``perc1``; ``p_mw``/``q_mvar`` stay the demand asked of the grid (the Load's PERC1
applies its shares itself), and ``p_connected_frac`` stays this model's own PERC1's share (1
without ``perc1``). The shares arrive a step late (the grid reports them at the end of the step
it integrated), which is also when this model's own PERC1 acts on a time-shifted voltage. Giving
both a ``perc1`` and these inputs is an error (two PERC1 in series), found at validation.

Example ``[entities]`` entry::

    ups = { sim = "rt", model = "RideThrough", curve = "itic", n_dips_to_trip = 3,
            perc1 = { fcease_frac = 1.0, frecon_frac = 0.5, t_recon_s = 2.0 } }
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, model_validator

from cosim.sdk import Params, Problem, SingleModelSim, as_tuple

OUTPUTS = ("p_mw", "q_mvar", "p_lost_mw", "p_ups_mw", "p_genset_mw", "p_unserved_mw", "p_recharge_mw",
           "p_backup_mw", "e_ups_mwh", "in_service", "n_trips", "t_backup_s", "p_connected_frac", "q_connected_frac",
           "vm_acted_pu", "ceasing_positive_sequence_frac", "ceasing_worst_phase_frac")
#: the shares a PERC1 inside the grid model lets through (see the module docstring)
GRID_SHARE_INPUTS = ("p_grid_connected_frac", "q_grid_connected_frac")
INPUTS = ("p_load_mw", "q_load_mvar", "vm_pu", "v1_pu", "v_worst_pu", "vm_sag_pu", "t_sag_s", "f_hz",
          *GRID_SHARE_INPUTS)
#: the voltage the logic acts on: the positive-sequence voltage or the worst phase's
VOLTAGE_DEFINITIONS = ("positive_sequence", "worst_phase")
#: the input carrying each definition's voltage (``vm_pu`` stands in where it is not connected)
DEFINITION_INPUT = {"positive_sequence": "v1_pu", "worst_phase": "v_worst_pu"}

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


class Perc1Params(Params):
    """PERC1-equivalent ceasing and reconnection (see the module docstring).

    Attributes:
        vt0_pu: at or below it, all of ``fcease_frac`` ceases. [pu]
        vt1_pu: below it, ceasing starts. [pu]
        vt2_pu: above it, ceasing starts (high voltage). [pu]
        vt3_pu: at or above it, all of ``fcease_frac`` ceases. [pu]
        fcease_frac: the share of the load that can cease. [-]
        frecon_frac: the share of the ceased load that reconnects. [-]
        t_recon_delay_s: time back inside ``[vt1_pu, vt2_pu]`` before reconnecting starts. [s]
        t_recon_s: the reconnection ramp. [s]
        tap_s, tbp_s: the P path's lead and lag. [s]
        taq_s, tbq_s: the Q path's lead and lag. [s]
        f_nominal_hz: the frequency the deadbands are around. [Hz]
        dbfl_hz, dbfh_hz: the low and high frequency deadbands. [Hz]
        kpf_frac_per_hz: the P share's change per Hz outside the deadband. [1/Hz]
        f_trip_low_hz: under-frequency trip threshold; 0: no under-frequency trip. [Hz]
        f_trip_high_hz: over-frequency trip threshold; 0: no over-frequency trip. [Hz]
        t_f_trip_low_s: time below ``f_trip_low_hz`` before the trip. [s]
        t_f_trip_high_s: time above ``f_trip_high_hz`` before the trip. [s]
    """

    vt0_pu: float = Field(default=0.5, ge=0)
    vt1_pu: float = Field(default=0.7, gt=0)
    vt2_pu: float = Field(default=1.2, gt=0)
    vt3_pu: float = Field(default=1.3, gt=0)
    fcease_frac: float = Field(default=1.0, ge=0, le=1.0)
    frecon_frac: float = Field(default=1.0, ge=0, le=1.0)
    t_recon_delay_s: float = Field(default=0.0, ge=0)
    t_recon_s: float = Field(default=1.0, ge=0)
    tap_s: float = Field(default=0.0, ge=0)
    tbp_s: float = Field(default=0.0, ge=0)
    taq_s: float = Field(default=0.0, ge=0)
    tbq_s: float = Field(default=0.0, ge=0)
    f_nominal_hz: float = Field(default=60.0, gt=0)
    dbfl_hz: float = Field(default=0.036, ge=0)
    dbfh_hz: float = Field(default=0.036, ge=0)
    kpf_frac_per_hz: float = Field(default=0.0)
    f_trip_low_hz: float = Field(default=0.0, ge=0)
    f_trip_high_hz: float = Field(default=0.0, ge=0)
    t_f_trip_low_s: float = Field(default=0.0, ge=0)
    t_f_trip_high_s: float = Field(default=0.0, ge=0)

    @model_validator(mode="after")
    def _ordered(self):
        if not (self.vt0_pu < self.vt1_pu <= 1.0 <= self.vt2_pu < self.vt3_pu):
            raise ValueError(f"perc1 needs vt0_pu < vt1_pu <= 1 <= vt2_pu < vt3_pu; got {self.vt0_pu}, "
                             f"{self.vt1_pu}, {self.vt2_pu}, {self.vt3_pu}: order the four voltage thresholds")
        low_edge, high_edge = self.f_nominal_hz - self.dbfl_hz, self.f_nominal_hz + self.dbfh_hz
        if self.f_trip_low_hz > 0 and not self.f_trip_low_hz < low_edge:
            raise ValueError(f"perc1 needs f_trip_low_hz < f_nominal_hz - dbfl_hz = {low_edge:g} Hz (the trip threshold "
                             f"below the low deadband); got f_trip_low_hz = {self.f_trip_low_hz:g}: lower it, or set "
                             "0 for no under-frequency trip")
        if self.f_trip_high_hz > 0 and not self.f_trip_high_hz > high_edge:
            raise ValueError(f"perc1 needs f_trip_high_hz > f_nominal_hz + dbfh_hz = {high_edge:g} Hz (the trip "
                             f"threshold above the high deadband); got f_trip_high_hz = {self.f_trip_high_hz:g}: raise "
                             "it, or set 0 for no over-frequency trip")
        return self


class LeadLag:
    """``(1 + s·ta)/(1 + s·tb)`` of a piecewise-constant input, exact over a step."""

    def __init__(self, ta_s: float, tb_s: float, x0: float = 1.0):
        self.ta, self.tb, self.state = ta_s, tb_s, x0

    def __call__(self, x: float, dt_s: float) -> float:
        if self.tb <= 0:
            return x
        y = self.state + (self.ta / self.tb) * (x - self.state)
        self.state = x + (self.state - x) * math.exp(-dt_s / self.tb)
        return y


class Perc1:
    """The share of the load the grid sees under PERC1-equivalent ceasing (plain Python)."""

    def __init__(self, p: Perc1Params):
        self.p = p
        self.ceased = 0.0       # share ceased (latched at the disturbance's deepest point)
        self.kept_off = 0.0     # share that did not reconnect after earlier disturbances
        self.back_s = 0.0       # time back inside the band since the last disturbance
        self.f_low_s = 0.0      # time below f_trip_low_hz so far (0 while above it)
        self.f_high_s = 0.0     # time above f_trip_high_hz so far
        self.tripped = False    # the frequency trip: latched for the rest of the run
        self.p_path = LeadLag(p.tap_s, p.tbp_s)
        self.q_path = LeadLag(p.taq_s, p.tbq_s)

    def _ceasing(self, vm_pu: float) -> float:
        p = self.p
        if vm_pu <= p.vt0_pu or vm_pu >= p.vt3_pu:
            return 1.0
        if vm_pu < p.vt1_pu:
            return (p.vt1_pu - vm_pu) / (p.vt1_pu - p.vt0_pu)
        if vm_pu > p.vt2_pu:
            return (vm_pu - p.vt2_pu) / (p.vt3_pu - p.vt2_pu)
        return 0.0

    def step(self, dt_s: float, vm_pu: float, f_hz: float | None) -> tuple[float, float]:
        """The (P, Q) shares of the demand drawn from the grid over this step. [-]"""
        p = self.p
        if self._frequency_trip(dt_s, f_hz):
            return 0.0, 0.0
        now = self._ceasing(vm_pu)
        if now > 0:
            self.ceased, self.back_s = max(self.ceased, now), 0.0
        elif self.ceased > 0:
            self.back_s += dt_s
            ramp_s = self.back_s - p.t_recon_delay_s
            if ramp_s >= p.t_recon_s - 1e-9:
                self.kept_off += p.fcease_frac * self.ceased * (1.0 - p.frecon_frac) * (1.0 - self.kept_off)
                self.ceased, self.back_s = 0.0, 0.0
        reconnected = 0.0
        if self.ceased > 0 and now == 0:
            ramp_s = self.back_s - p.t_recon_delay_s
            done = 1.0 if p.t_recon_s <= 0 else min(max(ramp_s / p.t_recon_s, 0.0), 1.0)
            reconnected = p.frecon_frac * done
        share = (1.0 - self.kept_off) * (1.0 - p.fcease_frac * self.ceased * (1.0 - reconnected))
        p_share = share * (1.0 + p.kpf_frac_per_hz * self._beyond_band_hz(f_hz))
        return (min(max(self.p_path(p_share, dt_s), 0.0), 1.0), min(max(self.q_path(share, dt_s), 0.0), 1.0))

    def _frequency_trip(self, dt_s: float, f_hz: float | None) -> bool:
        """Whether the frequency trip holds over this step (latched; see the module docstring)."""
        p = self.p
        if self.tripped or f_hz is None or not math.isfinite(float(f_hz)):
            return self.tripped
        f = float(f_hz)
        low = p.f_trip_low_hz > 0 and f < p.f_trip_low_hz
        high = p.f_trip_high_hz > 0 and f > p.f_trip_high_hz
        self.f_low_s = self.f_low_s if low else 0.0
        self.f_high_s = self.f_high_s if high else 0.0
        # the time beyond before this step: the step trips once it has reached the pickup time
        self.tripped = ((low and self.f_low_s >= p.t_f_trip_low_s - 1e-9)
                        or (high and self.f_high_s >= p.t_f_trip_high_s - 1e-9))
        self.f_low_s += dt_s if low else 0.0
        self.f_high_s += dt_s if high else 0.0
        return self.tripped

    def _beyond_band_hz(self, f_hz: float | None) -> float:
        if f_hz is None:
            return 0.0
        dev = float(f_hz) - self.p.f_nominal_hz
        if dev > self.p.dbfh_hz:
            return dev - self.p.dbfh_hz
        if dev < -self.p.dbfl_hz:
            return dev + self.p.dbfl_hz
        return 0.0


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
        perc1: PERC1-equivalent ceasing and reconnection; None: off.
        voltage_definition: ``positive_sequence`` (input ``v1_pu``) or ``worst_phase`` (``v_worst_pu``);
            ``vm_pu`` where that input is absent.
    """

    TIME_CONSTANTS = ('ramp_s', 'perc1.t_recon_s', 'perc1.tap_s', 'perc1.taq_s')

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
    perc1: Perc1Params | None = None
    voltage_definition: Literal["positive_sequence", "worst_phase"] = "positive_sequence"

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
        self.perc1 = Perc1(p.perc1) if p.perc1 is not None else None
        self.backup_since_s: float | None = None  # start of the current stretch with load on backup

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
        by_definition = {d: _voltage(m, DEFINITION_INPUT[d]) * sag for d in VOLTAGE_DEFINITIONS}
        vm = by_definition[self.p.voltage_definition]
        exposed = float(m.get("t_sag_s", dt_s)) if sag < 1.0 and "t_sag_s" in m else dt_s
        volt = self._voltage_trip(time_s, vm, exposed)
        freq = self._frequency_trip(m.get("f_hz"), dt_s)
        if self.on_grid and (volt or freq):
            self.on_grid, self.t_trip_s, self.t_return_s = False, time_s, None
            self.n_trips += 1
        elif not self.on_grid and self.p.off_s is not None and time_s - self.t_trip_s >= self.p.off_s - 1e-9:
            self.on_grid, self.t_return_s = True, time_s
        shares = self.perc1.step(dt_s, vm, m.get("f_hz")) if self.perc1 is not None else (1.0, 1.0)
        downstream = _grid_shares(m)
        if downstream is not None and self.perc1 is not None:
            raise ValueError("a RideThrough with its own perc1 gets p_grid_connected_frac from a grid Load with a PERC1 "
                             "of its own: two PERC1 in series; drop the RideThrough's perc1 or that connection")
        out = self._split(time_s, dt_s, p_load, q_load, shares, downstream)
        ceasing = {d: self.perc1._ceasing(v) if self.perc1 is not None else 0.0 for d, v in by_definition.items()}
        out.update({"vm_acted_pu": vm, **{f"ceasing_{d}_frac": c for d, c in ceasing.items()}})
        return out

    def _grid_share(self, time_s: float) -> float:
        if not self.on_grid:
            return 0.0
        if self.t_return_s is None or self.p.ramp_s <= 0:
            return 1.0
        return min(1.0, (time_s - self.t_return_s) / self.p.ramp_s)

    def _split(self, time_s: float, dt_s: float, p_load: float, q_load: float,
               shares: tuple[float, float] = (1.0, 1.0),
               downstream: tuple[float, float] | None = None) -> dict[str, Any]:
        """Grid draw and backup over this step; ``downstream``: the shares a PERC1 inside the grid model
        applies to the draw asked here (they count in the backup, not in the draw asked)."""
        ups_share = self._grid_share(time_s)
        served = shares if downstream is None else downstream
        share, q_share = ups_share * served[0], ups_share * served[1]
        backup = (1.0 - share) * p_load
        genset = ups = unserved = 0.0
        self.backup_since_s = (self.backup_since_s if self.backup_since_s is not None else time_s) if backup > 0 else None
        if backup > 0:
            start_s = self.t_trip_s if self.t_trip_s is not None and ups_share < 1.0 else self.backup_since_s
            since = time_s - start_s
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
        asked_p, asked_q = ((grid, q_share * q_load) if downstream is None
                            else (ups_share * p_load + recharge, ups_share * q_load))
        return {"p_mw": asked_p, "q_mvar": asked_q, "p_lost_mw": (1.0 - share) * p_load,
                "p_ups_mw": ups, "p_genset_mw": genset, "p_unserved_mw": unserved, "p_recharge_mw": recharge,
                "p_backup_mw": p_load - grid, "e_ups_mwh": self.e_ups_mwh,
                "in_service": self.on_grid, "n_trips": self.n_trips, "t_backup_s": self.t_backup_s,
                "p_connected_frac": shares[0], "q_connected_frac": shares[1]}

    def _recharge(self, dt_s: float) -> float:
        """The recharge draw over this step (the last one fills the UPS exactly); stores it. [MW]"""
        room_mwh = self.e_full_mwh - self.e_ups_mwh
        if room_mwh <= 0 or self.recharge_mw <= 0:
            return 0.0
        eff = self.p.recharge_efficiency_frac
        draw = min(self.recharge_mw, room_mwh * 3600.0 / (dt_s * eff))
        self.e_ups_mwh = self.e_full_mwh if draw < self.recharge_mw else self.e_ups_mwh + draw * eff * dt_s / 3600.0
        return draw


def _unfed_frequency_warnings(scn: Any, adapter: str) -> list[str]:
    """Warnings for RideThrough entities whose frequency keys cannot act: no connection gives them ``f_hz``."""
    found = []
    for eid, spec in scn.entities.items():
        if scn.sims[spec.sim].adapter != adapter:
            continue
        params = scn.entity_params.get(eid, {})
        perc1 = params.get("perc1") or {}
        keys = [f"{k} = {params[k]:g}" for k in ("f_min_hz", "f_max_hz") if params.get(k) is not None]
        keys += [f"perc1.{k} = {perc1[k]:g}" for k in ("f_trip_low_hz", "f_trip_high_hz", "kpf_frac_per_hz")
                 if perc1.get(k)]
        fed = any(conn.dst == eid and any(dst == "f_hz" for _src, dst in conn.pairs()) for conn in scn.connect)
        if keys and not fed:
            found.append(f"{scn.file.name}: entities.{eid} sets {', '.join(keys)} but no [[connect]] gives it f_hz: "
                         "it would never act; connect the grid's f_hz to it (time-shifted), or drop those keys")
    return found


def _grid_shares(m: dict[str, Any]) -> tuple[float, float] | None:
    """The (P, Q) shares a PERC1 inside the grid model lets through, clipped to [0, 1]; None when not
    connected (or NaN). Q follows P where only P is connected. [-]"""
    p = m.get("p_grid_connected_frac")
    if p is None or not math.isfinite(float(p)):
        return None
    q = m.get("q_grid_connected_frac")
    q = float(p) if q is None or not math.isfinite(float(q)) else float(q)
    return min(max(float(p), 0.0), 1.0), min(max(q, 0.0), 1.0)


def _voltage(m: dict[str, Any], key: str) -> float:
    """The voltage of input ``key``, else ``vm_pu`` (1.0 unless connected). [pu]"""
    value = m.get(key)
    if value is not None and math.isfinite(float(value)):
        return float(value)
    return float(m.get("vm_pu", 1.0))


class RideThroughSim(SingleModelSim):
    """Ride-through at points of connection (model ``RideThrough``)."""

    MODEL, PARAMS, ROLE, PHYSICS = "RideThrough", RideThroughParams, "backup", RideThrough
    INPUTS, OUTPUTS = INPUTS, OUTPUTS
    EXAMPLE = {"models": {"RideThrough": {"curve": "itic", "n_dips_to_trip": 3, "off_s": 5.0, "ramp_s": 2.0,
                                          "recharge_mw": 0.5,
                                          "perc1": {"fcease_frac": 1.0, "frecon_frac": 0.5, "t_recon_s": 2.0}}}}

    @classmethod
    def check_scenario(cls, scn: Any) -> list[Any]:
        """A RideThrough with its own ``perc1`` that also gets ``p_grid_connected_frac`` /
        ``q_grid_connected_frac``: two PERC1 in series, a problem before any step. A warning for a
        frequency trip or sensitivity on an entity no connection gives ``f_hz``: it would never act."""
        adapter = __name__.rsplit(".", 1)[-1]
        found: list[Any] = _unfed_frequency_warnings(scn, adapter)
        for k, conn in enumerate(scn.connect):
            spec = scn.entities.get(conn.dst)
            if spec is None or scn.sims[spec.sim].adapter != adapter or "perc1" not in scn.entity_params.get(conn.dst, {}):
                continue
            shares = [dst for _src, dst in conn.pairs() if dst in GRID_SHARE_INPUTS]
            if shares:
                found.append(Problem(f"connect[{k}].attrs", f"{conn.src!r} feeds {', '.join(shares)} to {conn.dst!r}, "
                                     f"which has a perc1 of its own: two PERC1 in series; drop entities.{conn.dst}.perc1 "
                                     f"(the grid Load's PERC1 acts) or these attrs from the connection", shares))
        return found

    def advance(self, rt: RideThrough, time_s: float, inputs: dict[str, Any]) -> dict[str, Any]:
        return rt.step(float(time_s), float(self.step_s), inputs)
