"""containerd runs the nvidia runtime with CDI enabled, where containerd is installed.

From toolkit 1.18, `nvidia-ctk runtime configure --runtime=containerd` no longer edits
/etc/containerd/config.toml in place: it writes the runtime to a drop-in,
/etc/containerd/conf.d/99-nvidia.toml, and makes config.toml import `/etc/containerd/conf.d/*.toml`
(keeping the user's own settings there). With `--cdi.enabled` the drop-in also turns on the CRI
plugin's `enable_cdi`, so that Kubernetes pods asking for `nvidia.com/gpu=all` resolve through
the CDI spec the `cdi_spec` task keeps current. A node without containerd (Docker only) has
nothing to configure: the task says so and is in sync.
"""
from __future__ import annotations

import fnmatch
import tomllib
from collections.abc import Mapping

from pydantic import Field

from gpuconf.facts.base import Fact, file_state
from gpuconf.tasks.base import Change, Facts, Params, TaskType, Verdict, drift, in_sync, run

CONTAINERD = "/usr/bin/containerd"
CONFIG = "/etc/containerd/config.toml"
DROP_IN = "/etc/containerd/conf.d/99-nvidia.toml"
# the CRI plugin's table: config version 2 (containerd 1.x), version 3 (containerd 2.x)
CRI_PLUGINS = ("io.containerd.grpc.v1.cri", "io.containerd.cri.v1.runtime")


class ContainerdRuntimeParams(Params):
    timeout: float = Field(60, gt=0, description="seconds nvidia-ctk runtime configure may take")


def parse_toml(text: str | None) -> dict[str, object] | str:
    """The document, or why it cannot be read (containerd refuses to start on it too)."""
    try:
        return tomllib.loads(text or "")
    except tomllib.TOMLDecodeError as exc:
        return f"not TOML ({exc})"


def _table(table: Mapping[str, object], *keys: str) -> Mapping[str, object]:
    """The table under `keys` (`[plugins."io.containerd.grpc.v1.cri".containerd]`); empty where one is missing."""
    for key in keys:
        found = table.get(key)
        table = found if isinstance(found, dict) else {}
    return table


def drop_in_problem(document: Mapping[str, object]) -> str | None:
    """What the drop-in lacks of what `--runtime=containerd --cdi.enabled` writes, or None."""
    cri = next((_table(document, "plugins", name) for name in CRI_PLUGINS
                if isinstance(_table(document, "plugins").get(name), dict)), None)
    if cri is None:
        return "it has no CRI plugin table"
    if cri.get("enable_cdi") is not True:
        return "CDI is not enabled (enable_cdi)"
    binary = _table(cri, "containerd", "runtimes", "nvidia", "options").get("BinaryName", "")
    if not str(binary).endswith("nvidia-container-runtime"):
        return "it has no nvidia runtime running nvidia-container-runtime"
    return None


def imports_drop_in(document: Mapping[str, object]) -> bool:
    imports = document.get("imports", [])
    return isinstance(imports, list) and any(fnmatch.fnmatch(DROP_IN, str(pattern)) for pattern in imports)


class ContainerdNvidiaRuntime(TaskType[ContainerdRuntimeParams]):
    """Where containerd is installed, its nvidia runtime and CDI (`enable_cdi`) are configured as
    `nvidia-ctk runtime configure --runtime=containerd --cdi.enabled` does from toolkit 1.18: the
    drop-in /etc/containerd/conf.d/99-nvidia.toml, imported by /etc/containerd/config.toml.
    Where containerd is not installed, there is nothing to do."""

    name = "containerd_nvidia_runtime"
    Params = ContainerdRuntimeParams

    def reads(self, params: ContainerdRuntimeParams) -> list[Fact]:
        return [file_state(CONTAINERD), file_state(CONFIG), file_state(DROP_IN)]

    def check(self, params: ContainerdRuntimeParams, facts: Facts) -> Verdict:
        if not facts[file_state(CONTAINERD)].exists:
            return in_sync(f"containerd is not installed ({CONTAINERD}): no runtime to configure")
        configure = [run(["nvidia-ctk", "runtime", "configure", "--runtime=containerd", "--cdi.enabled"],
                         timeout=params.timeout)]
        problems = []
        drop_in = facts[file_state(DROP_IN)]
        if not drop_in.exists:
            problems.append(f"{DROP_IN} is missing")
        else:
            document = parse_toml(drop_in.text)
            problem = document if isinstance(document, str) else drop_in_problem(document)
            if problem:
                problems.append(f"{DROP_IN}: {problem}")
        config = facts[file_state(CONFIG)]
        top = parse_toml(config.text) if config.exists else {}
        if isinstance(top, str):
            problems.append(f"{CONFIG}: {top}")
        elif not imports_drop_in(top):
            problems.append(f"{CONFIG} does not import {DROP_IN}")
        if problems:
            return drift(Change("configure containerd's nvidia runtime with CDI enabled: " + "; ".join(problems),
                                configure))
        return in_sync(f"containerd runs the nvidia runtime with CDI enabled ({DROP_IN}, imported by {CONFIG})")
