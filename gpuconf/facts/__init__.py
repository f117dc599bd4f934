"""Facts: what a host looks like, read from command output.

Each fact is a command plus a pure ``parse(output) -> value`` function (pyinfra's
``facts/*.py`` model). Every parser in this package:

* takes the command's text and nothing else: no I/O, no subprocess, stdlib only;
* returns frozen dataclasses (or tuples of them) with plain field names;
* never raises on odd input: it returns a typed partial result (``complete=False``,
  ``problems``) or :class:`gpuconf.facts.common.Unparseable`.

They are tested on real captured output in ``tests/fixtures/real``.
"""
