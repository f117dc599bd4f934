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

from gpuconf.bmc.client import BmcError, Multipart, Session
from gpuconf.facts.firmware import compress_names as compress
from gpuconf.facts.redfish import (
    FIRMWARE_INVENTORY,
    SYSTEMS,
    UPDATE_SERVICE,
    TaskMessage,
    TaskView,
    members,
    task,
    update_service,
)

POLL = 1.0


class UpdateFailed(BmcError):
    """A step of the update failed: the Task's messages (or why there is no Task) say how;
    `brief` is that alone, in a line (what a hardware hold's reason shows)."""

    def __init__(self, message: str, brief: str = ""):
        super().__init__(message)
        self.brief = brief or message


def log_lines(task_path: str, messages: tuple[TaskMessage, ...]) -> list[str]:
    """A Task's new messages as log lines; a run of one message id (the same step on each of eight
    GPUs) is one line, its first message and how many more."""
    lines: list[str] = []
    run: list[TaskMessage] = []
    for message in [*messages, None]:
        if run and (message is None or message.message_id != run[0].message_id):
            more = f" (and {len(run) - 1} more like it)" if len(run) > 1 else ""
            lines.append(f"{task_path}: {run[0].message_id}: {run[0].message}{more}")
            run = []
        if message is not None:
            run.append(message)
    return lines


def _protocol(uri: str) -> str:
    """SimpleUpdate's `TransferProtocol` for an image URI (`HTTPS`, `HTTP`, ...)."""
    return urlparse(uri).scheme.upper() or "HTTPS"


class Updater:
    """The update steps against one BMC. `log` is told each new Task message and progress line
    (the run's -v output and the task's registered data)."""

    def __init__(self, session: Session, log: Callable[[str], None],
                 clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep):
        self.session, self.log, self.clock, self.sleep = session, log, clock, sleep

    def push(self, package: Path, targets: list[str], image_uri: str | None = None) -> str:
        """Send `package` for the `targets` (inventory ids); the path of the Task that updates them.

        The ways Redfish offers, in this order: `SimpleUpdate` when the bundle says where the BMC
        can fetch the image itself (`image_uri`: the site's HTTP(S) server holding the same file);
        else the multipart push (`MultipartHttpPushUri`, Redfish 1.6+: the image and its
        `UpdateParameters` naming the targets, as nvfwupd sends it); else the older
        `HttpPushUri` (the targets set first in `HttpPushUriTargets`, then the image as the body)."""
        service = update_service(self.session.get(UPDATE_SERVICE))
        if not service.enabled:
            raise UpdateFailed(f"{self.session.endpoint}: the update service is disabled (ServiceEnabled: false)")
        uris = [f"{FIRMWARE_INVENTORY}/{name}" for name in targets]
        if image_uri:
            if not service.simple_update:
                raise UpdateFailed(f"{self.session.endpoint}: the bundle gives {package.name} an image_uri, and the "
                                   "BMC offers no SimpleUpdate action to fetch it with")
            how, path = "SimpleUpdate", service.simple_update
            status, answer, headers = self.session.post(path, {"ImageURI": image_uri, "Targets": uris,
                                                               "TransferProtocol": _protocol(image_uri)})
        elif service.multipart_push_uri:
            how, path = "multipart push", service.multipart_push_uri
            parameters = {"Targets": uris, "@Redfish.OperationApplyTime": "Immediate"}
            body: Multipart = [("UpdateParameters", (None, json.dumps(parameters), "application/json")),
                    ("UpdateFile", (package.name, package.read_bytes(), "application/octet-stream"))]
            status, answer, headers = self.session.post(path, body, headers={"Content-Type": "multipart/form-data"},
                                                        timeout=600)
        elif service.http_push_uri:
            how, path = "HTTP push", service.http_push_uri
            if uris:
                self.session.patch(UPDATE_SERVICE, {"HttpPushUriTargets": uris})
            status, answer, headers = self.session.post(path, package.read_bytes(), timeout=600)
        else:
            raise UpdateFailed(f"{self.session.endpoint}: the BMC offers no way to send an image (no "
                               "MultipartHttpPushUri, HttpPushUri or SimpleUpdate)")
        location = headers.get("Location") or headers.get("location") or answer.get("@odata.id")
        if not location or "/TaskService/Tasks/" not in str(location):
            raise UpdateFailed(f"{self.session.endpoint}: the {how} of {package.name} (HTTP {status}) started no Task")
        self.log(f"{package.name} sent ({how}) for {compress(targets)}: {location}")
        return urlparse(str(location)).path or str(location)

    def follow(self, task_path: str, timeout: float) -> TaskView:
        """Poll the Task until it ends; its new messages and progress go to `log`. A failed Task
        or one still running at `timeout` raises UpdateFailed with its messages."""
        deadline = self.clock() + timeout
        seen = 0
        percent: int | None = None
        while True:
            view = task(self.session.get(task_path))
            for line in log_lines(task_path, view.messages[seen:]):
                self.log(line)
            seen = len(view.messages)
            if view.percent is not None and view.percent != percent:
                percent = view.percent
                self.log(f"{task_path}: {view.state} {percent}%")
            if view.finished:
                if view.failed:
                    raise UpdateFailed(f"{self.session.endpoint}: {task_path} ended {view.state}: {view.explain()}",
                                       view.explain())
                return view
            if self.clock() >= deadline:
                raise UpdateFailed(f"{self.session.endpoint}: {task_path} still {view.state} after {timeout:g} s: "
                                   f"{view.explain()}", f"its Task still {view.state} after {timeout:g} s")
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
                           f"{timeout:g} s (last: {last})",
                           f"the BMC did not come back at {version} within {timeout:g} s")

    def power_cycle(self) -> None:
        """ComputerSystem.Reset with ResetType PowerCycle on the BMC's (first) system; what a
        baseboard's GPU, ERoT and CPLD images need to activate."""
        system = members(self.session.get(SYSTEMS))[0]
        actions = self.session.get(system).get("Actions")
        action = actions.get("#ComputerSystem.Reset") if isinstance(actions, dict) else None
        target = action.get("target") if isinstance(action, dict) else None
        reset = str(target or f"{system}/Actions/ComputerSystem.Reset")
        self.session.post(reset, {"ResetType": "PowerCycle"})
        self.log(f"{system}: PowerCycle sent")
