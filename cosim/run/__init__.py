"""The run stage: engines (mosaik's world; the direct loop), the recorder, and one run's folder.

``run(path)`` validates a scenario, runs it and writes the run folder (time series, KPIs,
metadata, report); :mod:`cosim.run.mosaik_engine` is the only module that imports mosaik.
"""

from cosim.run.runner import RunInterrupted, RunResult, run, run_scenario

__all__ = ["RunInterrupted", "RunResult", "run", "run_scenario"]
