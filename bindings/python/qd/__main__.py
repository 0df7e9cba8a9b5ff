"""``python -m qd``: the parts of the ``qd`` command a Python install can offer without it.

    python -m qd trace view TRACE.json -o PAGE.html    # draw a trace (qd.trace) as a page
"""

from __future__ import annotations

import sys
from typing import List, Optional

_USAGE = """usage: python -m qd COMMAND

commands:
  trace view TRACE.json -o PAGE.html
                draw a trace file (qd.trace, QD_TRACE) as a page: one track per stream,
                arrows for event dependencies; the page ``qd trace view`` writes
"""


def main(argv: Optional[List[str]] = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("-h", "--help", "help"):
        sys.stdout.write(_USAGE)
        return 0 if args else 2
    if args[0] == "trace":
        from ._trace_view import trace_view  # noqa: PLC0415 (no libqd needed)

        return trace_view(args[1:])
    sys.stderr.write(f"python -m qd: unknown command '{args[0]}'\n" + _USAGE)
    return 2


if __name__ == "__main__":
    sys.exit(main())
