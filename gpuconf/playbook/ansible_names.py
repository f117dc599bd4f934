"""Ansible's module names and argument forms, turned into gpuconf's task types when a playbook loads.

`ansible.builtin.copy: {dest: /x, content: y}` and `copy: dest=/x content=y` both become
`file: {path: /x, content: y}`: the same job, done by the task that does it, under the one task
contract. A module or a parameter with no gpuconf twin is an error that names what to use
(docs/ansible.md lists every mapping). gpuconf's own spellings pass through unchanged.
"""
from __future__ import annotations

from typing import Any

# Ansible module names people type from habit, and gpuconf's task type for each (README, "Coming from Ansible").
ANSIBLE_MODULES = {
    "shell": "command (a string runs in /bin/sh; `creates`, `removes`, `unless` make it idempotent)",
    "raw": "command", "script": "command", "expect": "command (with `stdin`)",
    "copy": "file (`content:` inline, or `src:` from the role's files/)",
    "template": "file (`template:` names a Jinja2 file in the role's templates/)",
    "lineinfile": "line", "blockinfile": "line (one line each) or file",
    "replace": "line (with `regexp`)",
    "apt": "package", "dnf": "package (backend: dnf)", "yum": "package (backend: dnf)",
    "package": "package",
    "systemd": "service", "systemd_service": "service", "service": "service",
    "modprobe": "kernel_module",
    "fail": "assert (`assert: {that: [CONDITION], fail_msg: ...}`)",
    "stat": "probe (`probe: {command: test -e PATH}`) or a fact (`facts.*`)",
    "wait_for": "probe", "uri": "probe (with curl)", "get_url": "command (with `creates`)",
    "user": "command (with `unless: id NAME`)", "group": "command (with `unless: getent group NAME`)",
    "sysctl": "line (in /etc/sysctl.d) and command (sysctl -p, as a handler)",
    "mount": "line (in /etc/fstab) and command",
}


def ansible_hint(name: str) -> str:
    """` (in gpuconf: X)` for an Ansible module name (plain or ansible.builtin.*), or ''."""
    short = name.split(".")[-1] if name.startswith(("ansible.builtin.", "ansible.posix.", "community.general.")) \
        else name
    return f" (Ansible's '{short}' is gpuconf's {ANSIBLE_MODULES[short]})" if short in ANSIBLE_MODULES else ""


# gpuconf's own parameters of `command`, taken beside Ansible's under both names
COMMAND_EXTRAS = {"unless": "unless", "env": "env", "timeout": "timeout"}
PREFIXES = ("ansible.builtin.", "ansible.legacy.", "ansible.posix.", "community.general.")
# Ansible's module -> (gpuconf's task type, {Ansible parameter: gpuconf parameter}); a parameter
# missing from the table is refused with the list of those taken
MODULES: dict[str, tuple[str, dict[str, str]]] = {
    "copy": ("file", {"dest": "path", "content": "content", "src": "src", "mode": "mode", "owner": "owner",
                      "group": "group", "backup": "backup"}),
    "template": ("file", {"dest": "path", "src": "template", "mode": "mode", "owner": "owner", "group": "group",
                          "backup": "backup", **{name: name for name in (
                              "variable_start_string", "variable_end_string", "block_start_string",
                              "block_end_string", "comment_start_string", "comment_end_string", "trim_blocks",
                              "lstrip_blocks", "newline_sequence")}}),
    "lineinfile": ("line", {"path": "path", "dest": "path", "line": "line", "regexp": "regexp", "state": "state",
                            "create": "create", "backup": "backup"}),
    "apt": ("package", {"name": "name", "pkg": "name", "state": "state", "purge": "purge"}),
    "dnf": ("package", {"name": "name", "state": "state"}),
    "yum": ("package", {"name": "name", "state": "state"}),
    "package": ("package", {"name": "name", "state": "state"}),
    "service": ("service", {"name": "name", "state": "state", "enabled": "enabled"}),
    "systemd": ("service", {"name": "name", "state": "state", "enabled": "enabled", "daemon_reload": "daemon_reload"}),
    "systemd_service": ("service", {"name": "name", "state": "state", "enabled": "enabled",
                                    "daemon_reload": "daemon_reload"}),
    "modprobe": ("kernel_module", {"name": "name", "state": "state", "params": "options", "persistent": "persist"}),
    "assert": ("assert", {"that": "that", "fail_msg": "fail_msg", "msg": "fail_msg", "success_msg": "success_msg",
                          "quiet": "quiet"}),
    "fail": ("assert", {"msg": "fail_msg"}),
    "ping": ("ping", {"data": "data"}),
    "command": ("command", {"cmd": "cmd", "argv": "cmd", "creates": "creates", "removes": "removes",
                            "chdir": "chdir", "stdin": "stdin", "_raw_params": "cmd", **COMMAND_EXTRAS}),
    "shell": ("command", {"cmd": "cmd", "creates": "creates", "removes": "removes", "chdir": "chdir",
                          "stdin": "stdin", "_raw_params": "cmd", **COMMAND_EXTRAS}),
}
NATIVE = ("service", "package", "assert")   # gpuconf task types that Ansible also names
FREE_FORM = ("command", "shell", "debug", "set_fact", "copy", "template", "file", "lineinfile", "apt", "dnf",
             "yum", "package", "service", "systemd", "modprobe", "fail", "assert", "reboot", "ping")
# Ansible's features that a task key names, and what to use in gpuconf instead
REFUSED_MODULES = {
    "import_playbook": "import_playbook is a play, not a task: put it at the playbook's top level",
}


class AnsibleFormError(ValueError):
    """An Ansible form gpuconf cannot take; the message says what to use instead."""


def short_name(key: str) -> str:
    for prefix in PREFIXES:
        if key.startswith(prefix):
            return key[len(prefix):]
    return key


def split_words(text: str) -> list[str]:
    """Split a free-form argument as Ansible's parser does: at spaces outside quotes and outside
    `{{ }}` / `{% %}`, quotes removed (a quoted word keeps its spaces)."""
    words: list[str] = []
    current: list[str] = []
    quote = ""
    depth = 0
    started = False
    index = 0
    while index < len(text):
        char, pair = text[index], text[index:index + 2]
        if depth == 0 and not quote and char.isspace():
            if started:
                words.append("".join(current))
            current, started = [], False
        elif pair in ("{{", "{%") and not quote:
            depth += 1
            current.append(pair)
            started = True
            index += 1
        elif pair in ("}}", "%}") and depth and not quote:
            depth -= 1
            current.append(pair)
            index += 1
        elif char in "'\"" and depth == 0 and (not quote or char == quote):
            quote = "" if quote else char
            started = True
        elif char == "\\" and quote == '"' and index + 1 < len(text):
            current.append(text[index + 1])
            index += 1
        else:
            current.append(char)
            started = True
        index += 1
    if quote:
        raise AnsibleFormError(f"unbalanced quote in '{text}'")
    if started:
        words.append("".join(current))
    return words


def _key_value(word: str) -> tuple[str, str] | None:
    key, sep, value = word.partition("=")
    return (key, value) if sep and key.isidentifier() else None


def free_form(module: str, text: str) -> dict[str, Any]:
    """`command: cat /x creates=/y` -> {_raw_params: 'cat /x', creates: /y}; `debug: msg=x` -> {msg: x}.
    A command's or shell's line stays text, as written, less the KEY=VALUE words of its own
    parameters: the command splits it into words after it is templated, as Ansible's does."""
    words = split_words(text)
    params: dict[str, Any] = {}
    special = ("creates", "removes", "chdir", "stdin")
    for word in words:
        pair = _key_value(word)
        if module in ("command", "shell"):
            if pair is not None and pair[0] in special:
                params[pair[0]] = pair[1]
        elif pair is None:
            raise AnsibleFormError(f"'{word}' is no KEY=VALUE argument of {module} "
                                   f"(write the parameters as a mapping: `{module}: {{KEY: VALUE}}`)")
        else:
            params[pair[0]] = pair[1]
    if module in ("command", "shell"):
        params["_raw_params"] = _command_part(text, special)
    return params


def _command_part(text: str, special: tuple[str, ...]) -> str:
    """A command line, kept as written, less Ansible's creates=/removes=/chdir=/stdin= words."""
    kept = [word for word in text.split(" ") if (pair := _key_value(word)) is None or pair[0] not in special]
    return " ".join(kept).strip()


def translate(key: str, params: Any) -> tuple[str, Any] | None:
    """gpuconf's (task type, params) for an Ansible module key, or None when the key is not one
    of Ansible's forms (gpuconf's own task types with their own params)."""
    module = short_name(key)
    fqcn = module != key
    if module in REFUSED_MODULES and fqcn:
        raise AnsibleFormError(f"'{key}' is not supported: {REFUSED_MODULES[module]}")
    if module == "include_vars":   # `include_vars: FILE` or `include_vars: file=FILE name=x`
        if isinstance(params, str):
            return "include_vars", free_form("include_vars", params) if "=" in params else {"file": params}
        return "include_vars", params if isinstance(params, dict) else {}
    if module in ("group_by", "add_host"):   # the run's inventory, in memory (engine/inventory_actions.py)
        return module, free_form(module, params) if isinstance(params, str) else dict(params or {})
    if module == "meta":   # `meta: flush_handlers`: the action, whatever its spelling
        return "meta", {"_raw_params": params} if not isinstance(params, dict) else params
    converted = isinstance(params, str) and module in FREE_FORM
    if converted:
        params = free_form(module, params)
    if module == "file":
        return _file(params)
    if module in ("debug", "set_fact", "reboot"):
        return (module, params) if fqcn or converted else None
    if module not in MODULES:
        if fqcn and module in ANSIBLE_MODULES:
            raise AnsibleFormError(f"Ansible's '{module}' has no gpuconf twin: use gpuconf's "
                                   f"{ANSIBLE_MODULES[module]}")
        return (module, params) if fqcn else None
    if not fqcn and not converted and module in NATIVE:
        return _native(key, module, params)
    return _mapped(key, module, params if isinstance(params, dict) else {})


def _native(key: str, module: str, params: Any) -> tuple[str, Any] | None:
    """A gpuconf task type that Ansible also names (service, package, assert): gpuconf's own
    parameters pass through, and only Ansible's spellings that differ are mapped."""
    if not isinstance(params, dict):
        return None
    task_type, names = MODULES[module]
    renamed = {name: names[name] for name in params if name in names and names[name] != name}
    if not renamed and module != "assert":
        return None
    if module == "assert" and "quiet" not in params and not renamed:
        return None
    mapped: dict[str, Any] = {renamed.get(str(name), str(name)): value for name, value in params.items()
                              if name != "quiet"}
    return task_type, _mapped(key, module, {}, mapped)[1]


def _mapped(key: str, module: str, params: dict[str, Any],
            result: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
    task_type, names = MODULES[module]
    result = dict(result or {})
    for name, value in params.items():
        if name not in names:
            taken = ", ".join(n for n in names if not n.startswith("_"))
            raise AnsibleFormError(f"{key}: parameter '{name}' is not supported (gpuconf's {task_type} takes "
                                   f"{taken} under Ansible's names; `gpuconf tasks {task_type}` lists its own)")
        result[names[name]] = value
    if module == "shell":
        result["shell"] = True   # Ansible's command uses no shell in any form: its line is split into words
    if module == "fail":
        result = {"that": ["false"], "fail_msg": result.get("fail_msg", "Failed as requested from task")}
    if module in ("assert",):
        result.pop("quiet", None)   # it only quiets Ansible's output
    if task_type == "package" and module != "package":
        result = _package(key, module, result)
    if task_type == "kernel_module":
        result = _modprobe(result)
    if module == "lineinfile":
        result.setdefault("create", False)   # Ansible's default: a missing file is an error
    return task_type, result


def _file(params: Any) -> tuple[str, Any]:
    """Ansible's `file`: state directory is gpuconf's directory; absent stays file absent; the
    rest (touch, link, hard) has no twin."""
    if not isinstance(params, dict):
        return "file", params
    state = params.get("state")
    if state == "directory":
        names = {"path": "path", "dest": "path", "name": "path", "mode": "mode", "owner": "owner", "group": "group",
                 "recurse": "recursive"}
        unknown = [name for name in params if name not in names and name != "state"]
        if unknown:
            raise AnsibleFormError(f"file: parameter '{unknown[0]}' is not supported with state: directory "
                                   f"(it takes {', '.join(names)})")
        return "directory", {names[name]: value for name, value in params.items() if name != "state"}
    if state in ("touch", "link", "hard"):
        raise AnsibleFormError(f"file: state {state} is not supported: write the file with `file: {{path, content}}`"
                               if state == "touch" else f"file: state {state} is not supported: use a command "
                               "with `creates:` (ln -s)")
    if "dest" in params or "name" in params:
        params = {("path" if name in ("dest", "name") else name): value for name, value in params.items()}
    return "file", params


def _package(key: str, module: str, params: dict[str, Any]) -> dict[str, Any]:
    state = params.get("state", "present")
    states = {"present": "present", "installed": "present", "absent": "absent", "removed": "absent"}
    if state not in states:
        raise AnsibleFormError(f"{key}: state '{state}' is not supported: gpuconf installs the version you pin "
                               "(`version:`), never 'latest' (a fleet must converge on one version)")
    params["state"] = "purged" if params.pop("purge", False) and states[state] == "absent" else states[state]
    if module in ("apt", "dnf"):
        params["backend"] = module
    elif module == "yum":
        params["backend"] = "dnf"
    return params


def _modprobe(params: dict[str, Any]) -> dict[str, Any]:
    if "persist" in params:
        params["persist"] = params["persist"] == "present"
    return params


def translate_task(node: Any, task_keywords: tuple[str, ...]) -> Any:
    """The task mapping with its one Ansible module key turned into gpuconf's task type (a new
    mapping that keeps the positions for error messages), or the node itself."""
    from gpuconf.errors import PlaybookError
    from gpuconf.files import yamlsrc

    keys = [key for key in node if key not in task_keywords]
    if len(keys) != 1:
        return node
    key = keys[0]
    try:
        found = translate(str(key), node[key])
    except AnsibleFormError as exc:
        raise PlaybookError(str(exc), node.location(key)) from None
    if found is None:
        return node
    type_name, params = found
    if type_name == key and params is node[key]:
        return node
    original = node[key]
    mapped = yamlsrc.YDict(params if isinstance(params, dict) else {})
    mapped.file = getattr(original, "file", node.file)
    mapped.pos = getattr(original, "pos", node.key_pos.get(key, node.pos))
    positions = getattr(original, "key_pos", {})
    for name, value in mapped.items():  # each parameter keeps its place (under its new name too)
        found = positions.get(name) or next((positions[old] for old in positions
                                             if isinstance(original, dict) and original.get(old) is value), None)
        if found is not None:
            mapped.key_pos[name] = found
    translated = yamlsrc.YDict()
    translated.file, translated.pos = node.file, node.pos
    for name, value in node.items():
        new_name = type_name if name == key else name
        translated[new_name] = mapped if name == key else value
        translated.key_pos[new_name] = node.key_pos.get(name, node.pos)
    return translated


def check_hosts(play: Any) -> None:
    """A play's `hosts:` must name something: an empty one is refused, as Ansible refuses it, and
    never read as every host of the inventory."""
    from gpuconf.errors import PlaybookError

    if "hosts" not in play:
        return
    value = play["hosts"]
    names = value if isinstance(value, list) else [value]
    if not any(str(name).strip() for name in names if name is not None):
        raise PlaybookError("Hosts list cannot be empty: name the play's hosts or groups (`hosts: all` for "
                            "every host of the inventory)", play.location("hosts"))
