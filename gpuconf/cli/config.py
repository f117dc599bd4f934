"""Project configuration: what `ansible.cfg` is to Ansible.

Read from `$GPUCONF_CONFIG`, else `./gpuconf.cfg` (INI, a `[defaults]` section), else
the `[tool.gpuconf]` table of `./pyproject.toml`. `GPUCONF_*` environment variables
override the file, and command-line options override both. Relative paths in a file
are relative to that file's directory.

    [defaults]
    inventory = inventories/prod
    forks = 20
    become = true
    accept_new_host_keys = false
    roles_path = roles:../shared-roles
    vault_password_file = ~/.gpuconf-vault-pass
"""
from __future__ import annotations

import configparser
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from gpuconf.errors import UsageError, did_you_mean

KEYS = ("inventory", "forks", "become", "accept_new_host_keys", "roles_path", "vault_password_file")
PATHS = ("inventory", "vault_password_file")
TRUE, FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


@dataclass
class Config:
    inventory: str | None = None
    forks: int | None = None
    become: bool | None = None
    accept_new_host_keys: bool | None = None
    roles_path: list[Path] = field(default_factory=list)
    vault_password_file: str | None = None
    source: str = "defaults"  # where the values came from, for messages

    def get(self, name: str) -> object:
        return getattr(self, name)


def _flag(value: object, where: str) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in TRUE or text in FALSE:
        return text in TRUE
    raise UsageError(f"{where}: expected true or false, not '{value}'")


def _apply(config: Config, values: Mapping[str, object], where: str, base: Path | None) -> None:
    for key, value in values.items():
        if key not in KEYS:
            raise UsageError(f"{where}: unknown setting '{key}'{did_you_mean(key, KEYS)} (known: {', '.join(KEYS)})")
        if key == "forks":
            try:
                config.forks = int(value) if isinstance(value, (int, float)) else int(str(value))
            except (TypeError, ValueError):
                raise UsageError(f"{where}: forks must be a whole number, not '{value}'") from None
            if config.forks < 1:
                raise UsageError(f"{where}: forks must be at least 1")
        elif key in ("become", "accept_new_host_keys"):
            setattr(config, key, _flag(value, f"{where}: {key}"))
        elif key == "roles_path":
            parts = value if isinstance(value, list) else str(value).split(os.pathsep)
            config.roles_path = [_path(str(p), base) for p in parts if str(p).strip()]
        else:
            text = str(value)
            setattr(config, key, str(_path(text, base)) if key in PATHS and base and "," not in text else text)


def _path(text: str, base: Path | None) -> Path:
    path = Path(text.strip()).expanduser()
    return path if path.is_absolute() or base is None else base / path


def _file_values(cwd: Path) -> tuple[Mapping[str, object], str, Path] | None:
    named = os.environ.get("GPUCONF_CONFIG")
    path = Path(named).expanduser() if named else cwd / "gpuconf.cfg"
    if named and not path.is_file():
        raise UsageError(f"GPUCONF_CONFIG={named}: no such file")
    if path.is_file():
        if path.suffix == ".toml":
            return _toml_values(path)
        parser = configparser.ConfigParser(interpolation=None)
        try:
            parser.read_string(_config_text(path), str(path))
        except configparser.Error as exc:
            raise UsageError(f"{path}: {exc.message}") from None
        unknown = [s for s in parser.sections() if s != "defaults"]
        if unknown:
            raise UsageError(f"{path}: unknown section [{unknown[0]}] (settings go in [defaults])")
        return (dict(parser["defaults"]) if parser.has_section("defaults") else {}), f"{path} [defaults]", path.parent
    pyproject = cwd / "pyproject.toml"
    return _toml_values(pyproject) if pyproject.is_file() else None


def _config_text(path: Path) -> str:
    """A configuration file's text: a regular file of bounded size, as every file the user gives."""
    from gpuconf.files.bounded import read_source

    return read_source(path, UsageError).decode("utf-8", errors="replace")


def _toml_values(path: Path) -> tuple[Mapping[str, object], str, Path] | None:
    try:
        data = tomllib.loads(_config_text(path))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise UsageError(f"{path}: {exc}") from None
    table = data.get("tool", {}).get("gpuconf")
    if table is None:
        return None
    if not isinstance(table, dict):
        raise UsageError(f"{path}: [tool.gpuconf] must be a table")
    return table, f"{path} [tool.gpuconf]", path.parent


def load_config(cwd: Path | None = None, environ: dict[str, str] | None = None) -> Config:
    """The project's settings: the file, then the GPUCONF_* environment over it."""
    cwd = cwd or Path.cwd()
    environ = dict(os.environ if environ is None else environ)
    config = Config()
    found = _file_values(cwd)
    if found:
        values, where, base = found
        _apply(config, values, where, base)
        config.source = where
    from_env = {key: environ[f"GPUCONF_{key.upper()}"] for key in KEYS if f"GPUCONF_{key.upper()}" in environ}
    for key, value in from_env.items():
        _apply(config, {key: value}, f"GPUCONF_{key.upper()}", Path.cwd())
    return config
