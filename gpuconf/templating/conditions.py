"""Conditions (`when`, changed_when, failed_when, assert's that, until) as ansible-core 2.19
judges them: each an expression (or `{{ expression }}`) that must give a boolean."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpuconf.errors import TemplateError
from gpuconf.templating.render import evaluate, lone_expression


def evaluate_when(condition: Any, variables: Mapping[str, Any]) -> bool:
    """`when:` (and changed_when, failed_when, assert's that) is an expression or a list of
    expressions that must all hold. As in ansible-core 2.19, each must give a boolean: a string,
    a number or a list is an error, never judged truthy (`when: count > 0`, not `when: count`)."""
    conditions = condition if isinstance(condition, list) else [condition]
    for item in conditions:
        if not _holds(item, variables):
            return False
    return True


def _holds(item: Any, variables: Mapping[str, Any]) -> bool:
    if item is None or (isinstance(item, str) and not item.strip()):
        return False  # an empty condition is false (Ansible: deprecated)
    if isinstance(item, bool):
        return item
    if not isinstance(item, str):
        raise TemplateError(f"Conditional expressions must be strings: {item!r}")
    result = evaluate(_condition(item), variables)
    if isinstance(result, str) and lone_expression(item.strip()) is not None:
        # `when: "{{ name }}"` where name holds an expression: Ansible evaluates that expression
        result = evaluate(result, variables) if result.strip() else False
    if not isinstance(result, bool):
        raise TemplateError(f"Conditional result ({bool(result)}) was derived from value of type "
                            f"'{type(result).__name__}' at '{str(item).strip()}'. Conditionals must have a boolean "
                            "result (write a comparison, `| bool`, or `is truthy`)")
    return result


_CONDITIONS: dict[str, str] = {}


def _condition(item: Any) -> str:
    """The expression of a `when:` item (`{{ x }}` or `x`)."""
    text = str(item)
    if text not in _CONDITIONS:
        stripped = text.strip()
        single = lone_expression(stripped)
        _CONDITIONS[text] = single if single is not None else stripped
    return _CONDITIONS[text]
