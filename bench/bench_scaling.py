"""How the cost of a run grows with its work: time and peak memory per simulated step.

Run:  .venv/bin/python bench/bench_scaling.py [--quick]

Three axes, each case a fresh process on the direct engine (so its peak RSS is its own), on a
scenario this script writes: GPU campuses (DGX-H100 clusters, synthetic training and inference)
each behind a Load at its own bus of a grid, plus the grid's Grid entity, recording by default:

* duration: one campus on IEEE 33 at 1 min, 1 day, 1 week and 1 month (``--quick``: 1 and 3 days);
* buses: one campus for a day at 15 min on IEEE 33 (pandapower) and on the IEEE 8500-node
  feeder (OpenDSS, 4,876 buses);
* campuses: 1, 2, 5 and 10 campuses on IEEE 33 for a day at 1 min (``--quick``: 1 and 3).

Per case: set-up (validation, building every simulator) [s], stepping time per simulated step
[ms] (the whole stepping loop with the recorder, divided by the steps), closing (KPIs, run
folder) [s] and the process's peak RSS [MiB]. Per axis it says where the cost per step stops
growing in proportion to the work: on the duration axis the work per step is constant, so the
time per step should be; on the others the time per step per unit of work (per campus, per
bus) should not rise. A point is called super-linear when that ratio rises by more than 25 %
over the axis's first point. Prints figures; asserts nothing. Default run ~2-3 min on a quiet
2-core machine.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

#: Buses of IEEE 33 the campuses sit at, in order.
BUSES_33 = ["18", "22", "25", "33", "10", "15", "29", "6", "13", "30"]
#: A primary bus of the IEEE 8500-node feeder.
BUS_8500 = "m1166366"
#: Buses in each network (the work of the buses axis).
N_BUSES = {"ieee33": 33, "ieee8500": 4876}
DAY_S = 86_400
#: A campus's load on the feeder (a few MW, so the small feeder still solves). [GPUs]
N_GPUS = 256


def scenario_toml(network: str, n_campuses: int, duration_s: int, step_s: int) -> str:
    buses = [BUS_8500] if network == "ieee8500" else BUSES_33[:n_campuses]
    parts = [f"""[scenario]
name = "scaling"
start = 2024-07-15T00:00:00Z
duration_s = {duration_s}
step_s = {step_s}
seed = 1
engine = "direct"

[sims.dc]
adapter = "datacenter"

[sims.grid]
adapter = "grid"
network = "{network}"
{'engine = "opendss"' if network == "ieee8500" else ""}

[entities.feeder]
sim = "grid"
model = "Grid"
"""]
    for k, bus in enumerate(buses):
        parts.append(f"""
[entities.campus{k}]
sim = "dc"
model = "Cluster"
node = "DGX-H100"
n_gpus = {N_GPUS}
training = {{ source = "synthetic", n_jobs = 40, sizes_gpus = [8, 16, 32], size_weights = [0.5, 0.3, 0.2], duration_median_h = 3.0 }}
inference = [{{ name = "chat", model = "llama-3.1-70b", replicas = 16, rate_req_s = 50.0, diurnal_amp_frac = 0.5 }}]

[entities.pcc{k}]
sim = "grid"
model = "Load"
bus = "{bus}"

[[connect]]
src = "campus{k}"
dst = "pcc{k}"
attrs = ["p_mw", "q_mvar"]
""")
    return "".join(parts)


def one_case(spec: dict) -> dict:
    """Run one case in this process; its figures."""
    from cosim import Session
    from cosim.run.graph import recorded_columns

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "scaling.toml"
        path.write_text(scenario_toml(spec["network"], spec["n_campuses"], spec["duration_s"], spec["step_s"]))
        t0 = time.perf_counter()
        session = Session(path, out_dir=Path(tmp) / "runs", report=False)
        t1 = time.perf_counter()
        session.run_until(spec["duration_s"])
        t2 = time.perf_counter()
        result = session.close()
        t3 = time.perf_counter()
        n_steps = spec["duration_s"] // spec["step_s"]
        return {"ok": bool(result and result.ok), "n_steps": n_steps, "setup_s": t1 - t0,
                "step_ms": (t2 - t1) / n_steps * 1e3, "close_s": t3 - t2,
                "n_columns": len(recorded_columns(session.scn)),
                "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def run_case(spec: dict) -> dict:
    out = subprocess.run([sys.executable, __file__, "--case", json.dumps(spec)], capture_output=True, text=True,
                         cwd=ROOT)
    if out.returncode:
        raise SystemExit(f"case {spec} failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def axis(title: str, unit: str, cases: list[tuple[float, str, dict]]) -> None:
    """Run the cases of one axis (work, label, spec), print a table and where growth stops being linear."""
    print(f"\n{title}")
    print(f"  {'case':<24} {'steps':>7} {'cols':>5} {'setup s':>8} {'ms/step':>8} {'ms/step/' + unit:>13} "
          f"{'close s':>8} {'peak MiB':>9}")
    base, verdict = None, None
    for work, label, spec in cases:
        r = run_case(spec)
        per_work = r["step_ms"] / work
        base = base if base is not None else per_work
        ratio = per_work / base
        print(f"  {label:<24} {r['n_steps']:>7} {r['n_columns']:>5} {r['setup_s']:>8.2f} {r['step_ms']:>8.3f} "
              f"{per_work:>13.4f} {r['close_s']:>8.2f} {r['rss_mib']:>9.0f}" + ("" if r["ok"] else "  (run not ok)"))
        if verdict is None and ratio > 1.25:
            verdict = f"super-linear from {label}: {ratio:.2f}x the first point's time per step per {unit}"
    print("  " + (verdict or f"linear over the axis (time per step per {unit} within 25 % of the first point)"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer and shorter cases (~30 s)")
    parser.add_argument("--case", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case:
        print(json.dumps(one_case(json.loads(args.case))))
        return
    quick = args.quick
    print(f"bench_scaling{' --quick' if quick else ''}: direct engine, fresh process per case; "
          f"{time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}, load {os.getloadavg()[0]:.2f}")
    days = [1, 3] if quick else [1, 7, 30]
    axis("duration (1 campus, IEEE 33, 1 min steps; work per step constant)", "step",
         [(1.0, f"{d} day(s)", {"network": "ieee33", "n_campuses": 1, "duration_s": d * DAY_S, "step_s": 60})
          for d in days])
    bus_day = DAY_S // 8 if quick else DAY_S
    axis("buses (1 campus, 15 min steps)", "bus",
         [(float(N_BUSES[n]), f"{n} ({N_BUSES[n]} buses)",
           {"network": n, "n_campuses": 1, "duration_s": bus_day, "step_s": 900}) for n in ("ieee33", "ieee8500")])
    counts = [1, 3] if quick else [1, 2, 5, 10]
    axis("campuses (IEEE 33, 1 day at 1 min)", "campus",
         [(float(n), f"{n} campus(es)", {"network": "ieee33", "n_campuses": n, "duration_s": DAY_S, "step_s": 60})
          for n in counts])


if __name__ == "__main__":
    main()
