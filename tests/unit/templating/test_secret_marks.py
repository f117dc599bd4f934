"""Secrets followed through templating: a value derived from a secret (a filter, a slice, a
concatenation, a format) is marked too, and every derived string is redacted wherever the
run prints, while the real value still reaches the host."""
from __future__ import annotations

import pytest

from gpuconf.engine.secrets import MASK, SecretSet, redact_text
from gpuconf.engine.session import HostSession
from gpuconf.files.yamlsrc import Secret
from gpuconf.templating.render import Vars, Verbatim, evaluate, render

TAGGED = "tagged-S3cret-value"
LISTED = "listed-S3cret-value"


def secret_vars(sink: SecretSet, *above: dict) -> Vars:
    base = {"secret_vars": ["listed"], "listed": LISTED, "tagged": Secret(TAGGED), "host": "node-01",
            "wrapped": "{{ tagged }}-suffix", "users": [{"name": "ops", "password": Secret("user-S3cret-pw")}]}
    return Vars(*above, base, secrets=sink)


# (template, what it renders to): each derived value is a new string, not the secret itself
DERIVED = [
    ("{{ tagged | upper }}", TAGGED.upper()),
    ("{{ listed | upper }}", LISTED.upper()),
    ("{{ tagged | lower }}", TAGGED.lower()),
    ("{{ listed[2:] }}", LISTED[2:]),
    ("{{ tagged[:-3] }}", TAGGED[:-3]),
    ("{{ tagged | reverse | join }}", TAGGED[::-1]),
    ("{{ listed | reverse | join('') }}", LISTED[::-1]),
    ("{{ tagged | replace('S3', 'Z9') }}", TAGGED.replace("S3", "Z9")),
    ("{{ 'x' ~ listed }}", "x" + LISTED),
    ("{{ listed ~ 'x' | upper }}", LISTED + "X"),
    ("{{ 'pre-' + tagged }}", "pre-" + TAGGED),
    ("{{ '%s!' | format(tagged) }}", TAGGED + "!"),
    ("{{ '<{}>'.format(listed | capitalize) }}", f"<{LISTED.capitalize()}>"),
    ("{{ tagged.upper().replace('-', '+') }}", TAGGED.upper().replace("-", "+")),
    ("{{ tagged.split('-') | reverse | join(':') }}", ":".join(reversed(TAGGED.split("-")))),
    ("{{ wrapped | upper }}", (TAGGED + "-suffix").upper()),
    ("{{ users[0].password | upper }}", "USER-S3CRET-PW"),
    ("{{ tagged | map('upper') | join }}", TAGGED.upper()),
    ("{{ tagged | quote }}", TAGGED),
]


@pytest.mark.parametrize("template, derived", DERIVED)
@pytest.mark.parametrize("form, shown", [("{}", "{}"), ("echo {} && true", "echo {} && true"),
                                         ("{{% if host %}}run {}{{% endif %}}", "run {}")])
def test_a_value_derived_from_a_secret_is_marked_and_redacted(template, derived, form, shown):
    sink = SecretSet()
    rendered = render(form.format(template), secret_vars(sink))
    assert rendered == shown.format(derived)  # the host gets the real value
    assert isinstance(rendered, Secret)
    line = redact_text(f"write request, 1 op(s): run {rendered}", sink)
    assert derived not in line and TAGGED not in line and LISTED not in line and MASK in line


def test_the_host_still_gets_the_real_value():
    sink = SecretSet()
    assert render("echo {{ tagged | upper }} {{ listed[2:] }} {{ 'x' ~ listed }}", secret_vars(sink)) == \
        f"echo {TAGGED.upper()} {LISTED[2:]} x{LISTED}"


def test_a_render_that_reads_no_secret_is_not_marked_and_adds_nothing():
    sink = SecretSet()
    variables = secret_vars(sink)
    for text in ("{{ host | upper }}", "echo {{ host }}", "{% if host %}{{ host[2:] }}{% endif %}", "{{ host }}"):
        result = render(text, variables)
        assert type(result) is str and result in ("NODE-01", "echo node-01", "de-01", "node-01")
    assert not sink


def test_only_the_derived_part_is_hidden_in_a_longer_command():
    sink = SecretSet()
    rendered = render("echo {{ host }} {{ tagged | upper }}", secret_vars(sink))
    assert redact_text(f"run: {rendered}", sink) == f"run: echo node-01 {MASK}"


def test_a_derived_value_echoed_back_by_the_host_is_redacted_too():
    """The host's stdout is a plain string: the run's set of marked strings still hides it."""
    sink = SecretSet()
    render("echo {{ tagged | reverse | join }} {{ listed[2:] }}", secret_vars(sink))
    stdout = f"{TAGGED[::-1]} {LISTED[2:]}\n"
    assert redact_text(stdout, sink) == f"{MASK} {MASK}\n"


def test_a_secret_used_only_in_a_condition_marks_nothing_it_did_not_print():
    sink = SecretSet()
    result = render("{{ 'on' if tagged else 'off' }}", secret_vars(sink))
    assert result == "on" and "on" not in sink


def test_a_variable_built_from_a_secret_is_secret():
    sink = SecretSet()
    variables = secret_vars(sink, {"token_line": "token={{ tagged }}"})
    assert isinstance(variables["token_line"], Secret)
    assert isinstance(render("{{ token_line | upper }}", variables), Secret)
    assert redact_text(f"x TOKEN={TAGGED.upper()}", sink) == f"x {MASK}"


def test_a_secret_in_a_loop_item_or_a_registered_result_is_followed():
    sink = SecretSet()
    variables = secret_vars(sink).child(Verbatim({"item": {"pw": Secret("item-S3cret-pw")}}))
    assert isinstance(render("{{ item.pw | upper }}", variables), Secret)
    assert "ITEM-S3CRET-PW" in sink


def test_a_literal_secret_in_params_is_kept_and_known():
    sink = SecretSet()
    rendered = render({"cmd": Secret("literal-S3cret-cmd"), "n": 1}, secret_vars(sink))
    assert rendered["cmd"] == "literal-S3cret-cmd" and "literal-S3cret-cmd" in sink


def test_an_expression_like_debug_var_is_marked():
    sink = SecretSet()
    assert isinstance(evaluate("tagged | upper", secret_vars(sink)), Secret)
    assert TAGGED.upper() in sink


def test_a_list_listed_in_secret_vars_has_every_string_marked():
    sink = SecretSet()
    variables = Vars({"secret_vars": ["keys"], "keys": ["key-one-S3cret", "key-two-S3cret"]}, secrets=sink)
    assert render("{{ keys | map('upper') | join(',') }}", variables) == "KEY-ONE-S3CRET,KEY-TWO-S3CRET"
    assert redact_text("KEY-ONE-S3CRET,KEY-TWO-S3CRET", sink) == MASK


class _Connection:
    round_trips = connects = 0

    def call(self, ops, readonly, timeout, become, read_lock, **kw):
        return [{"ok": True, "rc": 0, "out": ""} for _ in ops]


def test_the_vvv_request_line_redacts_before_it_shortens():
    """A derived value past the 60 characters -vvv shows per op must not show its first half."""
    sink = SecretSet()
    command = render("echo " + "a" * 40 + " {{ tagged | upper }} {{ listed[2:] }}", secret_vars(sink))
    lines: list[str] = []
    session = HostSession("node-01", _Connection(), trace=lines.append)  # type: ignore[arg-type]
    session.redact = sink.redact
    session.call([{"op": "run", "cmd": command}], readonly=False)
    assert lines and "TAGGED" not in lines[0] and "S3CRET" not in lines[0] and "S3cret" not in lines[0]
    assert MASK in lines[0]
    user = session.as_user("slurm")  # a become_user session shows its requests the same way
    user.call([{"op": "run", "cmd": command}], readonly=False)
    assert "S3CRET" not in lines[-1] and "as slurm" in lines[-1]


def test_a_secret_printed_a_character_at_a_time_by_a_loop_is_hidden_whole():
    sink = SecretSet()
    rendered = render("{% for c in tagged | reverse %}{{ c }}{% endfor %}", secret_vars(sink))
    assert rendered == TAGGED[::-1] and redact_text(rendered, sink) == MASK


def test_a_render_that_read_a_secret_keeps_the_template_bounds():
    from gpuconf.errors import TemplateError

    with pytest.raises(TemplateError, match="characters or items"):
        render("{{ tagged * 10**9 }}", secret_vars(SecretSet()))
