"""The OFO controller's parameters: an entity's band, steps, costs, ratings, sites and fleets
(:class:`OFOParams`, checked against the feeder model when the scenario is loaded) and the
``[sims.<id>]`` keys that name its per-site and per-fleet outputs (:class:`OFOSimParams`)."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, ValidationInfo, field_validator, model_validator

from cosim import grid_models
from cosim.adapters._grid_backend import opendss_circuit_info, phase_set
from cosim.adapters._grid_opendss import bus_position, unknown_bus_message
from cosim.adapters.controllers._campus_knobs import CampusKnobParams
from cosim.adapters.datacenter.hardware import GPUS
from cosim.adapters.datacenter.inference import MODELS, batch_curves
from cosim.sdk import Params

__all__ = ["FleetControl", "OFOParams", "OFOSimParams", "SiteControl", "phases_problem"]


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

