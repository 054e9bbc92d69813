"""Reconstruct a job trace from Helios Earth's minute-level occupancy (a reconstruction, not the job log).

Run from the repository root::

    .venv/bin/python scenarios/data/datacenter/helios/make_helios_jobs.py

Input: ``helios_earth_16vc_occupancy_1min.csv.gz`` (copied byte for byte from the shared
collection's ``heliosartifact-cluster-sequences``): per minute, GPU jobs running
(``running_gpujob_num``) and GPUs they hold (``running_gpu_num``) over 16 virtual clusters
(856 GPUs) of SenseTime's Earth cluster, May 2020. The Helios job log itself is not in the
collection, so individual jobs are *reconstructed* with the least churn that reproduces the
two counts (seeded, deterministic):

* a minute where the job count rises by ``k`` starts ``k`` jobs, one where it falls by ``e``
  ends ``e`` jobs; a minute where it stays but the GPU count moves ends one job and starts one;
* ending jobs are drawn at random (seed 0) among the running ones, preferring jobs whose
  GPUs add up to what the GPU count lost;
* starting jobs share what the GPU count gained (against the reconstruction's own count, so
  mismatches heal) as evenly as whole GPUs allow, at least one each;
* the jobs running in the first minute start then (left-censored); those still running in
  the last minute end then (right-censored).

Consequences to keep in mind: jobs that start and end within one minute, or whose starts
and ends cancel in a minute, are missing (the trace has fewer, longer jobs than Helios had);
submission = observed start (Helios's own queueing is not in the trace); sizes in a minute
with several starts are averaged. Times are converted from China Standard Time to UTC (-8 h).

Output ``helios_earth_jobs_2020-05.csv.gz`` with the Philly extract's columns
``submitted_time`` (UTC), ``runtime_s``, ``num_gpus``.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "helios_earth_16vc_occupancy_1min.csv.gz"
OUT = HERE / "helios_earth_jobs_2020-05.csv.gz"


def _split(total: int, n: int) -> list[int]:
    """``total`` GPUs over ``n`` jobs as evenly as whole GPUs allow, at least one each."""
    total = max(total, n)
    base, extra = divmod(total, n)
    return [base + 1] * extra + [base] * (n - extra)


def _ends(running: dict[int, int], n_end: int, released: int, rng: np.random.Generator) -> list[int]:
    """``n_end`` running job ids, preferring ones whose sizes add up to ``released`` GPUs."""
    ids = list(running)
    order = rng.permutation(len(ids))
    chosen, left = [], released
    for i in order:
        job = ids[i]
        if len(chosen) < n_end and running[job] <= left:
            chosen.append(job)
            left -= running[job]
    for i in order:
        if len(chosen) >= n_end:
            break
        if ids[i] not in chosen:
            chosen.append(ids[i])
    return chosen


def reconstruct(frame: pd.DataFrame, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    times = pd.to_datetime(frame["time"]) - pd.Timedelta(hours=8)
    jobs_n, gpus_n = frame["running_gpujob_num"].to_numpy(int), frame["running_gpu_num"].to_numpy(int)
    running: dict[int, int] = {}
    start: dict[int, int] = {}
    rows = []
    next_id = 0

    def begin(minute: int, sizes: list[int]) -> None:
        nonlocal next_id
        for size in sizes:
            running[next_id], start[next_id] = size, minute
            next_id += 1

    begin(0, _split(gpus_n[0], jobs_n[0]) if jobs_n[0] else [])
    for t in range(1, len(frame)):
        dj = jobs_n[t] - len(running)
        n_end, n_start = max(-dj, 0), max(dj, 0)
        if dj == 0 and gpus_n[t] != sum(running.values()) and running:
            n_end = n_start = 1
        model_gpus = sum(running.values())
        released = max(model_gpus - gpus_n[t], 0) if n_start == 0 else 0
        for job in _ends(running, n_end, released, rng):
            rows.append((start[job], t, running.pop(job)))
        if n_start:
            begin(t, _split(gpus_n[t] - sum(running.values()), n_start))
    for job, size in running.items():
        rows.append((start[job], len(frame) - 1, size))
    out = pd.DataFrame(rows, columns=["start", "end", "num_gpus"]).sort_values(["start", "end"], kind="stable")
    out = out[out["end"] > out["start"]]
    return pd.DataFrame({"submitted_time": times.iloc[out["start"].to_numpy()].dt.strftime("%Y-%m-%d %H:%M:%S").to_numpy(),
                         "runtime_s": (out["end"] - out["start"]).to_numpy() * 60,
                         "num_gpus": out["num_gpus"].to_numpy()})


def main() -> None:
    jobs = reconstruct(pd.read_csv(SOURCE))
    with open(OUT, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as gz:
        gz.write(jobs.to_csv(index=False, lineterminator="\n").encode())
    print(f"{OUT.name}: {len(jobs)} jobs, {jobs['num_gpus'].sum()} GPU-starts")


if __name__ == "__main__":
    main()
