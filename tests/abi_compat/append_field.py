#!/usr/bin/env python3
"""Write qd.h with one uint64_t field appended to qd_context_stats and qd_device_info: the
header of a future libqd whose output structs grew (suite abi, tests/meson.build)."""
import sys

src, dst = sys.argv[1], sys.argv[2]
text = open(src, encoding="utf-8").read()
for struct in ("qd_context_stats", "qd_device_info"):
    end = "} " + struct + ";"
    if text.count(end) != 1:
        sys.exit(f"append_field.py: '{end}' not found once in {src}")
    text = text.replace(end, "    uint64_t appended_later; /* the field a later version added */\n" + end)
open(dst, "w", encoding="utf-8").write(text)
