"""The task registry imports only what a playbook uses, and its static table matches the modules.

`gpuconf/tasks/registry.py` names every task type's module and class without importing it, so
that a run loads the task types of its playbook and no other. These tests prove both halves:
the table is exactly what the modules define (it cannot drift from them), and a fresh
interpreter that loads and validates a playbook of two task types imports those two modules,
no other task module, no health probe, no report writer it was not asked for and no vault crypto.
"""
from __future__ import annotations

import importlib
import inspect
import json
import pkgutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import gpuconf.tasks
from gpuconf.playbook.loader import load_playbook
from gpuconf.tasks.base import TaskType
from gpuconf.tasks.registry import TASK_MODULES, TASK_TYPES


def defined_task_types() -> dict[str, str]:
    """Every task type the modules under gpuconf/tasks define: name -> "module:Class"."""
    found: dict[str, str] = {}
    for info in pkgutil.walk_packages(gpuconf.tasks.__path__, "gpuconf.tasks."):
        module = importlib.import_module(info.name)
        for class_name, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ == module.__name__ and issubclass(cls, TaskType) and cls.name:
                assert cls.name not in found, f"two task types named {cls.name}: {found[cls.name]}, {class_name}"
                found[cls.name] = f"{module.__name__}:{class_name}"
    return found


def test_the_static_table_names_every_task_type_where_it_is_defined():
    assert TASK_MODULES == defined_task_types()


def test_every_entry_loads_a_task_type_of_its_own_name():
    for name in TASK_MODULES:
        task = TASK_TYPES[name]
        assert isinstance(task, TaskType) and task.name == name
        assert TASK_TYPES[name] is task  # one instance, imported once


def test_names_need_no_import_and_unknown_names_are_key_errors():
    assert "file" in TASK_TYPES and "nope" not in TASK_TYPES
    assert len(TASK_TYPES) == len(TASK_MODULES) and list(TASK_TYPES) == list(TASK_MODULES)
    try:
        TASK_TYPES["nope"]
    except KeyError:
        pass
    else:
        raise AssertionError("an unknown task type must be a KeyError")


def test_an_unknown_task_name_still_gets_a_suggestion(tmp_path):
    playbook = tmp_path / "pb.yml"
    playbook.write_text("- hosts: all\n  tasks:\n    - name: x\n      servce: {name: ssh}\n")
    try:
        load_playbook(str(playbook), tmp_path, None)
    except Exception as exc:  # noqa: BLE001 - the message is what is checked
        assert "did you mean 'service'" in str(exc), str(exc)
        assert "pb.yml:4" in str(exc), str(exc)
    else:
        raise AssertionError("an unknown task type must be refused")


PROBE = textwrap.dedent("""
    import json, sys
    from gpuconf.cli.main import main
    code = main(["validate", "pb.yml", "-i", "node1,"])
    print(json.dumps({"code": code, "modules": sorted(sys.modules)}))
""")


def test_a_playbook_of_two_task_types_imports_those_two_and_nothing_it_does_not_use(tmp_path):
    (tmp_path / "pb.yml").write_text(textwrap.dedent("""
        - name: two task types
          hosts: all
          tasks:
            - name: a file
              file: {path: /etc/x.conf, content: "x"}
            - name: a service
              service: {name: ssh, state: started}
    """))
    done = subprocess.run([sys.executable, "-c", PROBE], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["code"] == 0
    modules = set(result["modules"])
    task_modules = {m for m in modules if m.startswith("gpuconf.tasks.")}
    assert task_modules == {"gpuconf.tasks.base", "gpuconf.tasks.registry", "gpuconf.tasks.files", "gpuconf.tasks.modes",
                            "gpuconf.tasks.services"}, sorted(task_modules)
    assert "gpuconf.tasks.health" not in modules
    # positive control: the same interpreter did load what it needed
    assert {"gpuconf.playbook.loader", "gpuconf.engine.validate", "pydantic"} <= modules
    for unused in ("gpuconf.report.junit", "gpuconf.report.html", "gpuconf.report.prometheus",
                   "cryptography.hazmat.primitives.kdf.pbkdf2", "rich",
                   # nvidia-smi parsers no task of this playbook runs (the package loads them on first use)
                   "gpuconf.facts.nvidia.query", "gpuconf.facts.nvidia.table", "gpuconf.facts.nvidia.topology",
                   "xml.etree.ElementTree", "gpuconf.facts.xid", "gpuconf.facts.kernel_log"):
        assert unused not in modules, unused


def test_the_gpu_probes_do_not_load_the_model_of_nvidia_smi_q():
    """They read --query-gpu: its fabric and clock-reason fields have small modules of their own."""
    probe = ("import sys, gpuconf.tasks.health.fabric_state, gpuconf.tasks.health.thermal, "
             "gpuconf.tasks.health.usage; print('gpuconf.facts.nvidia.query_model' in sys.modules, "
             "'gpuconf.facts.nvidia.clocks' in sys.modules, 'gpuconf.facts.nvidia.fabric' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "True", "True"]


@pytest.mark.parametrize("module", ["gpuconf.facts.nvidia", "gpuconf.facts.kernel"])
def test_a_lazy_module_names_each_parser_once_for_type_checkers_and_for_its_loader(module):
    """gpuconf.facts.nvidia and gpuconf.facts.kernel import the parsers they re-export on first use:
    the names their type-checking imports give and the names their loader knows are the same, and
    each is the defining module's own object."""
    import ast

    lazy = importlib.import_module(module)
    tree = ast.parse(Path(lazy.__file__).read_text())
    typed = {alias.name: node.module for node in ast.walk(tree)
             if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("gpuconf.facts.") and node.module != "gpuconf.facts.common"
             for alias in node.names}
    assert typed == lazy._WHERE and set(typed) <= set(lazy.__all__)
    for name, defining in typed.items():
        assert getattr(lazy, name) is getattr(importlib.import_module(defining), name)
    with pytest.raises(AttributeError, match="parse_nvidia_smi_qery"):
        lazy.parse_nvidia_smi_qery  # noqa: B018 - the error is what is checked
