"""A rendered value where a task's parameter is text: Ansible's `str` type takes it as its text."""
import pytest

from gpuconf.tasks.registry import build_params


@pytest.mark.parametrize("value, text", [(535, "535"), (1.5, "1.5"), (True, "True"),
                                         ({"a": 7, "k": "x"}, "{'a': 7, 'k': 'x'}"), ([1, "b"], "[1, 'b']")])
def test_a_value_given_for_text_is_its_python_text_as_in_ansible(value, text):
    # module_utils/common/validation.py check_type_str: to_native(value) when conversion is allowed
    assert build_params("line", {"path": "/etc/x", "line": value}).line == text


def test_a_list_of_text_keeps_its_items_as_text_not_the_list():
    """`argv: [echo, "{{ n }}"]` with n a number (cmd is `str | list[str]`): the number is its text,
    the list stays a list (make ansible-fuzz seed 6001 program 110, fuzz:class6-command-argv-number)."""
    assert build_params("command", {"cmd": ["echo", "a-b", 7]}).cmd == ["echo", "a-b", "7"]
