"""Job states of the training scheduler, shared by :mod:`.scheduler` and the :mod:`.policies`.

A job is ``FUTURE`` (not yet submitted), ``QUEUED``, ``RUNNING`` (holding its GPUs),
``PAUSED`` (by a knob or the facility limit; holds nothing, or, with the cluster's
``hold_paused_gpus``, keeps its GPUs idle and booked so no queued job backfills them),
``DONE``, ``REJECTED`` (larger than the partition), ``FAILED`` (ended by a failure,
:mod:`.failures`) or ``TRANSIENT`` (running off-site on burst capacity, :mod:`.transient`;
holds no GPU of the partition) or ``MOVED`` (exported to another site by a load-shifting
controller, :mod:`.moves`; out of this site's system, neither done nor failed). The values
index ``STATE_NAMES`` and the output counters. ``QUEUED``, ``RUNNING`` and ``PAUSED`` are consecutive
(the unfinished jobs ``pause_flexible_frac`` counts are one range of values).
"""

from __future__ import annotations

FUTURE, QUEUED, RUNNING, PAUSED, DONE, REJECTED, FAILED, TRANSIENT, MOVED = range(9)
STATE_NAMES = ("future", "queued", "running", "paused", "done", "rejected", "failed", "transient", "moved")
#: States of a job that is in the system (submitted, not finished): what "contention" counts.
ACTIVE = (QUEUED, RUNNING, PAUSED, TRANSIENT)
