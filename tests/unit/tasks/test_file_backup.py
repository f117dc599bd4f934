"""`backup: true`: the file being replaced is kept beside it, timestamped, and a second backup
within the same second never overwrites the first (run here, with -c local)."""
import re
import sys

from gpuconf.cli.main import main

BACKUP = re.compile(r"^f\.conf\.\d{8}T\d{6}(-\d+)?\.gpuconf~$")


def test_two_replacements_in_one_second_keep_two_backups_with_the_files_mode(tmp_path, capsys):
    target = tmp_path / "f.conf"
    target.write_text("orig\n")
    target.chmod(0o640)
    (tmp_path / "site.yml").write_text(
        "- hosts: all\n  gather_facts: false\n  tasks:\n"
        f"    - file: {{path: {target}, content: \"A\\n\", backup: true}}\n"
        f"    - file: {{path: {target}, content: \"B\\n\", backup: true}}\n")
    (tmp_path / "hosts.yml").write_text(f"all:\n  hosts:\n    localhost: {{python: {sys.executable}}}\n")
    argv = ["apply", str(tmp_path / "site.yml"), "-i", str(tmp_path / "hosts.yml"), "-c", "local"]
    assert main(argv) == 0, capsys.readouterr().out
    assert target.read_text() == "B\n"
    backups = sorted(p for p in tmp_path.iterdir() if p.name.startswith("f.conf."))
    assert all(BACKUP.match(p.name) for p in backups), backups
    assert sorted(p.read_text() for p in backups) == ["A\n", "orig\n"]   # the original was not overwritten
    assert {p.stat().st_mode & 0o777 for p in backups} == {0o640}
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []   # no temp file left
