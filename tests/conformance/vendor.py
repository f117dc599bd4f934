"""Copy ansible-core's integration targets, as they are at one commit, into targets/ (test data,
never imported: README.md says why and under which licence). Run again to change the commit:

    python -m tests.conformance.vendor GIT_DIR COMMIT

GIT_DIR is a clone of https://github.com/ansible/ansible. MANIFEST lists every file copied
with its git blob id, so that `vendor --verify GIT_DIR` shows the copy is unmodified."""
from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent
TARGETS = HERE / "targets"
MANIFEST = HERE / "MANIFEST"
SOURCE = "test/integration/targets"
# The targets issue 38 names, and the ones they need (meta dependencies, needs/target/, runme.sh's ../)
WANTED = (
    "var_precedence", "var_blending", "var_inheritance", "set_fact", "register", "omit", "assert", "tags",
    "blocks", "handlers", "loops", "include_vars", "include_import", "roles", "roles_arg_spec", "templating",
    "template", "lookup_file", "check_mode", "filter_core", "changed_when", "failed_when", "ignore_errors",
    "any_errors_fatal", "special_vars",
)
NEEDED = ("prepare_tests", "setup_nobody", "setup_test_user", "setup_passlib_controller", "include_parent_role_vars")


def git(git_dir: str, *args: str) -> bytes:
    return subprocess.run(["git", "-C", git_dir, *args], check=True, capture_output=True).stdout


def files(git_dir: str, commit: str) -> list[tuple[str, str, str]]:
    """(mode, blob, path) of every file of the targets, at the commit."""
    listing = git(git_dir, "ls-tree", "-r", commit, "--", *(f"{SOURCE}/{name}" for name in WANTED + NEEDED))
    found = []
    for line in listing.decode().splitlines():
        meta, path = line.split("\t", 1)
        mode, kind, blob = meta.split()
        if kind == "blob":
            found.append((mode, blob, path))
    return found


def vendor(git_dir: str, commit: str) -> None:
    full = git(git_dir, "rev-parse", commit).decode().strip()
    if TARGETS.exists():
        shutil.rmtree(TARGETS)
    entries = files(git_dir, full)
    for mode, blob, path in entries:
        dest = TARGETS / path[len(SOURCE) + 1:]
        dest.parent.mkdir(parents=True, exist_ok=True)
        if mode == "120000":   # a symbolic link: kept as one
            dest.symlink_to(git(git_dir, "cat-file", "blob", blob).decode())
            continue
        dest.write_bytes(git(git_dir, "cat-file", "blob", blob))
        dest.chmod(0o755 if mode == "100755" else 0o644)
    (HERE / "COPYING").write_bytes(git(git_dir, "show", f"{full}:COPYING"))
    lines = [f"# ansible/ansible {full} {SOURCE}/ (python -m tests.conformance.vendor)"]
    lines += [f"{blob} {mode} {path[len(SOURCE) + 1:]}" for mode, blob, path in entries]
    MANIFEST.write_text("\n".join(lines) + "\n")
    print(f"{len(entries)} files of {len(WANTED) + len(NEEDED)} targets at {full}")


def verify(git_dir: str) -> int:
    lines = MANIFEST.read_text().splitlines()
    commit = lines[0].split()[2]
    expected = {path: blob for blob, _, path in (line.split(" ", 2) for line in lines[1:])}
    at_commit = {path[len(SOURCE) + 1:]: blob for _, blob, path in files(git_dir, commit)}
    plain = [path for path in expected if not (TARGETS / path).is_symlink()]
    hashed = subprocess.run(["git", "hash-object", "--stdin-paths"], input="\n".join(str(TARGETS / p) for p in plain),
                            check=True, capture_output=True, text=True).stdout.split()
    here = dict(zip(plain, hashed))
    bad = [path for path, blob in expected.items() if at_commit.get(path) != blob or here.get(path, blob) != blob]
    print(f"{len(expected) - len(bad)} of {len(expected)} files as at {commit}")
    for path in bad:
        print(f"  differs: {path}")
    return 1 if bad else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("git_dir")
    parser.add_argument("commit", nargs="?", default="c9ac477e53a9")
    parser.add_argument("--verify", action="store_true", help="check the copy against the manifest")
    args = parser.parse_args()
    if args.verify:
        return verify(args.git_dir)
    vendor(args.git_dir, args.commit)
    return 0


if __name__ == "__main__":
    sys.exit(main())
