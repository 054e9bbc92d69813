"""Benchmark the datacenter simulator: a week at 1-minute steps of a 10,000-GPU cluster.

8,000 training GPUs (DGX H100) with 4,000 synthetic jobs plus an inference fleet of 2,000
GPUs (500 Llama 3.1 70B replicas on 4 H100s each, Azure chat arrivals), run

* standalone: :class:`~adapters.datacenter.cluster.GpuCluster` stepped in a loop;
* inside mosaik: a scenario with the datacenter and the recorder, through
  :func:`cosim.run.run_scenario` (``--skip-mosaik`` leaves it out).

Run by hand (never in the tests)::

    .venv/bin/python bench/bench_datacenter.py [--days 7] [--skip-mosaik]

Prints wall time (and CPU time: the machine may be shared), steps/s and peak RSS only.

``--scenario scenarios/rl_site.toml`` steps that scenario's first ``Cluster`` entity alone instead, over the
scenario's horizon at its step (``--pause-every 3``: a new random ``pause_flexible_frac`` every 3 steps, as
the gym's random actions on ``rl_site.toml``), twice per repeat, interleaved: with the C parts of
:mod:`adapters.datacenter.kernels` (the training step), :mod:`adapters.datacenter.scheduler_kernel` (the scheduling
pass, the pause knob, the per-state views) and :mod:`adapters.datacenter.inference_kernel` (the fleets' step, ``ServeFleets``) and with the Python/numpy
path for all three (the same outputs, checked to the bit), printing the
CPU time per cluster step of each. ``--callgrind`` (under ``valgrind --tool=callgrind --instr-atstart=no``)
counts the instructions of one pass (the C part's, or numpy's with ``--numpy``) instead::

    .venv/bin/python bench/bench_datacenter.py --scenario scenarios/default.toml --repeats 5
    valgrind --tool=callgrind --instr-atstart=no .venv/bin/python bench/bench_datacenter.py \
        --scenario scenarios/rl_site.toml --pause-every 3 --callgrind

``--phases`` (with ``--scenario``) times each phase of a cluster step instead (a timer around each of
:data:`PHASES`, nested ones inside their callers' figures; the timers' own cost, ~0.3 us each, included),
printing the wall time per step of each, over ``--repeats`` passes: where a step goes::

    .venv/bin/python bench/bench_datacenter.py --scenario scenarios/rl_site.toml --pause-every 3 --phases
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cosim.adapters.datacenter import ClusterParams, build_cluster, scheduler_kernel  # noqa: E402
from cosim.adapters.datacenter.cluster import Knobs  # noqa: E402

CLUSTER = {
    "node": "DGX-H100", "n_gpus": 8000,
    "training": {"source": "synthetic", "n_jobs": 4000, "duration_median_h": 4.0},
    "inference": [{"name": "chat", "model": "llama-3.1-70b", "replicas": 500, "rate_req_s": 6000.0,
                   "arrivals": "azure_conv"}],
}

SCENARIO = """
[scenario]
name = "bench_datacenter"
start = 2024-07-15T00:00:00Z
duration_s = {duration_s}
step_s = 60
seed = 1

[sims.dc]
adapter = "datacenter"

[entities.campus]
sim = "dc"
model = "Cluster"
node = "DGX-H100"
n_gpus = 8000
training = {{ source = "synthetic", n_jobs = 4000, duration_median_h = 4.0 }}
inference = [{{ name = "chat", model = "llama-3.1-70b", replicas = 500, rate_req_s = 6000.0 }}]

[record]
include = ["*"]
"""


def peak_rss_mib() -> float:
    """Peak resident set size of this process so far. [MiB]"""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def standalone(days: float) -> None:
    steps = int(days * 1440)
    params = ClusterParams.model_validate(CLUSTER)
    t0 = time.perf_counter()
    cluster = build_cluster(params, np.random.default_rng(1), steps * 60.0)
    built = time.perf_counter() - t0
    knobs = Knobs()
    t0, cpu0 = time.perf_counter(), time.process_time()
    energy_mwh = 0.0
    for k in range(steps):
        out = cluster.step(k * 60, 60, knobs)
        energy_mwh += out["p_mw"] / 60.0
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    print(f"standalone: {steps} steps, {len(cluster.jobs)} jobs ({out['n_jobs_done']} done), "
          f"{cluster.n_gpus + sum(f.fleet.n_gpus for f in cluster.fleets)} GPUs")
    print(f"  build {built:.2f} s, wall {wall:.2f} s (CPU {cpu:.2f} s), {steps / wall:,.0f} steps/s, "
          f"peak RSS {peak_rss_mib():.0f} MiB, energy {energy_mwh:,.0f} MWh")


def in_mosaik(days: float) -> None:
    from cosim.run import run_scenario
    from cosim.scenario import load_scenario

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench_datacenter.toml"
        path.write_text(SCENARIO.format(duration_s=int(days * 86400)))
        scn = load_scenario(path)
        t0 = time.perf_counter()
        result = run_scenario(scn, Path(tmp) / "runs", progress=False)
        wall = time.perf_counter() - t0
        meta = result.metadata if hasattr(result, "metadata") else {}
        steps = int(days * 1440)
        print(f"mosaik: status {result.status}, {steps} steps, wall {wall:.2f} s "
              f"(run {meta.get('wall_s', float('nan'))} s), {steps / wall:,.0f} steps/s, "
              f"peak RSS {peak_rss_mib():.0f} MiB")


def scenario_cluster(path: Path, pause_every: int, seed: int = 11):
    """``(cluster, knobs per step, step [s])``: the first Cluster entity of scenario ``path``, built as the
    datacenter adapter builds it (another seed), and the knobs of each step of the horizon."""
    import tomllib

    from cosim.adapters.datacenter import cluster as cluster_module

    scenario = tomllib.loads(path.read_text())
    entity = next(e for e in scenario["entities"].values() if e.get("model") == "Cluster")
    params = ClusterParams.model_validate({k: v for k, v in entity.items() if k not in ("sim", "model")})
    head = scenario["scenario"]
    step_s, duration_s = float(head["step_s"]), float(head["duration_s"])
    start = head["start"]
    cluster = cluster_module_build(params, seed, duration_s, start.hour + start.minute / 60)
    rng, knobs = np.random.default_rng(3), []
    plain = Knobs(p_cap_w=params.p_cap_w, p_limit_mw=params.p_limit_mw)
    for k in range(int(duration_s // step_s)):
        if pause_every and k % pause_every == 0:
            plain = Knobs(p_cap_w=params.p_cap_w, p_limit_mw=params.p_limit_mw,
                          pause_flexible_frac=float(rng.random()))
        knobs.append(plain)
    for k in {id(k): k for k in knobs}.values():
        cluster._check_knobs(k)
    return cluster, knobs, step_s, cluster_module


def cluster_module_build(params, seed, duration_s, hour):
    return build_cluster(params, np.random.default_rng(seed), duration_s, hour)


def _pass(cluster, knobs, step_s, cluster_module, numpy: bool):
    """``(outputs, CPU seconds)`` of one pass over the horizon (``numpy``: the C parts of the training step, of the
    scheduler (:mod:`~adapters.datacenter.scheduler_kernel`) and of the fleets' step switched off; the fleets' queues
    stay in C either way)."""
    kept = cluster_module.KERNELS, cluster_module.SERVE_FLEETS, scheduler_kernel.C_PASS
    if numpy:
        cluster_module.KERNELS, cluster_module.SERVE_FLEETS, scheduler_kernel.C_PASS = None, False, False
    try:
        outs, cpu0 = [], time.process_time()
        for k, knob in enumerate(knobs):
            outs.append(cluster.step(k * step_s, step_s, knob, check=False))
        return outs, time.process_time() - cpu0
    finally:
        cluster_module.KERNELS, cluster_module.SERVE_FLEETS, scheduler_kernel.C_PASS = kept


def scenario_ab(path: Path, pause_every: int, repeats: int) -> None:
    import copy
    import os

    cluster, knobs, step_s, cluster_module = scenario_cluster(path, pause_every)
    if cluster_module.KERNELS is None:
        raise SystemExit("adapters/datacenter/_kernels.so is not built or not used (make build)")
    per_step = {"C": [], "numpy": []}
    for r in range(repeats):
        outs = {}
        for name in (("C", "numpy") if r % 2 == 0 else ("numpy", "C")):
            outs[name], cpu = _pass(copy.deepcopy(cluster), knobs, step_s, cluster_module, name == "numpy")
            per_step[name].append(cpu / len(knobs) * 1e6)
        same = all(a.keys() == b.keys() and all(np.float64(a[k]).view(np.uint64) == np.float64(b[k]).view(np.uint64)
                                                for k in a) for a, b in zip(outs["C"], outs["numpy"]))
        if not same:
            raise SystemExit("the C part and numpy's path gave different outputs")
    print(f"{path.name}: {len(knobs)} cluster steps of {step_s:g} s x {repeats}, outputs identical; CPU per step: "
          + ", ".join(f"{n} {min(v):.1f}-{max(v):.1f} us" for n, v in per_step.items())
          + f"; load {os.getloadavg()[0]:.2f}")


#: The methods ``--phases`` times: (owner, method, label), the cluster's step and its parts, then the scheduler's.
PHASES = (
    [("GpuCluster", m, m) for m in ("step", "_release_limit_paused", "_pause_flexible", "_serve", "_class_caps",
                                     "_advance", "_release_finished", "_add_sums", "_outputs", "_training_outputs")]
    + [("Scheduler", m, f"scheduler.{m}") for m in ("admit", "schedule", "start", "release", "running", "account",
                                                     "count_lists", "waiting_gpus")]
    + [("TrainStep", m, f"kernel.{m}") for m in ("configure", "step")])


def scenario_phases(path: Path, pause_every: int, repeats: int) -> None:
    """Wall time per cluster step of each of :data:`PHASES`, over ``repeats`` passes of a fresh copy each."""
    import collections
    import copy
    import os

    from cosim.adapters.datacenter import kernels, scheduler

    cluster, knobs, step_s, cluster_module = scenario_cluster(path, pause_every)
    owners = {"GpuCluster": cluster_module.GpuCluster, "Scheduler": scheduler.Scheduler,
              "TrainStep": kernels.TrainStep}
    spent: dict[str, list[float]] = collections.defaultdict(list)
    originals = []
    clock = time.perf_counter
    for owner_name, method, label in PHASES:
        owner = owners[owner_name]
        original = getattr(owner, method)
        originals.append((owner, method, original))

        def timed(*args, _original=original, _label=label, **kwargs):
            started = clock()
            try:
                return _original(*args, **kwargs)
            finally:
                totals[_label] += clock() - started
                calls[_label] += 1

        setattr(owner, method, timed)
    try:
        for _ in range(repeats):
            totals: collections.Counter = collections.Counter()
            calls: collections.Counter = collections.Counter()
            _pass(copy.deepcopy(cluster), knobs, step_s, cluster_module, numpy=False)
            for label, seconds in totals.items():
                spent[label].append(seconds / len(knobs) * 1e6)
    finally:
        for owner, method, original in originals:
            setattr(owner, method, original)
    print(f"{path.name}: {len(knobs)} cluster steps of {step_s:g} s x {repeats}"
          + (f", a random pause_flexible_frac every {pause_every}" if pause_every else "")
          + f"; wall us per step (calls per step), load {os.getloadavg()[0]:.2f}:")
    for label in sorted(spent, key=lambda k: -max(spent[k])):
        low, high = min(spent[label]), max(spent[label])
        print(f"  {label:28s} {low:7.1f}-{high:.1f} us  ({calls[label] / len(knobs):.2f})")


def scenario_callgrind(path: Path, pause_every: int, numpy: bool) -> None:
    import os
    import subprocess

    cluster, knobs, step_s, cluster_module = scenario_cluster(path, pause_every)
    subprocess.run(["callgrind_control", "-i", "on", str(os.getpid())], capture_output=True)
    _pass(cluster, knobs, step_s, cluster_module, numpy)
    subprocess.run(["callgrind_control", "-i", "off", str(os.getpid())], capture_output=True)
    print(f"{path.name}: {len(knobs)} cluster steps ({'numpy' if numpy else 'C part'}); valgrind's I refs / "
          f"{len(knobs)} = instructions per step")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=float, default=7.0)
    parser.add_argument("--skip-mosaik", action="store_true")
    parser.add_argument("--scenario", type=Path, help="step this scenario's first Cluster alone (see above)")
    parser.add_argument("--pause-every", type=int, default=0, help="a random pause_flexible_frac every N steps")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--callgrind", action="store_true")
    parser.add_argument("--numpy", action="store_true", help="with --callgrind: numpy's path")
    parser.add_argument("--phases", action="store_true", help="with --scenario: where a cluster step goes")
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error(f"--repeats {args.repeats}: give at least 1 pass")
    if (args.phases or args.callgrind) and args.scenario is None:
        parser.error("--phases and --callgrind step a scenario's cluster: give --scenario, e.g. scenarios/rl_site.toml")
    if args.scenario is not None:
        if args.phases:
            scenario_phases(args.scenario, args.pause_every, args.repeats)
        elif args.callgrind:
            scenario_callgrind(args.scenario, args.pause_every, args.numpy)
        else:
            scenario_ab(args.scenario, args.pause_every, args.repeats)
        return
    standalone(args.days)
    if not args.skip_mosaik:
        in_mosaik(args.days)


if __name__ == "__main__":
    main()
