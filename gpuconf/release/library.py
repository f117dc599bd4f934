"""The GPU library: the roles and playbooks that ship with gpuconf.

In a checkout they are the top-level `roles/` and `playbooks/`; the wheel carries them as
`gpuconf/library/roles` and `gpuconf/library/playbooks` (setup.py's build step copies them, so git
holds one copy). Whichever this gpuconf was installed from is used: `pip install gpuconf` and a
checkout find the same library, from any directory.

A playbook named on the command line (`gpuconf apply a100-node.yml`) is the file of that path when
there is one (a site's own file wins), else the shipped playbook of that name.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gpuconf import __version__

_PACKAGE = Path(__file__).resolve().parents[1]
_INSTALLED = _PACKAGE / "library"      # what the wheel carries
_CHECKOUT = _PACKAGE.parent            # a checkout: roles/ and playbooks/ beside the package


def library_dir() -> Path:
    """The folder holding the shipped `roles/` and `playbooks/`: the installed package's, else the checkout's."""
    return _INSTALLED if (_INSTALLED / "roles").is_dir() else _CHECKOUT


def shipped_roles() -> Path:
    return library_dir() / "roles"


def shipped_playbooks() -> Path:
    return library_dir() / "playbooks"


def playbook_names() -> list[str]:
    folder = shipped_playbooks()
    return sorted(p.name for p in folder.glob("*.yml")) if folder.is_dir() else []


@dataclass(frozen=True)
class PlaybookChoice:
    """The file a playbook argument names, and whether it is the shipped one."""

    path: Path
    shipped: bool


def shipped_name(given: str) -> str | None:
    """The shipped playbook a name means: `a100-node.yml`, `a100-node` or `playbooks/a100-node.yml`
    (a checkout's spelling, so the README's commands work from anywhere). None for anything else."""
    path = Path(given)
    if path.is_absolute() or len(path.parts) > 2 or (len(path.parts) == 2 and path.parts[0] != "playbooks"):
        return None
    name = path.name if path.suffix in (".yml", ".yaml") else path.name + ".yml"
    return name if (shipped_playbooks() / name).is_file() else None


def find_playbook(given: str | Path, base: Path | None = None) -> PlaybookChoice | None:
    """The file `given` names (relative to `base`, else the current directory) when it exists, else
    the shipped playbook of that name, else None."""
    path = Path(given)
    local = path if path.is_absolute() or base is None else base / path
    if local.exists():
        return PlaybookChoice(local, shipped=False)
    name = shipped_name(str(given))
    if name is None:
        return None
    return PlaybookChoice(shipped_playbooks() / name, shipped=True)


def is_shipped(path: Path) -> bool:
    try:
        path.resolve().relative_to(shipped_playbooks().resolve())
    except ValueError:
        return False
    return True


def describe_playbook(path: Path) -> str:
    """One line for -v: which file a run uses."""
    if is_shipped(path):
        return f"playbook: {path} (shipped with gpuconf {__version__})"
    return f"playbook: {path} (a local file)"
