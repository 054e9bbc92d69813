"""Instruction count of a stretch of the default scenario on the direct engine (repeatable, unlike seconds).

Run under valgrind with instrumentation off at start; the script switches it on only for the steps measured::

    valgrind --tool=callgrind --instr-atstart=no .venv/bin/python bench/callgrind_session.py 0.05 1500

Arguments: the day of 2024 to start measuring at (after stepping there uninstrumented) and the number of steps;
``--python-fleets`` steps the datacenter's inference fleets in Python instead of their C form (to compare the two).
valgrind prints ``I refs``: the instructions of those steps (all threads, the recorder's writer included; with
``--separate-threads=yes`` each thread's own file).
"""

import os
import shutil
import subprocess
import sys
import tempfile
from datetime import datetime, timezone

import cosim

args = [a for a in sys.argv[1:] if a != "--python-fleets"]
if len(args) != len(sys.argv) - 1:
    import cosim.adapters.datacenter.cluster as cluster

    cluster.SERVE_FLEETS = False
start_day = float(args[0]) if len(args) > 0 else 0.05
n_steps = int(args[1]) if len(args) > 1 else 1500
# recorded as a run is (the recorder's rows are part of the count), into a folder removed at the end
out_dir = tempfile.mkdtemp(prefix="callgrind_session_")
s = cosim.Session("scenarios/default.toml", overrides={"scenario.duration_s": int(86400 * (start_day + 1)),
                  "scenario.start": datetime(2024, 1, 1, tzinfo=timezone.utc)}, out_dir=out_dir, report=False)
s.step()
s.run_until(int(86400 * start_day))
subprocess.run(["callgrind_control", "-i", "on", str(os.getpid())], capture_output=True)
for _ in range(n_steps):
    s.step()
subprocess.run(["callgrind_control", "-i", "off", str(os.getpid())], capture_output=True)
s.close()
shutil.rmtree(out_dir, ignore_errors=True)
