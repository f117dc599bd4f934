"""Templating: the one Jinja2 environment gpuconf renders with, Ansible's filters and tests,
the bounds on a render's size and CPU time, and the marks that keep a vaulted value secret through
a render. Everything that renders a string goes through `templating.render`."""
