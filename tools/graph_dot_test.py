#!/usr/bin/env python3
"""The test of `qd graph dot`: the DOT of the demo's parallel run has its known structure.

usage: graph_dot_test.py QD [--backend NAME]   (default cpu; a backend without a device: SKIP, 77)

The demo's parallel run with G groups of T tasks, captured (qd.h, "Graphs"): on lane 0 the
output's memset, the fork's record, one wait per group (the join) and the copy back; on each
group's lane the fork's wait, its T launches in order and the join's record. So 3 + 2G + G*T
+ G nodes, lane order edges (G + 2 on lane 0, T + 1 per group), G fork and G join edges. The
DOT text is parsed here; where Graphviz's `dot` is installed it also checks the syntax.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

GROUPS, TASKS = 4, 3


def fail(message, text=""):
    sys.stderr.write("FAIL: %s\n%s\n" % (message, text))
    sys.exit(1)


def main():
    qd = sys.argv[1]
    backend = sys.argv[3] if len(sys.argv) > 3 and sys.argv[2] == "--backend" else "cpu"
    args = [qd, "graph", "dot", "--backend", backend, "--groups", str(GROUPS), "--tasks",
            str(TASKS)]
    run = subprocess.run(args, capture_output=True, text=True, timeout=120)
    if run.returncode == 1 and "is not available" in run.stderr:
        print("SKIP: %s" % run.stderr.strip())
        sys.exit(77)  # meson's exit status for a skipped test
    if run.returncode != 0:
        fail("%s exited %d" % (" ".join(args), run.returncode), run.stderr)
    text = run.stdout
    if not text.startswith("digraph qd_graph {") or not text.rstrip().endswith("}"):
        fail("not one digraph", text)
    nodes = re.findall(r"^\s*(n\d+) \[label=\"([^\"]*)\"", text, re.M)
    edges = re.findall(r"^\s*(n\d+) -> (n\d+)(?: \[[^\]]*label=\"(\w+)\")?", text, re.M)
    labels = dict(nodes)
    launches = [n for n, l in nodes if l.startswith("logistic_task") or
                l.startswith("qd_demo_logistic_task")]
    want_nodes = 3 + 2 * GROUPS + GROUPS * TASKS + GROUPS
    if len(nodes) != want_nodes:
        fail("%d nodes, want %d" % (len(nodes), want_nodes), text)
    if len(launches) != GROUPS * TASKS:
        fail("%d launches, want %d" % (len(launches), GROUPS * TASKS), text)
    lanes = re.findall(r"subgraph cluster_lane(\d+)", text)
    if len(lanes) != GROUPS + 1:
        fail("%d lanes, want %d" % (len(lanes), GROUPS + 1), text)
    forks = [(a, b) for a, b, l in edges if l == "fork"]
    joins = [(a, b) for a, b, l in edges if l == "join"]
    order = [(a, b) for a, b, l in edges if not l]
    if len(forks) != GROUPS or len(joins) != GROUPS:
        fail("%d fork and %d join edges, want %d each" % (len(forks), len(joins), GROUPS), text)
    if len(order) != (GROUPS + 2) + GROUPS * (TASKS + 1):
        fail("%d lane-order edges" % len(order), text)
    # Every fork leaves the one record on lane 0 for a wait; every join enters a wait on lane 0
    # from a record.
    if len({a for a, _ in forks}) != 1 or any(labels[a] != "record" or labels[b] != "wait"
                                              for a, b in forks + joins):
        fail("the fork and join edges do not go from records to waits", text)
    if len({b for _, b in joins}) != GROUPS:
        fail("the joins do not end in one wait each", text)
    # Each group's launches follow each other: a chain wait -> T launches -> record.
    successors = {}
    for a, b in order:
        successors.setdefault(a, []).append(b)
    for _, wait in forks:
        chain, at = [], wait
        while successors.get(at):
            at = successors[at][0]
            chain.append(labels[at].split("\\n")[0])
        if len(chain) != TASKS + 1 or chain[-1] != "record":
            fail("a group's lane is %s" % chain, text)
    dot = shutil.which("dot")
    if dot:
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "g.dot")
            with open(path, "w") as f:
                f.write(text)
            check = subprocess.run([dot, "-Tsvg", path, "-o", os.path.join(tmp, "g.svg")],
                                   capture_output=True, text=True, timeout=120)
            if check.returncode != 0:
                fail("dot -Tsvg refused it", check.stderr)
        print("dot -Tsvg: ok")
    else:
        print("dot (Graphviz) not found: syntax not checked by it")
    print("ok: %d nodes, %d fork and %d join edges" % (len(nodes), len(forks), len(joins)))


if __name__ == "__main__":
    main()
