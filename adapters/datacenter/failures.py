"""Job failures: seeded, size- and duration-dependent interruptions of running training jobs.

Model: every GPU a running job holds fails independently at a constant rate ``rate`` per
GPU-hour (a Poisson process), and any GPU's failure interrupts the whole gang. A job of
``n`` GPUs busy for ``t`` hours therefore fails within that time with probability
``1 - exp(-rate * n * t)``: larger and longer jobs fail more, the dependence on size and
duration the Philly and Helios characterisations report (Jeon et al., "Analysis of
Large-Scale Multi-Tenant GPU Clusters for DNN Training Workloads", USENIX ATC 2019; Hu et al.,
"Characterization and Prediction of Deep Learning Workloads in Large-Scale GPU Datacenters",
SC 2021). The draw is at the end of each step, over the step's busy time.

A failed job loses the work it did since its last checkpoint (the cluster's checkpoint
clock, ``checkpoint_interval_s`` of running time; a job never checkpointed loses all of it)
and then either ends (state ``FAILED``; share ``end_frac``: the user errors that rerunning
does not fix) or goes back to the queue, to restart from that checkpoint with the restore
cost added (``restore_s``).

Numbers. There is no default rate (0: jobs never fail). Sources, for choosing one:

* Philly (Jeon et al. 2019): about 30 % of jobs end unsuccessfully, mostly from user errors
  rather than infrastructure. We took that figure from a third-party summary of the paper,
  not from the paper itself. It is a share of jobs, not a rate per GPU-hour, so it is *not*
  used for ``rate``.
* Llama 3 pre-training (Dubey et al., "The Llama 3 Herd of Models", arXiv 2407.21783, 2024,
  §3.3.4): 419 unexpected interruptions in a 54-day snapshot on up to 16,384 H100 GPUs. That
  gives 419 / (16,384 x 54 x 24) ≈ 2.0e-5 per GPU-hour, if every GPU ran the whole time (an
  upper-bound GPU count, so a lower-bound rate). These figures are *recalled*: check them
  before citing. The README's failure figures use this value with ``--set``, as an *assumption*.
"""

from __future__ import annotations

import numpy as np

#: ``training.failure_rate_per_gpu_h`` as recalled from the Llama 3 report (module docstring);
#: an assumption, not a default. [1/GPU-h]
LLAMA3_RATE_PER_GPU_H = 419 / (16_384 * 54 * 24)


class FailureModel:
    """Draws which running jobs fail in a step.

    Args:
        rate_per_gpu_h: failures per GPU-hour of a running job (0: none, nothing is drawn). [1/GPU-h]
        end_frac: share of failed jobs that end rather than restart. [-]
        rng: the failures' own seeded stream (one uniform per running job per step, plus one per failure).
    """

    def __init__(self, rate_per_gpu_h: float, end_frac: float, rng: np.random.Generator):
        self.rate_per_gpu_h, self.end_frac, self.rng = float(rate_per_gpu_h), float(end_frac), rng

    @property
    def enabled(self) -> bool:
        return self.rate_per_gpu_h > 0.0

    def draw(self, n_gpus: np.ndarray, busy_h: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(failed, ends)`` masks for jobs of ``n_gpus`` GPUs busy ``busy_h`` hours this step."""
        p_fail = -np.expm1(-self.rate_per_gpu_h * np.asarray(n_gpus, float) * np.asarray(busy_h, float))
        failed = self.rng.random(len(p_fail)) < p_fail
        ends = np.zeros(len(p_fail), bool)
        ends[failed] = self.rng.random(int(failed.sum())) < self.end_frac
        return failed, ends
