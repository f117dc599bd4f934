"""slurm_settings: what this node's Slurm configuration names (Prolog, Epilog, HealthCheckProgram, ...).

slurmd runs the programs its own slurm.conf names: the configless cache slurmd keeps
(`/run/slurm/conf/slurm.conf`, fetched from slurmctld) when there is one, else
`/etc/slurm/slurm.conf`. The file is read with its `Include` files (relative to its folder), the
last setting of a key winning, as Slurm's parser takes it; keys are case-insensitive.

The node cannot change this itself: the Slurm controller's play sets it (gpuconf-agent.yml's
slurm_controller play, an include file and `scontrol reconfigure`). So a setting that differs is
drift with nothing to run; apply waits up to `wait` seconds for slurmd to fetch the new
configuration, and fails naming what is still missing.
"""
from __future__ import annotations

import posixpath
import re
import time

from pydantic import field_validator

from gpuconf.facts.base import Fact, FileState, file_glob, file_state
from gpuconf.tasks.base import ApplyContext, Change, Facts, Params, Refused, TaskType, Unknown, Verdict, drift, in_sync

# Where slurmd's slurm.conf is, in the order slurmd prefers them: the configless cache, then the
# packages' path (Debian's older slurm-llnl too).
CONFIG_PATHS = ("/run/slurm/conf/slurm.conf", "/etc/slurm/slurm.conf", "/etc/slurm-llnl/slurm.conf")
GLOB_LIMIT = 65536    # what the runner reads of each globbed file
# Lines that hold several KEY=VALUE pairs describe nodes and partitions, not settings.
RECORD_KEYS = {"nodename", "partitionname", "nodeset", "frontendname", "downnodes", "switchname"}
_INCLUDE = re.compile(r"^include\s+(\S+)\s*$", re.IGNORECASE)


class SlurmSettingsParams(Params):
    settings: dict[str, str]
    conf: str | None = None     # slurm.conf's path on the node (default: where slurmd keeps it)
    wait: float = 30            # apply: seconds to wait for slurmd to fetch a new configuration

    @field_validator("settings", mode="before")
    @classmethod
    def _strings(cls, value: object) -> object:
        if isinstance(value, dict):
            return {str(k): str(v) for k, v in value.items()}
        return value


def parse_slurm_conf(files: dict[str, str], main: str) -> dict[str, str]:
    """The settings of `main` and its includes (lower-cased key -> value, the last one winning).
    An include that was not read, or a file cut short, is Unknown: never a guess."""
    values: dict[str, str] = {}

    def read(path: str, depth: int) -> None:
        if depth > 8:
            raise Unknown(f"{path}: Include nested deeper than 8 files")
        if path not in files:
            raise Unknown(f"{path} (included by Slurm's configuration) could not be read")
        for raw in files[path].splitlines():
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            include = _INCLUDE.match(line)
            if include:
                read(posixpath.normpath(posixpath.join(posixpath.dirname(path), include.group(1))), depth + 1)
                continue
            key, sep, value = line.partition("=")
            key = key.strip().lower()
            if sep and key and " " not in key and key not in RECORD_KEYS:
                values[key] = value.strip().strip('"')

    read(main, 0)
    return values


def _conf_files(paths: tuple[str, ...]) -> Fact[dict[str, str]]:
    folders = sorted({posixpath.dirname(p) for p in paths})
    return file_glob([f"{folder}/*.conf" for folder in folders], dict, key="slurm_settings:" + ":".join(folders))


class SlurmSettings(TaskType[SlurmSettingsParams]):
    """Settings this node's Slurm configuration must name (`settings: {Prolog: /usr/local/sbin/gpuconf-gate}`),
    read from slurm.conf as slurmd has it (the configless cache, else /etc/slurm) with its Include files.
    A setting that differs is drift that only the Slurm controller can fix: apply waits for slurmd to
    fetch the controller's configuration (`wait`), then fails naming what is still missing."""

    name = "slurm_settings"
    Params = SlurmSettingsParams

    @staticmethod
    def _paths(params: SlurmSettingsParams) -> tuple[str, ...]:
        return (params.conf,) if params.conf else CONFIG_PATHS

    def reads(self, params: SlurmSettingsParams) -> list[Fact]:
        paths = self._paths(params)
        return [*(file_state(p, follow=True) for p in paths), _conf_files(paths)]

    def _values(self, params: SlurmSettingsParams, states: list[FileState],
                globbed: dict[str, str]) -> tuple[str, dict[str, str]]:
        paths = self._paths(params)
        main = next((path for path, state in zip(paths, states) if state.exists), None)
        if main is None:
            raise Refused(f"no slurm.conf on this node (looked for {', '.join(paths)}): is slurmd set up here? "
                          "(gpuconf_agent_slurm: false leaves Slurm out)")
        state = states[paths.index(main)]
        if state.text is None:
            raise Unknown(f"{main} could not be read as text")
        cut = [path for path, text in globbed.items() if path != main and len(text.encode()) >= GLOB_LIMIT - 1]
        if cut:
            raise Unknown(f"{', '.join(sorted(cut))}: longer than gpuconf reads of an included file (64 KiB)")
        return main, parse_slurm_conf({**globbed, main: state.text}, main)

    def check(self, params: SlurmSettingsParams, facts: Facts) -> Verdict:
        paths = self._paths(params)
        states = [facts[file_state(p, follow=True)] for p in paths]
        main, values = self._values(params, states, facts[_conf_files(paths)])
        changes = []
        for key, want in params.settings.items():
            have = values.get(key.lower())
            if have != want:
                now = f"has {key}={have}" if have is not None else f"names no {key}"
                changes.append(Change(f"Slurm's configuration here ({main}) {now}, not {key}={want}: the Slurm "
                                      "controller sets it (gpuconf-agent.yml's slurm_controller play)",
                                      before=have, after=want))
        if changes:
            return drift(*changes)
        return in_sync(f"{main} names " + ", ".join(f"{k}={v}" for k, v in params.settings.items()))

    def apply(self, ctx: ApplyContext, params: SlurmSettingsParams, changes: list[Change]) -> None:
        """Nothing to run here: wait for slurmd to fetch what `scontrol reconfigure` pushed."""
        paths = self._paths(params)
        deadline = time.monotonic() + params.wait
        while time.monotonic() < deadline:
            states = [ctx.read(file_state(p, follow=True)) for p in paths]
            _, values = self._values(params, states, ctx.read(_conf_files(paths)))
            if all(values.get(k.lower()) == v for k, v in params.settings.items()):
                return
            time.sleep(1)
