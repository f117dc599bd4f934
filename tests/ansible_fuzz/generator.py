"""The program generator: program `i` of seed `S` is drawn from random.Random(f"{S}:{i}"), so each
one can be made again alone. A program has an inventory (YAML or INI; inline and file vars,
children, host vars), group_vars/ and host_vars/ beside the playbook, roles (defaults, vars,
params, argument specs, handlers, files, templates, dependencies), plays (vars, vars_files,
pre_tasks/roles/tasks/post_tasks, handlers, serial) and the tasks of gen_tasks.py.

Every host has the local connection; every file a program writes is `{{ out }}/HOST-fN`
(`out` is given with -e), so the two tools' files can be set side by side.
"""
from __future__ import annotations

import json
import random
from typing import Any

from tests.ansible_fuzz.gen_expr import CATALOG, TYPE_OF, Expressions, Values
from tests.ansible_fuzz.gen_tasks import Scope, TaskGen
from tests.ansible_fuzz.program import Program

HOSTS = ["h1", "h2", "h3"]
CONNECTION = {"ansible_connection": "local", "ansible_python_interpreter": "/usr/bin/python3"}


class Generator:
    def __init__(self, seed: str, index: int):
        self.rng = random.Random(f"{seed}:{index}")
        self.name = f"p{index:05d}"
        self.values = Values(self.rng)
        self.scope = Scope()
        self.expr = Expressions(self.rng, self.values, self.scope.registered)
        self.files: dict[str, Any] = {}
        self.role_handlers: dict[str, list[str]] = {}  # role -> the handlers its tasks and its play's may notify

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    def some_vars(self, most: int = 3, names: list[str] | None = None) -> dict[str, Any]:
        names = names or list(TYPE_OF)
        chosen = self.rng.sample(names, self.rng.randint(1, min(most, len(names))))
        return {name: self.value(name) for name in chosen}

    def value(self, name: str) -> Any:
        kind = TYPE_OF[name]
        if kind in ("int", "str") and self.chance(0.2):  # a template: rendered lazily, where used
            other = self.rng.choice([n for n in CATALOG[kind] if n < name] or ["n1"])
            return "{{ " + (f"{other} + 1" if kind == "int" and other.startswith("n") else other) + " }}"
        return self.values.for_name(name)

    # -- the program ------------------------------------------------------------
    def program(self) -> Program:
        hosts = HOSTS[: self.rng.randint(1, 3)]
        self.inventory(hosts)
        self.templates()
        for index in range(self.rng.choice([0, 0, 1, 1, 2])):
            self.role(f"role{index + 1}", index)
        plays = [self.play(hosts) for _ in range(self.rng.choice([1, 1, 1, 2]))]
        self.files["site.yml"] = plays
        for path, tasks in self.scope.file_tasks.items():
            self.files[path] = tasks
        return Program(self.name, self.files, self.args())

    def args(self) -> list[str]:
        args: list[str] = []
        if self.chance(0.15):
            args.append("--check")
        if self.chance(0.08):
            args += ["--tags", self.rng.choice(["t1", "t2", "t1,t2", "always"])]
        elif self.chance(0.05):
            args += ["--skip-tags", self.rng.choice(["t1", "t2"])]
        if self.chance(0.1):
            name = self.rng.choice(list(TYPE_OF))
            args += ["-e", json.dumps({name: self.values.for_name(name)})]
        return args

    def inventory(self, hosts: list[str]) -> None:
        base = {name: self.values.for_name(name) for name in TYPE_OF if self.chance(0.9)}
        groups: dict[str, list[str]] = {"g1": [h for h in hosts if self.chance(0.6)],
                                        "g2": [h for h in hosts if self.chance(0.5)]}
        nested = self.chance(0.3)
        if self.chance(0.2):
            self.ini_inventory(hosts, groups, base, nested)
        else:
            children: dict[str, Any] = {}
            for group, members in groups.items():
                entry: dict[str, Any] = {"hosts": {h: (self.some_vars(2) if self.chance(0.3) else None)
                                                   for h in members}}
                if self.chance(0.4):
                    entry["vars"] = self.some_vars()
                children[group] = entry
            if nested:
                children["g1"]["children"] = {"g2": None}
                children["g2"] = children.pop("g2")
            self.files["inventory.yml"] = {"all": {
                "vars": {**CONNECTION, **base},
                "hosts": {h: (self.some_vars(2) if self.chance(0.2) else None) for h in hosts},
                "children": children}}
        for group in ["all", "g1", "g2"]:
            if self.chance(0.3):
                self.files[f"group_vars/{group}.yml"] = self.some_vars()
        for host in hosts:
            if self.chance(0.2):
                self.files[f"host_vars/{host}.yml"] = self.some_vars()

    def ini_inventory(self, hosts: list[str], groups: dict[str, list[str]], base: dict[str, Any], nested: bool) -> None:
        def ini(value: Any) -> str:
            return str(value) if isinstance(value, int) and not isinstance(value, bool) else json.dumps(value)

        simple = {k: v for k, v in base.items() if isinstance(v, int) and not isinstance(v, bool)}
        lines = [" ".join([h] + [f"{k}={ini(v)}" for k, v in (self.some_vars(1, CATALOG['int'])).items()
                                 if self.chance(0.3)]) for h in hosts]
        for group, members in groups.items():
            lines += ["", f"[{group}]", *members]
        if nested:
            lines += ["", "[g1:children]", "g2"]
        lines += ["", "[all:vars]", *(f"{k}={v}" for k, v in CONNECTION.items()),
                  *(f"{k}={ini(v)}" for k, v in simple.items())]
        self.files["hosts"] = "\n".join(lines) + "\n"
        if base:  # the rest of the base values: a YAML file, as INI values are strings or Python literals
            self.files["group_vars/all.yml"] = {k: v for k, v in base.items() if k not in simple}

    def templates(self) -> None:
        for index in range(self.rng.choice([0, 1, 1, 2])):
            name = f"tpl{index + 1}.j2"
            self.files[f"templates/{name}"] = self.template_text(allow_include=True)
            self.scope.templates.append(name)

    def template_text(self, allow_include: bool = False) -> str:
        lines = []
        if self.chance(0.15):
            lines.append(self.rng.choice(["#jinja2: trim_blocks: False", "#jinja2: lstrip_blocks: True",
                                          "#jinja2:trim_blocks:False,lstrip_blocks:True"]))
        for _ in range(self.rng.randint(1, 4)):
            form = self.rng.random()
            if form < 0.35:
                lines.append("line {{ " + self.expr.of("any") + " }}")
            elif form < 0.5:
                lines.append("{% for x in " + self.rng.choice(["l1", "l2", "recs", "d1 | dict2items"]) +
                             " %}\n  - {{ x }}\n{% endfor %}")
            elif form < 0.6:
                lines.append("{% if " + self.expr.of("bool") + " %}\nyes\n{% else %}\nno\n{% endif %}")
            elif form < 0.68:
                lines.append("    {%- if n1 > 2 %} big{% endif %}\n  {% if b1 %}b1{% endif %}")
            elif form < 0.76 and allow_include:
                self.files["templates/inc.j2"] = "included {{ s1 }}\n"
                lines.append("{% include 'inc.j2' %}")
            elif form < 0.84 and allow_include:
                self.files["templates/macros.j2"] = "{% macro line(v) %}[{{ v }}]{% endmacro %}\n"
                lines.append("{% import 'macros.j2' as m %}{{ m.line(s1) }}")
            elif form < 0.9:
                lines.append("{# a comment #}raw {{ '{{' }} {% raw %}{{ not }}{% endraw %}")
            else:
                lines.append("{% set v = " + self.expr.of("any") + " %}v={{ v }}")
        return "\n".join(lines) + ("\n" if self.chance(0.8) else "")

    def role(self, name: str, index: int) -> None:
        self.scope.roles.append(name)
        root = f"roles/{name}"
        gen = TaskGen(self.rng, self.scope, in_role=name)
        self.scope.handlers.clear()  # a role's tasks notify its own handlers
        if self.chance(0.6):
            self.files[f"{root}/handlers/main.yml"] = self.handlers(gen, prefix=f"{name} ")
        self.role_handlers[name] = list(self.scope.handlers)
        self.files[f"{root}/tasks/main.yml"] = gen.tasks(self.rng.randint(1, 4))
        defaults = self.some_vars()
        if self.chance(0.8):
            self.files[f"{root}/defaults/main.yml"] = defaults
        if self.chance(0.4):
            self.files[f"{root}/vars/main.yml"] = self.some_vars(2)
        if index and self.chance(0.4):
            dependency = self.rng.choice(self.scope.roles[:index])
            self.files[f"{root}/meta/main.yml"] = {"dependencies": [dependency]}
            self.role_handlers[name] += self.role_handlers[dependency]
        if self.chance(0.3):
            self.files[f"{root}/meta/argument_specs.yml"] = self.argument_specs(defaults)
        if self.chance(0.4):
            self.files[f"{root}/templates/rt.j2"] = self.template_text()
            self.files[f"{root}/tasks/main.yml"].append({"template": {"src": "rt.j2", "dest": gen.dest()}})
        if self.chance(0.3):
            self.files[f"{root}/files/rf.txt"] = "role file {{ not templated }}\n"
            self.files[f"{root}/tasks/main.yml"].append({"copy": {"src": "rf.txt", "dest": gen.dest()}})

    def argument_specs(self, defaults: dict[str, Any]) -> dict[str, Any]:
        options: dict[str, Any] = {}
        kinds = {"int": "int", "str": "str", "bool": "bool", "list": "list", "dict": "dict"}
        for name in self.rng.sample(list(TYPE_OF), 2):
            kind = TYPE_OF[name]
            option: dict[str, Any] = {"type": kinds.get(kind, "raw")}
            if self.chance(0.1):
                option["required"] = True
            if kind == "str" and self.chance(0.3):
                option["choices"] = ["alpha", "beta", "gpu0"]
            options[name] = option
        return {"argument_specs": {"main": {"options": options}}}

    def handlers(self, gen: TaskGen, prefix: str = "") -> list[dict[str, Any]]:
        handlers = []
        for _ in range(self.rng.randint(1, 2)):
            name = f"{prefix}handler{self.scope.next()}"
            self.scope.handlers.append(name)
            body = self.rng.choice([{"debug": {"msg": "ran " + name + " {{ n1 }}"}},
                                    {"copy": {"content": "handled {{ s1 }}\n", "dest": gen.dest()}}])
            handler = {"name": name, **body}
            if self.chance(0.3):
                topic = self.rng.choice(["topic a", "topic b"])
                handler["listen"] = topic
                self.scope.handlers.append(topic)
            handlers.append(handler)
        return handlers

    def play(self, hosts: list[str]) -> dict[str, Any]:
        gen = TaskGen(self.rng, self.scope)
        self.scope.handlers.clear()
        play: dict[str, Any] = {"hosts": self.rng.choice(["all", "all", "g1", "g2", "h1", "g1:g2", "all:!h2"]),
                                "gather_facts": False}
        if self.chance(0.4):
            play["vars"] = self.some_vars()
        if self.chance(0.2):
            path = f"vars/p{self.scope.next()}.yml"
            self.files[path] = self.some_vars()
            play["vars_files"] = [path]
        if self.chance(0.15):
            play["serial"] = self.rng.choice([1, 2, "50%"])
        if self.chance(0.5):
            play["handlers"] = self.handlers(gen)
        if self.chance(0.25):
            play["pre_tasks"] = gen.tasks(self.rng.randint(1, 2))
        if self.scope.roles and self.chance(0.7):
            roles = self.rng.sample(self.scope.roles, self.rng.randint(1, len(self.scope.roles)))
            play["roles"] = [self.role_entry(role) for role in roles]
            for role in roles:
                self.scope.handlers += self.role_handlers[role]
        play["tasks"] = gen.tasks(self.rng.randint(1, 6))
        if self.chance(0.2):
            play["post_tasks"] = gen.tasks(self.rng.randint(1, 2))
        return play

    def role_entry(self, role: str) -> Any:
        if self.chance(0.5):
            return role
        entry: dict[str, Any] = {"role": role}
        entry.update(self.some_vars(2))
        if self.chance(0.2):
            entry["when"] = self.expr.of("bool")
        if self.chance(0.15):
            entry["tags"] = ["t1"]
        return entry


def generate(seed: str, index: int) -> Program:
    return Generator(seed, index).program()
