"""MIG: the guide's profiles and placements, first-fit vs fragmentation-aware placement by hand,
the slice scaling, and MIG fleets in a cluster (power balance, validation)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from cosim.adapters.datacenter import ClusterParams, build_cluster, cluster_problems
from cosim.adapters.datacenter.mig import KINDS, N_MEMORY_SLICES, NAMES, fits, place_instances, profiles

H100 = profiles("H100-SXM", 80.0)


@pytest.mark.parametrize("gpu", sorted(NAMES))
def test_one_kind_fills_a_gpu_to_the_guides_count(gpu):
    """NVIDIA MIG User Guide: at most 7 x 1g, 4 x 1g large-memory, 3 x 2g, 2 x 3g, 1 x 4g, 1 x 7g per GPU;
    placing only one profile, first fit reaches exactly that many on one GPU."""
    for name, profile in profiles(gpu, 80.0).items():
        n_max = KINDS[profile.kind][3]
        pool = place_instances([(0, profile, n_max + 1)], "first_fit")
        assert pool.n_gpus == 2 and sum(1 for _, g, _, _ in pool.instances if g == 0) == n_max, name


def test_placement_rules_of_the_guide():
    used = np.zeros(N_MEMORY_SLICES, bool)
    assert not fits(used, H100["1g.10gb"], 7)          # a 1g cannot start at memory slice 7
    used[0:4] = True                                     # a 4g at 0 ...
    assert fits(used, H100["3g.40gb"], 4)                # ... and a 3g at 4 co-exist (driver R510 on)
    assert not any(fits(used, H100["4g.40gb"], s) for s in H100["4g.40gb"].starts)


def test_fragmentation_aware_placement_by_hand():
    """3g, 4g, 3g, 4g arriving in turn. First fit: 3g@0 on GPU 0; the 4g needs slice 0, so GPU 1; the
    second 3g goes to GPU 0 at 4; the second 4g opens GPU 2: three GPUs. Fragmentation-aware, with
    p(3g) = p(4g) = 1/2: 3g@0 leaves slices 4-7 free where no 4g can start (F = 1/2 x 4 = 2), 3g@4
    leaves 0-3 where both fit (F = 0), so 3g@4; the 4g then takes GPU 0 at 0: two GPUs, full."""
    requests = [(0, H100["3g.40gb"], 2), (1, H100["4g.40gb"], 2)]
    assert place_instances(requests, "first_fit").n_gpus == 3
    pool = place_instances(requests, "frag_aware")
    assert pool.n_gpus == 2 and pool.used.all()
    assert [(g, s) for _, g, s, _ in pool.instances] == [(0, 4), (0, 0), (1, 4), (1, 0)]


def test_fragmentation_aware_is_not_always_better():
    """The greedy rule looks one instance ahead: for 14 x 1g, 6 x 3g, 4 x 4g it needs 8 GPUs where first
    fit needs 7 (measured here, kept as a reminder that the notes' formula is a heuristic)."""
    requests = [(0, H100["1g.10gb"], 14), (1, H100["3g.40gb"], 6), (2, H100["4g.40gb"], 4)]
    assert place_instances(requests, "first_fit").n_gpus == 7
    assert place_instances(requests, "frag_aware").n_gpus == 8


def test_slice_scaling_on_h100():
    """3g.40gb: 3 x 16 of 132 SMs = 0.364, 4 of 8 memory slices = 0.5: throughput share 0.364."""
    p = H100["3g.40gb"]
    assert p.sm_frac == pytest.approx(48 / 132) and p.speed_frac == pytest.approx(48 / 132)
    assert H100["7g.80gb"].speed_frac == pytest.approx(1.0)
    assert H100["1g.20gb"].memory_gb == pytest.approx(20.0)


def fleet(name, profile, replicas, rate):
    return {"name": name, "model": "llama-3.1-8b", "replicas": replicas, "rate_req_s": rate, "mig_profile": profile,
            "diurnal_amp_frac": 0.0}


def mig_cluster(fleets, placement="first_fit", steps=60):
    params = ClusterParams.model_validate({"n_gpus": 0, "training": {"n_jobs": 0}, "mig_placement": placement,
                                           "inference": fleets})
    assert cluster_problems(params, 3600) == []
    cluster = build_cluster(params, np.random.default_rng(1), 3600, report_scheduling=True)
    return cluster, pd.DataFrame([cluster.step(k * 60.0, 60.0) for k in range(steps)])


def test_mig_fleet_power_by_hand():
    """Two 3g.40gb replicas (one H100) with no requests: the GPU idles at 80 W; its DGX node counts as
    busy while instances are deployed (as for whole-GPU fleets): 4,600 W. With traffic each instance
    adds 48/132 of the full GPU's dynamic power at its batch."""
    cluster, idle = mig_cluster([fleet("a", "3g.40gb", 2, 0.0)])
    assert cluster.mig_pool.n_gpus == 1
    assert idle["p_it_mw"].iloc[-1] == pytest.approx((80.0 + 4600.0) / 1e6)
    _, busy = mig_cluster([fleet("a", "3g.40gb", 2, 5.0)])
    assert (busy["p_it_mw"] > idle["p_it_mw"].iloc[-1]).all() and (busy["tokens_per_s"] > 0).all()
    np.testing.assert_allclose(busy["p_infer_mw"], busy["p_it_mw"], rtol=1e-12)
    assert busy["n_gpus_mig"].iloc[-1] == 1


def test_frag_aware_pool_needs_fewer_gpus_and_less_power_here():
    fleets = [fleet("a", "3g.40gb", 6, 3.0), fleet("b", "4g.40gb", 6, 3.0)]
    ff_cluster, ff = mig_cluster(fleets, "first_fit")
    fa_cluster, fa = mig_cluster(fleets, "frag_aware")
    assert fa_cluster.mig_pool.n_gpus == 6 < ff_cluster.mig_pool.n_gpus
    assert fa["p_mw"].mean() < ff["p_mw"].mean()
    np.testing.assert_allclose(fa["tokens_per_s"], ff["tokens_per_s"], rtol=1e-12)  # same instances, same work


def test_mig_validation_names_the_fix():
    params = ClusterParams.model_validate({"inference": [
        {"name": "a", "model": "llama-3.1-8b", "mig_profile": "1g.10gb"},
        {"name": "b", "model": "llama-3.1-70b", "mig_profile": "7g.80gb"},
        {"name": "c", "model": "llama-3.1-8b", "mig_profile": "3g.40gb", "node": "DGX-B200"}]})
    problems = cluster_problems(params, 3600)
    assert any("1g.10gb" in p and "do not fit" in p and "1g.20gb" in p for p in problems)
    assert any("inference[1] (b)" in p and "do not fit" in p for p in problems)
    assert any("not a MIG profile of the B200" in p and "3g.90gb" in p for p in problems)
    assert any("one node type" in p for p in problems)


def test_mig_refuses_a_model_of_several_gpus_per_replica():
    """Llama-3.1-70B's weights fit a B200's 7g.180gb slice, but its replica spans 2 GPUs: refused at
    validation, naming the key and the fix (it used to pass validation and fail the run)."""
    params = ClusterParams.model_validate({"node": "DGX-B200", "inference": [
        {"name": "chat", "model": "llama-3.1-70b", "mig_profile": "7g.180gb"}]})
    problems = cluster_problems(params, 3600)
    assert any("inference[0] (chat).mig_profile = '7g.180gb'" in p and "2 GPUs per replica" in p
               and "drop mig_profile" in p for p in problems)
