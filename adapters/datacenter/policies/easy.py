"""``easy``: priority FIFO with EASY backfill, first-fit placement (cosim's default scheduler).

EASY backfill (Lifka, JSSPP 1995; Mu'alem & Feitelson, IEEE TPDS 12(6), 2001): the first
job that cannot start is reserved at its shadow time; jobs behind it start now when they
end before it or use only GPUs it will not need (see :mod:`._base`).
"""

from __future__ import annotations

from pydantic import Field

from cosim.adapters.datacenter.policies._base import Policy, PolicyParams


class EasyParams(PolicyParams):
    """Attributes:
        n_backfill_jobs: queued jobs behind the head a pass looks at. [-]
    """

    n_backfill_jobs: int = Field(default=200, ge=0)


class Easy(Policy):
    """Priority FIFO + EASY backfill, first-fit placement (the default)."""

    PARAMS = EasyParams
    STRICT_PARAMS = {"n_backfill_jobs": 0}
    BACKFILL = True

    def n_backfill_jobs(self) -> int:
        return self.params.n_backfill_jobs
