"""lookup('template') and lookup('first_found'), as ansible-core's plugins: found beside the
playbook (templates/ and files/ folders) and in the task's role first."""
from pathlib import Path

import pytest

from gpuconf.errors import TemplateError
from gpuconf.templating.render import Vars, render


def test_the_template_lookup_renders_a_file_with_the_tasks_variables(tmp_path: Path):
    (tmp_path / "templates").mkdir()
    (tmp_path / "templates" / "t.j2").write_text("{% for x in xs %}{{ x }}-{% include 'part.j2' %};{% endfor %}")
    (tmp_path / "templates" / "part.j2").write_text("{{ extra | default('none') }}\n")
    variables = Vars({"xs": ["a", "b"], "playbook_dir": str(tmp_path)})
    assert render("{{ lookup('template', 't.j2') }}", variables) == "a-none;b-none;"
    assert render("{{ lookup('template', 't.j2', template_vars={'extra': 1}) }}", variables) == "a-1;b-1;"


def test_a_roles_template_comes_before_the_playbooks(tmp_path: Path):
    for folder in (tmp_path / "templates", tmp_path / "roles" / "r" / "templates"):
        folder.mkdir(parents=True)
        (folder / "t.j2").write_text(f"{folder.parent.name}\n")
    variables = Vars({"playbook_dir": str(tmp_path), "role_path": str(tmp_path / "roles" / "r")})
    assert render("{{ lookup('template', 't.j2') }}", variables) == "r\n"


def test_first_found_gives_the_path_of_the_first_file_that_exists(tmp_path: Path):
    (tmp_path / "files").mkdir()
    (tmp_path / "files" / "b.yml").write_text("")
    (tmp_path / "roles" / "r" / "tasks").mkdir(parents=True)
    (tmp_path / "roles" / "r" / "tasks" / "h.yml").write_text("")
    variables = Vars({"playbook_dir": str(tmp_path)})
    assert render("{{ lookup('first_found', ['a.yml', 'b.yml']) }}", variables) == str(tmp_path / "files" / "b.yml")
    assert render("{{ lookup('first_found', 'h.yml') }}",
                  Vars({"playbook_dir": str(tmp_path), "role_path": str(tmp_path / "roles" / "r")})) \
        == str(tmp_path / "roles" / "r" / "tasks" / "h.yml")
    assert render("{{ query('first_found', 'nope.yml', skip=True) }}", variables) == []
    with pytest.raises(TemplateError, match="No file was found when using first_found"):
        render("{{ lookup('first_found', 'nope.yml') }}", variables)


def test_the_config_lookup_answers_for_the_settings_gpuconf_fixes():
    assert render("{{ lookup('config', 'DEFAULT_PRIVATE_ROLE_VARS') }}", Vars({})) is False
    assert render("{{ lookup('config', 'NOPE', default=3) }}", Vars({})) == 3
    with pytest.raises(TemplateError, match="gpuconf has no setting 'NOPE'"):
        render("{{ lookup('config', 'NOPE') }}", Vars({}))
