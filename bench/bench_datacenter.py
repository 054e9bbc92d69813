"""Benchmark the datacenter simulator: a week at 1-minute steps of a 10,000-GPU cluster.

8,000 training GPUs (DGX H100) with 4,000 synthetic jobs plus an inference fleet of 2,000
GPUs (500 Llama 3.1 70B replicas on 4 H100s each, Azure chat arrivals), run

* standalone: :class:`~adapters.datacenter.cluster.GpuCluster` stepped in a loop;
* inside mosaik: a scenario with the datacenter and the recorder, through
  :func:`cosim.run.run_scenario` (``--skip-mosaik`` leaves it out).

Run by hand (never in the tests)::

    .venv/bin/python bench/bench_datacenter.py [--days 7] [--skip-mosaik]

Prints wall time (and CPU time: the machine may be shared), steps/s and peak RSS only.
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

from cosim.adapters.datacenter import ClusterParams, build_cluster  # noqa: E402
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=float, default=7.0)
    parser.add_argument("--skip-mosaik", action="store_true")
    args = parser.parse_args()
    standalone(args.days)
    if not args.skip_mosaik:
        in_mosaik(args.days)


if __name__ == "__main__":
    main()
