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
from typing import Any

from cosim import grid_models
from cosim.adapters._grid_backend import opendss_circuit_info
from cosim.adapters._grid_opendss import device_attrs
from cosim.adapters.controllers.ofo.controller import OFOController
from cosim.adapters.controllers.ofo.params import OFOParams, OFOSimParams
from cosim.adapters.controllers.ofo.sensitivity import FeederSensitivity
from cosim.sdk import SingleModelSim

__all__ = ["KNOB_OUTPUTS", "OFOSim", "OUTPUTS", "PAUSE_OUTPUTS", "SITE_INPUTS", "fleet_outputs", "site_inputs",
           "site_outputs"]

OUTPUTS = ("n_batch_max", "p_cap_w", "p_limit_mw", "allowance_frac", "p_bat_set_mw", "q_bat_mvar",
           "lambda_under_sum_per_pu", "lambda_over_sum_per_pu", "n_duals_active", "n_sensitivity_updates")
SITE_INPUTS = ("p_dc_mw", "q_dc_mvar", "p_bat_mw", "replicas_frac")
_PHASE_ATTR = re.compile(r"^bus_.+_[abc]_vm_pu$")
_TAP_ATTR = re.compile(r"^reg_(.+)_tap_pu$")


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
