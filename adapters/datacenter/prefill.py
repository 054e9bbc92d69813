"""Time to first token (TTFT): FIFO queueing wait plus prefill, for the fluid batching model.

``TTFT = wait + prefill_s``, ``prefill_s = input tokens / prefill rate``.

*Prefill rate.* The ML.ENERGY Benchmark v3 extract has no prefill or TTFT columns, so the rate
comes from the compute a prompt needs (``2 x active parameters`` FLOP per token) over an
effective compute rate per GPU. That rate is derived from a published figure: NVIDIA
reports a TTFT of 472 ms for Llama 3.1 70B with 32,768 input tokens on one GH200 NVL32
(32 Hopper GPUs; NVIDIA Technical Blog, "Low Latency Inference Chapter 2: Blackwell is
Coming. NVIDIA GH200 NVL32 with NVLink Switch Gives Signs of Big Leap in Time to First
Token Performance", 2024). With 80 layers of width 8,192 that prompt costs
``32,768 x (2 x 70.6e9 + 4 x 80 x 8,192 x 16,384) = 6.0e15`` FLOP (weights + causal
attention), i.e. 12.8 PFLOP/s or 0.40 PFLOP/s per GPU: :data:`PREFILL_EFFICIENCY_FRAC`
= 0.40 of the H100's 989 TFLOP/s dense BF16 peak (NVIDIA H100 datasheet). B200 is scaled by
its dense BF16 peak, 2.25 PFLOP/s (NVIDIA DGX B200 datasheet: 72 PFLOPS FP8 sparse for 8
GPUs), at the same efficiency (an assumption). The attention term is left out for the
prompts here (a ~1k-token prompt adds < 2 % to a 70B model's FLOP; 12k tokens ~11 %).

*Wait.* Requests arrive uniformly within a step and are served first in, first out at the
step's service rate ``served / dt``, never before they arrive; those carried over keep
their arrival times (cohorts). The waits of a step's served requests are therefore a
mixture of uniform segments, from which the p99 and the deadline attainment follow exactly.
Every request of a fleet is given the fleet's mean prompt length.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np

#: Active parameters per token (model cards: Meta Llama 3.1 8B/70B/405B; Qwen3-30B-A3B,
#: 30.5 B total, 3.3 B activated; Qwen3-235B-A22B, 235 B total, 22 B activated).
ACTIVE_PARAMS = {"llama-3.1-8b": 8.03e9, "llama-3.1-70b": 70.6e9, "llama-3.1-405b-fp8": 405.9e9,
                 "qwen-3-30b-a3b": 3.3e9, "qwen-3-235b-a22b": 22e9}
#: Dense BF16 tensor peak per GPU (NVIDIA H100 SXM and DGX B200 datasheets). [FLOP/s]
PEAK_BF16_FLOP_S = {"H100-SXM": 989.4e12, "B200": 2.25e15}
#: Achieved share of the dense BF16 peak during prefill (GH200 NVL32 figure, see above). [-]
PREFILL_EFFICIENCY_FRAC = 0.40


def prefill_tokens_per_s(model: str, gpu: str, gpus_per_replica: int) -> float:
    """Prompt tokens per second one replica prefills (compute-bound). [1/s]"""
    if model not in ACTIVE_PARAMS or gpu not in PEAK_BF16_FLOP_S:
        raise ValueError(f"no prefill rate for model {model!r} on {gpu!r}; known models: "
                         f"{', '.join(ACTIVE_PARAMS)}; GPUs: {', '.join(PEAK_BF16_FLOP_S)}")
    return gpus_per_replica * PREFILL_EFFICIENCY_FRAC * PEAK_BF16_FLOP_S[gpu] / (2.0 * ACTIVE_PARAMS[model])


@dataclass(slots=True)
class Cohort:
    """Requests arriving uniformly over ``[start_s, end_s)``."""

    n_req: float
    start_s: float
    end_s: float

    def arrival_s(self, taken_req: float) -> float:
        """Arrival time of the request ``taken_req`` places into the cohort. [s]"""
        return self.start_s + (self.end_s - self.start_s) * taken_req / self.n_req


class WaitQueue:
    """FIFO queue of request cohorts with an internal clock."""

    def __init__(self):
        self.cohorts: deque[Cohort] = deque()
        self.clock_s = 0.0

    def serve(self, dt_s: float, offered_req: float, arrived_req: float, capacity_req: float, max_wait_s: float,
              limit_s: float, quiet: bool, q_frac: float = 0.99) -> tuple[float, float, float, float, float]:
        """A fleet's step: serve what the replicas can of ``offered_req``, queue what may wait, drop the rest.

        ``capacity_req``: what the active replicas serve in ``dt_s``; ``max_wait_s``: the queue keeps at
        most that many seconds of the step's service; ``limit_s``: the wait a request may have to meet its
        TTFT deadline. ``quiet``: the queue advanced, the last two left at 0.

        Returns:
            ``(served, left, kept, served within limit_s, q_frac quantile of the served waits)``. [-, -, -, -, s]
        """
        served = min(offered_req, capacity_req)
        left = offered_req - served
        keep = min(left, max_wait_s * served / dt_s)
        waits = self.step(dt_s, arrived_req, served, keep)
        if quiet:
            return served, left, keep, 0.0, 0.0
        return served, left, keep, share_within(waits, limit_s), quantile(waits, q_frac) if served > 0 else 0.0

    def step(self, dt_s: float, arrived_req: float, served_req: float, kept_req: float) -> list[tuple]:
        """Serve ``served_req`` in ``dt_s``, keep ``kept_req`` queued (dropping the newest).

        Returns:
            ``(n_req, wait_lo_s, wait_hi_s)`` segments of the served requests' waits. [-, s, s]
        """
        t0 = self.clock_s
        cohorts = self.cohorts
        if arrived_req > 0:
            cohorts.append(Cohort(arrived_req, t0, t0 + dt_s))
        segments, done = [], 0.0
        rate = served_req / dt_s
        while served_req - done > 1e-12 and cohorts:
            head = cohorts[0]
            take = min(head.n_req, served_req - done)
            last = head.arrival_s(take)
            lo = t0 + done / rate - head.start_s
            hi = t0 + (done + take) / rate - last
            segments.append((take, max(lo, 0.0), max(hi, 0.0)))
            done += take
            if take >= head.n_req - 1e-12:
                cohorts.popleft()
            else:
                head.n_req, head.start_s = head.n_req - take, last
        if cohorts:  # (nothing left to drop from an empty queue: most steps)
            self._keep(kept_req)
        self.clock_s = t0 + dt_s
        return segments

    def _keep(self, kept_req: float) -> None:
        queued = 0.0
        for c in self.cohorts:  # (left to right, as _inference.c adds: not sum(), compensated from Python 3.12)
            queued += c.n_req
        extra = queued - kept_req
        while extra > 1e-12 and self.cohorts:
            tail = self.cohorts[-1]
            if tail.n_req <= extra + 1e-12:
                extra -= tail.n_req
                self.cohorts.pop()
            else:
                tail.end_s = tail.arrival_s(tail.n_req - extra)
                tail.n_req -= extra
                extra = 0.0

    def clear(self) -> None:
        self.cohorts.clear()

    def idle(self, dt_s: float) -> None:
        """A step with no replica serving: the queue emptied (its requests dropped), the clock on."""
        self.cohorts.clear()
        self.clock_s += dt_s


def share_within(segments: list[tuple], limit_s: float) -> float:
    """Requests of ``segments`` whose value is at most ``limit_s``. [-]"""
    total = 0.0
    for n, lo, hi in segments:
        # min/max clip a float as np.clip does (NaN stays NaN), at a fraction of its cost
        total += n * (float(limit_s >= lo) if hi <= lo else float(min(max((limit_s - lo) / (hi - lo), 0.0), 1.0)))
    return total


def quantile(segments: list[tuple], q_frac: float) -> float:
    """The ``q_frac`` quantile of a mixture of uniform segments (0 when empty). [s]"""
    total = 0.0
    for n, _, _ in segments:  # (left to right, as _inference.c adds: not sum(), compensated from Python 3.12)
        total += n
    if total <= 0:
        return 0.0
    low, high = min(s[1] for s in segments), max(s[2] for s in segments)
    if all(hi <= lo for _, lo, hi in segments):  # point masses (e.g. no queue): no search needed
        points = sorted((lo, n) for n, lo, _ in segments)
        if len(points) == 1 and q_frac <= 1.0:  # one cohort served (the common case): searchsorted picks it
            return points[0][0]
        cum = np.cumsum([n for _, n in points])
        return points[int(np.searchsorted(cum, q_frac * total * (1 - 1e-12)))][0]
    for _ in range(50):
        mid = 0.5 * (low + high)
        low, high = (mid, high) if share_within(segments, mid) < q_frac * total else (low, mid)
    return high
