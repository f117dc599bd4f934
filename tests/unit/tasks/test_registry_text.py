"""A rendered value where a task's parameter is text: Ansible's `str` type takes it as its text."""
import pytest

from gpuconf.tasks.registry import build_params, static_param_errors


@pytest.mark.parametrize("value, text", [(535, "535"), (1.5, "1.5"), (True, "True"),
                                         ({"a": 7, "k": "x"}, "{'a': 7, 'k': 'x'}"), ([1, "b"], "[1, 'b']")])
def test_a_value_given_for_text_is_its_python_text_as_in_ansible(value, text):
    # module_utils/common/validation.py check_type_str: to_native(value) when conversion is allowed
    assert build_params("line", {"path": "/etc/x", "line": value}).line == text


@pytest.mark.parametrize("type_name, params", [("file", {"path": "/etc/x", "content": 5}),
                                               ("file", {"path": "/etc/x", "content": False}),
                                               ("line", {"path": "/etc/x", "line": 7, "regexp": "{{ r }}"})])
def test_a_literal_value_given_for_text_is_no_error_at_load(type_name, params):
    # copy: {content: 5} is written '5' by Ansible: the load-time check takes what build_params takes
    assert static_param_errors(type_name, params) is None
    assert static_param_errors(type_name, {**params, "state": "nonsense"}) is not None


def test_a_number_in_an_argv_is_its_text_and_the_argv_stays_a_list():
    # command argv [echo, w, "{{ n1 }}"] with n1 an int: the item is "42", never the list as one line
    assert build_params("command", {"cmd": ["echo", "w", 42]}).cmd == ["echo", "w", "42"]


def test_a_line_with_line_breaks_is_appended_as_ansibles_lineinfile_appends_it_but_once():
    # modules/lineinfile.py compares each line of the file with the whole `line` and appends it
    # when none is equal: a line with a break is written (and again on Ansible's next run; gpuconf's
    # apply checks again after it converges, so it is present when its lines are there in a row)
    from gpuconf.tasks.files import edit_lines
    params = build_params("line", {"path": "/etc/x", "line": "a\nb"})
    assert edit_lines("x\n", params) == "x\na\nb\n"
    assert edit_lines("x\na\nb\n", params) == "x\na\nb\n"
    assert edit_lines("a\nx\nb\n", params) == "a\nx\nb\na\nb\n"
