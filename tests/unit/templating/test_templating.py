"""The one Jinja2 environment: StrictUndefined, native single expressions, lazy vars."""
import pytest

from gpuconf.errors import TemplateError
from gpuconf.templating.conditions import evaluate_when
from gpuconf.templating.render import Vars, Verbatim, render


@pytest.mark.parametrize("text, expected", [
    ("{{ 8 }}", 8),
    ("{{ '8' }}", "8"),
    ("{{ n }}", 3),
    (" {{ n * 2 }} ", " 6 "),          # text around it, a space included: a string, as in ansible-core 2.19
    (" {{ [1, n] }}", " [1, 3]"),
    ("[{{ none }}] {{ none }}", "[] "),  # None prints nothing
    ("{{ none }}", None),
    ("{{ [1, n] }}", [1, 3]),
    ("{{ flag }}", False),
    ("{{ n }}{{ n }}", "33"),           # two expressions: a string
    ("n={{ n }}", "n=3"),
    ("{{ name | upper }}-{{ n }}", "GPU-3"),
    ("no template here", "no template here"),
    ("{{ {'x': {'k': n}} }}", {"x": {"k": 3}}),    # one expression, though a `}}` is inside (fuzz:class5-lone-expression-braces)
    ('{{ "}}" }}', "}}"),
])
def test_native_type_only_for_a_lone_expression(text, expected):
    result = render(text, Vars({"n": 3, "flag": False, "name": "gpu"}))
    assert result == expected and type(result) is type(expected)


def test_render_walks_nested_structures():
    assert render({"a": ["{{ x }}", {"b": "{{ x + 1 }}"}], "c": 5}, Vars({"x": 1})) == {"a": [1, {"b": 2}], "c": 5}


@pytest.mark.parametrize("text", ["{{ missing }}", "value: {{ missing }}", "{% if missing %}x{% endif %}"])
def test_undefined_variable_is_named(text):
    with pytest.raises(TemplateError, match="'missing' is undefined"):
        render(text, Vars({"other": 1}))


def test_unknown_filter_is_a_template_error_naming_it():
    with pytest.raises(TemplateError, match="default_typo"):
        render("{{ x | default_typo }}", Vars({"x": 1}))


def test_undefined_deep_inside_another_variable_names_the_deep_one():
    variables = Vars({"a": "{{ b }}", "b": "x{{ c }}"})
    with pytest.raises(TemplateError, match="'c' is undefined"):
        render("{{ a }}", variables)


def test_a_variable_made_of_an_undefined_one_is_undefined_where_it_is_used():
    # ansible-core 2.19 (its template target, lazy_eval.yml): defining it is no error, using it is
    variables = Vars({"deep": "{{ nested }}", "lazy": True})
    assert evaluate_when("lazy or deep", variables) is True
    assert evaluate_when("deep is undefined", variables) is True
    assert render("{{ deep | default('defaulted') }}", variables) == "defaulted"
    with pytest.raises(TemplateError, match="'nested' is undefined"):
        render("{{ deep }}", variables)


def test_variables_refer_to_variables_lazily_and_keep_types():
    variables = Vars({"driver": "{{ major }}.{{ minor }}", "major": "{{ 550 }}", "minor": 54, "n": "{{ major }}"},
                     {"major": 1})
    assert render("{{ driver }}", variables) == "550.54"
    assert render("{{ n }}", variables) == 550  # still an int through two references


def test_higher_layer_wins_and_can_use_lower_names():
    variables = Vars({"port": "{{ base + 1 }}"}, {"port": 1, "base": 8000})
    assert render("{{ port }}", variables) == 8001


@pytest.mark.parametrize("layer, cycle", [
    ({"a": "{{ a }}"}, "a -> a"),
    ({"a": "{{ b }}", "b": "x{{ c }}", "c": "{{ a }}"}, "a -> b -> c -> a"),
])
def test_reference_cycle_is_reported(layer, cycle):
    with pytest.raises(TemplateError, match="refers to itself") as err:
        render("{{ a }}", Vars(layer))
    assert cycle in str(err.value)


@pytest.mark.parametrize("text, expected", [
    ("{{ 'x' if b else loop }}", "x"),                    # a broken variable in a branch not taken
    ("{{ hole is defined }} {{ hole | default('d') }}", "False d"),   # its template names an undefined one
    ("{{ 'k' | default(loop) }}", "k"),
    ("{{ [loop] | length }}", 1),
])
def test_a_variable_is_templated_where_it_is_used(text, expected):
    """As ansible-core 2.19's lazy templating (fuzz:class5-lazy-variables)."""
    assert render(text, Vars({"b": True, "loop": "{{ loop + 1 }}", "hole": "{{ nope }}"})) == expected


@pytest.mark.parametrize("text", ["{{ loop }}", "{{ loop is defined }}", "{{ loop | default('d') }}",
                                  "{{ loop | string | default('d') }}", "{{ nope | default(loop) }}"])
def test_a_broken_variable_fails_where_it_is_used(text):
    with pytest.raises(TemplateError, match="refers to itself: loop -> loop$"):
        render(text, Vars({"loop": "{{ loop + 1 }}"}))


def test_syntax_error_is_a_template_error():
    with pytest.raises(TemplateError, match="syntax"):
        render("{{ x + }}", Vars({"x": 1}))


@pytest.mark.parametrize("condition, expected", [
    ("n > 2", True),
    ("n > 5", False),
    ("{{ n > 2 }}", True),
    (["n > 2", "name == 'gpu'"], True),
    (["n > 2", "name == 'cpu'"], False),
    ([True, "n == 3"], True),
    ([False], False),
    ("missing is defined", False),
    ("missing is not defined", True),
    ("word | bool", False),          # a variable holding the string 'no' is false through `bool`
    ("facts.gpu_count == 8", True),
    ("'550.54.15' is version('550.40', '>=')", True),
])
def test_when(condition, expected):
    variables = Vars({"n": 3, "name": "gpu", "word": "no", "facts": {"gpu_count": 8}})
    assert evaluate_when(condition, variables) is expected


@pytest.mark.parametrize("condition", ["word", "n", "[1]", "name | length", "none"])
def test_a_condition_that_is_not_a_boolean_is_an_error_as_in_ansible_core_2_19(condition):
    variables = Vars({"n": 3, "name": "gpu", "word": "no"})
    with pytest.raises(TemplateError, match="Conditionals must have a boolean result"):
        evaluate_when(condition, variables)


@pytest.mark.parametrize("value, expected", [("yes", True), ("Y", False), ("y", False), ("on", True), ("1", True),
                                             (1, True), (1.0, True), ("true ", False), ("off", False), (None, False)])
def test_bool_is_ansible_core_2_19s(value, expected):
    assert render("{{ v | bool }}", Vars({"v": value})) is expected


def test_when_with_an_undefined_variable_is_an_error_not_false():
    with pytest.raises(TemplateError, match="'missing' is undefined"):
        evaluate_when(["true", "missing > 1"], Vars({}))


def test_verbatim_layers_are_data_not_templates():
    variables = Vars(Verbatim({"out": {"stdout": "{{ secret }}"}, "motd": "{{ x }}"}), {"x": 1, "y": "{{ x }}"})
    assert render("{{ out.stdout }}", variables) == "{{ secret }}"
    assert render("{{ motd }}-{{ y }}", variables) == "{{ x }}-1"


def test_a_filter_given_an_undefined_value_says_it_is_undefined():
    with pytest.raises(TemplateError, match="'myundef' is undefined"):
        render("{{ myundef | dict2items }}", Vars({}))


@pytest.mark.parametrize("text", ["{{ nope | indent(2) | default('x') }}", "{{ nope | center(9) | default('x') }}",
                                  "{{ nope | join(',') | default('x') }}", "{{ [1, 2] | join(nope) | default('x') }}",
                                  "{{ nope | replace('a', 'b') | default('x') }}"])
def test_an_undefined_value_passes_through_the_bounded_filters_too(text):
    # their size checks (templating/bounds.py) ran first and failed on it, before default() could take it
    assert render(text, Vars({})) == "x"


@pytest.mark.parametrize("text", ["{{ d2 is sequence }}", "{{ d2 is none }}", "{{ d2 is string | to_yaml }}",
                                  "{{ [1] is contains(d2) }}", "{{ d2.x is mapping }}"])
def test_a_test_given_an_undefined_value_says_it_is_undefined(text):
    # ansible-core 2.19 gives an undefined marker back from every test but defined/undefined
    # (plugins/test/core.py: only those accept_args_markers); Jinja's own `sequence` says False
    with pytest.raises(TemplateError, match="'d2' is undefined"):
        render(text, Vars({}))


def test_defined_and_undefined_take_an_undefined_value():
    assert render("{{ d2 is defined }}-{{ d2 is undefined }}-{{ d2.x is defined }}", Vars({})) == "False-True-False"


def test_a_missing_key_is_named_as_ansible_core_names_it():
    with pytest.raises(TemplateError, match="object of type 'dict' has no attribute 'rc'"):
        render("{{ r.rc }}", Vars({"r": {"changed": False}}))
    assert render("{{ r.rc | default(-1) }} {{ r.rc is defined }}", Vars({"r": {}})) == "-1 False"


@pytest.mark.parametrize("text", ["{{ lookup('list', nope, wantlist=True) }}-x", "{{ query('items', [1], nope) }}-x",
                                  "{{ lookup('vars', 'x', default=nope) }}"])
def test_a_lookup_given_an_undefined_term_says_it_is_undefined(text):
    # ansible-core 2.19's _invoke_lookup: a lookup that does not accept markers gives the first back
    with pytest.raises(TemplateError, match="'nope' is undefined"):
        render(text, Vars({"x": 1}))


def test_a_call_given_an_undefined_value_gives_it_back_uncalled():
    # ansible-core 2.19's AnsibleEnvironment.call: a marker argument is the call's result
    assert render("{{ '{0}-{1}'.format(nope | title, 2) | default('empty', true) }}", Vars({})) == "empty"
    assert render("{{ dict(a=nope) | default({}) }}", Vars({})) == {}
    with pytest.raises(TemplateError, match="'nope' is undefined"):
        render("{{ '{0}'.format(nope) }}", Vars({}))
