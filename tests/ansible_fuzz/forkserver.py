"""A fork server for one tool: imported once, then each request runs in a forked child.

    python forkserver.py ansible|gpuconf

Run by ansible-core's interpreter (tests/.ansible-venv) or gpuconf's: the standard library only.
Importing either tool costs more than running a small program with it (ansible-core: ~0.7 s of
imports before it reads a playbook), so the parent imports it once and forks a child per
program; the child is the tool's command line, in the program's directory, with its output in a
file, and nothing it does reaches the next child. Requests and replies are JSON lines:

    {"argv": [...], "cwd": DIR, "env": {NAME: VALUE}, "output": FILE}  ->  {"rc": N, "seconds": S}
"""
from __future__ import annotations

import json
import os
import signal
import sys
import time

TIMEOUT = 300  # seconds a program may run before its child is killed (rc -9)


def ansible_runner():
    import ansible.executor.playbook_executor  # noqa: F401 - imported here, once, for every child
    import ansible.plugins.action.command  # noqa: F401
    import ansible.plugins.action.copy  # noqa: F401
    import ansible.plugins.action.debug  # noqa: F401
    import ansible.plugins.action.set_fact  # noqa: F401
    import ansible.plugins.action.template  # noqa: F401
    import ansible.plugins.connection.local  # noqa: F401
    import ansible.plugins.strategy.linear  # noqa: F401
    from ansible.cli.playbook import PlaybookCLI

    def run(argv):
        try:
            PlaybookCLI.cli_executor(["ansible-playbook", *argv])
        except SystemExit as exc:
            return exc.code if isinstance(exc.code, int) else 1
        return 0
    return run


def gpuconf_runner():
    import gpuconf.engine.runner  # noqa: F401 - imported here, once, for every child
    import gpuconf.report.jsonreport  # noqa: F401
    import gpuconf.templating.ansible_filters  # noqa: F401
    import gpuconf.templating.render  # noqa: F401
    from gpuconf.cli.main import main

    return main


def child(run, request):
    os.chdir(request["cwd"])
    os.environ.update(request.get("env") or {})
    out = os.open(request["output"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(out, 1)
    os.dup2(out, 2)
    signal.alarm(TIMEOUT)
    code = 1
    try:
        code = run(request["argv"])
    except BaseException as exc:  # noqa: BLE001 - the child reports, the server goes on
        print(f"forkserver: {type(exc).__name__}: {exc}", file=sys.stderr)
        code = 70
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code if isinstance(code, int) else 1)


def serve(tool):
    run = ansible_runner() if tool == "ansible" else gpuconf_runner()
    print(json.dumps({"ready": tool}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        started = time.monotonic()
        pid = os.fork()
        if pid == 0:
            child(run, request)
        _, status = os.waitpid(pid, 0)
        rc = os.waitstatus_to_exitcode(status)
        print(json.dumps({"rc": rc, "seconds": round(time.monotonic() - started, 3)}), flush=True)


if __name__ == "__main__":
    serve(sys.argv[1])
