"""What a BMC answers over Redfish, parsed: the firmware inventory (`SoftwareInventory`
members of `/redfish/v1/UpdateService/FirmwareInventory`), the BIOS attributes
(`/redfish/v1/Systems/<id>/Bios`), the update service (where an image is pushed) and a Task
(state, progress, messages). Pure functions of the JSON payloads, tested on real ones: NVIDIA's
DGX H100 and GB200 BMCs (captured with DMTF's Redfish-Mockup-Creator in NVIDIA/libredfish), a
DGX update Task from nvfwupd's documentation, DMTF's public-rackmount1 mockup
(tests/fixtures/real/redfish, SOURCES.md).

Fetching them is `gpuconf/bmc/`'s; nothing here does I/O.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from gpuconf.facts.firmware import FirmwareComponent
from gpuconf.files.values import JSONValue, items_of

SERVICE_ROOT = "/redfish/v1"
FIRMWARE_INVENTORY = "/redfish/v1/UpdateService/FirmwareInventory"
UPDATE_SERVICE = "/redfish/v1/UpdateService"
SYSTEMS = "/redfish/v1/Systems"

# Task states that end a Task (Redfish Task.v1 TaskState); any other is still under way
FINISHED_STATES = {"Completed", "Exception", "Killed", "Cancelled", "Interrupted"}
FAILED_STATES = {"Exception", "Killed", "Cancelled", "Interrupted"}


class PayloadError(ValueError):
    """A payload that is not the resource it should be (no JSON object, a wrong type)."""


def _text(value: JSONValue) -> str | None:
    """A property that should be a string, as one (None when it is missing)."""
    return value if isinstance(value, str) or value is None else str(value)


def members(payload: Mapping[str, JSONValue]) -> list[str]:
    """The `@odata.id` of each member of a collection, in order. `Members` is what counts:
    `Members@odata.count` can disagree with it (DMTF's own public-rackmount1 says 2 and lists 3)."""
    listed = payload.get("Members")
    if not isinstance(listed, list):
        raise PayloadError(f"{payload.get('@odata.id', 'collection')}: no Members list")
    return [str(m["@odata.id"]) for m in listed if isinstance(m, dict) and m.get("@odata.id")]


def software_inventory(payload: JSONValue) -> FirmwareComponent:
    """One `SoftwareInventory` resource as a component: its `Id`, `Version` (None when the
    BMC gives none, or an empty one), `Updateable` and `Status`."""
    if not isinstance(payload, Mapping) or "Id" not in payload:
        raise PayloadError("a SoftwareInventory resource without an Id")
    status = found if isinstance(found := payload.get("Status"), Mapping) else {}
    version = payload.get("Version")
    updateable = payload.get("Updateable")
    return FirmwareComponent(
        name=str(payload["Id"]),
        version=str(version).strip() or None if version is not None else None,
        source="redfish",
        updateable=updateable if isinstance(updateable, bool) else None,
        state=_text(status.get("State")),
        health=_text(status.get("Health")),
    )


@dataclass(frozen=True)
class BiosSettings:
    """`Bios.Attributes` (name -> value as the BMC gives it) and the registry they follow."""

    attributes: dict[str, JSONValue]
    registry: str | None = None


def bios_settings(payload: Mapping[str, JSONValue]) -> BiosSettings:
    attributes = payload.get("Attributes")
    if not isinstance(attributes, Mapping):
        raise PayloadError(f"{payload.get('@odata.id', 'Bios')}: no Attributes object")
    registry = payload.get("AttributeRegistry")
    return BiosSettings(dict(attributes), str(registry) if registry else None)


@dataclass(frozen=True)
class UpdateService:
    """Where an image goes: `MultipartHttpPushUri` (Redfish 1.6+; a multipart POST of the
    image and its `UpdateParameters`), else the older `HttpPushUri`; the `SimpleUpdate` target."""

    enabled: bool
    multipart_push_uri: str | None
    http_push_uri: str | None
    simple_update: str | None


def update_service(payload: Mapping[str, JSONValue]) -> UpdateService:
    actions = found if isinstance(found := payload.get("Actions"), Mapping) else {}
    simple = actions.get("#UpdateService.SimpleUpdate")
    return UpdateService(
        enabled=payload.get("ServiceEnabled") is not False,
        multipart_push_uri=_text(payload.get("MultipartHttpPushUri") or None),
        http_push_uri=_text(payload.get("HttpPushUri") or None),
        simple_update=_text(simple.get("target")) if isinstance(simple, Mapping) else None,
    )


@dataclass(frozen=True)
class TaskMessage:
    message_id: str
    message: str
    severity: str | None
    args: tuple[str, ...] = ()

    @property
    def failed(self) -> bool:
        return self.severity == "Critical" or self.message_id.rsplit(".", 1)[-1].endswith("Failed")


@dataclass(frozen=True)
class TaskView:
    """A Redfish Task: `TaskState`, `TaskStatus`, `PercentComplete` and its `Messages` in order."""

    task_id: str
    name: str | None
    state: str
    status: str | None
    percent: int | None
    messages: tuple[TaskMessage, ...]

    @property
    def finished(self) -> bool:
        return self.state in FINISHED_STATES

    @property
    def failed(self) -> bool:
        """Ended in an exception state, or completed with a Critical status or message (a BMC can
        end a failed update `Completed` with `TaskStatus: Critical`)."""
        return self.state in FAILED_STATES or (self.finished and (
            self.status == "Critical" or any(m.severity == "Critical" for m in self.messages)))

    def explain(self) -> str:
        """The messages a person needs: the failed ones, else the last one."""
        bad = [m for m in self.messages if m.failed]
        chosen = bad or list(self.messages[-1:])
        return "; ".join(f"{m.message_id}: {m.message}" for m in chosen) or f"TaskState {self.state}"


def task(payload: JSONValue) -> TaskView:
    if not isinstance(payload, Mapping) or "TaskState" not in payload:
        raise PayloadError(f"{payload.get('@odata.id', 'Task') if isinstance(payload, Mapping) else 'Task'}: "
                           "no TaskState")
    messages = []
    for item in items_of(payload.get("Messages")):
        if isinstance(item, Mapping):
            messages.append(TaskMessage(str(item.get("MessageId", "")), str(item.get("Message", "")),
                                        _text(item.get("Severity") or item.get("MessageSeverity")),
                                        tuple(str(a) for a in items_of(item.get("MessageArgs")))))
    percent = payload.get("PercentComplete")
    return TaskView(str(payload.get("Id", "")), _text(payload.get("Name")), str(payload["TaskState"]),
                    _text(payload.get("TaskStatus")), percent if isinstance(percent, int) else None, tuple(messages))


@dataclass(frozen=True)
class BmcInventory:
    """What one read of a BMC gives: every firmware component it lists, its BIOS attributes
    (None when the system has no Bios resource) and its update service; `problems` names the
    members that could not be read (they are no component: never an empty version)."""

    components: tuple[FirmwareComponent, ...]
    bios: BiosSettings | None
    service: UpdateService | None
    problems: tuple[str, ...] = ()

    def version(self, name: str) -> str | None:
        for component in self.components:
            if component.name == name:
                return component.version
        return None


def inventory(payloads: Mapping[str, JSONValue]) -> BmcInventory:
    """The inventory from the payloads a read fetched, by path: the collection, each member, the
    systems' Bios and the update service. A member missing from `payloads` is a problem."""
    problems: list[str] = []
    components = []
    collection = payloads.get(FIRMWARE_INVENTORY)
    if not isinstance(collection, Mapping):
        raise PayloadError(f"{FIRMWARE_INVENTORY} was not read")
    for path in members(collection):
        payload = payloads.get(path)
        try:
            components.append(software_inventory(payload))
        except PayloadError as exc:
            problems.append(f"{path}: {exc}")
    bios = None
    for path, payload in payloads.items():
        if path.startswith(SYSTEMS + "/") and path.endswith("/Bios") and isinstance(payload, Mapping):
            bios = bios_settings(payload)
    service_payload = payloads.get(UPDATE_SERVICE)
    service = update_service(service_payload) if isinstance(service_payload, Mapping) else None
    return BmcInventory(tuple(components), bios, service, tuple(problems))

