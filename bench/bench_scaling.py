"""How the cost of a run grows with its work: time and peak memory per simulated step.

Run:  .venv/bin/python bench/bench_scaling.py [--quick] [--plot FILE.png] [--axes duration,buses,gpus,campuses]

Four axes, each case a fresh process on the direct engine (so its peak RSS is its own), on a
scenario this script writes: GPU campuses (DGX-H100 clusters, synthetic training and inference)
each behind a Load at its own bus of a grid, plus the grid's Grid entity, recording by default:

* duration: one campus on IEEE 33 at 1 min, 1 day, 1 week and 1 month (``--quick``: 1 and 3 days);
* buses: one campus for a day at 15 min on IEEE 33 (pandapower) and on the IEEE 8500-node
  feeder (OpenDSS, 4,876 buses);
* GPUs: one campus alone (no grid: a campus of a million GPUs draws more than any feeder here
  carries) for a day at 15 min, of 1,024, 16,384, 131,072 and 1,048,576 GPUs, its training jobs,
  inference replicas and request rate in proportion (``--quick``: the first two);
* campuses: 1, 2, 5, 10, 20, 50 and 100 campuses of 32 GPUs on IEEE 33 for a day at 1 min, ten
  buses in turn (``--quick``: 1 and 3).

Per case: set-up (validation, building every simulator) [s], stepping time per simulated step
[ms] (the whole stepping loop with the recorder, divided by the steps), closing (KPIs, run
folder) [s] and the process's peak RSS [MiB]. Per axis it says where the cost per step stops
growing in proportion to the work: on the duration axis the work per step is constant, so the
time per step should be; on the others the time per step per unit of work (per campus, per
bus, per GPU) should not rise. A point is called super-linear when that ratio rises by more than 25 %
over the lowest of the points before it (a fixed cost per step makes the first points dear per unit
of work; the lowest is what the work alone costs). ``--plot`` draws time per step and peak RSS against each axis's
work on log axes (docs/figures/scaling.png is made so). Prints figures; asserts nothing. Default
run ~5-8 min on a quiet 2-core machine.
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
#: GPUs of each campus on the campuses axis (100 of them on IEEE 33 still solve). [GPUs]
N_GPUS_MANY = 32
#: Campus sizes of the GPUs axis. [GPUs]
GPU_COUNTS = [1_024, 16_384, 131_072, 1_048_576]
#: Campus counts of the campuses axis. [-]
CAMPUS_COUNTS = [1, 2, 5, 10, 20, 50, 100]


def scenario_toml(network: str | None, n_campuses: int, duration_s: int, step_s: int, n_gpus: int = N_GPUS) -> str:
    """A scenario of ``n_campuses`` campuses of ``n_gpus`` GPUs on ``network`` (None: no grid); the
    synthetic work (jobs, inference replicas, request rate) in proportion to ``n_gpus``."""
    buses = [BUS_8500] if network == "ieee8500" else [BUSES_33[k % len(BUSES_33)] for k in range(n_campuses)]
    parts = [f"""[scenario]
name = "scaling"
start = 2024-07-15T00:00:00Z
duration_s = {duration_s}
step_s = {step_s}
seed = 1
engine = "direct"

[sims.dc]
adapter = "datacenter"
"""]
    if network is not None:
        parts.append(f"""
[sims.grid]
adapter = "grid"
network = "{network}"
{'engine = "opendss"' if network == "ieee8500" else ""}

[entities.feeder]
sim = "grid"
model = "Grid"
""")
    scale = n_gpus / N_GPUS
    for k, bus in enumerate(buses):
        parts.append(f"""
[entities.campus{k}]
sim = "dc"
model = "Cluster"
node = "DGX-H100"
n_gpus = {n_gpus}
training = {{ source = "synthetic", n_jobs = {max(1, round(40 * scale))}, sizes_gpus = [8, 16, 32], size_weights = [0.5, 0.3, 0.2], duration_median_h = 3.0 }}
inference = [{{ name = "chat", model = "llama-3.1-70b", replicas = {max(1, round(16 * scale))}, rate_req_s = {50.0 * scale}, diurnal_amp_frac = 0.5 }}]
""")
        if network is not None:
            parts.append(f"""
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
        path.write_text(scenario_toml(spec["network"], spec["n_campuses"], spec["duration_s"], spec["step_s"],
                                      spec.get("n_gpus", N_GPUS)))
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


def axis(title: str, unit: str, cases: list[tuple[float, str, dict]]) -> list[tuple[float, dict]]:
    """Run the cases of one axis (work, label, spec), print a table and where growth stops being linear;
    the work and figures of each case."""
    print(f"\n{title}")
    print(f"  {'case':<24} {'steps':>7} {'cols':>5} {'setup s':>8} {'ms/step':>8} {'per ' + unit + ' [ms]':>16} "
          f"{'vs first':>8} {'vs best':>8} {'close s':>8} {'peak MiB':>9}")
    first, best, verdict, points = None, None, None, []
    for work, label, spec in cases:
        r = run_case(spec)
        points.append((work, r))
        per_work = r["step_ms"] / work
        first = first if first is not None else per_work
        ratio = per_work / (best if best is not None else per_work)
        print(f"  {label:<24} {r['n_steps']:>7} {r['n_columns']:>5} {r['setup_s']:>8.2f} {r['step_ms']:>8.3f} "
              f"{per_work:>16.4f} {per_work / first:>7.2f}x {ratio:>7.2f}x {r['close_s']:>8.2f} {r['rss_mib']:>9.0f}"
              + ("" if r["ok"] else "  (run not ok)"))
        if verdict is None and ratio > 1.25:
            verdict = (f"super-linear from {label}: {ratio:.2f}x the lowest time per step per {unit} of the points "
                       "before it")
        best = per_work if best is None else min(best, per_work)
    print("  " + (verdict or f"no worse than linear over the axis (time per step per {unit} at most 1.25x the lowest "
                             "of the points before each; below 1x: a fixed cost per step is shared by more work)"),
          flush=True)
    return points


def plot(path: Path, results: dict[str, tuple[str, list[tuple[float, dict]]]], stamp: str) -> None:
    """Time per step (top row) and peak RSS (bottom row) against each axis's work, log axes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import LogLocator, ScalarFormatter

    fig, panels = plt.subplots(2, len(results), figsize=(3.6 * len(results), 6.0), squeeze=False)
    for col, (name, (xlabel, points)) in enumerate(results.items()):
        work = [w for w, _ in points]
        for row, (key, label, style) in enumerate([("step_ms", "time per step [ms]", "o-"),
                                                    ("rss_mib", "peak RSS [MiB]", "s-")]):
            ax = panels[row][col]
            values = [r[key] for _, r in points]
            ax.loglog(work, values, style, color="tab:blue" if row == 0 else "tab:red")
            ax.set_ylim(min(values) / 2, max(values) * 2)  # at least a decade: a flat line looks flat
            ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
            ax.yaxis.set_major_formatter(ScalarFormatter())
            ax.yaxis.set_minor_formatter(plt.NullFormatter())
            ax.xaxis.set_major_formatter(ScalarFormatter())
            ax.grid(True, which="both", alpha=0.3)
            if col == 0:
                ax.set_ylabel(label)
            if row == 0:
                ax.set_title(name, fontsize=10)
            else:
                ax.set_xlabel(xlabel)
    fig.suptitle(f"cosim direct engine, one process per case ({stamp})", fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    print(f"\nplot: {path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer and shorter cases (~1 min)")
    parser.add_argument("--plot", type=Path, help="draw time per step and peak RSS per axis into this PNG")
    parser.add_argument("--axes", default="duration,buses,gpus,campuses", help="axes to run (default all four)")
    parser.add_argument("--case", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case:
        print(json.dumps(one_case(json.loads(args.case))))
        return
    quick, wanted = args.quick, set(args.axes.split(","))
    stamp = f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load {os.getloadavg()[0]:.1f}"
    print(f"bench_scaling{' --quick' if quick else ''}: direct engine, fresh process per case; {stamp}")
    results: dict[str, tuple[str, list[tuple[float, dict]]]] = {}
    if "duration" in wanted:
        days = [1, 3] if quick else [1, 7, 30]
        points = axis("duration (1 campus, IEEE 33, 1 min steps; work per step constant)", "step",
                      [(1.0, f"{d} day(s)", {"network": "ieee33", "n_campuses": 1, "duration_s": d * DAY_S,
                                             "step_s": 60}) for d in days])
        results["duration (IEEE 33, 1 campus, 1 min)"] = ("simulated days", [(float(d), r) for d, (_, r) in
                                                                              zip(days, points)])
    if "buses" in wanted:
        bus_day = DAY_S // 8 if quick else DAY_S
        results["buses (1 campus, 15 min)"] = ("buses", axis(
            "buses (1 campus, 15 min steps)", "bus",
            [(float(N_BUSES[n]), f"{n} ({N_BUSES[n]} buses)",
              {"network": n, "n_campuses": 1, "duration_s": bus_day, "step_s": 900}) for n in ("ieee33", "ieee8500")]))
    if "gpus" in wanted:
        counts = GPU_COUNTS[:2] if quick else GPU_COUNTS
        results["GPUs (1 campus alone, 15 min)"] = ("thousands of GPUs", axis(
            "GPUs (1 campus, no grid, 1 day at 15 min; jobs, replicas and requests in proportion)", "1k GPUs",
            [(n / 1000, f"{n:,} GPUs", {"network": None, "n_campuses": 1, "duration_s": DAY_S, "step_s": 900,
                                        "n_gpus": n}) for n in counts]))
    if "campuses" in wanted:
        counts = [1, 3] if quick else CAMPUS_COUNTS
        results["campuses (IEEE 33, 1 min)"] = ("campuses of 32 GPUs", axis(
            f"campuses ({N_GPUS_MANY} GPUs each, IEEE 33, 1 day at 1 min)", "campus",
            [(float(n), f"{n} campus(es)", {"network": "ieee33", "n_campuses": n, "duration_s": DAY_S, "step_s": 60,
                                            "n_gpus": N_GPUS_MANY}) for n in counts]))
    print(f"\nload after: {os.getloadavg()[0]:.1f}")
    if args.plot:
        plot(args.plot, results, f"{stamp} to {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
