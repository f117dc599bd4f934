"""The initramfs of a kernel carries the modprobe configuration it boots with.

A `blacklist nouveau` in /etc/modprobe.d counts at boot only once it is in the
initramfs; `update-initramfs -u` copies it there. The check reads the files
under etc/modprobe.d/ inside /boot/initrd.img-KERNEL (gzip'd or plain newc
cpio, read with zcat and cpio) and rebuilds only when a line is missing.
"""
from __future__ import annotations

import shlex

from pydantic import Field

from gpuconf.facts.base import shell
from gpuconf.tasks.base import Change, Check, CheckContext, Params, TaskType, Unknown, drift, in_sync, run


def initramfs_fact(kernel: str | None):
    """The modprobe.d files inside the initramfs of `kernel` (None: the running one)."""
    release = shlex.quote(kernel) if kernel else '"$(uname -r)"'
    command = (f"f=/boot/initrd.img-{release}; test -r \"$f\" || {{ echo missing >&2; exit 3; }}; "
               "zcat -f \"$f\" | cpio -i --quiet --to-stdout 'etc/modprobe.d/*' 2>/dev/null; true")
    return shell(f"initramfs:{kernel or '@running'}", command, lambda out: out, timeout=60)


class InitramfsParams(Params):
    contains_lines: list[str] = Field(min_length=1)
    kernel: str | None = None


class Initramfs(TaskType):
    """Every line of `contains_lines` is in the modprobe configuration inside
    the initramfs of the running kernel (or `kernel`); otherwise
    `update-initramfs -u -k KERNEL` rebuilds it. The new initramfs takes effect
    at the next boot."""

    name = "initramfs"
    Params = InitramfsParams

    def facts(self, params: InitramfsParams):
        return [initramfs_fact(params.kernel)]

    def check(self, ctx: CheckContext, params: InitramfsParams) -> Check:
        kernel = params.kernel or ctx.facts.get("kernel")
        if not kernel:
            raise Unknown("the running kernel release is not known")
        out = ctx.get(initramfs_fact(params.kernel))
        rebuild = [run(["update-initramfs", "-u", "-k", kernel], timeout=600)]
        if out.rc == 3:
            return drift(Change(f"/boot/initrd.img-{kernel} is missing: update-initramfs", rebuild, reboot=True))
        present = {line.strip() for line in out.stdout.splitlines()}
        missing = [line for line in params.contains_lines if line.strip() not in present]
        if not missing:
            return in_sync(f"initramfs for {kernel} has {', '.join(params.contains_lines)}")
        return drift(Change(f"initramfs for {kernel} lacks {', '.join(missing)}: update-initramfs -u -k {kernel}",
                            rebuild, reboot=True))
