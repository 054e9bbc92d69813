"""``fifo``: strict priority FIFO; the head of the queue blocks everything behind it.

The queue is ordered by priority class, then submission time; jobs start in that order
while they can be placed (first fit, under the cluster's locality). No backfill.
"""

from __future__ import annotations

from cosim.adapters.datacenter.policies._base import Policy


class Fifo(Policy):
    """Strict priority FIFO, first-fit placement, no backfill."""
