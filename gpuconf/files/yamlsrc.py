"""YAML loading that remembers where every key and item came from.

Mappings load as `YDict` and sequences as `YList`. Each keeps the 1-based
(line, column) of itself and of each key or item, so that a validation error
deep inside a playbook can be reported as file:line:column.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, SupportsIndex

import yaml

from gpuconf.errors import Location, PlaybookError
from gpuconf.files import vault
from gpuconf.files.bounded import read_source

try:  # the C loader composes nodes much faster; construction stays in Python
    from yaml import CSafeLoader as _BaseLoader
except ImportError:  # pragma: no cover - libyaml missing
    from yaml import SafeLoader as _BaseLoader  # type: ignore[assignment]


class Secret(str):
    """A string tagged `!secret`: redacted from every output. A slice of one is secret too
    (`{{ token[2:] }}`: Jinja slices with Python's own operator, gpuconf/templating/secret_marks.py)."""

    def __getitem__(self, key: SupportsIndex | slice) -> Secret:
        return Secret(str.__getitem__(self, key))


class Unsafe(str):
    """A string tagged `!unsafe` (Ansible's): text, never rendered as a template (a Prometheus
    rule's `{{ $labels.job }}`)."""


class YDict(dict[Any, Any]):  # YAML's keys: mostly strings, any scalar at all
    """A dict that knows its own position and each key's position."""

    file: str = "<string>"
    pos: tuple[int, int] = (0, 0)

    def __init__(self, items: Mapping[Any, Any] | None = None) -> None:
        super().__init__(items or {})
        self.key_pos: dict[Any, tuple[int, int]] = {}

    def location(self, key: Any = None) -> Location:
        line, col = self.key_pos.get(key, self.pos) if key is not None else self.pos
        return Location(self.file, line, col)


class YList(list[Any]):
    """A list that knows its own position and each item's position."""

    file: str = "<string>"
    pos: tuple[int, int] = (0, 0)

    def __init__(self, items: Iterable[Any] = ()) -> None:
        super().__init__(items)
        self.item_pos: list[tuple[int, int]] = []

    def location(self, index: int | None = None) -> Location:
        if index is not None and 0 <= index < len(self.item_pos):
            line, col = self.item_pos[index]
        else:
            line, col = self.pos
        return Location(self.file, line, col)


def _mark(node: yaml.Node) -> tuple[int, int]:
    return node.start_mark.line + 1, node.start_mark.column + 1


class _Loader(_BaseLoader):
    filename = "<string>"


_MERGED = (0, 0)  # position marker for keys that came from a `<<:` merge


def _construct_mapping(loader: _Loader, node: yaml.MappingNode) -> YDict:
    own = sum(1 for key_node, _ in node.value if key_node.tag != "tag:yaml.org,2002:merge")
    loader.flatten_mapping(node)
    merged = len(node.value) - own  # entries pulled in by `<<:` come first and may be overridden
    result = YDict()
    result.file, result.pos = loader.filename, _mark(node)
    for index, (key_node, value_node) in enumerate(node.value):
        key = loader.construct_object(key_node, deep=True)
        try:
            hash(key)
        except TypeError:
            raise PlaybookError("a mapping key must be a plain value",
                                Location(loader.filename, *_mark(key_node))) from None
        if key in result and index >= merged and result.key_pos[key] != _MERGED:
            first = result.key_pos[key]
            raise PlaybookError(
                f"duplicate key '{key}' (first defined at line {first[0]})",
                Location(loader.filename, *_mark(key_node)),
            )
        result[key] = loader.construct_object(value_node, deep=True)
        result.key_pos[key] = _mark(key_node) if index >= merged else _MERGED
    return result


def _construct_sequence(loader: _Loader, node: yaml.SequenceNode) -> YList:
    result = YList(loader.construct_object(child, deep=True) for child in node.value)
    result.file, result.pos = loader.filename, _mark(node)
    result.item_pos = [_mark(child) for child in node.value]
    return result


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
_Loader.add_constructor("!secret", lambda loader, node: Secret(loader.construct_scalar(node)))  # type: ignore[arg-type]
_Loader.add_constructor("!unsafe", lambda loader, node: Unsafe(loader.construct_scalar(node)))  # type: ignore[arg-type]


def _construct_vault(loader: _Loader, node: yaml.ScalarNode) -> Secret:
    """`!vault |` (a value encrypted by `ansible-vault encrypt_string`): decrypted, and secret."""
    try:
        return Secret(vault.KEYRING.open(str(loader.construct_scalar(node))))
    except vault.VaultError as exc:
        line, column = _mark(node)
        raise PlaybookError(str(exc), Location(loader.filename, line, column)) from None


_Loader.add_constructor("!vault", _construct_vault)
_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG, _construct_sequence)


def load_text(text: str, filename: str = "<string>") -> Any:
    """Parse YAML text; syntax errors become PlaybookError with file:line:column."""
    loader = _Loader(text)
    loader.filename = filename
    try:
        return loader.get_single_data()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = Location(filename, mark.line + 1, mark.column + 1) if mark else Location(filename)
        problem = exc.problem or exc.context or "invalid YAML"
        raise PlaybookError(f"YAML syntax error: {problem}", where) from None
    except yaml.reader.ReaderError as exc:  # a character YAML does not allow: it has an offset, not a mark
        line, column = _position(text, exc.position)
        code = exc.character if isinstance(exc.character, int) else ord(exc.character)
        raise PlaybookError(f"YAML syntax error: character U+{code:04X} is not allowed in YAML ({exc.reason})",
                            Location(filename, line, column)) from None
    except yaml.YAMLError as exc:
        raise PlaybookError(f"YAML error: {exc}", Location(filename)) from None
    finally:
        loader.dispose()


def _position(text: str | bytes, offset: int) -> tuple[int, int]:
    """1-based line and column of a character (or byte) offset."""
    if isinstance(text, bytes):
        raw = text[:offset]
        return raw.count(b"\n") + 1, offset - (raw.rfind(b"\n") + 1) + 1
    before = text[:offset]
    return before.count("\n") + 1, offset - (before.rfind("\n") + 1) + 1


def load_file(path: str | Path) -> Any:
    """Load one YAML file; a missing, unreadable, special or oversized file is a PlaybookError."""
    path = Path(path)
    data = read_source(path)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line, column = _position(data, exc.start)
        raise PlaybookError(f"not UTF-8 text: byte 0x{data[exc.start]:02x} cannot be decoded; save the file "
                            "as UTF-8", Location(str(path), line, column)) from None
    if vault.is_vault(text):  # an encrypted variables file: every string in it is a secret
        try:
            text = vault.KEYRING.open(text)
        except vault.VaultError as exc:
            raise PlaybookError(f"{exc}", Location(str(path), 1, 1)) from None
        return _all_secret(load_text(text, str(path)))
    return load_text(text, str(path))


def _all_secret(value: Any) -> Any:
    """Every string of a decrypted vault, as `Secret` (in place: locations are kept)."""
    if isinstance(value, dict):
        for key in value:
            value[key] = _all_secret(value[key])
    elif isinstance(value, list):
        for index, item in enumerate(value):
            value[index] = _all_secret(item)
    elif isinstance(value, str) and not isinstance(value, Secret):
        return Secret(value)
    return value


def locate(root: Any, path: Sequence[int | str], fallback: Location | None = None) -> Location | None:
    """The location of the element at `path` (keys and indexes) under `root`.

    Walks as deep as the path exists and returns the deepest known position, so
    that an error about a missing or extra key points at its mapping or the key.
    """
    best = fallback
    node = root
    for part in path:
        if isinstance(node, YDict):
            if part in node:
                best = node.location(part)
                node = node[part]
                continue
            best = node.location()
            break
        if isinstance(node, YList) and isinstance(part, int) and 0 <= part < len(node):
            best = node.location(part)
            node = node[part]
            continue
        if isinstance(node, (YDict, YList)):
            best = node.location()
        break
    else:
        if isinstance(node, (YDict, YList)) and best is None:
            best = node.location()
    return best


def plain(value: Any) -> Any:
    """Deep-copy YDict/YList into plain dicts and lists (Secret strings stay Secret)."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value
