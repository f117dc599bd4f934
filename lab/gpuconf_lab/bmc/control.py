"""A lab's BMCs from the machine's side (what `fleet.Lab` calls): make the lab CA, each BMC's
certificate and state, publish the lab provider's current firmware bundles, start and stop the
BMC service, reset a node's BMC to a fresh one, and set its faults.

Addresses: node `n` of lab slot `s` has its BMC at `127.78.<s>.<n>` (the nodes' own are
`127.77.<s>.<n>`), port 443 unless `--bmc-port`: loopback only, like everything the lab runs.
Files: `labs/<lab>/bmc/` (0700): `ca.pem` (the CA the inventory's `bmc_ca_file` names),
`ca-key.pem`, `certs/`, `provider/` (the provider's key, 0600) and `bundles/<bundle>/` (its
packages, their `.sig` and `provider.pem`), `nodes/<node>.json` and `<node>.requests.jsonl`,
`server.json` (0600), `server.log`.
"""
from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuconf_lab.bmc import models, package, tls
from gpuconf_lab.bmc.store import NodeStore, fresh_state
from gpuconf_lab.runtime import LabError, NodeSpec, process_matches, read_pid

ADDRESS_PREFIX = "127.78"
PORT = 443
USER = "admin"
FAULTS = ("fail-task", "hang", "clear")


@dataclass(frozen=True)
class BmcPaths:
    root: Path

    @property
    def nodes(self) -> Path:
        return self.root / "nodes"

    @property
    def config(self) -> Path:
        return self.root / "server.json"

    @property
    def ready(self) -> Path:
        return self.root / "server.pid"

    @property
    def log(self) -> Path:
        return self.root / "server.log"

    @property
    def ca(self) -> Path:
        return self.root / "ca.pem"

    @property
    def bundles(self) -> Path:
        return self.root / "bundles"

    def store(self, node: str) -> NodeStore:
        return NodeStore(self.nodes, node)


def address(slot: int, index: int) -> str:
    return f"{ADDRESS_PREFIX}.{slot}.{index + 1}"


def check_ports(slot: int, specs: list[NodeSpec], port: int) -> None:
    for spec in specs:
        if models.model_for(spec.profile) is None:
            continue
        with socket.socket() as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind((address(slot, spec.index), port))
            except OSError as exc:
                raise LabError(f"cannot use {address(slot, spec.index)}:{port} for the BMC of {spec.name} "
                               f"({exc.strerror}); is something listening on 0.0.0.0:{port}? choose another "
                               f"--bmc-port") from None


def setup(paths: BmcPaths, lab: str, slot: int, specs: list[NodeSpec], node_dirs: dict[str, Path], port: int,
          task_seconds: float) -> dict[str, Any]:
    """Everything the BMC service needs, made once per lab; what lab.json keeps of it."""
    paths.root.mkdir(mode=0o700, parents=True, exist_ok=True)
    paths.nodes.mkdir(exist_ok=True)
    (paths.root / "certs").mkdir(exist_ok=True)
    (paths.root / "provider").mkdir(mode=0o700, exist_ok=True)
    ca_cert, ca_key = tls.make_ca(paths.root, lab)
    key = package.provider_key(paths.root / "provider" / "provider-key.pem")
    password = secrets.token_urlsafe(12)
    entries, addresses, bundles = [], {}, {}
    for spec in specs:
        model = models.model_for(spec.profile)
        if model is None:
            continue
        where = address(slot, spec.index)
        cert, cert_key = tls.make_server(paths.root / "certs", spec.name, where, ca_cert, ca_key)
        paths.store(spec.name).write(fresh_state(model, spec.profile))
        entries.append({"name": spec.name, "address": where, "model": model.name, "cert": str(cert),
                        "key": str(cert_key), "node_dir": str(node_dirs[spec.name])})
        addresses[spec.name] = where
        if spec.profile in models.BUNDLE_PROFILES and spec.profile not in bundles:
            bundles[spec.profile] = publish_current(paths, model, key)
    public = paths.root / "provider" / "provider.pem"
    public.write_bytes(package.public_pem(key))
    config = {"lab": lab, "port": port, "user": USER, "password": password, "state_dir": str(paths.nodes),
              "provider_key": str(public), "task_seconds": task_seconds, "ready_file": str(paths.ready),
              "nodes": entries}
    paths.config.touch(mode=0o600)
    paths.config.write_text(json.dumps(config, indent=1) + "\n")
    return {"port": port, "user": USER, "password": password, "addresses": addresses, "bundles": bundles,
            "ca_file": str(ca_cert)}


def publish_current(paths: BmcPaths, model: models.Model, key: Any) -> dict[str, Any]:
    """The provider's current bundle for a model: its packages, signed, and the bundle's value."""
    name = f"{model.name}-lab-{model.current[model.bmc_components[0]]}"
    packages = [(file_name, {c: model.current[c] for c in components}) for file_name, components in model.packages]
    return package.publish(paths.bundles / name, name, packages, key)


def start(paths: BmcPaths, timeout: float = 30.0) -> None:
    """Start the lab's BMC service (its own session, so it outlives `lab up`) and wait until it listens."""
    paths.ready.unlink(missing_ok=True)
    with open(paths.log, "ab") as log:
        process = subprocess.Popen([sys.executable, "-B", "-m", "gpuconf_lab.bmc.server", str(paths.config)],
                                   stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
                                   cwd="/", env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8",
                                                 "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    deadline = time.monotonic() + timeout
    while not paths.ready.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            tail = paths.log.read_text(errors="replace")[-2000:] if paths.log.exists() else ""
            process.kill()
            raise LabError(f"the lab's BMC service did not start; {paths.log} ends with:\n{tail}")
        time.sleep(0.05)


def service_pid(paths: BmcPaths) -> int | None:
    pid = read_pid(paths.ready)
    return pid if pid is not None and process_matches(pid, str(paths.config)) else None


def stop(paths: BmcPaths, timeout: float = 10.0) -> None:
    pid = service_pid(paths)
    if pid is None:
        return
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while process_matches(pid, str(paths.config)):
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            break
        time.sleep(0.05)


def reset(paths: BmcPaths, node: str, profile: str) -> None:
    """The node's BMC as a fresh node's: its first firmware, nothing staged, no Task, no fault."""
    model = models.model_for(profile)
    if model is None or not paths.store(node).path.exists():
        return
    with paths.store(node).locked() as state:
        state.clear()
        state.update(fresh_state(model, profile))


def fault(paths: BmcPaths, node: str, kind: str) -> str:
    """`fail-task`: its update Tasks fail at installation; `hang`: it accepts connections and
    answers nothing; `clear`: neither."""
    if not paths.store(node).path.exists():
        raise LabError(f"node {node} has no BMC (the lab was started without --bmc, or its profile has none)")
    if kind not in FAULTS:
        raise LabError(f"unknown BMC fault '{kind}': choose from {', '.join(FAULTS)}")
    with paths.store(node).locked() as state:
        if kind == "fail-task":
            state["faults"]["task"] = "fail"
        elif kind == "hang":
            state["faults"]["hang"] = True
        else:
            state["faults"] = {}
    return f"{node}: BMC fault {kind}\n"


def host_vars(bmc: dict[str, Any], node: str) -> dict[str, Any]:
    """What the inventory says of a node's BMC (nothing when it has none)."""
    where = bmc["addresses"].get(node)
    if where is None:
        return {}
    port = "" if bmc["port"] == PORT else f":{bmc['port']}"
    return {"bmc_address": f"{where}{port}", "bmc_user": bmc["user"], "bmc_password": bmc["password"],
            "bmc_ca_file": bmc["ca_file"]}

