"""Straggler stalls of synchronous training, drawn from Alibaba PAI per-worker mini-batch times.

In synchronous data-parallel training every iteration ends in an all-reduce that waits for
the slowest worker: the iteration lasts ``max_i t_i``, worker ``i`` computes for ``t_i`` and
then idles (GPU at idle power) until the slowest one arrives. :class:`StragglerModel` draws,
per job size, a seeded cycle of iterations whose per-worker times come from the measured
PAI traces (Weng et al., "MLaaS in the Wild", NSDI 2022; Xiao et al., "AntMan", OSDI 2020;
jobs 1-3 of ``cluster-trace-gpu-v2020/mini-batch-time``, CC-BY-4.0) and integrates the
phases of an iteration over a step:

    compute (70 % of the mean worker time) -> stall (iteration time - mean worker time)
    -> communication (30 %)

Jobs with more than 10 workers combine independently drawn 10-worker rows (an assumption:
the release has 10 workers per job), so larger jobs wait for a slower straggler.

Measured job averages (Acme power, trace run times) already contain these stalls; the
iteration cycle is scaled so its long-run mean equals them (``iteration_s`` is the *mean*
iteration time; progress during busy time runs ``1 / busy_mean`` faster). Steps longer than
a second use the means directly and stay unchanged.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import pandas as pd

from cosim.adapters.datacenter.training import DATA

PAI_FILES = tuple(DATA / "alibaba_pai" / f"job_{k}_norm.csv.gz" for k in (1, 2, 3))
#: Share of the mean worker time spent computing; the rest is communication (an *estimate*,
#: the same split as the iteration swing of :mod:`.cluster`). [-]
COMPUTE_FRAC = 0.7
#: Iterations in one job-size cycle (about 34 minutes at 2 s iterations). [-]
CYCLE_ITERATIONS = 1024


@functools.lru_cache(maxsize=1)
def worker_rows() -> np.ndarray:
    """Per-iteration worker times of PAI jobs 1-3, each row divided by its mean. [-]

    The release normalises times to 0-1000 by scaling (minima 380, 666, 620 are far from
    zero), so ratios between workers of one job are kept. Shape ``(rows, 10)``.
    """
    rows = []
    for path in PAI_FILES:
        frame = pd.read_csv(path)
        table = frame.pivot_table(index="time", columns="worker", values="batch_time_norm").dropna()
        rows.append(table.to_numpy(float))
    times = np.vstack(rows)
    return times / times.mean(axis=1, keepdims=True)


def stall_factors(rng: np.random.Generator, n_workers: int, n_iterations: int) -> np.ndarray:
    """Iteration time over mean worker time (``max_i t_i / mean_i t_i``) per iteration. [-]

    Args:
        rng: seeded generator.
        n_workers: workers (GPUs) of the job; one worker never waits. [-]
        n_iterations: iterations to draw. [-]
    """
    if n_workers <= 1:
        return np.ones(n_iterations)
    rows = worker_rows()
    width = rows.shape[1]
    groups = -(-n_workers // width)
    picked = rows[rng.integers(len(rows), size=(n_iterations, groups))]  # (iter, group, worker)
    rest = n_workers - (groups - 1) * width  # workers used of the last row, a random subset
    last = rng.permuted(picked[:, -1, :], axis=1)[:, :rest]
    full = picked[:, :-1, :].reshape(n_iterations, -1)
    slowest = np.maximum(full.max(axis=1, initial=0.0), last.max(axis=1))
    mean = (full.sum(axis=1) + last.sum(axis=1)) / n_workers
    return slowest / mean


@dataclass(frozen=True)
class Cycle:
    """Piecewise-linear cumulative compute and busy time over one iteration cycle.

    Attributes:
        x_s: breakpoints from the cycle start. [s]
        compute_s, busy_s: cumulative compute and busy (compute + communication) time. [s]
        period_s: cycle length. [s]
        busy_mean_frac: busy share of the cycle (= 1 / mean stall factor). [-]
    """

    x_s: np.ndarray
    compute_s: np.ndarray
    busy_s: np.ndarray
    period_s: float
    busy_mean_frac: float

    def cumulative(self, u_s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Compute and busy time in ``[0, u_s)``, cycles repeating. [s]"""
        turns, rest = np.divmod(u_s, self.period_s)
        comp = turns * self.compute_s[-1] + np.interp(rest, self.x_s, self.compute_s)
        busy = turns * self.busy_s[-1] + np.interp(rest, self.x_s, self.busy_s)
        return comp, busy


def busy_mean_frac(factors: np.ndarray) -> float:
    """Busy share of the cycle of stall factors ``factors`` (= 1 / their mean). [-]"""
    return float(1.0 / factors.mean())


def make_cycle(factors: np.ndarray, iteration_s: float) -> Cycle:
    """The iteration cycle of stall factors ``factors`` with mean iteration time ``iteration_s``."""
    tau = iteration_s / factors.mean()  # mean worker time of one iteration
    length = tau * factors
    start = np.concatenate([[0.0], np.cumsum(length)])
    k = np.arange(len(factors))
    x = np.column_stack([start[:-1], start[:-1] + COMPUTE_FRAC * tau,
                         start[:-1] + COMPUTE_FRAC * tau + (length - tau)]).ravel()
    comp = np.column_stack([k * COMPUTE_FRAC * tau, (k + 1) * COMPUTE_FRAC * tau,
                            (k + 1) * COMPUTE_FRAC * tau]).ravel()
    busy = np.column_stack([k * tau, k * tau + COMPUTE_FRAC * tau, k * tau + COMPUTE_FRAC * tau]).ravel()
    n = len(factors)
    return Cycle(np.append(x, start[-1]), np.append(comp, n * COMPUTE_FRAC * tau), np.append(busy, n * tau),
                 float(start[-1]), busy_mean_frac(factors))


class StragglerModel:
    """Iteration cycles per job size; phase shares of a step per running job.

    Args:
        iteration_s: mean iteration time of synchronous training. [s]
        rng: seeded generator (a child seeds one cycle per job size; ``rng`` itself is not advanced).
        enabled: ``False`` keeps the compute/communication split without stalls.
    """

    def __init__(self, iteration_s: float, rng: np.random.Generator, enabled: bool = True):
        self.iteration_s, self.enabled = iteration_s, enabled
        self.seed = rng.spawn(1)[0].integers(2**63)
        self._cycles: dict[int, Cycle] = {}
        self._factors: dict[int, np.ndarray] = {}  # stall factors per job size, each drawn once
        self._busy_mean: dict[int, float] = {}

    def _size(self, n_workers: int) -> int:
        return int(n_workers) if self.enabled else 1

    def _stall_factors(self, n: int) -> np.ndarray:
        """The (cached) stall factors of size ``n``'s cycle, from its own seeded generator."""
        if n not in self._factors:
            self._factors[n] = stall_factors(np.random.default_rng([self.seed, n]), n, CYCLE_ITERATIONS)
        return self._factors[n]

    def cycle(self, n_workers: int) -> Cycle:
        """The (cached) cycle of a job with ``n_workers`` GPUs."""
        n = int(n_workers) if self.enabled else 1
        cyc = self._cycles.get(n)
        if cyc is None:
            cyc = self._cycles[n] = make_cycle(self._stall_factors(n), self.iteration_s)
        return cyc

    def busy_mean(self, n_gpus: np.ndarray) -> np.ndarray:
        """Long-run busy share of each job's GPUs (1 - stall share). [-]"""
        # a lookup per job beats np.unique for the few jobs that start in a step; steps over 1 s
        # need only this mean (make_cycle's busy_mean_frac), not the whole cycle
        means = self._busy_mean
        for n in set(np.asarray(n_gpus).tolist()):
            n = self._size(n)
            if n not in means:
                means[n] = busy_mean_frac(self._stall_factors(n))
        return np.array([means[self._size(n)] for n in np.asarray(n_gpus).tolist()], float)

    def known_busy_mean(self, n_gpus: np.ndarray) -> np.ndarray:
        """:meth:`busy_mean` of jobs whose size's cycle is drawn already, NaN for the others (nothing is drawn). [-]"""
        means, size = self._busy_mean, self._size
        return np.array([means.get(size(n), np.nan) for n in np.asarray(n_gpus).tolist()], float)

    def shares(self, n_gpus: np.ndarray, phase_frac: np.ndarray, time_s: float, dt_s: float):
        """``(compute, communication, stall, busy_mean)`` shares of ``[time_s, time_s + dt_s)``. [-]

        Args:
            n_gpus: GPUs of each running job. [-]
            phase_frac: each job's offset into its cycle, as a fraction of the period. [-]
        """
        out = np.empty((4, len(n_gpus)))
        for n in np.unique(n_gpus):
            member = n_gpus == n
            cyc = self.cycle(n)
            u0 = time_s + phase_frac[member] * cyc.period_s
            c0, b0 = cyc.cumulative(u0)
            c1, b1 = cyc.cumulative(u0 + dt_s)
            comp, busy = (c1 - c0) / dt_s, (b1 - b0) / dt_s
            out[0, member], out[1, member], out[2, member] = comp, busy - comp, 1.0 - busy
            out[3, member] = cyc.busy_mean_frac
        return out[0], out[1], np.maximum(out[2], 0.0), out[3]
