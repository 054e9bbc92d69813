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
   With ``shift_on_signal = true`` (cosim's, for OFO's ``shift_when_throttled``) a site also moves
   load out in every step its signal is 1, its own bus in band or not, to an in-band site whose
   signal is 0: the controller's signal already says the move relieves the feeder.
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

A site in no modelled grid (e.g. sites in different grids) is listed in ``no_grid_sites``: with
no voltage connected (neither ``vm_min_<site>_pu`` nor ``vm_max_<site>_pu``) it has no voltage
limit in the carbon variant. A site not listed with no voltage connected stops the run at the
first carbon-variant step, naming the key (a forgotten connection would otherwise leave it with
no voltage guard, silently; the adapter cannot see the connections at validation). A connected
NaN (an unsolved grid) still stops a move.

**Flexible training jobs** (sim param ``training = true``; the Clusters' sim needs
``job_moves = true`` and the destinations ``training.n_guest_slots``; the two halves of a move
are in ``adapters/datacenter/moves``): a flexible job stops at its source with its progress kept
(checkpoint on demand) and is queued at the destination with ``train_restart_s`` of extra work
(reloading the checkpoint), where its own policy starts it. Rules:

* **When**: in the voltage variant, a latched site whose *inference* move is not possible this
  step (no destination with a warm spare, or nothing left to give) moves training instead —
  out to the in-band site with the highest ``vm_min`` (under-voltage), or in from the in-band
  site with the lowest ``vm_max`` (over-voltage): OpenG2G's last-resort rule one level further.
  In the carbon variant, in a step with no voltage latch, one job moves from the highest- to
  the lowest-carbon site when the gap exceeds ``ci_gap_g_kwh`` (both with voltage room as for
  replicas), whatever the replicas do (training and inference sit on different GPUs).
* **Capacity**: only to a site with a free guest slot whose spare GPUs (free and not wanted by its
  own queue, ``n_gpus_spare``) fit the source's smallest movable flexible job; the source is asked
  for a job of at most that many GPUs, so no move ever needs more GPUs than the destination had free.
* **Slots**: a run in which no site has a guest slot at the start (so no job could move) stops
  at its second step, naming ``training.n_guest_slots``.
* **One in flight**: a move takes two steps (the source exports at the step after the request,
  the controller passes the record on, the destination imports at the step after that); the next
  move is asked for when the destination has reported the import. ``hold_s`` applies between
  training moves of a site as between replica shifts (its own timer).

Per site inputs from its Cluster (renamed ``<attr>_<site>``; ``export_<site>_work_s``,
``export_<site>_power_frac``, ``export_<site>_submit_s`` and ``export_<site>_ckpt_interval_s`` for
those with units): ``n_gpus_spare``, ``n_jobs_flex``,
``n_gpus_flex_min``, ``n_slots_free``, ``n_export_done``, ``n_export_gpus``, ``export_work_s``,
``export_power_frac``, ``n_export_prio``, ``n_import_done``, ``export_submit_s``,
``n_export_started``, ``export_ckpt_interval_s``, ``n_export_elastic``; outputs to it (time-shifted, renamed back): ``n_export_req``,
``n_export_max_gpus``, ``n_import_seq``, ``n_import_gpus``, ``import_work_s``, ``import_power_frac``,
``n_import_prio``, ``import_restart_s``, ``import_submit_s``, ``n_import_started`` (the job's
submission, so it counts once in the wait / JCT statistics; a NaN or absent submission is passed
on as NaN: not counted), ``import_ckpt_interval_s``, ``n_import_elastic`` (its checkpoint interval,
NaN or absent: the destination's default, and elastic flag); reported:
``n_train_moves`` (jobs moved), per site ``n_train_moved_in_<site>`` (net jobs received) and
``train_moved_in_<site>_gpu_h`` (net remaining work received, GPU-hours at full speed). The
Clusters' own outputs say what the moved work did there (``work_gpu_h``, ``guest_work_gpu_h``).

Sites are named by the sim's ``sites`` (name them after the Cluster entities they steer: the
``load_shift`` KPI block then reports each site's throughput and latency from that entity).

Model ``LoadShift``. Inputs per site ``vm_min_<site>_pu``, ``vm_max_<site>_pu`` (connect the
site's grid element ``vm_phase_min_pu`` / ``vm_phase_max_pu``, renamed) and optional
``exhausted_<site>_frac`` and ``ci_<site>_g_kwh`` (the carbon variant). Outputs per site ``replicas_<site>_frac``, ``demand_<site>_ratio``,
``n_active_<site>``, ``n_moved_in_<site>`` (net replicas received so far, negative = given away)
and ``moved_in_<site>_per_s`` (net demand received [req/s]), ``ci_<site>_g_kwh`` (the carbon
intensity it acted on, NaN if none is connected: for the per-site carbon of the ``load_shift``
KPI block), and ``n_shifts``.

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
    """Params of one load_shift simulator.

    Attributes:
        sites: the site names (the Cluster entities it steers).
        training: also move flexible training jobs (adds the per-site training inputs and outputs).
    """

    sites: list[str] = Field(min_length=2)
    training: bool = False

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
        no_grid_sites: carbon variant: sites in no modelled grid, no voltage connected; they have no
            voltage limit (any other site without voltage connected is an error at run time).
        train_restart_s: extra work of a moved training job at its destination (reloading its
            checkpoint there; the sim's ``training = true``). [s]
        shift_on_signal: a site whose ``exhausted_<site>_frac`` is 1 moves load out (as in an
            under-voltage) in every step it stays 1, even with its own bus in band, to an in-band site
            whose own signal is 0 (for OFO's ``shift_when_throttled``: the signal already says the move
            helps; no latch, so it stops when the signal drops). ``false`` (default): the last-resort rule.
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
    no_grid_sites: list[str] = []
    train_restart_s: float = Field(default=300.0, ge=0)
    shift_on_signal: bool = False
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


#: Per-site training inputs from each Cluster (``.moves.MOVE_OUTPUTS`` it reports), as the
#: controller names them: ``{site}`` is replaced by the site's name.
TRAIN_INPUTS: tuple[str, ...] = ("n_gpus_spare_{site}", "n_jobs_flex_{site}", "n_gpus_flex_min_{site}",
                                 "n_slots_free_{site}", "n_export_done_{site}", "n_export_gpus_{site}",
                                 "export_{site}_work_s", "export_{site}_power_frac", "n_export_prio_{site}",
                                 "n_import_done_{site}", "export_{site}_submit_s", "n_export_started_{site}",
                                 "export_{site}_ckpt_interval_s", "n_export_elastic_{site}")
#: Per-site training outputs to each Cluster (``.moves.MOVE_INPUTS``) and reported ones.
TRAIN_OUTPUTS: tuple[str, ...] = ("n_export_req_{site}", "n_export_max_gpus_{site}", "n_import_seq_{site}",
                                  "n_import_gpus_{site}", "import_{site}_work_s", "import_{site}_power_frac",
                                  "n_import_prio_{site}", "import_{site}_restart_s", "n_train_moved_in_{site}",
                                  "train_moved_in_{site}_gpu_h", "import_{site}_submit_s", "n_import_started_{site}",
                                  "import_{site}_ckpt_interval_s", "n_import_elastic_{site}")


class TrainMoves:
    """The controller's half of the training-job moves: one move in flight, counters and records.

    Args:
        sites: the site names.
        restart_s: extra work of a moved job at its destination. [s]
    """

    def __init__(self, sites: list[str], restart_s: float, label: str = "LoadShift"):
        self.sites, self.restart_s = list(sites), float(restart_s)
        self.label = label  # who errors name: the entity, "entities.<id> (LoadShift)"
        self.obs: dict[str, dict[str, float]] = {s: {} for s in sites}
        self.req = dict.fromkeys(sites, 0)
        self.max_gpus = dict.fromkeys(sites, 0)
        self.seq = dict.fromkeys(sites, 0)
        # (GPUs, remaining work [s], power [-], class, submission [s], started [-], checkpoint
        # interval [s], elastic [-]) per destination
        self.record: dict[str, tuple] = {s: (0, 0.0, 0.0, 0, 0.0, 0, 0.0, 0) for s in sites}
        self.pending: tuple[str, str, str] | None = None  # ("export", src, dst) or ("import", src, dst)
        self.moved_in = dict.fromkeys(sites, 0)
        self.moved_in_gpu_h = dict.fromkeys(sites, 0.0)
        self.n_moves = 0
        self.n_empty = 0  # requests the source answered with no job (its jobs changed meanwhile)
        self.moves: list[tuple[str, str, int, float]] = []  # (src, dst, GPUs, remaining work [s])
        self._n_slot_obs = 0  # observations with every site's n_slots_free, until the check below

    def observe(self, obs: dict[str, dict[str, float]]) -> None:
        """Read the sites' training outputs and advance the move in flight."""
        self.obs = obs
        if self.pending is None:
            return
        kind, src, dst = self.pending
        if kind == "export" and self.get(src, "n_export_done") >= self.req[src]:
            n = int(round(self.get(src, "n_export_gpus")))
            if n < 1:
                self.pending, self.n_empty = None, self.n_empty + 1
                return
            work_s = self.get(src, "export_work_s")
            submit = self.obs.get(src, {}).get("export_submit_s")  # NaN/absent kept: not counted (.moves)
            interval = self.obs.get(src, {}).get("export_ckpt_interval_s")  # NaN/absent: the destination's
            self.record[dst] = (n, work_s, self.get(src, "export_power_frac"), int(round(self.get(src, "n_export_prio"))),
                                math.nan if submit is None else float(submit),
                                int(round(self.get(src, "n_export_started"))),
                                math.nan if interval is None else float(interval),
                                int(round(self.get(src, "n_export_elastic"))))
            self.seq[dst] += 1
            self.pending = ("import", src, dst)
            self.n_moves += 1
            self.moved_in[dst] += 1
            self.moved_in[src] -= 1
            self.moved_in_gpu_h[dst] += n * work_s / 3600.0
            self.moved_in_gpu_h[src] -= n * work_s / 3600.0
            self.moves.append((src, dst, n, work_s))
        elif kind == "import" and self.get(dst, "n_import_done") >= self.seq[dst]:
            self.pending = None

    def check_slots(self) -> None:
        """No site has a guest slot at the start: no job could ever move in; say so, once.

        Judged on the second observation with every site's ``n_slots_free`` (the first may be a
        time-shifted start value); no import can have filled a slot by then (a move takes two steps).
        """
        if self._n_slot_obs >= 2 or not all("n_slots_free" in self.obs.get(s, {}) for s in self.sites):
            return
        self._n_slot_obs += 1
        if self._n_slot_obs == 2 and self.n_moves == 0 and all(self.get(s, "n_slots_free") < 1 for s in self.sites):
            raise ValueError(f"{self.label}, training = true: no site has a guest slot (every n_slots_free_<site> "
                             "is 0 at the start), so no training job can ever move: give the Clusters that may take jobs "
                             "training.n_guest_slots = <jobs each may hold at once> (their [sims] table needs "
                             "job_moves = true), or set training = false in the controller's [sims] table")

    def get(self, site: str, attr: str) -> float:
        """A site's training output (absent or NaN = 0). [as the attribute]"""
        value = self.obs.get(site, {}).get(attr)
        return 0.0 if value is None or not math.isfinite(value) else float(value)

    def idle(self) -> bool:
        return self.pending is None

    def room(self, site: str) -> int:
        """GPUs a job moved to ``site`` may take: its spare GPUs, 0 without a free guest slot. [-]"""
        return int(self.get(site, "n_gpus_spare")) if self.get(site, "n_slots_free") >= 1 else 0

    def smallest(self, site: str) -> int | None:
        """GPUs of ``site``'s smallest movable flexible job; None if it has none. [-]"""
        if self.get(site, "n_jobs_flex") < 1:
            return None
        return int(self.get(site, "n_gpus_flex_min"))

    def fits(self, src: str, dst: str) -> bool:
        """``src`` has a flexible job that fits ``dst``'s room (the capacity rule)."""
        need = self.smallest(src)
        return need is not None and 1 <= need <= self.room(dst)

    def request(self, src: str, dst: str) -> None:
        """Ask ``src`` for a job of at most ``dst``'s room."""
        if not self.idle() or not self.fits(src, dst) or src == dst:
            raise ValueError(f"cannot move a training job {src} -> {dst} (pending {self.pending}, "
                             f"room {self.room(dst)}, smallest {self.smallest(src)})")
        self.req[src] += 1
        self.max_gpus[src] = self.room(dst)
        self.pending = ("export", src, dst)

    def outputs(self) -> dict[str, float]:
        out: dict[str, float] = {"n_train_moves": self.n_moves}
        for s in self.sites:
            n, work_s, power_frac, prio, submit_s, started, interval_s, elastic = self.record[s]
            out.update({f"n_export_req_{s}": self.req[s], f"n_export_max_gpus_{s}": self.max_gpus[s],
                        f"n_import_seq_{s}": self.seq[s], f"n_import_gpus_{s}": n, f"import_{s}_work_s": work_s,
                        f"import_{s}_power_frac": power_frac, f"n_import_prio_{s}": prio,
                        f"import_{s}_restart_s": self.restart_s, f"n_train_moved_in_{s}": self.moved_in[s],
                        f"train_moved_in_{s}_gpu_h": self.moved_in_gpu_h[s], f"import_{s}_submit_s": submit_s,
                        f"n_import_started_{s}": started, f"import_{s}_ckpt_interval_s": interval_s,
                        f"n_import_elastic_{s}": elastic})
        return out


class Shifter:
    """The rules over the sites' replica counts and demand (plain Python).

    Args:
        params: per-site capacities and demand.
        sites: the site names, in priority order (ties and evaluation order).
        training: also move flexible training jobs (:class:`TrainMoves`).
    """

    def __init__(self, params: LoadShiftParams, sites: list[str], training: bool = False, label: str = "LoadShift"):
        self.p, self.sites = params, list(sites)
        self.label = label  # who errors name: the entity, "entities.<id> (LoadShift)"
        self.deployed = {s: params.replicas[s] for s in sites}
        self.active = {s: params.active.get(s, params.replicas[s]) for s in sites}
        self.active0 = dict(self.active)
        self.rate = {s: params.rate_req_s[s] for s in sites}
        self.demand = dict(self.rate)
        self.n_shifts = 0
        self._last_s = dict.fromkeys(sites, -math.inf)
        self._train_last_s = dict.fromkeys(sites, -math.inf)
        self._latched: dict[str, str | None] = dict.fromkeys(sites)
        self.n_per_shift = max(1, params.n_gpus_per_shift // params.n_gpus_per_replica)
        self.train = TrainMoves(sites, params.train_restart_s, label) if training else None
        self.ci: dict[str, float] = dict.fromkeys(sites, math.nan)

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
               exhausted: dict[str, float | None], ci: dict[str, float | None] | None = None,
               train: dict[str, dict[str, float]] | None = None) -> None:
        """Apply the rules once for the measured site voltages (and carbon intensities, and the
        sites' training outputs). [s, pu, pu, -, g/kWh, -]"""
        p = self.p
        self.ci = {s: _or((ci or {}).get(s), math.nan) for s in self.sites}
        if self.train is not None:
            self.train.observe(train or {})
        if not p.enabled:
            return
        if self.train is not None:
            self.train.check_slots()
        low = {s: _or(vm_min.get(s), math.nan) for s in self.sites}
        high = {s: _or(vm_max.get(s), math.nan) for s in self.sites}
        self._unconnected = {s: vm_min.get(s) is None and vm_max.get(s) is None for s in self.sites}

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
            want = self._latched[site]
            if want is None and p.shift_on_signal and _signal(exhausted, site):  # the signal: moving out helps
                want = "under"
            if not ready(site) or want is None:
                continue
            if want == "under":  # under: move load out
                cands = [s for s in self.sites if s != site and in_band(s) and self.active[s] >= 1
                         and self.spare(s) >= 1 and ready(s) and not (p.shift_on_signal and _signal(exhausted, s))]
                if not cands or self.movable(site) < 1:
                    self._train_voltage(site, "under", low, high, in_band, time_s)
                    continue
                dst = max(cands, key=lambda s: (low[s], -self.sites.index(s)))
                src = site
            else:  # over: move load in
                cands = [s for s in self.sites if s != site and in_band(s) and self.movable(s) >= 1 and ready(s)]
                if not cands or self.spare(site) < 1 or self.active[site] < 1:
                    self._train_voltage(site, "over", low, high, in_band, time_s)
                    continue
                src = min(cands, key=lambda s: (high[s], self.sites.index(s)))
                dst = site
            n = min(self.n_per_shift, self.movable(src), self.spare(dst))
            self.move(src, dst, n)
            self._last_s[src] = self._last_s[dst] = time_s
        if p.ci_gap_g_kwh is not None and ci and not any(self._latched.values()):
            self._carbon_shift(time_s, low, high, ci)
            if self.train is not None:
                self._carbon_train(time_s, low, high, ci)

    def _train_ready(self, site: str, time_s: float) -> bool:
        return time_s - self._train_last_s[site] >= self.p.hold_s - 1e-9

    def _train_voltage(self, site: str, direction: str, low, high, in_band, time_s: float) -> None:
        """The latched ``site`` has no replica move: move a flexible training job out (under) or in (over)."""
        tm = self.train
        if tm is None or not tm.idle() or not self._train_ready(site, time_s):
            return
        others = [s for s in self.sites if s != site and in_band(s) and self._train_ready(s, time_s)]
        if direction == "under":
            dsts = [s for s in others if tm.fits(site, s)]
            if not dsts:
                return
            src, dst = site, max(dsts, key=lambda s: (low[s], -self.sites.index(s)))
        else:
            srcs = [s for s in others if tm.fits(s, site)]
            if not srcs:
                return
            src, dst = min(srcs, key=lambda s: (high[s], self.sites.index(s))), site
        tm.request(src, dst)
        self._train_last_s[src] = self._train_last_s[dst] = time_s

    def _safe(self, time_s: float, low: dict[str, float], high: dict[str, float], timers: dict[str, float]) -> list[str]:
        """Sites with voltage room (margin inside the band, or in no grid) and past ``hold_s``."""
        p = self.p
        unguarded = [s for s in self.sites if self._unconnected[s] and s not in p.no_grid_sites]
        if unguarded:
            names = ", ".join(f"vm_min_{s}_pu / vm_max_{s}_pu" for s in unguarded)
            raise ValueError(f"{self.label}: {names} not connected, so the carbon variant (ci_gap_g_kwh) has no "
                             f"voltage guard for {', '.join(unguarded)}: connect the site's grid element "
                             "vm_phase_min_pu / vm_phase_max_pu (renamed), or, for a site in no modelled grid, "
                             f"list it in the entity's no_grid_sites (no_grid_sites = {unguarded})")
        return [s for s in self.sites
                if (self._unconnected[s] or (math.isfinite(low[s]) and math.isfinite(high[s])
                                             and low[s] >= p.v_low_pu + p.margin_pu
                                             and high[s] <= p.v_high_pu - p.margin_pu))
                and time_s - timers[s] >= p.hold_s - 1e-9]

    def _carbon_shift(self, time_s: float, low: dict[str, float], high: dict[str, float],
                      ci: dict[str, float | None]) -> None:
        """One move from the highest- to the lowest-carbon site, both with margin inside the band."""
        p = self.p
        known = {s: c for s, c in ci.items() if c is not None and math.isfinite(c) and s in self.active}
        safe = [s for s in self._safe(time_s, low, high, self._last_s) if s in known]
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

    def _carbon_train(self, time_s: float, low: dict[str, float], high: dict[str, float],
                      ci: dict[str, float | None]) -> None:
        """One training job from the highest-carbon site that has one to the lowest-carbon site it fits."""
        tm = self.train
        if not tm.idle():
            return
        known = {s: c for s, c in ci.items() if c is not None and math.isfinite(c) and s in self.active}
        safe = [s for s in self._safe(time_s, low, high, self._train_last_s) if s in known]
        srcs = [s for s in safe if tm.smallest(s) is not None]
        if not srcs:
            return
        src = max(srcs, key=lambda s: (known[s], -self.sites.index(s)))
        dsts = [s for s in safe if s != src and tm.fits(src, s)]
        if not dsts:
            return
        dst = min(dsts, key=lambda s: (known[s], self.sites.index(s)))
        if known[src] - known[dst] <= self.p.ci_gap_g_kwh:
            return
        tm.request(src, dst)
        self._train_last_s[src] = self._train_last_s[dst] = time_s

    def outputs(self) -> dict[str, float]:
        out: dict[str, float] = {"n_shifts": self.n_shifts}
        for s in self.sites:
            out[f"replicas_{s}_frac"] = self.active[s] / self.deployed[s] if self.deployed[s] else 0.0
            out[f"demand_{s}_ratio"] = self.demand[s] / self.rate[s]
            out[f"n_active_{s}"] = self.active[s]
            out[f"n_moved_in_{s}"] = self.active[s] - self.active0[s]
            out[f"moved_in_{s}_per_s"] = self.demand[s] - self.rate[s]
            out[f"ci_{s}_g_kwh"] = self.ci[s]
        if self.train is not None:
            out.update(self.train.outputs())
        return out


def site_inputs(sites: list[str], training: bool = False) -> list[str]:
    names = [a for s in sites for a in (f"vm_min_{s}_pu", f"vm_max_{s}_pu", f"exhausted_{s}_frac", f"ci_{s}_g_kwh")]
    if training:
        names += [a.format(site=s) for s in sites for a in TRAIN_INPUTS]
    return names


def site_outputs(sites: list[str], training: bool = False) -> list[str]:
    names = ["n_shifts", *(a for s in sites for a in (f"replicas_{s}_frac", f"demand_{s}_ratio", f"n_active_{s}",
                                                     f"n_moved_in_{s}", f"moved_in_{s}_per_s", f"ci_{s}_g_kwh"))]
    if training:
        names += ["n_train_moves", *(a.format(site=s) for s in sites for a in TRAIN_OUTPUTS)]
    return names


def _train_inputs(inputs: dict[str, Any], site: str) -> dict[str, float]:
    """One site's training inputs under the Cluster's names (``export_work_s``, ...)."""
    out = {}
    for pattern in TRAIN_INPUTS:
        value = _number(inputs.get(pattern.format(site=site)))
        if value is not None:
            out[pattern.replace("_{site}", "")] = value
    return out


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
        return cls.single_meta(inputs=site_inputs(sim_params.sites, sim_params.training),
                               outputs=site_outputs(sim_params.sites, sim_params.training))

    @classmethod
    def check_entity(cls, model, params, ctx, sim_params=None) -> list[str]:
        if sim_params is None or params is None:
            return []
        problems = []
        for key in ("replicas", "rate_req_s"):
            missing = [s for s in sim_params.sites if s not in getattr(params, key)]
            if missing:
                problems.append(f"{key}: give every site of the sim's sites; missing {missing}")
        for key in ("replicas", "active", "rate_req_s", "no_grid_sites"):  # dicts by site, and a list of sites
            unknown = sorted(set(getattr(params, key)) - set(sim_params.sites))
            if unknown:
                problems.append(f"{key}: {unknown} are not among the sim's sites {sim_params.sites}")
        if params.no_grid_sites and params.ci_gap_g_kwh is None:
            problems.append(f"warning: no_grid_sites = {params.no_grid_sites} has no effect: ci_gap_g_kwh is not set "
                            "(the carbon variant is off)")
        if "train_restart_s" in params.model_fields_set and not sim_params.training:
            problems.append(f"warning: train_restart_s = {params.train_restart_s:g} has no effect: the sim's training = false "
                            "(set training = true in its [sims] table to move training jobs)")
        return problems

    def build(self, eid: str, params: LoadShiftParams) -> Shifter:
        return Shifter(params, self.params.sites, training=self.params.training, label=f"entities.{eid} (LoadShift)")

    def advance(self, shifter: Shifter, time_s: float, inputs: dict[str, Any]) -> dict[str, Any]:
        sites = self.params.sites
        train = {s: _train_inputs(inputs, s) for s in sites} if self.params.training else None
        shifter.update(time_s, {s: _number(inputs.get(f"vm_min_{s}_pu")) for s in sites},
                       {s: _number(inputs.get(f"vm_max_{s}_pu")) for s in sites},
                       {s: _number(inputs.get(f"exhausted_{s}_frac")) for s in sites},
                       {s: _number(inputs.get(f"ci_{s}_g_kwh")) for s in sites}, train)
        return shifter.outputs()


def _number(value: Any) -> float | None:
    return None if value is None else float(value)


def _or(value: float | None, default: float) -> float:
    return default if value is None else value


def _signal(exhausted: dict[str, float | None], site: str) -> bool:
    """``site``'s connected ``exhausted_<site>_frac`` is 1 (absent or NaN: not signalled)."""
    value = exhausted.get(site)
    return value is not None and math.isfinite(value) and value >= 0.5
