"""Hardware catalogue: datasheet numbers as cited in adapters/datacenter/hardware.py, loss curve shape."""

from __future__ import annotations

import numpy as np
import pytest

from cosim.adapters.datacenter.hardware import GPUS, NODES, DeliveryLosses, gpu_spec, node_spec


def test_datasheet_tdps_and_memory():
    """NVIDIA datasheets: A100 SXM 400 W / 80 GB, H100 SXM 700 W / 80 GB, H200 700 W / 141 GB,
    B200 1,000 W / 180 GB (DGX B200: 1,440 GB over 8 GPUs)."""
    expected = {"A100-80GB-SXM": (400, 80), "H100-SXM": (700, 80), "H200-SXM": (700, 141), "B200": (1000, 180)}
    for name, (tdp_w, memory_gb) in expected.items():
        assert (GPUS[name].tdp_w, GPUS[name].memory_gb) == (tdp_w, memory_gb)


def test_power_ranges_are_ordered():
    for gpu in GPUS.values():
        assert 0 < gpu.idle_w < gpu.p_limit_min_w < gpu.tdp_w
    for node in NODES.values():
        assert 0 < node.other_idle_w < node.other_full_w
        assert node.gpu in GPUS and 0 <= node.liquid_frac <= 1


def test_node_full_power_matches_dgx_datasheets():
    """DGX A100 6.5 kW, DGX H100 10.2 kW, DGX B200 14.3 kW maximum system power."""
    for name, max_kw in {"DGX-A100": 6.5, "DGX-H100": 10.2, "DGX-B200": 14.3}.items():
        node = NODES[name]
        full_kw = (node.other_full_w + node.gpus_per_node * GPUS[node.gpu].tdp_w) / 1e3
        assert full_kw == pytest.approx(max_kw, abs=0.05)


def test_cap_outside_range_names_the_range():
    with pytest.raises(ValueError, match=r"150 W is outside the H100-SXM's .* \[200, 700\] W"):
        gpu_spec("H100-SXM").check_cap(150.0)
    gpu_spec("H100-SXM").check_cap(200.0)
    with pytest.raises(ValueError, match="known: A100"):
        gpu_spec("V100")
    with pytest.raises(ValueError, match="known: DGX-A100"):
        node_spec("DGX-X")


def test_delivery_efficiency_rises_with_load_into_published_range():
    """UPS+PDU: 94-97 % at 25-100 % load for modern double-conversion UPSs (Schneider WP 108),
    less ~1 % for PDUs; efficiency rises with load up to about half load."""
    chain = DeliveryLosses(rated_mw=10.0)
    load_mw = np.linspace(1.0, 5.0, 9)  # rises to half load, then stays flat within 0.1 %
    eff = [chain.efficiency_frac(p) for p in load_mw]
    assert np.all(np.diff(eff) > 0)
    assert abs(chain.efficiency_frac(10.0) - chain.efficiency_frac(5.0)) < 0.003
    assert 0.93 <= chain.efficiency_frac(2.5) <= 0.97
    assert 0.94 <= chain.efficiency_frac(10.0) <= 0.97
