"""The steps of a firmware update through a node's BMC, each one waited for: push a package
(Redfish multipart HTTP push, as nvfwupd does: the image and its `UpdateParameters` naming the
targets), follow the Task the BMC starts (progress and messages, as a person reads its log),
wait for the BMC to answer again at its new version after it has reset itself, power-cycle the
system so that the baseboard's new images activate.

A failed or timed-out step raises `UpdateFailed` with what the BMC's Task said; the caller
(`gpuconf/tasks/firmware.py`) decides what that means for the node (remediate: a hardware hold).
"""
from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlparse

from gpuconf.bmc.client import BmcError, Session
from gpuconf.facts.redfish import FIRMWARE_INVENTORY, SYSTEMS, UPDATE_SERVICE, TaskView, members, task, update_service

POLL = 1.0


class UpdateFailed(BmcError):
    """A step of the update failed: the Task's messages (or why there is no Task) say how."""


class Updater:
    """The update steps against one BMC. `log` is told each new Task message and progress line
    (the run's -v output and the task's registered data)."""

    def __init__(self, session: Session, log: Callable[[str], None],
                 clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep):
        self.session, self.log, self.clock, self.sleep = session, log, clock, sleep

    def push(self, package: Path, targets: list[str]) -> str:
        """Send `package` for the `targets` (inventory ids); the path of the Task that updates them."""
        service = update_service(self.session.get(UPDATE_SERVICE))
        if not service.enabled:
            raise UpdateFailed(f"{self.session.endpoint}: the update service is disabled (ServiceEnabled: false)")
        if not service.multipart_push_uri:
            raise UpdateFailed(f"{self.session.endpoint}: the BMC offers no MultipartHttpPushUri to push an image to")
        parameters = {"Targets": [f"{FIRMWARE_INVENTORY}/{name}" for name in targets],
                      "@Redfish.OperationApplyTime": "Immediate"}
        body = [("UpdateParameters", (None, json.dumps(parameters), "application/json")),
                ("UpdateFile", (package.name, package.read_bytes(), "application/octet-stream"))]
        status, answer, headers = self.session.post(service.multipart_push_uri, body,
                                                    headers={"Content-Type": "multipart/form-data"}, timeout=600)
        location = headers.get("Location") or headers.get("location") or answer.get("@odata.id")
        if not location or "/TaskService/Tasks/" not in str(location):
            raise UpdateFailed(f"{self.session.endpoint}: the push of {package.name} (HTTP {status}) started no Task")
        self.log(f"{package.name} pushed for {', '.join(targets)}: {location}")
        return urlparse(str(location)).path or str(location)

    def follow(self, task_path: str, timeout: float) -> TaskView:
        """Poll the Task until it ends; its new messages and progress go to `log`. A failed Task
        or one still running at `timeout` raises UpdateFailed with its messages."""
        deadline = self.clock() + timeout
        seen = 0
        percent: int | None = None
        while True:
            view = task(self.session.get(task_path))
            for message in view.messages[seen:]:
                self.log(f"{task_path}: {message.message_id}: {message.message}")
            seen = len(view.messages)
            if view.percent is not None and view.percent != percent:
                percent = view.percent
                self.log(f"{task_path}: {view.state} {percent}%")
            if view.finished:
                if view.failed:
                    raise UpdateFailed(f"{self.session.endpoint}: {task_path} ended {view.state}: {view.explain()}")
                return view
            if self.clock() >= deadline:
                raise UpdateFailed(f"{self.session.endpoint}: {task_path} still {view.state} after {timeout:g} s: "
                                   f"{view.explain()}")
            self.sleep(POLL)

    def wait_version(self, component: str, version: str, timeout: float) -> None:
        """Wait until the BMC answers again (it resets itself to run a new image of its own) and
        lists `component` at `version`."""
        deadline = self.clock() + timeout
        last = "no answer yet"
        while self.clock() < deadline:
            try:
                found = self.session.get(f"{FIRMWARE_INVENTORY}/{component}").get("Version")
                if found == version:
                    self.log(f"the BMC answers again: {component} at {version}")
                    return
                last = f"{component} at {found}"
            except BmcError as exc:   # down while it resets: expected, for a while
                last = str(exc)
            self.sleep(POLL)
        raise UpdateFailed(f"{self.session.endpoint}: the BMC did not answer at {component} {version} within "
                           f"{timeout:g} s (last: {last})")

    def power_cycle(self) -> None:
        """ComputerSystem.Reset with ResetType PowerCycle on the BMC's (first) system; what a
        baseboard's GPU, ERoT and CPLD images need to activate."""
        system = members(self.session.get(SYSTEMS))[0]
        actions = self.session.get(system).get("Actions", {})
        reset = actions.get("#ComputerSystem.Reset", {}).get("target") or f"{system}/Actions/ComputerSystem.Reset"
        self.session.post(reset, {"ResetType": "PowerCycle"})
        self.log(f"{system}: PowerCycle sent")
