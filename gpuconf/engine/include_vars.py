"""Ansible's `include_vars`: variables read from a file (or a folder of files) while the play runs,
for the host, for the rest of the run (below set_fact and register, above task vars).

A relative file is looked up as Ansible looks it up: in the role's vars/ and the role's folder, in
the task file's vars/ and folder, then in the playbook's vars/ and folder."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from gpuconf.errors import PlaybookError, TaskError
from gpuconf.files import yamlsrc
from gpuconf.playbook.models import TaskDef

EXTENSIONS = ("yaml", "yml", "json")


def search_folders(task: TaskDef, playbook_dir: Path | None) -> list[Path]:
    folders: list[Path] = []
    if task.role_path:
        folders += [Path(task.role_path) / "vars", Path(task.role_path)]
    here = Path(task.location.file).parent if task.location.file else None
    if here is not None:
        folders += [here / "vars", here]
    if playbook_dir is not None:
        folders += [playbook_dir / "vars", playbook_dir]
    return list(dict.fromkeys(folders))


def _find(name: str, folders: list[Path]) -> Path:
    path = Path(name)
    if path.is_absolute():
        if path.exists():
            return path
        raise TaskError(f"Could not find or access '{name}'")
    for folder in folders:
        if (folder / path).exists():
            return folder / path
    raise TaskError(f"Could not find or access '{name}' (searched {', '.join(str(f) for f in folders)})")


def _read(path: Path) -> dict[str, Any]:
    try:
        data = yamlsrc.load_file(path)
    except PlaybookError as exc:
        raise TaskError(str(exc)) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise TaskError(f"{path} must be stored as a dictionary/hash")
    return dict(yamlsrc.plain(data))


def _folder_files(folder: Path, params: dict[str, Any]) -> list[Path]:
    depth = int(params.get("depth") or 0)
    matching = re.compile(str(params["files_matching"])) if params.get("files_matching") else None
    ignored = params.get("ignore_files") or []
    ignored = [ignored] if isinstance(ignored, str) else list(ignored)
    extensions = params.get("extensions") or list(EXTENSIONS)
    found = []
    for path in sorted(folder.rglob("*")):
        relative = path.relative_to(folder)
        if not path.is_file() or (depth and len(relative.parts) > depth):
            continue
        if any(re.search(pattern, path.name) for pattern in ignored):
            continue
        if matching is not None and not matching.search(path.name):
            continue
        if path.suffix.lstrip(".") not in extensions:
            if not params.get("ignore_unknown_extensions"):
                raise TaskError(f"{path} does not have a valid extension: {', '.join(extensions)}")
            continue
        found.append(path)
    return found


def include_vars(task: TaskDef, params: dict[str, Any], included: dict[str, Any],
                 playbook_dir: Path | None) -> tuple[str, dict[str, Any]]:
    """Read the file(s) `params` name into `included`: the result's message and data."""
    folders = search_folders(task, playbook_dir)
    source = params.get("file") or params.get("_raw_params")
    if params.get("dir"):
        folder = _find(str(params["dir"]), folders)
        if not folder.is_dir():
            raise TaskError(f"{params['dir']} directory does not exist")
        files = _folder_files(folder, params)
    elif source:
        files = [_find(str(source), folders)]
    else:
        raise TaskError("include_vars: give a file (include_vars: FILE) or dir")
    values: dict[str, Any] = {}
    for path in files:
        values.update(_read(path))
    if params.get("name"):
        values = {str(params["name"]): values}
    included.update(values)
    return f"read {', '.join(str(p) for p in files)}", {
        "ansible_included_var_files": [str(p) for p in files], "ansible_facts": values}
