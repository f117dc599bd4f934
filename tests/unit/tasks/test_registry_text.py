"""A rendered value where a task's parameter is text: Ansible's `str` type takes it as its text."""
import pytest

from gpuconf.tasks.registry import build_params


@pytest.mark.parametrize("value, text", [(535, "535"), (1.5, "1.5"), (True, "True"),
                                         ({"a": 7, "k": "x"}, "{'a': 7, 'k': 'x'}"), ([1, "b"], "[1, 'b']")])
def test_a_value_given_for_text_is_its_python_text_as_in_ansible(value, text):
    # module_utils/common/validation.py check_type_str: to_native(value) when conversion is allowed
    assert build_params("line", {"path": "/etc/x", "line": value}).line == text


def test_a_number_in_an_argv_is_its_text_and_the_argv_stays_a_list():
    # command argv [echo, w, "{{ n1 }}"] with n1 an int: the item is "42", never the list as one line
    assert build_params("command", {"cmd": ["echo", "w", 42]}).cmd == ["echo", "w", "42"]
