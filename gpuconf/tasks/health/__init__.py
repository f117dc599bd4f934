"""GPU health probes: read-only checks that never hang.

One task type per probe (`gpuconf tasks health_...`); the `gpu_health` role runs them
all. Each returns findings (ok / warning / failure, naming the GPU by index and bus id)
and changes nothing, so check and apply behave alike, apart from the opt-in remedies
(`remedy: true`, apply only) of persistence, fabric manager and nvidia_uvm.

Sources: sysfs and procfs where they suffice (they cannot hang); every nvidia-smi
field comes from one shared `--query-gpu` call per host per run
(`readings.gpu_readings`), under a timeout that kills its process group, so that a
wedged GPU is a `driver_unresponsive` failure finding on an `unknown` task.
"""
from gpuconf.tasks.health.dcgm import DcgmDiag
from gpuconf.tasks.health.fabric import FabricManagerReady, NvlinksActive
from gpuconf.tasks.health.fabric_state import FabricStateCompleted
from gpuconf.tasks.health.hardware import DriverLoaded, GpuCountMatches, NouveauAbsent
from gpuconf.tasks.health.imex_domain import ImexDomainConnected
from gpuconf.tasks.health.infiniband import InfinibandPortsActive
from gpuconf.tasks.health.kernel_log import KernelClean, NoXidErrors
from gpuconf.tasks.health.memory import MemoryUse, NoEccErrors
from gpuconf.tasks.health.pcie import PcieLinkAtMax
from gpuconf.tasks.health.thermal import ClocksNotThrottled, TemperatureBelowLimit
from gpuconf.tasks.health.usage import HostSizing, PersistenceEnabled, PowerDraw, Utilization
from gpuconf.tasks.health.uvm import UvmReady

HEALTH = (GpuCountMatches(), DriverLoaded(), NouveauAbsent(), TemperatureBelowLimit(), ClocksNotThrottled(),
          PcieLinkAtMax(), NoEccErrors(), NoXidErrors(), NvlinksActive(), FabricManagerReady(),
          FabricStateCompleted(), ImexDomainConnected(),
          InfinibandPortsActive(), PersistenceEnabled(), MemoryUse(), Utilization(), PowerDraw(), HostSizing(),
          KernelClean(), UvmReady(), DcgmDiag())

__all__ = ["HEALTH"] + [type(task).__name__ for task in HEALTH]
