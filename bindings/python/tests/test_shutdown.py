"""docs/reliability.md, category 12: programs that exit with live contexts, pending work and
reference cycles. 100 runs in all (QD_SHUTDOWN_RUNS overrides; every scenario runs at least
once), spread over the scenarios of shutdown_scenarios.py, each in its own process: every one
must exit 0 with no "Exception ignored", no traceback and no signal. A failure names each
failed scenario with its stderr, in the assertion and on stderr (every one)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from conftest import subprocess_env

SCRIPT = Path(__file__).resolve().parent / "shutdown_scenarios.py"
RUNS = int(os.environ.get("QD_SHUTDOWN_RUNS", "100"))
BAD_WORDS = ("Exception ignored", "Traceback", "Fatal Python error", "Segmentation fault",
             "terminate called", "Aborted", "core dumped", "Error")
# The one thing a scenario may print: the warning for a callback exception left unreported on
# purpose (lost_context_and_errors), which must be there, once.
EXPECTED_WARNING = {"lost_context_and_errors": "RuntimeWarning: qd: a Python host callback or "
                                               "host kernel raised RuntimeError: never reported"}


def _scenarios():
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import importlib
        import shutdown_scenarios  # noqa: F401  (only the names; qd is already importable)
        return sorted(importlib.import_module("shutdown_scenarios").SCENARIOS)
    finally:
        sys.path.pop(0)


SCENARIO_NAMES = _scenarios()


def _run(name: str, module_path: str):
    """One scenario in its own process: (name, exit status or None on a timeout, stdout,
    stderr)."""
    try:
        proc = subprocess.run([sys.executable, str(SCRIPT), name, module_path],
                              env=subprocess_env(), capture_output=True, text=True, timeout=60,
                              cwd=str(SCRIPT.parent))
    except subprocess.TimeoutExpired as exc:
        def text(out) -> str:
            return out.decode(errors="replace") if isinstance(out, bytes) else (out or "")
        return name, None, text(exc.stdout), text(exc.stderr)
    return name, proc.returncode, proc.stdout, proc.stderr


def test_exit_with_live_objects_is_clean_every_time(cpu_module_path: str) -> None:
    # Every scenario runs at least once, however small QD_SHUTDOWN_RUNS is (the validation pass
    # of tools/test-all runs each once).
    names = [SCENARIO_NAMES[i % len(SCENARIO_NAMES)]
             for i in range(max(RUNS, len(SCENARIO_NAMES)))]
    failures = []
    with ThreadPoolExecutor(max_workers=max(2, min(8, (os.cpu_count() or 2) * 2))) as pool:
        for name, returncode, stdout, stderr in pool.map(lambda n: _run(n, cpu_module_path),
                                                          names):
            full_stderr = stderr
            problems = []
            if returncode is None:
                problems.append("did not exit within 60 s")
            elif returncode < 0:
                problems.append(f"killed by {signal.Signals(-returncode).name}")
            elif returncode != 0:
                problems.append(f"exit status {returncode}")
            if f"ok {name}" not in stdout:
                problems.append("did not reach the end of the scenario")
            expected = EXPECTED_WARNING.get(name)
            if expected is not None:
                if stderr.count(expected) != 1:
                    problems.append(f"stderr lacks the warning {expected!r}")
                # the warning's line and the source line Python shows under it
                lines = stderr.splitlines()
                keep = [ln for i, ln in enumerate(lines)
                        if expected not in ln and not (i and expected in lines[i - 1])]
                stderr = "\n".join(keep)
            problems += [f"stderr has {w!r}" for w in BAD_WORDS if w in stderr]
            if problems:
                failures.append(f"scenario {name} failed: {', '.join(problems)}\n"
                                f"--- stderr of scenario {name} (last 2000 characters) ---\n"
                                f"{full_stderr[-2000:]}")
    for failure in failures:  # every one in the log, whatever the assertion message keeps
        print(failure, file=sys.stderr)
    failed = sorted({f.split(" ", 2)[1] for f in failures})
    assert not failures, (f"{len(failures)} of {len(names)} runs failed, scenarios "
                          f"{', '.join(failed)}:\n" + "\n".join(failures[:5]))
