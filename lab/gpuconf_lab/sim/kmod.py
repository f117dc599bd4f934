"""``modprobe``, ``rmmod``, ``insmod``, ``lsmod``, ``modinfo``, ``depmod`` and ``kmod``.

One entry point for the whole kmod family, as the real tools are one binary: the shim passes
the tool name first. Messages and exit codes are kmod 30's (Debian 12), because tasks and
their tests match on them: ``modprobe: FATAL: Module nvidia not found in directory ...``,
``modprobe: ERROR: could not insert 'nvidia': No such device``, ``rmmod: ERROR: Module
nouveau is in use``.
"""
from __future__ import annotations

import hashlib
import os
import shlex
import subprocess
import sys

import entry
import modules
import state
import sysfs
from modprobe_conf import live_config, normalise
from modules import ModuleError


def main(argv: list[str]) -> int:
    tool, args = (argv[0], argv[1:]) if argv else ("kmod", [])
    handler = {"modprobe": modprobe, "rmmod": rmmod, "insmod": insmod, "lsmod": lsmod,
               "modinfo": modinfo, "depmod": depmod, "kmod": kmod}.get(tool)
    if handler is None:
        return state.fail("kmod", f"unknown tool {tool}", 1)
    return handler(args)


def _err(tool: str, level: str, message: str) -> None:
    sys.stderr.write(f"{tool}: {level}: {message}\n")


def _split_flags(args: list[str], with_value=()) -> tuple[set, dict, list]:
    flags, values, rest = set(), {}, []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            rest.extend(args[i + 1:])
            break
        if arg.startswith("--"):
            key, eq, value = arg.partition("=")
            if key in with_value and not eq:
                i += 1
                value = args[i] if i < len(args) else ""
            (values.__setitem__(key, value) if key in with_value else flags.add(key))
        elif arg.startswith("-") and len(arg) > 1 and not rest:
            for j, letter in enumerate(arg[1:]):
                if "-" + letter in with_value:
                    value = arg[j + 2:] or (args[i + 1] if i + 1 < len(args) else "")
                    if not arg[j + 2:]:
                        i += 1
                    values["-" + letter] = value
                    break
                flags.add("-" + letter)
        else:
            rest.append(arg)
        i += 1
    return flags, values, rest


def modprobe(args: list[str]) -> int:
    flags, values, rest = _split_flags(args, with_value=("-S", "--set-version", "-C", "--config", "-d", "--dirname"))
    has = lambda *names: any(name in flags for name in names)  # noqa: E731
    if has("-V", "--version"):
        print("kmod version 30\n+ZSTD +XZ -ZLIB +LIBCRYPTO -EXPERIMENTAL")
        return 0
    config = live_config()
    if has("-c", "--showconfig"):
        return _show_config(config)
    if not rest:
        _err("modprobe", "FATAL", "Module name not specified") if not has("-r", "--remove") else None
        return 1
    quiet, verbose = has("-q", "--quiet"), has("-v", "--verbose")
    if has("-r", "--remove"):
        return _modprobe_remove(rest, config, quiet, verbose, has("--first-time"))
    names, params = (rest, []) if has("-a", "--all") else (rest[:1], rest[1:])
    code = 0
    for name in names:
        code = max(code, _modprobe_one(name, params, config, flags, quiet, verbose))
    return code


def _modprobe_one(name, params, config, flags, quiet, verbose) -> int:
    has = lambda *names: any(n in flags for n in names)  # noqa: E731
    name = config.aliases.get(name, normalise(name))
    if has("-b", "--use-blacklist") and name in config.blacklist:
        return 0
    if name in config.install and not has("-i", "--ignore-install"):
        return _run_hook("install", name, config.install[name], params, quiet)
    modules_found = modules.index()
    try:
        order = modules.resolve(name, modules=modules_found)
    except ModuleError as error:
        if not quiet:
            _err("modprobe", "FATAL", f"Module {error.module} not found in directory {error.reason}")
        return 1
    if has("-D", "--show-depends"):
        for current in order:
            print(f"insmod {modules_found[current][0]} {' '.join(config.params(current))}".rstrip())
        return 0
    loaded = modules.loaded_names()
    if name in loaded and has("--first-time"):
        _err("modprobe", "ERROR", f"could not insert '{name}': Module already in kernel")
        return 1
    for pre in config.softdep_pre.get(name, []):
        _modprobe_one(pre, [], config, flags, True, verbose)
    try:
        return _insert_all(name, order, loaded, modules_found, params, config, flags, quiet, verbose)
    finally:
        if modules.loaded_names() != loaded:
            sysfs.render_modules()   # once for the whole chain, not per module


def _insert_all(name, order, loaded, modules_found, params, config, flags, quiet, verbose) -> int:
    has = lambda *names: any(n in flags for n in names)  # noqa: E731
    for current in order:
        if current in loaded:
            continue
        node_path, fields = modules_found[current]
        if verbose or has("-n", "--dry-run"):
            print(f"insmod {node_path} {' '.join(config.params(current))}".rstrip())
        if has("-n", "--dry-run"):
            continue
        if not state.is_root():
            _err("modprobe", "ERROR", f"could not insert '{current}': Operation not permitted")
            return 1
        extra = params if current == name else []
        try:
            modules.insert(current, node_path, fields, config.params(current) + list(extra), render=False)
        except ModuleError as error:
            if not quiet:
                _err("modprobe", "ERROR", f"could not insert '{current}': {error.reason}")
            return 1
    for post in config.softdep_post.get(name, []):
        _modprobe_one(post, [], config, flags, True, verbose)
    return 0


def _run_hook(kind, name, command, params, quiet) -> int:
    env = dict(os.environ, CMDLINE_OPTS=" ".join(params))
    words = shlex.split(command) or ["/bin/true"]
    if state.TEST_MODE and state.resolve_command(words[0]) is None:
        returncode = 126   # tests never run the machine's own tools (its modprobe, say)
    else:
        returncode = subprocess.run(["/bin/sh", "-c", command], env=env).returncode
    if returncode != 0:
        if not quiet:
            _err("modprobe", "ERROR", f"../libkmod/libkmod-module.c:1035 command_do() Error running "
                 f"{kind} command '{command}' for module {name}: retcode {returncode}")
            if kind == "install":
                _err("modprobe", "ERROR", f"could not insert '{name}': Invalid argument")
        return 1
    return 0


def _modprobe_remove(names, config, quiet, verbose, first_time) -> int:
    for raw in names:
        name = normalise(raw)
        if not modules.is_loaded(name):
            if first_time:
                _err("modprobe", "FATAL", f"Module {name} is not in kernel.")
                return 1
            continue
        if name in config.remove:
            if _run_hook("remove", name, config.remove[name], [], quiet):
                return 1
            continue
        deps = modules.unused_dependencies(name)
        if verbose:
            print(f"rmmod {name}")
        try:
            modules.remove(name)
        except ModuleError as error:
            if error.kind == "in_use":
                if not quiet:
                    _err("modprobe", "FATAL", f"Module {name} is in use.")
                return 1
            if not state.is_root():
                _err("modprobe", "FATAL", f"Module {name} is not in kernel.")
            return 1
        _remove_unused(deps, verbose)
    return 0


def _remove_unused(names, verbose) -> None:
    for name in names:
        entry_ = modules.get(name)
        if entry_ is None or entry_.get("users"):
            continue
        deps = list(entry_["deps"])
        try:
            modules.remove(name)
        except ModuleError:
            continue
        if verbose:
            print(f"rmmod {name}")
        _remove_unused(deps, verbose)


def _show_config(config) -> int:
    for name in sorted(config.blacklist):
        print(f"blacklist {name}")
    for name, opts in sorted(config.options.items()):
        print(f"options {name} {' '.join(opts)}")
    for name, command in sorted(config.install.items()):
        print(f"install {name} {command}")
    return 0


def rmmod(args: list[str]) -> int:
    flags, _values, names = _split_flags(args)
    if not names:
        _err("rmmod", "ERROR", "missing module name.")
        return 1
    code = 0
    for raw in names:
        name = normalise(raw)
        try:
            if not state.is_root():
                raise ModuleError("perm", name)
            modules.remove(name, force=bool({"-f", "--force"} & flags))
        except ModuleError as error:
            code = 1
            if error.kind == "not_loaded":
                _err("rmmod", "ERROR", f"Module {name} is not currently loaded")
            elif error.kind == "in_use" and error.holders:
                _err("rmmod", "ERROR", f"Module {name} is in use by: {' '.join(error.holders)}")
            elif error.kind == "in_use":
                _err("rmmod", "ERROR", f"Module {name} is in use")
            else:
                _err("rmmod", "ERROR", f"could not remove module {name}: Operation not permitted")
    return code


def insmod(args: list[str]) -> int:
    _flags, _values, rest = _split_flags(args)
    if not rest:
        _err("insmod", "ERROR", "missing filename.")
        return 1
    filename, params = rest[0], rest[1:]
    fields = modules.read_ko(state.path(os.path.abspath(filename)))
    if fields is None:
        _err("insmod", "ERROR", f"could not load module {filename}: No such file or directory")
        return 1
    try:
        if not state.is_root():
            raise ModuleError("insert", fields["name"], "Operation not permitted")
        if not modules.insert(normalise(fields["name"]), os.path.abspath(filename), fields, params):
            raise ModuleError("insert", fields["name"], "File exists")
    except ModuleError as error:
        _err("insmod", "ERROR", f"could not insert module {filename}: {error.reason}")
        return 1
    return 0


def lsmod(_args: list[str]) -> int:
    """The lab's lsmod is a shell script (sim/lsmod.sh, installed as /usr/bin/lsmod) that formats
    /proc/modules; `kmod lsmod` runs that one."""
    sys.stdout.flush()
    os.execv(state.path("/usr/bin/lsmod"), ["lsmod"])


MODINFO_ORDER = ("filename", "version", "supported", "license", "firmware", "description", "srcversion", "alias",
                 "depends", "retpoline", "intree", "name", "vermagic", "sig_id", "signer", "sig_key",
                 "sig_hashalgo", "signature", "parm")


def modinfo(args: list[str]) -> int:
    _flags, values, names = _split_flags(args, with_value=("-F", "--field", "-k", "--set-version"))
    field = values.get("-F") or values.get("--field")
    release = values.get("-k") or values.get("--set-version") or state.running_kernel()
    if not names:
        _err("modinfo", "ERROR", "missing module or filename.")
        return 1
    code = 0
    found = modules.index(release)
    for raw in names:
        if raw.endswith(".ko"):
            fields, node_path = modules.read_ko(state.path(os.path.abspath(raw))), os.path.abspath(raw)
        else:
            node_path, fields = found.get(normalise(raw), (None, None))
        if fields is None:
            _err("modinfo", "ERROR", f"Module {raw} not found.")
            code = 1
            continue
        info = dict(fields, filename=node_path, retpoline="Y",
                    srcversion=hashlib.md5((fields["name"] + fields.get("version", "")).encode())
                    .hexdigest()[:23].upper())
        for key in MODINFO_ORDER:
            values_ = info.get(key)
            if values_ in (None, "") and key not in ("depends",):
                continue
            for value in values_ if isinstance(values_, list) else [values_]:
                if field:
                    if key == field:
                        print(value)
                else:
                    print(f"{key + ':':<16}{value}")
    return code


def depmod(args: list[str]) -> int:
    _flags, _values, rest = _split_flags(args, with_value=("-b", "--basedir", "-F", "-E"))
    releases = [r for r in rest if not r.endswith(".ko")] or [state.running_kernel()]
    for release in releases:
        write_modules_dep(release)
    return 0


def write_modules_dep(release: str) -> None:
    """``modules.dep``: ``path: dep-path ...`` relative to /lib/modules/<release>."""
    found = modules.index(release)
    base = f"/lib/modules/{release}/"
    lines = []
    for _name, (node_path, fields) in sorted(found.items()):
        deps = [found[normalise(d)][0][len(base):] for d in fields.get("depends", "").split(",")
                if d and normalise(d) in found]
        lines.append(f"{node_path[len(base):]}: {' '.join(deps)}".rstrip())
    state.write_text(f"{base}modules.dep", "\n".join(lines) + "\n")


def kmod(args: list[str]) -> int:
    if args[:1] == ["list"]:
        return lsmod([])
    if args[:1] in (["--version"], ["-V"]):
        print("kmod version 30\n+ZSTD +XZ -ZLIB +LIBCRYPTO -EXPERIMENTAL")
        return 0
    if args[:1] == ["static-nodes"]:
        return 0
    sys.stderr.write("missing command\nkmod - Manage kernel modules: list, load, unload, etc\n")
    return 1


if __name__ == "__main__":
    entry.run(main)
