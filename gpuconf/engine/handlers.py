"""Which handlers a host has been asked to run, as Ansible finds and runs them.

- A task notifies only when its result is changed (after `changed_when`); a templated name is
  rendered with the task's variables.
- A name finds one handler: by its name, or "ROLE : name", the last loaded of that name winning;
  a `listen` topic finds every handler that listens to it.
- A flush (meta: flush_handlers, after pre_tasks, after roles and tasks, at the end of the play)
  runs the notified handlers in the order they are defined; a handler that notifies another gets
  it run in the same flush, and each handler runs at most once per flush.
"""
from __future__ import annotations

from collections.abc import Callable

from gpuconf.errors import TaskError
from gpuconf.playbook.models import TaskDef

# renders a handler's templated name with the play's variables; None when it cannot be rendered
NameRenderer = Callable[[str], "str | None"]


class Notifications:
    """One host's notified handlers, in one play."""

    def __init__(self, handlers: list[TaskDef], render_name: NameRenderer,
                 warn: Callable[[str], None] | None = None):
        self.handlers = handlers
        self.render_name = render_name
        self.warn = warn
        self.pending: set[int] = set()   # handler_key of the handler entries notified, not yet run
        self.ran: set[int] = set()       # those run in the flush under way
        self._names: dict[int, tuple[str, ...]] = {}
        self.unusable: list[str] = []    # handler names that could not be rendered (Ansible warns)

    def names(self, handler: TaskDef) -> tuple[str, ...]:
        if handler.handler_key not in self._names:
            names: list[str] = []
            for name in handler.handler_names:
                rendered = self.render_name(name) if "{{" in name else name
                if rendered is None:
                    self.unusable.append(name)
                    if self.warn is not None:   # Ansible's words
                        self.warn(f"Handler '{name}' is unusable because it has no listen topics and the name "
                                  "could not be templated (host-specific variables are not supported in handler "
                                  "names)")
                else:
                    names.append(rendered)
            self._names[handler.handler_key] = tuple(names)
        return self._names[handler.handler_key]

    def find(self, name: str) -> set[int]:
        """The handler entries that `name` notifies (empty when none)."""
        found: set[int] = set()
        for handler in self.handlers:   # as Ansible's search, every handler's name is rendered (and warned of)
            self.names(handler)
        for handler in reversed(self.handlers):   # the last loaded of a name wins
            if name in self.names(handler):
                found.add(handler.handler_key)
                break
        seen: set[str] = set()
        for handler in self.handlers:
            if name in handler.keywords.listen and handler.handler_key not in found:
                if handler.name in seen:
                    continue
                seen.add(handler.name)
                found.add(handler.handler_key)
        return found

    def notify(self, names: list[str]) -> None:
        """Notify by these (rendered) names; a name that finds no handler is an error, as in Ansible."""
        for name in names:
            found = self.find(name)
            if not found:
                raise TaskError(f"The requested handler '{name}' was not found in either the main handlers list "
                                "nor in the listening handlers list")
            self.pending |= found

    def next_due(self) -> list[TaskDef]:
        """The tasks of the first notified handler (in definition order) not yet run in this flush,
        taken off the list; empty when none is left."""
        for handler in self.handlers:
            key = handler.handler_key
            if key in self.pending and key not in self.ran:
                self.pending.discard(key)
                self.ran.add(key)
                return [h for h in self.handlers if h.handler_key == key]
        return []

    def end_flush(self) -> None:
        """A flush is done: what its handlers notified again of themselves is dropped."""
        self.pending -= self.ran
        self.ran.clear()

    def add(self, handlers: list[TaskDef]) -> None:
        """Handlers of a role an include_role brought while the play ran."""
        known = {id(h) for h in self.handlers}
        self.handlers = self.handlers + [h for h in handlers if id(h) not in known]

    def waiting(self) -> list[TaskDef]:
        return [h for h in self.handlers if h.handler_key in self.pending]
