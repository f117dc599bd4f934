"""Small helpers shared by the fact parsers: the "could not parse" and "cut short"
results, value normalisation for NVIDIA/sysfs style strings, and PCI address canonicalisation.

Why one place: nvidia-smi alone spells "no value" six ways (``N/A``, ``[N/A]``,
``[Not Supported]``, ``Unknown Error``, ``ERR!``, ``Requested functionality has been
deprecated``), and the same GPU is ``00000000:19:00.0`` in ``nvidia-smi -q``,
``0000:19:00`` in an Xid line and ``0000:19:00.0`` in sysfs. Parsers normalise with
these helpers so that tasks can compare values across sources.
"""
from __future__ import annotations

import dataclasses
import functools
import importlib
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TypeVar, overload

Number = int | float


@dataclass(frozen=True)
class Unparseable:
    """The output was not in any format the parser knows.

    ``reason`` says what was expected; ``excerpt`` is the start of the text, so a
    report can show what the host actually printed.
    """

    reason: str
    excerpt: str = ""


def unparseable(reason: str, text: str) -> Unparseable:
    """Build an :class:`Unparseable` with a short excerpt of ``text``."""
    return Unparseable(reason=reason, excerpt=text.strip()[:200])


# "Incomplete": the output was cut short (a value cut mid-field, a section cut mid-way, an
# expected line missing), so what it says is not known. One notion for every parser: a
# result carries `incomplete`, the reason ("" when complete), and `incomplete(result)`
# reads it. Parsers of a single value return `Incomplete`; parsers of many values keep
# what they could read whole and set their `incomplete` field. Probes report `unknown`
# with the reason, never a value and never "ok".

@dataclass(frozen=True)
class Incomplete:
    """A single value that was cut short: ``incomplete`` says why, ``partial`` is what
    was printed (never to be read as the value)."""

    incomplete: str
    partial: str = ""


def incomplete(result: object) -> str:
    """Why a parser's result is incomplete, or "" when it is whole (results that predate
    the reason say ``complete=False``)."""
    reason = getattr(result, "incomplete", "")
    if isinstance(reason, str) and reason:
        return reason
    return "the output was cut short" if getattr(result, "complete", True) is False else ""


def cut_line(text: str) -> str:
    """Why ``text`` ends cut short: its last line has no newline after it ("" when the
    text is empty or ends with a newline). A program that finishes ends its output with a
    newline; a value on a line without one may be cut mid-field."""
    if not text or text.endswith("\n"):
        return ""
    last = text.rsplit("\n", 1)[-1]
    return f"the output ends mid-line ({last[-40:]!r}): cut short"


def whole_lines(text: str) -> tuple[str, str]:
    """``text`` without a last line that was cut short, and why it was ("" when whole)."""
    reason = cut_line(text)
    return (text[: text.rfind("\n") + 1], reason) if reason else (text, "")


class CutRows(tuple):  # type: ignore[type-arg]
    """The rows a parser read from output that was cut short: a tuple like any other, that also
    says why it is incomplete (``incomplete``), so a row list can never pass for the whole list."""

    incomplete: str

    def __new__(cls, rows: Iterable[object], reason: str) -> CutRows:
        made = super().__new__(cls, rows)
        made.incomplete = reason
        return made


class CutMapping(dict):  # type: ignore[type-arg]
    """The keys and values a parser read from output that was cut short; ``incomplete`` says why."""

    def __init__(self, values: Mapping[object, object], reason: str) -> None:
        super().__init__(values)
        self.incomplete = reason


def mark_incomplete(result: object, reason: str) -> object:
    """``result`` saying it is incomplete: an ``incomplete`` field set, ``complete`` False, a tuple
    or list as :class:`CutRows`, a dict as :class:`CutMapping`. Output that could not be parsed and
    was cut short is :class:`Incomplete`, not Unparseable. Every line parser's result can say it (the
    one rule, :func:`reads_whole_lines`): a cut is never silent."""
    if reason and isinstance(result, Unparseable):
        return Incomplete(reason, result.excerpt)
    if reason and isinstance(result, (tuple, list)) and not hasattr(result, "_fields"):
        return CutRows(result, reason)
    if reason and isinstance(result, dict):
        return CutMapping(result, reason)
    if not reason or not dataclasses.is_dataclass(result) or isinstance(result, type):
        return result
    names = {f.name for f in dataclasses.fields(result)}
    if "incomplete" in names and not getattr(result, "incomplete", ""):
        return dataclasses.replace(result, incomplete=reason)
    if "complete" in names:
        return dataclasses.replace(result, complete=False)
    return result


Parse = TypeVar("Parse", bound=Callable[..., object])


@overload
def reads_whole_lines(parse: Parse) -> Parse: ...


@overload
def reads_whole_lines(*, row: Callable[[str], bool] | None = None) -> Callable[[Parse], Parse]: ...


def reads_whole_lines(parse: Parse | None = None, *,
                      row: Callable[[str], bool] | None = None) -> Parse | Callable[[Parse], Parse]:
    """The one rule of every line parser: it never reads a last line cut short. A last line with
    no newline after it is cut; with ``row`` (what a whole last line of the format looks like), so is
    a last line that is not one, newline or not (``ii  libnvidia-cfg1:`` in ``dpkg -l``, an apt
    source cut after its host). The line is left out and the result says it is incomplete
    (:func:`mark_incomplete`). Use as ``@reads_whole_lines`` or ``@reads_whole_lines(row=...)``."""
    def decorate(parse: Parse) -> Parse:
        @functools.wraps(parse)
        def wrapper(text: str, *args: object, **kwargs: object) -> object:
            whole, reason = whole_lines(text)
            if row is not None and not reason:
                lines = whole.rstrip("\n").rsplit("\n", 1)
                last = lines[-1]
                if last.strip() and not row(last):
                    whole = lines[0] + "\n" if len(lines) == 2 else ""
                    reason = f"the last line ({last.strip()[-40:]!r}) is not a whole row: cut short"
            return mark_incomplete(parse(whole, *args, **kwargs), reason)
        wrapper.reads_whole_lines = True  # type: ignore[attr-defined]  # tests/unit/facts/test_cut_rows.py finds them
        return wrapper  # type: ignore[return-value]
    return decorate(parse) if parse is not None else decorate


_UNAVAILABLE = {
    "",
    "n/a",
    "na",
    "-",
    "not supported",
    "unknown error",
    "err!",
    "requested functionality has been deprecated",
    "insufficient permissions",
    "gpu is lost",
    "not found",
    "unknown",
    "none available",
    "<none>",
}

_ERROR_VALUES = {"unknown error", "err!", "gpu is lost", "insufficient permissions"}


def is_unavailable(value: str | None) -> bool:
    """True for every spelling of "no value" (``N/A``, ``[N/A]``, ``[Not Supported]`` ...)."""
    if value is None:
        return True
    return value.strip().strip("[]").strip().lower() in _UNAVAILABLE


def is_error_value(value: str | None) -> bool:
    """True when the value is an error report (``Unknown Error``, ``ERR!``), not just absent."""
    if value is None:
        return False
    return value.strip().strip("[]").strip().lower() in _ERROR_VALUES


def text_value(value: str | None) -> str | None:
    """The stripped value, or None when it is one of the "no value" spellings."""
    if is_unavailable(value):
        return None
    return value.strip()  # type: ignore[union-attr]


_NUMBER_WITH_UNIT = re.compile(r"^([-+]?\d+(?:\.\d+)?)\s*(%|[A-Za-z/()]+(?:\s?[A-Za-z/()]+)*)?$")


def number_value(value: str | None) -> Number | None:
    """The leading number of ``"81559 MiB"``, ``"67.74 W"``, ``"16x"``, ``"29 C"``.

    Integers stay ``int``; anything with a decimal point becomes ``float``. Returns None
    for "no value" spellings and for text that is not a number with an optional unit.
    """
    if is_unavailable(value):
        return None
    match = _NUMBER_WITH_UNIT.match(value.strip())  # type: ignore[union-attr]
    if not match:
        return None
    digits = match.group(1)
    return float(digits) if "." in digits else int(digits)


def int_value(value: str | None) -> int | None:
    """Like :func:`number_value` but only for whole numbers; hex (``0x1F``) is accepted."""
    if is_unavailable(value):
        return None
    text = value.strip()  # type: ignore[union-attr]
    if re.fullmatch(r"0[xX][0-9a-fA-F]+", text):
        return int(text, 16)
    number = number_value(text)
    return number if isinstance(number, int) else None


def float_value(value: str | None) -> float | None:
    """Like :func:`number_value` but always a float (or None)."""
    number = number_value(value)
    return None if number is None else float(number)


_DRIVER_VERSION = re.compile(r"\d{3}\.\d{1,3}(?:\.\d{1,3})?")


def is_driver_version(text: str | None) -> bool:
    """True for an NVIDIA GPU driver version (``535.104.05``, ``595.80``, ``384.98``): a
    3-digit branch. A Jetson L4T release (``36.4.3``, ``R35.4.1``) is not one."""
    return bool(text) and _DRIVER_VERSION.fullmatch(text.strip()) is not None  # type: ignore[union-attr]


_ENABLED = {"enabled", "on", "yes", "active", "true", "1"}
_DISABLED = {"disabled", "off", "no", "not active", "false", "0"}


def bool_value(value: str | None) -> bool | None:
    """``Enabled``/``On``/``Yes``/``Active`` -> True; the opposites -> False; else None."""
    if value is None:
        return None
    text = value.strip().strip("[]").strip().lower()
    if text in _ENABLED:
        return True
    if text in _DISABLED:
        return False
    return None


_PCI_ADDRESS = re.compile(
    r"^(?:PCI:)?(?:(?P<domain>[0-9a-fA-F]{1,8}):)?(?P<bus>[0-9a-fA-F]{1,2}):"
    r"(?P<device>[0-9a-fA-F]{1,2})(?:\.(?P<function>[0-7]))?$"
)


def canonical_pci_address(address: str | None) -> str | None:
    """``00000000:19:00.0`` / ``PCI:0000:19:00`` / ``19:00.0`` -> ``0000:19:00.0``.

    The sysfs spelling (4-digit domain, lower case, function defaulting to 0), so that a
    GPU from ``nvidia-smi -q``, an Xid line and ``/sys/bus/pci/devices`` compare equal.
    Returns None when the text is not a PCI address.
    """
    if address is None:
        return None
    match = _PCI_ADDRESS.match(address.strip())
    if not match:
        return None
    domain = int(match.group("domain") or "0", 16)
    return "{:04x}:{:02x}:{:02x}.{}".format(
        domain,
        int(match.group("bus"), 16),
        int(match.group("device"), 16),
        match.group("function") or "0",
    )


_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")


def strip_ansi(text: str) -> str:
    """Remove ANSI colour and cursor escape sequences (``nvidia-smi topo -m`` underlines)."""
    return _ANSI.sub("", text)


def normalise_quotes(text: str) -> str:
    """Turn curly apostrophes and quotes (copy/paste artefacts) into ASCII ones."""
    return (
        text.replace("\u2019", "'")
        .replace("\u2018", "'")
        .replace("\u201c", '"')
        .replace("\u201d", '"')
    )


@functools.lru_cache(maxsize=4096)  # the same few hundred labels on every GPU of every host
def snake_case(label: str) -> str:
    """``"HW Power Brake Slowdown"`` -> ``"hw_power_brake_slowdown"``."""
    return re.sub(r"[^0-9a-z]+", "_", label.strip().lower()).strip("_")


def lazy_exports(namespace: dict[str, object], where: dict[str, str]) -> Callable[[str], object]:
    """A module's `__getattr__` (PEP 562) for the names it re-exports from other modules:
    `where[name]` is the module that defines `name`, imported when the name is first used, so
    that a run imports the parsers it uses and not every parser the package has. Type checkers
    read the same names from the module's `if TYPE_CHECKING:` imports."""
    def __getattr__(name: str) -> object:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {namespace['__name__']!r} has no attribute {name!r}")
        value = namespace[name] = getattr(importlib.import_module(module), name)   # next time a plain attribute
        return value

    return __getattr__


def packaged_table(name: str) -> list[dict[str, str]]:
    """The rows of a CSV table shipped beside the parsers (the Xid and SXid catalogs, the recovery
    actions), read from the installed package."""
    import csv
    from importlib import resources

    text = resources.files("gpuconf.facts").joinpath(name).read_text(encoding="utf-8")
    return list(csv.DictReader(text.splitlines()))
