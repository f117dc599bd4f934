"""ansible-core's filters and tests that templates ported from Ansible use (templating/core_filters.py),
with the values ansible-core 2.19.14 gives (the generated programs compare the rest with it:
tests/ansible_fuzz)."""
import pytest

from gpuconf.errors import TemplateError
from gpuconf.templating.render import Vars, render

RECS = [{"name": "gpu0", "port": 5, "tags": ["x", "y"]}, {"name": "ib1", "port": 2, "tags": []}]


@pytest.mark.parametrize("template, expected", [
    ("{{ recs | json_query('[?port > `3`].name') }}", ["gpu0"]),
    ("{{ recs | json_query('[].tags[]') }}", ["x", "y"]),
    ("{{ 'managed' | comment }}", "#\n# managed\n#"),
    ("{{ 'a\nb' | comment('c') }}", "//\n// a\n// b\n//"),
    ("{{ 'x' | comment('xml') }}", "<!--\n -\n - x\n -\n-->"),
    ("{{ none | ternary(1, 2, 3) }}", 3),
    ("{{ 0 | ternary('yes', 'no') }}", "no"),
    ("{{ '/a/b/c.conf' | basename }} {{ '/a/b/c.conf' | dirname }}", "c.conf /a/b"),
    ("{{ 'c.tar.gz' | splitext }}", ["c.tar", ".gz"]),
    ("{{ recs | subelements('tags') | map('last') | list }}", ["x", "y"]),
    ("{{ ['a', 'b'] | map('extract', {'a': 1, 'b': 2}) | list }}", [1, 2]),
    ("{{ '1.2.3-beta' is version('1.2.3', '<', version_type='semver') }}", True),
    ("{{ '1.10' is version('1.9', '>') }}", True),
    ("{{ '2.0' is version('2.0a1', '>', version_type='pep440') }}", True),
    ("{{ 'gpu0' is match('gp') }} {{ 'gpu0' is match('pu') }} {{ 'gpu0' is search('pu') }}", "True False True"),
    ("{{ [1] is subset([1, 2]) }} {{ [1, 2] is superset([2]) }} {{ [] is truthy }}", "True True False"),
    ("{{ 'a.b' | regex_escape }}", "a\\.b"),
])
def test_a_filter_or_test_gives_what_ansible_core_gives(template, expected):
    assert render(template, Vars({"recs": RECS, "none": None})) == expected


@pytest.mark.parametrize("template, expected", [
    # ansible-core 2.19.14's answers: list(set(a) OP set(b)), Python's set order for numbers
    ("{{ [3, 2, 1, 10, -5] | union([7, 2]) }}", [1, 2, 3, 7, 10, -5]),
    ("{{ [3, 2, 2] | intersect([2, 3]) }}", [2, 3]),
    ("{{ [5, 1, 1, 3] | difference([3]) }}", [1, 5]),
    ("{{ [1, 2] | symmetric_difference([2, 9, 4]) }}", [9, 4, 1]),
    # a value that cannot be in a set: the first-seen order, as Ansible's fallback
    ("{{ [[2], 1, [2]] | union([1]) }}", [[2], 1]),
    # strings: Ansible's order changes from run to run (PYTHONHASHSEED); gpuconf keeps the first seen
    ("{{ ['b', 'a', 'b'] | union(['c']) }}", ["b", "a", "c"]),
])
def test_set_filters_in_ansible_cores_order(template, expected):
    assert render(template, Vars({})) == expected


def test_an_undefined_value_inside_an_argument_makes_ansibles_filter_undefined():
    """As ansible-core's plugins read their arguments' items (fuzz:class5-undefined-inside-filter-args)."""
    assert render("{{ d | combine({'k': nope}) | default('x') }} {{ [nope] | length }}", Vars({"d": {}})) == "x 1"
    with pytest.raises(TemplateError, match="'nope' is undefined"):
        render("{{ d | combine({'k': [nope]}) | dict2items | length }}", Vars({"d": {}}))


@pytest.mark.parametrize("template", ["{{ 1 | basename }}", "{{ none | dirname }}", "{{ [1] | splitext }}",
                                      "{{ ['/a', 1] | path_join }}", "{{ {'a': 1} | path_join }}"])
def test_a_path_filter_of_what_is_not_a_path_fails_as_ansible_cores_os_path(template):
    # ansible-core calls os.path's function on the value itself: 1 | basename is a TypeError, not '1'
    with pytest.raises(TemplateError, match="path_join expects|filter plugin '[a-z_]+' failed"):
        render(template, Vars({"none": None}))


def test_mandatory_names_the_variable_and_passes_a_defined_one():
    assert render("{{ x | mandatory }}", Vars({"x": 1})) == 1
    with pytest.raises(TemplateError, match="Mandatory variable 'missing' not defined"):
        render("{{ missing | mandatory }}", Vars({}))
    with pytest.raises(TemplateError, match="set it in group_vars"):
        render("{{ missing | mandatory('set it in group_vars') }}", Vars({}))


def test_omit_leaves_the_parameter_out():
    from gpuconf.templating.render import OMIT
    assert render({"a": "{{ x | default(omit) }}", "b": [1, "{{ omit }}"]}, Vars({"omit": OMIT})) == {"b": [1]}


def test_subset_of_unhashable_items_is_an_error_as_in_ansible():
    # ansible-core's issubset is set(a) <= set(b): a list of dicts cannot be one
    with pytest.raises(TemplateError, match="unhashable"):
        render("{{ [1] is subset([{'key': 'a'}]) }}", Vars({}))


def test_comment_of_a_number_is_an_error_as_in_ansible():
    # plugins/filter/core.py comment(): text.replace(...) of an int fails
    with pytest.raises(TemplateError, match="no attribute 'replace'"):
        render("{{ 7 | comment }}", Vars({}))
    assert render("{{ '7' | comment }}", Vars({})) == "#\n# 7\n#"
