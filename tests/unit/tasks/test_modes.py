"""Symbolic modes, applied to a path's mode as ansible-core applies them (tasks/modes.py)."""
import pytest

from gpuconf.tasks.modes import parse_mode, resolved


@pytest.mark.parametrize("mode, current, directory, expected", [
    ("u=rw,g=r,o=r", None, False, 0o644),
    ("u=rw,g=r,o=", 0o777, False, 0o640),
    ("u=rwx,go=rx", None, True, 0o755),
    ("go-w", 0o666, False, 0o644),
    ("+x", 0o644, False, 0o755),        # no user: the umask (022) decides
    ("a+X", 0o644, False, 0o644),       # X: only for a directory or what is executable already
    ("a+X", 0o644, True, 0o755),
    ("g=u", 0o700, False, 0o770),
    ("u+s,o+t", 0o755, True, 0o5755),
    ("0640", 0o777, False, 0o640),
])
def test_a_mode_is_the_one_ansible_sets(mode, current, directory, expected):
    assert resolved(parse_mode(mode), current, directory) == expected


@pytest.mark.parametrize("mode", ["rwx", "u=rwz", "q+r", "644x"])
def test_a_bad_mode_says_what_a_mode_is(mode):
    with pytest.raises(ValueError, match="octal like '0644' or symbolic like 'u=rw,g=r,o='"):
        parse_mode(mode)
