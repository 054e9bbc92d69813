"""``compass_abs``: anchor-based bounded fragmentation — **cosim's reading**, not the paper's algorithm.

The issue names COMPASS-ABS ("bounded fragmentation in shared clusters", anchor-based) as
a seed paper, but no source, definition or code of it could be found (research notes,
/work/notes/scheduling.md §3). What follows is cosim's own placement rule built from that
description; results under this name say nothing about the published method.

Nodes are *empty*, *full* or *anchors* (partly used). Fragmentation can only sit on anchors,
so the rule bounds their number:

1. a whole-node pod goes to an empty node (lowest-numbered), never onto an anchor;
2. a smaller pod goes to the anchor it fits best (fewest GPUs left over, as best fit);
3. only when no anchor fits may it open a new anchor on an empty node, and only while
   fewer than ``max(1, anchor_max_frac x n_nodes)`` anchors exist: at most that many nodes
   hold idle GPUs next to busy ones, a hard bound on fragmented capacity;
4. a job that has waited ``wait_max_s`` may open an anchor beyond the bound (so the bound
   cannot starve small jobs).

Placement never scatters a gang over free GPUs outside this rule, also under locality
``any``. Queue order: priority FIFO with EASY backfill.
"""

from __future__ import annotations

import numpy as np
from pydantic import Field

from cosim.adapters.datacenter.policies._base import Policy, PolicyParams
from cosim.adapters.datacenter.policies._placement import place_pods


class CompassAbsParams(PolicyParams):
    """Attributes:
        anchor_max_frac: most nodes that may be partly used, as a share of all nodes. [-]
        wait_max_s: after this wait a job may open an anchor beyond the bound. [s]
        backfill: EASY backfill behind the head (off: strict priority FIFO).
    """

    anchor_max_frac: float = Field(default=0.1, gt=0, le=1)
    wait_max_s: float = Field(default=3600.0, ge=0)
    backfill: bool = True


class CompassAbs(Policy):
    """Anchor-based bounded fragmentation (cosim's reading of COMPASS-ABS; no source found)."""

    PARAMS = CompassAbsParams
    STRICT_PARAMS = {"backfill": False}

    def backfill(self) -> bool:
        return self.params.backfill

    def n_anchors_max(self, sched) -> int:
        return max(1, int(self.params.anchor_max_frac * sched.topology.n_nodes))

    def place(self, sched, job: int, need: int, time_s: float) -> np.ndarray | None:
        on_node = sched.topology.gpus_on_node
        gpn = sched.topology.gpus_per_node
        index = np.arange(len(on_node), dtype=float)
        overdue = time_s - float(sched.jobs.submit_s[job]) >= self.params.wait_max_s
        bound = self.n_anchors_max(sched)

        def score(free: np.ndarray, pod: int) -> np.ndarray:
            empty = free >= on_node
            if pod >= gpn:
                return np.where(empty, -index, -np.inf)
            anchor = (free > 0) & ~empty
            n_anchors = int(np.count_nonzero((free < on_node) & (free > 0)))
            may_open = overdue or n_anchors < bound
            best_fit = -(free - pod).astype(float)
            opening = np.where(empty & may_open, -1e6 - index, -np.inf)
            return np.where(anchor, best_fit, opening)
        return place_pods(sched, need, score, scatter=False)
