"""A play's `hosts:` as a template, rendered before its hosts are matched, as Ansible does
(`hosts: "{{ target | default('all') }}"` with `-e target=gpu`).

It renders once per play with the extra vars and the play's own vars only: it decides which
hosts there are, so no host's variables (nor facts) can take part in it.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpuconf.errors import PlaybookError, TemplateError
from gpuconf.playbook.models import Playbook
from gpuconf.templating.render import Vars, render


def render_play_hosts(playbook: Playbook, extra_vars: Mapping[str, Any]) -> None:
    """Replace each templated `hosts:` with the pattern it renders to; a clear error, at the
    play's file:line:column, when it cannot render or renders to nothing."""
    for play in playbook.plays:
        if "{{" not in play.hosts and "{%" not in play.hosts:
            continue
        try:
            value = render(play.hosts, Vars(extra_vars, play.vars))
        except TemplateError as exc:
            raise PlaybookError(f"hosts: '{play.hosts}': {exc.message} (a play's hosts render with -e and the "
                                "play's vars only: give it with -e NAME=VALUE, or a default())", play.location) \
                from None
        names = value if isinstance(value, list) else [value]
        pattern = ",".join(str(name).strip() for name in names if name is not None and str(name).strip())
        if not pattern:
            raise PlaybookError(f"Hosts list cannot be empty: hosts: '{play.hosts}' rendered to nothing "
                                "(name the play's hosts or groups)", play.location)
        play.hosts = pattern


def render_tags(playbook: Playbook, extra_vars: Mapping[str, Any]) -> None:
    """Templated tags (`tags: "{{ the_tags }}"`, on a task or a block), rendered with the extra vars
    and the play's vars, as Ansible shows and selects them (--list-tasks, --tags)."""
    for play in playbook.plays:
        for task in play.tasks + play.handlers:
            if not any("{{" in tag for tag in task.tags):
                continue
            rendered: set[str] = set()
            for tag in task.tags:
                try:
                    value = render(tag, Vars(extra_vars, play.vars)) if "{{" in tag else tag
                except TemplateError as exc:
                    raise PlaybookError(f"tags: '{tag}': {exc.message}", task.location) from None
                values = value if isinstance(value, list) else str(value).split(",")
                rendered |= {str(v).strip() for v in values if str(v).strip()}
            task.tags = rendered
