"""The run stage: engines (mosaik's world; the direct loop), the recorder, and one run's folder.

``run(path)`` validates a scenario, runs it and writes the run folder (time series, KPIs,
metadata, report); :mod:`cosim.run.mosaik_engine` is the only module that imports mosaik.

``cosim.run`` is both this package and the function users call (``cosim.run("x.toml")``): the
package's module object is callable and forwards to :func:`run`, so the name stays right whether
the package or the function was reached first (``cosim`` loads it lazily).
"""

import sys
import types

from cosim.run.runner import RunInterrupted, RunResult, run, run_scenario

__all__ = ["RunInterrupted", "RunResult", "run", "run_scenario"]


class _CallablePackage(types.ModuleType):
    """This package, callable as :func:`cosim.run.runner.run`."""

    def __call__(self, *args, **kwargs):
        return run(*args, **kwargs)


sys.modules[__name__].__class__ = _CallablePackage
