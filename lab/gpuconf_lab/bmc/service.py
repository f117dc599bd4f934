"""What a lab BMC answers, as functions of its state and the time: no sockets here (server.py
carries them), so every rule is tested directly.

* GET: the captured payload of a resource, with the node's firmware versions in the inventory,
  its Tasks in the Task service;
* POST of an image to the `MultipartHttpPushUri` (the image and `UpdateParameters` naming the
  targets): an update Task whose messages follow DMTF's Update registry as HGX BMCs send them
  (target determined, transferring, verifying, installing, then updated or awaiting activation),
  with its progress; a bad signature or a component the BMC does not have fails it at
  verification, the `fail-task` fault at installation;
* the BMC's own images are active once it has reset itself after its Task (it answers nothing
  meanwhile); the baseboard's are staged and become active only at a power cycle
  (`ComputerSystem.Reset` with `PowerCycle`), which also reboots the node.

A Task's steps are laid out in time when it starts and revealed as the clock passes them, so a
Task runs with no thread of its own; `advance` applies what has become due.
"""
from __future__ import annotations

import copy
import datetime
import json
from dataclasses import dataclass
from typing import Any

from gpuconf_lab.bmc.models import INVENTORY, Model
from gpuconf_lab.bmc.package import Package, PackageError

TASKS = "/redfish/v1/TaskService/Tasks"
MESSAGE_TYPE = "#Message.v1_0_8.Message"
# DMTF's Update registry 1.0 and TaskEvent 1.0: id -> (text, severity)
REGISTRY = {
    "Update.1.0.TargetDetermined": ("The target device '%1' will be updated with image '%2'.", "OK"),
    "Update.1.0.TransferringToComponent": ("Image '%1' is being transferred to '%2'.", "OK"),
    "Update.1.0.VerifyingAtComponent": ("Image '%1' is being verified at '%2'.", "OK"),
    "Update.1.0.InstallingOnComponent": ("Image '%1' is being installed on '%2'.", "OK"),
    "Update.1.0.UpdateSuccessful": ("Device '%1' successfully updated with image '%2'.", "OK"),
    "Update.1.0.AwaitToActivate": ("Awaiting for an action to proceed with activating image '%1' on '%2'.", "OK"),
    "Update.1.0.VerificationFailed": ("Verification of image '%1' at '%2' failed.", "Critical"),
    "Update.1.0.ApplyFailed": ("Installation of image '%1' to '%2' failed.", "Critical"),
    "Update.1.0.TransferFailed": ("Transfer of image '%1' to '%2' failed.", "Critical"),
    "TaskEvent.1.0.TaskCompletedOK": ("The task with id %1 has completed.", "OK"),
    "Base.1.12.PropertyValueNotInList": ("The value '%1' for the property %2 is not in the list of acceptable "
                                         "values.", "Warning"),
    "Base.1.12.ActionParameterValueNotInList": ("The value '%1' for the parameter %2 in the action %3 is not in "
                                                "the list of acceptable values.", "Warning"),
    "Base.1.12.ResourceNotFound": ("The requested resource of type %1 named '%2' was not found.", "Critical"),
    "Base.1.12.NoValidSession": ("There is no valid session established with the implementation.", "Critical"),
    "Base.1.12.ActionParameterMissing": ("The action %1 requires the parameter %2 to be present in the request "
                                         "body.", "Critical"),
}
BMC_RESET_SECONDS = 1.5
# the share of a Task's time at which each of its steps comes
TRANSFER, VERIFY, INSTALL, FAIL = 0.15, 0.35, 0.5, 0.8


def message(message_id: str, *args: str) -> dict[str, Any]:
    text, severity = REGISTRY[message_id]
    for number, arg in enumerate(args, 1):
        text = text.replace(f"%{number}", arg)
    return {"@odata.type": MESSAGE_TYPE, "Message": text, "MessageArgs": list(args), "MessageId": message_id,
            "Resolution": "None.", "Severity": severity}


def error(status: int, message_id: str, *args: str) -> tuple[int, dict[str, Any]]:
    """A Redfish error answer: `error.@Message.ExtendedInfo` with the registry's message."""
    info = message(message_id, *args)
    return status, {"error": {"code": message_id, "message": info["Message"], "@Message.ExtendedInfo": [info]}}


def _iso(at: float) -> str:
    return datetime.datetime.fromtimestamp(at, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S+00:00")


@dataclass
class Answer:
    status: int
    body: dict[str, Any] | None = None
    location: str | None = None
    power_cycle: dict[str, str] | None = None   # the images a power cycle activated (the node reboots)
    reboot: bool = False


# -- time -------------------------------------------------------------------------------------------
def advance(state: dict[str, Any], now: float) -> None:
    """Apply what has become due: a Task's end (its images staged, or the BMC's own pending until
    it has reset itself), and the end of the BMC's reset (its new images active)."""
    for task in state["tasks"].values():
        if task.get("effect") and not task.get("applied") and now >= task["steps"][-1]["at"]:
            task["applied"] = True
            effect = task["effect"]
            state["staged"].update(effect.get("stage", {}))
            if effect.get("bmc"):
                state["pending"].update(effect["bmc"])
                state["offline_until"] = task["steps"][-1]["at"] + BMC_RESET_SECONDS
    if state["pending"] and now >= state["offline_until"]:
        state["versions"].update(state["pending"])
        state["pending"] = {}


def offline(state: dict[str, Any], now: float) -> bool:
    """The BMC is resetting itself to run its new image: it answers nothing."""
    return now < state["offline_until"]


# -- GET --------------------------------------------------------------------------------------------
def get(model: Model, state: dict[str, Any], path: str, now: float, expand: bool = False) -> tuple[int, dict[str, Any]]:
    """A resource; with `expand` (`$expand=.($levels=1)`, which the captured service root says it
    supports) a collection's members inline."""
    status, payload = _get(model, state, path, now)
    if expand and status == 200 and isinstance(payload.get("Members"), list):
        payload["Members"] = [_get(model, state, str(m.get("@odata.id")), now)[1] if isinstance(m, dict) else m
                              for m in payload["Members"]]
    return status, payload


def _get(model: Model, state: dict[str, Any], path: str, now: float) -> tuple[int, dict[str, Any]]:
    resources = model.resources()
    if path.startswith(TASKS + "/"):
        task = state["tasks"].get(path.rsplit("/", 1)[1])
        return (200, task_payload(task, now)) if task else error(404, "Base.1.12.ResourceNotFound", "Task", path)
    if path not in resources:
        return error(404, "Base.1.12.ResourceNotFound", "Resource", path)
    payload = copy.deepcopy(resources[path])
    if path.startswith(INVENTORY + "/"):
        payload["Version"] = state["versions"].get(payload.get("Id"), payload.get("Version"))
    elif path == INVENTORY:
        for entry in payload.get("Oem", {}).get("Ami", {}).get("FirmwareInventory", []):
            entry["Version"] = state["versions"].get(entry.get("Name"), entry.get("Version"))
    elif path == TASKS:
        payload["Members"] = [{"@odata.id": f"{TASKS}/{number}"} for number in sorted(state["tasks"], key=int)]
        payload["Members@odata.count"] = len(payload["Members"])
    return 200, payload


def task_payload(task: dict[str, Any], now: float) -> dict[str, Any]:
    """The Task as a client sees it now: the messages of the steps passed, its progress and state."""
    passed = [step for step in task["steps"] if step["at"] <= now] or task["steps"][:1]
    last = passed[-1]
    payload = {"@odata.context": "/redfish/v1/$metadata#Task.Task", "@odata.id": f"{TASKS}/{task['id']}",
               "@odata.type": "#Task.v1_4_2.Task", "Description": f"Task for {task['name']}", "HidePayload": False,
               "Id": task["id"], "Messages": [m for step in passed for m in step["messages"]], "Name": task["name"],
               "StartTime": _iso(task["steps"][0]["at"]), "TaskState": last["state"], "TaskStatus": last["status"]}
    if last.get("percent") is not None:
        payload["PercentComplete"] = last["percent"]
    if last["state"] != "Running":
        payload["EndTime"] = _iso(last["at"])
    return payload


# -- POST -------------------------------------------------------------------------------------------
def _new_task(state: dict[str, Any], name: str) -> dict[str, Any]:
    number = str(state["next_task"])
    state["next_task"] += 1
    task: dict[str, Any] = {"id": number, "name": name, "steps": [], "effect": None, "applied": False}
    state["tasks"][number] = task
    return task


def _step(task: dict[str, Any], at: float, percent: int | None, messages: list[dict[str, Any]],
          state: str = "Running", status: str = "OK") -> None:
    task["steps"].append({"at": at, "percent": percent, "messages": messages, "state": state, "status": status})


def start_update(model: Model, state: dict[str, Any], image: Package | PackageError | None, file_name: str,
                 targets: list[str], now: float, seconds: float) -> Answer:
    """An update Task for `image` (or why it is refused; None: it could not be fetched) on
    `targets` (inventory ids, or all of the image's when none are named). A target the BMC does
    not list is refused at once (400)."""
    listed = set(model.components())
    unknown = [t for t in targets if t not in listed]
    if unknown:
        status, body = error(400, "Base.1.12.PropertyValueNotInList", unknown[0], "Targets")
        return Answer(status, body)
    task = _new_task(state, "Update Service Task")
    components = image.components if isinstance(image, Package) else {}
    chosen = targets or list(components) or ["(unknown)"]
    versions = {t: components.get(t, "") for t in chosen}
    _step(task, now, 0, [message("Update.1.0.TargetDetermined", t, versions[t] or file_name) for t in chosen])
    _step(task, now + TRANSFER * seconds, 10,
          [message("Update.1.0.TransferringToComponent", file_name, t) for t in chosen])
    if image is None:
        _step(task, now + (TRANSFER + 0.05) * seconds, 10, [message("Update.1.0.TransferFailed", file_name, chosen[0])],
              "Exception", "Critical")
        return _accepted(task, now)
    _step(task, now + VERIFY * seconds, 30, [message("Update.1.0.VerifyingAtComponent", file_name, t) for t in chosen])
    wrong = [t for t in chosen if t not in components or t not in listed]
    if isinstance(image, PackageError) or wrong:
        failed = chosen[0] if isinstance(image, PackageError) else wrong[0]
        _step(task, now + (VERIFY + 0.05) * seconds, 30, [message("Update.1.0.VerificationFailed", file_name, failed)],
              "Exception", "Critical")
        return _accepted(task, now)
    _step(task, now + INSTALL * seconds, 50,
          [message("Update.1.0.InstallingOnComponent", versions[t], t) for t in chosen])
    if state["faults"].get("task") == "fail":
        _step(task, now + FAIL * seconds, 50, [message("Update.1.0.ApplyFailed", versions[chosen[0]], chosen[0])],
              "Exception", "Critical")
        return _accepted(task, now)
    done = []
    for target in chosen:
        done.append(message("Update.1.0.UpdateSuccessful", target, versions[target]) if target in model.bmc_components
                    else message("Update.1.0.AwaitToActivate", versions[target], target))
    done.append(message("TaskEvent.1.0.TaskCompletedOK", task["id"]))
    _step(task, now + seconds, 100, done, "Completed", "OK")
    task["effect"] = {"bmc": {t: versions[t] for t in chosen if t in model.bmc_components},
                      "stage": {t: versions[t] for t in chosen if t not in model.bmc_components}}
    return _accepted(task, now)


def _accepted(task: dict[str, Any], now: float) -> Answer:
    location = f"{TASKS}/{task['id']}"
    return Answer(202, task_payload(task, now), location)


RESET_TYPES = ("PowerCycle", "ForceRestart", "GracefulRestart")


def reset_system(model: Model, state: dict[str, Any], body: Any, now: float) -> Answer:
    """ComputerSystem.Reset: a power cycle activates every staged image; each of these reboots the node."""
    reset_type = body.get("ResetType") if isinstance(body, dict) else None
    action = "ComputerSystem.Reset"
    if not reset_type:
        return Answer(*error(400, "Base.1.12.ActionParameterMissing", action, "ResetType"))
    if reset_type not in RESET_TYPES:
        return Answer(*error(400, "Base.1.12.ActionParameterValueNotInList", str(reset_type), "ResetType", action))
    task = _new_task(state, "Computer Reset")
    _step(task, now, None, [message("TaskEvent.1.0.TaskCompletedOK", task["id"])], "Completed", "OK")
    activated: dict[str, str] = {}
    if reset_type == "PowerCycle":
        activated = dict(state["staged"])
        state["versions"].update(activated)
        state["staged"] = {}
        state["power_cycles"] += 1
    answer = _accepted(task, now)
    answer.reboot, answer.power_cycle = True, activated
    return answer


def parse_update_parameters(text: str | None) -> list[str] | str:
    """The `Targets` of a multipart push's `UpdateParameters` as inventory ids, or what is wrong."""
    if not text:
        return []
    try:
        parameters = json.loads(text)
    except ValueError:
        return "UpdateParameters is not JSON"
    targets = parameters.get("Targets", []) if isinstance(parameters, dict) else None
    if not isinstance(targets, list):
        return "UpdateParameters.Targets is not a list"
    return [str(t).rstrip("/").rsplit("/", 1)[1] if str(t).startswith(INVENTORY + "/") else str(t) for t in targets]
