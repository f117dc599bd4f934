"""A Redfish session with one BMC, through DMTF's python-redfish-library (`redfish`, BSD-3-Clause).

The library itself turns certificate checks off when it is given no CA file (`verify=False`), so
this module always gives one: the endpoint's `ca_file` (a site or lab CA) or the system's bundle.
Every request has a timeout and is tried once (the library's default retries ten times, a second
apart, for POSTs too: an image pushed twice). Credentials go to the library only: never into an
error message, a log line or a fact key.
"""
from __future__ import annotations

import json
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from gpuconf.errors import GpuconfError
from gpuconf.files.values import JSONValue, items_of

DEFAULT_TIMEOUT = 20.0


class BmcError(GpuconfError):
    """The BMC could not be reached, refused, or answered something that is not Redfish."""

    exit_bit = 4


@dataclass(frozen=True)
class BmcEndpoint:
    """Where a node's BMC answers and how to log in. `url` is `https://HOST[:PORT]`; `ca_file`
    the PEM bundle that signs its certificate (None: the system's bundle). The password is not
    part of the endpoint's text (`str()`), nor of its equality."""

    url: str
    user: str = field(default="")
    password: str = field(default="", repr=False, compare=False)
    ca_file: str | None = None
    timeout: float = DEFAULT_TIMEOUT

    def __str__(self) -> str:
        return self.url

    @classmethod
    def from_vars(cls, host: str, variables: Mapping[str, object]) -> BmcEndpoint | None:
        """The endpoint a host's inventory variables describe (`bmc_address`, `bmc_user`,
        `bmc_password`, `bmc_ca_file`, `bmc_timeout`), or None when it has no `bmc_address`."""
        address = variables.get("bmc_address")
        if not address:
            return None
        url = str(address) if "://" in str(address) else f"https://{address}"
        if not url.startswith("https://"):
            raise BmcError(f"{host}: bmc_address must be an https:// address (TLS is never turned off), not {url}")
        return cls(url.rstrip("/"), str(variables.get("bmc_user") or ""), str(variables.get("bmc_password") or ""),
                   str(variables["bmc_ca_file"]) if variables.get("bmc_ca_file") else None,
                   float(timeout) if isinstance(timeout := variables.get("bmc_timeout"), (int, float, str)) and timeout
                   else DEFAULT_TIMEOUT)

    def verify_file(self) -> str:
        """The CA bundle the session verifies the BMC's certificate against: never none."""
        if self.ca_file:
            if not Path(self.ca_file).is_file():
                raise BmcError(f"{self.url}: CA file {self.ca_file} does not exist")
            return self.ca_file
        default = ssl.get_default_verify_paths()
        bundle = default.cafile or default.openssl_cafile
        if not bundle or not Path(bundle).is_file():
            import certifi  # requests' own dependency

            bundle = certifi.where()
        return bundle


# a multipart body, as the Redfish library sends one: (field, (file name, content, content type))
Multipart = list[tuple[str, tuple[str | None, str | bytes, str]]]


class Response(Protocol):
    """What the Redfish library answers (its RestResponse): the JSON boundary."""

    @property
    def status(self) -> int: ...

    @property
    def text(self) -> str: ...

    @property
    def dict(self) -> JSONValue: ...

    def getheaders(self) -> list[tuple[str, str]]: ...


class Session:
    """One logged-in Redfish session (basic auth: no session object to leak on the BMC when a
    run is cut). `get` is all a check may use; `ReadOnly` exposes nothing else."""

    def __init__(self, endpoint: BmcEndpoint):
        import redfish  # imported on first use: a run with no BMC does not load requests

        self.endpoint = endpoint
        try:
            self._client = redfish.redfish_client(
                base_url=endpoint.url, username=endpoint.user, password=endpoint.password,
                cafile=endpoint.verify_file(), timeout=endpoint.timeout, max_retry=0, check_connectivity=False)
            self._client.login(auth="basic")
        except BmcError:
            raise
        except Exception as exc:  # noqa: BLE001 - the library raises its own, requests' and ssl's
            raise BmcError(f"{endpoint.url}: cannot log in: {describe(exc)}") from None

    def _call(self, method: str, path: str, **options: object) -> Response:
        """The Redfish library's GET or POST (its response object: the JSON boundary)."""
        try:
            response: Response = getattr(self._client, method)(path, **options)
            return response
        except Exception as exc:  # noqa: BLE001
            raise BmcError(f"{self.endpoint.url}: {method.upper()} {path}: {describe(exc)}") from None

    def get(self, path: str) -> dict[str, JSONValue]:
        response = self._call("get", path)
        return _json(self.endpoint, "GET", path, response)

    def post(self, path: str, body: JSONValue | Multipart, headers: dict[str, str] | None = None,
             timeout: float | None = None) -> tuple[int, dict[str, JSONValue], dict[str, str]]:
        """POST and the status, the JSON answer ({} for none) and the headers (`Location`)."""
        kwargs: dict[str, object] = {"body": body}
        if headers:
            kwargs["headers"] = headers
        if timeout:
            kwargs["timeout"] = timeout
        response = self._call("post", path, **kwargs)
        try:
            payload: JSONValue = response.dict if response.text.strip() else {}
        except Exception:  # noqa: BLE001
            payload = {}
        if response.status >= 400:
            raise BmcError(f"{self.endpoint.url}: POST {path}: HTTP {response.status}: {_extended(payload)}")
        return response.status, payload if isinstance(payload, dict) else {}, dict(response.getheaders())

    def patch(self, path: str, body: Mapping[str, JSONValue]) -> None:
        response = self._call("patch", path, body=body)
        if response.status >= 400:
            try:
                detail = _extended(response.dict)
            except Exception:  # noqa: BLE001
                detail = response.text[:200]
            raise BmcError(f"{self.endpoint.url}: PATCH {path}: HTTP {response.status}: {detail}")

    def close(self) -> None:
        try:
            self._client.logout()
        except Exception:  # noqa: BLE001 - basic auth has no session to end; the BMC may be rebooting
            pass


class ReadOnly:
    """What a check may do with a BMC: read resources. Nothing else is exposed."""

    def __init__(self, session: Session):
        self._session = session

    def get(self, path: str) -> dict[str, JSONValue]:
        return self._session.get(path)


def _json(endpoint: BmcEndpoint, method: str, path: str, response: Response) -> dict[str, JSONValue]:
    if response.status >= 400:
        try:
            detail = _extended(response.dict)
        except Exception:  # noqa: BLE001
            detail = response.text[:200]
        raise BmcError(f"{endpoint.url}: {method} {path}: HTTP {response.status}: {detail}")
    try:
        payload: JSONValue = json.loads(response.text)
    except ValueError:
        raise BmcError(f"{endpoint.url}: {method} {path}: the answer is not JSON") from None
    if not isinstance(payload, dict):
        raise BmcError(f"{endpoint.url}: {method} {path}: the answer is not a JSON object")
    return payload


def _extended(payload: JSONValue) -> str:
    """Redfish's `error.@Message.ExtendedInfo` messages, joined: what the BMC said was wrong."""
    if isinstance(payload, dict) and isinstance(error := payload.get("error"), dict):
        infos = items_of(error.get("@Message.ExtendedInfo"))
        text = "; ".join(f"{i.get('MessageId', '')}: {i.get('Message', '')}" for i in infos if isinstance(i, dict))
        return text or str(error.get("message", ""))
    return str(payload)[:200]


def describe(exc: BaseException) -> str:
    """A library, requests or TLS failure in one line, with its root cause (a refused
    certificate, a timeout), never a traceback."""
    causes: list[str] = []
    seen: BaseException | None = exc
    while seen is not None and len(causes) < 4:
        text = str(seen).strip() or type(seen).__name__
        if text not in causes:
            causes.append(text)
        seen = seen.__cause__ or seen.__context__
    message = causes[-1] if len(causes) > 1 else causes[0]
    if "CERTIFICATE_VERIFY_FAILED" in " ".join(causes):
        return f"its TLS certificate does not verify ({message})"
    if "timed out" in " ".join(causes).lower() or "Timeout" in type(exc).__name__:
        return f"no answer within the timeout ({message})"
    return message[:300]
