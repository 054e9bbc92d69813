"""Datacenter: a GPU cluster running training jobs and LLM inference, with power knobs.

The adapter ``datacenter`` as a package (docs/development.md, "A simulator with several modules"):

* ``params.py``: a ``Cluster`` entity's keys and the sim's (pydantic models, defaults, bounds);
* ``sim.py``: :class:`DatacenterSim`, the adapter (its docstring has the model's inputs and outputs);
* ``build.py``: a cluster built from its params, and what makes params impossible to build;
* the physics, plain Python (no mosaik): ``cluster.py`` (one step of everything), ``hardware.py``,
  ``training.py``, ``scheduler.py`` and ``nodes.py`` with the policies in ``policies/``,
  ``inference.py``, ``prefill.py``, ``mig.py``, ``moves.py``, ``smoothing.py``, ``transient.py``,
  ``checkpoints.py``, ``failures.py``, ``stragglers.py``, ``goodput.py``, ``observe.py``.
"""

from cosim.adapters.datacenter.build import build_cluster, cluster_problems, make_fleet, make_jobs, make_mig_pool
from cosim.adapters.datacenter.hardware import GPUS, NODES
from cosim.adapters.datacenter.params import (
    ClusterParams,
    DatacenterSimParams,
    FleetParams,
    NodesParams,
    SmoothingParams,
    TrainingParams,
    TransientParams,
)
from cosim.adapters.datacenter.sim import DEMAND_RATIO_MAX, INPUTS, DatacenterSim, fleet_inputs, knobs_from

__all__ = ["DEMAND_RATIO_MAX", "GPUS", "INPUTS", "NODES", "ClusterParams", "DatacenterSim", "DatacenterSimParams",
           "FleetParams", "NodesParams", "SmoothingParams", "TrainingParams", "TransientParams", "build_cluster",
           "cluster_problems", "fleet_inputs", "knobs_from", "make_fleet", "make_jobs", "make_mig_pool"]
