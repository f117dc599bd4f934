"""The lab's BMC service: one HTTPS listener per node on its BMC address (loopback only), in one
process per lab on the machine (`python -m gpuconf_lab.bmc.server CONFIG`, started by
`gpuconf lab up --bmc` and stopped by `lab down`).

Basic authentication (the lab's account) on every resource but the service root. Each request is
answered from the node's state (service.py) under its lock, then logged. Faults: `hang` (the
connection is accepted, TLS set up, the request read, and nothing is ever answered, as a wedged
BMC web server does) and `fail-task` (service.py). While the BMC resets itself after updating its
own image, connections are closed unanswered.

A power cycle reboots the node as the lab runtime does (SIGUSR1 to the node's PID 1, only a PID 1
that runs this lab node's init.py), after writing the GPUs' new firmware where the node's
simulators read their VBIOS (`/var/lib/gpuconf-lab/baseboard.json`, through the node's own root).
"""
from __future__ import annotations

import base64
import email.parser
import email.policy
import hmac
import json
import os
import signal
import socket
import ssl
import sys
import threading
import time
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from gpuconf_lab.bmc import service
from gpuconf_lab.bmc.models import MODELS, Model
from gpuconf_lab.bmc.package import Package, PackageError, read
from gpuconf_lab.bmc.store import NodeStore
from gpuconf_lab.node import init_pid
from gpuconf_lab.runtime import NodePaths

HANG_LIMIT = 900.0           # a hung request is dropped after this, or as soon as the fault is cleared
MAX_IMAGE = 64 << 20
BASEBOARD_JSON = "var/lib/gpuconf-lab/baseboard.json"


class Node:
    """One node's BMC: its model, store, and how to reach the node itself."""

    def __init__(self, config: dict[str, Any], entry: dict[str, Any]):
        self.name = entry["name"]
        self.model: Model = MODELS[entry["model"]]
        self.store = NodeStore(Path(config["state_dir"]), self.name)
        self.node_dir = Path(entry["node_dir"])
        self.task_seconds = float(config.get("task_seconds", 2.0))
        self.user, self.password = config["user"], config["password"]
        from cryptography.hazmat.primitives import serialization

        self.provider = serialization.load_pem_public_key(Path(config["provider_key"]).read_bytes())

    def authorized(self, header: str | None) -> bool:
        expected = "Basic " + base64.b64encode(f"{self.user}:{self.password}".encode()).decode()
        return bool(header) and hmac.compare_digest(str(header), expected)

    def power_cycle(self, versions: dict[str, str]) -> None:
        """The node loses power and boots again: its GPUs now run their new firmware."""
        pid = init_pid(NodePaths(self.node_dir))   # only this node's init.py: a recycled pid is never signalled
        if pid is None:
            return
        gpu = versions.get(self.model.gpu_components.format(n=1))
        target = Path(f"/proc/{pid}/root") / BASEBOARD_JSON
        if gpu:
            target.parent.mkdir(parents=True, exist_ok=True)
            part = target.with_name(".baseboard.json.part")
            part.write_text(json.dumps({"vbios": gpu}) + "\n")
            os.replace(part, target)
        os.kill(pid, signal.SIGUSR1)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Server

    def log_message(self, format: str, *args: Any) -> None:   # noqa: A002 - the base class's name
        pass

    def _answer(self, status: int, body: dict[str, Any] | None, location: str | None = None) -> None:
        data = json.dumps(body, indent=1).encode() if body is not None else b""
        self.send_response(status)
        self.send_header("Content-Type", "application/json;charset=utf-8")
        self.send_header("OData-Version", "4.0")
        if location:
            self.send_header("Location", location)
        if status == 401:
            self.send_header("WWW-Authenticate", 'Basic realm="Redfish"')
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _gate(self, method: str) -> str | None:
        """The request's path when it is to be answered; None when the BMC hangs or is resetting."""
        node = self.server.node
        path = self.path.split("?", 1)[0].rstrip("/") or "/"
        with node.store.locked() as state:
            hung = bool(state["faults"].get("hang"))
            resetting = service.offline(state, time.time())
        if hung:
            node.store.log(method, path, "hung")
            deadline = time.monotonic() + HANG_LIMIT
            while time.monotonic() < deadline and node.store.read()["faults"].get("hang"):
                time.sleep(0.2)
            self.close_connection = True
            return None
        if resetting:
            node.store.log(method, path, "resetting")
            self.close_connection = True
            return None
        if path not in ("/redfish", "/redfish/v1") and not node.authorized(self.headers.get("Authorization")):
            node.store.log(method, path, 401)
            self._answer(*service.error(401, "Base.1.12.NoValidSession"))
            return None
        return path

    def do_GET(self) -> None:   # noqa: N802 - http.server's name
        path = self._gate("GET")
        if path is None:
            return
        node = self.server.node
        query = urllib.parse.unquote(self.path.partition("?")[2])
        if path == "/redfish":
            status, body = 200, {"v1": "/redfish/v1/"}
        else:
            with node.store.locked() as state:
                now = time.time()
                service.advance(state, now)
                status, body = service.get(node.model, state, path, now, expand=query.startswith("$expand="))
        node.store.log("GET", path, status)
        self._answer(status, body)

    def do_POST(self) -> None:   # noqa: N802
        path = self._gate("POST")
        if path is None:
            return
        node = self.server.node
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_IMAGE:
            self.close_connection = True
            node.store.log("POST", path, 413)
            self._answer(413, None)
            return
        data = self.rfile.read(length)
        resources = node.model.resources()
        update_service = resources["/redfish/v1/UpdateService"]
        push = update_service.get("MultipartHttpPushUri")
        simple = update_service.get("Actions", {}).get("#UpdateService.SimpleUpdate", {}).get("target")
        system = resources[node.model.system]
        reset = system.get("Actions", {}).get("#ComputerSystem.Reset", {}).get("target")
        with node.store.locked() as state:
            now = time.time()
            service.advance(state, now)
            if path == push:
                answer = self._push(node, state, data, now)
            elif path == simple:
                answer = self._simple_update(node, state, data, now)
            elif path == reset:
                try:
                    body = json.loads(data or b"{}")
                except ValueError:
                    body = {}
                answer = service.reset_system(node.model, state, body, now)
                if answer.reboot:
                    node.power_cycle(state["versions"])
            else:
                answer = service.Answer(*service.error(404, "Base.1.12.ResourceNotFound", "Action", path))
        node.store.log("POST", path, answer.status)
        self._answer(answer.status, answer.body, answer.location)

    def _push(self, node: Node, state: dict[str, Any], data: bytes, now: float) -> service.Answer:
        parts = _multipart(self.headers.get("Content-Type", ""), data)
        if "UpdateFile" not in parts:
            return service.Answer(*service.error(400, "Base.1.12.ActionParameterMissing", "multipart push",
                                                 "UpdateFile"))
        file_name, image = parts["UpdateFile"]
        targets = service.parse_update_parameters(parts.get("UpdateParameters", (None, b""))[1].decode() or None)
        if isinstance(targets, str):
            return service.Answer(*service.error(400, "Base.1.12.PropertyValueNotInList", targets,
                                                 "UpdateParameters"))
        package: Package | PackageError
        try:
            package = read(image, node.provider)
        except PackageError as exc:
            package = exc
        return service.start_update(node.model, state, package, file_name or "image", targets, now, node.task_seconds)


    def _simple_update(self, node: Node, state: dict[str, Any], data: bytes, now: float) -> service.Answer:
        """UpdateService.SimpleUpdate: the BMC fetches `ImageURI` itself (from the loopback only)."""
        action = "UpdateService.SimpleUpdate"
        try:
            body = json.loads(data or b"{}")
        except ValueError:
            body = {}
        uri = str(body.get("ImageURI") or "") if isinstance(body, dict) else ""
        if not uri:
            return service.Answer(*service.error(400, "Base.1.12.ActionParameterMissing", action, "ImageURI"))
        parsed = urllib.parse.urlparse(uri)
        if parsed.scheme not in ("http", "https") or not (parsed.hostname or "").startswith("127."):
            return service.Answer(*service.error(400, "Base.1.12.ActionParameterValueNotInList", uri, "ImageURI",
                                                 action))
        targets = service.parse_update_parameters(json.dumps({"Targets": body.get("Targets", [])}))
        if isinstance(targets, str):
            return service.Answer(*service.error(400, "Base.1.12.PropertyValueNotInList", targets, "Targets"))
        package: Package | PackageError | None
        try:
            with urllib.request.urlopen(uri, timeout=30) as response:   # noqa: S310 - http(s) on the loopback
                package = read(response.read(MAX_IMAGE), node.provider)
        except PackageError as exc:
            package = exc
        except OSError:
            package = None
        name = parsed.path.rsplit("/", 1)[-1] or "image"
        return service.start_update(node.model, state, package, name, targets, now, node.task_seconds)


def _multipart(content_type: str, data: bytes) -> dict[str, tuple[str | None, bytes]]:
    """The parts of a multipart/form-data body by name: (file name, bytes)."""
    if not content_type.startswith("multipart/form-data"):
        return {}
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
        f"Content-Type: {content_type}\r\n\r\n".encode() + data)
    parts: dict[str, tuple[str | None, bytes]] = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        if name:
            payload = part.get_payload(decode=True)
            parts[str(name)] = (part.get_filename(), payload if isinstance(payload, bytes) else b"")
    return parts


class Server(ThreadingHTTPServer):
    """One BMC's listener: TLS is set up in the request's own thread, so a client that never
    finishes its handshake holds only that thread."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], node: Node, context: ssl.SSLContext):
        self.node, self.context = node, context
        super().__init__(address, Handler)

    def finish_request(self, request: Any, client_address: Any) -> None:
        request.settimeout(30)
        try:
            secured = self.context.wrap_socket(request, server_side=True)
        except (OSError, ssl.SSLError):
            return
        secured.settimeout(None)
        super().finish_request(secured, client_address)


def serve(config: dict[str, Any]) -> list[Server]:
    servers = []
    for entry in config["nodes"]:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(entry["cert"], entry["key"])
        server = Server((entry["address"], int(config["port"])), Node(config, entry), context)
        threading.Thread(target=server.serve_forever, name=f"bmc-{entry['name']}", daemon=True).start()
        servers.append(server)
    return servers


def main(argv: list[str]) -> int:
    config = json.loads(Path(argv[0]).read_text())
    if any(not entry["address"].startswith("127.") for entry in config["nodes"]):
        print("gpuconf lab bmc: refusing a BMC address off the loopback", file=sys.stderr)
        return 2
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    try:
        servers = serve(config)
    except OSError as exc:
        print(f"gpuconf lab bmc: cannot listen: {exc}", file=sys.stderr, flush=True)
        return 1
    Path(config["ready_file"]).write_text(f"{os.getpid()}\n")
    print(f"gpuconf lab bmc: {len(servers)} BMC(s) listening on port {config['port']}", flush=True)
    stop.wait()
    for server in servers:
        server.shutdown()
        server.server_close()
    return 0


if __name__ == "__main__":
    socket.setdefaulttimeout(None)
    sys.exit(main(sys.argv[1:]))
