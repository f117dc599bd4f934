"""File modes as Ansible takes them: octal (`0644`, `"644"`, YAML's octal int) or symbolic
(`u=rw,g=r,o=`, `go-w`, `+x`), the symbolic ones applied to the path's current mode as
ansible-core's module_utils/basic.py applies them (`_symbolic_mode_to_octal`)."""
from __future__ import annotations

import re
import stat

PERM_BITS = 0o7777
EXEC_BITS = stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH
NEW_FILE, NEW_DIRECTORY = 0o644, 0o755  # what a new file or directory gets (umask 022), before a symbolic mode
UMASK = 0o022  # the host's, assumed: used only by a symbolic mode naming no user (`+x`)
_OPERATOR = re.compile(r"[=+-]")
_USERS = re.compile(r"^[ugoa]*$")
_PERMS = re.compile(r"^[rwxXstugo]*$")


def parse_mode(value: str | int | None) -> int | str | None:
    """An octal mode as its number; a symbolic one checked and kept as written (applied per path)."""
    if value is None:
        return None
    if isinstance(value, bool) or (isinstance(value, int) and not 0 <= value <= 0o7777):
        raise ValueError(f"mode must be octal like '0644' or symbolic like 'u=rw,g=r,o=', not {value!r}")
    if isinstance(value, int):
        # YAML reads `mode: 644` as the decimal 644 (0o1204: sticky, -w-, r--), Ansible's old trap
        if 0o777 < value < 1000 and set(str(value)) <= set("01234567"):
            raise ValueError(f"mode {value} is a decimal number (octal {value:04o}); write '0{value}' or 0{value}")
        return value
    text = str(value).strip()
    if re.fullmatch(r"0?[0-7]{3,4}", text):
        return int(text, 8)
    symbolic(text, 0o644, False)  # raises on a bad one
    return text


def resolved(mode: int | str | None, current: int | None, directory: bool) -> int | None:
    """The mode a path must have: a symbolic one applied to its current mode (a new path's default)."""
    if mode is None or isinstance(mode, int):
        return mode
    base = current if current is not None else (NEW_DIRECTORY if directory else NEW_FILE)
    return symbolic(mode, base, directory)


def symbolic(text: str, current: int, directory: bool) -> int:
    new = current & PERM_BITS
    for clause in text.split(","):
        operators = _OPERATOR.findall(clause)
        parts = _OPERATOR.split(clause)
        users = parts.pop(0)
        if not operators or not _USERS.match(users):
            raise ValueError(f"mode must be octal like '0644' or symbolic like 'u=rw,g=r,o=', not {text!r}")
        use_umask = users == ""
        if users in ("", "a"):
            users = "ugo"
        for operator, perms in zip(operators, parts):
            if not _PERMS.match(perms):
                raise ValueError(f"mode must be octal like '0644' or symbolic like 'u=rw,g=r,o=', not {text!r}")
            for user in users:
                bits = 0
                for perm in perms:
                    bits |= _perm_bits(user, perm, new, directory, use_umask)
                new = _apply(user, operator, bits, new)
    return new


def _perm_bits(user: str, perm: str, mode: int, directory: bool, use_umask: bool) -> int:
    keep = (UMASK ^ 0o777) if use_umask else 0o777
    shift = {"u": 6, "g": 3, "o": 0}[user]
    if perm in "rwx":
        return ({"r": 4, "w": 2, "x": 1}[perm] << shift) & keep
    if perm == "X":
        return (1 << shift) if directory or mode & EXEC_BITS else 0
    if perm == "s":
        return {"u": stat.S_ISUID, "g": stat.S_ISGID, "o": 0}[user]
    if perm == "t":
        return stat.S_ISVTX if user == "o" else 0
    source = (mode >> {"u": 6, "g": 3, "o": 0}[perm]) & 0o7  # u, g, o: copy that class's bits
    return source << shift


def _apply(user: str, operator: str, bits: int, mode: int) -> int:
    if operator == "=":
        mask = {"u": stat.S_IRWXU | stat.S_ISUID, "g": stat.S_IRWXG | stat.S_ISGID,
                "o": stat.S_IRWXO | stat.S_ISVTX}[user]
        return (mode & (mask ^ PERM_BITS)) | bits
    if operator == "+":
        return mode | bits
    return mode - (mode & bits)
