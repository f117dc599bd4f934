"""A GPU's NVLink fabric registration: `nvidia-smi -q`'s Fabric section, or the `fabric.*`
fields of `--query-gpu` (gpuconf/tasks/health/fabric_state.py reads those, without `-q`'s model)."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Fabric:
    """NVLink fabric registration (NVSwitch systems): ``state`` is ``Completed`` when healthy."""

    state: str | None = None
    status: str | None = None
    clique_id: str | None = None
    cluster_uuid: str | None = None
    health_summary: str | None = None  # Health / Summary: Healthy, Unhealthy (newer drivers)
    health_bandwidth: str | None = None  # Health / Bandwidth: Full, Degraded
