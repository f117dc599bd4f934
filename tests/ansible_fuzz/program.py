"""A generated program: the files of one playbook directory (inventory, vars files, roles,
templates, the playbook `site.yml`) and the command-line arguments both tools get.

A file whose name ends in .yml holds YAML data (dumped here, in one way for both tools);
any other file holds text. `Unsafe` is a string written with Ansible's `!unsafe` tag.
"""
from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml


class Unsafe(str):
    """A string Ansible never templates: `!unsafe '{{ x }}'`."""


class _Dumper(yaml.SafeDumper):
    pass


def _unsafe(dumper: yaml.SafeDumper, value: Unsafe) -> yaml.Node:
    return dumper.represent_scalar("!unsafe", str(value), style="'")


def _unsafe_constructor(loader: yaml.SafeLoader, node: yaml.Node) -> Unsafe:
    return Unsafe(loader.construct_scalar(node))  # type: ignore[arg-type]


_Dumper.add_representer(Unsafe, _unsafe)


class _Loader(yaml.SafeLoader):
    pass


_Loader.add_constructor("!unsafe", _unsafe_constructor)


def dump(data: Any) -> str:
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False, default_flow_style=False, allow_unicode=True, width=1000)


def load(text: str) -> Any:
    return yaml.load(text, Loader=_Loader)  # noqa: S506 - our own loader: SafeLoader plus !unsafe


PLAYBOOK = "site.yml"


@dataclass
class Program:
    """The files of one program and the arguments of its run (`--check`, `-e x=1`, `--tags t`).
    `refusals` names the documented refusals (docs/ansible.md) the program uses: gpuconf must
    refuse it at load naming one of them."""

    name: str
    files: dict[str, Any]
    args: list[str] = field(default_factory=list)
    refusals: list[str] = field(default_factory=list)

    @property
    def inventory(self) -> str:
        return "hosts" if "hosts" in self.files else "inventory.yml"

    def write(self, root: Path) -> Path:
        """The program's directory under `root` (emptied first)."""
        if root.exists():
            shutil.rmtree(root)
        for path, content in self.files.items():
            target = root / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(dump(content) if path.endswith(".yml") and not isinstance(content, str) else content)
        return root

    def to_data(self) -> dict[str, Any]:
        return {"name": self.name, "args": list(self.args), "refusals": list(self.refusals), "files": self.files}

    @classmethod
    def from_data(cls, data: dict[str, Any]) -> Program:
        return cls(data["name"], dict(data["files"]), list(data.get("args") or []), list(data.get("refusals") or []))

    def size(self) -> int:
        """How big it is, for the shrinker: the characters of its files."""
        return sum(len(dump(c) if not isinstance(c, str) else c) for c in self.files.values()) + len(self.args)
