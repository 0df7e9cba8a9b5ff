// `qd bench`: run the benchmark suite that applies to this machine and print its figures
// against the bars (bench_cmd.cpp). Like the rest of the tool, only the public C API is used.
#pragma once

namespace qd_tool {

// argv holds the options after "bench". Returns the exit status (0: every suite ran; 1: a suite
// could not be found or failed; 2: usage error). Misses of a bar do not change it.
int bench_main(int argc, char **argv);

extern const char *const kBenchUsage;

}  // namespace qd_tool
