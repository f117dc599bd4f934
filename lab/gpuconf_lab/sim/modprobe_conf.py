"""Reading ``modprobe.d`` configuration, from the live filesystem or an initramfs snapshot.

The same parser serves both, because the lesson the lab must teach is that a
``blacklist nouveau`` in ``/etc/modprobe.d`` does nothing at boot until ``update-initramfs``
has copied it into the initramfs, where the early boot reads it.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field

import state

# Later directories override earlier ones for files of the same name, as kmod does.
CONFIG_DIRS = ("/usr/lib/modprobe.d", "/lib/modprobe.d", "/run/modprobe.d", "/etc/modprobe.d")


@dataclass
class ModprobeConfig:
    """What the configuration says about modules (names normalised to underscores)."""

    blacklist: set = field(default_factory=set)
    options: dict = field(default_factory=dict)    # module -> ["a=1", "b=2"]
    install: dict = field(default_factory=dict)    # module -> shell command
    remove: dict = field(default_factory=dict)
    softdep_pre: dict = field(default_factory=dict)
    softdep_post: dict = field(default_factory=dict)
    aliases: dict = field(default_factory=dict)    # alias -> module

    def params(self, module: str) -> list[str]:
        return list(self.options.get(module, []))


def normalise(name: str) -> str:
    """Module names compare with ``-`` and ``_`` as the same character, as kmod does."""
    base = os.path.basename(name)
    for suffix in (".ko.xz", ".ko.zst", ".ko.gz", ".ko"):
        if base.endswith(suffix):
            base = base[: -len(suffix)]
    return base.replace("-", "_")


def parse(texts: list[str]) -> ModprobeConfig:
    """Parse configuration file contents, in the order kmod would read them."""
    config = ModprobeConfig()
    for text in texts:
        for line in _logical_lines(text):
            words = line.split()
            if len(words) < 2:
                continue
            keyword, module = words[0], normalise(words[1])
            if keyword == "blacklist":
                config.blacklist.add(module)
            elif keyword == "options":
                config.options.setdefault(module, []).extend(words[2:])
            elif keyword == "install":
                config.install[module] = " ".join(words[2:])
            elif keyword == "remove":
                config.remove[module] = " ".join(words[2:])
            elif keyword == "alias" and len(words) >= 3:
                config.aliases[words[1]] = normalise(words[2])
            elif keyword == "softdep":
                _parse_softdep(config, module, words[2:])
    return config


def _parse_softdep(config: ModprobeConfig, module: str, words: list[str]) -> None:
    target = None
    for word in words:
        if word == "pre:":
            target = config.softdep_pre.setdefault(module, [])
        elif word == "post:":
            target = config.softdep_post.setdefault(module, [])
        elif target is not None:
            target.append(normalise(word))


def _logical_lines(text: str):
    pending = ""
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].rstrip()
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line = (pending + line).strip()
        pending = ""
        if line:
            yield line


def config_files(directories=CONFIG_DIRS, reader=None) -> list[tuple[str, str]]:
    """(name, text) of every ``*.conf``, later directories overriding earlier same-name files."""
    chosen: dict[str, str] = {}
    for directory in directories:
        real = state.path(directory)
        try:
            names = sorted(os.listdir(real))
        except (FileNotFoundError, NotADirectoryError, PermissionError):
            continue
        for name in names:
            if name.endswith(".conf"):
                chosen[name] = f"{directory}/{name}"
    files = []
    for name in sorted(chosen):
        text = state.read_text(chosen[name], "") or ""
        files.append((chosen[name], text))
    return files


def live_config() -> ModprobeConfig:
    """The configuration the running system's modprobe sees."""
    return parse([text for _, text in config_files()])
