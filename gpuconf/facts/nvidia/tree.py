"""A generic key/value tree for ``nvidia-smi -q`` text and ``nvidia-smi -q -x`` XML.

Both formats are trees of labelled values; only the spelling differs (``PCIe Generation``
vs ``pcie_gen``). Reading both into one :class:`Node` shape lets one extractor
(``query.py``) serve both, with a path per spelling. Keys are compared in snake_case so
``Gpu``/``GPU`` and trailing spaces ("GPU Memory Power Readings ") do not matter.

Internal to the nvidia parsers; not part of the public fact API.
"""
from __future__ import annotations

import re
import xml.etree.ElementTree as ElementTree
from collections.abc import Iterator
from dataclasses import dataclass, field

from gpuconf.facts.common import snake_case
from gpuconf.files.values import JSONValue


@dataclass
class Node:
    """A label, an optional value, and child nodes (repeated labels allowed)."""

    key: str
    value: str | None = None
    children: list[Node] = field(default_factory=list)
    label: str = ""

    def child(self, key: str) -> Node | None:
        """The first child whose snake_case key is ``key``."""
        return next((c for c in self.children if c.key == key), None)

    def all(self, key: str) -> list[Node]:
        """Every child whose snake_case key is ``key`` (MIG devices, processes)."""
        return [c for c in self.children if c.key == key]

    def find(self, path: str) -> Node | None:
        """Follow a ``/``-separated snake_case path; None if any step is missing."""
        node: Node | None = self
        for step in path.split("/"):
            if node is None:
                return None
            node = node.child(step)
        return node

    def get(self, *paths: str) -> str | None:
        """The value at the first of ``paths`` that exists (text spelling, XML spelling)."""
        for path in paths:
            node = self.find(path)
            if node is not None:
                return node.value
        return None

    def walk(self, prefix: str = "") -> Iterator[tuple[str, Node]]:
        """Every descendant with its human-readable path (labels joined by ``/``)."""
        for child in self.children:
            path = f"{prefix}/{child.label or child.key}" if prefix else (child.label or child.key)
            yield path, child
            yield from child.walk(path)

    def to_dict(self) -> dict[str, JSONValue]:
        """Nested plain dict of the subtree (repeated keys become lists), for ``raw``."""
        result: dict[str, JSONValue] = {}
        for child in self.children:
            item: JSONValue = child.value
            if child.children:
                below = child.to_dict()
                item = {"value": child.value, **below} if child.value is not None else below
            if child.key in result:
                existing = result[child.key]
                result[child.key] = (existing if isinstance(existing, list) else [existing]) + [item]
            else:
                result[child.key] = item
        return result


_KEY_VALUE = re.compile(r"^(?P<key>.*?\S)\s+:(?:\s?(?P<value>.*))?$")
_GPU_HEADER = re.compile(r"^GPU ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s*$")


def text_tree(text: str) -> Node:
    """Read ``nvidia-smi -q`` text into a tree by indentation.

    ``GPU 00000000:19:00.0`` headers become ``gpu`` nodes whose value is the bus id.
    Blank lines and the ``====NVSMI LOG====`` banner are skipped, so leading blank lines
    and truncated tails are harmless: a cut-short dump is simply a smaller tree.
    """
    root = Node(key="", value=None)
    stack: list[tuple[int, Node]] = [(-1, root)]
    for raw_line in text.splitlines():
        line = raw_line.replace("\t", "    ").rstrip()
        stripped = line.strip()
        if not stripped or stripped.startswith("==="):
            continue
        indent = len(line) - len(line.lstrip(" "))
        header = _GPU_HEADER.match(stripped)
        match = None if header else _KEY_VALUE.match(stripped)
        if header:
            node = Node(key="gpu", value=header.group(1), label=stripped)
        elif match:
            label = match.group("key").strip()
            value = (match.group("value") or "").strip()
            node = Node(key=snake_case(label), value=value, label=label)
        else:
            node = Node(key=snake_case(stripped), value=None, label=stripped)
        while stack[-1][0] >= indent:
            stack.pop()
        stack[-1][1].children.append(node)
        stack.append((indent, node))
    return root


def xml_tree(text: str) -> Node | None:
    """Read ``nvidia-smi -q -x`` XML into the same tree; None if it is not valid XML.

    ``<gpu id="00000000:01:00.0">`` becomes a ``gpu`` node whose value is the id.
    """
    try:
        element = ElementTree.fromstring(text.strip())
    except ElementTree.ParseError:
        return None
    return _element_node(element)


def _element_node(element: ElementTree.Element) -> Node:
    children = [_element_node(child) for child in element]
    if element.tag == "gpu":
        value: str | None = element.get("id")
    elif children:
        value = None
    else:
        value = (element.text or "").strip()
    return Node(key=snake_case(element.tag), value=value, children=children, label=element.tag)
