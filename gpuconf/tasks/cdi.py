"""The CDI spec follows the loaded driver.

A CDI spec names the driver's libraries by their full version (`libcuda.so.580.178.04`), so a
spec generated before a driver change mounts files that no longer exist: containers asking for
`nvidia.com/gpu=all` then fail to start. The check compares the driver the spec was made for
with the one loaded (`/proc/driver/nvidia/version`); apply regenerates it with the toolkit's own
`nvidia-ctk cdi generate`, which is what NVIDIA's CDI guide and the toolkit's refresh unit run.

With no driver loaded because the reboot that loads it is pending (an image build holds it),
generating now fails in NVML (ERROR_DRIVER_NOT_LOADED): the change is deferred to that reboot,
at which the toolkit's nvidia-cdi-refresh.service (1.18+, enabled by the container_toolkit
role) writes the spec, and the next check reads it.
"""
from __future__ import annotations

from pydantic import Field

from gpuconf.errors import TaskError
from gpuconf.facts.base import Fact, file_state
from gpuconf.facts.cdi import CdiSpecError, parse_cdi_generate_log, parse_cdi_spec
from gpuconf.facts.nvidia import parse_proc_driver_version
from gpuconf.tasks.base import ApplyContext, Change, Facts, Params, TaskType, Verdict, drift, in_sync, run

PROC_VERSION = file_state("/proc/driver/nvidia/version")


class CdiSpecParams(Params):
    path: str = Field("/etc/cdi/nvidia.yaml", pattern=r"^/[^\s]*\.(yaml|json)$",
                      description="where the spec lives (/etc/cdi or /var/run/cdi, .yaml or .json)")
    timeout: float = Field(120, gt=0, description="seconds nvidia-ctk cdi generate may take")


class CdiSpec(TaskType[CdiSpecParams]):
    """A CDI spec at `path` made for the loaded NVIDIA driver: missing, unreadable, or made
    for another driver (a stale spec names library files that no longer exist), it is
    generated again with `nvidia-ctk cdi generate --output=PATH`."""

    name = "cdi_spec"
    Params = CdiSpecParams

    def reads(self, params: CdiSpecParams) -> list[Fact]:
        return [file_state(params.path, follow=True), PROC_VERSION]

    def check(self, params: CdiSpecParams, facts: Facts) -> Verdict:
        spec_file, proc = facts[file_state(params.path, follow=True)], facts[PROC_VERSION]
        generate = [run(["nvidia-ctk", "cdi", "generate", f"--output={params.path}"], timeout=params.timeout)]
        loaded = getattr(parse_proc_driver_version(proc.text or ""), "version", None) if proc.exists else None
        if loaded is None and facts.reboot_pending:
            # the reboot loads the driver the spec is made for; the reason is said as every deferral says it
            return drift(Change(f"generate the CDI spec {params.path}: deferred to the pending reboot "
                                f"({facts.reboot_pending[0]})", [], reboot=True))
        if loaded is None:
            # before the driver stack's first reboot: the tasks before this one load it in apply
            return drift(Change(f"generate the CDI spec {params.path} once the NVIDIA driver is loaded "
                                "(none is loaded now)", generate))
        if not spec_file.exists:
            return drift(Change(f"generate the CDI spec {params.path} for driver {loaded}", generate,
                                before=None, after=loaded))
        try:
            spec = parse_cdi_spec(spec_file.text or "")
        except CdiSpecError as exc:
            return drift(Change(f"regenerate the CDI spec {params.path}: {exc}", generate, after=loaded))
        if spec.driver_version != loaded:
            return drift(Change(f"regenerate the CDI spec {params.path}: made for driver {spec.driver_version}, "
                                f"{loaded} is loaded (its library paths name files that no longer exist)",
                                generate, before=spec.driver_version, after=loaded))
        return in_sync(f"{params.path} was made for the loaded driver {loaded} ({len(spec.devices)} devices, "
                       f"CDI {spec.cdi_version})")

    def apply(self, ctx: ApplyContext, params: CdiSpecParams, changes: list[Change]) -> None:
        """nvidia-ctk's own words when it refuses: its error messages (either log format), not the tail."""
        ops = [op for change in changes for op in change.ops]
        for op, output in zip(ops, ctx.execute(ops, explains_failures=True)):
            if output.rc != 0:
                errors = parse_cdi_generate_log(output.stderr + "\n" + output.stdout).errors
                said = "; ".join(errors) or (output.stderr.strip() or output.stdout.strip())[-400:]
                raise TaskError(f"{op.description} failed (exit {output.rc}): {said}", None,
                                data={"rc": output.rc, "stdout": output.stdout, "stderr": output.stderr})
