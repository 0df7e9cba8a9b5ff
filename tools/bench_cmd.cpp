// `qd bench`: the benchmark suites of bench/ (bench/README.md), chosen for this machine.
//
// The suites stay their own programs (bench_cpu: B7; bench_gpu: B1, B3-B6 against the raw
// driver, which it loads itself); `qd bench` finds them next to itself, runs them as child
// processes, reads their figure lines, shows a progress line on the terminal while they work,
// and prints one table against the bars at the end (--json FILE also writes the figures).
// Keeping them separate keeps the tool free of the benchmark harness and of the GPU bench's
// raw-driver code, and each suite still runs alone exactly as documented.
#include "bench_cmd.h"

#include <qd/qd.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

namespace qd_tool {

const char *const kBenchUsage =
    "  bench [options]      run the benchmarks that apply to this machine: B7 (bench_cpu)\n"
    "                       always, B1 and B3-B6 (bench_gpu) where a CUDA device is present;\n"
    "                       print every figure against its bar\n"
    "      --cpu | --gpu            only that suite\n"
    "      --repeats N              timed rounds per figure (>= 5; the suites' default 7)\n"
    "      --filter S               only figures whose name contains S\n"
    "      --json FILE              also write the figures as JSON (- for stdout)\n"
    "      --bench-dir DIR          where bench_cpu and gpu/bench_gpu are (default: the\n"
    "                               build tree's bench/ next to this qd, or $QD_BENCH_DIR)\n"
    "      --verbose                pass the suites' own output through\n";

namespace {

struct Figure {
    std::string suite, bench, name, qd, anchor, ratio, bar, verdict;
};

struct Suite {
    std::string name;  // "bench_cpu"
    std::string path;
};

std::string self_dir() {
    char buf[4096];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n <= 0) return ".";
    buf[n] = 0;
    std::string path(buf);
    size_t slash = path.rfind('/');
    return slash == std::string::npos ? "." : path.substr(0, slash);
}

bool executable(const std::string &path) { return access(path.c_str(), X_OK) == 0; }

// The bench directory: --bench-dir, $QD_BENCH_DIR, else <dir of qd>/../bench (the build tree:
// build/tools/qd and build/bench/bench_cpu), else <dir of qd> (binaries copied next to it).
std::string find_bench_dir(const std::string &given) {
    if (!given.empty()) return given;
    if (const char *env = std::getenv("QD_BENCH_DIR"); env && *env) return env;
    std::string here = self_dir();
    if (executable(here + "/../bench/bench_cpu")) return here + "/../bench";
    return here;
}

bool cuda_present() {
    uint32_t n = 0;
    return qd_device_count(QD_BACKEND_CUDA, &n) == QD_SUCCESS && n > 0;
}

std::string trim(std::string s) {
    size_t b = s.find_first_not_of(' ');
    size_t e = s.find_last_not_of(" \n");
    return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

// A figure line of bench/harness.h's Report::add:
//   "B7 enqueue/launch-0args: qd 41.2 ns | anchor - | ratio - | bar <= 100 ns | PASS"
bool parse_figure(const std::string &line, const std::string &suite, Figure &f) {
    if (line.size() < 3 || line[0] != 'B' || line.find(": qd ") == std::string::npos) return false;
    size_t colon = line.find(": qd ");
    std::string head = line.substr(0, colon);
    size_t space = head.find(' ');
    if (space == std::string::npos) return false;
    std::vector<std::string> parts;
    std::string rest = line.substr(colon + 5);
    size_t start = 0;
    while (true) {
        size_t bar = rest.find(" | ", start);
        parts.push_back(
            trim(rest.substr(start, bar == std::string::npos ? std::string::npos : bar - start)));
        if (bar == std::string::npos) break;
        start = bar + 3;
    }
    if (parts.size() != 5) return false;
    auto field = [](const std::string &p, const char *key) {
        size_t n = std::strlen(key);
        return p.compare(0, n, key) == 0 ? trim(p.substr(n)) : p;
    };
    f.suite = suite;
    f.bench = head.substr(0, space);
    f.name = head.substr(space + 1);
    f.qd = parts[0];
    f.anchor = field(parts[1], "anchor ");
    f.ratio = field(parts[2], "ratio ");
    f.bar = field(parts[3], "bar ");
    f.verdict = parts[4];
    return true;
}

std::string json_string(const std::string &s) {
    std::string out = "\"";
    for (char c : s) {
        if (c == '"' || c == '\\') {
            out += '\\';
            out += c;
        } else if (static_cast<unsigned char>(c) < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\u%04x", c);
            out += buf;
        } else {
            out += c;
        }
    }
    return out + "\"";
}

// "41.2 ns" -> 41.2 and "ns"; "-" -> null.
std::string json_value(const std::string &text, std::string *unit) {
    char *end = nullptr;
    double v = std::strtod(text.c_str(), &end);
    if (end == text.c_str() || std::isnan(v)) {
        if (unit) *unit = "";
        return "null";
    }
    if (unit) *unit = trim(end);
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.6g", v);
    return buf;
}

class Progress {
  public:
    Progress() : tty_(isatty(STDERR_FILENO)) {}
    void show(const std::string &text) {
        if (!tty_) return;
        std::string t = text.size() > 100 ? text.substr(0, 97) + "..." : text;
        std::fprintf(stderr, "\r\033[K%s", t.c_str());
        std::fflush(stderr);
    }
    void clear() {
        if (tty_) std::fprintf(stderr, "\r\033[K");
    }

  private:
    bool tty_;
};

// Run one suite, collecting its figures. Returns the child's exit status (127: not runnable).
int run_suite(const Suite &suite, const std::vector<std::string> &args, bool verbose,
              std::vector<Figure> &figures, Progress &progress) {
    int fds[2];
    if (pipe(fds) != 0) return 127;
    pid_t pid = fork();
    if (pid < 0) return 127;
    if (pid == 0) {
        dup2(fds[1], STDOUT_FILENO);
        close(fds[0]);
        close(fds[1]);
        std::vector<char *> argv;
        argv.push_back(const_cast<char *>(suite.path.c_str()));
        for (const std::string &a : args) argv.push_back(const_cast<char *>(a.c_str()));
        argv.push_back(nullptr);
        execv(suite.path.c_str(), argv.data());
        std::fprintf(stderr, "qd bench: cannot run %s: %s\n", suite.path.c_str(),
                     std::strerror(errno));
        _exit(127);
    }
    close(fds[1]);
    FILE *in = fdopen(fds[0], "r");
    const time_t started = std::time(nullptr);
    size_t count = 0;
    char line[8192];
    progress.show(suite.name + ": starting");
    while (in && std::fgets(line, sizeof line, in)) {
        std::string text = line;
        Figure f;
        if (parse_figure(text, suite.name, f)) {
            figures.push_back(f);
            ++count;
        }
        if (verbose) {
            progress.clear();
            std::fputs(text.c_str(), stdout);
            std::fflush(stdout);
        }
        char status[256];
        std::snprintf(status, sizeof status, "%s: %zu figure(s), %lds", suite.name.c_str(), count,
                      static_cast<long>(std::time(nullptr) - started));
        progress.show(std::string(status) +
                      (count ? ", last: " + figures.back().bench + " " + figures.back().name
                             : std::string()));
    }
    if (in) std::fclose(in);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    progress.clear();
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

// "17.68 ns (std::function into mutex+deque, reference)" -> "17.68 ns" (the JSON keeps it all).
std::string short_anchor(const std::string &anchor) {
    size_t first = anchor.find(' ');
    if (first == std::string::npos) return anchor;
    size_t second = anchor.find(' ', first + 1);
    return second == std::string::npos ? anchor : anchor.substr(0, second);
}

void print_table(FILE *out, const std::vector<Figure> &figures) {
    size_t w = 6;
    for (const Figure &f : figures) w = std::max(w, f.bench.size() + 1 + f.name.size());
    std::fprintf(out, "%-*s  %12s  %12s  %8s  %-24s  %s\n", static_cast<int>(w), "figure", "qd",
                 "anchor", "ratio", "bar", "verdict");
    int pass = 0, miss = 0;
    for (const Figure &f : figures) {
        std::string name = f.bench + " " + f.name;
        std::fprintf(out, "%-*s  %12s  %12s  %8s  %-24s  %s\n", static_cast<int>(w), name.c_str(),
                     f.qd.c_str(), short_anchor(f.anchor).c_str(), f.ratio.c_str(), f.bar.c_str(),
                     f.verdict.c_str());
        pass += f.verdict == "PASS";
        miss += f.verdict == "MISS";
    }
    std::fprintf(out, "\n%zu figure(s); %d with a bar: %d PASS, %d MISS\n", figures.size(),
                 pass + miss, pass, miss);
}

bool write_json(const std::string &path, const std::vector<Figure> &figures,
                const std::vector<std::string> &suites, bool gpu) {
    FILE *out = path == "-" ? stdout : std::fopen(path.c_str(), "w");
    if (!out) {
        std::fprintf(stderr, "qd bench: cannot write %s: %s\n", path.c_str(), std::strerror(errno));
        return false;
    }
    uint32_t v = qd_version();
    std::fprintf(out, "{\n  \"qd_version\": \"%u.%u.%u\",\n  \"cuda_device\": %s,\n  \"suites\": [",
                 v >> 16, (v >> 8) & 0xFF, v & 0xFF, gpu ? "true" : "false");
    for (size_t i = 0; i < suites.size(); ++i)
        std::fprintf(out, "%s%s", i ? ", " : "", json_string(suites[i]).c_str());
    std::fprintf(out, "],\n  \"figures\": [");
    int pass = 0, miss = 0;
    for (size_t i = 0; i < figures.size(); ++i) {
        const Figure &f = figures[i];
        std::string unit, anchor_unit;
        std::string qd = json_value(f.qd, &unit);
        std::string anchor = json_value(f.anchor, &anchor_unit);
        std::string ratio = json_value(f.ratio, nullptr);
        std::fprintf(out,
                     "%s\n    {\"suite\": %s, \"bench\": %s, \"name\": %s, \"qd\": %s, "
                     "\"unit\": %s, \"anchor\": %s, \"anchor_unit\": %s, \"ratio\": %s, "
                     "\"bar\": %s, \"verdict\": %s}",
                     i ? "," : "", json_string(f.suite).c_str(), json_string(f.bench).c_str(),
                     json_string(f.name).c_str(), qd.c_str(), json_string(unit).c_str(),
                     anchor.c_str(), json_string(anchor_unit).c_str(), ratio.c_str(),
                     f.bar == "-" ? "null" : json_string(f.bar).c_str(),
                     json_string(f.verdict).c_str());
        pass += f.verdict == "PASS";
        miss += f.verdict == "MISS";
    }
    std::fprintf(out, "\n  ],\n  \"pass\": %d,\n  \"miss\": %d\n}\n", pass, miss);
    if (out != stdout) std::fclose(out);
    return true;
}

int usage(const char *message) {
    std::fprintf(stderr, "qd bench: %s\n\nusage: qd bench [options]\n%s", message, kBenchUsage);
    return 2;
}

}  // namespace

int bench_main(int argc, char **argv) {
    bool only_cpu = false, only_gpu = false, verbose = false;
    std::string json, dir, repeats, filter;
    for (int i = 0; i < argc; ++i) {
        std::string a = argv[i];
        auto value = [&](std::string &out) {
            if (i + 1 >= argc) return false;
            out = argv[++i];
            return true;
        };
        if (a == "--cpu")
            only_cpu = true;
        else if (a == "--gpu")
            only_gpu = true;
        else if (a == "--verbose")
            verbose = true;
        else if (a == "--json") {
            if (!value(json)) return usage("--json needs a file (or -)");
        } else if (a == "--bench-dir") {
            if (!value(dir)) return usage("--bench-dir needs a folder");
        } else if (a == "--repeats") {
            if (!value(repeats) || std::atoi(repeats.c_str()) < 5)
                return usage("--repeats needs a number >= 5");
        } else if (a == "--filter") {
            if (!value(filter)) return usage("--filter needs a substring");
        } else if (a == "-h" || a == "--help") {
            std::printf("usage: qd bench [options]\n%s", kBenchUsage);
            return 0;
        } else {
            return usage(("unknown option " + a).c_str());
        }
    }
    if (only_cpu && only_gpu) return usage("--cpu and --gpu exclude each other");
    const bool gpu = cuda_present();
    if (only_gpu && !gpu) {
        std::fprintf(stderr, "qd bench: --gpu, but no CUDA device (see qd info)\n");
        return 1;
    }
    const std::string bench_dir = find_bench_dir(dir);
    std::vector<Suite> suites;
    if (!only_gpu) suites.push_back({"bench_cpu", bench_dir + "/bench_cpu"});
    if (!only_cpu && gpu) suites.push_back({"bench_gpu", bench_dir + "/gpu/bench_gpu"});

    std::vector<std::string> args = {"--quiet"};
    if (!repeats.empty()) args.insert(args.end(), {"--repeats", repeats});
    if (!filter.empty()) args.insert(args.end(), {"--filter", filter});

    // With --json - the JSON owns stdout; the table goes to stderr.
    FILE *table = json == "-" ? stderr : stdout;
    std::fprintf(
        table, "qd bench: %s; suites:", gpu ? "CUDA device present" : "no CUDA device (CPU only)");
    for (const Suite &s : suites) std::fprintf(table, " %s", s.name.c_str());
    std::fprintf(table, " (from %s)\n", bench_dir.c_str());
    std::fflush(table);

    Progress progress;
    std::vector<Figure> figures;
    std::vector<std::string> ran;
    int failed = 0;
    for (const Suite &s : suites) {
        if (!executable(s.path)) {
            std::fprintf(stderr,
                         "qd bench: no %s (build it: meson setup build -Dbench=true && ninja -C "
                         "build; or pass --bench-dir)\n",
                         s.path.c_str());
            ++failed;
            continue;
        }
        int status = run_suite(s, args, verbose, figures, progress);
        if (status != 0) {
            std::fprintf(stderr, "qd bench: %s exited with status %d\n", s.name.c_str(), status);
            ++failed;
        }
        ran.push_back(s.name);
    }
    std::fprintf(table, "\n");
    print_table(table, figures);
    if (!json.empty() && !write_json(json, figures, ran, gpu)) return 1;
    return failed ? 1 : 0;
}

}  // namespace qd_tool
