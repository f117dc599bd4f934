"""``grubby``: EL 9's tool for the kernel command line of BLS boot entries (grubby-bls 8.40).

Entries live in ``/boot/loader/entries/<machine-id>-<kver>.conf``; the default is
``saved_entry`` in ``/boot/grub2/grubenv``, else the newest. ``--update-kernel=ALL`` also
rewrites ``/etc/kernel/cmdline``, which the entry of a kernel installed later starts from. What
an entry's ``options`` say becomes ``/proc/cmdline`` at the next simulated boot (``boot prepare``).

Output is grubby's: ``--info`` prints ``index=``, ``kernel="..."``, ``args="..."`` (without
``root=``), ``root="..."``, ``initrd="..."``, ``title="..."`` and ``id="..."`` per entry.
"""
from __future__ import annotations

import sys

import el
import entry
import state

USAGE = """Usage: grubby [OPTION...]
      --args=args                         default arguments for the new kernel or new arguments for kernel being updated)
      --default-kernel                    display the path of the default kernel
      --default-index                     display the index of the default kernel
      --default-title                     display the title of the default kernel
      --info=kernel-path                  display boot information for specified kernel
      --remove-args=STRING                remove kernel arguments
      --set-default=kernel-path           make the first entry referencing the specified kernel the default
      --set-default-index=entry-index     make the given entry index the default entry
      --update-kernel=kernel-path         updated information for the specified kernel

Help options:
  -?, --help                              Show this help message
"""
WITH_VALUE = ("--args", "--remove-args", "--info", "--update-kernel", "--set-default", "--set-default-index")
FLAGS = ("--default-kernel", "--default-index", "--default-title", "--help", "-?", "--grub2", "--bad-image-okay")


def boot_path(linux: str) -> str:
    """grubby shows kernels and initrds with the /boot prefix that BLS entries leave out."""
    return linux if linux.startswith("/boot/") else f"/boot{linux}"


def parse(argv: list[str]) -> dict[str, str] | None:
    options: dict[str, str] = {}
    i = 0
    while i < len(argv):
        arg = argv[i]
        key, eq, value = arg.partition("=")
        if key in WITH_VALUE:
            if not eq:
                if i + 1 >= len(argv):
                    sys.stderr.write(f"grubby: option '{key}' requires an argument\n")
                    return None
                i += 1
                value = argv[i]
            options[key] = value
        elif arg in FLAGS:
            options[arg] = ""
        else:
            sys.stderr.write(f"\ngrubby: invalid option \"{arg}\"\nTry 'grubby --help' for more information\n\n")
            return None
        i += 1
    return options


def select(spec: str, found: list) -> list[int]:
    """Entry indexes for ALL, DEFAULT, an index, TITLE=..., or a kernel path."""
    if spec == "ALL":
        return list(range(len(found)))
    if spec == "DEFAULT":
        return [el.default_index(found)] if found else []
    picked = []
    for index, (_path, fields) in enumerate(found):
        linux = fields.get("linux", "")
        if spec in (str(index), f"TITLE={fields.get('title', '')}", linux, boot_path(linux)):
            picked.append(index)
    return picked


def update_args(options: str, remove: str, add: str) -> str:
    """grubby's rules: a removed arg goes by key (or exact key=value); an added key=value
    replaces that key's value, a bare word is added once."""
    words = options.split()
    for arg in remove.split():
        words = [w for w in words if w != arg and w.split("=", 1)[0] != arg.split("=", 1)[0]]
    for arg in add.split():
        key = arg.split("=", 1)[0]
        if "=" in arg and any(w.split("=", 1)[0] == key for w in words):
            words = [arg if w.split("=", 1)[0] == key else w for w in words]
        elif arg not in words:
            tuned = [i for i, w in enumerate(words) if w.startswith("$")]
            words.insert(tuned[0] if tuned else len(words), arg)
    return " ".join(words)


def info(indexes: list[int], found: list) -> None:
    for index in indexes:
        path, fields = found[index]
        root, args = el.split_options(fields.get("options", ""))
        tuned = [w for w in fields.get("options", "").split() if w.startswith("$")]
        initrd = " ".join(boot_path(w) if w.startswith("/") else w for w in fields.get("initrd", "").split())
        print(f"index={index}")
        print(f'kernel="{boot_path(fields.get("linux", ""))}"')
        print(f'args="{" ".join(args + tuned)}"')
        if root:
            print(f'root="{root}"')
        print(f'initrd="{initrd}"')
        print(f'title="{fields.get("title", "")}"')
        print(f'id="{el.entry_id(path)}"')


def main(argv: list[str]) -> int:
    options = parse(argv)
    if options is None:
        return 1
    if "--help" in options or "-?" in options:
        print(USAGE, end="")
        return 0
    if not options:
        sys.stderr.write("no action specified\n")
        return 1
    found = el.entries()
    default = el.default_index(found)
    if "--default-kernel" in options or "--default-index" in options or "--default-title" in options:
        if not found:
            return 1
        fields = found[default][1]
        print(boot_path(fields.get("linux", "")) if "--default-kernel" in options else
              default if "--default-index" in options else fields.get("title", ""))
        return 0
    if "--info" in options:
        indexes = select(options["--info"], found)
        if not indexes:
            sys.stderr.write(f"The param {options['--info']} is incorrect\n")
            return 1
        info(indexes, found)
        return 0
    writes = "--update-kernel" in options or "--set-default" in options or "--set-default-index" in options
    if writes and not state.is_root():
        sys.stderr.write(f"grubby: error: {el.BLS_DIR}: Permission denied (run as root)\n")
        return 1
    if "--update-kernel" in options:
        spec = options["--update-kernel"]
        indexes = select(spec, found)
        if not indexes:
            sys.stderr.write(f"The param {spec} is incorrect\n")
            return 1
        remove, add = options.get("--remove-args", ""), options.get("--args", "")
        for index in indexes:
            path, fields = found[index]
            fields["options"] = update_args(fields.get("options", ""), remove, add)
            state.write_text(path, el.render_entry(fields))
        if spec == "ALL":
            current = (state.read_text(el.KERNEL_CMDLINE, "") or "").strip() or el.new_kernel_options()
            state.write_text(el.KERNEL_CMDLINE, update_args(current, remove, add) + "\n")
    for key in ("--set-default", "--set-default-index"):
        if key in options:
            indexes = select(options[key], found)
            if not indexes:
                sys.stderr.write(f"The param {options[key]} is incorrect\n")
                return 1
            el.set_default(found[indexes[0]][1].get("version", ""))
    return 0


if __name__ == "__main__":
    entry.run(main)
