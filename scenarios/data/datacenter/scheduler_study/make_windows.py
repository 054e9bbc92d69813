"""Cut the scheduler study's two job-trace windows (same columns, same cluster) from the extracts.

Run from the repository root (after ``helios/make_helios_jobs.py``)::

    .venv/bin/python scenarios/data/datacenter/scheduler_study/make_windows.py

* ``philly_window.csv.gz``: the Philly extract's jobs submitted from 1,416 h after its first
  submission (2017-11-17 05:25 US Pacific) for 11 days (4 of warm-up, 7 studied);
* ``helios_window.csv.gz``: the reconstructed Helios Earth jobs starting from 2020-05-14 16:00
  UTC for 11 days (4 of warm-up, then 18-25 May 2020).

Rows are copied unchanged (columns ``submitted_time``, ``runtime_s``, ``num_gpus``), so both
windows replay with ``training = { source = "file", file = ..., warmup_h = 96 }`` on the same
768-GPU cluster: the Philly window offers ~550 busy-GPU equivalents in its studied week plus
what long jobs carry over, the Helios one ~650-700 (its 856-GPU cluster ran 75-82 % busy).
"""

from __future__ import annotations

import gzip
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
DATA = HERE.parent
SPAN_H = 11 * 24


def _write(frame: pd.DataFrame, path: Path) -> None:
    with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as gz:
        gz.write(frame.to_csv(index=False, lineterminator="\n").encode())
    print(f"{path.name}: {len(frame)} jobs")


def window(path: Path, start, columns=("submitted_time", "runtime_s", "num_gpus")) -> pd.DataFrame:
    frame = pd.read_csv(path)
    t = pd.to_datetime(frame["submitted_time"])
    start = pd.Timestamp(start) if not isinstance(start, float) else t.min() + pd.Timedelta(hours=start)
    keep = (t >= start) & (t < start + pd.Timedelta(hours=SPAN_H))
    return frame.loc[keep, list(columns)].reset_index(drop=True)


def main() -> None:
    _write(window(DATA / "philly" / "philly_sampled_jobs.csv.gz", 1416.0), HERE / "philly_window.csv.gz")
    _write(window(DATA / "helios" / "helios_earth_jobs_2020-05.csv.gz", "2020-05-14 16:00:00"),
           HERE / "helios_window.csv.gz")


if __name__ == "__main__":
    main()
