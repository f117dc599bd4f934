"""An ansible-core stdout callback for the generated programs (tests/ansible_fuzz): per host, in
order, each task's result (status, debug message, the value `register:` stored), and the recap,
as JSON in the file FUZZ_RECORD names. ansible-core loads it from ANSIBLE_CALLBACK_PLUGINS;
gpuconf never imports it. The registered value is what the strategy stores: the result without
its `_ansible_` keys and `invocation` (ansible/plugins/strategy/__init__.py). A callback sees
the result without `failed` and `skipped` (executor/task_result.py), so the value is taken where
the strategy stores it: VariableManager.set_nonpersistent_facts, called right after the
callback, wrapped here (this plugin runs in the strategy's process; it is test code)."""
from __future__ import annotations

import copy
import json
import os

from ansible.plugins.callback import CallbackBase
from ansible.vars.manager import VariableManager

_PENDING: dict[str, dict] = {}  # host -> the event of the task it last ran, until `register` stores its value
_STORE = VariableManager.set_nonpersistent_facts


def _recording(self, host, facts):
    event = _PENDING.get(str(host))
    if event is not None and event.get("register") in facts and len(facts) == 1:
        event["registered"] = _plain(facts[event["register"]])
        del _PENDING[str(host)]
    return _STORE(self, host, facts)


VariableManager.set_nonpersistent_facts = _recording

DOCUMENTATION = """
name: fuzzrecord
type: stdout
short_description: records each host's results and the recap as JSON for gpuconf's generated programs
description: [records each host's results and the recap as JSON for gpuconf's generated programs]
"""


def _plain(value):
    return json.loads(json.dumps(value, default=str))


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "stdout"
    CALLBACK_NAME = "fuzzrecord"

    def __init__(self) -> None:
        super().__init__()
        self.events: list[dict] = []
        self.warnings: list[str] = []

    def _record(self, result, status: str) -> None:
        task, host = result.task, result.host
        data = copy.deepcopy(dict(result.result))
        event = {"host": host.get_name(), "task": task.get_name(), "action": task.action, "status": status,
                 "changed": bool(data.get("changed"))}
        if task.action in ("debug", "ansible.builtin.debug") and status == "ok":
            if "results" in data:  # a loop: one message per item that ran
                event["looped"] = True
                event["msg"] = [_plain(_shown(item)) for item in data["results"] if not item.get("skipped")]
            else:
                event["msg"] = _plain(_shown(data))
        if task.register:
            event["register"] = task.register
            _PENDING[event["host"]] = event
        if status == "failed" or status == "ignored":
            event["error"] = str(data.get("msg", ""))
        self.events.append(event)
        shown = event.get("error") or (json.dumps(event["msg"], default=str) if "msg" in event else "")
        self._display.display(f"{status}: [{event['host']}] {event['task']} {shown}".rstrip())

    def v2_runner_on_ok(self, result) -> None:
        self._record(result, "changed" if result.result.get("changed") else "ok")

    def v2_runner_on_failed(self, result, ignore_errors: bool = False) -> None:
        self._record(result, "ignored" if ignore_errors else "failed")

    def v2_runner_on_skipped(self, result) -> None:
        self._record(result, "skipped")

    def v2_runner_on_unreachable(self, result) -> None:
        self._record(result, "unreachable")

    def v2_playbook_on_stats(self, stats) -> None:
        recap = {host: stats.summarize(host) for host in sorted(stats.processed)}
        with open(os.environ["FUZZ_RECORD"], "w") as out:
            json.dump({"events": self.events, "recap": recap}, out, indent=1)


def _shown(data):
    """What debug shows: its `msg`, or for `var=` the variable and its value."""
    if "msg" in data:
        return data["msg"]
    return {k: v for k, v in data.items() if not k.startswith("_") and k not in ("changed", "failed", "item",
                                                                               "ansible_loop_var", "warnings")}
