#!/usr/bin/env python3
"""The timeline trace, checked against a known program (trace_program.c).

    check_trace.py TRACE_PROGRAM [QD_TOOL]

Runs the program with QD_TRACE (and once with a tiny QD_TRACE_CAPACITY, once with a faulting
kernel), then checks the file: valid JSON in the Chrome trace event format, one process per
context, one track per stream, every launch once on its stream, every wait with an arrow from
the record it consumed, the bytes of copies and sets, nothing missing after a destroy with work
in flight, overflow counted, the fault marked. With QD_TOOL, `qd trace view` draws the file, and
where headless Chromium is installed the page is loaded: it must run without error and draw one
lane per track. Standard library only.
"""
import collections
import json
import os
import shutil
import subprocess
import sys
import tempfile

failures = []


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
    ends = {(e["pid"], e["tid"], e["ts"]) for e in events if e["ph"] == "f"}
    starts = {e["id"] for e in events if e["ph"] == "s"}
    check(len(waits) == 1 + 3 + 3, f"1 user wait, 3 fork waits, 3 join waits: {len(waits)}")
    for w in waits:
        check((w["pid"], w["tid"], w["ts"]) in ends, f"the wait has an arrow from its record: {w}")
    check(all(e["id"] in starts for e in events if e["ph"] == "f"), "every arrow has its start")
    origins = collections.Counter(w["args"]["origin"] for w in waits)
    check(origins == {"api": 1, "fork": 3, "join": 3}, f"wait origins: {origins}")
    # The user wait is after its record: the beta launches start after the record ran.
    rec = [s for s in slices if s["cat"] == "event record" and s["args"]["origin"] == "api"]
    check(len(rec) == 1 and by_name["beta"][0]["ts"] + 1e-3 >= rec[0]["ts"],
          "beta starts after the event it waits for was recorded")
    hosts = [n for n in tracks.values() if n.startswith("host thread")]
    check(len(hosts) == 2, f"one enqueue track per context for the main thread: {hosts}")


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
        check_fault(run(program, "fault", os.path.join(tmp, "fault.json")))
        check_exit(run(program, "exit", os.path.join(tmp, "exit.json")))
        if qd_tool:
            check_view(qd_tool, trace, tmp, len(parts(data)[2]))
    if failures:
        sys.exit(f"{len(failures)} check(s) failed")
    print("trace: every check passed")


if __name__ == "__main__":
    main()
