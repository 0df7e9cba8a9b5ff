// Forged-handle fuzz (docs/reliability.md, category 1): every handle position of every entry
// point (the generated entries of api_table_gen.h: by-value handles, a join's children, a task's
// kernel), called with 0, ~0, handles of the wrong type, destroyed handles, handles of a
// destroyed context, valid handles with bits or bytes changed (this covers the type-tag byte
// wherever the encoding puts it), and QD_TEST_SCALE x 1e5 random uint64 values per entry point
// and handle position, with valid values everywhere else (fuzz_values.h). Every call must return
// QD_ERROR_INVALID_HANDLE, a status qd.h lists for the function, and nothing may crash; the live
// objects must be untouched afterwards.
#include <cstdlib>
#include <functional>
#include <map>
#include <random>
#include <set>

#include "qd_test.h"

#include "api_table_gen.h"

using namespace qdt;
using qd_fuzz::kHandleKindNames;
using qd_fuzz::kHandleKinds;
using Kind = qd_fuzz::HandleKind;
using qd_fuzz::kContext;
using qd_fuzz::kEvent;
using qd_fuzz::kGraph;
using qd_fuzz::kKernel;
using qd_fuzz::kModule;
using qd_fuzz::kStream;
using qd_fuzz::kTimeline;

namespace {

const char *kind_name(int k) { return kHandleKindNames[k]; }

int32_t ok_kernel(const qd_host_kernel_info *, void *const *) { return 0; }

struct Entry {
    std::string name;      // function(position)
    const char *function;  // for qd_fuzz::listed
    Kind kind;
    qd_status (*invoke)(const qd_fuzz::Values &, uint64_t);
};

uint64_t seed() {
    const char *env = getenv("QD_TEST_SEED");
    return env && *env ? strtoull(env, nullptr, 0) : 0x9d5eedull;
}

class InvalidHandleFuzz : public ::testing::Test {
  protected:
    void SetUp() override {
        qd_context_desc desc = make_desc(QD_BACKEND_CPU, 8, 2);
        ASSERT_QD_OK(qd_context_create(&desc, &F));
        ASSERT_QD_OK(qd_context_create(&desc, &G));
        ASSERT_QD_OK(qd_context_default_stream(F, &D));
        ASSERT_QD_OK(qd_stream_create(F, nullptr, &S));
        ASSERT_QD_OK(qd_stream_acquire(F, &L));
        ASSERT_QD_OK(qd_event_create(F, QD_EVENT_TIMING, &E));
        ASSERT_QD_OK(qd_event_create(F, 0, &E2));
        ASSERT_QD_OK(qd_event_record(S, E));
        path = cpu_module_path();
        ASSERT_QD_OK(qd_module_load(F, path.data(), path.size(), &M));
        ASSERT_QD_OK(qd_kernel_get(M, "qd_test_noop", &KM));
        ASSERT_QD_OK(qd_kernel_from_host_fn(F, &ok_kernel, "ok", &K));
        ASSERT_QD_OK(qd_mem_alloc_async(S, 64, &A));
        ASSERT_QD_OK(qd_host_alloc(F, 64, &H));
        ASSERT_QD_OK(qd_stream_synchronize(S));
        // Objects of a second live context (valid handles, but never of F).
        ASSERT_QD_OK(qd_context_default_stream(G, &GD));
        ASSERT_QD_OK(qd_stream_create(G, nullptr, &GS));
        ASSERT_QD_OK(qd_event_create(G, 0, &GE));
        ASSERT_QD_OK(qd_kernel_from_host_fn(G, &ok_kernel, "g", &GK));
        ASSERT_QD_OK(qd_module_load(G, path.data(), path.size(), &GM));
        auto empty_graph = [](qd_stream s, qd_graph *out) {
            ASSERT_QD_OK(qd_stream_begin_capture(s));
            ASSERT_QD_OK(qd_stream_end_capture(s, out));
        };
        empty_graph(S, &GR);
        empty_graph(GS, &GGR);
        ASSERT_QD_OK(qd_timeline_create(F, 0, &T));
        ASSERT_QD_OK(qd_timeline_create(G, 0, &GT));
        // Destroyed objects of F, and objects of a destroyed context.
        qd_stream ds = 0;
        qd_event de = 0;
        qd_kernel dk = 0;
        qd_module dm = 0;
        ASSERT_QD_OK(qd_stream_create(F, nullptr, &ds));
        ASSERT_QD_OK(qd_stream_destroy(ds));
        ASSERT_QD_OK(qd_event_create(F, 0, &de));
        ASSERT_QD_OK(qd_event_destroy(de));
        ASSERT_QD_OK(qd_kernel_from_host_fn(F, &ok_kernel, "d", &dk));
        ASSERT_QD_OK(qd_kernel_destroy(dk));
        ASSERT_QD_OK(qd_module_load(F, path.data(), path.size(), &dm));
        ASSERT_QD_OK(qd_module_unload(dm));
        qd_stream released = 0;
        ASSERT_QD_OK(qd_stream_acquire(F, &released));
        ASSERT_QD_OK(qd_stream_release(released));
        qd_graph dg = 0;
        empty_graph(S, &dg);
        ASSERT_QD_OK(qd_graph_destroy(dg));
        dead[kGraph] = {dg};
        qd_timeline dt = 0;
        ASSERT_QD_OK(qd_timeline_create(F, 0, &dt));
        ASSERT_QD_OK(qd_timeline_destroy(dt));
        dead[kTimeline] = {dt};
        dead[kStream] = {ds, released};
        dead[kEvent] = {de};
        dead[kKernel] = {dk};
        dead[kModule] = {dm};
        qd_context X = 0;
        ASSERT_QD_OK(qd_context_create(&desc, &X));
        qd_stream xs = 0, xd = 0;
        qd_event xe = 0;
        qd_kernel xk = 0;
        qd_module xm = 0;
        ASSERT_QD_OK(qd_context_default_stream(X, &xd));
        ASSERT_QD_OK(qd_stream_create(X, nullptr, &xs));
        ASSERT_QD_OK(qd_event_create(X, 0, &xe));
        ASSERT_QD_OK(qd_kernel_from_host_fn(X, &ok_kernel, "x", &xk));
        ASSERT_QD_OK(qd_module_load(X, path.data(), path.size(), &xm));
        qd_graph xg = 0;
        empty_graph(xs, &xg);
        qd_timeline xt = 0;
        ASSERT_QD_OK(qd_timeline_create(X, 0, &xt));
        ASSERT_QD_OK(qd_context_destroy(X));
        dead[kGraph].push_back(xg);
        dead[kTimeline].push_back(xt);
        dead[kContext] = {X};
        dead[kStream].insert(dead[kStream].end(), {xs, xd});
        dead[kEvent].push_back(xe);
        dead[kKernel].push_back(xk);
        dead[kModule].push_back(xm);

        valid[kContext] = {F, G};
        valid[kStream] = {D, S, L, GD, GS};
        valid[kEvent] = {E, E2, GE};
        valid[kModule] = {M, GM};
        valid[kKernel] = {K, KM, GK};
        valid[kGraph] = {GR, GGR};
        valid[kTimeline] = {T, GT};
        for (int k = 0; k < kHandleKinds; ++k) live[k].insert(valid[k].begin(), valid[k].end());
        baseline = get_stats(F);
        build_entries();
    }

    void TearDown() override {
        if (G) {
            EXPECT_QD_OK(qd_context_destroy(G));
        }
        if (F) {
            EXPECT_QD_OK(qd_context_destroy(F));
        }
    }

    // The generated entries (api_table_gen.h, from qd.h through abi/gen): every handle position
    // of every function, called with the values of F's objects everywhere else.
    void build_entries() {
        values.handles[kContext] = F;
        values.handles[kStream] = S;
        values.handles[kEvent] = E;
        values.handles[kModule] = M;
        values.handles[kKernel] = K;
        values.handles[kGraph] = GR;
        values.handles[kTimeline] = T;
        values.image = path.data();
        values.image_size = path.size();
        values.path = "/tmp/qd-forged-trace.json";
        values.host = H;
        values.dst = A;
        values.src = A + 32;
        for (int k = 0; k < kHandleKinds; ++k) {
            ASSERT_NE(values.handles[k], 0u)
                << "no live " << kHandleKindNames[k] << " for the generated entries: create one "
                << "in SetUp (and destroyed ones in dead[])";
            ASSERT_FALSE(valid[k].empty()) << kHandleKindNames[k];
        }
        for (const qd_fuzz::HandleEntry &e : qd_fuzz::kHandleEntries)
            entries.push_back(
                {std::string(e.function) + "(" + e.position + ")", e.function, e.kind, e.invoke});
    }

    // Runs one input through one entry; records failures (first few in detail).
    void check(const Entry &e, uint64_t h, const char *input_kind) {
        if (live[e.kind].count(h)) return;  // a real handle of the right type: not a forgery
        ++calls;
        qd_status st = e.invoke(values, h);
        if (!qd_fuzz::listed(e.function, st)) {
            ++unlisted;
            if (unlisted_details.size() < 20)
                unlisted_details.push_back(e.name + "(" + input_kind + " 0x" + hex(h) +
                                           ") returned " + qd_status_name(st) +
                                           ", which qd.h does not list for it");
        }
        if (st >= 0) {
            ++non_errors;
            if (details.size() < 20)
                details.push_back(e.name + "(" + input_kind + " 0x" + hex(h) + ") returned " +
                                  qd_status_name(st));
        } else if (st != QD_ERROR_INVALID_HANDLE) {
            ++other_errors;
            if (other_details.size() < 20)
                other_details.push_back(e.name + "(" + input_kind + " 0x" + hex(h) + ") returned " +
                                        qd_status_name(st) + ": " + qd_last_error_message());
        } else if ((calls & 1023) == 0 && qd_last_error_message()[0] == '\0') {
            ++empty_messages;
        }
    }

    static std::string hex(uint64_t v) {
        char b[32];
        snprintf(b, sizeof b, "%llx", (unsigned long long)v);
        return b;
    }

    qd_context F = 0, G = 0;
    qd_stream D = 0, S = 0, L = 0, GD = 0, GS = 0;
    qd_event E = 0, E2 = 0, GE = 0;
    qd_module M = 0, GM = 0;
    qd_kernel K = 0, KM = 0, GK = 0;
    qd_graph GR = 0, GGR = 0;
    qd_timeline T = 0, GT = 0;
    uint64_t A = 0;
    void *H = nullptr;
    std::string path;
    std::vector<uint64_t> valid[kHandleKinds], dead[kHandleKinds];
    std::set<uint64_t> live[kHandleKinds];
    qd_context_stats baseline;
    std::vector<Entry> entries;
    qd_fuzz::Values values;
    uint64_t calls = 0, non_errors = 0, other_errors = 0, unlisted = 0, empty_messages = 0;
    std::vector<std::string> details, other_details, unlisted_details;
};

}  // namespace

TEST_F(InvalidHandleFuzz, EveryEntryPoint_ForgedHandles_ReturnAnErrorAndNeverCrash) {
    const uint64_t random_per_entry = scaled(100000, 1000);
    std::mt19937_64 rng(seed());
    std::printf("[ info ] %zu entry points/positions, %llu random inputs each, seed 0x%llx\n",
                entries.size(), (unsigned long long)random_per_entry, (unsigned long long)seed());
    for (const Entry &e : entries) {
        // Fixed inputs.
        check(e, 0, "zero");
        check(e, ~0ull, "all-ones");
        for (int k = 0; k < kHandleKinds; ++k) {
            for (uint64_t h : dead[k])
                check(e, h, k == e.kind ? "destroyed" : "destroyed-other-type");
            if (k != e.kind)
                for (uint64_t h : valid[k]) check(e, h, "wrong-type");
        }
        // Valid handles of the right type with each byte changed (the type tag among them) and
        // each single bit flipped.
        for (uint64_t h : valid[e.kind]) {
            for (int byte = 0; byte < 8; ++byte)
                for (uint64_t mask : {0x01ull, 0x80ull, 0xffull, 0x5aull})
                    check(e, h ^ (mask << (8 * byte)), "byte-changed");
            for (int bit = 0; bit < 64; ++bit) check(e, h ^ (1ull << bit), "bit-flipped");
        }
        // Random inputs: fully random, and near-valid (a valid handle with random bits changed).
        for (uint64_t i = 0; i < random_per_entry; ++i) {
            uint64_t r = rng();
            if (i % 4 == 3) {
                const std::vector<uint64_t> &pool =
                    valid[(i / 4) % 8 < 5 ? (uint64_t)e.kind : (i / 4) % kHandleKinds];
                r = pool[r % pool.size()] ^ (rng() & rng() & rng());
            }
            check(e, r, "random");
        }
    }
    std::printf("[ info ] %llu calls\n", (unsigned long long)calls);
    EXPECT_EQ(non_errors, 0u) << "calls with a forged handle that did not fail";
    for (const std::string &d : details) ADD_FAILURE() << d;
    EXPECT_EQ(other_errors, 0u) << "calls that failed with another status than INVALID_HANDLE";
    for (const std::string &d : other_details) ADD_FAILURE() << d;
    EXPECT_EQ(unlisted, 0u) << "calls that returned a status qd.h does not list";
    for (const std::string &d : unlisted_details) ADD_FAILURE() << d;
    EXPECT_EQ(empty_messages, 0u) << "failures without a message";

    // Nothing real was touched.
    qd_context_stats now = get_stats(F);
    EXPECT_EQ(now.live_streams, baseline.live_streams);
    EXPECT_EQ(now.live_events, baseline.live_events);
    EXPECT_EQ(now.live_modules, baseline.live_modules);
    EXPECT_EQ(now.live_kernels, baseline.live_kernels);
    EXPECT_EQ(now.stream_pool_leased, baseline.stream_pool_leased);
    EXPECT_EQ(now.live_allocations, baseline.live_allocations);
    EXPECT_EQ(now.host_bytes_allocated, baseline.host_bytes_allocated);
    EXPECT_EQ(now.live_graphs, baseline.live_graphs);
    EXPECT_EQ(now.live_timelines, baseline.live_timelines);
    EXPECT_EQ(qd_fuzz::callback_calls.load(), 0u) << "a refused call ran its callback";
    qd_stream active = 0;
    EXPECT_QD_OK(qd_stream_get_active(F, &active));
    EXPECT_EQ(active, D) << "a forged set_active changed the active stream";
    for (int k = 0; k < kHandleKinds; ++k)
        for (uint64_t h : valid[k]) {
            SCOPED_TRACE(kind_name(k));
            switch (k) {
            case kContext: EXPECT_QD_OK(qd_context_synchronize(h)); break;
            case kStream: EXPECT_QD_OK(qd_stream_synchronize(h)); break;
            case kEvent: EXPECT_QD_OK(qd_event_synchronize(h)); break;
            case kModule: {
                qd_kernel k2 = 0;
                EXPECT_QD_OK(qd_kernel_get(h, "qd_test_noop", &k2));
                EXPECT_QD_OK(qd_kernel_destroy(k2));
                break;
            }
            case kKernel: break;
            case kGraph: break;
            }
        }
    EXPECT_QD_OK(qd_launch(S, K, nullptr, nullptr, 0));
    EXPECT_QD_OK(qd_launch(S, KM, nullptr, nullptr, 0));
    EXPECT_QD_OK(qd_graph_launch(GR, S));
    EXPECT_QD_OK(qd_stream_synchronize(S));
}

TEST_F(InvalidHandleFuzz, RandomAddresses_AreInvalidAddressAndNeverCrash) {
    const uint64_t n = scaled(100000, 1000);
    std::mt19937_64 rng(seed() + 1);
    uint64_t bad_free = 0, bad_host_free = 0;
    for (uint64_t i = 0; i < n; ++i) {
        uint64_t r = rng();
        if (i % 3 == 1) r = A + (rng() % 128) - 64;  // around a live block
        if (i % 3 == 2) r = (uint64_t)(uintptr_t)H + (rng() % 128) - 64;
        if (r != A && qd_mem_free_async(S, r) != QD_ERROR_INVALID_ADDRESS) ++bad_free;
        if (r != (uint64_t)(uintptr_t)H && r != 0 &&
            qd_host_free(F, reinterpret_cast<void *>((uintptr_t)r)) != QD_ERROR_INVALID_ADDRESS)
            ++bad_host_free;
    }
    EXPECT_EQ(bad_free, 0u);
    EXPECT_EQ(bad_host_free, 0u);
    EXPECT_EQ(get_stats(F).live_allocations, baseline.live_allocations);
    EXPECT_EQ(get_stats(F).host_bytes_allocated, baseline.host_bytes_allocated);
}

// A NULL pointer the call needs (an output, a descriptor, an array, a name, a callback) is
// checked before any handle (qd.h, "Which error wins"): with a forged or dead handle in every
// handle position of the same call it is still QD_ERROR_INVALID_ARGUMENT, so a caller can rely
// on one answer for one mistake. The entries are generated (api_table_gen.h, kNullEntries).
TEST_F(InvalidHandleFuzz, NullPointers_CheckedBeforeHandles_InvalidArgumentEvenWithBadHandles) {
    const uint64_t bad[] = {0, kAllOnes, 0x0000000500000102ull /* never issued */,
                            dead[kStream][0]};
    for (uint64_t h : bad)
        for (const qd_fuzz::NullEntry &e : qd_fuzz::kNullEntries) {
            SCOPED_TRACE(testing::Message() << e.function << "(" << e.position
                                            << " NULL), handle 0x" << std::hex << h);
            EXPECT_QD(QD_ERROR_INVALID_ARGUMENT, e.invoke(values, h));
            EXPECT_TRUE(qd_fuzz::listed(e.function, QD_ERROR_INVALID_ARGUMENT))
                << "qd.h does not list QD_ERROR_INVALID_ARGUMENT for it";
        }
    EXPECT_EQ(get_stats(F).live_streams, baseline.live_streams);
    EXPECT_EQ(qd_fuzz::callback_calls.load(), 0u) << "a refused call ran its callback";
}
