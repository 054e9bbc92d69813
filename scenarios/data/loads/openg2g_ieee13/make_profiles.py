"""Write profiles.csv: the time series of OpenG2G's IEEE-13 quickstart that are not the GPUs.

Facts from gpu2grid/openg2g (Apache-2.0; GPU-to-Grid, Liang et al., arXiv:2602.05116), as
documented in its run script examples/offline/run_ofo.py and openg2g/grid/{generator,load}.py,
re-implemented here (no code copied):

* ``p_site_mw``: the datacenter's non-GPU base, 500 kW per phase (1.5 MW), plus the training
  overlay: 2,400 GPUs, 1,000-2,000 s, a synthetic per-GPU trace rescaled so its peak is
  400 W (OpenG2G's generator: two-state envelope 225 W for 35-40 s / 175 W for 10-15 s,
  Gaussian noise 50 W at 0.1 s, 0.3 s moving average, brief Poisson dips, 18 s warm-up),
  period 1,000 s. Our draw of that generator (seed 2, numpy) at its own 0.1 s: not their
  exact trace.
* ``p_pv_mw``: SyntheticPV at 675, 10 kW per phase peak (30 kW), pf 1.
* ``p_load680_mw``: SyntheticLoad at 680, 10 kW per phase peak (30 kW), pf 0.96 (applied in
  the scenario).
* ``replicas_frac``: every fleet's replicas, 1 until 2,500 s, linearly to 0.5 at 3,000 s.

Run: ``python make_profiles.py`` (writes profiles.csv.gz next to this file: one hour at 0.1 s).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

T_S = 3600
TICKS_PER_S = 10  # rows per second
START = pd.Timestamp("2026-01-01T00:00:00Z")


def bump(t, centre, half_width):
    x = np.abs(np.asarray(t, float) - centre) / half_width
    return np.where(x < 1, (1 - x * x) ** 2, 0.0)


def fluct(t, s):
    two_pi = 2 * math.pi
    return (1.0 + 0.06 * np.sin(two_pi * t / 173.0 + s) + 0.05 * np.sin(two_pi * t / 97.3 + 2.3 * s)
            + 0.04 * np.sin(two_pi * t / 251.7 + 0.7 * s) + 0.03 * np.sin(two_pi * t / 41.9 + 4.1 * s)
            + 0.02 * np.sin(two_pi * t / 317.3 + 1.9 * s))


def training_trace_w(seed: int = 2, period_s: float = 1000.0, dt_s: float = 0.1) -> np.ndarray:
    """Per-GPU training power at ``dt_s`` over one period, peak 400 W. [W]"""
    rng = np.random.default_rng(seed)
    n = int(round(period_s / dt_s))
    env = np.empty(n)
    i, high = 0, True
    while i < n:
        length = int(round((rng.uniform(35, 40) if high else rng.uniform(10, 15)) / dt_s))
        env[i:i + length] = 225.0 if high else 175.0
        i += length
        high = not high
    p = env + rng.normal(0.0, 50.0, n)
    k = max(int(round(0.3 / dt_s)), 1)
    p = np.convolve(p, np.ones(k) / k, mode="same")
    for start in np.flatnonzero(rng.random(n) < 0.010 * dt_s):
        width = max(int(round(rng.uniform(0.06, 0.14) / dt_s)), 1)
        p[start:start + width] -= rng.uniform(120, 125)
    ramp = int(round(18.0 / dt_s))
    p[:ramp] = np.minimum(p[:ramp], np.linspace(50.0, 225.0, ramp))
    p = np.clip(p, 0.0, None)
    return p * (400.0 / p.max())


def main() -> None:
    n = T_S * TICKS_PER_S
    t = np.arange(n + 1) / TICKS_PER_S                      # 0.1 s rows, as OpenG2G's datacenter and grid step
    per_gpu = training_trace_w(dt_s=1.0 / TICKS_PER_S)
    k = np.arange(n + 1)                                    # the trace's sample at each row (period 1,000 s)
    train_mw = np.where((k >= 1000 * TICKS_PER_S) & (k < 2000 * TICKS_PER_S),
                        2400 * per_gpu[(k - 1000 * TICKS_PER_S) % len(per_gpu)] / 1e6, 0.0)
    trend = 0.85 - 0.30 * t / T_S
    cloud = np.maximum(1.0 - 0.55 * bump(t, 600, 120) - 0.40 * bump(t, 2100, 180), 0.05)
    pv_kw = np.maximum(10.0 * trend * cloud * fluct(t, 0.3), 0.0)
    load_kw = np.maximum(10.0 * (0.15 + 0.85 * bump(t, 2280, 1400) + 0.20 * bump(t, 2280, 180))
                         * (1.0 + 0.06 * np.sin(2 * math.pi * t / 130.0)), 0.0)
    replicas = np.clip(1.0 - 0.5 * (t - 2500) / 500, 0.5, 1.0)
    stamps = START + pd.to_timedelta(k * (1000 // TICKS_PER_S), unit="ms")
    frame = pd.DataFrame({"time_utc": stamps.strftime("%Y-%m-%dT%H:%M:%S.%f").str[:-3] + "Z",
                          "p_site_mw": np.round(1.5 + train_mw, 6), "p_pv_mw": np.round(3 * pv_kw / 1e3, 7),
                          "p_load680_mw": np.round(3 * load_kw / 1e3, 7), "replicas_frac": np.round(replicas, 6)})
    frame.to_csv(Path(__file__).with_name("profiles.csv.gz"), index=False, compression={"method": "gzip", "mtime": 0})
    print(f"training mean {train_mw[k >= 1000 * TICKS_PER_S][:1000 * TICKS_PER_S].mean():.3f} MW, "
          f"peak {train_mw.max():.3f} MW")


if __name__ == "__main__":
    main()
