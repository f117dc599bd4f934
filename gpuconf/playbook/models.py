"""The validated shape of plays, tasks and roles.

Keywords are checked by pydantic models that forbid unknown keys; the loader
maps every validation error back to file:line:column with a "did you mean".
"""
from __future__ import annotations

import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from gpuconf.errors import Location

IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _as_list(value: Any) -> Any:
    if value is None:
        return []
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


warnings.filterwarnings("ignore", message='Field name "register"', category=UserWarning)  # ABC.register


class TaskKeywords(BaseModel):
    """Every key of a task except its one task type."""

    model_config = ConfigDict(extra="forbid")

    name: str | None = None
    when: str | bool | list[str | bool] | None = None
    notify: list[str] = Field(default_factory=list)
    listen: list[str] = Field(default_factory=list)
    tags: list[str] = Field(default_factory=list)
    register: str | None = None
    become: bool | None = None
    ignore_errors: bool = False
    timeout: float | None = Field(None, gt=0)
    vars: dict[str, Any] = Field(default_factory=dict)
    no_log: bool = False

    _lists = field_validator("notify", "listen", "tags", mode="before")(lambda cls, v: _as_list(v))

    @field_validator("register")
    @classmethod
    def _identifier(cls, value: str | None) -> str | None:
        if value is not None and not IDENTIFIER.match(value):
            raise ValueError(f"'{value}' is not a valid variable name")
        return value


TASK_KEYWORDS = tuple(TaskKeywords.model_fields)


class RoleRef(BaseModel):
    """A role in a play's `roles:` list: a name, or a mapping with params."""

    model_config = ConfigDict(extra="allow")

    role: str
    tags: list[str] = Field(default_factory=list)
    when: str | bool | list[str | bool] | None = None
    become: bool | None = None

    _lists = field_validator("tags", mode="before")(lambda cls, v: _as_list(v))

    @property
    def params(self) -> dict[str, Any]:
        return dict(self.model_extra or {})


class PlayKeywords(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str | None = None
    hosts: str | list[str]
    vars: dict[str, Any] = Field(default_factory=dict)
    vars_files: list[str] = Field(default_factory=list)
    roles: list[Any] = Field(default_factory=list)
    tasks: list[Any] = Field(default_factory=list)
    handlers: list[Any] = Field(default_factory=list)
    become: bool | None = None
    tags: list[str] = Field(default_factory=list)
    serial: int | str | list[int | str] | None = None
    max_fail_percentage: float | None = Field(None, ge=0, le=100)
    gather_facts: bool = True

    _lists = field_validator("tags", "vars_files", mode="before")(lambda cls, v: _as_list(v))

    @field_validator("serial")
    @classmethod
    def _serial(cls, value: Any) -> Any:
        """Ansible's `serial`: a host count, a percentage ('30%'), or a list of them."""
        for step in value if isinstance(value, list) else [] if value is None else [value]:
            if isinstance(step, bool) or (isinstance(step, int) and step < 0):
                raise ValueError(f"serial must be a host count or a percentage like '30%', not {step!r}")
            if isinstance(step, str) and not re.fullmatch(r"\s*(\d+(\.\d+)?\s*%|\d+)\s*", step):
                raise ValueError(f"serial must be a host count or a percentage like '30%', not '{step}'")
        return value

    @field_validator("hosts", mode="before")
    @classmethod
    def _hosts(cls, value: Any) -> Any:
        return ",".join(str(v) for v in value) if isinstance(value, list) else value


PLAY_KEYWORDS = tuple(PlayKeywords.model_fields)


@dataclass
class TaskDef:
    """One task as loaded: its type, raw params (may hold templates) and keywords."""

    name: str
    type: str
    params: dict[str, Any]
    keywords: TaskKeywords
    location: Location
    raw: Any = None  # the YAML node, for locating param errors
    role: str | None = None
    role_params: dict[str, Any] = field(default_factory=dict)
    role_when: list[Any] = field(default_factory=list)
    tags: set[str] = field(default_factory=set)
    search_paths: list[Path] = field(default_factory=list)
    become: bool | None = None


@dataclass
class Play:
    name: str
    hosts: str
    keywords: PlayKeywords
    vars: dict[str, Any]
    tasks: list[TaskDef]
    handlers: list[TaskDef]
    location: Location
    role_defaults: dict[str, Any] = field(default_factory=dict)  # all roles' defaults, as in Ansible


@dataclass
class Playbook:
    path: Path
    plays: list[Play]
