"""The daemons the simulated NVIDIA, InfiniBand and Docker packages ship.

Each checks, at start, what the real one depends on, and fails the way it does:

* ``nv-fabricmanager`` needs the driver loaded, NVSwitches present, and its own version to
  equal the loaded driver's (the real "driver interface version ... don't match" message);
* ``nvidia-persistenced`` needs the driver at its own version (else the kernel module logs
  the real ``NVRM: API mismatch`` lines); while it runs, persistence mode is Enabled;
* ``opensm`` needs ``ib_umad`` (libibumad's real "is ib_umad module loaded?" message), and
  while it runs it holds this node's subnet-manager lock in the lab's shared fabric directory;
* ``dockerd`` refuses an invalid ``/etc/docker/daemon.json`` and remembers the runtimes it
  loaded, so ``docker info`` shows a stale config until docker is restarted.

After its checks a daemon stays alive as ``sleep infinity`` exec'd through a symlink named
after the daemon (so ``ps``/``pidof`` show ``nv-fabricmanager``), keeping the locks it took.
"""
from __future__ import annotations

import json
import os
import signal
import sys
import time

import entry
import fabric
import gpu
import logs
import modules
import state

SLEEP = "/usr/bin/sleep"


def _become(name: str) -> None:
    """Replace this process with a sleeping one whose command name is ``name``."""
    link = state.path(f"{state.RUN}/bin/{name}")
    os.makedirs(os.path.dirname(link), exist_ok=True)
    if not os.path.islink(link):
        try:
            os.symlink(SLEEP, link)
        except FileExistsError:
            pass
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)   # survives exec: a reload (SIGHUP) must not kill it
    os.execv(link, [name, "infinity"])


def daemonize(name: str, pid_file: str | None, on_child) -> int:
    """Fork; the child runs ``on_child(pid)``, writes ``pid_file`` and becomes ``name``.
    The parent returns once the child is ready (what a Type=forking unit waits for)."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid:
        os.close(write_end)
        while os.read(read_end, 1):   # the close-on-exec pipe closes when the child execs
            pass
        os.close(read_end)
        return 0
    os.close(read_end)
    child = os.getpid()
    if pid_file:
        state.write_text(pid_file, f"{child}\n")
    on_child(child)
    os.write(write_end, b"1")   # write_end is close-on-exec: the parent returns after the exec
    _become(name)
    return 0


def _err(ident: str, message: str, unit: str) -> None:
    """Report a start failure on stderr; under the simulated systemd that output is the
    journal entry (``nv-fabricmanager[PID]: ...``), as the real daemon's stderr is."""
    sys.stderr.write(message + "\n")


def _fm_log(level: str, message: str) -> None:
    """A line of /var/log/fabricmanager.log in its real format."""
    real = state.path("/var/log/fabricmanager.log")
    os.makedirs(os.path.dirname(real), exist_ok=True)
    with open(real, "a", encoding="utf-8") as handle:
        handle.write(f"{time.strftime('[%b %d %Y %H:%M:%S]')} [{level}] [tid {os.getpid()}] {message}\n")


NVLSM = "/opt/nvidia/nvlsm/sbin/nvlsm"


def nvlink5_precheck(profile) -> str:
    """What ``nvidia-fabricmanager-start.sh --mode precheck`` stops an NVLink5 (HGX Blackwell)
    start for: no ``ib_umad`` (its own message), or no NVLink subnet manager to route the
    switches, where FM finds nothing to do and the GPUs stay In Progress (reference section 5)."""
    if profile.gpu.architecture != "Blackwell":
        return ""
    if not state.exists("/sys/class/infiniband_mad/abi_version"):
        return 'Kernel module "ib_umad" has not been loaded, fabric manager cannot be started'
    if not state.exists(NVLSM):
        return ("request to query NVSwitch device information from NVSwitch driver failed with "
                "error:WARNING Nothing to do [NV_WARN_NOTHING_TO_DO]")
    return ""


def fabricmanager(version: str, args: list[str]) -> int:
    unit = "nvidia-fabricmanager.service"
    profile = state.profile()
    driver = gpu.driver_version()
    _fm_log("INFO", f"Fabric Manager version {version} is running with the following configuration options")
    if driver is None:
        message = ("fabric manager failed to open NVIDIA GPU driver interface. "
                   "Please check whether NVIDIA GPU driver is loaded")
    elif not profile.has_nvswitch:
        message = ("request to query NVSwitch device information from NVSwitch driver failed with "
                   "error:WARNING Nothing to do [NV_WARN_NOTHING_TO_DO]")
    elif version != driver:
        message = (f"fabric manager NVIDIA GPU driver interface version {version} don't match with "
                   f"driver version {driver}. Please update with matching NVIDIA driver package.")
    else:
        message = nvlink5_precheck(profile)
    if message:
        _fm_log("ERROR", message)
        _err("nv-fabricmanager", message, unit)
        return 1
    _fm_log("INFO", "Successfully configured all the available NVSwitches to route GPU NVLink traffic. NVLink "
                    "Peer-to-Peer support will be enabled once the GPUs are successfully registered with the "
                    "NVLink fabric.")
    print("Starting NVIDIA fabric manager...")

    def ready(pid: int) -> None:
        state.write_json(f"{state.RUN}/fabricmanager.json", {"pid": pid, "version": version})
        modules.add_user("nvidia", pid)

    return daemonize("nv-fabricmanager", "/run/nvidia-fabricmanager/nv-fabricmanager.pid", ready)


API_MISMATCH = ("NVRM: API mismatch: the client has the version {client}, but\n"
                "NVRM: this kernel module has the version {module}.  Please\n"
                "NVRM: make sure that this kernel module and all NVIDIA driver\n"
                "NVRM: components have the same version.")


def persistenced(version: str, args: list[str]) -> int:
    unit = "nvidia-persistenced.service"
    if "--version" in args or "-v" in args:
        print(f"\nnvidia-persistenced:  version {version}\n\n  The NVIDIA Persistence Daemon.\n\n"
              "  Copyright (C) 2013-2025 NVIDIA Corporation.\n")
        return 0
    loaded = gpu.driver_version()
    if loaded is not None and loaded != version:
        # the module refuses the daemon's ioctl when it opens /dev/nvidiactl
        logs.kmsg(API_MISMATCH.format(client=version, module=loaded), 3)
    if loaded != version:
        logs.journal("Failed to query NVIDIA devices. Please ensure that the NVIDIA device files (/dev/nvidia*) "
                     "exist, and that user 0 has read and write permissions for those files.",
                     "nvidia-persistenced", os.getpid(), unit, 3)
        _err("nvidia-persistenced", "nvidia-persistenced failed to initialize. Check syslog for more details.", unit)
        return 1
    enable = "--no-persistence-mode" not in args

    def ready(pid: int) -> None:
        state.write_json(f"{state.RUN}/persistenced.json", {"pid": pid, "version": version,
                                                            "persistence": enable})
        modules.add_user("nvidia", pid)
        gpu.daemon_started([g.index for g in gpu.gpus()])
        logs.journal(f"Started ({pid})", "nvidia-persistenced", pid, unit)
        for g in gpu.gpus():
            logs.journal(f"device {g.bdf[4:].lower()} - registered", "nvidia-persistenced", pid, unit)
        if enable:
            logs.journal("persistence mode enabled.", "nvidia-persistenced", pid, unit)

    if "--foreground" in args or "-f" in args:
        ready(os.getpid())
        _become("nvidia-persistenced")
    return daemonize("nvidia-persistenced", "/run/nvidia-persistenced/nvidia-persistenced.pid", ready)


def opensm(args: list[str]) -> int:
    unit = "opensm.service"
    print("-------------------------------------------------\nOpenSM 3.3.24")
    if not state.exists("/sys/class/infiniband_mad/abi_version"):
        _err("opensm", "libibumad: can't read ABI version from /sys/class/infiniband_mad/abi_version "
             "(No such file or directory): is ib_umad module loaded?", unit)
        _err("opensm", "Error from osm_opensm_bind (0x2A)\nPerhaps another instance of OpenSM is already running", unit)
        return 1
    if not state.exists("/sys/class/infiniband/mlx5_0"):
        # ib_umad is there but no HCA is (mlx5_ib not loaded): no local port to bind to
        _err("opensm", "osm_vendor_bind: ERR 5426: Unable to register class 129 version 1", unit)
        _err("opensm", "Error from osm_opensm_bind (0x2A)\nPerhaps another instance of OpenSM is already running", unit)
        return 1
    fd = fabric.register_subnet_manager(state.hostname())
    if fd is None:
        _err("opensm", "Error from osm_opensm_bind (0x2A)\nPerhaps another instance of OpenSM is already running", unit)
        return 1
    print("Command Line Arguments:\n Daemon mode\n Log File: /var/log/opensm.log")
    guid = state.read_text("/sys/class/infiniband/mlx5_0/node_guid", "0000:0000:0000:0000").strip()

    def ready(pid: int) -> None:
        modules.add_user("ib_umad", pid)    # opensm holds /dev/infiniband/umad*: ib_umad is in use
        fabric.refresh()
        logs.journal(f"Using default GUID 0x{guid.replace(':', '')}", "opensm", pid, unit)
        logs.journal("Entering DISCOVERING state", "opensm", pid, unit)
        logs.journal("Entering MASTER state", "opensm", pid, unit)
        logs.journal("SUBNET UP", "opensm", pid, unit)

    if "-B" not in args and "--daemon" not in args:
        ready(os.getpid())
        _become("opensm")
    return daemonize("opensm", None, ready)


def dockerd(args: list[str]) -> int:
    unit = "docker.service"
    config_file = "/etc/docker/daemon.json"
    text = state.read_text(config_file)
    config = {}
    if text is not None and text.strip():
        try:
            config = json.loads(text)
        except ValueError as error:
            _err("dockerd", f"unable to configure the Docker daemon with file {config_file}: {error}", unit)
            return 1
    runtimes = {"io.containerd.runc.v2": {}, "runc": {}}
    runtimes.update(config.get("runtimes", {}))
    default = config.get("default-runtime", "runc")
    if default not in runtimes:
        _err("dockerd", f"failed to start daemon: default runtime {default} does not exist", unit)
        return 1
    pid = os.getpid()
    state.write_json(f"{state.RUN}/docker.json", {"pid": pid, "config": config, "runtimes": sorted(runtimes),
                                                  "default_runtime": default})
    logs.journal("API listen on /run/docker.sock", "dockerd", pid, unit)
    ready = os.environ.get("GPUCONF_SIM_READY")
    if ready:
        with open(ready, "w") as handle:
            handle.write("READY=1\n")
    _become("dockerd")
    return 0


def docker(args: list[str]) -> int:
    info = state.read_json(f"{state.RUN}/docker.json")
    if not info or not modules.alive(info.get("pid", 0)):
        sys.stderr.write("Cannot connect to the Docker daemon at unix:///var/run/docker.sock. "
                         "Is the docker daemon running?\n")
        return 1
    if args[:1] == ["info"]:
        if "--format" in args or any(a.startswith("--format=") for a in args):
            fmt = args[args.index("--format") + 1] if "--format" in args else \
                next(a for a in args if a.startswith("--format="))[9:]
            values = {"{{.DefaultRuntime}}": info["default_runtime"],
                      "{{json .Runtimes}}": json.dumps({name: {"path": name} for name in info["runtimes"]}),
                      "{{.ServerVersion}}": "20.10.24+dfsg1"}
            print(values.get(fmt.strip(), ""))
            return 0
        print("Client:\n Context:    default\n Debug Mode: false\n\nServer:\n Server Version: 20.10.24+dfsg1\n"
              " Storage Driver: overlay2\n Cgroup Driver: systemd\n"
              f" Runtimes: {' '.join(info['runtimes'])}\n Default Runtime: {info['default_runtime']}")
        return 0
    if args[:1] == ["version"]:
        print("Client:\n Version:           20.10.24+dfsg1\n\nServer:\n Engine:\n  Version:          20.10.24+dfsg1")
        return 0
    sys.stderr.write(f"docker: '{' '.join(args[:1])}' is not simulated in gpuconf lab (info and version are).\n")
    return 125


def main(argv: list[str]) -> int:
    name, rest = (argv[0], argv[1:]) if argv else ("", [])
    if name == "fabricmanager":
        return fabricmanager(rest[0], rest[1:])
    if name == "persistenced":
        return persistenced(rest[0], rest[1:])
    if name == "opensm":
        return opensm(rest)
    if name == "dockerd":
        return dockerd(rest)
    if name == "docker":
        return docker(rest)
    sys.stderr.write("usage: daemons.py fabricmanager|persistenced VERSION ... | opensm | dockerd | docker\n")
    return 2


if __name__ == "__main__":
    entry.run(main)
