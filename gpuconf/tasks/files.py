"""Files, directories and lines in files. Every write is atomic (temp + rename)."""
from __future__ import annotations

import difflib
import json
import re
from typing import Literal

from pydantic import field_validator, model_validator

from gpuconf.facts.base import Fact, FileState, file_state
from gpuconf.tasks.base import (
    Change,
    Facts,
    Params,
    Refused,
    Resolver,
    TaskType,
    Verdict,
    drift,
    in_sync,
    make_directory,
    remove,
    run,
    write_file,
)
from gpuconf.tasks.modes import NEW_FILE, parse_mode, resolved


def unified_diff(path: str, before: str, after: str) -> str:
    lines = difflib.unified_diff(before.splitlines(True), after.splitlines(True), f"{path} (before)",
                                 f"{path} (after)")
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)


class _Owned(Params):
    path: str
    mode: int | str | None = None  # octal, or symbolic (applied to the path's mode: gpuconf/tasks/modes.py)
    owner: str | None = None
    group: str | None = None

    @field_validator("path")
    @classmethod
    def _absolute(cls, value: str) -> str:
        if not value.startswith("/"):
            raise ValueError(f"path must be absolute, not '{value}'")
        if "\0" in value:
            raise ValueError("path contains a NUL byte")
        return value

    @field_validator("mode", mode="before")
    @classmethod
    def _mode(cls, value: str | int | None) -> int | str | None:
        return parse_mode(value)


def attribute_changes(params: _Owned, state: FileState) -> list[Change]:
    """Mode and ownership drift of an existing path."""
    changes = []
    mode = resolved(params.mode, state.mode, state.kind == "directory")
    if mode is not None and state.mode != mode:
        changes.append(Change(f"{params.path}: mode {state.mode:04o} -> {mode:04o}",
                              [run(["chmod", f"{mode:04o}", params.path])],
                              before=f"{state.mode:04o}", after=f"{mode:04o}"))
    want_owner = params.owner if params.owner is not None else state.owner
    want_group = params.group if params.group is not None else state.group
    if (want_owner, want_group) != (state.owner, state.group):
        changes.append(Change(f"{params.path}: owner {state.owner}:{state.group} -> {want_owner}:{want_group}",
                              [run(["chown", f"{want_owner}:{want_group}", params.path])],
                              before=f"{state.owner}:{state.group}", after=f"{want_owner}:{want_group}"))
    return changes


# what Ansible's template module sets of Jinja's environment, taken with `template:` alone
JINJA_SETTINGS = ("variable_start_string", "variable_end_string", "block_start_string", "block_end_string",
                  "comment_start_string", "comment_end_string", "trim_blocks", "lstrip_blocks", "newline_sequence")


class FileParams(_Owned):
    state: Literal["present", "absent"] = "present"
    content: str | None = None
    template: str | None = None
    src: str | None = None
    backup: bool = False
    variable_start_string: str | None = None
    variable_end_string: str | None = None
    block_start_string: str | None = None
    block_end_string: str | None = None
    comment_start_string: str | None = None
    comment_end_string: str | None = None
    trim_blocks: bool | None = None
    lstrip_blocks: bool | None = None
    newline_sequence: Literal["\n", "\r", "\r\n"] | None = None

    @field_validator("content", mode="before")
    @classmethod
    def _json(cls, value: object) -> object:
        """A mapping or a list is written as JSON, as Ansible's copy writes it (a number or a
        boolean is its text, as for every text parameter: tasks/registry.py build_params)."""
        return json.dumps(value) if isinstance(value, (dict, list)) else value

    @model_validator(mode="after")
    def _one_source(self) -> FileParams:
        given = [k for k in ("content", "template", "src") if getattr(self, k) is not None]
        if len(given) > 1:
            raise ValueError(f"give only one of content, template and src (got {', '.join(given)})")
        jinja = [k for k in JINJA_SETTINGS if getattr(self, k) is not None]
        if jinja and self.template is None and self.content is None:
            raise ValueError(f"{jinja[0]} is a setting of the template's Jinja: give it with template")
        return self


class File(TaskType[FileParams]):
    """A file with exact content (inline, from a Jinja2 template, or copied from
    a role's files/), mode, owner and group; or a file that must be absent.
    Content is replaced atomically and, with `backup: true`, the old file is
    kept as PATH.<timestamp>.gpuconf~."""

    name = "file"
    Params = FileParams

    def reads(self, params: FileParams) -> list[Fact]:
        return [file_state(params.path)]

    def resolve(self, values: dict[str, object], resolver: Resolver) -> dict[str, object]:
        """`template` and `src` become the content they name, rendered on the controller."""
        values = dict(values)
        settings = {k: values.pop(k) for k in JINJA_SETTINGS if values.get(k) is not None}
        if values.get("template") is not None and values.get("content") is None and values.get("src") is None:
            dest = values.get("path")
            values["content"] = resolver.template(str(values.pop("template")), settings,
                                                  None if dest is None else str(dest))
        elif values.get("src") is not None and values.get("content") is None and values.get("template") is None:
            values["content"] = resolver.source(str(values.pop("src")))
        return values

    def check(self, params: FileParams, facts: Facts) -> Verdict:
        state: FileState = facts[file_state(params.path)]
        if params.state == "absent":
            if not state.exists:
                return in_sync(f"{params.path} is absent")
            return drift(Change(f"remove {params.path}", [remove(params.path)], before="present", after="absent"))
        if state.exists and state.kind != "file":
            raise Refused(f"{params.path} is a {state.kind}, not a file; refusing to replace it")
        content = params.content
        if not state.exists:
            body = content or ""
            mode = NEW_FILE if params.mode is None else resolved(params.mode, None, False)
            return drift(Change(f"create {params.path}",
                                [write_file(params.path, body, mode, params.owner, params.group)],
                                diff=unified_diff(params.path, "", body), before="absent", after="present"))
        if content is not None and state.text != content:
            if state.content is None:
                raise Refused(f"{params.path} is too large to compare")
            # the write sets mode and owner too; unset ones keep the old file's
            return drift(Change(f"update content of {params.path}",
                                [write_file(params.path, content, resolved(params.mode, state.mode, False),
                                            params.owner, params.group, params.backup)],
                                diff=unified_diff(params.path, state.text or "", content)))
        changes = attribute_changes(params, state)
        return drift(*changes) if changes else in_sync(f"{params.path} is as wanted")


class DirectoryParams(_Owned):
    state: Literal["present", "absent"] = "present"
    recursive: bool = False


class Directory(TaskType[DirectoryParams]):
    """A directory with mode, owner and group; or absent (`recursive` to remove
    a non-empty one)."""

    name = "directory"
    Params = DirectoryParams

    def reads(self, params: DirectoryParams) -> list[Fact]:
        return [file_state(params.path, with_content=False)]

    def check(self, params: DirectoryParams, facts: Facts) -> Verdict:
        state: FileState = facts[file_state(params.path, with_content=False)]
        if params.state == "absent":
            if not state.exists:
                return in_sync(f"{params.path} is absent")
            return drift(Change(f"remove directory {params.path}", [remove(params.path, params.recursive)]))
        if not state.exists:
            return drift(Change(f"create directory {params.path}",
                                [make_directory(params.path, resolved(params.mode, None, True), params.owner,
                                                params.group)]))
        if state.kind != "directory":
            raise Refused(f"{params.path} exists and is a {state.kind}, not a directory")
        changes = attribute_changes(params, state)
        return drift(*changes) if changes else in_sync(f"directory {params.path} is as wanted")


class LineParams(Params):
    path: str
    line: str | None = None
    regexp: str | None = None
    state: Literal["present", "absent"] = "present"
    create: bool = True
    backup: bool = False

    @model_validator(mode="after")
    def _needs_line(self) -> LineParams:
        if self.state == "present" and self.line is None:
            raise ValueError("'line' is required when state is present")
        if self.state == "absent" and self.line is None and self.regexp is None:
            raise ValueError("give 'line' or 'regexp' to remove")
        if self.regexp is not None:
            try:
                re.compile(self.regexp)
            except re.error as exc:
                raise ValueError(f"bad regexp: {exc}") from None
        return self


def edit_lines(text: str, params: LineParams) -> str:
    """The file's text with the line ensured (or removed), as lineinfile does."""
    lines = text.splitlines()
    pattern = re.compile(params.regexp) if params.regexp else None

    def matches(line: str) -> bool:
        return bool(pattern.search(line)) if pattern else line == params.line

    if params.state == "absent":
        kept = [line for line in lines if not matches(line)]
        return "\n".join(kept) + ("\n" if kept else "") if kept != lines else text
    wanted = params.line or ""  # present: the model requires a line
    if "\n" in wanted and f"\n{wanted}\n" in "\n" + "\n".join(lines) + "\n":
        return text  # a line with breaks: Ansible appends it again on every run, gpuconf once (docs/ansible.md)
    if wanted in lines and (pattern is None or not any(matches(x) and x != wanted for x in lines)):
        return text
    hits = [i for i, line in enumerate(lines) if matches(line)]
    if hits:
        lines[hits[-1]] = wanted
    else:
        lines.append(wanted)
    return "\n".join(lines) + "\n"


class Line(TaskType[LineParams]):
    """One line in a file: present (replacing the last line matching `regexp`,
    or appended) or absent (every matching line removed)."""

    name = "line"
    Params = LineParams

    def reads(self, params: LineParams) -> list[Fact]:
        return [file_state(params.path)]

    def check(self, params: LineParams, facts: Facts) -> Verdict:
        state: FileState = facts[file_state(params.path)]
        if not state.exists:
            if params.state == "absent":
                return in_sync(f"{params.path} does not exist")
            if not params.create:
                raise Refused(f"{params.path} does not exist and create is false")
            after = f"{params.line}\n"
            return drift(Change(f"create {params.path} with the line", [write_file(params.path, after, 0o644)],
                                diff=unified_diff(params.path, "", after)))
        if state.kind != "file" or state.text is None:
            raise Refused(f"{params.path} is not a readable regular file")
        after = edit_lines(state.text, params)
        if after == state.text:
            return in_sync(f"{params.path} has the line" if params.state == "present" else
                           f"{params.path} lacks the line")
        verb = "add line to" if params.state == "present" else "remove line from"
        return drift(Change(f"{verb} {params.path}",
                            [write_file(params.path, after, None, None, None, params.backup)],
                            diff=unified_diff(params.path, state.text, after)))
