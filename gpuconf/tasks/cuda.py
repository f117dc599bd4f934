"""CUDA: refuse toolkits the pinned driver or the GPUs cannot run; verify nvcc.

Compatibility table (documented in `gpuconf tasks cuda_compatibility`):

| CUDA | minimum Linux driver |
|---|---|
| 11.7 | 515.43 |
| 11.8 | 520.61 |
| 12.0 | 525.60 |
| 12.1 | 530.30 |
| 12.2 | 535.54 |
| 12.3 | 545.23 |
| 12.4 | 550.54 |
| 12.5 | 555.42 |
| 12.6 | 560.28 |

GPU architecture minimums: Hopper (H100, H200) needs CUDA >= 11.8, Ada (L4,
L40S) >= 11.8, Ampere (A100, A10) >= 11.0, Turing (T4) >= 10.0.
"""
from __future__ import annotations

import re

from pydantic import field_validator

from gpuconf.facts.base import command
from gpuconf.facts.nvidia import parse_nvcc_version
from gpuconf.tasks.base import Change, Facts, Params, Refused, TaskType, Verdict, drift, in_sync

MIN_DRIVER = {"11.7": "515.43", "11.8": "520.61", "12.0": "525.60", "12.1": "530.30", "12.2": "535.54",
              "12.3": "545.23", "12.4": "550.54", "12.5": "555.42", "12.6": "560.28"}
# PCI device id -> (architecture, minimum CUDA)
ARCHITECTURES = {
    "hopper": ("11.8", {"0x2330", "0x2331", "0x2339", "0x233a", "0x233d", "0x2322", "0x2324", "0x2335"}),
    "ada": ("11.8", {"0x27b8", "0x26b9", "0x26b5", "0x26ba"}),
    "ampere": ("11.0", {"0x20b0", "0x20b1", "0x20b2", "0x20b3", "0x20b5", "0x20f1", "0x2236", "0x2235"}),
    "turing": ("10.0", {"0x1eb8", "0x1e30", "0x1eb4"}),
}


def version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", text))


def architecture(device_id: str) -> tuple[str, str] | None:
    for name, (minimum, ids) in ARCHITECTURES.items():
        if device_id.lower() in ids:
            return name, minimum
    return None


class CompatibilityParams(Params):
    cuda: str
    driver: str

    @field_validator("cuda")
    @classmethod
    def _release(cls, value: str) -> str:
        if not re.fullmatch(r"\d+\.\d+", str(value)):
            raise ValueError(f"cuda must be a release like '12.2', not '{value}'")
        return str(value)


class CudaCompatibility(TaskType):
    """Refuse a CUDA release that the pinned driver cannot run, or that the
    node's GPUs do not support. The refusal names the minimum driver. Runs in
    check mode too, so a bad pin is caught before anything is installed."""

    name = "cuda_compatibility"
    Params = CompatibilityParams

    def check(self, params: CompatibilityParams, facts: Facts) -> Verdict:
        minimum = MIN_DRIVER.get(params.cuda)
        if minimum is None:
            known = ", ".join(sorted(MIN_DRIVER, key=version_tuple))
            raise Refused(f"CUDA {params.cuda} is not in the compatibility table (known: {known})")
        if version_tuple(params.driver) < version_tuple(minimum):
            raise Refused(f"CUDA {params.cuda} needs driver >= {minimum}; the pinned driver is {params.driver}")
        for gpu in facts.host.get("gpus") or []:
            arch = architecture(gpu.get("device_id", ""))
            if arch and version_tuple(params.cuda) < version_tuple(arch[1]):
                raise Refused(f"GPU {gpu['pci_address']} ({arch[0]}) needs CUDA >= {arch[1]}, not {params.cuda}")
        return in_sync(f"CUDA {params.cuda} runs on driver {params.driver} (needs >= {minimum})")


class NvccParams(Params):
    release: str
    path: str | None = None


class NvccVersion(TaskType):
    """`nvcc --version` reports the pinned release (default path
    /usr/local/cuda-X.Y/bin/nvcc)."""

    name = "nvcc_version"
    Params = NvccParams

    def _fact(self, params: NvccParams):
        path = params.path or f"/usr/local/cuda-{params.release}/bin/nvcc"
        return command([path, "--version"], lambda out: (path, out), timeout=30)

    def reads(self, params: NvccParams):
        return [self._fact(params)]

    def check(self, params: NvccParams, facts: Facts) -> Verdict:
        path, out = facts[self._fact(params)]
        if out.rc == 127 or (out.rc != 0 and "No such file" in out.stderr):
            return drift(Change(f"verify {path} once the toolkit is installed (not installed yet)"))
        parsed = parse_nvcc_version(out.stdout)
        release = getattr(parsed, "release", None)
        if release != params.release:
            raise Refused(f"{path} --version reports {release or 'nothing parseable'}, want {params.release}")
        return in_sync(f"nvcc {getattr(parsed, 'version', None) or release} at {path}")
