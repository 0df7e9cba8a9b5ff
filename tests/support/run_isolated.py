#!/usr/bin/env python3
"""Runs every test of a GoogleTest binary in its own process, with its own timeout.

One crash (a signal), hang or sanitizer abort then costs one test, not the rest of the suite,
and the summary names every test that failed, crashed or timed out (as libuv's runner does).

    run_isolated.py [options] BINARY [-- ARGS...]

  --timeout S   per-test limit in seconds (default 120), multiplied by QD_TEST_TIMEOUT_MULTIPLIER
                (a positive float in the environment, default 1: e.g. 3 under slow sanitizers).
                A test past its limit is killed with its whole process group (SIGKILL).
  --jobs N      tests run at once (default: QD_TEST_JOBS, else the number of CPUs)
  --filter P    a --gtest_filter pattern: run only the tests it selects
  --fail-on-output TEXT
                a test that passes but prints TEXT (stdout or stderr) fails ("printed TEXT");
                default: QD_TEST_FAIL_ON_OUTPUT from the environment, if set. The validation
                pass of tools/test-all sets it to "qd: hazard:", the default hazard report.
  ARGS          passed to every test process after --gtest_filter

The environment passes through unchanged (ASAN_OPTIONS, TSAN_OPTIONS, QD_TEST_*, ...). Tests
are listed with --gtest_list_tests and each runs as BINARY --gtest_filter=Suite.Name ARGS.
Exit status: 0 when every test passed or skipped; 1 when any failed, crashed, timed out or did
not run; 2 when the binary could not be listed.

  run_isolated.py --self-test FIXTURE

runs this runner over FIXTURE (tests/support/run_isolated_fixture.cpp: a passing, an
aborting, a hanging and a failing test) with a 3 s timeout, and checks that the summary names
the crash, the hang and the failure and that the passing test still ran (it writes a file
into $QD_RUNNER_SELFTEST_DIR, which also shows the environment reached it); then runs the
passing test alone with --fail-on-output set to a line it prints, and checks that it failed.

Python 3 standard library only.
"""

import argparse
import concurrent.futures
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

DEFAULT_TIMEOUT = 120.0
OUTPUT_TAIL_LINES = 200


def timeout_multiplier():
    raw = os.environ.get("QD_TEST_TIMEOUT_MULTIPLIER", "")
    if not raw:
        return 1.0
    try:
        value = float(raw)
    except ValueError:
        sys.exit("run_isolated: QD_TEST_TIMEOUT_MULTIPLIER=%r is not a number" % raw)
    if value <= 0:
        sys.exit("run_isolated: QD_TEST_TIMEOUT_MULTIPLIER must be positive")
    return value


def list_tests(binary, gtest_filter, extra):
    """The full names (Suite.Name) the binary would run, in its order."""
    cmd = [binary, "--gtest_list_tests"]
    if gtest_filter:
        cmd.append("--gtest_filter=" + gtest_filter)
    try:
        out = subprocess.run(cmd + extra, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             timeout=120, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise RuntimeError("cannot list the tests of %s: %s" % (binary, e))
    text = out.stdout.decode("utf-8", "replace")
    if out.returncode != 0:
        raise RuntimeError("%s --gtest_list_tests exited with %d:\n%s"
                           % (binary, out.returncode, text))
    tests = []
    suite = None
    for line in text.splitlines():
        if not line.strip():
            continue
        if not line.startswith(" "):
            # "Suite." or "Backends/Suite.  # TypeParam = ..."; anything else is not ours
            # (a program that prints before main), and is ignored.
            name = line.split("#", 1)[0].strip()
            suite = name if name.endswith(".") else None
            continue
        if suite is None:
            continue
        name = line.split("#", 1)[0].strip()
        if not name:
            continue
        if suite.startswith("DISABLED_") or name.startswith("DISABLED_"):
            continue  # gtest does not run these by default either
        tests.append(suite + name)
    return tests


class Result:
    def __init__(self, name, outcome, detail, seconds, output):
        self.name = name
        self.outcome = outcome  # passed, skipped, failed, crashed, timeout, notrun
        self.detail = detail
        self.seconds = seconds
        self.output = output


def signal_name(number):
    try:
        return signal.Signals(number).name
    except ValueError:
        return "signal %d" % number


def run_one(binary, name, extra, timeout, fail_on_output=""):
    cmd = [binary, "--gtest_filter=" + name] + extra
    start = time.monotonic()
    try:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    except OSError as e:
        return Result(name, "failed", "cannot start: %s" % e, 0.0, "")
    try:
        out, _ = proc.communicate(timeout=timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        timed_out = True
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # the test and any child it started
        except ProcessLookupError:
            pass
        try:
            out, _ = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            # A descendant left the process group and holds the pipe: give up on the output.
            proc.kill()
            out = b""
    seconds = time.monotonic() - start
    text = out.decode("utf-8", "replace")
    if timed_out:
        return Result(name, "timeout", "timed out after %g s (killed)" % timeout, seconds, text)
    rc = proc.returncode
    if rc < 0:
        return Result(name, "crashed", "killed by %s" % signal_name(-rc), seconds, text)
    if rc != 0:
        return Result(name, "failed", "exit status %d" % rc, seconds, text)
    if "[  SKIPPED ] 1 test" in text:
        return Result(name, "skipped", "", seconds, text)
    if fail_on_output and fail_on_output in text:
        return Result(name, "failed", "printed %r" % fail_on_output, seconds, text)
    if "[  PASSED  ] 1 test" in text:
        return Result(name, "passed", "", seconds, text)
    return Result(name, "notrun", "exit status 0 but the test did not run", seconds, text)


def tail(text, lines):
    parts = text.rstrip("\n").splitlines()
    if len(parts) <= lines:
        return "\n".join(parts)
    return "... (%d lines left out)\n%s" % (len(parts) - lines, "\n".join(parts[-lines:]))


def skip_reason(text):
    # gtest prints the GTEST_SKIP message on the line(s) before "[  SKIPPED ]".
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("[  SKIPPED ]") and i > 0:
            reason = lines[i - 1].strip()
            return reason if not reason.startswith("[") else ""
    return ""


def run_all(binary, tests, extra, timeout, jobs, fail_on_output=""):
    results = []
    lock = threading.Lock()
    width = len(str(len(tests)))
    labels = {"passed": "PASS", "skipped": "SKIP", "failed": "FAIL", "crashed": "CRASH",
              "timeout": "TIMEOUT", "notrun": "NOT RUN"}

    def report(result):
        with lock:
            results.append(result)
            line = "[%*d/%d] %-7s %s (%.2f s)" % (width, len(results), len(tests),
                                                   labels[result.outcome], result.name,
                                                   result.seconds)
            if result.outcome == "skipped":
                reason = skip_reason(result.output)
                if reason:
                    line += ": " + reason
            elif result.outcome != "passed":
                line += ": " + result.detail
            print(line, flush=True)
            if result.outcome not in ("passed", "skipped"):
                print("---- output of %s ----\n%s\n---- end of %s ----"
                      % (result.name, tail(result.output, OUTPUT_TAIL_LINES), result.name),
                      flush=True)

    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = [pool.submit(run_one, binary, t, extra, timeout, fail_on_output)
                   for t in tests]
        for f in concurrent.futures.as_completed(futures):
            report(f.result())
    order = {t: i for i, t in enumerate(tests)}
    results.sort(key=lambda r: order[r.name])
    return results


def summarize(binary, results, timeout):
    count = {}
    for r in results:
        count[r.outcome] = count.get(r.outcome, 0) + 1
    print("\n== run_isolated: %s: %d tests, %d passed, %d skipped, %d failed, %d crashed, "
          "%d timed out, %d not run (per-test timeout %g s)"
          % (os.path.basename(binary), len(results), count.get("passed", 0),
             count.get("skipped", 0), count.get("failed", 0), count.get("crashed", 0),
             count.get("timeout", 0), count.get("notrun", 0), timeout))
    headings = [("failed", "FAILED"), ("crashed", "CRASHED"), ("timeout", "TIMED OUT"),
                ("notrun", "NOT RUN")]
    bad = False
    for outcome, heading in headings:
        for r in results:
            if r.outcome == outcome:
                print("%s: %s (%s)" % (heading, r.name, r.detail))
                bad = True
    return 1 if bad else 0


def self_test(fixture):
    """Runs this runner over the fixture binary in a child process and checks its report."""
    problems = []
    with tempfile.TemporaryDirectory(prefix="qd-runner-selftest-") as tmp:
        env = dict(os.environ, QD_RUNNER_SELFTEST_DIR=tmp, QD_TEST_TIMEOUT_MULTIPLIER="1")
        cmd = [sys.executable, os.path.abspath(__file__), "--timeout", "3", "--jobs", "1",
               fixture]
        start = time.monotonic()
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                              timeout=120, check=False)
        seconds = time.monotonic() - start
        out = proc.stdout.decode("utf-8", "replace")
        print(out)
        passed_marker = os.path.exists(os.path.join(tmp, "passes_ran"))
    expect_lines = [
        "CRASHED: RunnerFixture.Aborts (killed by SIGABRT)",
        "TIMED OUT: RunnerFixture.HangsOnABlockingWait (timed out after 3 s (killed))",
        "FAILED: RunnerFixture.Fails (exit status 1)",
    ]
    summary = out[out.find("== run_isolated:"):] if "== run_isolated:" in out else ""
    if not summary:
        problems.append("no summary line")
    for line in expect_lines:
        if line not in summary.splitlines():
            problems.append("the summary lacks %r" % line)
    if "RunnerFixture.Passes" in summary:
        problems.append("the summary names the passing test")
    if "4 tests, 1 passed, 0 skipped, 1 failed, 1 crashed, 1 timed out, 0 not run" not in summary:
        problems.append("the summary's counts are wrong")
    if not any(l.startswith("[") and "PASS    RunnerFixture.Passes" in l for l in out.splitlines()):
        problems.append("no PASS line for RunnerFixture.Passes")
    if not passed_marker:
        problems.append("RunnerFixture.Passes did not run after the crash and the hang (or the "
                        "environment did not reach it): no passes_ran file")
    if proc.returncode != 1:
        problems.append("exit status %d, expected 1" % proc.returncode)
    if seconds > 60:
        problems.append("took %.0f s: the hang was not cut at its 3 s timeout" % seconds)
    # --fail-on-output: the passing test fails once its output must not contain what it prints.
    with tempfile.TemporaryDirectory(prefix="qd-runner-selftest-") as tmp:
        env = dict(os.environ, QD_RUNNER_SELFTEST_DIR=tmp, QD_TEST_TIMEOUT_MULTIPLIER="1")
        env.pop("QD_TEST_FAIL_ON_OUTPUT", None)
        printed = "[ RUN      ] RunnerFixture.Passes"
        cmd = [sys.executable, os.path.abspath(__file__), "--timeout", "30", "--jobs", "1",
               "--filter", "RunnerFixture.Passes", "--fail-on-output", printed, fixture]
        proc2 = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                               timeout=120, check=False)
        out2 = proc2.stdout.decode("utf-8", "replace")
        print(out2)
    if ("FAILED: RunnerFixture.Passes (printed %r)" % printed) not in out2.splitlines() or \
            proc2.returncode != 1:
        problems.append("--fail-on-output did not fail the test that printed its text")
    if problems:
        for p in problems:
            print("run_isolated self-test: FAILED: " + p)
        return 1
    print("run_isolated self-test: passed (crash, hang and failure named; the pass ran; "
          "--fail-on-output failed a test; %.1f s)" % seconds)
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT)
    parser.add_argument("--jobs", type=int, default=0)
    parser.add_argument("--filter", default="")
    parser.add_argument("--fail-on-output", default=os.environ.get("QD_TEST_FAIL_ON_OUTPUT", ""))
    parser.add_argument("--self-test", action="store_true")
    parser.add_argument("binary")
    parser.add_argument("args", nargs=argparse.REMAINDER)
    opts = parser.parse_args()
    if opts.args and opts.args[0] != "--":
        parser.error("options go before BINARY; arguments for the tests go after '--' (got %r)"
                     % opts.args[0])
    extra = opts.args[1:]
    binary = os.path.abspath(opts.binary)
    if opts.self_test:
        return self_test(binary)
    jobs = opts.jobs or int(os.environ.get("QD_TEST_JOBS", "0") or 0) or os.cpu_count() or 1
    timeout = opts.timeout * timeout_multiplier()
    try:
        tests = list_tests(binary, opts.filter, extra)
    except RuntimeError as e:
        print("run_isolated: %s" % e, flush=True)
        return 2
    if not tests:
        print("run_isolated: %s lists no test%s" % (binary, " matching " + opts.filter
                                                     if opts.filter else ""))
        return 2
    print("run_isolated: %s: %d tests, %d at a time, %g s each at most"
          % (binary, len(tests), jobs, timeout), flush=True)
    if opts.fail_on_output:
        print("run_isolated: a test that prints %r fails" % opts.fail_on_output, flush=True)
    results = run_all(binary, tests, extra, timeout, jobs, opts.fail_on_output)
    return summarize(binary, results, timeout)


if __name__ == "__main__":
    sys.exit(main())
