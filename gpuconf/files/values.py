"""The one name for a value read from YAML or JSON (a vars file, a JSON reply on the wire, a Redfish
payload, a report read back): nothing is known of its shape until it is checked. The YAML loader
(`yamlsrc`) hands back YDict and YList, dicts and lists that know their positions, which it covers.
Read-only (Sequence, Mapping): a dict of str or a list of dicts is one as it is, with no copy.
Standard library only: the gate (a Prolog) imports it."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypeAlias

JSONValue: TypeAlias = None | bool | int | float | str | Sequence["JSONValue"] | Mapping[str, "JSONValue"]


def items_of(value: JSONValue) -> Sequence[JSONValue]:
    """A value that should be a list, as one: empty where it is missing or is not a list."""
    return value if isinstance(value, list) else []
