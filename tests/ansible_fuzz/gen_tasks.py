"""Tasks for the generated programs: set_fact, debug, command and shell, copy, template, file,
lineinfile, assert, fail, blocks, includes and imports, loops, and their keywords (when,
register, tags, notify, changed_when, failed_when, ignore_errors, loop_control, vars)."""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from tests.ansible_fuzz.gen_expr import CATALOG, TYPE_OF, Expressions, Values, literal

TAGS = ["t1", "t2", "always", "never"]
# the keys of a registered result `debug: var=` shows: those the harness compares (harness.py)
RESULT_KEYS = ["changed", "failed", "rc", "stdout_lines", "skipped", "msg", "results"]
COMMANDS = ["echo {w}", "printf '%s\\n' {w} second", "true", "false", "sh -c 'exit 3'", "printf 'a\\n\\nb\\n\\n'",
            "echo {{{{ {e} }}}}", "cat /nonexistent/file", "echo $HOME *.yml"]
SHELLS = ["echo {w} | tr a-z A-Z", "echo one; echo two >&2", "exit 2", "printf '%s' {w}", "test -n '{w}' && echo set"]


@dataclass
class Scope:
    """What the tasks generated so far make known: registered names, handler names, files."""

    registered: list[str] = field(default_factory=list)
    handlers: list[str] = field(default_factory=list)
    counter: list[int] = field(default_factory=lambda: [0])
    roles: list[str] = field(default_factory=list)
    templates: list[str] = field(default_factory=list)      # templates/*.j2 beside the playbook
    file_tasks: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # path -> the tasks it holds

    def next(self) -> int:
        self.counter[0] += 1
        return self.counter[0]


class TaskGen:
    def __init__(self, rng: random.Random, scope: Scope, in_role: str | None = None):
        self.rng = rng
        self.values = Values(rng)
        self.scope = scope
        self.expr = Expressions(rng, self.values, scope.registered)
        self.in_role = in_role

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    def tasks(self, count: int, depth: int = 0) -> list[dict[str, Any]]:
        return [self.task(depth) for _ in range(count)]

    def task(self, depth: int = 0) -> dict[str, Any]:
        makers = [(self.debug, 6), (self.set_fact, 4), (self.command, 3), (self.copy, 3), (self.assert_, 1),
                  (self.fail, 1), (self.loop_task, 3), (self.template, 2), (self.file_task, 1),
                  (self.lineinfile, 1)]
        if depth < 2:
            makers += [(self.block, 2), (self.include, 1)]
        choice = self.rng.choices([m for m, _ in makers], [w for _, w in makers])[0]
        task = choice(depth) if choice in (self.block, self.include) else choice()
        return self.keywords(task)

    # -- keywords --------------------------------------------------------------
    def keywords(self, task: dict[str, Any]) -> dict[str, Any]:
        if "block" in task or "include_tasks" in task or "import_tasks" in task:
            if self.chance(0.2):
                task["when"] = self.expr.of("bool")
            return task
        if self.chance(0.25):
            task["when"] = self.expr.of("bool") if self.chance(0.9) else self.expr.of(self.rng.choice(["int", "str"]))
        if self.chance(0.1):
            task["tags"] = self.rng.sample(TAGS, self.rng.randint(1, 2))
        if self.chance(0.1):
            task["vars"] = {self.rng.choice(CATALOG["int"] + CATALOG["str"]): None}
            name = next(iter(task["vars"]))
            task["vars"][name] = self.values.for_name(name)
        if self.chance(0.15) and self.scope.handlers and not task.get("loop"):
            task["notify"] = self.rng.choice(self.scope.handlers)
        if "command" in task or "shell" in task:
            if self.chance(0.25):
                task["changed_when"] = self.rng.choice(["false", "true", self.expr.of("bool")])
            if self.chance(0.2):
                task["failed_when"] = self.rng.choice(["false", self.expr.of("bool")])
        if self.chance(0.12):
            task["ignore_errors"] = True
        return task

    def registering(self, task: dict[str, Any], p: float = 0.5) -> dict[str, Any]:
        if self.chance(p):
            name = f"r{self.scope.next()}"
            task["register"] = name
            self.scope.registered.append(name)
        return task

    def dest(self) -> str:
        return "{{ out }}/{{ inventory_hostname }}-f" + str(self.scope.next())

    # -- task kinds ------------------------------------------------------------
    def debug(self) -> dict[str, Any]:
        if self.chance(0.25):
            name = self.rng.choice([*CATALOG["int"], *CATALOG["str"], *CATALOG["list"], *CATALOG["dict"],
                                    *self.scope.registered, "undefined_var"])
            if name in self.scope.registered:   # a whole result holds what differs run to run (delta, a temporary src)
                name += "." + RESULT_KEYS[len(self.scope.registered) % len(RESULT_KEYS)]   # no draw: seeds replay
            return self.registering({"debug": {"var": name}}, 0.1)
        msg = self.expr.template() if self.chance(0.6) else self.expr.text()
        form = self.rng.random()
        if form < 0.15 and '"' not in msg and "\n" not in msg and "'" not in msg:
            return self.registering({"debug": f"msg=\"{msg}\""}, 0.1)
        return self.registering({"debug": {"msg": msg}}, 0.1)

    def set_fact(self) -> dict[str, Any]:
        facts = {}
        for _ in range(self.rng.randint(1, 2)):
            name = self.rng.choice(list(TYPE_OF))
            kind = TYPE_OF[name]
            facts[name] = (self.expr.template(kind if kind in ("int", "str", "bool", "list", "dict") else "any")
                           if kind in ("int", "str", "bool", "list", "dict") and self.chance(0.7)
                           else self.values.for_name(name))
        return self.registering({"set_fact": facts}, 0.05)

    def command(self) -> dict[str, Any]:
        word = self.values.word().replace("'", "").replace("\n", " ").replace("$", "").replace("*", "") or "w"
        if self.chance(0.3):
            line = self.rng.choice(SHELLS).format(w=word)
            task: dict[str, Any] = {"shell": line}
        else:
            line = self.rng.choice(COMMANDS).format(w=f"'{word}'", e=self.rng.choice(["n1", "s1 | quote", "l2"]))
            form = self.rng.random()
            if form < 0.5:
                task = {"command": line}
            elif form < 0.8:
                task = {"command": {"cmd": line}}
            else:
                task = {"command": {"argv": ["echo", word, "{{ n1 }}"]}}
        return self.registering(task, 0.7)

    def copy(self) -> dict[str, Any]:
        params: dict[str, Any] = {"dest": self.dest()}
        kind = self.rng.random()
        if kind < 0.6:
            params["content"] = self.expr.text() + ("\n" if self.chance(0.7) else "")
        elif kind < 0.8:
            params["content"] = self.expr.template(self.rng.choice(["dict", "list", "str"]))
        else:
            params["content"] = {"key": self.values.word(), "n": "{{ n1 }}"}
        if self.chance(0.4):
            params["mode"] = self.rng.choice(["0600", "0644", "0755", "u=rw,g=r,o=r", "u=rwx,go=rx", "0640"])
        return self.registering({"copy": params}, 0.3)

    def template(self) -> dict[str, Any]:
        if not self.scope.templates:
            return self.copy()
        params = {"src": self.rng.choice(self.scope.templates), "dest": self.dest()}
        if self.chance(0.3):
            params["mode"] = self.rng.choice(["0600", "0644", "u=rw,g=r,o="])
        return self.registering({"template": params}, 0.3)

    def file_task(self) -> dict[str, Any]:
        params: dict[str, Any] = {"path": self.dest(), "state": "directory"}
        if self.chance(0.5):
            params["mode"] = self.rng.choice(["0700", "0755", "u=rwx,g=rx,o="])
        return self.registering({"file": params}, 0.3)

    def lineinfile(self) -> dict[str, Any]:
        params = {"path": self.dest(), "line": self.expr.text().replace("\n", " "), "create": True}
        return self.registering({"lineinfile": params}, 0.3)

    def assert_(self) -> dict[str, Any]:
        that: Any = [self.expr.of("bool") for _ in range(self.rng.randint(1, 2))]
        if len(that) == 1 and self.chance(0.5):
            that = that[0]
        task: dict[str, Any] = {"assert": {"that": that}}
        if self.chance(0.4):
            task["assert"]["fail_msg"] = self.expr.text()
        if self.chance(0.2):
            task["assert"]["success_msg"] = "all good {{ n1 }}"
        return self.registering(task, 0.3)

    def fail(self) -> dict[str, Any]:
        task = {"fail": {"msg": self.expr.text()}, "when": self.expr.of("bool")}
        return self.registering(task, 0.1)

    def loop_task(self) -> dict[str, Any]:
        form = self.rng.random()
        body = self.rng.choice(["debug", "set_fact", "command", "copy"])
        var = "item"
        task: dict[str, Any] = {}
        if form < 0.45:
            task["loop"] = self.rng.choice([self.expr.template("list"), "{{ l1 }}", "{{ recs }}", "{{ ll }}",
                                            [1, 2, 3], [], "{{ d1 | dict2items }}", "{{ range(n1 % 4) | list }}"])
        elif form < 0.75:
            task["with_items"] = self.rng.choice(["{{ ll }}", "{{ l1 }}", [["a", "b"], "c"], [1, [2, [3]]],
                                                  "{{ recs }}", []])
        elif form < 0.85:
            task["with_dict"] = self.rng.choice(["{{ d1 }}", "{{ d2 }}", {"k": 1}])
        elif form < 0.92:
            task["with_list"] = self.rng.choice(["{{ l1 }}", [[1, 2], 3]])
        else:
            task["with_subelements"] = ["{{ recs }}", "tags"]
        if self.chance(0.35):
            control: dict[str, Any] = {}
            if self.chance(0.5):
                var = control["loop_var"] = "thing"
            if self.chance(0.4):
                control["index_var"] = "idx"
            if self.chance(0.3):
                control["label"] = "{{ " + var + " }}"
            if self.chance(0.2):
                control["extended"] = True
            task["loop_control"] = control
        uses = "{{ " + var + " }}"
        extra = self.rng.choice(["", " {{ idx | default('-') }}", " {{ ansible_loop.index | default('-') }}"]) \
            if task.get("loop_control") else ""
        if body == "debug":
            task["debug"] = {"msg": uses + extra}
        elif body == "set_fact":
            task["set_fact"] = {"s3": uses + extra}
        elif body == "command":
            task["command"] = "echo " + uses
        else:
            task["copy"] = {"content": uses + extra + "\n", "dest": self.dest() + "-{{ " + var + " | string | hash('md5') }}"}
        if self.chance(0.3):
            task["when"] = self.rng.choice([f"{var} is string", f"{var} != 2", "n1 > 0", f"{var} | string | length > 1"])
        return self.registering(task, 0.4)

    def block(self, depth: int) -> dict[str, Any]:
        task: dict[str, Any] = {"block": self.tasks(self.rng.randint(1, 3), depth + 1)}
        if self.chance(0.6):
            rescue = self.tasks(self.rng.randint(1, 2), depth + 1)
            if self.chance(0.5):
                rescue.insert(0, {"debug": {"msg": self.rng.choice([
                    "{{ ansible_failed_task.name | default('unnamed') }}", "{{ ansible_failed_result.msg | default('') }}",
                    "{{ ansible_failed_result.rc | default('no rc') }}"])}})
            task["rescue"] = rescue
        if self.chance(0.5):
            task["always"] = self.tasks(self.rng.randint(1, 2), depth + 1)
        if self.chance(0.2):
            name = self.rng.choice(CATALOG["int"])
            task["vars"] = {name: self.values.for_name(name)}
        return task

    def include(self, depth: int) -> dict[str, Any]:
        if self.scope.roles and self.chance(0.3) and self.in_role is None:
            role = self.rng.choice(self.scope.roles)
            key = self.rng.choice(["include_role", "import_role"])
            return {key: {"name": role}}
        number = self.scope.next()
        name = f"tasks/t{number}.yml" if self.in_role is None else f"roles/{self.in_role}/tasks/t{number}.yml"
        self.scope.file_tasks[name] = self.tasks(self.rng.randint(1, 3), depth + 1)
        key = self.rng.choice(["include_tasks", "import_tasks"])
        path = name if self.in_role is None else f"t{number}.yml"
        task: dict[str, Any] = {key: path}
        if self.chance(0.2):
            task = {key: {"file": path}}
        return task


def literal_list(values: list[Any]) -> str:
    return "[" + ", ".join(literal(v) for v in values) + "]"
