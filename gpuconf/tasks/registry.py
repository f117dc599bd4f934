"""The task types, by name: a static table of where each one lives, imported on first use.

A playbook that uses two task types imports those two modules and no other: no pydantic model,
probe or parser of a task it does not run (`tests/unit/tasks/test_task_registry.py` proves it in a
fresh interpreter). The names are known without any import, so the loader can say "did you
mean" for an unknown task; the same test imports every module and checks that the table
names each task type exactly once, under its own `name`, so the table cannot drift.
`gpuconf tasks` (the listing) and the documentation import them all.
"""
from __future__ import annotations

import copy
import importlib
import threading
from collections.abc import Iterator, Mapping

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from gpuconf.errors import did_you_mean, validation_message
from gpuconf.tasks.base import Params, TaskType
from gpuconf.templating.render import is_template

# name -> "module:Class". Generic tasks first, then the GPU ones, then the health probes.
TASK_MODULES: dict[str, str] = {
    "file": "gpuconf.tasks.files:File",
    "directory": "gpuconf.tasks.files:Directory",
    "line": "gpuconf.tasks.files:Line",
    "json_merge": "gpuconf.tasks.jsonfile:JsonMerge",
    "package": "gpuconf.tasks.packages:Package",
    "service": "gpuconf.tasks.services:Service",
    "kernel_module": "gpuconf.tasks.kernel:KernelModule",
    "mount": "gpuconf.tasks.mounts:MountTask",
    "initramfs": "gpuconf.tasks.initramfs:Initramfs",
    "command": "gpuconf.tasks.commands:Command",
    "probe": "gpuconf.tasks.probe:Probe",
    "ping": "gpuconf.tasks.ping:Ping",
    "reboot": "gpuconf.tasks.reboot:Reboot",
    "assert": "gpuconf.tasks.commands:Assert",
    "validate_argument_spec": "gpuconf.tasks.argspec:ValidateArgumentSpec",
    "kernel_cmdline": "gpuconf.tasks.cmdline:KernelCmdline",
    "nvidia_driver_stack": "gpuconf.tasks.driver:DriverStack",
    "nvidia_driver_companion": "gpuconf.tasks.nvidia:DriverCompanion",
    "dkms_module": "gpuconf.tasks.nvidia:DkmsModule",
    "nvidia_module": "gpuconf.tasks.nvidia:NvidiaModule",
    "cuda_compatibility": "gpuconf.tasks.cuda:CudaCompatibility",
    "nvcc_version": "gpuconf.tasks.cuda:NvccVersion",
    "persistence_mode": "gpuconf.tasks.nvidia:PersistenceMode",
    "gpu_power_limit": "gpuconf.tasks.nvidia:PowerLimit",
    "gsp_firmware": "gpuconf.tasks.gsp:GspFirmware",
    "firmware": "gpuconf.tasks.firmware:Firmware",
    "cdi_spec": "gpuconf.tasks.cdi:CdiSpec",
    "containerd_nvidia_runtime": "gpuconf.tasks.containerd:ContainerdNvidiaRuntime",
    "ib_ports": "gpuconf.tasks.infiniband:IbPorts",
    "gpuconf_agent": "gpuconf.tasks.agent:GpuconfAgent",
    "slurm_settings": "gpuconf.tasks.slurm:SlurmSettings",
    "imex_channel": "gpuconf.tasks.imex:ImexChannel",
    "health_gpu_count": "gpuconf.tasks.health.hardware:GpuCountMatches",
    "health_driver": "gpuconf.tasks.health.hardware:DriverLoaded",
    "health_nouveau": "gpuconf.tasks.health.hardware:NouveauAbsent",
    "health_temperature": "gpuconf.tasks.health.thermal:TemperatureBelowLimit",
    "health_clocks": "gpuconf.tasks.health.thermal:ClocksNotThrottled",
    "health_pcie": "gpuconf.tasks.health.pcie:PcieLinkAtMax",
    "health_ecc": "gpuconf.tasks.health.memory:NoEccErrors",
    "health_xid": "gpuconf.tasks.health.kernel_log:NoXidErrors",
    "health_nvlink": "gpuconf.tasks.health.fabric:NvlinksActive",
    "health_fabricmanager": "gpuconf.tasks.health.fabric:FabricManagerReady",
    "health_fabric_state": "gpuconf.tasks.health.fabric_state:FabricStateCompleted",
    "health_imex_domain": "gpuconf.tasks.health.imex_domain:ImexDomainConnected",
    "health_infiniband": "gpuconf.tasks.health.infiniband:InfinibandPortsActive",
    "health_persistence": "gpuconf.tasks.health.usage:PersistenceEnabled",
    "health_memory": "gpuconf.tasks.health.memory:MemoryUse",
    "health_utilization": "gpuconf.tasks.health.usage:Utilization",
    "health_power": "gpuconf.tasks.health.usage:PowerDraw",
    "health_host_sizing": "gpuconf.tasks.health.usage:HostSizing",
    "health_kernel": "gpuconf.tasks.health.kernel_log:KernelClean",
    "health_uvm": "gpuconf.tasks.health.uvm:UvmReady",
    "health_dcgm_diag": "gpuconf.tasks.health.dcgm:DcgmDiag",
    "health_cdi_devices": "gpuconf.tasks.health.cdi:CdiDevicesResolve",
}


class TaskTypes(Mapping[str, TaskType]):
    """The task types by name. Looking one up imports its module once (hosts run in threads, so
    under a lock); membership, iteration and len() use the static table and import nothing."""

    def __init__(self, modules: Mapping[str, str]):
        self._modules = dict(modules)
        self._loaded: dict[str, TaskType] = {}
        self._lock = threading.RLock()  # a task module that looks up another while it loads

    def __getitem__(self, name: str) -> TaskType:
        task = self._loaded.get(name)
        if task is not None:
            return task
        where = self._modules[name]  # KeyError for an unknown name, as a dict
        with self._lock:
            if name not in self._loaded:
                module, _, class_name = where.partition(":")
                self._loaded[name] = getattr(importlib.import_module(module), class_name)()
            return self._loaded[name]

    def __contains__(self, name: object) -> bool:
        return name in self._modules

    def __iter__(self) -> Iterator[str]:
        return iter(self._modules)

    def __len__(self) -> int:
        return len(self._modules)


TASK_TYPES = TaskTypes(TASK_MODULES)


def _has_template(value: object) -> bool:
    if isinstance(value, dict):
        return any(_has_template(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_template(v) for v in value)
    return is_template(value)


def param_names(type_name: str) -> list[str]:
    model = TASK_TYPES[type_name].Params
    names = []
    for name, info in model.model_fields.items():
        names.append(info.alias or name)
    return names


def static_param_errors(type_name: str, raw: dict[str, object]) -> tuple[tuple[int | str, ...], str] | None:
    """Errors knowable before templating: unknown params, wrong literal types."""
    model = TASK_TYPES[type_name].Params
    names = param_names(type_name)
    for key in raw:
        if key not in names:
            return (key,), f"unknown parameter '{key}'{did_you_mean(str(key), names)}"
    templated = {k for k, v in raw.items() if _has_template(v)}
    if templated:
        return None if _literal_errors_ok(model, raw, templated) else _first_literal_error(model, raw, templated)
    try:
        _validated(model, raw)
    except ValidationError as exc:
        return validation_message(exc, names)
    return None


def _literal_errors(model: type[Params], raw: dict[str, object], templated: set[str]) -> list[ErrorDetails]:
    static = {k: v for k, v in raw.items() if k not in templated}
    try:
        _validated(model, static)
    except ValidationError as exc:
        return [e for e in exc.errors() if e["loc"] and e["loc"][0] not in templated and e["type"] != "missing"]
    return []


def _literal_errors_ok(model: type[Params], raw: dict[str, object], templated: set[str]) -> bool:
    return not _literal_errors(model, raw, templated)


def _first_literal_error(model: type[Params], raw: dict[str, object],
                         templated: set[str]) -> tuple[tuple[int | str, ...], str]:
    error = _literal_errors(model, raw, templated)[0]
    loc = tuple(error["loc"])
    return loc, f"'{'.'.join(map(str, loc))}': {error['msg']}"


# What a text parameter takes as its text, as Ansible's `str` type (check_type_str: to_native, so
# True is 'True', a mapping its Python form): numbers and booleans first, then a list or a mapping
# (only where a list of text, say, would not do either).
AS_TEXT: tuple[tuple[type, ...], ...] = ((int, float), (dict, list))


def build_params(type_name: str, rendered: dict[str, object]) -> Params:
    """Validate rendered params; raise ValueError with a readable message."""
    try:
        return _validated(TASK_TYPES[type_name].Params, rendered)
    except ValidationError as exc:
        _, message = validation_message(exc, param_names(type_name))
        raise ValueError(message) from None


def _validated(model: type[Params], values: dict[str, object], stage: int = 0) -> Params:
    """`values` validated, a value given for text taken as its text (AS_TEXT); the load-time check
    (static_param_errors) takes a literal the same way: `content: 5` is '5'."""
    try:
        return model.model_validate(values)
    except ValidationError as exc:
        if stage < len(AS_TEXT):  # `version: "{{ driver }}"`, driver: 535, is "535", as Ansible renders it
            kinds = AS_TEXT[stage]
            wrong = [e["loc"] for e in exc.errors() if e["type"] == "string_type" and isinstance(e["input"], kinds)]
            return _validated(model, _as_text(values, wrong, kinds) if wrong else values, stage + 1)
        raise


def _as_text(values: dict[str, object], locations: list[tuple[int | str, ...]],
             kinds: tuple[type, ...]) -> dict[str, object]:
    """A copy of `values` with the values at `locations` (pydantic error locations, whose union
    members' names are not keys) as strings."""
    values = copy.deepcopy(values)
    for loc in locations:
        holder: dict[object, object] | list[object] | None = None
        key: int | str = ""
        current: object = values
        for part in loc:
            if isinstance(current, dict) and part in current:
                holder, key, current = current, part, current[part]
            elif isinstance(current, list) and isinstance(part, int) and 0 <= part < len(current):
                holder, key, current = current, part, current[part]
        if isinstance(holder, dict) and isinstance(current, kinds):
            holder[key] = str(current)
        elif isinstance(holder, list) and isinstance(key, int) and isinstance(current, kinds):
            holder[key] = str(current)
    return values
