#!/usr/bin/env python3
"""Embed a PTX file as a C++ string: embed_ptx.py IN.ptx OUT.h -> static const char kDemoPtx[]."""
import sys

ptx = open(sys.argv[1], encoding="ascii").read()
if ")qdptx" in ptx:
    sys.exit("embed_ptx.py: the PTX contains the raw-string delimiter")
with open(sys.argv[2], "w", encoding="ascii") as out:
    out.write("// Generated from %s by embed_ptx.py. Do not edit.\n" % sys.argv[1].split("/")[-1])
    out.write('static const char kDemoPtx[] = R"qdptx(%s)qdptx";\n' % ptx)
