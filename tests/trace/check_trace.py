#!/usr/bin/env python3
"""The timeline trace, checked against a known program (trace_program.c).

    check_trace.py TRACE_PROGRAM [QD_TOOL]

Runs the program with QD_TRACE (and once with a tiny QD_TRACE_CAPACITY, once with a faulting
kernel, once with two contexts waiting on each other's events), then checks the file: valid
JSON in the Chrome trace event format, one process per context, one track per stream, every
launch once on its stream, every wait with an arrow from the record it consumed (within one
context and across two, fork, join, graph replays and parallel launches included), every arrow
numbered once in the file and pointing forward in time (it starts inside its record's slice and
ends where its wait was satisfied), the bytes of copies, sets and allocs as asked for, nothing
missing after a destroy with work in flight (nor a destroyed context's part and arrows while
another context goes on writing the file), overflow counted, the fault marked. With QD_TOOL,
`qd trace view` draws the file, and where headless Chromium is installed the page is loaded: it
must run without error and draw one lane per track. Standard library only.
"""
import collections
import json
import os
import shutil
import subprocess
import sys
import tempfile

failures = []
EPS = 1e-6  # the file's times are whole nanoseconds; what JSON floats add up to, not more


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def run(program, mode, trace, **extra):
    env = dict(os.environ, QD_TRACE=trace, **extra)
    done = subprocess.run([program, mode], env=env, capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        sys.exit(f"{program} {mode} failed ({done.returncode}): {done.stderr}")
    with open(trace) as f:
        return json.load(f)


def parts(data):
    events = data["traceEvents"]
    procs = {e["pid"]: e["args"]["name"] for e in events
             if e["ph"] == "M" and e["name"] == "process_name"}
    tracks = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
              if e["ph"] == "M" and e["name"] == "thread_name"}
    slices = [e for e in events if e["ph"] == "X" and e.get("cat") != "enqueue"]
    return events, procs, tracks, slices


def arrows(data):
    """The arrows of a file as (start, end) pairs of flow events, after checking the rules every
    file keeps: each id is one "s" and one "f"; an arrow starts inside the slice of a record
    and ends no earlier, at the end of the slice of a wait on its own track (where the wait was
    satisfied) or just before that track's next slice, binding to that next slice (no "bp")."""
    events, procs, tracks, slices = parts(data)
    flows = collections.defaultdict(list)
    for e in events:
        if e["ph"] in "stf":
            flows[e["id"]].append(e)
    pairs = []
    for fid, fl in flows.items():
        phases = sorted(e["ph"] for e in fl)
        check(phases == ["f", "s"], f"arrow {fid} is one start and one end, its id unique: {fl}")
        if phases != ["f", "s"]:
            continue
        s = next(e for e in fl if e["ph"] == "s")
        f = next(e for e in fl if e["ph"] == "f")
        pairs.append((s, f))
        check(s["ts"] <= f["ts"], f"arrow {fid} points forward in time: {s} {f}")
        check("bp" not in f, f"arrow {fid} binds its end to the next slice: {f}")
        on = lambda e, cat: [x for x in slices if (x["pid"], x["tid"]) == (e["pid"], e["tid"])
                             and x["cat"] == cat]
        check(any(r["ts"] - EPS <= s["ts"] <= r["ts"] + r["dur"] + EPS
                  for r in on(s, "event record")),
              f"arrow {fid} starts inside a record's slice: {s}")
        check(any(w["ts"] - EPS <= f["ts"] <= w["ts"] + w["dur"] + EPS for w in on(f, "event wait"))
              or f["ts"] == s["ts"], f"arrow {fid} ends where a wait on its track ended: {f}")
    return pairs


def waits_with_arrows(data, pairs):
    """Every wait slice with the arrow that ends on it (None when none does)."""
    events, procs, tracks, slices = parts(data)
    out = []
    for w in (s for s in slices if s["cat"] == "event wait"):
        end = [(s, f) for s, f in pairs if (f["pid"], f["tid"]) == (w["pid"], w["tid"])
               and (w["ts"] - EPS <= f["ts"] <= w["ts"] + w["dur"] + EPS or f["ts"] == s["ts"])]
        out.append((w, end[0] if end else None))
    return out


def check_normal(data):
    events, procs, tracks, slices = parts(data)
    check(len(procs) == 2, f"one process per context: {procs}")
    for e in events:
        if e["ph"] in "Xsfi":
            check(e["ts"] >= 0 and e.get("dur", 0) >= 0, f"times are non-negative: {e}")
    by_name = collections.defaultdict(list)
    for s in slices:
        by_name[s["name"]].append(s)
    counts = {n: len(by_name[n]) for n in ("slow", "alpha", "beta", "gamma", "delta")}
    check(counts == {"slow": 1, "alpha": 5, "beta": 3, "gamma": 3, "delta": 2},
          f"every launch appears once: {counts}")
    track = lambda s: (s["pid"], s["tid"])
    check(len({track(s) for s in by_name["alpha"] + by_name["slow"]}) == 1,
          "the slow task and alpha share stream A's track")
    check(len({track(s) for s in by_name["beta"]}) == 1, "beta runs on one track (stream B)")
    check(track(by_name["beta"][0]) != track(by_name["alpha"][0]), "A and B are two tracks")
    gamma_tracks = {track(s) for s in by_name["gamma"]}
    check(len(gamma_tracks) == 3 and all("leased" in tracks[t] for t in gamma_tracks),
          f"the 3 forked children are 3 leased tracks: {[tracks.get(t) for t in gamma_tracks]}")
    check(track(by_name["delta"][0])[0] != track(by_name["alpha"][0])[0],
          "the second context's work is in its own process")
    # Stream order on A: each slice starts after the previous one ended.
    a = sorted((s for s in slices if track(s) == track(by_name["alpha"][0])), key=lambda s: s["ts"])
    for prev, nxt in zip(a, a[1:]):
        check(nxt["ts"] + 1e-3 >= prev["ts"] + prev["dur"], f"stream order on A: {prev} {nxt}")
    sizes = {s["cat"]: s["args"].get("bytes") for s in slices if s["cat"] in ("memcpy", "memset")}
    check(sizes == {"memcpy": 4096, "memset": 4096}, f"copy and set with their bytes: {sizes}")
    waits = [s for s in slices if s["cat"] == "event wait"]
    pairs = arrows(data)
    check(len(waits) == 1 + 3 + 3, f"1 user wait, 3 fork waits, 3 join waits: {len(waits)}")
    check(len(pairs) == len(waits), f"one arrow per wait: {len(pairs)} for {len(waits)}")
    for w, arrow in waits_with_arrows(data, pairs):
        check(arrow is not None, f"the wait has an arrow from its record: {w}")
    origins = collections.Counter(w["args"]["origin"] for w in waits)
    check(origins == {"api": 1, "fork": 3, "join": 3}, f"wait origins: {origins}")
    # The user wait is after its record: the beta launches start after the record ran.
    rec = [s for s in slices if s["cat"] == "event record" and s["args"]["origin"] == "api"]
    check(len(rec) == 1 and by_name["beta"][0]["ts"] + 1e-3 >= rec[0]["ts"],
          "beta starts after the event it waits for was recorded")
    hosts = [n for n in tracks.values() if n.startswith("host thread")]
    check(len(hosts) == 2, f"one enqueue track per context for the main thread: {hosts}")


def check_contexts(data):
    events, procs, tracks, slices = parts(data)
    check(len(procs) == 2, f"one process per context, the destroyed one's included: {procs}")
    by_name = collections.defaultdict(list)
    for s in slices:
        by_name[s["name"]].append(s)
    names = ("produce", "consume", "back", "branch", "task", "after")
    counts = {n: len(by_name[n]) for n in names}
    check(counts == {"produce": 1, "consume": 1, "back": 1, "branch": 4, "task": 2, "after": 1},
          f"every launch appears once: {counts}")
    allocs = [s["args"].get("bytes") for s in slices if s["cat"] == "alloc"]
    check(allocs == [3072], f"the alloc shows the bytes asked for: {allocs}")
    first = by_name["produce"][0]["pid"]
    second = by_name["consume"][0]["pid"]
    check(first != second, "the contexts are two processes")
    pairs = arrows(data)
    across = [(s, f) for s, f in pairs if s["pid"] != f["pid"]]
    check(sorted((s["pid"], f["pid"]) for s, f in across) == sorted([(first, second),
                                                                     (second, first)]),
          f"one arrow each way across the contexts: {across}")
    for s, f in across:
        check(s["name"] == "api", f"an arrow across contexts is a user event's: {s}")
    waits = waits_with_arrows(data, pairs)
    for w, arrow in waits:
        check(arrow is not None, f"the wait has an arrow from its record: {w}")
    check(len(pairs) == len(waits), f"one arrow per wait: {len(pairs)} for {len(waits)}")
    origins = collections.Counter(w["args"]["origin"] for w, _ in waits)
    check(origins["api"] == 2 and origins["graph replay"] >= 2 and
          origins["parallel launch"] >= 2, f"waits of every kind have arrows: {origins}")
    # The arrow into the other context ends before the waiting stream's next work, unless the
    # two contexts' time bases put the wait's end before the record (the end is then moved to
    # the start, qd.h "Timeline trace").
    for name, waited in (("consume", first), ("back", second)):
        for s, f in (a for a in across if a[0]["pid"] == waited):
            nxt = [x for x in slices if (x["pid"], x["tid"]) == (f["pid"], f["tid"])
                   and x["ts"] >= f["ts"]]
            check(f["ts"] == s["ts"] or
                  (bool(nxt) and min(nxt, key=lambda x: x["ts"])["name"] == name),
                  f"the arrow into the other context ends before {name}, the next slice: {f}")


def check_overflow(data):
    events, procs, tracks, slices = parts(data)
    full = [e for e in events if e["ph"] == "i" and e.get("cat") == "overflow"]
    # The first context queues 26 operations, the second 2: only the first overflows.
    check(len(full) == 1 and "22 operations not recorded" in full[0]["name"],
          f"the context that overflowed says how many operations it dropped: {full}")
    check(all(len([s for s in slices if s["pid"] == p]) <= 4 for p in procs),
          "no context records more than QD_TRACE_CAPACITY operations")


def check_fault(data):
    events, procs, tracks, slices = parts(data)
    check(any(s["name"] == "broken" for s in slices), "the faulting kernel's launch is there")
    lost = [e for e in events if e["ph"] == "i" and e.get("cat") == "fault"]
    check(len(lost) >= 1 and "broken" in lost[0]["name"], f"the fault is marked: {lost}")


def check_exit(data):
    events, procs, tracks, slices = parts(data)
    omega = [s for s in slices if s["name"] == "omega"]
    check(len(omega) == 5, f"the flush at exit wrote every launch, its own included: {len(omega)}")


def check_view(qd_tool, trace, tmp, lanes):
    page = os.path.join(tmp, "trace.html")
    done = subprocess.run([qd_tool, "trace", "view", trace, "-o", page], capture_output=True,
                          text=True, timeout=60)
    check(done.returncode == 0, f"qd trace view: {done.stderr}")
    html = open(page).read()
    check("<script src" not in html and "http://" not in html.replace(
        "http://www.w3.org/2000/svg", ""), "the page loads nothing from elsewhere")
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if not browser:
        print("SKIP: headless page check: no chromium installed")
        return
    done = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu",
                           "--virtual-time-budget=3000", "--dump-dom", "file://" + page],
                          capture_output=True, text=True, timeout=120)
    dom = done.stdout
    check(f'data-lanes="{lanes}"' in dom,
          f"the page ran and drew {lanes} lanes (body attributes: "
          f"{dom[dom.find('<body'):dom.find('<body') + 80]!r})")
    check(dom.count('class="lane"') == lanes, "one lane rectangle per track")


def main():
    program = sys.argv[1]
    qd_tool = sys.argv[2] if len(sys.argv) > 2 else None
    with tempfile.TemporaryDirectory() as tmp:
        trace = os.path.join(tmp, "normal.json")
        data = run(program, "normal", trace)
        check_normal(data)
        check_overflow(run(program, "normal", os.path.join(tmp, "small.json"),
                           QD_TRACE_CAPACITY="4"))
        check_contexts(run(program, "contexts", os.path.join(tmp, "contexts.json")))
        check_fault(run(program, "fault", os.path.join(tmp, "fault.json")))
        check_exit(run(program, "exit", os.path.join(tmp, "exit.json")))
        if qd_tool:
            check_view(qd_tool, trace, tmp, len(parts(data)[2]))
    if failures:
        sys.exit(f"{len(failures)} check(s) failed")
    print("trace: every check passed")


if __name__ == "__main__":
    main()
