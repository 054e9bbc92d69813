"""Learning controllers: a scenario as a Gymnasium environment, or a PettingZoo one for several agents.

``CosimEnv(path)`` reads the scenario's ``[agent]`` section (:mod:`.spec`): the inputs the
agent sets (:mod:`.actions`), what it sees (:mod:`.observations`) and what it is rewarded
for (:mod:`.rewards`, the KPIs' own formulas at every recorded step); it steps the scenario
on the direct engine (:mod:`.episode`, one ``cosim.Session`` per episode).
:func:`.vector.make_vector_env` puts N copies in one process behind Gymnasium's vector API.
``CosimParallelEnv(path)`` does the same for the ``[agents.<name>]`` sections (:mod:`.parallel`).
:mod:`.evaluate` runs baselines and policies on held-out days and prints their table;
:mod:`.guards` warns about a reward term no action can move and an action whose cost the
reward does not price (at env build and in ``check_scenario``, ``cosim validate``'s check).
"""

from cosim.gym.actions import ActionClippedWarning
from cosim.gym.env import CosimEnv, UnknownResetOptionWarning
from cosim.gym.parallel import CosimParallelEnv
from cosim.gym.rewards import TERMS
from cosim.gym.guards import RewardGuardWarning, check_scenario

__all__ = ["ActionClippedWarning", "CosimEnv", "CosimParallelEnv", "RewardGuardWarning", "TERMS",
           "UnknownResetOptionWarning", "check_scenario"]
