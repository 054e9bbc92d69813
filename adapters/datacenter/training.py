"""Training workload: job tables (seeded synthetic or from a trace) and measured power curves.

* Job tables are plain numpy arrays (:class:`Jobs`), built by :func:`synthetic_jobs` or read
  by :func:`read_job_trace` (the Philly extract, or any CSV with the same columns).
* :func:`sample_power_frac` draws each job's per-GPU activity from the measured Acme A100
  power distribution (Hu et al., NSDI 2024), as a fraction of the idle-to-TDP range.
* :func:`cap_curves` turns the Zeus power-limit sweeps (You et al., NSDI 2023) into speed and
  power vs ``cap / uncapped power``: a cap below what a job draws slows it down.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from cosim.adapters._bounded_read import TableTooLarge, read_table_bounded

DATA = Path(__file__).resolve().parents[2] / "scenarios" / "data" / "datacenter"
PHILLY_FILE = DATA / "philly" / "philly_sampled_jobs.csv.gz"
ACME_FILE = DATA / "acme" / "acme_power_cdfs.csv.gz"
ZEUS_FILES = (DATA / "zeus" / "summary_power_v100.csv", DATA / "zeus" / "summary_power_a40.csv")

#: Priority classes, highest first; a job's ``prio`` is the index.
CLASSES: tuple[str, ...] = ("high", "normal", "low")

#: Acme measures A100-80GB SXM GPUs: their idle and TDP frame the activity fraction.
ACME_IDLE_W, ACME_TDP_W = 60.0, 400.0
#: Per-GPU power above which an Acme GPU counts as running a job (the idle plateau of the
#: CDF ends near 70 W: p10 = 63 W, p30 = 70 W). [W]
ACME_BUSY_W = 75.0


class TraceError(ValueError):
    """A job trace that cannot be used; the message names file, row and column."""


@dataclass
class Jobs:
    """Training jobs as parallel arrays (index = job id), sorted by submission time.

    Attributes:
        submit_s: submission time after the scenario start. [s]
        n_gpus: GPUs the job needs, all at once (gang). [-]
        work_s: run time at full speed (uncapped). [s]
        prio: priority class index into :data:`CLASSES`. [-]
        flexible: may be paused (checkpoint, later restore). [-]
        power_frac: per-GPU activity, 0 = idle power, 1 = TDP. [-]
        ckpt_interval_s: per-job checkpoint interval from a trace; NaN or ``None`` = the default. [s]
        elastic: may run on more or fewer GPUs than ``n_gpus`` (the ``elastic`` policy); ``None`` = none. [-]
    """

    submit_s: np.ndarray
    n_gpus: np.ndarray
    work_s: np.ndarray
    prio: np.ndarray
    flexible: np.ndarray
    power_frac: np.ndarray = field(default=None)
    ckpt_interval_s: np.ndarray | None = None
    elastic: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.submit_s)

    def checkpoint_interval_s(self, default_s: float) -> np.ndarray:
        """Each job's checkpoint interval: its own where the trace gives one, else ``default_s``. [s]"""
        if self.ckpt_interval_s is None:
            return np.full(len(self), float(default_s))
        return np.where(np.isnan(self.ckpt_interval_s), float(default_s), self.ckpt_interval_s)


def substream(rng: np.random.Generator, tag: int) -> np.random.Generator:
    """A generator of its own, derived from ``rng``'s seed and ``tag``; ``rng`` is neither
    advanced nor spawned from, so every other draw of a run stays as it was.

    Args:
        rng: the entity's seeded generator.
        tag: names the stream (far above the spawn counters numpy uses). [-]
    """
    seq = rng.bit_generator.seed_seq
    return np.random.default_rng(np.random.SeedSequence(seq.entropy, spawn_key=(*seq.spawn_key, 2**31 + tag)))


#: Stream tags of :func:`substream`.
ELASTIC_STREAM, POLICY_STREAM, FAILURE_STREAM, TRANSIENT_STREAM = 1, 2, 3, 4


# -- synthetic generator -----------------------------------------------------------------------
#: Default job sizes and weights: powers of two as in Philly and Acme, weighted towards small
#: jobs with a tail of large ones (*illustrative*, not fitted).
SIZES_GPUS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
SIZE_WEIGHTS = (0.30, 0.10, 0.15, 0.20, 0.10, 0.06, 0.04, 0.03, 0.015, 0.005)


def synthetic_jobs(rng: np.random.Generator, n_jobs: int, span_s: float, *, median_h: float = 2.0,
                   sigma: float = 1.5, max_h: float = 168.0, sizes=SIZES_GPUS, weights=SIZE_WEIGHTS,
                   class_fracs=(0.2, 0.6, 0.2), flexible_frac: float = 0.3) -> Jobs:
    """Poisson arrivals over ``span_s``, log-normal durations, discrete sizes.

    Args:
        rng: seeded generator.
        n_jobs: number of jobs. [-]
        span_s: arrivals fall uniformly (a Poisson process given its count) in ``[0, span_s)``. [s]
        median_h, sigma: log-normal duration: median [h] and shape (sigma of ln) [-].
        max_h: durations are truncated here. [h]
        sizes, weights: GPU counts and their probabilities.
        class_fracs: shares of the priority classes of :data:`CLASSES`.
        flexible_frac: share of normal/low jobs that may be paused. [-]
    """
    submit_s = np.sort(rng.uniform(0.0, span_s, n_jobs))
    work_s = np.minimum(rng.lognormal(np.log(median_h * 3600.0), sigma, n_jobs), max_h * 3600.0)
    weights = np.asarray(weights, float)
    n_gpus = rng.choice(np.asarray(sizes), n_jobs, p=weights / weights.sum())
    prio = rng.choice(len(CLASSES), n_jobs, p=np.asarray(class_fracs) / np.sum(class_fracs))
    flexible = (prio > 0) & (rng.random(n_jobs) < flexible_frac)
    return Jobs(submit_s, n_gpus.astype(np.int64), work_s, prio.astype(np.int64), flexible)


# -- traces --------------------------------------------------------------------------------------
def read_job_trace(path: Path, *, time_scale: float = 1.0) -> pd.DataFrame:
    """Read a job trace CSV into ``submit_s, n_gpus, work_s`` (+ ``prio``, ``flexible`` if given).

    Columns: ``submitted_time`` (datetime text; or ``submit_s``, seconds), ``runtime_s`` and
    ``num_gpus`` (the Philly extract's names); optional ``priority`` (``high``/``normal``/
    ``low``), ``flexible`` (0/1), ``elastic`` (0/1) and ``checkpoint_interval_s`` (>= 1 s). Submission times are shifted so the first is 0 and divided
    by ``time_scale`` (a compression factor: 10 replays the trace ten times faster).

    Raises:
        TraceError: naming the file, the row (1 = first data row) and the column.
    """
    path = Path(path)
    try:
        frame = read_table_bounded(path)  # the file's size and rows within stated limits
    except TableTooLarge as exc:
        raise TraceError(str(exc)) from None
    except Exception as exc:  # pandas raises many types for a bad file
        raise TraceError(f"{path.name}: cannot read as CSV: {exc}") from exc
    time_col = "submitted_time" if "submitted_time" in frame.columns else "submit_s"
    missing = [c for c in (time_col, "runtime_s", "num_gpus") if c not in frame.columns]
    if missing:
        raise TraceError(f"{path.name}: missing column {', '.join(map(repr, missing))}; a job trace needs "
                         f"submitted_time (or submit_s), runtime_s, num_gpus; found: {', '.join(frame.columns)}")
    if frame.empty:
        raise TraceError(f"{path.name}: no jobs")
    submit = _submit_seconds(frame[time_col], path, time_col)
    runtime = _numbers(frame["runtime_s"], path, "runtime_s", minimum=0.0)
    gpus = _numbers(frame["num_gpus"], path, "num_gpus", minimum=1.0, integer=True)
    out = pd.DataFrame({"submit_s": (submit - submit.min()) / time_scale, "n_gpus": gpus.astype(np.int64),
                        "work_s": runtime})
    if "priority" in frame.columns:
        out["prio"] = _classes(frame["priority"], path)
    if "flexible" in frame.columns:
        out["flexible"] = _numbers(frame["flexible"], path, "flexible", minimum=0.0, integer=True) > 0
    if "elastic" in frame.columns:
        out["elastic"] = _numbers(frame["elastic"], path, "elastic", minimum=0.0, integer=True) > 0
    if "checkpoint_interval_s" in frame.columns:
        out["ckpt_interval_s"] = _numbers(frame["checkpoint_interval_s"], path, "checkpoint_interval_s", minimum=1.0)
    return out.sort_values("submit_s", kind="stable").reset_index(drop=True)


def _show(value) -> str:
    return repr(value) if isinstance(value, str) else str(value)


def _where(path: Path, row: int, column: str) -> str:
    return f"{path.name}: row {row + 1} (line {row + 2}), column {column!r}"


def _submit_seconds(raw: pd.Series, path: Path, column: str) -> np.ndarray:
    if column == "submit_s":
        return _numbers(raw, path, column, minimum=-np.inf)
    parsed = pd.to_datetime(raw, errors="coerce", format="mixed")
    bad = parsed.isna().to_numpy()
    if bad.any():
        row = int(np.argmax(bad))
        raise TraceError(f"{_where(path, row, column)}: cannot parse {_show(raw.iloc[row])} as a date-time "
                         "(e.g. 2017-10-03 04:28:51)")
    return parsed.to_numpy(dtype="datetime64[ns]").astype(np.int64) / 1e9


def _numbers(raw: pd.Series, path: Path, column: str, *, minimum: float, integer: bool = False) -> np.ndarray:
    values = pd.to_numeric(raw, errors="coerce").to_numpy(dtype=float)
    bad = ~np.isfinite(values)
    if bad.any():
        row = int(np.argmax(bad))
        raise TraceError(f"{_where(path, row, column)}: {_show(raw.iloc[row])} is not a number")
    low = values < minimum
    if low.any():
        row = int(np.argmax(low))
        what = "negative" if minimum == 0 else f"below {minimum:g}"
        raise TraceError(f"{_where(path, row, column)}: {_show(raw.iloc[row])} is {what}")
    if integer and (values != np.round(values)).any():
        row = int(np.argmax(values != np.round(values)))
        raise TraceError(f"{_where(path, row, column)}: {_show(raw.iloc[row])} is not a whole number")
    return values


def _classes(raw: pd.Series, path: Path) -> np.ndarray:
    text = raw.astype(str).str.strip().str.lower()
    bad = ~text.isin(CLASSES).to_numpy()
    if bad.any():
        row = int(np.argmax(bad))
        raise TraceError(f"{_where(path, row, 'priority')}: {_show(raw.iloc[row])} is not one of {', '.join(CLASSES)}")
    return text.map({c: i for i, c in enumerate(CLASSES)}).to_numpy(dtype=np.int64)


def jobs_from_trace(frame: pd.DataFrame, rng: np.random.Generator, *, class_fracs=(0.2, 0.6, 0.2),
                    flexible_frac: float = 0.3, gpu_scale: int = 1) -> Jobs:
    """Jobs from a read trace; classes and flexibility drawn (seeded) where the trace has none.

    Args:
        gpu_scale: multiply every job's GPU count (a trace from a small cluster on a big one). [-]
    """
    n = len(frame)
    prio = frame["prio"].to_numpy() if "prio" in frame else rng.choice(
        len(CLASSES), n, p=np.asarray(class_fracs) / np.sum(class_fracs))
    flexible = frame["flexible"].to_numpy() if "flexible" in frame else (prio > 0) & (rng.random(n) < flexible_frac)
    ckpt = frame["ckpt_interval_s"].to_numpy(float) if "ckpt_interval_s" in frame else None
    elastic = frame["elastic"].to_numpy(bool) if "elastic" in frame else None
    return Jobs(frame["submit_s"].to_numpy(float), frame["n_gpus"].to_numpy(np.int64) * gpu_scale,
                frame["work_s"].to_numpy(float), np.asarray(prio, np.int64), np.asarray(flexible, bool),
                ckpt_interval_s=ckpt, elastic=elastic)


# -- measured power ---------------------------------------------------------------------------------
@functools.lru_cache(maxsize=1)
def acme_busy_power_cdf() -> tuple[np.ndarray, np.ndarray]:
    """``(cdf_frac, power_w)`` of per-GPU power of busy GPUs, Acme Seren and Kalos pooled.

    The measured CDFs (1,000 points each) are averaged, then cut above :data:`ACME_BUSY_W`
    and renormalised: a job's GPU draws from the busy part of the measured distribution.
    """
    frame = pd.read_csv(ACME_FILE)
    frame = frame[frame["metric"] == "gpu_power"]
    grid_w = np.linspace(ACME_BUSY_W, ACME_TDP_W + 20.0, 400)
    cdfs = [np.interp(grid_w, g["value"].to_numpy(), g["cdf_pct"].to_numpy() / 100.0)
            for _, g in frame.groupby("cluster")]
    cdf = np.mean(cdfs, axis=0)
    cdf = (cdf - cdf[0]) / (cdf[-1] - cdf[0])
    return np.maximum.accumulate(cdf), grid_w


def sample_power_frac(rng: np.random.Generator, n: int) -> np.ndarray:
    """Per-job activity fraction ``(p - idle) / (TDP - idle)`` drawn from the Acme busy CDF. [-]"""
    cdf, power_w = acme_busy_power_cdf()
    drawn_w = np.interp(rng.random(n), cdf, power_w)
    return np.clip((drawn_w - ACME_IDLE_W) / (ACME_TDP_W - ACME_IDLE_W), 0.0, 1.0)


#: Bin edges of ``x = power limit / power drawn at the highest limit`` for the Zeus curves.
_ZEUS_EDGES = np.array([0.3, 0.45, 0.55, 0.65, 0.75, 0.85, 0.95, 1.05, 1.15, 1.25])


@functools.lru_cache(maxsize=1)
def cap_curves() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(x, speed_frac, power_frac)`` of training under a power cap, from the Zeus sweeps.

    ``x`` is the cap divided by the power the same job draws uncapped (its highest limit);
    ``speed_frac`` = time per epoch uncapped / capped; ``power_frac`` = average power capped /
    uncapped. Medians over all V100 and A40 configurations in each bin of ``x``, made
    monotone, pinned to 1 at ``x >= 1.3``. Applied to other GPUs by the same ``x`` (an
    assumption: the shape of DVFS throttling carries over across generations).
    """
    frames = []
    for path in ZEUS_FILES:
        frame = pd.read_csv(path)
        key = ["dataset", "network", "batch_size", "optimizer"]
        top = frame.loc[frame.groupby(key)["power_limit"].idxmax()].set_index(key)
        frame = frame.join(top[["time_per_epoch", "average_power"]], on=key, rsuffix="_top")
        frames.append(frame)
    data = pd.concat(frames)
    x = data["power_limit"] / data["average_power_top"]
    speed = data["time_per_epoch_top"] / data["time_per_epoch"]
    power = data["average_power"] / data["average_power_top"]
    bins = pd.cut(x, _ZEUS_EDGES)
    centers = x.groupby(bins, observed=True).median().to_numpy()
    speed_med = np.minimum(speed.groupby(bins, observed=True).median().to_numpy(), 1.0)
    power_med = np.minimum(power.groupby(bins, observed=True).median().to_numpy(), 1.0)
    xs = np.append(centers, 1.3)
    return xs, np.maximum.accumulate(np.append(speed_med, 1.0)), np.maximum.accumulate(np.append(power_med, 1.0))


def capped(cap_over_uncapped):
    """``(speed_frac, power_frac)`` at ``x = cap / uncapped power`` (arrays welcome). [-]"""
    return capped_speed(cap_over_uncapped), capped_power(cap_over_uncapped)


def capped_speed(cap_over_uncapped):
    """``speed_frac`` of :func:`capped` alone. [-]"""
    xs, speed, _ = cap_curves()
    return np.interp(cap_over_uncapped, xs, speed)


def capped_power(cap_over_uncapped):
    """``power_frac`` of :func:`capped` alone (the facility-limit search needs only power). [-]"""
    xs, _, power = cap_curves()
    return np.interp(cap_over_uncapped, xs, power)
