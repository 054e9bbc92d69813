"""Live signals: one number read from an HTTP JSON source or a Prometheus query, polled in the background.

For live runs (``cosim serve``): a carbon-intensity API, a price feed, a site meter exported to
Prometheus. One simulator reads one source; its model ``LiveSignal`` (no params) reports:

* the value, under the name given in ``fallback`` (``fallback = { ci_g_kwh = 400.0 }``: the
  output ``ci_g_kwh``, reported as 400.0 until the first successful read);
* ``n_failed_polls``: polls that failed since the last good one; 0 while the value is fresh,
  more than 0 while the last good value is held (the *stale* flag); at least 1 before the
  first success (the fallback is reported then);
* ``age_s``: wall seconds since the reported value was read (NaN while the fallback is
  reported). [s]

A background thread polls every ``poll_s`` wall seconds, each read bounded by ``timeout_s``; a
step reports the latest reading and never waits for the network (only the first read, at
creation, is awaited, so a source that is up gives its value from the first step). A source
that fails, times out or answers nonsense never stops the run: the last good value is held
and the failure is counted and logged (``logging``, logger ``cosim.live_signal``).

Sources (``source``):

* ``json`` (default): ``GET url``; ``pointer`` is a JSON pointer (RFC 6901) to the number in
  the answer, e.g. ``"/data/carbonIntensity"`` (``""``: the answer is the number itself).
* ``prometheus``: the instant query ``GET <url>/api/v1/query?query=<query>`` of a Prometheus
  server (``url`` its base address, e.g. ``http://127.0.0.1:9090``); the query must give one
  series or a scalar (aggregate several with ``sum(...)`` or ``max(...)``).

Example::

    [sims.live_ci]
    adapter = "live_signal"
    url = "https://api.example.org/carbon/latest"
    pointer = "/data/ci"
    fallback = { ci_g_kwh = 400.0 }
    timeout_s = 2.0
    poll_s = 30.0

    [entities.ci_live]
    sim = "live_ci"
    model = "LiveSignal"

A live value depends on the wall clock and the source: a run using it is not reproducible, and
no catalogue scenario uses this adapter. Fetching a URL starts no program.
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field, model_validator

from cosim.sdk import Params, SingleModelSim, has_unit_suffix

LOG = logging.getLogger("cosim.live_signal")

#: Outputs every live signal reports besides its value.
STATUS_OUTPUTS = ("n_failed_polls", "age_s")


class SourceError(Exception):
    """A read that gave no usable number (network, HTTP status, JSON shape, query result)."""


class SimParams(Params):
    """Params of one live-signal simulator (the ``[sims.<id>]`` keys besides ``adapter``).

    Attributes:
        url: ``http://`` or ``https://`` address: the JSON resource, or the Prometheus server's base.
        source: ``json`` or ``prometheus``.
        pointer: JSON pointer to the number in a ``json`` answer (``""``: the whole answer).
        query: PromQL instant query (``prometheus`` only).
        fallback: ``{output: value}``: the output's name (with its unit suffix) and the value
            reported until the first successful read.
        timeout_s: longest wait for one read. [s]
        poll_s: wall time between two reads. [s]
    """

    url: str
    source: Literal["json", "prometheus"] = "json"
    pointer: str = ""
    query: str | None = None
    fallback: dict[str, float]
    timeout_s: float = Field(2.0, gt=0.0, le=60.0)
    poll_s: float = Field(10.0, ge=0.05, le=86_400.0)

    @model_validator(mode="after")
    def _consistent(self):
        problems = [text for check in (self._url_problem, self._fallback_problem, self._source_problem)
                    if (text := check())]
        if problems:  # every one at once, as the scenario's other problems
            raise ValueError("; ".join(problems))
        return self

    def _url_problem(self) -> str | None:
        parts = urllib.parse.urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            return f"url = {self.url!r}: give an http:// or https:// address, e.g. \"http://127.0.0.1:9090\""
        return None

    def _fallback_problem(self) -> str | None:
        if len(self.fallback) != 1:
            return (f"fallback = {self.fallback!r}: give exactly one output and its value before the first read, "
                    "e.g. { ci_g_kwh = 400.0 }")
        if not has_unit_suffix(self.attr) or self.attr in STATUS_OUTPUTS:
            return (f"fallback.{self.attr}: name the output with its unit suffix (e.g. ci_g_kwh, price_usd_mwh, "
                    f"p_mw), other than {', '.join(STATUS_OUTPUTS)}")
        return None

    def _source_problem(self) -> str | None:
        if self.pointer and not self.pointer.startswith("/"):
            return (f"pointer = {self.pointer!r}: a JSON pointer starts with '/', e.g. \"/data/ci\" "
                    "(\"\" for the whole answer)")
        if self.source == "prometheus" and not self.query:
            return "source = 'prometheus' needs query, e.g. query = \"sum(site_power_watts)\""
        if self.source == "json" and self.query is not None:
            return "query is for source = 'prometheus'; a json source reads url and pointer"
        if self.source == "prometheus" and self.pointer:
            return "pointer is for source = 'json'; a Prometheus query gives one number"
        return None

    @property
    def attr(self) -> str:
        """The value's output name."""
        return next(iter(self.fallback))

    @property
    def request_url(self) -> str:
        """What one read fetches."""
        if self.source == "prometheus":
            return f"{self.url.rstrip('/')}/api/v1/query?{urllib.parse.urlencode({'query': self.query})}"
        return self.url


# -- reading a source (plain Python: no thread, no mosaik) --------------------------------------
def fetch_json(url: str, timeout_s: float) -> Any:
    """The JSON answer of ``GET url``.

    Raises:
        SourceError: no answer within ``timeout_s``, an HTTP error status, or not JSON.
    """
    request = urllib.request.Request(url, headers={"Accept": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as answer:  # noqa: S310 — http(s) only (validated)
            body = answer.read(1_000_000)
    except urllib.error.HTTPError as exc:
        raise SourceError(f"HTTP {exc.code} from {url}") from None
    except (urllib.error.URLError, OSError, ValueError) as exc:  # refused, unreachable, timed out
        raise SourceError(f"no answer from {url}: {getattr(exc, 'reason', exc)}") from None
    try:
        return json.loads(body)
    except ValueError:
        raise SourceError(f"{url} did not answer JSON: {body[:60]!r}") from None


def at_pointer(document: Any, pointer: str) -> float:
    """The finite number at JSON ``pointer`` (RFC 6901) in ``document``.

    Raises:
        SourceError: the pointer leads nowhere, or not to a finite number.
    """
    value = document
    for token in pointer.split("/")[1:] if pointer else []:
        token = token.replace("~1", "/").replace("~0", "~")
        if isinstance(value, dict) and token in value:
            value = value[token]
        elif isinstance(value, list) and token.isdigit() and int(token) < len(value):
            value = value[int(token)]
        else:
            raise SourceError(f"pointer {pointer!r}: no {token!r} in the answer")
    return finite(value, f"pointer {pointer!r}")


def prometheus_value(answer: Any, query: str) -> float:
    """The one number of a Prometheus instant-query answer (one series, or a scalar).

    Raises:
        SourceError: the query failed, gave no series or several, or no finite number.
    """
    if not isinstance(answer, dict) or answer.get("status") != "success" or not isinstance(answer.get("data"), dict):
        error = answer.get("error") if isinstance(answer, dict) else None
        raise SourceError(f"query {query!r} failed: {error or 'not a Prometheus API answer'}")
    data = answer["data"]
    result = data.get("result")
    if data.get("resultType") in ("scalar", "string"):
        sample = result
    elif data.get("resultType") == "vector" and isinstance(result, list):
        if len(result) != 1:
            raise SourceError(f"query {query!r} gave {len(result)} series; it must give one (aggregate them with "
                              "sum(...) or max(...))")
        sample = result[0].get("value") if isinstance(result[0], dict) else None
    else:
        raise SourceError(f"query {query!r} gave a {data.get('resultType')!r} result; give an instant vector or scalar")
    if not isinstance(sample, list) or len(sample) != 2:
        raise SourceError(f"query {query!r}: a sample is [time, \"value\"], got {sample!r}")
    try:
        return finite(float(sample[1]), f"query {query!r}")
    except (TypeError, ValueError):
        raise SourceError(f"query {query!r}: the value {sample[1]!r} is not a number") from None


def finite(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise SourceError(f"{where}: {value!r} is not a finite number")
    return float(value)


def read_source(params: SimParams) -> float:
    """One read of the source the params describe. Raises :class:`SourceError`."""
    answer = fetch_json(params.request_url, params.timeout_s)
    if params.source == "prometheus":
        return prometheus_value(answer, params.query or "")
    return at_pointer(answer, params.pointer)


@dataclass(frozen=True)
class Reading:
    """What a step reports: the value, the failed polls since the last good one, and when it was read."""

    value: float
    n_failed_polls: int
    read_at: float | None  # time.monotonic() of the good read (None: the fallback)

    def outputs(self, attr: str, now: float) -> dict[str, Any]:
        age_s = math.nan if self.read_at is None else max(0.0, now - self.read_at)
        return {attr: self.value, "n_failed_polls": self.n_failed_polls, "age_s": age_s}


class Poller:
    """Reads a source now and then every ``poll_s`` on a daemon thread; :meth:`latest` never blocks on it.

    Args:
        read: one read, raising :class:`SourceError` when it gives nothing.
        fallback: the value before the first good read.
        poll_s: wall time between reads. [s]
        label: how log lines name the source.
    """

    def __init__(self, read, fallback: float, poll_s: float, label: str):
        self._read, self._poll_s, self._label = read, poll_s, label
        self._lock = threading.Lock()
        self._reading = Reading(float(fallback), 0, None)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """The first read (awaited), then the thread."""
        self.poll()
        self._thread = threading.Thread(target=self._loop, name=f"live-signal {self._label}", daemon=True)
        self._thread.start()

    def poll(self) -> None:
        """One read; on failure the last good value is kept and the failure counted."""
        try:
            value = self._read()
        except SourceError as exc:
            with self._lock:
                old = self._reading
                self._reading = Reading(old.value, old.n_failed_polls + 1, old.read_at)
            if old.n_failed_polls == 0:  # once per outage, not every poll
                LOG.warning("live signal %s: %s; holding %s", self._label, exc,
                            "the fallback value" if old.read_at is None else f"the last value {old.value:g}")
            return
        with self._lock:
            recovered = self._reading.n_failed_polls > 0 and self._reading.read_at is not None
            self._reading = Reading(value, 0, time.monotonic())
        if recovered:
            LOG.warning("live signal %s: the source answers again (%g)", self._label, value)

    def latest(self) -> Reading:
        with self._lock:
            return self._reading

    def stop(self) -> None:
        """Stop the thread (it ends within one read's timeout; it is a daemon either way)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=0.1)

    def _loop(self) -> None:
        while not self._stop.wait(self._poll_s):
            self.poll()


class LiveSignalSim(SingleModelSim):
    """mosaik face of :class:`Poller`: each step reports the source's latest reading."""

    MODEL = "LiveSignal"
    ROLE = "signal"
    OUTPUTS = STATUS_OUTPUTS  # and the value, named in the params (meta_for)
    SimParams = SimParams
    EXAMPLE = {"sim": {"url": "http://127.0.0.1:9/", "fallback": {"ci_g_kwh": 400.0}, "timeout_s": 0.5},
               "models": {"LiveSignal": {}}, "single": ["LiveSignal"]}

    @classmethod
    def meta_for(cls, sim_params: SimParams) -> dict[str, Any]:
        return cls.single_meta(outputs=(sim_params.attr, *STATUS_OUTPUTS))

    def setup(self) -> None:
        super().setup()
        self.poller: Poller | None = None

    def build(self, eid: str, params: None) -> Poller:
        if self.poller is None:  # one source per simulator: its entities report the same reading
            p = self.params
            self.poller = Poller(lambda: read_source(p), p.fallback[p.attr], p.poll_s, f"{self.sid} ({p.request_url})")
            self.poller.start()
        return self.poller

    def advance(self, poller: Poller, time_s: float, inputs: dict[str, Any]) -> dict[str, Any]:
        return poller.latest().outputs(self.params.attr, time.monotonic())

    def finalize(self) -> None:
        if self.poller is not None:
            self.poller.stop()
