"""LLM inference: request arrivals, continuous batching, and ML.ENERGY curves vs batch size.

Each fleet is ``replicas`` copies of one model on ``gpus_per_replica`` GPUs. Per step a fluid
model of continuous batching (vLLM-style) finds the running batch that serves the offered
token rate: throughput ``T(b)`` is the measured output tokens/s at batch ``b``; if even
``max_batch`` cannot keep up, the batch saturates and requests queue, and those that would
wait longer than ``max_wait_s`` are dropped. Power per GPU, throughput, median and p99
inter-token latency (ITL) vs batch are fitted to the ML.ENERGY Benchmark v3 (Chung et al.,
NeurIPS D&B 2025; lm-arena-chat task, vLLM, H100 and B200) as quadratics in ``ln b``
(``ln`` of the value too, except power): smooth, and within the tolerance the tests state.
Time to first token is queueing wait plus prefill (:mod:`.prefill`); a request meets its SLO
when its TTFT and the step's p99 ITL both meet their deadlines.
"""

from __future__ import annotations

import bisect
import functools
from dataclasses import dataclass

import numpy as np
import pandas as pd

from cosim.adapters.datacenter.inference_kernel import wait_queue
from cosim.adapters.datacenter.training import DATA, capped

MLENERGY_FILE = DATA / "mlenergy" / "mlenergy_lm_arena_chat.csv"
ARRIVAL_TRACES = {"azure_code": DATA / "azure_llm" / "AzureLLMInferenceTrace_code.csv.gz",
                  "azure_conv": DATA / "azure_llm" / "AzureLLMInferenceTrace_conv.csv.gz",
                  "mooncake_conv": DATA / "mooncake" / "conversation_trace.csv.gz"}
#: Model keys -> ML.ENERGY nicknames.
MODELS = {"llama-3.1-8b": "Llama 3.1 8B Instruct", "llama-3.1-70b": "Llama 3.1 70B Instruct",
          "llama-3.1-405b-fp8": "Llama 3.1 405B Instruct FP8", "qwen-3-30b-a3b": "Qwen 3 30B A3B Instruct",
          "qwen-3-235b-a22b": "Qwen 3 235B A22B Instruct"}
#: Catalogue GPU keys -> ML.ENERGY ``gpu_model``.
MLENERGY_GPUS = {"H100-SXM": "H100", "B200": "B200"}


@dataclass(frozen=True)
class BatchCurves:
    """Fitted curves of one (model, GPU, GPUs per replica) configuration.

    Attributes:
        gpus_per_replica: GPUs one replica spans (tensor parallel). [-]
        b_min, b_max: measured batch range; the fits hold inside it. [-]
        coef_*: ``np.polyfit`` coefficients in ``ln b``.
        points: the measured rows (for tests and plots).
    """

    gpus_per_replica: int
    b_min: float
    b_max: float
    coef_power: np.ndarray
    coef_tput: np.ndarray
    coef_itl: np.ndarray
    coef_itl_p99: np.ndarray
    points: pd.DataFrame

    # A fleet evaluates these at one batch per step: a scalar takes plain-float branches
    # (min/max for np.clip, an if for np.where, Horner in _polyval), the same arithmetic
    # without numpy's per-call cost on 0-d values; ln and exp stay numpy's.
    def _inside(self, batch):
        if np.ndim(batch) == 0:
            return np.log(min(max(float(batch), self.b_min), self.b_max))
        return np.log(np.clip(batch, self.b_min, self.b_max))

    @functools.cached_property
    def _power_at_b_min(self) -> float:
        """The fitted power at ``b_min``, where the ramp from idle ends. [W]"""
        return _polyval(self.coef_power, np.log(self.b_min))

    def power_w(self, batch, idle_w: float):
        """Per-GPU power at running batch ``batch``; linear from ``idle_w`` at 0 to ``b_min``. [W]"""
        at_b_min = self._power_at_b_min
        if np.ndim(batch) == 0:
            b = float(batch)
            return idle_w + (at_b_min - idle_w) * b / self.b_min if b < self.b_min else _polyval(
                self.coef_power, self._inside(b))
        batch = np.asarray(batch, float)
        fitted = _polyval(self.coef_power, self._inside(batch))
        ramp = idle_w + (at_b_min - idle_w) * batch / self.b_min
        return np.where(batch < self.b_min, ramp, fitted)

    def tokens_per_s(self, batch):
        """Output tokens/s of one replica; proportional to ``batch`` below ``b_min``. [1/s]"""
        if np.ndim(batch) == 0:
            b = float(batch)
            fitted = np.exp(_polyval(self.coef_tput, self._inside(b)))
            return fitted * b / self.b_min if b < self.b_min else fitted
        batch = np.asarray(batch, float)
        fitted = np.exp(_polyval(self.coef_tput, self._inside(batch)))
        return np.where(batch < self.b_min, fitted * batch / self.b_min, fitted)

    @functools.cached_property
    def _coef_lists(self) -> tuple[list[float], list[float], list[float], list[float]]:
        return (self.coef_power.tolist(), self.coef_tput.tolist(), self.coef_itl.tolist(),
                self.coef_itl_p99.tolist())

    def at_batch(self, batch: float, idle_w: float, median: bool = True) -> tuple[float, float, float, float]:
        """``(power_w, tokens_per_s, itl_ms, itl_p99_ms)`` at one running batch: the four scalar
        methods' numbers, with ``ln b`` taken once instead of four times (``median=False``: the
        median ITL left out, NaN). [W, 1/s, ms, ms]"""
        b, b_min = float(batch), self.b_min
        x = float(np.log(min(max(b, b_min), self.b_max)))
        power, _, itl, itl_p99 = self._coef_lists
        p_w = idle_w + (self._power_at_b_min - idle_w) * b / b_min if b < b_min else _horner(power, x)
        itl_ms = float(np.exp(_horner(itl, x))) if median else float("nan")
        return p_w, self._tokens(b, x), itl_ms, float(np.exp(_horner(itl_p99, x)))

    def tokens_at(self, batch: float) -> float:
        """:meth:`at_batch`'s ``tokens_per_s`` alone, by the same operations. [1/s]"""
        b = float(batch)
        return self._tokens(b, float(np.log(min(max(b, self.b_min), self.b_max))))

    def _tokens(self, b: float, x: float) -> float:
        """Tokens/s at batch ``b`` with ``x = ln(b clipped to the fit's range)``. [1/s]"""
        fitted = float(np.exp(_horner(self._coef_lists[1], x)))  # (a float64 and its float multiply alike)
        return fitted * b / self.b_min if b < self.b_min else fitted

    def itl_ms(self, batch):
        """Median inter-token latency. [ms]"""
        return np.exp(_polyval(self.coef_itl, self._inside(batch)))

    def itl_p99_ms(self, batch):
        """99th-percentile inter-token latency. [ms]"""
        return np.exp(_polyval(self.coef_itl_p99, self._inside(batch)))


def _polyval(coef: np.ndarray, x):
    """``np.polyval``; a scalar by Horner's rule on Python floats, the multiply-then-add
    sequence np.polyval runs, in the same double precision (no fused multiply-add)."""
    if np.ndim(x):
        return np.polyval(coef, x)
    return _horner(coef.tolist(), float(x))


def _horner(coef: list[float], x: float) -> float:
    if len(coef) == 3:  # (the fits' degree 2: the loop below, unrolled)
        return ((0.0 * x + coef[0]) * x + coef[1]) * x + coef[2]
    y = 0.0
    for c in coef:
        y = y * x + c
    return y


def interp_one(x: float, xp: list[float], fp: list[float], right: float) -> float:
    """``float(np.interp(x, xp, fp, right=right))`` for one ``x`` on Python floats. [-]

    The operations np.interp makes for one value, in the same order and double precision: the
    interval ``xp[j] <= x < xp[j + 1]`` (the last such ``j`` where ``xp`` repeats a value, as its
    search finds), ``fp[j]`` on a point of ``xp``, else ``slope * (x - xp[j]) + fp[j]`` with the
    slope ``(fp[j + 1] - fp[j]) / (xp[j + 1] - xp[j])`` and, should that be NaN, from the right
    end; without numpy's per-call cost on one value (tests/adapters/datacenter/test_dc_inference.py
    compares the two over random and edge values).
    """
    last = len(xp) - 1
    if last == 0:  # (one point: np.interp compares only, a NaN x included)
        return fp[0] if x < xp[0] else float(right) if x > xp[0] else fp[0]
    if x != x:
        return x
    if x > xp[last]:
        return float(right)
    if x < xp[0]:
        return fp[0]
    j = bisect.bisect_right(xp, x) - 1
    if j == last or xp[j] == x:
        return fp[j]
    slope = (fp[j + 1] - fp[j]) / (xp[j + 1] - xp[j])
    value = slope * (x - xp[j]) + fp[j]
    if value != value:
        value = slope * (x - xp[j + 1]) + fp[j + 1]
        if value != value and fp[j] == fp[j + 1]:
            value = fp[j]
    return value


@functools.lru_cache(maxsize=None)
def _measured(model: str, gpu: str) -> tuple[int, ...]:
    return tuple(sorted(int(n) for n in _rows(model, gpu)["num_gpus"].unique()))


def measured_gpus_per_replica(model: str, gpu: str) -> list[int]:
    """The GPUs-per-replica (tensor-parallel) configurations ML.ENERGY measured ``model`` on ``gpu`` in. [-]"""
    return list(_measured(model, gpu))


@functools.lru_cache(maxsize=None)
def _mlenergy() -> pd.DataFrame:
    return pd.read_csv(MLENERGY_FILE)


def _rows(model: str, gpu: str) -> pd.DataFrame:
    if model not in MODELS:
        raise ValueError(f"unknown inference model {model!r}; known: {', '.join(MODELS)}")
    if gpu not in MLENERGY_GPUS:
        raise ValueError(f"no ML.ENERGY inference data for GPU {gpu!r}; measured: {', '.join(MLENERGY_GPUS)}")
    data = _mlenergy()
    return data[(data["nickname"] == MODELS[model]) & (data["gpu_model"] == MLENERGY_GPUS[gpu])]


def batch_curves(model: str, gpu: str, gpus_per_replica: int | None = None) -> BatchCurves:
    """The fitted ML.ENERGY curves of ``model`` on ``gpu`` with ``gpus_per_replica`` GPUs per replica
    (default: the fewest measured); one fit per configuration, shared."""
    measured = measured_gpus_per_replica(model, gpu)
    n = measured[0] if gpus_per_replica is None else gpus_per_replica
    if n not in measured:
        raise ValueError(f"n_gpus_per_replica = {gpus_per_replica}: ML.ENERGY measured {model} on {gpu} with "
                         f"{' or '.join(map(str, measured))} GPU(s) per replica; use one of these")
    return _fit(model, gpu, n)


@functools.lru_cache(maxsize=None)
def _fit(model: str, gpu: str, n: int) -> BatchCurves:
    rows = _rows(model, gpu)
    rows = rows[rows["num_gpus"] == n].sort_values("avg_batch_size")
    log_b = np.log(rows["avg_batch_size"].to_numpy())
    fit = functools.partial(np.polyfit, log_b, deg=2)
    return BatchCurves(
        gpus_per_replica=n,
        b_min=float(rows["avg_batch_size"].min()), b_max=float(rows["avg_batch_size"].max()),
        coef_power=fit(rows["avg_power_w_per_gpu"].to_numpy()),
        coef_tput=fit(np.log(rows["output_throughput_tok_s"].to_numpy())),
        coef_itl=fit(np.log(rows["median_itl_ms"].to_numpy())),
        coef_itl_p99=fit(np.log(rows["p99_itl_ms"].to_numpy())),
        points=rows.reset_index(drop=True),
    )


# -- arrivals ---------------------------------------------------------------------------------
@functools.lru_cache(maxsize=None)
def trace_input_tokens(kind: str) -> float:
    """Mean prompt (input) tokens per request of a trace (``ContextTokens``, ``input_length``). [-]"""
    if kind not in ARRIVAL_TRACES:
        raise ValueError(f"unknown arrival trace {kind!r}; known: {', '.join(ARRIVAL_TRACES)}")
    column = "ContextTokens" if kind.startswith("azure") else "input_length"
    return float(pd.read_csv(ARRIVAL_TRACES[kind], usecols=[column])[column].mean())


@functools.lru_cache(maxsize=None)
def trace_profile(kind: str) -> tuple[np.ndarray, float]:
    """Per-minute arrival counts of a request trace normalised to mean 1, and its mean output tokens.

    ``kind``: ``azure_code``, ``azure_conv`` (Patel et al., ISCA 2024) or ``mooncake_conv``
    (Qin et al., FAST 2025). The last, partial minute is dropped.
    """
    if kind not in ARRIVAL_TRACES:
        raise ValueError(f"unknown arrival trace {kind!r}; known: {', '.join(ARRIVAL_TRACES)}, synthetic")
    frame = pd.read_csv(ARRIVAL_TRACES[kind])
    if kind.startswith("azure"):
        times_s = pd.to_datetime(frame["TIMESTAMP"]).to_numpy(dtype="datetime64[ns]").astype(np.int64) / 1e9
        tokens = frame["GeneratedTokens"]
    else:
        times_s, tokens = frame["timestamp_ms"].to_numpy() / 1e3, frame["output_length"]
    minute = ((times_s - times_s[0]) // 60).astype(int)
    counts = np.bincount(minute)[:-1].astype(float)
    return counts / counts.mean(), float(tokens.mean())


def arrival_rate(kind: str, rate_req_s: float, time_s: float, dt_s: float, start_hour_utc: float,
                 diurnal_amp_frac: float = 0.0, peak_hour_utc: float = 18.0,
                 rng: np.random.Generator | None = None) -> float:
    """Mean arrival rate over the step ``[time_s, time_s + dt_s)`` after the scenario start. [1/s]

    ``azure_code``/``azure_conv``/``mooncake_conv``: the trace's minute-by-minute counts, repeated hourly,
    scaled to mean ``rate_req_s`` (its burstiness kept); ``synthetic``: Poisson counts around
    the mean (``rng`` required). Both are modulated by
    ``1 + diurnal_amp_frac * cos(2 pi (hour - peak_hour_utc) / 24)``. (A fleet's step passes every
    argument by position: cheaper than by name.)
    """
    if diurnal_amp_frac == 0.0:  # 1 + 0 * cos(...) is 1 exactly, and rate * 1 is rate: no cosine needed
        mean = rate_req_s * 1.0
    else:
        hour = start_hour_utc + time_s / 3600.0
        # numpy's cosine (math.cos differs in the last bit), the rest on Python floats: the same
        # double operations as on numpy's scalars, without their cost
        mean = rate_req_s * (1.0 + diurnal_amp_frac * float(np.cos(2 * np.pi * (hour - peak_hour_utc) / 24.0)))
    if kind == "synthetic":
        if rng is None:
            raise ValueError("synthetic arrivals need a seeded rng")
        return float(rng.poisson(mean * dt_s)) / dt_s
    profile = _profile_values(kind)
    return float(mean * profile[int(time_s // 60) % len(profile)])


@functools.lru_cache(maxsize=None)
def _profile_values(kind: str) -> list[float]:
    """:func:`trace_profile`'s counts as Python floats (the same values, read one a step)."""
    return trace_profile(kind)[0].tolist()


# -- the fleet --------------------------------------------------------------------------------------
@dataclass
class FleetStep:
    """What one fleet did in one step (totals over its active replicas)."""

    batch: float
    p_gpu_w: float
    tokens_per_s: float
    itl_ms: float
    itl_p99_ms: float
    served_req: float
    good_req: float
    dropped_req: float
    queued_req: float
    ttft_p99_ms: float = 0.0
    ttft_good_req: float = 0.0
    itl_good_req: float = 0.0


class Fleet:
    """Replicas of one model with a request queue.

    Args:
        curves: fitted :class:`BatchCurves`.
        replicas: replicas deployed. [-]
        max_batch: cap on running sequences per replica (vLLM ``max_num_seqs``). [-]
        output_tokens: mean output tokens per request. [-]
        idle_w, tdp_w: the GPU's idle power and maximum limit. [W]
        itl_slo_ms: p99 ITL deadline. [ms]
        ttft_slo_s: time-to-first-token deadline (queueing wait + prefill). [s]
        max_wait_s: requests waiting longer are dropped. [s]
        input_tokens: mean prompt tokens per request. [-]
        prefill_tok_s: prompt tokens one replica prefills per second (:mod:`.prefill`). [1/s]
    """

    def __init__(self, curves: BatchCurves, replicas: int, max_batch: int, output_tokens: float,
                 idle_w: float, tdp_w: float, itl_slo_ms: float = 100.0, ttft_slo_s: float = 2.0,
                 max_wait_s: float = 120.0, input_tokens: float = 0.0, prefill_tok_s: float = float("inf")):
        self.curves = curves
        self.replicas = replicas
        self.max_batch = max_batch
        self.output_tokens = output_tokens
        self.idle_w, self.tdp_w = idle_w, tdp_w
        self.itl_slo_ms, self.ttft_slo_s, self.max_wait_s = itl_slo_ms, ttft_slo_s, max_wait_s
        self.queue_req = 0.0
        self.input_tokens, self.prefill_tok_s = input_tokens, prefill_tok_s
        self.waits = wait_queue()
        self._grid = np.geomspace(0.05, curves.b_max, 400)
        self._tput = np.maximum.accumulate(curves.tokens_per_s(self._grid))
        self._table_for: tuple | None = None  # what _table made for the last max_batch
        self._settings: tuple | None = None  # what _settings_for made for the last knobs

    @property
    def n_gpus(self) -> int:
        return self.replicas * self.curves.gpus_per_replica

    def batch_for(self, tokens_per_s: float, max_batch: float) -> float:
        """Smallest running batch whose throughput meets ``tokens_per_s`` (<= ``max_batch``). [-]"""
        if tokens_per_s <= 0:
            return 0.0
        table = self._table_for
        if table is None or table[0] != max_batch:
            table = self._table(max_batch)
        return interp_one(tokens_per_s, table[4], table[3], max_batch)

    def _table(self, max_batch: float) -> tuple:
        """``(max_batch, batch grid up to it, its non-decreasing throughput, both as lists)``. [-, -, 1/s, -, 1/s]

        Kept for the last ``max_batch``: it changes only with a knob, and rebuilding the
        table was most of a step's inference cost.
        """
        inside = self._grid < max_batch
        grid = np.append(self._grid[inside], max_batch)
        tput = np.maximum.accumulate(np.append(self._tput[inside], self.curves.tokens_per_s(max_batch)))
        self._table_for = (max_batch, grid, tput, grid.tolist(), tput.tolist())
        return self._table_for

    def _settings_for(self, max_batch: float | None, active_frac: float) -> tuple:
        """``(key, max_batch in force, active replicas, throughput table, batch table)`` for these knobs:
        constant while the knobs, ``max_batch`` and ``replicas`` stay (kept for the last ones). [-, -, -, 1/s, -]"""
        key = (max_batch, active_frac, self.max_batch, self.replicas)
        settings = self._settings
        if settings is None or settings[0] != key:
            max_batch = min(max_batch or self.max_batch, self.curves.b_max)
            table = self._table_for
            if table is None or table[0] != max_batch:
                table = self._table(max_batch)
            settings = self._settings = (key, max_batch, max(int(round(self.replicas * active_frac)), 0),
                                         table[4], table[3])
        return settings

    def step(self, dt_s: float, rate_req_s: float, *, active_frac: float = 1.0, max_batch: int | None = None,
             p_cap_w: float | None = None, quiet: bool = False) -> FleetStep | None:
        """Serve ``rate_req_s * dt_s`` new requests plus the queue for ``dt_s`` seconds.

        ``quiet``: the same step, its queue and waits advanced, and no :class:`FleetStep` made
        (``None``; a warm-up's steps whose outputs no one reads)."""
        values = self.advance(dt_s, rate_req_s, active_frac, max_batch, p_cap_w, quiet)
        return None if values is None else FleetStep(*values)

    def advance(self, dt_s: float, rate_req_s: float, active_frac: float = 1.0, max_batch: int | None = None,
                p_cap_w: float | None = None, quiet: bool = False, median: bool = True) -> tuple | None:
        """:meth:`step`'s numbers as a tuple in :class:`FleetStep`'s field order (``median=False``: its
        ``itl_ms`` left out, NaN), or None when ``quiet``."""
        _, max_batch, active, tput_table, batch_table = self._settings_for(max_batch, active_frac)
        offered = self.queue_req + rate_req_s * dt_s
        if active == 0:
            self.waits.idle(dt_s)
            self.queue_req = 0.0  # (the queue's requests are dropped)
            if quiet:
                return None
            return (0.0, self.idle_w, 0.0, 0.0, 0.0, 0.0, 0.0, offered, 0.0, 0.0, 0.0, 0.0)
        need_tps = offered * self.output_tokens / dt_s / active
        batch = 0.0 if need_tps <= 0 else interp_one(need_tps, tput_table, batch_table, max_batch)
        if quiet and p_cap_w is None:  # the throughput alone (at_batch's number, by its operations)
            tokens_per_s, speed = self.curves.tokens_at(batch), 1.0
        else:
            p_w, tokens_per_s, itl_ms, itl_p99_ms = self.curves.at_batch(batch, self.idle_w, median)
            speed, p_gpu = (1.0, p_w) if p_cap_w is None else self._capped(batch, p_cap_w, p_w)  # (as _capped has it)
        capacity_req = tokens_per_s * speed * active * dt_s / self.output_tokens
        prefill_s = 0.0 if quiet else self.input_tokens / (self.prefill_tok_s * speed)
        served, left, keep, ttft_good, wait_q = self.waits.serve(
            dt_s, offered, rate_req_s * dt_s, capacity_req, self.max_wait_s, self.ttft_slo_s - prefill_s, quiet)
        self.queue_req = keep
        if quiet:
            return None
        itl_p99 = itl_p99_ms / speed
        itl_good = served if itl_p99 <= self.itl_slo_ms else 0.0
        ttft_p99_ms = 1e3 * (wait_q + prefill_s) if served > 0 else 0.0
        return (batch, p_gpu, served * self.output_tokens / dt_s, itl_ms / speed, itl_p99, served,
                ttft_good if itl_good > 0 else 0.0, left - keep, keep, ttft_p99_ms, ttft_good, itl_good)

    def _capped(self, batch: float, p_cap_w: float | None, p_w: float | None = None) -> tuple[float, float]:
        """``(speed_frac, per-GPU power)`` at ``batch`` under cap ``p_cap_w`` (Zeus curves); ``p_w``:
        the uncapped power at ``batch`` when the caller has it. [-, W]"""
        if p_w is None:
            p_w = float(self.curves.power_w(batch, self.idle_w))
        if p_cap_w is None or p_cap_w >= self.tdp_w or p_w <= 0:
            return 1.0, p_w
        speed, power = capped(p_cap_w / p_w)
        speed_tdp, power_tdp = capped(self.tdp_w / p_w)  # relative to the default limit
        return float(min(speed / speed_tdp, 1.0)), float(min(p_w * min(power / power_tdp, 1.0), p_cap_w))
