// The timeline trace's API (qd.h, "Timeline trace"): qd_trace_start, qd_trace_stop,
// qd_trace_flush. The file holds exactly the operations of the window (memsets of distinct
// sizes before, inside and after it tell them apart), work still queued at stop included; a
// flush writes the window so far and tracing goes on; a full ring drops the newest and counts
// them; every misuse status; a path that cannot be written, at start and at stop; QD_TRACE is a
// start that the program may stop; a destroy while traced writes the file; two contexts share
// one file, and an arrow joins a record in one to the wait in the other, numbered once in the
// file and pointing forward, whichever context writes last and after the recording context's
// destroy; an alloc shows the bytes asked for; a FIFO or device at the path is refused and never
// replaced; temporary files have unique names; a file keeps the parts of the last 64 destroyed
// contexts. (tests/trace/check_trace.py checks the file's content event by event, and a flush
// at exit.)
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "qd_test.h"

using namespace qdt;

namespace {

std::string read_file(const std::string &path) {
    std::ifstream f(path);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
}

size_t count(const std::string &text, const std::string &what) {
    size_t n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
}

// The number of memset slices of `bytes` bytes in a trace file.
size_t memsets(const std::string &text, uint64_t bytes) {
    return count(text, "\"cat\":\"memset\",\"args\":{\"origin\":\"api\",\"bytes\":" +
                           std::to_string(bytes) + "}");
}

// The flow events of a trace file (one event per line, as the trace writes them).
struct Flow {
    char ph;
    uint64_t id;
    unsigned pid, tid;
    double ts;
    bool enclosing;  // "bp":"e"
};

std::vector<Flow> flows(const std::string &text) {
    std::vector<Flow> out;
    std::istringstream lines(text);
    std::string line;
    auto number = [&](const char *key) {
        const size_t at = line.find(key);
        if (at == std::string::npos) return -1.0;
        return std::strtod(line.c_str() + at + std::strlen(key), nullptr);
    };
    while (std::getline(lines, line)) {
        const bool s = line.find("\"ph\":\"s\"") != std::string::npos;
        const bool f = line.find("\"ph\":\"f\"") != std::string::npos;
        if (!s && !f) continue;
        out.push_back({s ? 's' : 'f', static_cast<uint64_t>(number("\"id\":")),
                       static_cast<unsigned>(number("\"pid\":")),
                       static_cast<unsigned>(number("\"tid\":")), number("\"ts\":"),
                       line.find("\"bp\":\"e\"") != std::string::npos});
    }
    return out;
}

// The arrows of a file, start and end by id; every id must be one start and one end.
std::vector<std::pair<Flow, Flow>> arrows(const std::string &text) {
    std::vector<std::pair<Flow, Flow>> out;
    const std::vector<Flow> all = flows(text);
    for (const Flow &s : all) {
        if (s.ph != 's') continue;
        size_t starts = 0, ends = 0;
        const Flow *end = nullptr;
        for (const Flow &f : all) {
            if (f.id != s.id) continue;
            if (f.ph == 's') ++starts;
            if (f.ph == 'f') ++ends, end = &f;
        }
        EXPECT_EQ(starts, 1u) << "arrow " << s.id << " has one start";
        EXPECT_EQ(ends, 1u) << "arrow " << s.id << " has one end";
        if (end) out.emplace_back(s, *end);
    }
    EXPECT_EQ(out.size() * 2, all.size()) << "every end has its start";
    return out;
}

class TraceTest : public BackendTest {
  protected:
    void SetUp() override {
        BackendTest::SetUp();
        if (skipped_ || HasFatalFailure()) return;
        char tmpl[] = "/tmp/qd-trace-test-XXXXXX";
        ASSERT_NE(::mkdtemp(tmpl), nullptr);
        dir_ = tmpl;
        path_ = dir_ + "/trace.json";
        stream_ = new_stream();
        buf_ = alloc(stream_, 4096);
    }

    void TearDown() override {
        if (buf_) {
            EXPECT_QD_OK(qd_mem_free_async(stream_, buf_));
            EXPECT_QD_OK(qd_stream_synchronize(stream_));
        }
        if (stream_) {
            EXPECT_QD_OK(qd_stream_destroy(stream_));
        }
        BackendTest::TearDown();
        if (!dir_.empty()) {
            std::remove(path_.c_str());
            std::remove((dir_ + "/other.json").c_str());
            ::rmdir(dir_.c_str());
        }
        ::unsetenv("QD_TRACE_CAPACITY");
    }

    qd_status memset_n(uint64_t bytes) { return qd_memset_async(stream_, buf_, 0x5a, bytes); }

    std::string dir_, path_;
    qd_stream stream_ = 0;
    uint64_t buf_ = 0;
};

// Blocks its stream until released (the test's other thread releases it, whatever the order).
void wait_for_gate(void *flag) {
    auto *f = static_cast<std::atomic<bool> *>(flag);
    while (!f->load()) std::this_thread::yield();
}

TEST_P(TraceTest, StartStop_FileHoldsExactlyTheWindowsOperations_QueuedWorkIncluded) {
    ASSERT_QD_OK(memset_n(111));
    ASSERT_QD_OK(qd_stream_synchronize(stream_));
    ASSERT_QD_OK(qd_trace_start(ctx_, path_.c_str()));
    std::atomic<bool> gate{false};
    ASSERT_QD_OK(qd_launch_host_fn(stream_, wait_for_gate, &gate));
    for (int i = 0; i < 3; ++i) ASSERT_QD_OK(memset_n(222));
    // The three memsets are queued behind the gate when stop is called (or have run, if the
    // releasing thread came first): either way they are in the window.
    std::thread releaser([&] { gate.store(true); });
    EXPECT_QD_OK(qd_trace_stop(ctx_));
    releaser.join();
    ASSERT_QD_OK(memset_n(333));
    ASSERT_QD_OK(qd_stream_synchronize(stream_));
    const std::string t = read_file(path_);
    EXPECT_EQ(memsets(t, 111), 0u) << "before the start";
    EXPECT_EQ(memsets(t, 222), 3u) << "inside the window";
    EXPECT_EQ(memsets(t, 333), 0u) << "after the stop";
    EXPECT_EQ(count(t, "\"cat\":\"host callback\""), 1u);
    EXPECT_EQ(count(t, "\"name\":\"enqueue memset\""), 3u) << "each enqueue once";
    EXPECT_EQ(count(t, "operations recorded 4, dropped 0"), 1u);
}

TEST_P(TraceTest, TimelineSignalAndWait_AreOperationsOfTheWindow) {
    qd_timeline t = 0;
    const qd_status st = qd_timeline_create(ctx_, 0, &t);
    if (st == QD_ERROR_NOT_SUPPORTED) GTEST_SKIP() << qd_last_error_message();
    ASSERT_QD_OK(st);
    ASSERT_QD_OK(qd_trace_start(ctx_, path_.c_str()));
    ASSERT_QD_OK(qd_timeline_wait(stream_, t, 1));  // before its signal
    ASSERT_QD_OK(memset_n(555));
    ASSERT_QD_OK(qd_timeline_signal(default_stream_, t, 1));
    ASSERT_QD_OK(qd_stream_synchronize(stream_));
    EXPECT_QD_OK(qd_trace_stop(ctx_));
    const std::string text = read_file(path_);
    EXPECT_EQ(count(text, "\"cat\":\"timeline wait\""), 1u) << text;
    EXPECT_EQ(count(text, "\"cat\":\"timeline signal\""), 1u);
    EXPECT_EQ(memsets(text, 555), 1u);
    EXPECT_QD_OK(qd_timeline_destroy(t));
}

TEST_P(TraceTest, Flush_WhileOn_WritesTheWindowSoFarAndTracingGoesOn) {
    ASSERT_QD_OK(qd_trace_start(ctx_, path_.c_str()));
    ASSERT_QD_OK(memset_n(222));
    ASSERT_QD_OK(qd_trace_flush(ctx_));
    std::string t = read_file(path_);
    EXPECT_EQ(memsets(t, 222), 1u);
    ASSERT_QD_OK(memset_n(444));
    ASSERT_QD_OK(qd_trace_stop(ctx_));
    t = read_file(path_);
    EXPECT_EQ(memsets(t, 222), 1u) << "the flushed part is rewritten, not repeated";
    EXPECT_EQ(memsets(t, 444), 1u);
    EXPECT_EQ(count(t, "\"name\":\"process_name\""), 1u) << "one part per context";
    // After the stop, a flush writes the stopped window again.
    std::remove(path_.c_str());
    EXPECT_QD_OK(qd_trace_flush(ctx_));
    EXPECT_EQ(memsets(read_file(path_), 444), 1u);
}

TEST_P(TraceTest, SecondStart_IsInvalidOperation_AndTheWindowGoesOn) {
    ASSERT_QD_OK(qd_trace_start(ctx_, path_.c_str()));
    ASSERT_QD_OK(memset_n(222));
    const std::string other = dir_ + "/other.json";
    EXPECT_QD_ERR(QD_ERROR_INVALID_OPERATION, "already", qd_trace_start(ctx_, other.c_str()));
    ASSERT_QD_OK(memset_n(444));
    ASSERT_QD_OK(qd_trace_stop(ctx_));
    const std::string t = read_file(path_);
    EXPECT_EQ(memsets(t, 222), 1u);
    EXPECT_EQ(memsets(t, 444), 1u);
    EXPECT_NE(::access(other.c_str(), F_OK), 0) << "the refused start wrote nothing";
}

TEST_P(TraceTest, StopOrFlush_WhenNotTracing_IsInvalidOperation) {
    EXPECT_QD_ERR(QD_ERROR_INVALID_OPERATION, "not being traced", qd_trace_stop(ctx_));
    EXPECT_QD_ERR(QD_ERROR_INVALID_OPERATION, "never traced", qd_trace_flush(ctx_));
    ASSERT_QD_OK(qd_trace_start(ctx_, path_.c_str()));
    ASSERT_QD_OK(qd_trace_stop(ctx_));
    EXPECT_QD_ERR(QD_ERROR_INVALID_OPERATION, "not being traced", qd_trace_stop(ctx_));
}

TEST_P(TraceTest, BadHandlesAndArguments_AreRefusedWithTheirStatus) {
    EXPECT_QD(QD_ERROR_INVALID_HANDLE, qd_trace_start(0, path_.c_str()));
    EXPECT_QD(QD_ERROR_INVALID_HANDLE, qd_trace_stop(0));
    EXPECT_QD(QD_ERROR_INVALID_HANDLE, qd_trace_flush(0));
    EXPECT_QD(QD_ERROR_INVALID_HANDLE, qd_trace_start(stream_, path_.c_str())) << "wrong type";
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "path", qd_trace_start(ctx_, nullptr));
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "empty", qd_trace_start(ctx_, ""));
    EXPECT_QD(QD_ERROR_INVALID_ARGUMENT, qd_trace_start(0, nullptr)) << "arguments first";
    qd_context c = other_context();
    ASSERT_QD_OK(qd_trace_start(c, path_.c_str()));
    ASSERT_QD_OK(qd_context_destroy(c));
    extra_contexts_.clear();
    EXPECT_QD(QD_ERROR_INVALID_HANDLE, qd_trace_stop(c)) << "a destroyed context";
    EXPECT_QD(QD_ERROR_INVALID_HANDLE, qd_trace_flush(c));
}

TEST_P(TraceTest, Start_PathThatCannotBeWritten_IsInvalidArgument_AndTracingStaysOff) {
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "cannot be written",
                  qd_trace_start(ctx_, (dir_ + "/no/such/dir/t.json").c_str()));
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "directory", qd_trace_start(ctx_, dir_.c_str()));
    EXPECT_QD(QD_ERROR_INVALID_OPERATION, qd_trace_stop(ctx_)) << "tracing stayed off";
    qd_context_stats s = QD_CONTEXT_STATS_INIT;
    ASSERT_QD_OK(qd_context_get_stats(ctx_, &s));
    ASSERT_QD_OK(qd_trace_start(ctx_, path_.c_str())) << "a good path still starts";
    ASSERT_QD_OK(qd_trace_stop(ctx_));
}

TEST_P(TraceTest, SpecialFileAtThePath_IsRefusedAtStartAndStop_AndNeverReplaced) {
    QDT_REQUIRE_CPU();
    auto is_fifo = [](const std::string &p) {
        struct stat st;
        return ::stat(p.c_str(), &st) == 0 && S_ISFIFO(st.st_mode);
    };
    ASSERT_EQ(::mkfifo(path_.c_str(), 0600), 0);
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "a FIFO, not a regular file",
                  qd_trace_start(ctx_, path_.c_str()));
    EXPECT_QD(QD_ERROR_INVALID_OPERATION, qd_trace_stop(ctx_)) << "tracing stayed off";
    EXPECT_TRUE(is_fifo(path_)) << "the FIFO is still there";
    // A FIFO made at the path after the start is not replaced by the stop either.
    ASSERT_EQ(std::remove(path_.c_str()), 0);
    ASSERT_QD_OK(qd_trace_start(ctx_, path_.c_str()));
    ASSERT_QD_OK(memset_n(222));
    ASSERT_EQ(::mkfifo(path_.c_str(), 0600), 0);
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "a FIFO, not a regular file", qd_trace_stop(ctx_));
    EXPECT_TRUE(is_fifo(path_)) << "the FIFO is still there";
    // (A device is refused the same way; no test names one: were the check to regress, a test
    // run as root would replace it.)
}

TEST_P(TraceTest, TemporaryFileName_IsUnique_SoATakenPathDotTmpDoesNotStopTheTrace) {
    QDT_REQUIRE_CPU();
    // What another process tracing to the same path would hold while it writes.
    const std::string taken = path_ + ".tmp";
    ASSERT_EQ(::mkdir(taken.c_str(), 0700), 0);
    EXPECT_QD_OK(qd_trace_start(ctx_, path_.c_str()));
    ASSERT_QD_OK(memset_n(222));
    EXPECT_QD_OK(qd_trace_stop(ctx_));
    EXPECT_EQ(memsets(read_file(path_), 222), 1u);
    ::rmdir(taken.c_str());
    // Nothing is left next to the path but the file itself.
    size_t entries = 0;
    if (DIR *d = ::opendir(dir_.c_str())) {
        while (struct dirent *e = ::readdir(d))
            if (e->d_name[0] != '.') ++entries;
        ::closedir(d);
    }
    EXPECT_EQ(entries, 1u) << "a temporary file was left in " << dir_;
}

// Every destroyed context's part stays in its file (in memory and on disk) up to a bound: the
// file keeps the parts of the last 64 destroyed contexts, and says how many it dropped.
TEST_P(TraceTest, ManyDestroyedContextsIntoOnePath_TheFileKeepsTheLast64AndCountsTheRest) {
    QDT_REQUIRE_CPU();
    ASSERT_QD_OK(qd_trace_start(ctx_, path_.c_str()));  // a live context: never dropped
    ASSERT_QD_OK(memset_n(5));
    ASSERT_QD_OK(qd_trace_flush(ctx_));
    const int contexts = 70;
    for (int i = 0; i < contexts; ++i) {
        qd_context c = 0;
        qd_context_desc desc = make_desc(QD_BACKEND_CPU, 1, 1);
        ASSERT_QD_OK(qd_context_create(&desc, &c));
        ASSERT_QD_OK(qd_trace_start(c, path_.c_str()));
        qd_stream s = 0;
        ASSERT_QD_OK(qd_context_default_stream(c, &s));
        // Memset sizes 1000 + i tell the contexts apart; half are stopped before the destroy.
        static uint8_t block[2000];
        ASSERT_QD_OK(qd_memset_async(s, reinterpret_cast<uint64_t>(block), 1, 1000 + i));
        if (i % 2) {
            ASSERT_QD_OK(qd_trace_stop(c));
        }
        ASSERT_QD_OK(qd_context_destroy(c));
    }
    const std::string t = read_file(path_);
    for (int i = 0; i < contexts - 64; ++i)
        EXPECT_EQ(memsets(t, 1000 + i), 0u) << "the oldest destroyed contexts are dropped: " << i;
    for (int i = contexts - 64; i < contexts; ++i)
        EXPECT_EQ(memsets(t, 1000 + i), 1u) << "the last 64 are kept: " << i;
    EXPECT_EQ(count(t, "parts of 6 destroyed contexts dropped (a file keeps the last 64)"), 1u);
    EXPECT_EQ(memsets(t, 5), 1u) << "the live context's part stays";
    ASSERT_QD_OK(qd_trace_stop(ctx_));
    EXPECT_EQ(memsets(read_file(path_), 5), 1u);
}

TEST_P(TraceTest, Stop_WhenThePathWasRemoved_IsInvalidArgument_AndFlushWritesItLater) {
    const std::string sub = dir_ + "/sub";
    ASSERT_EQ(::mkdir(sub.c_str(), 0700), 0);
    const std::string path = sub + "/t.json";
    ASSERT_QD_OK(qd_trace_start(ctx_, path.c_str()));
    ASSERT_QD_OK(memset_n(222));
    ASSERT_EQ(::rmdir(sub.c_str()), 0);
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "cannot be written", qd_trace_stop(ctx_));
    EXPECT_QD(QD_ERROR_INVALID_OPERATION, qd_trace_stop(ctx_)) << "tracing is off all the same";
    ASSERT_QD_OK(memset_n(444));
    ASSERT_EQ(::mkdir(sub.c_str(), 0700), 0);
    EXPECT_QD_OK(qd_trace_flush(ctx_)) << "the kept window is written";
    const std::string t = read_file(path);
    EXPECT_EQ(memsets(t, 222), 1u);
    EXPECT_EQ(memsets(t, 444), 0u);
    std::remove(path.c_str());
    ::rmdir(sub.c_str());
}

TEST_P(TraceTest, RestartAfterStop_OpensANewWindowThatReplacesTheContextsPart) {
    ASSERT_QD_OK(qd_trace_start(ctx_, path_.c_str()));
    ASSERT_QD_OK(memset_n(222));
    ASSERT_QD_OK(qd_trace_stop(ctx_));
    ASSERT_QD_OK(memset_n(333));
    ASSERT_QD_OK(qd_trace_start(ctx_, path_.c_str()));
    ASSERT_QD_OK(memset_n(444));
    ASSERT_QD_OK(qd_trace_stop(ctx_));
    const std::string t = read_file(path_);
    EXPECT_EQ(memsets(t, 222), 0u) << "the first window's part was replaced";
    EXPECT_EQ(memsets(t, 333), 0u);
    EXPECT_EQ(memsets(t, 444), 1u);
}

TEST_P(TraceTest, FullRing_DropsTheNewestAndCountsThem) {
    ASSERT_EQ(::setenv("QD_TRACE_CAPACITY", "4", 1), 0);
    ASSERT_QD_OK(qd_trace_start(ctx_, path_.c_str()));
    for (uint64_t n = 1; n <= 6; ++n) ASSERT_QD_OK(memset_n(n));
    ASSERT_QD_OK(qd_trace_stop(ctx_));
    ASSERT_QD_OK(qd_stream_synchronize(stream_));
    const std::string t = read_file(path_);
    for (uint64_t n = 1; n <= 4; ++n) EXPECT_EQ(memsets(t, n), 1u) << "the oldest are kept: " << n;
    for (uint64_t n = 5; n <= 6; ++n)
        EXPECT_EQ(memsets(t, n), 0u) << "the newest are dropped: " << n;
    EXPECT_EQ(count(t, "operations recorded 4, dropped 2 (QD_TRACE_CAPACITY 4)"), 1u);
    EXPECT_EQ(count(t, "trace full: 2 operations not recorded"), 1u);
    // Dropped operations still ran.
    EXPECT_QD_OK(qd_stream_synchronize(stream_));
}

TEST_P(TraceTest, PoolExhausted_IsMarkedOnTheCallingThreadsTrack) {
    ASSERT_QD_OK(qd_trace_start(ctx_, path_.c_str()));
    std::vector<qd_stream> leases;
    qd_status st = QD_SUCCESS;
    while (leases.size() < 4096) {  // the pool's capacity is at most 4096 (qd.h)
        qd_stream s = 0;
        st = qd_stream_acquire(ctx_, &s);
        if (st != QD_SUCCESS) break;
        leases.push_back(s);
    }
    ASSERT_EQ(st, QD_ERROR_POOL_EXHAUSTED);
    EXPECT_NE(std::string(qd_last_error_message()).find("leased"), std::string::npos)
        << "the observers keep the failed call's message: " << qd_last_error_message();
    for (qd_stream s : leases) ASSERT_QD_OK(qd_stream_release(s));
    ASSERT_QD_OK(qd_trace_stop(ctx_));
    const std::string t = read_file(path_);
    EXPECT_EQ(count(t, "\"name\":\"stream pool exhausted (1 wanted)\",\"cat\":\"pool\""), 1u);
    EXPECT_EQ(count(t, "\"cat\":\"pool\""), 1u);
}

TEST_P(TraceTest, BadCapacity_IsInvalidArgument) {
    ASSERT_EQ(::setenv("QD_TRACE_CAPACITY", "lots", 1), 0);
    EXPECT_QD_ERR(QD_ERROR_INVALID_ARGUMENT, "QD_TRACE_CAPACITY",
                  qd_trace_start(ctx_, path_.c_str()));
    ASSERT_EQ(::setenv("QD_TRACE_CAPACITY", "0", 1), 0);
    EXPECT_QD(QD_ERROR_INVALID_ARGUMENT, qd_trace_start(ctx_, path_.c_str()));
}

TEST_P(TraceTest, DestroyWhileTraced_WritesTheFileWithTheQueuedWork) {
    qd_context c = other_context();
    qd_stream s = new_stream(c);
    uint64_t b = alloc(s, 64);
    ASSERT_QD_OK(qd_trace_start(c, path_.c_str()));
    for (int i = 0; i < 5; ++i) ASSERT_QD_OK(qd_memset_async(s, b, 1, 7));
    ASSERT_QD_OK(qd_context_destroy(c));
    extra_contexts_.clear();
    EXPECT_EQ(memsets(read_file(path_), 7), 5u);
}

TEST_P(TraceTest, TraceEnvironment_IsAStartThatTheProgramMayStop) {
    ASSERT_EQ(::setenv("QD_TRACE", path_.c_str(), 1), 0);
    qd_context c = other_context();
    ::unsetenv("QD_TRACE");
    ASSERT_NE(c, 0u);
    EXPECT_QD_ERR(QD_ERROR_INVALID_OPERATION, "already", qd_trace_start(c, path_.c_str()));
    qd_stream s = new_stream(c);
    uint64_t b = alloc(s, 64);
    ASSERT_QD_OK(qd_memset_async(s, b, 1, 9));
    EXPECT_QD_OK(qd_trace_stop(c));
    EXPECT_EQ(memsets(read_file(path_), 9), 1u);
    ASSERT_QD_OK(qd_memset_async(s, b, 1, 10));
    ASSERT_QD_OK(qd_context_destroy(c));  // stopped: the destroy writes nothing more
    extra_contexts_.clear();
    EXPECT_EQ(memsets(read_file(path_), 10), 0u);
}

TEST_P(TraceTest, TwoContextsIntoOnePath_EachHasItsProcess) {
    qd_context c = other_context();
    qd_stream s = new_stream(c);
    uint64_t b = alloc(s, 64);
    ASSERT_QD_OK(qd_trace_start(ctx_, path_.c_str()));
    ASSERT_QD_OK(qd_trace_start(c, path_.c_str()));
    ASSERT_QD_OK(memset_n(222));
    ASSERT_QD_OK(qd_memset_async(s, b, 1, 9));
    ASSERT_QD_OK(qd_trace_stop(c));
    ASSERT_QD_OK(qd_trace_stop(ctx_));
    const std::string t = read_file(path_);
    EXPECT_EQ(count(t, "\"name\":\"process_name\""), 2u);
    EXPECT_EQ(memsets(t, 222), 1u);
    EXPECT_EQ(memsets(t, 9), 1u);
    ASSERT_QD_OK(qd_mem_free_async(s, b));
    ASSERT_QD_OK(qd_stream_synchronize(s));
}

// An event recorded in one context and waited for in another: one arrow, from the record in
// the first context's process to the wait in the second's, its end no earlier than its start
// and bound to the waiting stream's next slice (no "bp"), whichever context writes the file
// last.
TEST_P(TraceTest, TwoContexts_RecordInOneWaitInTheOther_OneArrowAcrossPointingForward) {
    qd_context c = other_context();
    qd_stream s = new_stream(c);
    uint64_t b = alloc(s, 64);
    ASSERT_QD_OK(qd_trace_start(ctx_, path_.c_str()));
    ASSERT_QD_OK(qd_trace_start(c, path_.c_str()));
    qd_event e = new_event(0, ctx_);
    ASSERT_QD_OK(memset_n(222));
    ASSERT_QD_OK(qd_event_record(stream_, e));
    ASSERT_QD_OK(qd_stream_wait_event(s, e));
    ASSERT_QD_OK(qd_memset_async(s, b, 1, 9));
    ASSERT_QD_OK(qd_trace_stop(c));  // the waiting context writes first
    std::vector<std::pair<Flow, Flow>> a = arrows(read_file(path_));
    EXPECT_TRUE(a.empty()) << "the record's part is not in the file yet";
    ASSERT_QD_OK(qd_trace_stop(ctx_));
    const std::string t = read_file(path_);
    a = arrows(t);
    ASSERT_EQ(a.size(), 1u) << t;
    const Flow &start = a[0].first, &end = a[0].second;
    EXPECT_NE(start.pid, end.pid) << "from one context's process to the other's";
    EXPECT_LE(start.ts, end.ts) << "the arrow points forward in time";
    EXPECT_FALSE(end.enclosing) << "the end binds to the next slice, where the wait let work go";
    // Written again by the waiting context: still one arrow, with a new number in the file.
    ASSERT_QD_OK(qd_trace_flush(c));
    EXPECT_EQ(arrows(read_file(path_)).size(), 1u);
    ASSERT_QD_OK(qd_mem_free_async(s, b));
    ASSERT_QD_OK(qd_stream_synchronize(s));
    ASSERT_QD_OK(qd_event_destroy(e));
}

// The recording context is destroyed (its part written) while the waiting one still traces into
// the same file: the destroyed context's part stays, and so does the arrow out of it.
TEST_P(TraceTest, RecordingContextDestroyed_WhileTheWaiterTraces_ItsPartAndArrowStay) {
    qd_context c = other_context();
    qd_stream s = new_stream(c);
    ASSERT_QD_OK(qd_trace_start(ctx_, path_.c_str()));
    ASSERT_QD_OK(qd_trace_start(c, path_.c_str()));
    qd_event e = new_event(0, c);
    ASSERT_QD_OK(qd_event_record(s, e));
    ASSERT_QD_OK(qd_stream_wait_event(stream_, e));
    ASSERT_QD_OK(memset_n(222));
    ASSERT_QD_OK(qd_context_destroy(c));
    extra_contexts_.clear();
    ASSERT_QD_OK(memset_n(333));
    ASSERT_QD_OK(qd_trace_stop(ctx_));
    const std::string t = read_file(path_);
    EXPECT_EQ(count(t, "\"name\":\"process_name\""), 2u) << "the destroyed context's part stays";
    const std::vector<std::pair<Flow, Flow>> a = arrows(t);
    ASSERT_EQ(a.size(), 1u) << t;
    EXPECT_NE(a[0].first.pid, a[0].second.pid);
    EXPECT_LE(a[0].first.ts, a[0].second.ts);
}

TEST_P(TraceTest, Alloc_SliceShowsTheBytesAskedFor) {
    ASSERT_QD_OK(qd_trace_start(ctx_, path_.c_str()));
    uint64_t b = 0;
    ASSERT_QD_OK(qd_mem_alloc_async(stream_, 3072, &b));
    ASSERT_QD_OK(qd_mem_free_async(stream_, b));
    ASSERT_QD_OK(qd_trace_stop(ctx_));
    const std::string t = read_file(path_);
    EXPECT_EQ(count(t, "\"cat\":\"alloc\",\"args\":{\"origin\":\"api\",\"bytes\":3072}"), 1u) << t;
}

void stop_from_callback(void *p) {
    auto *args = static_cast<std::pair<qd_context, std::atomic<qd_status> *> *>(p);
    args->second->store(qd_trace_stop(args->first));
}

TEST_P(TraceTest, StopFromAHostCallback_IsInvalidOperation) {
    ASSERT_QD_OK(qd_trace_start(ctx_, path_.c_str()));
    std::atomic<qd_status> got{QD_SUCCESS};
    std::pair<qd_context, std::atomic<qd_status> *> args{ctx_, &got};
    ASSERT_QD_OK(qd_launch_host_fn(stream_, stop_from_callback, &args));
    ASSERT_QD_OK(qd_stream_synchronize(stream_));
    EXPECT_EQ(got.load(), QD_ERROR_INVALID_OPERATION);
    EXPECT_QD_OK(qd_trace_stop(ctx_)) << "still on: the refused stop changed nothing";
}

// Four threads queue memsets on their own streams while the main thread starts, flushes and
// stops the trace over and over (run it under TSan too): every call succeeds, and the file of
// the last window is complete, with the context's one part.
TEST_P(TraceTest, SubmitsRacingStartFlushStop_EveryCallSucceeds) {
    constexpr int kThreads = 4, kOps = 200;
    std::atomic<int> failures{0};
    std::atomic<int> done{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
            qd_stream s = 0;
            uint64_t b = 0;
            if (qd_stream_create(ctx_, nullptr, &s) != QD_SUCCESS ||
                qd_mem_alloc_async(s, 64, &b) != QD_SUCCESS) {
                ++failures;
                ++done;
                return;
            }
            for (int i = 0; i < kOps; ++i)
                if (qd_memset_async(s, b, 1, 10 + t) != QD_SUCCESS) ++failures;
            if (qd_mem_free_async(s, b) != QD_SUCCESS) ++failures;
            if (qd_stream_synchronize(s) != QD_SUCCESS) ++failures;
            if (qd_stream_destroy(s) != QD_SUCCESS) ++failures;
            ++done;
        });
    }
    int windows = 0;
    do {
        ASSERT_QD_OK(qd_trace_start(ctx_, path_.c_str()));
        ASSERT_QD_OK(qd_trace_flush(ctx_));
        ASSERT_QD_OK(qd_trace_stop(ctx_));
        ++windows;
    } while (done.load() < kThreads || windows < 3);
    for (auto &th : threads) th.join();
    EXPECT_EQ(failures.load(), 0);
    const std::string t = read_file(path_);
    EXPECT_EQ(count(t, "\"name\":\"process_name\""), 1u);
    EXPECT_EQ(t.compare(t.size() - 4, 4, "\n]}\n"), 0) << "the file is complete";
}

// Launch attributes (qd_launch_ex) appear in the launch's slice's args.
TEST_P(TraceTest, LaunchAttributes_AreInTheSlicesArgs) {
    QDT_REQUIRE_KERNELS();
    ASSERT_QD_OK(qd_trace_start(ctx_, path_.c_str()));
    qd_launch_attr a[2];
    std::memset(a, 0, sizeof a);
    a[0].kind = QD_LAUNCH_ATTR_PROGRAMMATIC_SERIALIZATION;
    a[0].value = 1;
    a[1].kind = QD_LAUNCH_ATTR_PRIORITY;
    a[1].value = -1;
    const qd_status st = qd_launch_ex(stream_, kernels_->noop(), nullptr, a, 2, nullptr, 0);
    if (st == QD_ERROR_NOT_SUPPORTED) GTEST_SKIP() << qd_last_error_message();
    ASSERT_QD_OK(st);
    ASSERT_QD_OK(qd_launch(stream_, kernels_->noop(), nullptr, nullptr, 0));
    ASSERT_QD_OK(qd_stream_synchronize(stream_));
    EXPECT_QD_OK(qd_trace_stop(ctx_));
    const std::string t = read_file(path_);
    EXPECT_EQ(count(t, "\"args\":{\"origin\":\"api\",\"programmatic\":true,\"priority\":-1}"), 1u)
        << t;
    EXPECT_EQ(count(t, "\"cat\":\"launch\",\"args\":{\"origin\":\"api\"}"), 1u)
        << "the plain launch has no attributes";
}

QDT_INSTANTIATE_BACKENDS(TraceTest);

}  // namespace
