"""An ansible-core stdout callback for the differential suite: it records what each host ran
(task, status, debug message, registered value) and the recap counts as JSON, in the file named
by DIFF_RECORD, for tests/ansible_diff to set beside gpuconf's JSON report. ansible-core loads it
from ANSIBLE_CALLBACK_PLUGINS; gpuconf never imports it."""
from __future__ import annotations

import json
import os

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = """
name: diffrecord
type: stdout
short_description: records tasks and recap as JSON for gpuconf's differential suite
description: [records tasks and recap as JSON for gpuconf's differential suite]
"""


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "stdout"
    CALLBACK_NAME = "diffrecord"

    def __init__(self) -> None:
        super().__init__()
        self.events: list[dict] = []
        self.errors: list[str] = []

    def _record(self, result, status: str) -> None:
        task = getattr(result, "task", None) or result._task
        host = getattr(result, "host", None) or result._host
        data = getattr(result, "result", None)
        if data is None:
            data = result._result
        event = {"host": host.get_name(), "task": task.get_name(), "status": status, "action": task.action,
                 "changed": bool(data.get("changed"))}
        if task.action in ("debug", "ansible.builtin.debug") and status == "ok":
            if "results" in data:   # a loop: one message per item
                event["msg"] = [item.get("msg") for item in data["results"] if not item.get("skipped")]
            else:
                event["msg"] = data.get("msg") if "msg" in data else {k: v for k, v in data.items()
                                                                       if not k.startswith("_") and k != "changed"}
        if status == "failed":
            event["msg"] = data.get("msg", "")
        self.events.append(json.loads(json.dumps(event, default=str)))

    def v2_runner_on_ok(self, result) -> None:
        data = getattr(result, "result", None) or result._result
        self._record(result, "changed" if data.get("changed") else "ok")

    def v2_runner_on_failed(self, result, ignore_errors: bool = False) -> None:
        self._record(result, "ignored" if ignore_errors else "failed")

    def v2_runner_on_skipped(self, result) -> None:
        self._record(result, "skipped")

    def v2_runner_on_unreachable(self, result) -> None:
        self._record(result, "unreachable")

    def v2_playbook_on_stats(self, stats) -> None:
        recap = {host: stats.summarize(host) for host in sorted(stats.processed)}
        with open(os.environ["DIFF_RECORD"], "w") as out:
            json.dump({"events": self.events, "recap": recap}, out, indent=1)
