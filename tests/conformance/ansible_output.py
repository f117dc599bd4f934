"""gpuconf's JSON report printed as ansible-playbook's default output prints a run: PLAY and
TASK headers, one line per host (and per loop item), debug's value as indented JSON, the recap.

Only the shape is Ansible's: every value comes from gpuconf's report. A target's checks grep this
output (`grep -c 'handler ran'`, `grep 'ignored=2'`), as they grep Ansible's.
"""
from __future__ import annotations

import json
import re
from typing import Any

ITEM = re.compile(r"^(?P<name>.*) \(item=(?P<item>.*)\)$")
STARS = 80


def _header(kind: str, name: str) -> str:
    text = f"{kind} [{name}] "
    return "\n" + text + "*" * max(3, STARS - len(text))


def _shown(value: Any) -> str:
    return json.dumps(value, indent=4, ensure_ascii=False, sort_keys=False)


def _steps(tasks: list[dict[str, Any]]) -> list[tuple[tuple[str, ...], list[dict[str, Any]]]]:
    """A host's results, a loop's items together: [(key, [result, ...])]; the key says which task
    it is (its play, place, name and whether a handler), counted when the same task runs again."""
    steps: list[tuple[tuple[str, ...], list[dict[str, Any]]]] = []
    seen: dict[tuple[str, ...], int] = {}
    for task in tasks:
        if task.get("not_run"):
            continue
        match = ITEM.match(task["task"])
        name = task.get("ansible_name") or (match.group("name") if match else task["task"])
        base = (task["play"], task["location"], name, "handler" if task["handler"] else "task")
        if match and steps and steps[-1][0][:4] == base and steps[-1][1][-1].get("_item") is not None:
            steps[-1][1].append({**task, "_item": match.group("item")})
            continue
        seen[base] = seen.get(base, 0) + 1
        steps.append(((*base, str(seen[base])), [{**task, "_item": match.group("item") if match else None}]))
    return steps


def _line(host: str, result: dict[str, Any], verbosity: int) -> list[str]:
    status, item = result["status"], result["_item"]
    at = f"[{host}]" + (f" => (item={item})" if item is not None else "")
    if status in ("failed", "unknown", "unreachable"):
        word = "fatal" if status != "unreachable" else "fatal"
        detail = json.dumps({"changed": False, "msg": result["error"] or result["message"]}, ensure_ascii=False)
        what = "UNREACHABLE!" if status == "unreachable" else "FAILED!"
        lines = [f"{word}: {at}: {what} => {detail}"]
        if result.get("ignored"):
            lines.append("...ignoring")
        return lines
    if status == "skipped":
        detail = {"changed": False, "skip_reason": "Conditional result was False"}
        return [f"skipping: {at}" + (f" => {json.dumps(detail)}" if verbosity >= 1 else "")]
    if result["type"] in ("include_tasks", "include_role"):
        return [result["message"] + (f" => (item={item})" if item is not None else "")]
    if result["type"] == "meta":
        return [f"META: {result['message']}"] if verbosity >= 2 else []
    word = "changed" if status in ("changed", "would_change") else "ok"
    shown = result.get("shown") or (result.get("data") if result["type"] == "debug" else None)
    if result["type"] == "debug" and isinstance(shown, dict):
        return [f"{word}: {at} => {_shown(shown)}"]
    if result["type"] == "assert":   # as debug, Ansible's assert always shows its result
        return [f"{word}: {at} => {_shown({'changed': False, 'msg': result.get('message') or 'All assertions passed'})}"]
    if verbosity >= 1:   # -v: the result, as far as the report has it
        detail: dict[str, Any] = {"changed": word == "changed"}
        for key in ("stdout", "stderr"):
            if result.get(key):
                detail[key] = result[key].rstrip("\n")
                detail[f"{key}_lines"] = detail[key].splitlines()
        if result.get("message"):
            detail["msg"] = result["message"]
        return [f"{word}: {at} => {json.dumps(detail, ensure_ascii=False)}"]
    return [f"{word}: {at}"]


def recap(hosts: dict[str, Any]) -> list[str]:
    """Ansible's PLAY RECAP: ok counts changed ones too, an ignored failure is ok and ignored."""
    lines = ["", "PLAY RECAP " + "*" * (STARS - 11)]
    for host, data in hosts.items():
        counts = dict.fromkeys(("ok", "changed", "unreachable", "failed", "skipped", "rescued", "ignored"), 0)
        if isinstance(data.get("recap"), dict):   # gpuconf's own recap, counted as Ansible counts
            counts.update({k: int(v) for k, v in data["recap"].items() if k in counts})
            cells = "".join(f"{key}={value}".ljust(len(key) + 5) for key, value in counts.items())
            lines.append(f"{host.ljust(26)} : {cells}")
            continue
        for _, results in _steps(data["tasks"]):
            statuses = [r["status"] for r in results]
            if any(s in ("failed", "unknown") for s in statuses):
                if any(r.get("ignored") for r in results):
                    counts["ok"] += 1
                    counts["ignored"] += 1
                else:
                    counts["failed"] += 1
            elif "unreachable" in statuses:
                counts["unreachable"] += 1
            elif all(s == "skipped" for s in statuses):
                counts["skipped"] += 1
            elif results[0]["type"] == "meta":
                continue   # a meta step that ran is no result Ansible counts
            else:
                counts["ok"] += 1
                if any(s in ("changed", "would_change") for s in statuses):
                    counts["changed"] += 1
        if data.get("unreachable"):
            counts["unreachable"] = max(counts["unreachable"], 1)
        cells = "".join(f"{key}={value}".ljust(len(key) + 5) for key, value in counts.items())
        lines.append(f"{host.ljust(26)} : {cells}")
    lines.append("")
    return lines


def render_playbook(report: dict[str, Any], verbosity: int = 0, playbook: str = "") -> str:
    hosts = report["hosts"]
    per_host = {host: _steps(data["tasks"]) for host, data in hosts.items()}
    order: list[tuple[str, ...]] = []
    for steps in per_host.values():
        last = -1
        for key, _ in steps:
            if key in order:
                last = order.index(key)
            else:
                last += 1
                order.insert(last, key)
    lines: list[str] = []
    if verbosity >= 2 and playbook:
        lines += [f"PLAYBOOK: {playbook} " + "*" * max(3, STARS - len(playbook) - 11),
                  f"{len(report['plays'])} plays in {playbook}"]
    play = None
    for key in order:
        if key[0] != play:
            play = key[0]
            lines += ["", f"PLAY [{play}] " + "*" * max(3, STARS - len(play) - 8)]
        lines.append(_header("RUNNING HANDLER" if key[3] == "handler" else "TASK", _task_name(key, per_host)))
        if verbosity >= 2:
            lines.append(f"task path: {key[1]}")
        for host, steps in per_host.items():
            for step_key, results in steps:
                if step_key == key:
                    for result in results:
                        lines += _line(host, result, verbosity)
    lines += recap(hosts)
    return "\n".join(lines) + "\n"


def _task_name(key: tuple[str, ...], per_host: dict[str, Any]) -> str:
    for steps in per_host.values():
        for step_key, results in steps:
            if step_key == key and results[0].get("role"):
                return f"{results[0]['role']} : {key[2]}"
    return key[2]


def render_adhoc(report: dict[str, Any], verbosity: int = 0) -> str:
    """`ansible HOST -m MODULE`: `host | SUCCESS => {...}` per host."""
    lines = []
    for host, data in report["hosts"].items():
        for task in data["tasks"]:
            if task["status"] in ("failed", "unknown"):
                lines.append(f"{host} | FAILED! => " + _shown({"changed": False, "msg": task["error"]}))
            elif task["status"] == "unreachable":
                lines.append(f"{host} | UNREACHABLE! => " + _shown({"changed": False, "msg": task["error"]}))
            else:
                word = "CHANGED" if task["status"] in ("changed", "would_change") else "SUCCESS"
                shown = task.get("shown") if isinstance(task.get("shown"), dict) else {"changed": word == "CHANGED"}
                lines.append(f"{host} | {word} => " + _shown(shown))
    return "\n".join(lines) + "\n"
