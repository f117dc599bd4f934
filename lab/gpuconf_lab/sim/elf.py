"""A minimal ELF64 shared object with a SONAME, for the fake libraries the packages ship.

``ldconfig`` (run by the ``cuda_env`` role and by package scripts) reads every library in its
directories; a text file there makes it warn "is not an ELF file". A real, if empty, shared
object with ``DT_SONAME`` makes ``ldconfig`` create the soname link and ``ldconfig -p`` list
it, exactly as for the real ``libcudart``. Runs on the machine when the apt repository is built.
"""
from __future__ import annotations

import struct

PT_LOAD, PT_DYNAMIC = 1, 2
DT_NULL, DT_STRTAB, DT_SYMTAB, DT_STRSZ, DT_SYMENT, DT_SONAME, DT_HASH = 0, 5, 6, 10, 11, 14, 4


def shared_object(soname: str) -> bytes:
    """Bytes of an x86-64 ``ET_DYN`` file whose dynamic section names ``soname``."""
    ehdr_size, phdr_size = 64, 56
    phoff = ehdr_size
    strtab = b"\0" + soname.encode() + b"\0"
    symtab = b"\0" * 24                                   # the mandatory null symbol
    hashtab = struct.pack("<4I", 1, 1, 0, 0)              # nbucket=1, nchain=1, bucket[0]=0, chain[0]=0
    strtab_off = phoff + 2 * phdr_size
    symtab_off = (strtab_off + len(strtab) + 7) & ~7
    hash_off = symtab_off + len(symtab)
    dynamic_off = (hash_off + len(hashtab) + 7) & ~7
    dynamic = b"".join(struct.pack("<qQ", tag, value) for tag, value in (
        (DT_SONAME, 1), (DT_STRTAB, strtab_off), (DT_SYMTAB, symtab_off), (DT_STRSZ, len(strtab)),
        (DT_SYMENT, 24), (DT_HASH, hash_off), (DT_NULL, 0)))
    total = dynamic_off + len(dynamic)
    ident = b"\x7fELF" + bytes([2, 1, 1, 0]) + b"\0" * 8   # 64-bit, little endian, SysV
    ehdr = ident + struct.pack("<HHIQQQIHHHHHH", 3, 62, 1, 0, phoff, 0, 0, ehdr_size, phdr_size, 2, 64, 0, 0)
    load = struct.pack("<IIQQQQQQ", PT_LOAD, 4, 0, 0, 0, total, total, 0x1000)
    dyn = struct.pack("<IIQQQQQQ", PT_DYNAMIC, 6, dynamic_off, dynamic_off, dynamic_off, len(dynamic),
                      len(dynamic), 8)
    blob = bytearray(total)
    blob[0:len(ehdr)] = ehdr
    blob[phoff:phoff + phdr_size] = load
    blob[phoff + phdr_size:phoff + 2 * phdr_size] = dyn
    blob[strtab_off:strtab_off + len(strtab)] = strtab
    blob[symtab_off:symtab_off + len(symtab)] = symtab
    blob[hash_off:hash_off + len(hashtab)] = hashtab
    blob[dynamic_off:dynamic_off + len(dynamic)] = dynamic
    return bytes(blob)
