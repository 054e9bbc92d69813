"""Benchmark sweeps: 8 one-day runs of the default scenario, serially vs on a 2-worker LocalCluster.

Run by hand (never in the tests)::

    .venv/bin/python bench/bench_sweep.py              # 8 runs, 2 workers
    .venv/bin/python bench/bench_sweep.py --runs 16 --workers 4
    .venv/bin/python bench/bench_sweep.py --engine direct   # the in-process engine in every run
    .venv/bin/python bench/bench_sweep.py --engine direct --ahead off   # and no worker process in any run

Prints three wall times and two speed-ups: serial (in this process, one run after
another, after a 1-minute warm-up run), Dask from cold (``run_sweep`` starting its own
LocalCluster: process spawn, imports and data loading included) and Dask warm (a cluster
already up whose workers did the same warm-up run, as on a long-lived cluster). The variants differ only in ``scenario.seed`` (the default
scenario is deterministic, so every run does the same work). Target: >= 1.8x on 2 cores.
The machine's load average is printed too: other processes on the cores lower the figure.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cosim.studies.sweep import run_sweep  # noqa: E402

SCENARIO = ROOT / "scenarios" / "default.toml"


def warm_up(folder: str, engine: str = "mosaik") -> bool:
    """One 1-minute run of the scenario: imports, data caches and FMU loading done before timing."""
    from cosim.studies.sweep import run_variant

    row = run_variant(str(SCENARIO), {"scenario.duration_s": 60, "scenario.engine": engine},
                      f"{folder}/warm-{os.getpid()}")
    return row["status"] == "ok"


def burn(n: int = 20_000_000) -> float:
    """A pure-Python loop's wall time. [s]"""
    started = time.perf_counter()
    total = 0
    for i in range(n):
        total += i
    return time.perf_counter() - started


def machine_parallelism(workers: int) -> float:
    """How many loops ``workers`` processes get through at once, relative to one: the best
    speed-up the machine allows right now (other users' processes lower it)."""
    import multiprocessing

    one = burn()
    with multiprocessing.get_context("spawn").Pool(workers) as pool:
        pool.map(burn, [1] * workers, chunksize=1)  # the workers' start-up (spawn imports this module) not timed
        started = time.perf_counter()
        pool.map(burn, [20_000_000] * workers)
        together = time.perf_counter() - started
    return workers * one / together


def timed_sweep(variants, out: Path, **kwargs) -> tuple[float, str]:
    """Wall time of a sweep, and a note: runs ok and the mean engine wall time per run."""
    started = time.perf_counter()
    table = run_sweep(SCENARIO, variants, out, progress=False, **kwargs)
    wall_s = time.perf_counter() - started
    return wall_s, f"{int((table['status'] == 'ok').sum())} ok, world {table['wall_s'].mean():.2f} s/run"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--engine", choices=("mosaik", "direct"), default="mosaik")
    parser.add_argument("--ahead", choices=("auto", "on", "off"), default="auto",
                        help="[scenario] ahead of every run (direct engine; 'auto' forks a worker for the serial "
                             "runs, which run in the main thread, not for Dask's, which run in a task thread)")
    args = parser.parse_args()
    variants = [{"scenario.seed": seed, "scenario.engine": args.engine, "scenario.ahead": args.ahead}
                for seed in range(1, args.runs + 1)]
    print(f"{args.runs} one-day runs of {SCENARIO.name} (1,440 steps each) on the {args.engine} engine; "
          f"{os.cpu_count()} cores, "
          f"load average before: {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        warm_up(tmp, args.engine)  # this process too: serial and warm Dask both start with imports done
        serial_s, ok = timed_sweep(variants, tmp_path / "serial", workers=0)
        print(f"serial (in-process):          {serial_s:7.1f} s  ({ok})")

        cold_s, ok = timed_sweep(variants, tmp_path / "cold", workers=args.workers)
        print(f"dask cold ({args.workers} workers, start incl.): {cold_s:7.1f} s  ({ok})  "
              f"speed-up {serial_s / cold_s:.2f}x")

        from distributed import Client, LocalCluster

        from cosim.studies.executor import worker_config

        with worker_config(), LocalCluster(n_workers=args.workers, threads_per_worker=1, dashboard_address=":0",
                                           silence_logs=40) as cluster, Client(cluster) as client:
            workers = list(client.scheduler_info()["workers"])  # a task, not client.run: mosaik needs its own loop
            assert all(client.gather([client.submit(warm_up, tmp, args.engine, workers=[w], pure=False) for w in workers]))
            warm_s, ok = timed_sweep(variants, tmp_path / "warm", scheduler=cluster.scheduler_address)
        print(f"dask warm ({args.workers} workers, up already): {warm_s:7.1f} s  ({ok})  "
              f"speed-up {serial_s / warm_s:.2f}x")
    print(f"load average after: {os.getloadavg()[0]:.2f}; {args.workers} processes of pure Python get "
          f"{machine_parallelism(args.workers):.2f}x of one right now (the ceiling for the speed-ups above)")


if __name__ == "__main__":  # LocalCluster spawns worker processes that import this file
    main()
