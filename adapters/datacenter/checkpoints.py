"""Checkpoint dips of training jobs, and the mean-keeping split of a job's power into levels.

Every training job checkpoints every ``interval_s`` of its *running* time for ``duration_s``:
the k-th checkpoint occupies running time ``[k * interval_s - duration_s, k * interval_s)``
(k = 1, 2, ...), so every full interval holds exactly one. While it writes, its GPUs sit at
idle power and it makes no progress. Measured job averages (Acme power, trace run times)
already contain checkpoints, so outside them the job draws and progresses ``1 / (1 - share)``
faster, ``share = duration_s / interval_s``: over whole intervals the mean is the coarse
model's, which steps longer than a second keep using unchanged.

The defaults (every 30 min, 1 min long) are *illustrative*, not fitted to a measurement; how
often to checkpoint given the stall each costs is the subject of CheckFreq (Mohan et al.,
FAST 2021).
"""

from __future__ import annotations

import numpy as np


def checkpoint_time_s(ran_s: np.ndarray, interval_s: np.ndarray, duration_s: np.ndarray) -> np.ndarray:
    """Checkpoint time within running time ``[0, ran_s)`` of each job. [s]"""
    turns, rest = np.divmod(ran_s, interval_s)
    return turns * duration_s + np.maximum(rest - (interval_s - duration_s), 0.0)


def checkpoint_share(ran_s: np.ndarray, dt_s: float, interval_s: np.ndarray, duration_s: np.ndarray) -> np.ndarray:
    """Share of running time ``[ran_s, ran_s + dt_s)`` spent checkpointing. [-]"""
    done = checkpoint_time_s(ran_s + dt_s, interval_s, duration_s) - checkpoint_time_s(ran_s, interval_s, duration_s)
    return done / dt_s


def split_levels(mean_w: np.ndarray, low_share: np.ndarray, low_w: float, high_max_w: np.ndarray):
    """``(high_w, low_w)`` levels that keep ``mean_w`` when ``low_share`` of the time is low. [W]

    The low level is ``low_w`` (idle) unless the high level would pass ``high_max_w`` (the
    job's power limit); then the high level is held at the limit and the low one rises, so
    the mean is kept and no level exceeds the limit (or the mean, if that is higher).

    Args:
        mean_w: mean power to keep. [W]
        low_share: share of the time at the low level, in ``[0, 1)``. [-]
        low_w: the low level when nothing binds (GPU idle power). [W]
        high_max_w: upper bound of the high level. [W]
    """
    mean_w, low_share = np.asarray(mean_w, float), np.asarray(low_share, float)
    high = np.minimum(low_w + (mean_w - low_w) / (1.0 - low_share), np.maximum(high_max_w, mean_w))
    with np.errstate(divide="ignore", invalid="ignore"):
        low = np.where(low_share > 0, (mean_w - (1.0 - low_share) * high) / low_share, low_w)
    return high, np.maximum(low, low_w)
