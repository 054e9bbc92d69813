"""The OFO controller's per-fleet batch control: one inference fleet's batch size in ``log2 b``, its
latency dual and its primal step on the datacenter adapter's ML.ENERGY curves (OpenG2G's
``OFOBatchSizeController``; GPU-to-Grid Eqs. 7, 8 and 18)."""

from __future__ import annotations

import math

import numpy as np

from cosim.adapters.controllers.ofo.params import FleetControl, OFOParams
from cosim.adapters.datacenter.hardware import GPUS
from cosim.adapters.datacenter.inference import BatchCurves, batch_curves

__all__ = ["FleetBatch"]


class FleetBatch:
    """One fleet's batch-size state: ``x = log2 b`` (continuous), the applied size, ``μ``.

    Args:
        spec: the fleet.
    """

    _DX = 1e-3  # central-difference step of the curves' derivatives in log2 b

    def __init__(self, spec: FleetControl):
        self.spec = spec
        self.curves: BatchCurves = batch_curves(spec.model, spec.gpu, spec.n_gpus_per_replica)
        self.idle_w = GPUS[spec.gpu].idle_w
        top = math.floor(self.curves.b_max)
        sizes = sorted({min(b, top) for b in spec.n_batch_sizes})
        self.sizes = np.array(sizes, dtype=float)
        self.x_lo, self.x_hi = math.log2(sizes[0]), math.log2(sizes[-1])
        self.x = float(min(max(math.log2(spec.n_batch_init), self.x_lo), self.x_hi))
        self.x_prev = self.x
        self.batch = self._nearest(self.x)
        self.x_applied = math.log2(self.batch)
        self.mu = 0.0
        self.r_max = float(self.curves.tokens_per_s(2.0 ** self.x_hi))

    def power_w(self, x: float) -> float:
        """One replica's GPU power at batch ``2**x``. [W]"""
        return float(self.curves.power_w(2.0 ** x, self.idle_w)) * self.curves.gpus_per_replica

    def tokens_per_s(self, x: float) -> float:
        return float(self.curves.tokens_per_s(2.0 ** x))

    def itl_s(self, x: float) -> float:
        """Median inter-token latency at batch ``2**x``. [s]"""
        return float(self.curves.itl_ms(2.0 ** x)) / 1e3

    def _slope(self, f, x: float) -> float:
        lo, hi = max(x - self._DX, self.x_lo), min(x + self._DX, self.x_hi)
        return (f(hi) - f(lo)) / (hi - lo) if hi > lo else 0.0

    def _nearest(self, x: float) -> float:
        """The feasible size nearest ``2**x`` (in batch units). [-]"""
        b = 2.0 ** x
        return float(self.sizes[int(np.argmin(np.abs(self.sizes - b)))])

    def step(self, p: OFOParams, eta_per_kw: float, replicas_frac: float) -> None:
        """The latency dual, then one primal step (OpenG2G's order)."""
        self.mu = max(self.mu + p.latency_dual_step_per_s * (self.itl_s(self.x_applied) - self.spec.itl_deadline_ms / 1e3),
                      0.0)
        w = self.spec.n_replicas * replicas_frac
        x = self.x
        grad = (-p.throughput_weight_frac * w * self._slope(self.tokens_per_s, x) / self.r_max
                + p.voltage_weight_frac * eta_per_kw * w * self._slope(self.power_w, x) / 1000.0
                + self.mu * self._slope(self.itl_s, x) + p.switch_weight_frac * (x - self.x_prev))
        self.x_prev = x
        self.x = float(min(max(x - p.primal_step_frac * grad, self.x_lo), self.x_hi))
        self.batch = self._nearest(self.x)
        self.x_applied = math.log2(self.batch)

