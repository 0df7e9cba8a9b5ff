#!/usr/bin/env python3
"""Embed a PTX file in a header.

embed_ptx.py IN.ptx OUT.h            -> static const char kDemoPtx[] (a C++ raw string: the demo)
embed_ptx.py IN.ptx OUT.h --c NAME   -> static const char NAME[] (C99: the bytes, NUL-terminated;
                                        the examples, which are C)
"""
import sys

args = sys.argv[1:]
if len(args) not in (2, 4) or (len(args) == 4 and args[2] != "--c"):
    sys.exit("usage: embed_ptx.py IN.ptx OUT.h [--c NAME]")
ptx = open(args[0], encoding="ascii").read()
with open(args[1], "w", encoding="ascii") as out:
    out.write("// Generated from %s by embed_ptx.py. Do not edit.\n" % args[0].split("/")[-1])
    if len(args) == 4:
        data = ptx.encode("ascii") + b"\0"
        out.write("static const char %s[%d] = {\n" % (args[3], len(data)))
        for i in range(0, len(data), 16):
            out.write("    " + ", ".join("%d" % b for b in data[i:i + 16]) + ",\n")
        out.write("};\n")
    else:
        if ")qdptx" in ptx:
            sys.exit("embed_ptx.py: the PTX contains the raw-string delimiter")
        out.write('static const char kDemoPtx[] = R"qdptx(%s)qdptx";\n' % ptx)
