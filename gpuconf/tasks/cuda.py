"""CUDA: refuse toolkits the pinned driver or the GPUs cannot run; verify nvcc.

Compatibility table (documented in `gpuconf tasks cuda_compatibility`): the minimum Linux
driver of each CUDA release (NVIDIA's CUDA release notes, table 3, GA drivers):

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
| 12.8 | 570.26 |
| 12.9 | 575.51 |
| 13.0 | 580.65 |

GPU generations (from the branch catalog, gpuconf/driver/branches.yml) bound it from both
sides: Blackwell needs CUDA >= 12.8, Hopper and Ada >= 11.8, Ampere >= 11.0, Turing >= 10.0;
CUDA 13 drops Maxwell, Pascal and Volta (their last toolkit is 12.x).
"""
from __future__ import annotations

import json
import posixpath
import re

from pydantic import field_validator

from gpuconf.driver import catalog
from gpuconf.facts.base import Fact, FileState, Output, command, file_glob, file_state
from gpuconf.facts.nvidia import parse_nvcc_version
from gpuconf.tasks.base import Change, Facts, Params, Refused, TaskType, Unknown, Verdict, drift, in_sync

MIN_DRIVER = {"11.7": "515.43", "11.8": "520.61", "12.0": "525.60", "12.1": "530.30", "12.2": "535.54",
              "12.3": "545.23", "12.4": "550.54", "12.5": "555.42", "12.6": "560.28", "12.8": "570.26",
              "12.9": "575.51", "13.0": "580.65"}
# generation -> (minimum CUDA, last CUDA major)
GENERATIONS = {"blackwell": ("12.8", None), "hopper": ("11.8", None), "ada": ("11.8", None),
               "ampere": ("11.0", None), "turing": ("10.0", None), "volta": ("9.0", 12), "pascal": ("8.0", 12),
               "maxwell": ("6.5", 12)}


def version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", text))


class CompatibilityParams(Params):
    cuda: str
    driver: str

    @field_validator("cuda")
    @classmethod
    def _release(cls, value: str) -> str:
        if not re.fullmatch(r"\d+\.\d+", str(value)):
            raise ValueError(f"cuda must be a release like '12.2', not '{value}'")
        return str(value)


class CudaCompatibility(TaskType[CompatibilityParams]):
    """Refuse a CUDA release that the pinned driver cannot run, or that the
    node's GPUs do not support. The refusal names the minimum driver. Runs in
    check mode too, so a bad pin is caught before anything is installed."""

    name = "cuda_compatibility"
    Params = CompatibilityParams
    host_facts = frozenset({"gpus"})

    def check(self, params: CompatibilityParams, facts: Facts) -> Verdict:
        minimum = MIN_DRIVER.get(params.cuda)
        if minimum is None:
            known = ", ".join(sorted(MIN_DRIVER, key=version_tuple))
            raise Refused(f"CUDA {params.cuda} is not in the compatibility table (known: {known})")
        if version_tuple(params.driver) < version_tuple(minimum):
            raise Refused(f"CUDA {params.cuda} needs driver >= {minimum}; the pinned driver is {params.driver}")
        for gpu in catalog.gpus(facts.host.get("gpus")):
            if gpu.architecture not in GENERATIONS:
                continue
            least, last_major = GENERATIONS[gpu.architecture]
            if version_tuple(params.cuda) < version_tuple(least):
                raise Refused(f"{gpu.label} needs CUDA >= {least}, not {params.cuda}")
            if last_major is not None and version_tuple(params.cuda)[0] > last_major:
                raise Refused(f"{gpu.label}: CUDA {last_major} is the last toolkit for it, not {params.cuda}")
        return in_sync(f"CUDA {params.cuda} runs on driver {params.driver} (needs >= {minimum})")


class NvccParams(Params):
    release: str
    path: str | None = None


def toolkit_version(state: FileState) -> str | None:
    """nvcc's version from the toolkit's version.json (CUDA 11.1+; `cuda_nvcc`, else the SDK's)."""
    try:
        data = json.loads(state.text or "")
        return str(data.get("cuda_nvcc", data.get("cuda"))["version"])
    except (ValueError, TypeError, KeyError, AttributeError):
        return None


class NvccVersion(TaskType[NvccParams]):
    """nvcc reports the pinned release (default path /usr/local/cuda-X.Y/bin/nvcc): read from
    the toolkit's version.json beside bin/ (CUDA 11.1 and later), else `nvcc --version`."""

    name = "nvcc_version"
    Params = NvccParams

    def _paths(self, params: NvccParams) -> tuple[str, str]:
        path = params.path or f"/usr/local/cuda-{params.release}/bin/nvcc"
        return path, posixpath.join(posixpath.dirname(posixpath.dirname(path)), "version.json")

    def _facts(self, params: NvccParams) -> tuple[Fact[FileState], Fact[bool], Fact[Output]]:
        path, version_json = self._paths(params)
        return (file_state(version_json, follow=True),
                file_glob([path], lambda files: bool(files), what="name", key=f"glob:name:{path}"),
                command([path, "--version"], lambda out: out, timeout=30, unless_exists=version_json))

    def reads(self, params: NvccParams) -> list[Fact]:
        return list(self._facts(params))

    def check(self, params: NvccParams, facts: Facts) -> Verdict:
        path, version_json = self._paths(params)
        json_fact, nvcc_fact, version_fact = self._facts(params)
        state = facts[json_fact]
        if state.exists:
            if not facts[nvcc_fact]:
                return drift(Change(f"verify {path} once the toolkit is installed (not installed yet)"))
            version = toolkit_version(state)
            if version is None:
                raise Unknown(f"{version_json} names no nvcc or CUDA version: {(state.text or '')[:120]!r}")
            release = ".".join(version.split(".")[:2])
            if release != params.release:
                raise Refused(f"{version_json} says nvcc {version} (release {release}), want {params.release}")
            return in_sync(f"nvcc {version} at {path} (version.json)")
        out = facts[version_fact]
        if out.rc == 127 or (out.rc != 0 and "No such file" in out.stderr):
            return drift(Change(f"verify {path} once the toolkit is installed (not installed yet)"))
        parsed = parse_nvcc_version(out.stdout)
        reported = getattr(parsed, "release", None)
        if reported != params.release:
            raise Refused(f"{path} --version reports {reported or 'nothing parseable'}, want {params.release}")
        return in_sync(f"nvcc {getattr(parsed, 'version', None) or reported} at {path}")
