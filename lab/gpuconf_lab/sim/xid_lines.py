"""The NVRM Xid lines ``fault xid`` writes, as the driver prints them.

Most codes: ``NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off
the bus.`` The NVLink5 codes 144-150 (Blackwell) carry the fields NVIDIA's per-line decode reads:
the unit, the driver's Fatal or Nonfatal word, the containment, the link, intrInfo, errorStatus and
four more words::

    NVRM: Xid (PCI:0018:01:00): 149, NETIR_LINK_EVT Fatal XC0 i0 Link 08 (0x004505c6 0x00000000 ...)

Their defaults are real lines (gpud's production NVLink5 log lines, tests/fixtures/real/dmesg/
xid-144-150-nvlink5-gpud.txt) where one exists, else a line whose fields fit the decode's row.
"""
from __future__ import annotations

XID_MESSAGES = {
    13: "Graphics SM Warp Exception on (GPC 0, TPC 0, SM 0): Out Of Range Address",
    31: "Ch 00000008, intr 10000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_0 faulted @ 0x7f_c2000000. "
        "Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_READ",
    43: "Ch 00000008",
    45: "Ch 00000008",
    48: "An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at physAddr "
        "0x12bac1c3e0 partition 2, subpartition 1.",
    63: "Row Remapper: New row (0x00000012bac1c3e0) marked for remapping, reset gpu to activate.",
    64: "Row Remapper: Failed to remap row (0x00000012bac1c3e0).",
    74: "NVLink: fatal error detected on link 0(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)",
    79: "GPU has fallen off the bus.",
    92: "High single-bit ECC error rate detected.",
    94: "Contained: SM (0x1). RST: No, D-RST: No",
    95: "Uncontained: FBHUB. RST: Yes, D-RST: No",
    119: "Timeout after 6s of waiting for RPC response from GPU0 GSP! Expected function 76 (GSP_RM_CONTROL) "
         "(0x20802a02 0x8).",
    120: "Error in GSP-RM. GSP RM Exception, RM Log: 0x0",
}
APP_XIDS = {13, 31, 43, 45}
# code -> (fatal line, non-fatal line): unit, intrInfo, errorStatus, link
NVLINK5 = {
    144: (("SAW_MVB", 0x00000001, 0x00000002, 0), ("SAW_MVB", 0x00000001, 0x00000008, 0)),
    145: (("RLW_SRC_TRACK", 0x040988e2, 0x00000001, 12), ("RLW_RXPIPE", 0x0409a0c2, 0x00000008, 13)),
    146: (("TLW_CTRL", 0x00000009, 0x00000004, 0), ("TLW_CTRL", 0x00000009, 0x00000001, 0)),
    147: (("TREX", 0x0000000e, 0x00000001, 0), ("TREX", 0x0000000e, 0x80000000, 0)),
    148: (("NVLPW_CTRL/NVLPW", 0x0000000f, 0x80000000, 0), ("NVLPW_CTRL/NVLPW", 0x0000000f, 0x80000000, 0)),
    149: (("NETIR_LINK_EVT", 0x004505c6, 0x00000000, 8), ("NETIR_BER_EVENT", 0x00086226, 0x00000001, 3)),
    150: (("MSE_WATCHDOG", 0x00000000, 0x00000000, 0), ("MSE_WATCHDOG", 0x00000000, 0x00000000, 0)),
}


def _hex(text: str) -> int:
    try:
        value = int(text, 16)
    except ValueError:
        raise SystemExit(f"fault xid: {text!r} is not a hexadecimal word (0x004505c6)") from None
    if not 0 <= value < 1 << 32:
        raise SystemExit(f"fault xid: {text!r} does not fit in 32 bits")
    return value


def nvlink5(code: int, options: dict) -> str:
    """The text after the code of an NVLink5 line: the defaults of its Fatal or Nonfatal line, each
    field overridden by its option."""
    fatal = not options.get("nonfatal")
    unit, intrinfo, status, link = NVLINK5[code][0 if fatal else 1]
    unit = options.get("unit", unit)
    intrinfo = _hex(options["intrinfo"]) if "intrinfo" in options else intrinfo
    status = _hex(options["error-status"]) if "error-status" in options else status
    link = int(options.get("link", link))
    return (f"{unit} {'Fatal' if fatal else 'Nonfatal'} XC0 i0 Link {link:02d} "
            f"(0x{intrinfo:08x} 0x{status:08x} 0x00000000 0x00000000 0x00000000 0x00000000)")


def line(pci: str, code: int, options: dict) -> str:
    """One Xid line of the GPU at ``pci`` (``0000:3b:00``)."""
    if code in APP_XIDS:
        who = f", pid={options.get('pid', '4211')}, name={options.get('name', 'python3')}"
    elif code in NVLINK5:
        who = f", pid={options['pid']}, name={options.get('name', 'python3')}" if "pid" in options else ""
    else:
        who = ", pid='<unknown>', name=<unknown>"
    text = nvlink5(code, options) if code in NVLINK5 else XID_MESSAGES.get(code, "Unknown error")
    return f"NVRM: Xid (PCI:{pci}): {code}{who}, {text}"
