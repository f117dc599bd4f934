"""Kernel modules: loaded or absent now, persisted for boot, with options."""
from __future__ import annotations

import re
from typing import Literal

from pydantic import field_validator

from gpuconf.facts.base import Fact, FileState, file_state
from gpuconf.facts.gather import LSMOD, MODULE_FACTS, PROC_MODULES, loaded_modules
from gpuconf.tasks.base import Change, Facts, Params, TaskType, Verdict, drift, in_sync, remove, run, write_file

MODULE_NAME = re.compile(r"^[A-Za-z0-9_\-]+$")


def options_line(name: str, options: dict[str, str | int | bool] | str) -> str:
    if isinstance(options, str):
        text = options
    else:
        text = " ".join(f"{k}={int(v) if isinstance(v, bool) else v}" for k, v in options.items())
    return f"options {name} {text}\n"


class KernelModuleParams(Params):
    name: str
    state: Literal["present", "absent"] = "present"
    persist: bool = True
    options: dict[str, str | int | bool] | str | None = None
    reboot_if_busy: bool = False

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not MODULE_NAME.match(value):
            raise ValueError(f"'{value}' is not a valid module name")
        return value

    @property
    def module(self) -> str:
        return self.name.replace("-", "_")


class KernelModule(TaskType[KernelModuleParams]):
    """A kernel module loaded (modprobe) or absent (modprobe -r) now; with
    `persist`, also loaded at boot (/etc/modules-load.d/NAME.conf) or not;
    `options` go to /etc/modprobe.d/NAME.conf. With `reboot_if_busy`, a module
    that cannot be unloaded now marks the host reboot required instead of
    failing."""

    name = "kernel_module"
    Params = KernelModuleParams

    def _paths(self, params: KernelModuleParams) -> tuple[str, str]:
        return f"/etc/modules-load.d/{params.module}.conf", f"/etc/modprobe.d/{params.module}.conf"

    def reads(self, params: KernelModuleParams) -> list[Fact]:
        load_path, options_path = self._paths(params)
        return [*MODULE_FACTS, file_state(load_path), file_state(options_path)]

    def check(self, params: KernelModuleParams, facts: Facts) -> Verdict:
        load_path, options_path = self._paths(params)
        modules = set(loaded_modules(facts[PROC_MODULES], facts[LSMOD]))
        load_file: FileState = facts[file_state(load_path)]
        options_file: FileState = facts[file_state(options_path)]
        changes = []
        if params.options is not None:
            wanted = options_line(params.module, params.options)
            if options_file.text != wanted:
                changes.append(Change(f"set options for {params.module}: {wanted.strip()}",
                                      [write_file(options_path, wanted, 0o644)],
                                      before=options_file.text, after=wanted, reboot=params.module in modules))
        if params.state == "present":
            if params.persist and load_file.text != params.module + "\n":
                changes.append(Change(f"load {params.module} at boot ({load_path})",
                                      [write_file(load_path, params.module + "\n", 0o644)]))
            if params.module not in modules:
                changes.append(Change(f"load {params.module} (not loaded)", [run(["modprobe", params.module])],
                                      before="not loaded", after="loaded"))
        else:
            if params.persist and load_file.exists:
                changes.append(Change(f"stop loading {params.module} at boot", [remove(load_path)]))
            if params.module in modules:
                changes.append(Change(f"unload {params.module}",
                                      [run(["modprobe", "-r", params.module], check=not params.reboot_if_busy)],
                                      before="loaded", after="not loaded", reboot=params.reboot_if_busy))
        if changes:
            return drift(*changes)
        return in_sync(f"module {params.module} is " + ("loaded" if params.state == "present" else "not loaded"))
