"""``python -m qd trace view TRACE.json -o PAGE.html``: a trace file drawn as a page, the same
page ``qd trace view`` writes (tools/trace_view.cpp).

The page around the trace is the C++ tool's, byte for byte: read from ``trace_view.html`` next
to this file (an installed package: the build copies it there from tools/trace_view.cpp), else
from tools/trace_view.cpp of the checkout this package sits in. This module imports nothing of
qd, so the build backend loads it by path to make that copy.
"""

from __future__ import annotations

import os
import re
import sys
from typing import List, Optional, Tuple

#: Between the page's head and tail in trace_view.html, where the trace goes.
MARK = "\0QD_TRACE_JSON\0"

_HERE = os.path.dirname(os.path.abspath(__file__))
_CHECKOUT_SOURCE = os.path.join(_HERE, "..", "..", "..", "tools", "trace_view.cpp")


def template_from_source(cpp: str) -> str:
    """The page of tools/trace_view.cpp (its kHead and kTail raw strings) as head + MARK +
    tail."""
    parts = re.findall(r'R"HTML\((.*?)\)HTML"', cpp, re.S)
    if len(parts) != 2:
        raise ValueError("tools/trace_view.cpp: expected the page's two raw strings "
                         f"(kHead, kTail), found {len(parts)}")
    return parts[0] + MARK + parts[1]


def _template() -> Tuple[str, str]:
    installed = os.path.join(_HERE, "trace_view.html")
    if os.path.exists(installed):
        with open(installed, encoding="utf-8") as f:
            page = f.read()
    else:
        with open(_CHECKOUT_SOURCE, encoding="utf-8") as f:
            page = template_from_source(f.read())
    head, _, tail = page.partition(MARK)
    return head, tail


def _usage() -> int:
    print("usage: python -m qd trace view TRACE.json -o PAGE.html", file=sys.stderr)
    return 2


def trace_view(argv: List[str]) -> int:
    """``trace view TRACE.json -o PAGE.html`` (argv starts after "trace"); the exit status."""
    if not argv or argv[0] != "view":
        return _usage()
    src: Optional[str] = None
    out: Optional[str] = None
    i = 1
    while i < len(argv):
        if argv[i] == "-o" and i + 1 < len(argv):
            out = argv[i + 1]
            i += 2
            continue
        if src is not None:
            return _usage()
        src = argv[i]
        i += 1
    if src is None or out is None:
        return _usage()
    try:
        with open(src, "rb") as f:
            data = f.read()
    except OSError:
        print(f"qd trace view: cannot read '{src}'", file=sys.stderr)
        return 1
    text = data.lstrip(b" \t\r\n")
    if not text or text[:1] not in (b"{", b"["):
        print(f"qd trace view: '{src}' is not a trace (JSON object or array)", file=sys.stderr)
        return 1
    try:
        head, tail = _template()
    except (OSError, ValueError) as exc:
        print(f"qd trace view: the page template is missing ({exc})", file=sys.stderr)
        return 1
    # Inside <script>, "</" could end the element: write it as "<\/" (the same JSON string).
    safe = data.replace(b"</", b"<\\/")
    try:
        with open(out, "wb") as f:
            f.write(head.encode("utf-8") + safe + tail.encode("utf-8"))
    except OSError:
        print(f"qd trace view: cannot write '{out}'", file=sys.stderr)
        return 1
    print(f"qd trace view: wrote {out}")
    return 0
