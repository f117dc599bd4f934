"""validate_argument_spec's conversions and messages, as ansible-core 2.19.14's ArgumentSpecValidator
gives them (each expectation was read from ansible-core's validator on the same input)."""
import pytest

from gpuconf.tasks.argspec import validation_errors

ACCEPTED = [("str", 5), ("str", True), ("str", [1]), ("int", "5"), ("int", True), ("bool", "yes"), ("bool", "y"),
            ("bool", 0), ("bool", "True"), ("list", "a,b"), ("list", 5), ("dict", "k=v, x=1"), ("dict", {}),
            ("float", "5"), ("float", True), ("raw", {"a": 1}), ("path", 1.5), ("int", None), ("dict", None)]
REFUSED = [("int", "abc"), ("int", 1.5), ("int", [1]), ("int", "True"), ("bool", 2), ("bool", "none"), ("bool", ""),
           ("bool", []), ("list", {"a": 1}), ("dict", "abc"), ("dict", 5), ("dict", []), ("float", "yes")]


@pytest.mark.parametrize(("kind", "value"), ACCEPTED)
def test_a_value_ansible_converts_is_accepted(kind, value):
    assert validation_errors({"x": {"type": kind}}, {"x": value}) == []


@pytest.mark.parametrize(("kind", "value"), REFUSED)
def test_a_value_ansible_cannot_convert_is_refused(kind, value):
    [error] = validation_errors({"x": {"type": kind}}, {"x": value})
    assert error.startswith("argument 'x' is of type ") and f"we were unable to convert to {kind}" in error


def test_choices_after_conversion_required_and_unsupported():
    assert validation_errors({"x": {"type": "str", "choices": ["a", "5"]}}, {"x": 5}) == []
    assert validation_errors({"x": {"type": "str", "choices": ["a", "5"]}}, {"x": None}) == \
        ["value of x must be one of: a, 5, got: None"]
    assert validation_errors({"x": {"type": "str", "required": True}}, {"y": 1}, "role1") == \
        ["Unsupported parameters for (role1) module: y. Supported parameters include: x.",
         "missing required arguments: x"]
    assert validation_errors({"x": {"type": "str", "required": True}}, {"x": None}) == []


def test_a_dict_options_suboptions_are_checked_as_ansible_words_them():
    spec = {"top": {"type": "dict", "options": {"second": {"type": "dict", "options": {
        "third": {"type": "int", "required": True}}}}}}
    assert validation_errors(spec, {"top": {"second": {"nope": True}}}) == [
        "top.second.nope. Supported parameters include: third.",
        "missing required arguments: third found in top -> second"]
    assert validation_errors(spec, {"top": {"second": {"third": "3"}}}) == []
