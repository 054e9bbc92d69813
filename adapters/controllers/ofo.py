"""Online feedback optimisation (OFO): hold every monitored bus-phase in band with a
datacenter's compute and a battery's active and reactive power, at the least cost.

The method is the primal-dual *optimal power flow pursuit* of Dall'Anese & Simonetto
("Optimal power flow pursuit", IEEE Trans. Smart Grid 9(2):942-952, 2018; see also
Hauswirth et al., "Optimization algorithms as robust feedback controllers", Annual Reviews
in Control, 2024), the algorithm OpenG2G's ``OFOBatchSizeController`` runs for GPU batch
sizes (GPU-to-Grid, Liang et al., arXiv:2602.05116, 2026: voltage duals per bus-phase,
Eqs. 5-6; primal step, Eq. 8): a gradient step on the Lagrangian each control step, with
*measured* voltages in the dual update (feedback) and a *model* only for the sensitivities.

Controls, normalised (``x``): the datacenter's allowance ``u`` in ``[u_min_frac, 1]`` (as
:mod:`.voltage_aware`: it sets the batch cap ``n_batch_max``, the per-GPU cap ``p_cap_w`` and
optionally the facility limit ``p_limit_mw`` linearly between their min and max), and when a
battery is given its active power ``x_p = p / p_bat_max_mw`` (consumer sign: > 0 charges)
and reactive power ``x_q = q / s_bat_max_mva`` (consumer sign: > 0 absorbs), inside the
inverter's circle ``p² + q² <= s_bat_max_mva²``. The problem, at each step::

    minimise  f(x) = cost_compute_frac · (1 - u) + cost_battery_frac / 2 · (x_p² + x_q²)
                     + regularisation_frac / 2 · ‖x - x_rest‖²        (x_rest: u = 1, battery idle)
    s.t.      v_low_pu + margin_pu <= v_j(x) <= v_high_pu - margin_pu  for every monitored j

The iteration (Dall'Anese & Simonetto's regularised primal-dual, their Eq. 20; dual first,
then the primal with the new duals, as OpenG2G does)::

    λ_j  <- [λ_j  + ρ_v · (v_low + m - v̂_j - ε_d · λ_j)]+      (under-voltage dual)
    λ̄_j <- [λ̄_j + ρ_v · (v̂_j - v_high + m - ε_d · λ̄_j)]+     (over-voltage dual)
    x    <- Proj_X [x - ρ_x · (∇f(x) + Jᵀ (λ̄ - λ))]

with ``v̂`` the grid's measured bus-phase voltages (the ``bus_<id>_<ph>_vm_pu`` inputs
connected), ``ρ_v = dual_step_per_pu``, ``ρ_x = primal_step_frac``, ``ε_d =
dual_decay_pu`` (keeps the duals bounded when the band cannot be met: the price of a
violation the controls cannot remove stops growing) and ``J = ∂v/∂x``. The duals are
non-negative by construction. The regularisation and the dual decay also damp the loop
(an unregularised primal-dual on a linear model is a marginally stable double integrator).

Sensitivities ``J`` come from the engine: a copy of the feeder (``network``, OpenDSS) with
the datacenter and the battery attached at their buses, solved at the measured operating
point (their measured ``p``/``q``, the regulators held at the grid's measured
``reg_<id>_tap_pu`` when those are connected, else where the model's own RegControls settle
at the first operating point) and perturbed by ``±perturbation_mw`` (central difference); the
datacenter's ``q`` follows ``p`` at its measured power factor, as OpenG2G perturbs P and Q
together. The column of ``u`` is ``p_flex_mw`` times the datacenter's: ``p_flex_mw`` is how
far the whole allowance range moves its power (measure it once: the campus at ``u = 1`` and
at ``u = 0``). ``J`` is recomputed whenever a tap changes and every
``sensitivity_interval_s`` (0: taps only). The model has only the feeder's own loads and the
two sites: what else the grid carries is model error the feedback absorbs.

Model ``OFO``. Inputs: the bus-phase voltages it should hold (default monitored set: every
bus-phase except the source bus and the regulator terminals, or all but ``exclude_buses``;
only the connected ones are used), ``reg_<id>_tap_pu``, ``p_dc_mw`` and ``q_dc_mvar`` (the
datacenter's draw), ``p_bat_mw`` (the battery's actual power). Outputs: the datacenter knobs,
``allowance_frac``, ``p_bat_set_mw`` (to the battery's ``p_set_mw``), ``q_bat_mvar`` (to the
grid Storage element's ``q_mvar``), ``lambda_under_sum_per_pu`` / ``lambda_over_sum_per_pu``
(the duals' sums), ``n_duals_active`` and ``n_sensitivity_updates``.

Per-fleet batch control (``fleets``; OpenG2G's ``OFOBatchSizeController``, GPU-to-Grid
Eqs. 7, 8 and 18): instead of one allowance, each inference fleet ``i`` gets its own batch size
``b_i`` (vLLM ``max_num_seqs``, output ``n_batch_max_<fleet>`` to the Cluster's per-fleet knob of
that name), optimised continuously in ``x_i = log2 b_i`` and rounded to the nearest size of
``n_batch_sizes``, with a latency dual ``μ_i`` per fleet on its inter-token-latency deadline::

    μ_i <- [μ_i + ρ_l · (ITL_i(b_i) - d_i)]+
    x_i <- clip(x_i - ρ_x · (- w_T w_i r_i'(x_i) / r_i(x_max) + k_v (λ̄ - λ)ᵀ (J_dc / 1000) · w_i P_i'(x_i) / 1000
                             + μ_i ITL_i'(x_i) + w_s (x_i - x_i,prev)))

``w_i`` the fleet's active replicas (``n_replicas`` times the ``replicas_frac`` input), ``P_i``
[W], ``r_i`` [tokens/s] and ``ITL_i`` [s] one replica's power, throughput and median ITL at
batch ``b`` from the datacenter adapter's ML.ENERGY curves (:mod:`..datacenter.inference`: our
quadratic-in-``ln b`` fits; OpenG2G fits logistics to the same benchmark), ``J_dc`` the
sensitivity of every monitored bus-phase per MW of datacenter power [pu/MW, so ``J_dc / 1000``
is OpenG2G's ``H e_i`` in pu/kW]; ``ρ_x = primal_step_frac``, ``w_T = throughput_weight_frac``,
``k_v = voltage_weight_frac``, ``w_s = switch_weight_frac``, ``ρ_l = latency_dual_step_per_s``;
the voltage duals as above (OpenG2G: ``ρ_v = 1``, no margin, no decay). ITL is the model's
at the applied batch (the fleet's ITL is a function of its batch here, so it is what the
datacenter reports). A fleet's sizes above its curve's measured maximum are replaced by that
maximum (rounded down). The sim's ``fleets`` names the fleets, so the outputs are known before
the entities (outputs ``n_batch_max_<fleet>``, ``itl_<fleet>_ms``, and ``n_itl_misses``).

Flexible-training pause (``p_pause_mw`` > 0 with ``n_gpus_pause``, and ``[sims.<id>] pause =
true``; off by default): one more control ``x_f`` in ``[0, pause_max_frac]``, the share of the
datacenter's flexible training jobs paused, output as ``pause_flexible_frac`` to the Cluster's
input of that name (it pauses that share of the unfinished flexible jobs, low priority first,
checkpoint and restore costs charged by the Cluster; ``training.hold_paused_gpus = true`` keeps
queued jobs off the freed GPUs, so the cut holds). Pausing all of them frees ``p_pause_mw`` on
``n_gpus_pause`` GPUs (measure both on the campus: ``p_mw`` at ``pause_flexible_frac`` 0 and 1),
so its column of ``J`` is ``-p_pause_mw`` times the datacenter's (the same perturbation of the
datacenter's ``p`` and ``q``: the paused power is taken off the DC bus at its power factor), and
its cost is the GPU-hours the step defers::

    f_pause(x_f) = cost_pause_per_gpu_h · x_f · n_gpus_pause · Δt / 3600   (Δt the control step [s])
    x_f <- clip(x_f - ρ_x · (cost_pause_per_gpu_h · n_gpus_pause · Δt / 3600 + ε · x_f
                             - p_pause_mw · J_dcᵀ (λ̄ - λ)), 0, pause_max_frac)

(``ε = regularisation_frac``, rest at ``x_f = 0``). So the pause acts once the voltage duals'
price of the datacenter's power exceeds the GPU-hour cost, and a larger
``cost_pause_per_gpu_h`` pauses less. Outputs: ``pause_flexible_frac``, ``p_paused_mw`` and
``n_gpus_paused`` (the command in MW and GPUs, by the two params: the model's, not the Cluster's
count, which rounds to whole jobs) and ``paused_gpu_h`` = Σ_steps ``n_gpus_paused`` · Δt / 3600,
the GPU-hours of flexible training deferred by the run's commands [GPU-h]; the Cluster's own
``delay_gpu_h`` / ``n_jobs_paused`` report what it did. Source: issue 15 lists GPU-hours among the
costs after OpenG2G's papers (GPU-to-Grid, arXiv:2602.05116; arXiv:2605.05519, whose text was not
available here); OpenG2G's released controller has no pause control, so this term's form
(linear in GPU-hours deferred, a box projection) is ours, in the primal-dual scheme of
Dall'Anese & Simonetto above.

Several sites (``sites``; issue 15 item 1: sensitivities to each controllable site's power):
instead of ``dc_bus``, a list of sites ``{ name, dc_bus, dc_phases, p_flex_mw, u_min_frac }``,
each with its own allowance ``u_k`` (its own knobs), its own column of ``J`` (that site's bus
perturbed alone on the feeder copy, at its measured power factor, times its ``p_flex_mw``: a site
downstream of another sees their shared impedance and its own), its inputs ``p_dc_<site>_mw``,
``q_dc_<site>_mvar`` and its outputs ``allowance_<site>_frac``, ``n_batch_max_<site>``,
``p_cap_<site>_w``, ``p_limit_<site>_mw`` (in place of the one site's four knobs) and
``exhausted_<site>_frac``, load_shift's last-resort signal with rule_voltage's meaning: 1 while
the site's allowance is at its lowest (within ``EXHAUSTED_TOL_FRAC``) and an under-voltage dual
is active on one of its own bus's monitored phases (or at 1 with an over-voltage dual there),
else 0 (the dual, not the raw reading: it is what still pushes the allowance below its floor;
with the margin it turns 1 a little inside the band, and load_shift checks the band itself); one set of
voltage duals over every monitored bus-phase, the battery and the cost terms as above
(``cost_compute_frac`` per site's whole range). With linear costs the site whose power moves the
violated bus-phases most is throttled first. The sim's ``sites`` names them (the outputs are
known before the entities). Not combined with ``fleets`` or the pause (they steer one site).

Shifting priced by the duals (``shift_when_throttled = true``, off by default; cosim's, not
OpenG2G's): ``exhausted_<site>_frac`` is also 1 while site ``i`` is throttled (allowance below 1)
by active under-voltage duals and another site ``k`` at allowance 1 has a lower price per MW,
``(λ̄ - λ)ᵀ J_k / p_flex_k < (λ̄ - λ)ᵀ J_i / p_flex_i`` (``J_k`` its column): a MW moved to ``k``
relieves the priced bus-phases more cheaply than throttling ``i``, even when ``i``'s own bus is in
band and its allowance above its floor (the last-resort rule never fires then, e.g. for
mid-feeder violations on IEEE 34). Connect it to a ``load_shift`` with ``shift_on_signal = true``,
which moves load out of a site while its signal is 1. Configuration::

    [sims.ctl]
    adapter = "ofo"
    sites = ["up", "down"]
    [entities.ofo]
    sim = "ctl"
    model = "OFO"
    network = "ieee34"
    sites = [{ name = "up", dc_bus = "850", p_flex_mw = 0.05 }, { name = "down", dc_bus = "840", p_flex_mw = 0.1 }]

Example ``[entities]`` entry::

    ofo = { sim = "ctl", model = "OFO", network = "ieee13", dc_bus = "671", p_flex_mw = 0.3 }
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import Field, ValidationInfo, field_validator, model_validator

from cosim import grid_models
from cosim.adapters._grid_backend import opendss_circuit_info, phase_set
from cosim.adapters._grid_opendss import OpenDssFlow, bus_position, device_attrs, unknown_bus_message
from cosim.adapters.controllers._campus_knobs import CampusKnobParams
from cosim.adapters.datacenter.hardware import GPUS
from cosim.adapters.datacenter.inference import MODELS, BatchCurves, batch_curves
from cosim.sdk import Params, SingleModelSim

OUTPUTS = ("n_batch_max", "p_cap_w", "p_limit_mw", "allowance_frac", "p_bat_set_mw", "q_bat_mvar",
           "lambda_under_sum_per_pu", "lambda_over_sum_per_pu", "n_duals_active", "n_sensitivity_updates")
#: how close to its limit a site's allowance counts as there (``exhausted_<site>_frac``) [-]
EXHAUSTED_TOL_FRAC = 1e-3
SITE_INPUTS = ("p_dc_mw", "q_dc_mvar", "p_bat_mw", "replicas_frac")
_PHASE_ATTR = re.compile(r"^bus_.+_[abc]_vm_pu$")
_TAP_ATTR = re.compile(r"^reg_(.+)_tap_pu$")


class FleetControl(Params):
    """One inference fleet under per-fleet batch control.

    Attributes:
        name: the Cluster fleet's name (its knob is ``n_batch_max_<name>``).
        model, gpu: the fleet's model and GPU (keys of the datacenter adapter's catalogue).
        n_gpus_per_replica: GPUs one replica spans, as the Cluster fleet's (default: the fewest
            ML.ENERGY measured). [-]
        n_replicas: replicas deployed. [-]
        itl_deadline_ms: the inter-token-latency deadline of the latency dual. [ms]
        n_batch_sizes: the feasible batch sizes. [-]
        n_batch_init: the batch size at the start. [-]
    """

    name: str
    model: str
    gpu: str = "H100-SXM"
    n_gpus_per_replica: int | None = Field(default=None, ge=1, le=64)
    n_replicas: int = Field(ge=0)
    itl_deadline_ms: float = Field(gt=0)
    n_batch_sizes: list[int] = [8, 16, 32, 64, 128, 256, 512]
    n_batch_init: int = Field(default=128, ge=1)

    @model_validator(mode="after")
    def _known(self):
        if self.model not in MODELS:
            raise ValueError(f"model = {self.model!r}: unknown; known: {', '.join(MODELS)}")
        if self.gpu not in GPUS:
            raise ValueError(f"gpu = {self.gpu!r}: unknown; known: {', '.join(GPUS)}")
        try:  # a GPU without ML.ENERGY rows, or a GPU count not measured: named here, not at the run's start
            batch_curves(self.model, self.gpu, self.n_gpus_per_replica)
        except ValueError as exc:
            raise ValueError(f"fleet {self.name!r}: {exc}") from None
        if not self.n_batch_sizes or min(self.n_batch_sizes) < 1:
            raise ValueError("n_batch_sizes: give at least one size, each >= 1")
        return self


def phases_problem(value: str) -> str:
    """``dc_phases`` as the grid element reads its ``phases`` (:func:`~cosim.adapters._grid_backend.phase_set`:
    any case and order, returned in a-b-c order); else a ValueError naming it (the feeder's own check
    of the bus's phases comes when the controller builds)."""
    try:
        return phase_set(value)
    except ValueError:
        raise ValueError(f"dc_phases = {value!r}: give the phases the datacenter connects to, letters a, b, c "
                         "each at most once (e.g. \"abc\" or \"c\"), as the grid element's phases") from None


class SiteControl(Params):
    """One controllable datacenter site of a multi-site OFO entity (``sites``).

    Attributes:
        name: the site's name (its attributes are ``p_dc_<name>_mw``, ``allowance_<name>_frac``, ...).
        dc_bus, dc_phases: where its datacenter connects (keep them the grid element's).
        p_flex_mw: its power swing over its allowance range (measure it). [MW]
        u_min_frac: its lowest allowance; unset = the entity's ``u_min_frac``. [-]
    """

    name: str
    dc_bus: str
    dc_phases: str = "abc"
    p_flex_mw: float = Field(default=0.3, gt=0)
    u_min_frac: float | None = Field(default=None, ge=0, le=1)

    @field_validator("dc_phases")
    @classmethod
    def _phases(cls, value: str) -> str:
        return phases_problem(value)

    @field_validator("name")
    @classmethod
    def _attr_name(cls, value: str) -> str:
        if not value or not value.replace("_", "").isalnum() or value.lower() != value:
            raise ValueError(f"name = {value!r}: use lower-case letters, digits and _ (it names attributes)")
        return value


class OFOParams(CampusKnobParams):
    """Params of one ``OFO`` entity.

    Attributes:
        network: the feeder model for the sensitivities: an OpenDSS catalogue feeder or a
            ``.dss`` path (keep it the grid's ``network``).
        dc_bus, dc_phases: where the datacenter connects (keep them the grid element's); with
            ``sites``, leave dc_bus unset.
        sites: several datacenter sites, each with its own allowance, sensitivity column, inputs and
            outputs (empty: the one site at ``dc_bus``).
        bat_bus, bat_phases: where the battery connects; unset = no battery control.
        p_bat_max_mw, s_bat_max_mva: the battery's power and inverter ratings. [MW, MVA]
        exclude_buses: buses not monitored; unset = the source bus and the regulator terminals.
        v_low_pu, v_high_pu: the band; margin_pu: aim this far inside it. [pu]
        p_flex_mw: the datacenter's power swing over the allowance range. [MW]
        u_min_frac: the lowest allowance. [-]
        cost_compute_frac: cost of the whole allowance range (throughput). [-]
        cost_battery_frac: quadratic cost of the battery's normalised P and Q. [-]
        regularisation_frac: ε of the primal regularisation (and damping). [-]
        primal_step_frac: ρ_x. [-]
        dual_step_per_pu: ρ_v, dual change per pu of violation per step. [1/pu]
        dual_decay_pu: ε_d, the dual regularisation. [pu]
        perturbation_mw: finite-difference step of the sensitivities. [MW]
        sensitivity_interval_s: recompute J this often besides after tap changes (0: only then). [s]
        n_batch_min, n_batch_max, p_cap_min_w, p_cap_max_w, p_limit_min_mw, p_limit_max_mw:
            the knob ranges at allowance 0 and 1 (as :mod:`.voltage_aware`). [-, -, W, W, MW, MW]
        dc_control, battery_control: ``false`` holds that site at rest (compare the controls).
        enabled: ``false`` holds every control at rest (the no-control baseline).
        fleets: per-fleet batch control instead of the allowance (empty: the allowance).
        throughput_weight_frac, voltage_weight_frac, switch_weight_frac: w_T, k_v, w_s of
            the per-fleet primal step (OpenG2G's quickstart: 1e-3, 1e6, 1). [-]
        latency_dual_step_per_s: ρ_l, latency-dual change per s of ITL over the deadline. [1/s]
        p_pause_mw: the datacenter power freed by pausing every pausable flexible training job
            (its ``pause_flexible_frac`` from 0 to 1; measure it); 0 (the default): no pause control. [MW]
        n_gpus_pause: the GPUs those jobs hold (the GPU-hours cost and output). [-]
        pause_max_frac: the most of ``pause_flexible_frac`` the controller may command. [-]
        cost_pause_per_gpu_h: the cost of one GPU-hour of flexible training deferred (the
            allowance's whole range costs ``cost_compute_frac`` per step). [1/GPU-h]
        pause_control: ``false`` holds the pause at 0 (compare with and without it).
        shift_when_throttled: ``sites`` only: ``exhausted_<site>_frac`` is also 1 while the site is
            throttled by under-voltage duals and an unthrottled site's power is cheaper at those duals
            (moving load there relieves the same bus-phases); for load_shift's ``shift_on_signal``.
            Turn both on together: with this alone, load_shift's last-resort rule (which reads the
            same signal) also fires for a site that is merely throttled, not at its floor.
    """

    network: str = "ieee13"
    dc_bus: str | None = None
    dc_phases: str = "abc"
    sites: list[SiteControl] = []
    bat_bus: str | None = None
    bat_phases: str = "abc"
    p_bat_max_mw: float = Field(default=0.0, ge=0)
    s_bat_max_mva: float = Field(default=0.0, ge=0)
    exclude_buses: list[str] | None = None
    margin_pu: float = Field(default=0.002, ge=0)
    p_flex_mw: float = Field(default=0.3, gt=0)
    cost_compute_frac: float = Field(default=1.0, ge=0)
    cost_battery_frac: float = Field(default=0.1, ge=0)
    regularisation_frac: float = Field(default=1.0, ge=0)
    primal_step_frac: float = Field(default=0.1, gt=0)
    dual_step_per_pu: float = Field(default=2000.0, gt=0)
    dual_decay_pu: float = Field(default=1e-6, ge=0)
    perturbation_mw: float = Field(default=0.05, gt=0)
    sensitivity_interval_s: float = Field(default=0.0, ge=0)
    dc_control: bool = True
    battery_control: bool = True
    enabled: bool = True
    fleets: list[FleetControl] = []
    throughput_weight_frac: float = Field(default=1e-3, ge=0)
    voltage_weight_frac: float = Field(default=1e6, ge=0)
    switch_weight_frac: float = Field(default=1.0, ge=0)
    latency_dual_step_per_s: float = Field(default=1.0, ge=0)
    p_pause_mw: float = Field(default=0.0, ge=0)
    n_gpus_pause: int = Field(default=0, ge=0)
    pause_max_frac: float = Field(default=1.0, ge=0, le=1)
    cost_pause_per_gpu_h: float = Field(default=1.0, ge=0)
    pause_control: bool = True
    shift_when_throttled: bool = False

    @field_validator("dc_phases")
    @classmethod
    def _phases(cls, value: str) -> str:
        return phases_problem(value)

    @field_validator("network")
    @classmethod
    def _feeder(cls, value: str, info: ValidationInfo) -> str:
        """An OpenDSS catalogue feeder or ``.dss`` file (relative: from the scenario's folder), checked here so
        a typo is a validation message, not a failure when the feeder copy is built."""
        base_dir = (info.context or {}).get("base_dir")
        if value.lower().endswith(".dss") and base_dir is not None and not Path(value).is_absolute():
            value = str((Path(base_dir) / value).resolve())
        grid_models.dss_file(value)  # ValueError naming the known feeders, or the missing file
        return value

    @model_validator(mode="after")
    def _ranges(self):
        self._check_sites()
        if self.bat_bus is None and (self.p_bat_max_mw > 0 or self.s_bat_max_mva > 0):
            raise ValueError("p_bat_max_mw / s_bat_max_mva are set but bat_bus is not: give the battery's bat_bus "
                             "(or drop the ratings: without a bus there is no battery to steer)")
        if self.bat_bus is not None and not (self.p_bat_max_mw > 0 or self.s_bat_max_mva > 0):
            raise ValueError("bat_bus is set: give the battery's p_bat_max_mw and s_bat_max_mva")
        if self.s_bat_max_mva and self.p_bat_max_mw > self.s_bat_max_mva:
            raise ValueError(f"p_bat_max_mw = {self.p_bat_max_mw:g} is above s_bat_max_mva = {self.s_bat_max_mva:g}")
        if (self.p_pause_mw > 0) != (self.n_gpus_pause > 0):
            raise ValueError(f"p_pause_mw = {self.p_pause_mw:g} and n_gpus_pause = {self.n_gpus_pause}: give both "
                             "(the power and the GPUs pausing every flexible job frees) for the pause control, "
                             "or neither (no pause control)")
        return self

    def _check_sites(self) -> None:
        if not self.sites:
            if self.dc_bus is None:
                raise ValueError("dc_bus: give the datacenter's bus (or sites = [{ name, dc_bus, p_flex_mw }, ...])")
            return
        if self.dc_bus is not None:
            raise ValueError(f"dc_bus = {self.dc_bus!r} and sites are both set: with sites give each site's dc_bus "
                             "in its entry and drop the entity's dc_bus")
        given = sorted({"p_flex_mw", "dc_phases"} & self.model_fields_set)
        if given:
            raise ValueError(f"{', '.join(given)}: with sites give them in each site's entry (the entity's "
                             "apply to dc_bus only)")
        names = [s.name for s in self.sites]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"sites: name {twice} given twice; give each site a distinct name")
        if self.fleets or self.p_pause_mw > 0:
            raise ValueError("sites: per-fleet batches (fleets) and the pause (p_pause_mw) control one site; "
                             "with sites use the per-site allowances only")
        if (problem := self.bus_problem(sites_only=True)) is not None:
            raise ValueError(problem)

    def bus_problem(self, sites_only: bool = False) -> str | None:
        """The first bus named (each site's and ``exclude_buses``'; unless ``sites_only`` also ``dc_bus`` and
        ``bat_bus``) that is not a bus of the feeder model, as a message naming key, value and the buses;
        else None."""
        named = [] if sites_only else [("dc_bus", self.dc_bus, ""), ("bat_bus", self.bat_bus, "")]
        named += [(f"sites[{i}].dc_bus", s.dc_bus, f" (site {s.name!r})") for i, s in enumerate(self.sites)]
        named += [(f"exclude_buses[{i}]", b, "") for i, b in enumerate(self.exclude_buses or [])]
        named = [item for item in named if item[1] is not None]
        if not named:
            return None
        info = opendss_circuit_info(grid_models.dss_file(self.network))
        for key, bus, site in named:  # found as the grid finds them (name in any case, or sanitised id)
            if bus_position(info, bus) is None:
                return f"{key} = {bus!r}{site}: " + unknown_bus_message(bus, list(info.buses), Path(self.network).name)
        # a site's own bus must be monitored: exhausted_<site>_frac reads the duals there (else it stays 0)
        excluded = ({*info.source_buses, *info.reg_buses} if self.exclude_buses is None
                    else {bus_position(info, b) for b in self.exclude_buses})
        for i, s in enumerate(self.sites):
            if bus_position(info, s.dc_bus) in excluded:
                why = ("a source or regulator terminal, left out of the monitored bus-phases by default"
                       if self.exclude_buses is None else "listed in exclude_buses")
                return (f"sites[{i}].dc_bus = {s.dc_bus!r} (site {s.name!r}) is {why}, so the site's "
                        "exhausted signal could never rise; put the site on a monitored bus or set exclude_buses")
        return None

    @property
    def n_sites(self) -> int:
        """Allowance controls: one per site (1 without ``sites``)."""
        return len(self.sites) or 1

    @property
    def has_battery(self) -> bool:
        return self.bat_bus is not None

    @property
    def has_pause(self) -> bool:
        return self.p_pause_mw > 0


class FeederSensitivity:
    """∂v/∂(p, q) of the datacenter and the battery on a copy of the feeder, by perturbation.

    Args:
        params: where the sites are and the network.
    """

    def __init__(self, params: OFOParams):
        self.p = params
        self.flow = OpenDssFlow(grid_models.dss_file(params.network), regulators="auto")
        if params.sites:
            self.dc = [self.flow.attach("load", s.dc_bus, 0.0, 0.0, f"ofo_dc_{s.name}", phases=s.dc_phases,
                                        vmin_pu=0.5, vmax_pu=1.5) for s in params.sites]
        else:
            self.dc = [self.flow.attach("load", params.dc_bus, 0.0, 0.0, "ofo_dc", phases=params.dc_phases,
                                        vmin_pu=0.5, vmax_pu=1.5)]
        self.bat = (self.flow.attach("storage", params.bat_bus, 0.0, 0.0, "ofo_bat", phases=params.bat_phases,
                                     vmin_pu=0.5, vmax_pu=1.5) if params.has_battery else None)
        self.n_updates = 0

    def _voltages(self, p_mw: dict[str, np.ndarray], q_mvar: dict[str, np.ndarray]) -> np.ndarray:
        if not self.flow.solve(p_mw, q_mvar):
            raise RuntimeError(f"OFO: the feeder model {self.flow.path.name} did not converge at the operating point")
        return self.flow.phase_vm_pu()

    def compute(self, dc_mw, dc_mvar, bat_mw: float, bat_mvar: float,
                taps_pu: dict[str, float]) -> dict[str, np.ndarray]:
        """Columns ``dc`` (per MW of datacenter power at its power factor), ``bat_p`` (per MW),
        ``bat_q`` (per Mvar), one row per :attr:`OpenDssFlow.phase_attrs`, central differences. [pu/MW, pu/Mvar]

        With ``sites``, ``dc_mw`` and ``dc_mvar`` hold one value per site and the columns are
        ``dc_<site>`` (each site's bus perturbed alone, at its own power factor); ``dc`` is the first's."""
        d = self.p.perturbation_mw
        dc_mw, dc_mvar = np.atleast_1d(np.asarray(dc_mw, dtype=float)), np.atleast_1d(np.asarray(dc_mvar, dtype=float))
        tan_phi = [q / p if p > 1e-9 else 0.0 for p, q in zip(dc_mw, dc_mvar)]
        point = {"load": dc_mw.copy(), "storage": np.array([bat_mw]), "sgen": np.zeros(0)}
        reactive = {"load": dc_mvar.copy(), "storage": np.array([bat_mvar]), "sgen": np.zeros(0)}
        if self.bat is None:
            point["storage"], reactive["storage"] = np.zeros(0), np.zeros(0)
        if not taps_pu and self.n_updates == 0:  # no taps measured: settle the model's own once, then hold
            self._voltages(point, reactive)
            taps_pu = dict(zip(self.flow.ids["reg"], self.flow.tap_pu.tolist()))
        if taps_pu:  # held, so a perturbation never moves a tap
            self.flow.hold_taps_pu(taps_pu)

        def diff(kind: str, dp: float, dq: float, i: int = 0) -> np.ndarray:
            up = {k: v.copy() for k, v in point.items()}, {k: v.copy() for k, v in reactive.items()}
            down = {k: v.copy() for k, v in point.items()}, {k: v.copy() for k, v in reactive.items()}
            up[0][kind][i] += dp
            up[1][kind][i] += dq
            down[0][kind][i] -= dp
            down[1][kind][i] -= dq
            return (self._voltages(*up) - self._voltages(*down)) / (2 * d)

        columns = {"dc": diff("load", d, d * tan_phi[0])}
        for i, site in enumerate(self.p.sites):
            columns[f"dc_{site.name}"] = columns["dc"] if i == 0 else diff("load", d, d * tan_phi[i], i)
        if self.bat is not None:
            columns["bat_p"] = diff("storage", d, 0.0)
            columns["bat_q"] = diff("storage", 0.0, d)
        self._voltages(point, reactive)  # leave the model at the operating point
        self.n_updates += 1
        return columns


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


class FleetBatch:
    """One fleet's batch-size state: ``x = log2 b`` (continuous), the applied size, ``μ``.

    Args:
        spec: the fleet.
    """

    _DX = 1e-3  # central-difference step of the curves' derivatives in log2 b

    def __init__(self, spec: FleetControl):
        self.spec = spec
        self.curves: BatchCurves = batch_curves(spec.model, spec.gpu, spec.n_gpus_per_replica)
        self.idle_w = GPUS[spec.gpu].idle_w
        top = math.floor(self.curves.b_max)
        sizes = sorted({min(b, top) for b in spec.n_batch_sizes})
        self.sizes = np.array(sizes, dtype=float)
        self.x_lo, self.x_hi = math.log2(sizes[0]), math.log2(sizes[-1])
        self.x = float(min(max(math.log2(spec.n_batch_init), self.x_lo), self.x_hi))
        self.x_prev = self.x
        self.batch = self._nearest(self.x)
        self.x_applied = math.log2(self.batch)
        self.mu = 0.0
        self.r_max = float(self.curves.tokens_per_s(2.0 ** self.x_hi))

    def power_w(self, x: float) -> float:
        """One replica's GPU power at batch ``2**x``. [W]"""
        return float(self.curves.power_w(2.0 ** x, self.idle_w)) * self.curves.gpus_per_replica

    def tokens_per_s(self, x: float) -> float:
        return float(self.curves.tokens_per_s(2.0 ** x))

    def itl_s(self, x: float) -> float:
        """Median inter-token latency at batch ``2**x``. [s]"""
        return float(self.curves.itl_ms(2.0 ** x)) / 1e3

    def _slope(self, f, x: float) -> float:
        lo, hi = max(x - self._DX, self.x_lo), min(x + self._DX, self.x_hi)
        return (f(hi) - f(lo)) / (hi - lo) if hi > lo else 0.0

    def _nearest(self, x: float) -> float:
        """The feasible size nearest ``2**x`` (in batch units). [-]"""
        b = 2.0 ** x
        return float(self.sizes[int(np.argmin(np.abs(self.sizes - b)))])

    def step(self, p: OFOParams, eta_per_kw: float, replicas_frac: float) -> None:
        """The latency dual, then one primal step (OpenG2G's order)."""
        self.mu = max(self.mu + p.latency_dual_step_per_s * (self.itl_s(self.x_applied) - self.spec.itl_deadline_ms / 1e3),
                      0.0)
        w = self.spec.n_replicas * replicas_frac
        x = self.x
        grad = (-p.throughput_weight_frac * w * self._slope(self.tokens_per_s, x) / self.r_max
                + p.voltage_weight_frac * eta_per_kw * w * self._slope(self.power_w, x) / 1000.0
                + self.mu * self._slope(self.itl_s, x) + p.switch_weight_frac * (x - self.x_prev))
        self.x_prev = x
        self.x = float(min(max(x - p.primal_step_frac * grad, self.x_lo), self.x_hi))
        self.batch = self._nearest(self.x)
        self.x_applied = math.log2(self.batch)


class OFOSimParams(Params):
    """``[sims.<id>]`` keys of the ofo adapter.

    Attributes:
        fleets: names of the fleets its entities control per fleet (their outputs
            ``n_batch_max_<fleet>``, ``itl_<fleet>_ms``); empty: allowance control only.
        pause: its entities pause flexible training (their ``p_pause_mw`` > 0; outputs
            :data:`PAUSE_OUTPUTS`); ``false`` (the default): no pause outputs.
        sites: names of the sites its entities control (their ``sites``; per-site outputs
            :func:`site_outputs` instead of the one site's knobs); empty: one site at ``dc_bus``.
    """

    fleets: list[str] = []
    pause: bool = False
    sites: list[str] = []


#: the outputs of an entity with the pause control (``[sims.<id>] pause = true``)
PAUSE_OUTPUTS = ("pause_flexible_frac", "p_paused_mw", "n_gpus_paused", "paused_gpu_h")


#: the one site's knobs, replaced by :func:`site_outputs` with ``sites``
KNOB_OUTPUTS = ("n_batch_max", "p_cap_w", "p_limit_mw", "allowance_frac")


def site_outputs(names: list[str]) -> list[str]:
    """The per-site outputs of sites ``names``: the knobs ``n_batch_max_<site>``, ``p_cap_<site>_w``,
    ``p_limit_<site>_mw``, ``allowance_<site>_frac`` and ``exhausted_<site>_frac`` (to load_shift's
    input of that name)."""
    return [a for n in names for a in (f"n_batch_max_{n}", f"p_cap_{n}_w", f"p_limit_{n}_mw", f"allowance_{n}_frac",
                                       f"exhausted_{n}_frac")]


def site_inputs(names: list[str]) -> list[str]:
    """The per-site inputs of sites ``names``: ``p_dc_<site>_mw``, ``q_dc_<site>_mvar``."""
    return [a for n in names for a in (f"p_dc_{n}_mw", f"q_dc_{n}_mvar")]


def fleet_outputs(names: list[str]) -> list[str]:
    """The per-fleet outputs of fleets ``names``."""
    if not names:
        return []
    return [*(a for n in names for a in (f"n_batch_max_{n}", f"itl_{n}_ms")), "n_itl_misses"]


class OFOSim(SingleModelSim):
    """Online feedback optimisation over every monitored bus-phase (model ``OFO``)."""

    MODEL, PARAMS, ROLE = "OFO", OFOParams, "controller"
    SimParams = OFOSimParams
    INPUTS, OUTPUTS = SITE_INPUTS, OUTPUTS
    ANY_INPUTS = True  # the feeder's bus-phase voltages and tap ratios, named after its buses
    EXAMPLE = {"models": {"OFO": {"network": "ieee13", "dc_bus": "671"}}}

    @classmethod
    def meta_for(cls, sim_params: OFOSimParams) -> dict[str, Any]:
        if not sim_params.fleets and not sim_params.pause and not sim_params.sites:
            return cls.META
        if sim_params.sites:
            return cls.single_meta(outputs=[*site_outputs(sim_params.sites),
                                            *(a for a in OUTPUTS if a not in KNOB_OUTPUTS)],
                                   # per-site powers replace p_dc_mw / q_dc_mvar (read only without sites):
                                   # a connection to those is refused at validation instead of ignored
                                   inputs=[a for a in SITE_INPUTS if a not in ("p_dc_mw", "q_dc_mvar")]
                                   + site_inputs(sim_params.sites))
        return cls.single_meta(outputs=[*OUTPUTS, *fleet_outputs(sim_params.fleets),
                                        *(PAUSE_OUTPUTS if sim_params.pause else ())])

    @classmethod
    def check_entity(cls, model, params, ctx, sim_params=None) -> list[str]:
        named = list(sim_params.fleets) if sim_params is not None else []
        given = [f.name for f in params.fleets]
        if sorted(given) != sorted(named):
            return [f"fleets {given} must be the sim's fleets {named} (sims.<id>.fleets names the outputs)"]
        named_sites = list(sim_params.sites) if sim_params is not None else []
        given_sites = [s.name for s in params.sites]
        if sorted(given_sites) != sorted(named_sites):
            return [f"sites {given_sites} must be the sim's sites {named_sites} ([sims.<id>] sites names the "
                    "per-site outputs)"]
        pause = sim_params is not None and sim_params.pause
        if params.has_pause != pause:
            return [f"p_pause_mw = {params.p_pause_mw:g} but the sim's pause = {str(pause).lower()}: the pause "
                    "control needs both (p_pause_mw > 0 with n_gpus_pause, and [sims.<id>] pause = true, which "
                    "declares its outputs); pause_control = false holds it at 0"]
        problem = params.bus_problem()  # here, not in the params: unit tests drive the controller on toy buses
        return [problem] if problem is not None else []

    @classmethod
    def entity_inputs(cls, model: str, params: OFOParams | None) -> list[str]:
        if params is None:
            return []
        per_phase, _, tap_pu, _, _ = device_attrs(opendss_circuit_info(grid_models.dss_file(params.network)))
        return [*per_phase, *tap_pu, *site_inputs([s.name for s in params.sites])]

    def build(self, eid: str, params: OFOParams) -> OFOController:
        return OFOController(params, FeederSensitivity(params) if params.enabled else None)

    def advance(self, ctl: OFOController, time_s: int, inputs: dict[str, Any]) -> dict[str, Any]:
        measured = {k: float(v) for k, v in inputs.items() if _PHASE_ATTR.match(k) and v is not None}
        taps = {m.group(1): float(v) for k, v in inputs.items() if (m := _TAP_ATTR.match(k)) and v is not None
                and math.isfinite(float(v))}
        names = [*SITE_INPUTS, *site_inputs([s.name for s in ctl.p.sites])]
        site = {k: float(inputs[k]) for k in names if inputs.get(k) is not None
                and math.isfinite(float(inputs[k]))}
        ctl.update(time_s, measured, site, taps, float(self.step_s))
        return ctl.outputs(ctl.model.n_updates if ctl.model is not None else 0)
