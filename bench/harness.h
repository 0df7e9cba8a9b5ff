// bench/harness.h: the small timing harness shared by qd's benchmarks (B1..B7).
//
// Why not Google Benchmark: our figures are ratios of qd against an anchor measured in the same
// process, with the two alternated repeat by repeat so that a noisy, shared machine slows both
// alike (see docs/benchmarks.md and bench/README.md). Google Benchmark runs one
// benchmark to completion before the next and reports each on its own, so it cannot interleave
// two measurements or print a ratio line with a bar. This header does just that and no more:
//
//   - warm-up repeats that are run and thrown away;
//   - at least 5 timed repeats, alternating qd and anchor (ABAB..., with the order flipped on
//     every other repeat: AB BA AB ...), reported as medians;
//   - one line per figure:
//       B7 <name>: qd <v> <unit> | anchor <v> <unit> | ratio <x> | bar <text> | PASS/MISS
//     plus '#'-prefixed detail lines (spread of the samples), and a final summary table.
//
// Header-only, C++17, std::chrono::steady_clock. Each timed callable returns its own figure (a
// double, e.g. ns per call), so it can stop its clock before any final synchronisation.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace qdbench {

using Clock = std::chrono::steady_clock;

inline double elapsed_ns(Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double, std::nano>(b - a).count();
}

// Busy-wait (never sleeps) for ns nanoseconds of steady_clock time.
inline void spin_for_ns(double ns) {
    const auto end = Clock::now() + std::chrono::nanoseconds(static_cast<long long>(ns));
    while (Clock::now() < end) {
    }
}

inline double median(std::vector<double> v) {
    if (v.empty()) return NAN;
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

inline double min_of(const std::vector<double> &v) {
    return v.empty() ? NAN : *std::min_element(v.begin(), v.end());
}
inline double max_of(const std::vector<double> &v) {
    return v.empty() ? NAN : *std::max_element(v.begin(), v.end());
}

// Command line shared by every benchmark binary:
//   --repeats N   timed repeats per figure (default 7, never fewer than 5)
//   --warmup N    warm-up repeats per figure (default 1, at least 1)
//   --filter S    run only figures whose name contains S
//   --quiet       no '#' detail lines
//   --workers N   (CPU benchmarks) cpu_worker_threads of the contexts; 0 = the library default.
//                 Use it with taskset on a machine with more cores, e.g.
//                 `taskset -c 0,1 bench_cpu --workers 2` to reproduce a 2-core machine.
//   --side S      qd or anchor: time only that side of each alternated figure, so that a
//                 profiler (`perf record`) sees one side's calls alone; the other side's figure,
//                 the ratio and the verdict then read nan/MISS. For profiles, never for figures.
struct Options {
    int repeats = 7;
    int warmup = 1;
    std::string filter;
    bool quiet = false;
    int workers = 0;
    std::string side;  // "", "qd" or "anchor"

    // Returns false (after printing usage) on a bad command line.
    bool parse(int argc, char **argv) {
        for (int i = 1; i < argc; ++i) {
            const char *a = argv[i];
            auto next = [&](const char *flag) -> const char * {
                if (i + 1 >= argc) {
                    std::fprintf(stderr, "%s needs a value\n", flag);
                    return nullptr;
                }
                return argv[++i];
            };
            if (!std::strcmp(a, "--repeats")) {
                const char *v = next(a);
                if (!v) return usage(argv[0]);
                repeats = std::max(5, std::atoi(v));
            } else if (!std::strcmp(a, "--warmup")) {
                const char *v = next(a);
                if (!v) return usage(argv[0]);
                warmup = std::max(1, std::atoi(v));
            } else if (!std::strcmp(a, "--filter")) {
                const char *v = next(a);
                if (!v) return usage(argv[0]);
                filter = v;
            } else if (!std::strcmp(a, "--workers")) {
                const char *v = next(a);
                if (!v) return usage(argv[0]);
                workers = std::max(0, std::atoi(v));
            } else if (!std::strcmp(a, "--side")) {
                const char *v = next(a);
                if (!v || (std::strcmp(v, "qd") && std::strcmp(v, "anchor"))) return usage(argv[0]);
                side = v;
            } else if (!std::strcmp(a, "--quiet")) {
                quiet = true;
            } else {
                return usage(argv[0]);
            }
        }
        return true;
    }
    bool selected(const std::string &name) const {
        return filter.empty() || name.find(filter) != std::string::npos;
    }

  private:
    static bool usage(const char *prog) {
        std::fprintf(stderr,
                     "usage: %s [--repeats N>=5] [--warmup N>=1] [--filter SUBSTRING] [--quiet] "
                     "[--workers N] [--side qd|anchor]\n",
                     prog);
        return false;
    }
};

// Samples of the two sides of one figure.
struct Samples {
    std::vector<double> qd;
    std::vector<double> anchor;
};

// Run `warmup` untimed rounds, then `repeats` timed rounds of qd_fn and anchor_fn, alternating
// them and flipping the order every other round (qd,anchor / anchor,qd / ...). Each callable
// returns its own measurement (e.g. ns per operation).
template <class QdFn, class AnchorFn>
Samples alternate(const Options &opt, QdFn &&qd_fn, AnchorFn &&anchor_fn) {
    Samples s;
    const bool qd_side = opt.side != "anchor", anchor_side = opt.side != "qd";
    if (!qd_side || !anchor_side) {  // --side: one side alone, for a profiler
        for (int r = 0; r < opt.warmup + opt.repeats; ++r) {
            const double v = qd_side ? qd_fn() : anchor_fn();
            if (r >= opt.warmup) (qd_side ? s.qd : s.anchor).push_back(v);
        }
        return s;
    }
    for (int w = 0; w < opt.warmup; ++w) {
        (void)qd_fn();
        (void)anchor_fn();
    }
    for (int r = 0; r < opt.repeats; ++r) {
        if (r % 2 == 0) {
            s.qd.push_back(qd_fn());
            s.anchor.push_back(anchor_fn());
        } else {
            s.anchor.push_back(anchor_fn());
            s.qd.push_back(qd_fn());
        }
    }
    return s;
}

// Paired statistics of alternated samples: the two sides of one round ran back to back, so
// their difference and ratio cancel the slow drift of a shared machine (and of a driver's queue
// state) that the medians of each side keep. Used where the bar is a small margin over the
// anchor (B1: +100 ns on a 3.5 us launch; B6: 1.1x).
inline double median_paired_difference(const Samples &s) {
    std::vector<double> d;
    for (size_t i = 0; i < s.qd.size() && i < s.anchor.size(); ++i)
        d.push_back(s.qd[i] - s.anchor[i]);
    return median(d);
}
inline double median_paired_ratio(const Samples &s) {
    std::vector<double> r;
    for (size_t i = 0; i < s.qd.size() && i < s.anchor.size(); ++i)
        r.push_back(s.qd[i] / s.anchor[i]);
    return median(r);
}

// Same without an anchor.
template <class Fn>
std::vector<double> repeat(const Options &opt, Fn &&fn) {
    std::vector<double> v;
    for (int w = 0; w < opt.warmup; ++w) (void)fn();
    for (int r = 0; r < opt.repeats; ++r) v.push_back(fn());
    return v;
}

enum class Verdict { Pass, Miss, Info };

inline const char *verdict_name(Verdict v) {
    switch (v) {
    case Verdict::Pass: return "PASS";
    case Verdict::Miss: return "MISS";
    default: return "INFO";
    }
}

// One printed figure. Values are medians.
struct Figure {
    std::string bench;  // "B7"
    std::string name;   // "enqueue/launch-0args"
    double qd = NAN;
    std::string unit;  // "ns", "us", "ms", "x"
    bool has_anchor = false;
    double anchor = NAN;
    std::string anchor_unit;
    bool has_ratio = false;
    double ratio = NAN;  // qd / anchor unless the bar says otherwise (e.g. a speedup)
    std::string bar;     // "<= 100 ns"; "" = informational
    Verdict verdict = Verdict::Info;
};

inline std::string fmt(double v) {
    char buf[64];
    if (std::isnan(v)) return "-";
    const double a = std::fabs(v);
    if (a >= 1000)
        std::snprintf(buf, sizeof buf, "%.0f", v);
    else if (a >= 100)
        std::snprintf(buf, sizeof buf, "%.1f", v);
    else if (a >= 10)
        std::snprintf(buf, sizeof buf, "%.2f", v);
    else
        std::snprintf(buf, sizeof buf, "%.3f", v);
    return buf;
}

class Report {
  public:
    explicit Report(const Options &opt) : opt_(opt) {}

    // Print the figure's line (and, unless quiet, the spread of its samples) and keep it for
    // the summary.
    void add(const Figure &f, const Samples *s = nullptr) {
        std::string anchor = f.has_anchor ? fmt(f.anchor) + " " + f.anchor_unit : "-";
        std::string ratio = f.has_ratio ? fmt(f.ratio) : "-";
        std::printf("%s %s: qd %s %s | anchor %s | ratio %s | bar %s | %s\n", f.bench.c_str(),
                    f.name.c_str(), fmt(f.qd).c_str(), f.unit.c_str(), anchor.c_str(),
                    ratio.c_str(), f.bar.empty() ? "-" : f.bar.c_str(), verdict_name(f.verdict));
        if (s && !opt_.quiet) {
            detail("qd", s->qd);
            detail("anchor", s->anchor);
        }
        std::fflush(stdout);
        figures_.push_back(f);
    }

    void note(const char *text) {
        std::printf("# %s\n", text);
        std::fflush(stdout);
    }

    void summary() const {
        std::printf("\n| figure | qd | anchor | ratio | bar | verdict |\n");
        std::printf("|---|---|---|---|---|---|\n");
        for (const Figure &f : figures_) {
            std::string anchor = f.has_anchor ? fmt(f.anchor) + " " + f.anchor_unit : "-";
            std::printf("| %s %s | %s %s | %s | %s | %s | %s |\n", f.bench.c_str(), f.name.c_str(),
                        fmt(f.qd).c_str(), f.unit.c_str(), anchor.c_str(),
                        f.has_ratio ? fmt(f.ratio).c_str() : "-",
                        f.bar.empty() ? "-" : f.bar.c_str(), verdict_name(f.verdict));
        }
        std::printf("\n%d figure(s) with a bar: %d PASS, %d MISS\n", passes() + misses(), passes(),
                    misses());
        std::fflush(stdout);
    }

    int misses() const { return count(Verdict::Miss); }
    int passes() const { return count(Verdict::Pass); }

  private:
    void detail(const char *side, const std::vector<double> &v) const {
        if (v.empty()) return;
        std::printf("#   %-6s n=%zu median %s min %s max %s :", side, v.size(),
                    fmt(median(v)).c_str(), fmt(min_of(v)).c_str(), fmt(max_of(v)).c_str());
        const size_t shown = std::min<size_t>(v.size(), 40);
        for (size_t i = 0; i < shown; ++i) std::printf(" %s", fmt(v[i]).c_str());
        std::printf(shown < v.size() ? " ...\n" : "\n");
    }
    int count(Verdict v) const {
        int n = 0;
        for (const Figure &f : figures_) n += f.verdict == v;
        return n;
    }

    const Options &opt_;
    std::vector<Figure> figures_;
};

}  // namespace qdbench
