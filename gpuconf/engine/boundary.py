"""The one failure boundary: an exception nobody expected, anywhere in one host's work
(a fact read, a template, a check, an apply, a handler, a reboot wait, the connection),
becomes that host's failed task result. The other hosts finish; the recap, the reports and
the retry file are written. The traceback goes to the JSON report and to -vvv, never to
the terminal by default."""
from __future__ import annotations

import traceback


def internal_error(exc: BaseException, host: str, task: str, role: str | None = None) -> tuple[str, str]:
    """The error line, `internal error in <role> : <task> on <host>: <Type>: <message>`, and
    the traceback of `exc` (call inside the `except` that caught it)."""
    where = f"{role} : {task}" if role else task
    message = f"internal error in {where} on {host}: {type(exc).__name__}: {exc}"
    return message, "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
