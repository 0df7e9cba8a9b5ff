#!/usr/bin/env python3
"""tools/bench-guard on captured logs: each parser, the comparison, and the command line.

usage: test_bench_guard.py [PATH_TO_TOOLS_BENCH_GUARD]  (meson passes it; default ../../tools)
"""

import importlib.machinery
import importlib.util
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
from contextlib import redirect_stderr, redirect_stdout

HERE = os.path.dirname(os.path.abspath(__file__))
TOOL = os.path.join(HERE, "..", "..", "tools", "bench-guard")
SAMPLE = os.path.join(HERE, "gpu-check-h100")  # a tools/gpu-check output folder, trimmed
BASELINES = os.path.join(HERE, "baseline")  # a baseline made for these tests
CPU_LOG = os.path.join(HERE, "bench_cpu.log")  # bench_cpu --repeats 5 --quiet, this tree


def load_tool(path):
    loader = importlib.machinery.SourceFileLoader("bench_guard", path)
    spec = importlib.util.spec_from_loader("bench_guard", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def read(name, folder=SAMPLE):
    with open(os.path.join(folder, name), encoding="utf-8") as f:
        return f.readlines()


def raw_bytes(path):
    with open(path, "rb") as f:
        return f.read()


class Parsers(unittest.TestCase):
    def test_harness_line_with_a_ratio_gives_the_ratio(self):
        figs = g.parse_lines(read("06-bench.log"))
        self.assertEqual(figs["B1 launch/0args"], {"value": 1.027, "unit": "x",
                                                   "lower_is_better": True})
        self.assertEqual(figs["B6 record+wait"]["value"], 1.29)

    def test_harness_line_without_an_anchor_gives_its_own_value_and_unit(self):
        figs = g.parse_lines(read("06-bench.log"))
        self.assertEqual(figs["B4 active-stream-get+set"], {"value": 11.3, "unit": "ns",
                                                            "lower_is_better": True})

    def test_bar_in_time_judges_the_figures_own_value_not_the_ratio(self):
        figs = g.parse_lines(read("11-b7.log"))
        self.assertEqual(figs["B7 enqueue/launch-0args"], {"value": 48.0, "unit": "ns",
                                                           "lower_is_better": True})
        # A bar of a ratio, or none, judges the ratio.
        self.assertEqual(figs["B7 wake/event-hop"]["unit"], "x")
        cpu = g.parse_lines(read(os.path.basename(CPU_LOG), HERE))
        self.assertEqual(cpu["B7 forkjoin/8"]["unit"], "us")
        self.assertEqual(cpu["B7 graph/replay-64x8"]["unit"], "x")

    def test_small_printed_ratio_is_taken_from_the_two_values(self):
        figs = g.parse_lines(read("06-bench.log") + read("11-b7.log"))
        self.assertAlmostEqual(figs["B3 stream-acquire+release"]["value"], 38.1 / 5753, places=6)
        self.assertAlmostEqual(figs["B7 wake/event-hop"]["value"], 257.0 / 6281, places=5)

    def test_bar_starting_with_at_least_wants_the_value_higher(self):
        figs = g.parse_lines(read("11-b7.log"))
        self.assertFalse(figs["B7 fanout/8x1ms"]["lower_is_better"])
        self.assertTrue(figs["B7 enqueue/launch-0args"]["lower_is_better"])
        line = ("B10 peer-copy-256MiB: qd 40.00 GB/s | anchor 40.50 GB/s | ratio 0.988 | "
                "bar >= 0.98x the raw bandwidth (paired) | PASS")
        self.assertFalse(g.parse_lines([line])["B10 peer-copy-256MiB"]["lower_is_better"])
        # "<= 50 ns and >= 100x cheaper": the first comparison decides.
        self.assertTrue(g.parse_lines(read("06-bench.log"))["B3 stream-acquire+release"]
                        ["lower_is_better"])

    def test_b5g_bar_text_of_bench_gpu_parses(self):
        figs = g.parse_lines(read("06-bench.log"))
        self.assertEqual(figs["B5g fanout-64x20us/K=8 vs-dag"]["value"], 0.813)
        self.assertEqual(figs["B5g fanout-64x20us/K=8 vs-graph"]["value"], 1.0)

    def test_summary_table_skip_lines_and_notes_give_no_figure(self):
        figs = g.parse_lines(["| B1 launch/0args | 3526 ns | 3433 ns | 1.027 | x | PASS |",
                              "SKIP B10: needs 2 GPUs (this machine has 1)",
                              "# B5g note", "7 figure(s) with a bar: 5 PASS, 2 MISS"])
        self.assertEqual(figs, {})

    def test_b2_lines_are_keyed_by_their_ffi_mode(self):
        figs = g.parse_lines(read("10-b2.log"))
        self.assertEqual(figs["B2 ctypes+speedups: launch 8 args, pre-packed"]["value"], 0.584)
        self.assertEqual(figs["B2 ctypes: launch 8 args, pre-packed"]["value"], 0.588)
        self.assertAlmostEqual(figs["B2 ctypes+speedups: active stream get+set (B4)"]["value"],
                               0.756 / 7.664, places=4)

    def test_b2_mixed_and_signature_lines_give_ratios_and_record_time(self):
        figs = g.parse_lines(read("10-b2.log"))
        self.assertAlmostEqual(
            figs["B2 ctypes+speedups: launch 3 mixed args, plain / pre-packed"]["value"],
            7.1 / 6.0, places=3)
        self.assertAlmostEqual(
            figs["B2 ctypes+speedups: launch 3 args, two signatures in turn / one"]["value"],
            7.7 / 6.5, places=3)
        self.assertEqual(figs["B2 ctypes+speedups: s.record()"],
                         {"value": 7.3, "unit": "us", "lower_is_better": True})

    def test_b2_log_of_this_tree_on_the_cpu_gives_times_where_no_anchor_ran(self):
        figs = g.parse_lines(read("b2_cpu.log", HERE))
        self.assertEqual(figs["B2 cffi: launch 8 args, pre-packed"],
                         {"value": 1.085, "unit": "us", "lower_is_better": True})
        self.assertAlmostEqual(figs["B2 cffi: launch 8 mixed args, plain / pre-packed"]["value"],
                               2.071 / 1.055, places=3)
        self.assertEqual(len(figs), 14)

    def test_b2_floor_anchor_and_skip_lines_are_not_figures(self):
        keys = g.parse_lines(read("10-b2.log")).keys()
        self.assertFalse([k for k in keys if "(floor)" in k or "(anchor)" in k or "SKIP" in k])

    def test_rust_b8_gives_the_median_ratio_of_each_figure(self):
        figs = g.parse_lines(read("12-bindings.log"))
        self.assertEqual(figs["B8 Rust: no-op call: qd_stream_query on an idle stream"]["value"],
                         1.039)
        self.assertEqual(figs["B8 Rust: launch of an empty host kernel, safe Stream::launch_host "
                              "of a Rust closure"]["value"], 1.023)

    def test_go_b8_is_the_ratio_of_the_two_medians(self):
        figs = g.parse_lines(read("12-bindings.log"))
        self.assertAlmostEqual(figs["B8 Go: StreamQuery, package / bare cgo (medians)"]["value"],
                               103.0 / 101.0, places=4)

    def test_env_log_names_device_commit_and_date(self):
        env = g.parse_env(read("01-env.log"))
        self.assertEqual(env, {"date": "2026-11-26T15:04:05Z", "commit": "4c2c729",
                               "gpu": "NVIDIA H100 80GB HBM3"})
        self.assertEqual(g.slug(env["gpu"]), "nvidia-h100-80gb-hbm3")

    def test_bench_cpu_log_of_this_tree_parses_every_b7_figure(self):
        figs = g.parse_lines(read(os.path.basename(CPU_LOG), HERE))
        for name in ("enqueue/launch-0args", "wake/event-hop", "forkjoin/8", "fanout/8x1ms",
                     "graph/replay-64x8", "sync/idle"):
            self.assertIn("B7 " + name, figs)
        self.assertFalse(figs["B7 fanout/8x1ms"]["lower_is_better"])


class Comparison(unittest.TestCase):
    base = {"figures": {
        "low": {"value": 1.0, "unit": "x", "lower_is_better": True},
        "high": {"value": 2.0, "unit": "x", "lower_is_better": False},
        "gone": {"value": 1.0, "unit": "x", "lower_is_better": True}}}

    def verdicts(self, low, high):
        now = {"low": {"value": low, "unit": "x", "lower_is_better": True},
               "high": {"value": high, "unit": "x", "lower_is_better": False},
               "fresh": {"value": 5.0, "unit": "ns", "lower_is_better": True}}
        return {r[0]: r[4] for r in g.compare(now, self.base)}

    def test_more_than_ten_percent_worse_is_a_regression_either_way(self):
        v = self.verdicts(low=1.11, high=1.79)
        self.assertEqual(v["low"], "REGRESSION")
        self.assertEqual(v["high"], "REGRESSION")

    def test_within_ten_percent_is_ok_and_beyond_it_better_is_better(self):
        v = self.verdicts(low=1.09, high=1.81)
        self.assertEqual((v["low"], v["high"]), ("ok", "ok"))
        v = self.verdicts(low=0.85, high=2.5)
        self.assertEqual((v["low"], v["high"]), ("better", "better"))

    def test_new_and_not_run_figures_are_named_not_compared(self):
        v = self.verdicts(low=1.0, high=2.0)
        self.assertEqual((v["fresh"], v["gone"]), ("new", "not run"))

    def test_no_baseline_compares_nothing(self):
        rows = g.compare({"a": {"value": 1.0, "unit": "x", "lower_is_better": True}}, None)
        self.assertEqual([r[4] for r in rows], ["new"])


class CommandLine(unittest.TestCase):
    def run_tool(self, *args):
        out, err = io.StringIO(), io.StringIO()
        with redirect_stdout(out), redirect_stderr(err):
            status = g.main(list(args))
        return status, out.getvalue(), err.getvalue()

    def test_regression_is_printed_and_exit_status_stays_zero(self):
        status, out, _ = self.run_tool("--baseline-dir", BASELINES, SAMPLE)
        self.assertEqual(status, 0)
        self.assertIn("| B6 record+wait | 1.290 x | 1.100 x | +17.3% | aaaaaaa 2026-11-20 | "
                      "REGRESSION |", out)
        self.assertIn("bench-guard: REGRESSION   B7 fanout/8x1ms", out)
        self.assertIn("bench-guard: REGRESSION: 2 figure(s) more than 10% worse", out)
        self.assertIn("not in this run (1 of the baseline): B10 peer-copy-256MiB", out)

    def test_folder_reads_the_figure_steps_and_no_other(self):
        figs, env, used = g.collect([SAMPLE])
        self.assertEqual(sorted(os.path.basename(u) for u in used),
                         ["06-bench.log", "10-b2.log", "11-b7.log", "12-bindings.log",
                          "13-multigpu.log"])
        self.assertEqual(figs["B10 cross-device-wait"]["value"], 1.04)  # multigpu
        self.assertEqual(figs["B1 launch/0args"]["value"], 1.027)  # not 05-gpu-tests.log's
        self.assertEqual(env["commit"], "4c2c729")

    def test_strict_exits_one_on_a_regression(self):
        self.assertEqual(self.run_tool("--strict", "--baseline-dir", BASELINES, SAMPLE)[0], 1)

    def test_no_baseline_for_the_kind_says_so_and_prints_the_figures(self):
        status, out, _ = self.run_tool("--baseline-dir", BASELINES, "--kind", "Some GPU", SAMPLE)
        self.assertEqual(status, 0)
        self.assertIn("no baseline for some-gpu", out)
        self.assertIn("| B6 record+wait | 1.290 x | - | - | - | new |", out)
        self.assertNotIn("REGRESSION", out)

    def test_update_writes_this_run_keeps_the_rest_and_then_nothing_regresses(self):
        tmp = tempfile.mkdtemp()
        try:
            shutil.copy(os.path.join(BASELINES, "nvidia-h100-80gb-hbm3.json"), tmp)
            status, out, _ = self.run_tool("--update", "--baseline-dir", tmp, SAMPLE)
            self.assertEqual(status, 0)
            self.assertIn("REGRESSION", out)  # the comparison is shown before the update
            self.assertIn("commit 4c2c729, 2026-11-26), 1 kept from before", out)
            with open(os.path.join(tmp, "nvidia-h100-80gb-hbm3.json"), encoding="utf-8") as f:
                data = json.load(f)
            rec = data["figures"]["B6 record+wait"]
            self.assertEqual((rec["value"], rec["commit"], rec["date"]), (1.29, "4c2c729",
                                                                          "2026-11-26"))
            self.assertEqual(data["figures"]["B10 peer-copy-256MiB"]["commit"], "aaaaaaa")
            status, out, _ = self.run_tool("--baseline-dir", tmp, SAMPLE)
            self.assertNotIn("REGRESSION", out)
        finally:
            shutil.rmtree(tmp)

    def test_without_update_the_baseline_is_never_written(self):
        path = os.path.join(BASELINES, "nvidia-h100-80gb-hbm3.json")
        before = raw_bytes(path)
        self.run_tool("--baseline-dir", BASELINES, SAMPLE)
        self.assertEqual(raw_bytes(path), before)

    def test_bad_input_gets_status_two_and_a_message(self):
        status, _, err = self.run_tool("--baseline-dir", BASELINES, "/no/such/log")
        self.assertEqual((status, err.strip()), (2, "bench-guard: /no/such/log: no such file "
                                                    "or folder"))
        status, _, err = self.run_tool(os.path.join(SAMPLE, "06-bench.log"))
        self.assertEqual(status, 2)
        self.assertIn("no device name", err)
        tmp = tempfile.mkdtemp()
        try:
            with open(os.path.join(tmp, "x.json"), "w", encoding="utf-8") as f:
                f.write("{not json")
            status, _, err = self.run_tool("--baseline-dir", tmp, "--kind", "x", SAMPLE)
            self.assertEqual(status, 2)
            self.assertIn("not a readable JSON baseline", err)
        finally:
            shutil.rmtree(tmp)

    def test_update_with_no_figure_writes_nothing(self):
        tmp = tempfile.mkdtemp()
        try:
            empty = os.path.join(tmp, "empty.log")
            open(empty, "w").close()
            status, _, err = self.run_tool("--update", "--baseline-dir", tmp, "--kind", "x", empty)
            self.assertEqual(status, 2)
            self.assertIn("--update with no figure", err)
            self.assertFalse(os.path.exists(os.path.join(tmp, "x.json")))
        finally:
            shutil.rmtree(tmp)

    def test_the_script_runs_as_a_program(self):
        r = subprocess.run([sys.executable, TOOL, "--baseline-dir", BASELINES, SAMPLE],
                           capture_output=True, text=True, check=False)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("REGRESSION", r.stdout)


if __name__ == "__main__":
    if len(sys.argv) > 1 and not sys.argv[1].startswith("-"):
        TOOL = os.path.abspath(sys.argv.pop(1))
    g = load_tool(TOOL)
    unittest.main(verbosity=1)
