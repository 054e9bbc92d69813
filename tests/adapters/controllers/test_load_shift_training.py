"""Flexible training jobs moved between sites (``controllers/load_shift`` + ``datacenter/moves``):
the capacity rule, conservation of a moved job's work (checkpoint-restart with a restart cost),
OpenG2G's last-resort rule in the voltage variant, the carbon variant's direction, the per-site
KPIs, and params errors naming their key.
"""

from __future__ import annotations

import math
import tomllib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from pydantic import ValidationError

import cosim
from cosim.adapters.controllers.load_shift import TRAIN_INPUTS, TRAIN_OUTPUTS, LoadShiftParams, LoadShiftSim, Shifter
from cosim.adapters.datacenter import ClusterParams, DatacenterSim, build_cluster
from cosim.adapters.datacenter.moves import MOVE_INPUTS, MOVE_OUTPUTS, JobMoves
from cosim.adapters.datacenter.observe import _tails_and_fairness
from cosim.adapters.datacenter.states import DONE, MOVED, QUEUED, RUNNING
from cosim.kpis._block import KpiInput
from cosim.kpis.load_shift import BLOCK

ROOT = Path(__file__).resolve().parents[3]
SITES = ["a", "b", "c"]


def cluster(n_gpus: int, n_jobs: int, slots: int, seed: int, **training):
    """A small training partition, every job flexible; returns (cluster, its JobMoves)."""
    spec = {"n_jobs": n_jobs, "sizes_gpus": [8, 16, 32], "size_weights": [0.4, 0.4, 0.2], "flexible_frac": 1.0,
            "class_fracs": [0.0, 1.0, 0.0], "n_guest_slots": slots, "warmup_h": 1.0, **training}
    params = ClusterParams.model_validate({"node": "DGX-H100", "n_gpus": n_gpus, "training": spec})
    c = build_cluster(params, np.random.default_rng(seed), 7200.0)
    return c, JobMoves(c, slots)


def shifter(**kw) -> Shifter:
    params = {"n_gpus_per_replica": 4, "n_gpus_per_shift": 8, "replicas": {"a": 10, "b": 10, "c": 10},
              "active": {"a": 8, "b": 5, "c": 9}, "rate_req_s": {"a": 80.0, "b": 50.0, "c": 90.0}, **kw}
    return Shifter(LoadShiftParams(**params), SITES, training=True)


def train_obs(spare=None, flex_min=None, n_flex=None, slots=None) -> dict[str, dict[str, float]]:
    """The sites' training outputs as the controller reads them (defaults: room 64, jobs of 8 GPUs)."""
    spare, flex_min, n_flex, slots = spare or {}, flex_min or {}, n_flex or {}, slots or {}
    return {s: {"n_gpus_spare": spare.get(s, 64), "n_gpus_flex_min": flex_min.get(s, 8),
                "n_jobs_flex": n_flex.get(s, 5), "n_slots_free": slots.get(s, 4)} for s in SITES}


def v(**kw):
    return {s: kw.get(s, 1.0) for s in SITES}


def test_capacity_rule_never_more_gpus_than_free_at_the_destination():
    """A move is asked only when the destination's spare GPUs fit the source's smallest flexible job,
    for a job of at most that many GPUs; the source picks within it (running first, then the
    largest), and the destination's scheduler never books more GPUs than it has."""
    sh = shifter(ci_gap_g_kwh=50.0, no_grid_sites=SITES)
    ci = {"a": 400.0, "b": 100.0, "c": 200.0}
    sh.update(0, {}, {}, {}, ci, train_obs(spare={"b": 4, "c": 4}))  # no room anywhere for an 8-GPU job
    assert sh.train.idle() and sh.train.req == {"a": 0, "b": 0, "c": 0}
    sh.update(1, {}, {}, {}, ci, train_obs(spare={"b": 4, "c": 16}))  # b too small, c fits: a -> c
    assert sh.train.pending == ("export", "a", "c") and sh.train.max_gpus["a"] == 16
    sh2 = shifter(ci_gap_g_kwh=50.0, no_grid_sites=SITES)
    sh2.update(0, {}, {}, {}, ci, train_obs(spare={"b": 64}, slots={"b": 0, "c": 0}))  # no free slot: nothing
    assert sh2.train.idle() and sh2.train.req["a"] == 0

    src, ms = cluster(64, 30, 0, 1)
    dst, md = cluster(64, 3, 4, 2)
    for t in range(0, 600, 60):
        src.step(t, 60.0)
        dst.step(t, 60.0)
    room = md.outputs()["n_gpus_spare"]
    assert room >= 16
    running = ms.movable()[src.sched.state[ms.movable()] == RUNNING]
    rec = ms.export(16, 600.0)
    assert 1 <= rec.n_gpus <= 16
    fits = running[src.jobs.n_gpus[running] <= 16]
    assert rec.n_gpus == src.jobs.n_gpus[fits].max()  # the largest running job that fits
    assert ms.export(4, 600.0).n_gpus == 0  # nothing of 4 GPUs or fewer: an empty answer
    slot = md.import_job(rec, 300.0, 600.0)
    for t in range(600, 3600, 60):
        dst.step(t, 60.0)
        assert dst.sched.n_free >= 0 and int((dst.sched.owner >= 0).sum()) <= dst.n_gpus
        assert int((dst.sched.owner == slot).sum()) in (0, rec.n_gpus)
    with pytest.raises(RuntimeError, match="partition has 64"):
        md.import_job(type(rec)(128, 100.0, 0.5, 1), 0.0, 3600.0)


def test_a_moved_jobs_work_is_conserved_with_the_restart_cost():
    """Checkpoint-restart: the job stops at the source with its progress kept and finishes at the
    destination; work done there + here = its work + the restart cost (+ any extra work at the
    source), and the site's counters report it (GPU-hours = GPUs x seconds / 3600)."""
    src, ms = cluster(64, 6, 0, 3, duration_median_h=0.5, duration_sigma_ln=0.0, warmup_h=0.0,
                      span_s=60.0)
    dst, md = cluster(64, 0, 2, 4)
    for t in range(0, 600, 60):
        src.step(t, 60.0)
        dst.step(t, 60.0)
    job_ids = ms.movable()
    rec = ms.export(64, 600.0)
    job = int(job_ids[(src.sched.state[job_ids] == MOVED)][0])
    done_src = float(src.sched.work_done_s[job])
    assert done_src > 0 and rec.work_s == pytest.approx(src.jobs.work_s[job] + src.sched.extra_work_s[job] - done_src)
    assert int((src.sched.owner == job).sum()) == 0  # its GPUs freed at once
    slot = md.import_job(rec, 300.0, 600.0)
    assert dst.sched.state[slot] == QUEUED
    for t in range(600, 7200, 60):
        dst.step(t, 60.0)
    assert dst.sched.state[slot] == DONE
    total = done_src + float(dst.sched.work_done_s[slot])
    assert total == pytest.approx(src.jobs.work_s[job] + src.sched.extra_work_s[job] + 300.0, abs=1e-6)
    out = md.outputs()
    assert out["restart_gpu_h"] == pytest.approx(rec.n_gpus * 300.0 / 3600.0)
    assert out["moved_in_gpu_h"] == pytest.approx(rec.n_gpus * rec.work_s / 3600.0)
    assert out["guest_work_gpu_h"] == pytest.approx(rec.n_gpus * (rec.work_s + 300.0) / 3600.0)
    assert ms.outputs()["n_jobs_moved_out"] == 1 and out["n_jobs_moved_in"] == 1 and out["n_slots_free"] == 2
    done = md.report(dst.step(7200.0, 60.0))["n_jobs_done"]
    assert md.import_job(rec, 0.0, 7260.0) == slot  # the done guest's slot is reused ...
    assert md.report(dst.step(7260.0, 60.0))["n_jobs_done"] == done  # ... and its completion still counts


def test_a_moved_job_counts_once_in_wait_and_jct_from_its_own_submission():
    """A job moved out while running (its wait counted at the source) and one moved out of the
    queue (never started): both finish at the destination and count there, once, in the JCT
    statistics from their own submission; the queued one's wait counts where it first starts,
    the running one's stays at the source (review 2026-12-01: both dropped out of every
    statistic at both sites, so a shifting run's jct_mean_h looked better than its baseline's)."""
    src, ms = cluster(8, 3, 0, 3, sizes_gpus=[8], size_weights=[1.0], duration_median_h=0.5,
                      duration_sigma_ln=0.0, warmup_h=0.0, span_s=60.0)
    dst, md = cluster(64, 0, 2, 4)
    for t in range(0, 600, 60):
        src.step(t, 60.0)
        dst.step(t, 60.0)
    s = src.sched
    running, queued = int(np.flatnonzero(s.state == RUNNING)[0]), int(np.flatnonzero(s.state == QUEUED)[0])
    records = [ms.export(8, 600.0), ms.export(8, 600.0)]
    assert s.state[running] == MOVED and s.state[queued] == MOVED
    assert [r.started for r in records] == [True, False]  # running first, then the queue
    submits = [float(src.jobs.submit_s[running]), float(src.jobs.submit_s[queued])]
    assert [r.submit_s for r in records] == submits
    slots = [md.import_job(r, 300.0, 600.0) for r in records]
    for t in range(600, 9000, 60):
        src.step(t, 60.0)
        dst.step(t, 60.0)
    d = dst.sched
    assert (d.state[slots] == DONE).all()
    jct_s = d.end_s[slots] - np.array(submits)
    assert d.n_finished == 2 and d.jct_sum_s == pytest.approx(jct_s.sum())
    assert d.n_started == 1 and d.wait_sum_s == pytest.approx(d.first_start_s[slots[1]] - submits[1])
    assert s.n_finished == int(((s.state == DONE) & (src.jobs.submit_s >= 0)).sum())  # the moved ones: not here
    assert s.n_started == int((~np.isnan(s.first_start_s)).sum())  # the running one's wait: here only
    assert not np.isnan(s.first_start_s[running]) and np.isnan(s.first_start_s[queued])
    tails = _tails_and_fairness(d, dst.n_gpus)
    assert tails["jct_p99_h"] == pytest.approx(np.percentile(jct_s, 99) / 3600.0)
    assert tails["wait_p99_h"] == pytest.approx((d.first_start_s[slots[1]] - submits[1]) / 3600.0)
    assert tails["ftf_rho_mean_ratio"] > 0


def test_a_moved_job_keeps_its_checkpoint_interval_and_elastic_flag():
    """The source checkpoints every 600 s and its jobs are elastic; the destination's default is
    3600 s under the elastic policy: the guest checkpoints every 600 s there and may be resized; a
    later guest without an interval (NaN) in the same slot gets the destination's 3600 s, not the
    last guest's (review 2026-12-01: an import took the destination's default and elastic = false)."""
    src, ms = cluster(64, 4, 0, 3, checkpoint_interval_s=600.0, elastic_frac=1.0, warmup_h=0.0, span_s=60.0)
    dst, md = cluster(64, 0, 1, 4, checkpoint_interval_s=3600.0, policy="elastic")
    for t in range(0, 300, 60):
        src.step(t, 60.0)
    rec = ms.export(64, 300.0)
    assert rec.n_gpus >= 8 and rec.ckpt_interval_s == 600.0 and rec.elastic
    slot = md.import_job(rec, 0.0, 300.0)
    assert dst.ckpt_interval_s[slot] == 600.0
    assert dst.ckpt_mean_frac[slot] == pytest.approx(dst.ckpt_duration_s[slot] / 600.0)
    assert dst.ckpt_offset_s[slot] < 600.0
    policy = dst.sched.policy
    assert policy.elastic[slot] and len(policy.sizes(dst.sched, slot)) > 1
    for t in range(300, 7200, 300):  # until it is done and its slot free
        dst.step(t, 300.0)
    assert dst.sched.state[slot] == DONE
    md.import_job(type(rec)(8, 600.0, 0.5, 1), 0.0, 7200.0)  # no interval, not elastic
    assert dst.ckpt_interval_s[slot] == 3600.0 and not policy.elastic[slot]
    assert policy.sizes(dst.sched, slot) == [8]


def test_a_moved_job_whose_interval_cannot_be_used_here_takes_the_default_with_one_warning():
    """An interval not longer than the destination's checkpoint duration cannot be kept (a job
    would do nothing but checkpoint): the slot takes the site's default, and the user is told
    once, naming the entity (review 2026-12-02: it was replaced without a word)."""
    dst, md = cluster(64, 0, 2, 4, checkpoint_interval_s=3600.0)
    md.label = "entities.down"
    duration = float(dst.ckpt_duration_s[0])
    short = type(md.last)(8, 600.0, 0.5, 1, ckpt_interval_s=duration)
    with pytest.warns(UserWarning, match=r"^entities\.down: a moved-in job's checkpoint interval .* takes this "
                                         r"site's default interval \(3600 s\)") as caught:
        slots = [md.import_job(short, 0.0, 0.0), md.import_job(short, 0.0, 0.0)]
    assert len([w for w in caught if "checkpoint interval" in str(w.message)]) == 1  # once per entity
    assert [float(dst.ckpt_interval_s[s]) for s in slots] == [3600.0, 3600.0]


def test_srpt_estimates_a_moved_in_job_from_its_work_not_the_placeholders():
    """Under srpt (exact predictions) a guest of 7200 s is predicted at 7200 s; the placeholder's
    work 0 made it 2 s (used up at once, re-estimated at twice 1 s), so srpt ran every guest first."""
    dst, md = cluster(64, 0, 1, 4, policy="srpt", policy_params={"runtime_noise_sigma_frac": 0.0})
    slot = md.import_job(type(md.last)(8, 7200.0, 0.5, 1), 0.0, 0.0)
    assert dst.sched.policy.predicted_remaining_s(dst.sched, np.array([slot]))[0] == pytest.approx(7200.0)


def test_voltage_variant_moves_training_only_when_the_sites_own_control_and_replica_moves_are_exhausted():
    """OpenG2G's last resort, one level further: no move while the site's control is not
    exhausted; a replica move while one is possible; a training job only when no replica can move."""
    sh = shifter()
    sh.update(0, v(a=0.94), v(), {"a": 0.0}, None, train_obs())  # control not exhausted
    assert sh.n_shifts == 0 and sh.train.idle()
    sh.update(1, v(a=0.94), v(), {"a": 1.0}, None, train_obs())  # replicas can move: they do
    assert sh.n_shifts == 1 and sh.train.idle()
    full = shifter(replicas={"a": 10, "b": 5, "c": 9})  # b and c have no warm spare
    full.update(0, v(a=0.94, b=0.99, c=0.97), v(), {"a": 1.0}, None, train_obs(spare={"b": 32, "c": 32}))
    assert full.n_shifts == 0 and full.train.pending == ("export", "a", "b")  # out, to the highest voltage
    over = shifter(replicas={"a": 8, "b": 10, "c": 10})  # a over-voltage with no spare: pull training in
    over.update(0, v(), v(a=1.06, b=1.0, c=1.02), {"a": 1.0}, None, train_obs(spare={"a": 16}))
    assert over.train.pending == ("export", "b", "a")  # from the lowest vm_max
    none = shifter(replicas={"a": 10, "b": 5, "c": 9})
    none.update(0, v(a=0.94), v(), {"a": 0.0}, None, train_obs())  # not exhausted: nothing at all
    assert none.train.idle() and none.n_shifts == 0


def test_carbon_variant_moves_training_toward_the_lower_carbon_zone_one_at_a_time():
    sh = shifter(ci_gap_g_kwh=100.0, no_grid_sites=SITES)
    ci = {"a": 450.0, "b": 120.0, "c": 300.0}
    sh.update(0, {}, {}, {}, ci, train_obs())  # no voltage connected: no voltage limit
    assert sh.train.pending == ("export", "a", "b")
    sh.update(1, {}, {}, {}, ci, {s: {**o, "n_export_done": 1 if s == "a" else 0, "n_export_gpus": 16 if s == "a" else 0,
                                      "export_work_s": 7200.0, "export_power_frac": 0.5, "n_export_prio": 1,
                                      "export_submit_s": 1234.0, "n_export_started": 1}
                                  for s, o in train_obs().items()})
    assert sh.train.pending == ("import", "a", "b")  # passed on; nothing new while in flight
    out = sh.outputs()
    assert out["import_b_submit_s"] == 1234.0 and out["n_import_started_b"] == 1  # for the statistics
    assert out["n_import_seq_b"] == 1 and out["n_import_gpus_b"] == 16 and out["import_b_work_s"] == 7200.0
    assert out["n_train_moved_in_b"] == 1 and out["n_train_moved_in_a"] == -1
    assert out["train_moved_in_b_gpu_h"] == pytest.approx(32.0) and out["import_b_restart_s"] == 300.0
    small = shifter(ci_gap_g_kwh=200.0, no_grid_sites=SITES)
    small.update(0, {}, {}, {}, {"a": 300.0, "b": 150.0, "c": 200.0}, train_obs())  # gap 150 <= 200
    assert small.train.idle()
    nxt = shifter(ci_gap_g_kwh=100.0, no_grid_sites=SITES)  # the cleanest has no room: the next cleanest past the gap
    nxt.update(0, {}, {}, {}, ci, train_obs(spare={"b": 0}))
    assert nxt.train.pending == ("export", "a", "c")
    volt = shifter(ci_gap_g_kwh=100.0, margin_pu=0.01)  # b connected but within the margin: not safe
    volt.update(0, v(b=0.955), v(), {}, ci, train_obs())
    assert volt.train.pending == ("export", "a", "c")


def test_two_clusters_through_the_controller_move_a_job_and_its_power():
    """The whole loop without an engine (controller outputs reach the clusters one step later, as
    the scenario's time-shifted connections do): a job leaves the dirty site and runs at the clean one."""
    sites = ["dirty", "clean"]
    sh = Shifter(LoadShiftParams(n_gpus_per_replica=1, replicas={"dirty": 0, "clean": 0}, rate_req_s={"dirty": 1.0, "clean": 1.0},
                                 ci_gap_g_kwh=50.0, no_grid_sites=sites, train_restart_s=600.0), sites, training=True)
    cl = {"dirty": cluster(64, 30, 0, 5), "clean": cluster(64, 2, 4, 6)}
    ci = {"dirty": 400.0, "clean": 100.0}
    ctl: dict = {}
    p_train = []
    for k in range(10):
        t = 60.0 * k
        obs = {}
        for s, (c, m) in cl.items():
            m.apply({a.replace(f"_{s}", ""): val for a, val in ctl.items() if f"_{s}" in a}, t)
            out = c.step(t, 60.0)
            obs[s] = m.outputs()
            p_train.append((k, s, out["p_train_mw"]))
        sh.update(t, {}, {}, {}, ci, obs)
        ctl = sh.outputs()
    assert sh.train.n_moves >= 3
    assert cl["clean"][1].n_jobs_moved_in == cl["dirty"][1].n_jobs_moved_out - (sh.train.pending is not None
                                                                                and sh.train.pending[0] == "import")
    gpu_h = sum(n * w for _, _, n, w in sh.train.moves) / 3600.0
    assert cl["dirty"][1].moved_out_gpu_h == pytest.approx(gpu_h)
    df = pd.DataFrame(p_train, columns=["k", "site", "p"]).pivot(index="k", columns="site", values="p")
    assert df["clean"].iloc[-1] > df["clean"].iloc[0]  # the moved jobs draw at the clean site


def test_kpi_block_reports_training_moves_and_carbon_per_site():
    idx = pd.date_range("2024-01-01", periods=2, freq="3600s", tz="UTC")
    ts = pd.DataFrame({"ls.n_shifts": [0, 0], "ls.n_train_moves": [1, 1], "ls.n_moved_in_a": [0, 0],
                       "ls.n_moved_in_b": [0, 0], "ls.ci_a_g_kwh": [400.0, 400.0], "ls.ci_b_g_kwh": [100.0, 50.0],
                       "ls.n_train_moved_in_a": [-1, -1], "ls.n_train_moved_in_b": [1, 1],
                       "ls.train_moved_in_a_gpu_h": [-32.0, -32.0], "ls.train_moved_in_b_gpu_h": [32.0, 32.0],
                       "a.p_mw": [1.0, 0.5], "b.p_mw": [0.2, 0.7], "a.work_gpu_h": [10.0, 20.0],
                       "b.work_gpu_h": [1.0, 5.0], "b.guest_work_gpu_h": [0.0, 4.0]}, index=idx)
    cols = BLOCK.columns(list(ts.columns), None)
    out = BLOCK.compute(KpiInput(ts=ts[cols], dt_h=1.0, step_s=3600, roles=None))["load_shift"]["ls"]
    assert out["n_train_moves"] == 1
    assert out["a"]["carbon_t"] == pytest.approx((1.0 + 0.5) * 400.0 / 1000.0)  # MWh x g/kWh = kg
    assert out["b"]["carbon_t"] == pytest.approx((0.2 * 100.0 + 0.7 * 50.0) / 1000.0)
    assert out["carbon_total_t"] == pytest.approx(0.6 + 0.055)
    assert out["b"]["n_train_moved_in_final"] == 1 and out["a"]["train_moved_in_gpu_h"] == -32.0
    assert out["work_total_gpu_h"] == 25.0 and out["b"]["guest_work_gpu_h"] == 4.0


def test_kpi_totals_are_over_every_site_or_null_with_the_sites_named():
    """carbon_total_t / work_total_gpu_h with one site lacking its figure (no carbon signal, no
    work recorded): null, and the controller's scope names the site (review 2026-12-01: the sum over
    the others was reported as the total); with no site having it, the key is absent."""
    idx = pd.date_range("2024-01-01", periods=2, freq="3600s", tz="UTC")
    ts = pd.DataFrame({"ls.n_shifts": [0, 0], "ls.n_moved_in_a": [0, 0], "ls.n_moved_in_b": [0, 0],
                       "ls.ci_a_g_kwh": [400.0, 400.0], "ls.ci_b_g_kwh": [np.nan, np.nan],
                       "a.p_mw": [1.0, 0.5], "b.p_mw": [0.2, 0.7], "a.work_gpu_h": [10.0, 20.0]}, index=idx)
    cols = BLOCK.columns(list(ts.columns), None)
    out = BLOCK.compute(KpiInput(ts=ts[cols], dt_h=1.0, step_s=3600, roles=None))["load_shift"]["ls"]
    assert out["a"]["carbon_t"] == pytest.approx(0.6) and "carbon_t" not in out["b"]
    assert out["carbon_total_t"] is None and out["work_total_gpu_h"] is None
    assert "carbon_total_t is null: no carbon_t for b" in out["scope"]
    assert "work_total_gpu_h is null: no work_gpu_h for b" in out["scope"]
    bare = ts.drop(columns=["ls.ci_a_g_kwh", "ls.ci_b_g_kwh", "a.work_gpu_h"])
    out = BLOCK.compute(KpiInput(ts=bare[BLOCK.columns(list(bare.columns), None)], dt_h=1.0, step_s=3600,
                                 roles=None))["load_shift"]["ls"]
    assert "carbon_total_t" not in out and "work_total_gpu_h" not in out and "scope" not in out


def test_carbon_variant_without_voltage_needs_the_site_listed_in_no_grid_sites():
    """A site with no vm_min / vm_max connected had no voltage guard in the carbon variant, silently
    (review 2026-12-01): now it must be listed in no_grid_sites, else the first carbon step stops
    the run naming the inputs and the key; a connected site needs no listing."""
    ci = {"a": 450.0, "b": 120.0, "c": 300.0}
    with pytest.raises(ValueError, match=r"vm_min_c_pu / vm_max_c_pu not connected.*no_grid_sites = \['c'\]"):
        shifter(ci_gap_g_kwh=100.0).update(0, {"a": 1.0, "b": 1.0}, {"a": 1.0, "b": 1.0}, {}, ci, train_obs())
    sh = shifter(ci_gap_g_kwh=100.0, no_grid_sites=["c"])
    sh.update(0, {"a": 1.0, "b": 1.0}, {"a": 1.0, "b": 1.0}, {}, ci, train_obs())
    assert sh.n_shifts == 1
    ls = LoadShiftParams(n_gpus_per_replica=1, replicas={"a": 1, "b": 1}, rate_req_s={"a": 1.0, "b": 1.0},
                         no_grid_sites=["a", "z"])
    problems = LoadShiftSim.check_entity("LoadShift", ls, None, LoadShiftSim.SimParams(sites=["a", "b"]))
    assert any(p.startswith("no_grid_sites: ['z'] are not among the sim's sites") for p in problems)
    assert any(p.startswith("warning: no_grid_sites = ['a', 'z'] has no effect") for p in problems)


def test_params_errors_name_the_key():
    with pytest.raises(ValidationError, match="train_restart_s"):
        LoadShiftParams(n_gpus_per_replica=1, replicas={"a": 1}, rate_req_s={"a": 1.0}, train_restart_s=-5.0)
    with pytest.raises(ValidationError, match="n_guest_slots"):
        ClusterParams.model_validate({"training": {"n_guest_slots": -1}})
    with pytest.raises(ValidationError, match="job_moves"):
        DatacenterSim.SimParams(job_moves="yes")
    params = ClusterParams.model_validate({"n_gpus": 64, "training": {"n_jobs": 0, "n_guest_slots": 4}})
    ctx = type("Ctx", (), {"duration_s": 3600.0})()
    problems = DatacenterSim.check_entity("Cluster", params, ctx, DatacenterSim.SimParams())
    assert any("training.n_guest_slots = 4 needs job_moves = true" in p for p in problems)
    ls = LoadShiftParams(n_gpus_per_replica=1, replicas={"a": 1, "b": 1}, rate_req_s={"a": 1.0, "b": 1.0},
                         train_restart_s=60.0)
    problems = LoadShiftSim.check_entity("LoadShift", ls, None, LoadShiftSim.SimParams(sites=["a", "b"]))
    assert any(p.startswith("warning: train_restart_s = 60 has no effect") for p in problems)
    _, m = cluster(64, 0, 1, 7)
    rec = type(m.last)(8, 100.0, 0.5, 1)
    m.import_job(rec, 0.0, 0.0)
    with pytest.raises(RuntimeError, match="no free guest slot"):
        m.import_job(rec, 0.0, 0.0)


def test_a_site_that_can_neither_take_nor_give_a_job_under_job_moves_is_a_validation_error(tmp_path):
    """job_moves = true on a Cluster with no guest slot and no flexible training job moved nothing,
    without a word (review 2026-12-01): the scenario's error names the entity, the key and the fix;
    a site that only gives (flexible jobs, no slot) or only takes stays valid."""
    moves = DatacenterSim.SimParams(job_moves=True)
    ctx = type("Ctx", (), {"duration_s": 3600.0})()

    def problems(training):
        params = ClusterParams.model_validate({"n_gpus": 64, "training": {"sizes_gpus": [8], "size_weights": [1.0],
                                                                           **training}})
        return DatacenterSim.check_entity("Cluster", params, ctx, moves)

    assert any("training.n_guest_slots = 0 with job_moves = true" in p and "training.n_jobs = 0" in p
               for p in problems({"n_jobs": 0}))
    assert any("training.flexible_frac = 0" in p for p in problems({"n_jobs": 5, "flexible_frac": 0.0}))
    assert problems({"n_jobs": 5, "flexible_frac": 0.5}) == [] and problems({"n_jobs": 0, "n_guest_slots": 2}) == []
    text = _ieee34_with_training(tmp_path).read_text().replace("n_jobs = 0, n_guest_slots = 16", "n_jobs = 0")
    bad = tmp_path / "no_slots.toml"
    bad.write_text(text)
    with pytest.raises(cosim.ScenarioError, match=r"no_slots\.toml(.|\n)*entities\.up(.|\n)*n_guest_slots = 0 with job_moves"):
        cosim.validate(bad)


def test_training_moves_with_no_guest_slot_anywhere_stop_the_run_naming_the_key():
    """training = true with every site's n_slots_free 0 at the start: no job can ever move; the
    controller says so at its second observation (the first may be a start value) instead of moving
    nothing without a word; one site with a slot, or enabled = false, is fine."""
    none = train_obs(slots=dict.fromkeys(SITES, 0))
    sh = shifter()
    sh.update(0, v(), v(), {}, None, none)
    with pytest.raises(ValueError, match="no site has a guest slot.*training.n_guest_slots"):
        sh.update(1, v(), v(), {}, None, none)
    ok = shifter()
    for t in range(3):
        ok.update(t, v(), v(), {}, None, train_obs(slots={"a": 0, "b": 0}))  # c has slots
    assert ok.train._n_slot_obs == 2  # judged on its second observation, and passed
    off = shifter(enabled=False)
    for t in range(3):
        off.update(t, v(), v(), {}, None, none)
    assert off.train._n_slot_obs == 0 and off.train.obs["a"]["n_slots_free"] == 0  # observed, never judged


def test_run_time_errors_name_the_controller_entity():
    """With two LoadShift controllers a user must know which one to fix (review 2026-12-02): both
    run-time errors (no guest slot anywhere; a carbon-variant site without voltage) start with
    ``entities.<id>``, the label the adapter gives each entity."""
    sim = LoadShiftSim()
    sim.params = LoadShiftSim.SimParams(sites=SITES, training=True)
    params = LoadShiftParams(n_gpus_per_replica=4, replicas=dict.fromkeys(SITES, 10), rate_req_s=dict.fromkeys(SITES, 1.0),
                             ci_gap_g_kwh=100.0)
    none = train_obs(slots=dict.fromkeys(SITES, 0))
    sh = sim.build("shift_east", params)
    sh.update(0, v(), v(), {}, None, none)
    with pytest.raises(ValueError, match=r"^entities\.shift_east \(LoadShift\), training = true: no site has a guest slot"):
        sh.update(1, v(), v(), {}, None, none)
    sh = sim.build("shift_west", params)
    with pytest.raises(ValueError, match=r"^entities\.shift_west \(LoadShift\): vm_min_c_pu / vm_max_c_pu not connected"):
        sh.update(0, {"a": 1.0, "b": 1.0}, {"a": 1.0, "b": 1.0}, {}, {"a": 450.0, "b": 120.0, "c": 300.0}, train_obs())


def test_catalogue_scenario_moves_toward_the_cleaner_zones(tmp_path):
    """scenarios/multisite_carbon.toml, its first hour: ERCOT (424 g/kWh) only gives jobs, and
    every job lands at a cleaner zone (CAISO 208, Germany 273 at 00 UTC)."""
    r = cosim.run(ROOT / "scenarios" / "multisite_carbon.toml", out_dir=tmp_path,
                  overrides={"scenario.duration_s": 3600, "scenario.engine": "direct"})
    assert r.ok, r.reason
    last = r.timeseries().iloc[-1]
    assert last["shift.n_train_moves"] >= 3 and last["texas.n_jobs_moved_out"] == last["shift.n_train_moves"]
    assert last["texas.n_jobs_moved_in"] == 0 and last["shift.n_shifts"] >= 1
    assert last["west.n_jobs_moved_in"] + last["de.n_jobs_moved_in"] >= last["shift.n_train_moves"] - 1
    assert math.isclose(last["shift.n_active_texas"] + last["shift.n_active_west"] + last["shift.n_active_de"], 36)


def channel(site: str) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """The training-move channel of one site from the modules' own tuples: (Cluster output, controller
    input) pairs and (Cluster input, controller output) pairs; every name on one side has its pair."""
    ins = [(a.replace("_{site}", ""), a.format(site=site)) for a in TRAIN_INPUTS]
    outs = [(a.replace("_{site}", ""), a.format(site=site)) for a in TRAIN_OUTPUTS
            if a.replace("_{site}", "") in MOVE_INPUTS]
    assert {a for a, _ in ins} <= set(MOVE_OUTPUTS)  # every controller input is a Cluster output
    assert sorted(a for a, _ in outs) == sorted(MOVE_INPUTS)  # every Cluster input is fed
    return ins, outs


def test_the_catalogue_scenario_connects_the_whole_training_channel():
    """scenarios/multisite_carbon.toml connects every attribute of the channel at every site (a new
    record field, such as the submission time, left unconnected would be NaN: not counted)."""
    scn = tomllib.loads((ROOT / "scenarios" / "multisite_carbon.toml").read_text())
    pairs = {(c["src"], c["dst"], tuple(p)) for c in scn["connect"] for p in c["attrs"] if isinstance(p, list)}
    for site in scn["sims"]["shift"]["sites"]:
        ins, outs = channel(site)
        assert not [p for p in ins if (site, "shift", p) not in pairs]
        assert not [p for p in outs if ("shift", site, p[::-1]) not in pairs]


def _ieee34_with_training(tmp_path: Path) -> Path:
    """scenarios/ieee34_multisite.toml with 256 H100 of flexible training at each site (jobs at 840's
    `down`, no queue, so a job moved out lowers its load; guest slots at `up`, moved to 802 near
    the source, where it has voltage room for them) and the training channel connected."""
    text = (ROOT / "scenarios" / "ieee34_multisite.toml").read_text()
    text = text.replace('[sims.dc]\nadapter = "datacenter"\n', '[sims.dc]\nadapter = "datacenter"\njob_moves = true\n')
    text = text.replace('sites = ["up", "down"]\n', 'sites = ["up", "down"]\ntraining = true\n')
    up = 'n_gpus = 256\ntraining = { n_jobs = 0, n_guest_slots = 16 }'
    down = ('n_gpus = 256\ntraining = { n_jobs = 15, sizes_gpus = [8, 16, 32], size_weights = [0.4, 0.4, 0.2], '
            'class_fracs = [0.0, 1.0, 0.0], flexible_frac = 1.0, warmup_h = 6.0 }')
    old = 'n_gpus = 0\ntraining = { n_jobs = 0 }'
    assert text.count(old) == 2
    text = text.replace(old, up, 1).replace(old, down, 1)
    assert text.count('bus = "850"') == 1
    text = text.replace('bus = "850"', 'bus = "802"')
    head, record = text.split("[record]")
    for s in ("up", "down"):
        ins, outs = channel(s)
        pairs = ", ".join(f'["{a}", "{b}"]' for a, b in ins)
        head += f'[[connect]]\nsrc = "{s}"\ndst = "shift"\nattrs = [{pairs}]\n\n'
        pairs = ", ".join(f'["{b}", "{a}"]' for a, b in outs)
        init = ", ".join(f"{b} = 0" for _, b in outs)
        head += (f'[[connect]]\nsrc = "shift"\ndst = "{s}"\nattrs = [{pairs}]\ntime_shifted = true\n'
                 f'initial_data = {{ {init} }}\n\n')
    path = tmp_path / "ieee34_training.toml"
    path.write_text(head + '[record]\ninclude = ["*"]\n')
    return path


def test_ieee34_voltage_variant_moves_training_out_only_once_the_sites_rule_is_exhausted(tmp_path):
    """Closed loop on IEEE 34 (OpenDSS, 1 s): no replica may leave 840 (n_active_min = its active
    replicas), so once its rule is at batch 8 and 840 is still under 0.95 pu, flexible training
    jobs move out, to `up`, one every two steps, until none is left; none before the rule is
    exhausted. (840 rises by ~5 mpu: 0.944 -> 0.949 pu as 40 kW of training leaves.)"""
    r = cosim.run(_ieee34_with_training(tmp_path), out_dir=tmp_path / "run",
                  overrides={"scenario.duration_s": 90, "scenario.engine": "direct",
                             "entities.shift.n_active_min": 130})
    assert r.ok, r.reason
    ts = r.timeseries()
    asked = ts.index[ts["shift.n_export_req_down"] > 0]
    exhausted = ts.index[ts["rule_down.exhausted_frac"] >= 0.5]
    assert len(asked) and len(exhausted) and asked[0] >= exhausted[0]
    assert ts.loc[asked[0], "pcc_down.vm_phase_min_pu"] < 0.95  # asked while 840 was violated
    last = ts.iloc[-1]
    assert last["shift.n_shifts"] == 0 and last["shift.n_train_moves"] >= 3
    assert last["shift.n_train_moves"] == ts["down.n_jobs_flex"].iloc[0] and last["down.n_jobs_flex"] == 0  # all of them
    assert last["down.n_jobs_moved_out"] == last["shift.n_train_moves"] and last["up.n_jobs_moved_out"] == 0
    assert last["up.n_jobs_moved_in"] >= last["shift.n_train_moves"] - 1
    assert last["down.p_train_mw"] < ts["down.p_train_mw"].iloc[0] and last["up.p_train_mw"] > ts["up.p_train_mw"].iloc[0]
    assert last["down.moved_out_gpu_h"] == pytest.approx(-last["shift.train_moved_in_down_gpu_h"])
