"""Hardware catalogue: GPU models, node types and power-delivery losses, each number cited.

Where a number is not on a datasheet it is marked *estimate* with the reasoning; change it
here, in one place, when a better source turns up.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GpuSpec:
    """One GPU model.

    Attributes:
        name: catalogue key, e.g. ``"H100-SXM"``.
        tdp_w: maximum (default) board power limit. [W]
        idle_w: power of an idle GPU with the driver loaded. [W]
        p_limit_min_w: lowest settable power limit (``nvidia-smi -pl``). [W]
        memory_gb: HBM capacity. [GB]
    """

    name: str
    tdp_w: float
    idle_w: float
    p_limit_min_w: float
    memory_gb: float

    def check_cap(self, p_cap_w: float, name: str = "p_cap_w") -> None:
        """Raise ``ValueError`` when cap ``name`` = ``p_cap_w`` is outside the settable limit range."""
        if not self.p_limit_min_w <= p_cap_w <= self.tdp_w:
            raise ValueError(
                f"{name} = {p_cap_w:g} W is outside the {self.name}'s settable power limit range "
                f"[{self.p_limit_min_w:g}, {self.tdp_w:g}] W; choose a cap inside it"
            )


GPUS: dict[str, GpuSpec] = {
    # A100 80GB SXM: 400 W max TDP, 80 GB HBM2e (NVIDIA A100 Tensor Core GPU datasheet,
    # "Max thermal design power (TDP): 400W", SXM). Minimum limit 100 W: nvidia-smi
    # "Min Power Limit" of A100-SXM4 boards. Idle 60 W: the low plateau of the measured
    # per-GPU power CDF of the Acme A100-80GB clusters (p10 = 63 W, min 56 W; Hu et al.,
    # NSDI 2024; scenarios/data/datacenter/acme/).
    "A100-80GB-SXM": GpuSpec("A100-80GB-SXM", tdp_w=400.0, idle_w=60.0, p_limit_min_w=100.0, memory_gb=80.0),
    # H100 SXM5: "Max TDP up to 700W (configurable)", 80 GB HBM3 (NVIDIA H100 Tensor Core
    # GPU datasheet). nvidia-smi on an H100 SXM: "Min Power Limit 200.00 W, Max Power
    # Limit 700.00 W", idle draw 78.8 W (log in stackhpc/ansible-slurm-appliance PR #975).
    "H100-SXM": GpuSpec("H100-SXM", tdp_w=700.0, idle_w=80.0, p_limit_min_w=200.0, memory_gb=80.0),
    # H200 SXM: "Max TDP up to 700W (configurable)", 141 GB HBM3e (NVIDIA H200 datasheet).
    # Min limit and idle: *estimate*, taken equal to the H100 SXM (same SXM5 board power design).
    "H200-SXM": GpuSpec("H200-SXM", tdp_w=700.0, idle_w=80.0, p_limit_min_w=200.0, memory_gb=141.0),
    # B200 (HGX/DGX B200): 1,000 W per GPU and 1,440 GB GPU memory per 8 GPUs = 180 GB each
    # (NVIDIA DGX B200 datasheet: "~14.3 kW max" system, "1,440GB total GPU memory").
    # Idle 120 W and min limit 200 W: *estimate* (no published nvidia-smi figures found;
    # idle scaled from the H100's ~11 % of TDP; 200 W as on H100 SXM).
    "B200": GpuSpec("B200", tdp_w=1000.0, idle_w=120.0, p_limit_min_w=200.0, memory_gb=180.0),
}


@dataclass(frozen=True)
class NodeSpec:
    """A server: its GPUs and the power of everything else (CPUs, memory, NICs, fans, PSU losses).

    Attributes:
        name: catalogue key.
        gpu: GPU model key into :data:`GPUS`.
        gpus_per_node: GPUs in one server. [-]
        other_idle_w: non-GPU power with all GPUs idle. [W]
        other_full_w: non-GPU power with all GPUs busy. [W]
        liquid_frac: share of the GPU and CPU heat taken by cold plates (0 = air cooled). [-]
    """

    name: str
    gpu: str
    gpus_per_node: int
    other_idle_w: float
    other_full_w: float
    liquid_frac: float = 0.0

    def other_w(self, busy_frac):
        """Non-GPU power at a fraction ``busy_frac`` of GPUs busy (linear). [W]"""
        return self.other_idle_w + (self.other_full_w - self.other_idle_w) * busy_frac


NODES: dict[str, NodeSpec] = {
    # DGX A100: 8 GPUs, 6.5 kW max system power (DGX A100 datasheet) -> 6.5 - 8 x 0.4 =
    # 3.3 kW non-GPU at full load. Idle 1.0 kW: Acme 8-GPU server power p10 = 1.51 kW
    # (Hu et al., NSDI 2024) minus 8 idle GPUs at ~63 W.
    "DGX-A100": NodeSpec("DGX-A100", "A100-80GB-SXM", 8, other_idle_w=1000.0, other_full_w=3300.0),
    # DGX H100: 8 GPUs, ~10.2 kW max (DGX H100 datasheet) -> 10.2 - 8 x 0.7 = 4.6 kW
    # non-GPU at full load. Idle: *estimate*, the Acme A100 idle/full ratio (0.30) applied.
    "DGX-H100": NodeSpec("DGX-H100", "H100-SXM", 8, other_idle_w=1400.0, other_full_w=4600.0),
    # DGX H200: same chassis and 10.2 kW max as DGX H100 (DGX H200 datasheet); idle as above.
    "DGX-H200": NodeSpec("DGX-H200", "H200-SXM", 8, other_idle_w=1400.0, other_full_w=4600.0),
    # DGX B200: 8 GPUs, ~14.3 kW max (DGX B200 datasheet) -> 14.3 - 8 x 1.0 = 6.3 kW non-GPU
    # at full load; idle *estimate* by the same 0.30 ratio. Air-cooled like the DGX.
    "DGX-B200": NodeSpec("DGX-B200", "B200", 8, other_idle_w=1900.0, other_full_w=6300.0),
    # HGX B200 with direct liquid cooling: same power; cold plates on GPUs and CPUs take
    # ~80 % of the server heat (*estimate*; vendors quote 70-90 % heat capture for DLC).
    "HGX-B200-DLC": NodeSpec("HGX-B200-DLC", "B200", 8, other_idle_w=1900.0, other_full_w=6300.0,
                             liquid_frac=0.8),
}


@dataclass(frozen=True)
class DeliveryLosses:
    """UPS + PDU losses vs load: ``loss = rated * (a + b * x + c * x**2)``, ``x = load / rated``.

    The three-term form (no-load, proportional and square-law losses) is the one of
    Rasmussen, "Electrical Efficiency Modeling for Data Centers", APC/Schneider Electric White
    Paper 113. Defaults (UPS and PDU together): no-load loss 1 % of rating, proportional 2 %,
    square-law 1.5 % -> efficiency 89.2 % at 10 % load, 94.5 % at 30 %, 95.7 % at 100 %:
    calibrated to the 94-97 % that manufacturers publish for modern double-conversion UPSs
    at 25-100 % load (Schneider Electric White Paper 108) less ~1 % for PDUs/transformers.

    Attributes:
        rated_mw: rated IT capacity of the power chain. [MW]
        no_load_frac, proportional_frac, square_frac: the three loss coefficients. [-]
    """

    rated_mw: float
    no_load_frac: float = 0.01
    proportional_frac: float = 0.02
    square_frac: float = 0.015

    def loss_mw(self, p_it_mw):
        """Delivery losses at an IT load of ``p_it_mw``. [MW]"""
        x = p_it_mw / self.rated_mw
        return self.rated_mw * (self.no_load_frac + self.proportional_frac * x + self.square_frac * x * x)

    def efficiency_frac(self, p_it_mw: float) -> float:
        """``p_it / (p_it + loss)`` at ``p_it_mw``. [-]"""
        return p_it_mw / (p_it_mw + self.loss_mw(p_it_mw))


def gpu_spec(name: str) -> GpuSpec:
    """The catalogue entry of GPU ``name`` (``ValueError`` listing the known ones)."""
    if name not in GPUS:
        raise ValueError(f"unknown GPU {name!r}; known: {', '.join(GPUS)}")
    return GPUS[name]


def node_spec(name: str) -> NodeSpec:
    """The catalogue entry of node type ``name`` (``ValueError`` listing the known ones)."""
    if name not in NODES:
        raise ValueError(f"unknown node type {name!r}; known: {', '.join(NODES)}")
    return NODES[name]
