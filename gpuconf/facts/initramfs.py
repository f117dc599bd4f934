"""What a kernel's initramfs holds: the members matching a glob, read by the remote runner.

The runner reads the image itself (newc cpio, plain, gzip or xz; zstd through the zstd program)
and sends back only the members asked for: an image is tens of MB, so the reading stays on the
host (gpuconf/connection/remote/initramfs.py), and what the members mean is read here and in
the tasks. It also keeps what it read keyed by the image's identity (docs/task-contract.md: the
one write a read-only request makes), so an unchanged image is not decompressed again.
"""
from __future__ import annotations

from collections.abc import Callable

from gpuconf.facts.base import Fact, FactUnavailable, Parsed
from gpuconf.facts.wire import CpioRequest, Reply

# the running kernel's release, put in by the runner (from /proc/sys/kernel/osrelease) in the
# same round trip: a task declares its reads before anything of the host is known
RUNNING_KERNEL = "{kernel}"


def image_paths(kernel: str | None) -> list[str]:
    """Where an initramfs of `kernel` (None: the running one) may be, the first that exists:
    Debian's and Ubuntu's name (update-initramfs), then dracut's (the RHEL family)."""
    release = kernel or RUNNING_KERNEL
    return [f"/boot/initrd.img-{release}", f"/boot/initramfs-{release}.img"]


def initramfs_members(key: str, kernel: str | None, members: str, read: Callable[[dict[str, str]], Parsed],
                      *, names_only: bool = False) -> Fact[Parsed | None]:
    """The members of the initramfs of `kernel` (None: the running one) whose names match the
    glob `members`, as {name: text} (with `names_only`, {name: ""}: a kernel module is
    megabytes); the fact's value is `read` of that, or None when there is no image."""
    request: CpioRequest = {"op": "cpio", "paths": image_paths(kernel), "members": members}
    if names_only:
        request["names_only"] = True
    request["timeout"] = 60  # a zstd image is read through the zstd program

    def parse(reply: Reply) -> Parsed | None:
        if reply.get("error"):
            raise FactUnavailable(f"cannot read the initramfs: {reply['error']}")
        return read(dict(reply.get("files", {}))) if reply.get("exists") else None

    return Fact(key, request, parse)
