"""One episode of a scenario stepped decision by decision: its Session, its rows and its reward terms.

Both envs (:class:`~cosim.gym.env.CosimEnv`, :class:`~cosim.gym.parallel.CosimParallelEnv`)
run on this. A decision at time ``t`` holds its inputs (``Session.set``) over
``[t, t + decision_s)``; during it the episode steps the scenario one recording step at a
time and, after each, reads the row the recorder writes at that time (the outputs every
simulator reported at or before it), so the reward terms see every recorded step.
"""

from __future__ import annotations

import dataclasses
import math
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from cosim.gym import snapshot
from cosim.gym.outputs import OutputReader
from cosim.gym.rewards import RewardTerms
from cosim.gym.spec import EpisodeSpec, episode_starts
from cosim.run import blas
from cosim.run.session import Session
from cosim.scenario import Scenario


def variant(scn: Scenario, seed: int, start: datetime | None) -> Scenario:
    """``scn`` with another seed and start, without validating it again (the env validated the
    start days it draws from); the overrides say so in ``metadata.json``."""
    start = start or scn.scenario.start
    section = scn.scenario.model_copy(update={"seed": int(seed), "start": start, "engine": "direct"})
    overrides = {**scn.overrides, "scenario.seed": int(seed), "scenario.start": start.isoformat()}
    return dataclasses.replace(scn, scenario=section, overrides=overrides)


class Episode:
    """The running part of an env (see the module docstring).

    Args:
        scn: the validated scenario (engine ``direct``).
        spec: decision length, time limit, recording.
        out_dir: where run folders go when recording. [path]
        report: write ``report.html`` into each run folder.
    """

    def __init__(self, scn: Scenario, spec: EpisodeSpec, out_dir: str | Path = "runs", report: bool = False):
        self.base = scn
        self.spec = spec
        self.out_dir, self.report = out_dir, report
        self.record_s = scn.record_step_s
        self.duration_s = scn.scenario.duration_s
        self.terms = RewardTerms(scn)
        self.starts = episode_starts(scn, spec)  # the start days its resets may draw
        self.session: Session | None = None
        self.t_s = 0
        self.n_decisions = 0
        self.run_dirs: list[Path] = []
        self._read: OutputReader | None = None  # the term columns' outputs now

    # -- lifecycle ----------------------------------------------------------------------------
    def start(self, seed: int, start: datetime | None = None) -> None:
        """A new Session of the scenario with this seed and start (the last one closed first), its
        simulators built or, where they allow it, copied from ones set up before (:mod:`.snapshot`)."""
        self.close()
        scn = variant(self.base, seed, start)
        kept = snapshot.kept_for(self.base)
        built = kept.take(scn)
        self.session = Session(scn, out_dir=self.out_dir, record=self.spec.record, report=self.report, built=built)
        kept.keep(scn, self.session.engine, built, self.starts)
        self.t_s = 0
        self.n_decisions = 0
        self.terms.reset()
        self._read = OutputReader(self.session.engine, self.terms.columns)

    def close(self) -> Path | None:
        """Close the Session; the run folder it wrote (None when not recording)."""
        if self.session is None:
            return None
        result = self.session.close()
        self.session = None
        if result is None:
            return None
        self.run_dirs.append(result.run_dir)
        return result.run_dir

    # -- where it is ------------------------------------------------------------------------------
    @property
    def engine(self):
        return self.session.engine

    @property
    def utc(self) -> datetime:
        """UTC time of the next decision."""
        return self.session.scn.scenario.start + timedelta(seconds=self.t_s)

    @property
    def terminated(self) -> bool:
        """The scenario reached its end, or a simulator ended it early (``Session.ended``)."""
        return self.t_s >= self.duration_s or (self.session is not None and self.session.ended is not None)

    @property
    def truncated(self) -> bool:
        """The time limit (``max_decisions``) stopped the episode before the end."""
        limit = self.spec.max_decisions
        return limit is not None and self.n_decisions >= limit and not self.terminated

    # -- one decision ---------------------------------------------------------------------------
    def decide(self, settings: list[tuple[str, str, float]]) -> dict[str, float]:
        """Hold ``(entity, input, value)`` settings over one decision; its reward terms."""
        if self.session is None or self.terminated or self.truncated:
            raise RuntimeError("the episode is over (or not started): call reset()")
        for eid, attr, value in settings:
            self.session.set(eid, attr, value)
        end = min(self.t_s + self.spec.decision_s, self.duration_s)
        rows = []
        with blas.one_thread():  # once for the decision: the Session's own limits inside it only count
            for t in range(self.t_s, end, self.record_s):
                self.session.run_until(t + 1)  # every simulator due at or before t has stepped
                if self.session.ended is not None:  # a simulator ended the run at t: no row of t
                    break
                rows.append(self._row())
            self.t_s = end
            self.n_decisions += 1
            if self.terminated and self.session.ended is None:
                self.session.run_until(self.duration_s)  # the steps after the last recorded one
        return self.terms.compute_rows(rows)

    def _row(self) -> list[float]:
        """The term columns now, as the recorder converts them (None and text as NaN)."""
        return [value if type(value) is float else _number(value) for value in self._read()]


def _number(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan
