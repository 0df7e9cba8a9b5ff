// Coverage-guided API-sequence fuzzing (docs/reliability.md, category 17), a libFuzzer target.
//
// Each input is decoded into a sequence of qd calls on the CPU backend over a small table of
// handles that are live, destroyed, released or of a destroyed context: create/destroy,
// acquire/release, fork/join, launch and parallel launch of real host kernels (one of which
// faults, one of which makes a blocking call from inside), record/wait/query/synchronize,
// stream-ordered alloc/free/memcpy/memset, host callbacks, the active stream and context
// destroy with leases held and work in flight; and qd calls nested in qd calls: a validating
// context's hazard handler, and a CPU module's constructor and destructor
// (tests/cpu_module/qd_test_hook_module.cpp), that destroy objects (their own context
// included), query, or synchronize; and any handle position of any function of qd.h (the
// generated entries of api_table_gen.h) with a forged, destroyed or other context's handle.
// After every step it checks:
//   - the status is one qd.h lists for that function (qd_fuzz::listed, generated from qd.h by
//     abi/gen), and one the step allows (else it traps: a crash for libFuzzer);
//   - each live context's qd_context_get_stats counters equal what the sequence created
//     (streams, leases, events, kernels, allocations);
// and, through the sanitizers it is built with (ASan, UBSan, LSan), that nothing crashes,
// overflows or leaks. Each input ends by bringing the contexts back to their baseline, checked
// with the counters again, and destroying them (World::reset).
//
// The fuzzer's own memory use follows qd.h's contract, so any report is qd's: every memory
// operation goes on the context's default stream (so a block is never freed while another
// stream uses it), and raw host pointers are the fuzzer's own static buffer.
//
// Build and run: tools/fuzz (see tests/README.md).
#include <qd/qd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <atomic>
#include <initializer_list>
#include <iterator>
#include <map>
#include <string_view>
#include <thread>
#include <vector>

#include "api_table_gen.h"

namespace {

// ---------------------------------------------------------------------------------------------
// Input decoding
// ---------------------------------------------------------------------------------------------

struct Input {
    const uint8_t *data;
    size_t size;
    size_t pos = 0;
    bool empty() const { return pos >= size; }
    uint8_t byte() { return pos < size ? data[pos++] : 0; }
    uint32_t below(uint32_t n) { return n ? byte() % n : 0; }
    bool flag() { return byte() & 1; }
};

// ---------------------------------------------------------------------------------------------
// Status checks: the statuses qd.h lists for each function
// ---------------------------------------------------------------------------------------------

[[noreturn]] void violation(const char *call, qd_status st) {
    std::fprintf(stderr,
                 "api_sequence_fuzz: %s returned %s (%d), which qd.h does not list for it: %s\n",
                 call, qd_status_name(st), st, qd_last_error_message());
    __builtin_trap();
}

// The function a call's label names: its first word ("qd_stream_query (inside a kernel)").
std::string_view function_of(const char *call) {
    const char *space = std::strchr(call, ' ');
    return space ? std::string_view(call, size_t(space - call)) : std::string_view(call);
}

// Checks st against the statuses qd.h lists for the call's function (the generated table,
// api_table_gen.h), then against those this step allows (a subset: what the sequence's state
// permits), and that a failure has a message. Traps otherwise.
qd_status expect(const char *call, qd_status st, std::initializer_list<qd_status> allowed) {
    if (!qd_fuzz::find_listed(function_of(call))) {
        std::fprintf(stderr, "api_sequence_fuzz: the label \"%s\" names no qd.h function\n", call);
        __builtin_trap();
    }
    if (!qd_fuzz::listed(function_of(call), st)) violation(call, st);
    if (st == QD_SUCCESS) return st;
    for (qd_status a : allowed)
        if (a == st) {
            if (st < 0 && qd_last_error_message()[0] == '\0') violation(call, st);  // no message
            return st;
        }
    std::fprintf(stderr,
                 "api_sequence_fuzz: %s returned %s (%d), which this step does not allow: %s\n",
                 call, qd_status_name(st), st, qd_last_error_message());
    __builtin_trap();
}

#define S(x) QD_ERROR_##x
#define LOST S(DEVICE_LOST), S(FORKED)

// ---------------------------------------------------------------------------------------------
// Host kernels and callbacks
// ---------------------------------------------------------------------------------------------

int32_t k_noop(const qd_host_kernel_info *, void *const *) { return 0; }
int32_t k_fault(const qd_host_kernel_info *, void *const *) { return 7; }
// Every launch the fuzzer makes has at least one argument, of 8 bytes (pick_args).
// Reads the first argument's copy, so ASan sees a bad copy.
int32_t k_read(const qd_host_kernel_info *, void *const *args) {
    uint64_t v;
    std::memcpy(&v, args[0], sizeof v);
    volatile uint64_t sink = v;
    (void)sink;
    return 0;
}
// A blocking call on a stream of its own context from inside a host kernel: must be refused
// (INVALID_OPERATION) or name a stream that is gone (INVALID_HANDLE), never deadlock.
int32_t k_block(const qd_host_kernel_info *, void *const *args) {
    qd_stream s = 0;
    std::memcpy(&s, args[0], sizeof s);
    expect("qd_stream_synchronize (inside a kernel)", qd_stream_synchronize(s),
           {S(INVALID_OPERATION), S(INVALID_HANDLE), LOST});
    return 0;
}
void cb_noop(void *) {}
void cb_block(void *user) {
    const qd_context c = static_cast<qd_context>(reinterpret_cast<uintptr_t>(user));
    expect("qd_context_synchronize (inside a callback)", qd_context_synchronize(c),
           {S(INVALID_OPERATION), S(INVALID_HANDLE), LOST});
}
constexpr qd_host_kernel_fn kKernelFns[] = {k_noop, k_read, k_block, k_fault};

alignas(16) uint8_t g_host[4096];  // raw host memory the fuzzer owns, for copies and arguments

// ---------------------------------------------------------------------------------------------
// The model: what the sequence created, per context
// ---------------------------------------------------------------------------------------------

constexpr int kContexts = 2, kSlots = 6;

struct Ctx {
    qd_context handle = 0;
    bool live = false;
    qd_stream def = 0;
    qd_stream streams[kSlots] = {};
    bool stream_live[kSlots] = {};
    bool stream_leased[kSlots] = {};
    qd_event events[kSlots] = {};
    bool event_live[kSlots] = {};
    qd_kernel kernels[kSlots] = {};
    bool kernel_live[kSlots] = {};
    std::map<uint64_t, uint64_t> blocks;  // live qd_mem_alloc_async blocks: address -> bytes
    std::vector<uint64_t> dead_blocks;
    void *host[2] = {};
    bool lost = false;
    bool validating = false;  // QD_CONTEXT_VALIDATE | QD_CONTEXT_VALIDATE_FAIL, with on_hazard
};

struct World;
extern World g_world;

// What the next hazard handler call does (set by the step that provokes the hazard), and what
// the hook module's constructor and destructor do (set before qd_module_load and
// qd_module_unload; the destructor may run later, on a worker, when the last launch of the
// module ends).
enum HandlerAction : uint32_t {
    kNothing,
    kDestroyOwnContext,
    kDestroyStream,
    kQueryAndSyncOther,
    kDestroyOtherContext,
    kActions
};
uint32_t g_hazard_action = kNothing;
uint32_t g_ctor_action = kNothing;
std::atomic<uint32_t> g_dtor_action{kNothing};
std::atomic<qd_stream> g_dtor_stream{0};
std::thread::id g_main_thread;  // the fuzzer's thread (LLVMFuzzerInitialize)

struct World {
    Ctx ctx[kContexts];
    std::vector<uint64_t> dead;  // handles of destroyed objects, for use-after-destroy

    Ctx &pick_ctx(Input &in) { return ctx[in.below(kContexts)]; }

    qd_stream any_stream(Input &in) {
        switch (in.below(8)) {
        case 0: return 0;
        case 1: return dead.empty() ? ~0ull : dead[in.below(uint32_t(dead.size()))];
        case 2: return pick_ctx(in).def;
        default: {
            Ctx &c = pick_ctx(in);
            return c.streams[in.below(kSlots)];
        }
        }
    }
    qd_event any_event(Input &in) {
        if (in.below(6) == 0) return dead.empty() ? 0 : dead[in.below(uint32_t(dead.size()))];
        Ctx &c = pick_ctx(in);
        return c.events[in.below(kSlots)];
    }
    qd_kernel any_kernel(Input &in) {
        if (in.below(6) == 0) return dead.empty() ? 0 : dead[in.below(uint32_t(dead.size()))];
        Ctx &c = pick_ctx(in);
        return c.kernels[in.below(kSlots)];
    }
    // The model entry of a stream handle, if the sequence has it live.
    bool find_stream(qd_stream h, Ctx **c, int *slot) {
        for (Ctx &x : ctx)
            for (int i = 0; i < kSlots; ++i)
                if (x.stream_live[i] && x.streams[i] == h) {
                    *c = &x;
                    *slot = i;
                    return true;
                }
        return false;
    }

    void kill_stream(Ctx &c, int i) {
        c.stream_live[i] = false;
        c.stream_leased[i] = false;
        dead.push_back(c.streams[i]);
    }

    void check_counters() {
        for (Ctx &c : ctx) {
            if (!c.live) continue;
            qd_context_stats st = QD_CONTEXT_STATS_INIT;
            if (qd_context_get_stats(c.handle, &st) != QD_SUCCESS)
                violation("qd_context_get_stats", -1);
            uint64_t streams = 1, leased = 0, events = 0, kernels = 0;
            for (int i = 0; i < kSlots; ++i) {
                streams += c.stream_live[i];
                leased += c.stream_live[i] && c.stream_leased[i];
                events += c.event_live[i];
                kernels += c.kernel_live[i];
            }
            if (st.live_streams != streams || st.stream_pool_leased != leased ||
                st.live_events != events || st.live_kernels != kernels ||
                st.live_allocations != c.blocks.size()) {
                std::fprintf(
                    stderr,
                    "api_sequence_fuzz: counters differ from the sequence: streams %llu/%llu "
                    "leased %llu/%llu events %llu/%llu kernels %llu/%llu allocations %llu/%zu\n",
                    (unsigned long long)st.live_streams, (unsigned long long)streams,
                    (unsigned long long)st.stream_pool_leased, (unsigned long long)leased,
                    (unsigned long long)st.live_events, (unsigned long long)events,
                    (unsigned long long)st.live_kernels, (unsigned long long)kernels,
                    (unsigned long long)st.live_allocations, c.blocks.size());
                __builtin_trap();
            }
        }
    }

    void destroy_context(Ctx &c) {
        const qd_status st = expect("qd_context_destroy", qd_context_destroy(c.handle),
                                    {S(INVALID_HANDLE), S(INVALID_OPERATION)});
        if (!c.live) return;
        if (st != QD_SUCCESS) violation("qd_context_destroy (of a live context)", st);
        dead.push_back(c.handle);
        dead.push_back(c.def);
        for (int i = 0; i < kSlots; ++i) {
            if (c.stream_live[i]) dead.push_back(c.streams[i]);
            if (c.event_live[i]) dead.push_back(c.events[i]);
            if (c.kernel_live[i]) dead.push_back(c.kernels[i]);
        }
        c = Ctx{};
    }

    void create_context(Ctx &c, Input &in) {
        if (c.live) return;
        qd_context_desc d = QD_CONTEXT_DESC_INIT;
        d.backend = QD_BACKEND_CPU;
        d.stream_pool_size = 1 + in.below(4);
        d.event_pool_size = in.below(3);
        d.cpu_worker_threads = 1 + in.below(2);
        const uint32_t flags = in.below(16);
        if (flags == 15) d.flags = 4;  // refused (not a qd_context_flags bit)
        // Validating in fail mode, with a hazard handler that calls back into qd (on_hazard).
        const bool validating = flags >= 12 && flags != 15;
        if (validating) d.flags = QD_CONTEXT_VALIDATE | QD_CONTEXT_VALIDATE_FAIL;
        qd_context h = 0;
        const qd_status st = expect("qd_context_create", qd_context_create(&d, &h),
                                    {S(INVALID_ARGUMENT), S(OUT_OF_MEMORY)});
        if (st != QD_SUCCESS) return;
        c = Ctx{};
        c.handle = h;
        c.live = true;
        c.validating = validating;
        expect("qd_context_default_stream", qd_context_default_stream(h, &c.def), {LOST});
        if (validating)
            expect("qd_context_set_hazard_handler",
                   qd_context_set_hazard_handler(h, on_hazard, this), {});
    }

    // The model's side of a context that a nested call destroyed.
    void forget_context(Ctx &c) {
        dead.push_back(c.handle);
        dead.push_back(c.def);
        for (int i = 0; i < kSlots; ++i) {
            if (c.stream_live[i]) dead.push_back(c.streams[i]);
            if (c.event_live[i]) dead.push_back(c.events[i]);
            if (c.kernel_live[i]) dead.push_back(c.kernels[i]);
        }
        c = Ctx{};
    }
    Ctx *find_ctx(qd_context h) {
        for (Ctx &x : ctx)
            if (x.live && x.handle == h) return &x;
        return nullptr;
    }
    Ctx &other_than(const Ctx &c) { return &c == &ctx[0] ? ctx[1] : ctx[0]; }

    // The hazard handler of every validating context: runs g_hazard_action, nested in the call
    // that found the hazard (qd.h: it may call qd, except on streams of its own context).
    static void on_hazard(const qd_hazard *h, void *user) {
        World &w = *static_cast<World *>(user);
        Ctx *own = w.find_ctx(h->context);
        const uint32_t action = g_hazard_action;
        g_hazard_action = kNothing;  // once per provoked hazard
        if (!own) return;
        switch (action) {
        case kDestroyOwnContext:
            expect("qd_context_destroy (in a hazard handler)", qd_context_destroy(own->handle), {});
            w.forget_context(*own);
            break;
        case kDestroyStream: {
            Ctx *c = nullptr;
            int i = 0;
            if (!w.find_stream(h->stream, &c, &i)) break;
            const bool leased = c->stream_leased[i];
            expect(leased ? "qd_stream_release (in a hazard handler)"
                          : "qd_stream_destroy (in a hazard handler)",
                   leased ? qd_stream_release(h->stream) : qd_stream_destroy(h->stream), {});
            w.kill_stream(*c, i);
            break;
        }
        case kQueryAndSyncOther: {
            qd_context_stats st = QD_CONTEXT_STATS_INIT;
            expect("qd_context_get_stats (in a hazard handler)",
                   qd_context_get_stats(own->handle, &st), {});
            Ctx &o = w.other_than(*own);
            if (o.live)
                expect("qd_context_synchronize (in a hazard handler)",
                       qd_context_synchronize(o.handle), {LOST});
            break;
        }
        case kDestroyOtherContext: {
            Ctx &o = w.other_than(*own);
            if (o.live) w.destroy_context(o);
            break;
        }
        default: break;
        }
    }

    // The hook module's constructor and destructor (QDT_MODULE_HOOK, set at start-up).
    static void on_module(int phase) {
        World &w = g_world;
        if (phase == 0) {
            const uint32_t action = g_ctor_action;
            g_ctor_action = kNothing;
            Ctx *c = w.loading_;
            if (!c || !c->live) return;
            switch (action) {
            case kDestroyOwnContext:  // refused: the constructor runs as a callback of c
                if (expect("qd_context_destroy (in a module constructor)",
                           qd_context_destroy(c->handle), {S(INVALID_OPERATION)}) == QD_SUCCESS)
                    violation(
                        "qd_context_destroy (of the loading context, in its module's "
                        "constructor)",
                        QD_SUCCESS);
                break;
            case kDestroyStream: {  // a stream made and destroyed inside the load
                qd_stream s = 0;
                if (expect("qd_stream_create (in a module constructor)",
                           qd_stream_create(c->handle, nullptr, &s),
                           {S(OUT_OF_MEMORY), LOST}) == QD_SUCCESS)
                    expect("qd_stream_destroy (in a module constructor)", qd_stream_destroy(s), {});
                break;
            }
            case kQueryAndSyncOther: {
                qd_context_stats st = QD_CONTEXT_STATS_INIT;
                expect("qd_context_get_stats (in a module constructor)",
                       qd_context_get_stats(c->handle, &st), {});
                if (expect("qd_context_synchronize (in a module constructor)",
                           qd_context_synchronize(c->handle),
                           {S(INVALID_OPERATION), LOST}) == QD_SUCCESS)
                    violation(
                        "qd_context_synchronize (of the loading context, in its module's "
                        "constructor)",
                        QD_SUCCESS);
                break;
            }
            default: break;
            }
            return;
        }
        // The destructor: on this thread inside a qd call, or on a worker of the module's
        // context once its last launch ended, or after the context is gone; always as a
        // callback of the module's context, under the dynamic loader's lock. The stream may be
        // of another module's context by then: a worker only queries it (a blocking call from
        // a worker on another context's stream could wait for work behind that worker, the
        // program's own deadlock); this thread also synchronizes it (refused when it is the
        // module's context).
        if (g_dtor_action.exchange(kNothing) == kQueryAndSyncOther) {
            const qd_stream s = g_dtor_stream.exchange(0);
            const qd_status q = qd_stream_query(s);
            if (q != QD_NOT_READY)
                expect("qd_stream_query (in a module destructor)", q, {S(INVALID_HANDLE), LOST});
            if (std::this_thread::get_id() == g_main_thread)
                expect("qd_stream_synchronize (in a module destructor)", qd_stream_synchronize(s),
                       {S(INVALID_HANDLE), S(INVALID_OPERATION), LOST});
        }
    }
    Ctx *loading_ = nullptr;  // the context a qd_module_load is loading into

    void step(Input &in);
    void reset();
    void forged_entry(Ctx &c, Input &in);
    bool is_live(uint64_t h) const;
    uint64_t live_of(const Ctx &c, int kind, Input &in) const;
    qd_fuzz::Values values_of(const Ctx &c) const;
};

// forged_entry's operation number (World::step takes it from op 1's values).
constexpr uint32_t kOpForgedEntry = 32;

// QD_FUZZ_TRACE=1: one line per step on stderr (where it starts in the input, its operation and
// the bytes it read; forged_entry's call and status), to see what shape an input decodes to
// (tests/README.md, "Fuzzing").
bool g_trace = false;

uint32_t pick_dim(Input &in) {
    static const uint32_t dims[] = {1, 1, 2, 3, 0, 0x10000, 0xFFFFFFFFu};
    return dims[in.below(sizeof dims / sizeof dims[0])];
}

// A launch configuration that is small, zero somewhere (refused) or overflows (refused); never
// a valid but huge grid, which would only make the input slow.
void pick_config(Input &in, qd_launch_config *cfg) {
    *cfg = QD_LAUNCH_CONFIG_INIT;
    for (int i = 0; i < 3; ++i) {
        cfg->grid[i] = pick_dim(in);
        cfg->block[i] = pick_dim(in);
    }
    auto count = [](const uint32_t d[3]) { return uint64_t(d[0]) * d[1] * d[2]; };
    for (uint32_t *d : {cfg->grid, cfg->block}) {
        const uint64_t n = count(d);
        if (n > 64 && n <= 0xFFFFFFFFull) d[0] = d[1] = d[2] = 1;
    }
    cfg->shared_mem_bytes = in.below(3) == 0 ? 64 : 0;
    if (in.below(16) == 0) cfg->struct_size = 8;  // refused
}

// Arguments: first the stream a blocking kernel calls (8 bytes, always there, so k_read and
// k_block may read it), then slices of the fuzzer's static buffer (NULL data, size 0 and counts
// past QD_MAX_ARGS are refused).
uint32_t pick_args(Input &in, qd_arg *args, qd_stream *stream_arg) {
    const uint32_t n = in.below(8) == 0 ? QD_MAX_ARGS + 1 : 1 + in.below(3);
    size_t offset = 0;
    for (uint32_t i = 0; i < n && i < QD_MAX_ARGS + 1; ++i) {
        uint64_t size = in.below(5) * 8;
        if (offset + size > sizeof g_host) size = 0;
        args[i].data = in.below(16) == 0 ? nullptr : g_host + offset;
        args[i].size = size;
        offset += size;
    }
    args[0].data = stream_arg;
    args[0].size = sizeof *stream_arg;
    return n;
}

void World::step(Input &in) {
    const size_t start = in.pos;
    Ctx &c = pick_ctx(in);
    // The operation is byte % 32, except op 1's upper values (161, 193, 225): forged_entry. An
    // operation added later takes values no named input uses, so that each keeps the shape it
    // was written for (tests/README.md, "Fuzzing").
    const uint8_t op_byte = in.byte();
    const uint32_t op = op_byte % 32 == 1 && op_byte >= 160 ? kOpForgedEntry : op_byte % 32;
    struct Trace {
        const Input &in;
        size_t start;
        uint32_t op;
        ~Trace() {
            if (g_trace)
                std::fprintf(stderr, "api_sequence_fuzz: step at byte %zu: op %u, %zu bytes\n",
                             start, op, in.pos - start);
        }
    } trace{in, start, op};
    switch (op) {
    case 0: create_context(c, in); break;
    case 1:
        if (in.below(4) == 0) destroy_context(c);  // rarer: it ends most state
        break;
    case kOpForgedEntry: forged_entry(c, in); break;
    case 2: {  // stream create
        const int i = int(in.below(kSlots));
        if (c.stream_live[i]) break;
        qd_stream_desc d = QD_STREAM_DESC_INIT;
        d.priority = int32_t(in.below(5)) - 3;
        if (in.below(16) == 0) d.flags = 0x80;  // refused
        qd_stream h = 0;
        if (expect("qd_stream_create", qd_stream_create(c.handle, &d, &h),
                   {S(INVALID_ARGUMENT), S(INVALID_HANDLE), S(OUT_OF_MEMORY), LOST}) ==
            QD_SUCCESS) {
            c.streams[i] = h;
            c.stream_live[i] = true;
            c.stream_leased[i] = false;
        }
        break;
    }
    case 3: {  // stream destroy (of anything)
        const qd_stream h = any_stream(in);
        Ctx *owner;
        int slot;
        const bool known = find_stream(h, &owner, &slot);
        const qd_status st = expect("qd_stream_destroy", qd_stream_destroy(h),
                                    {S(INVALID_HANDLE), S(INVALID_OPERATION)});
        if (st == QD_SUCCESS) {
            if (!known || owner->stream_leased[slot])
                violation("qd_stream_destroy (not an owned stream)", st);
            kill_stream(*owner, slot);
        }
        break;
    }
    case 4: {  // acquire
        const int i = int(in.below(kSlots));
        if (c.stream_live[i]) break;
        qd_stream h = 0;
        if (expect("qd_stream_acquire", qd_stream_acquire(c.handle, &h),
                   {S(INVALID_HANDLE), S(POOL_EXHAUSTED), S(OUT_OF_MEMORY), LOST}) == QD_SUCCESS) {
            c.streams[i] = h;
            c.stream_live[i] = true;
            c.stream_leased[i] = true;
        }
        break;
    }
    case 5: {  // release (of anything)
        const qd_stream h = any_stream(in);
        Ctx *owner;
        int slot;
        const bool known = find_stream(h, &owner, &slot);
        const qd_status st = expect("qd_stream_release", qd_stream_release(h),
                                    {S(INVALID_HANDLE), S(INVALID_OPERATION)});
        if (st == QD_SUCCESS) {
            if (!known || !owner->stream_leased[slot])
                violation("qd_stream_release (not a lease)", st);
            kill_stream(*owner, slot);
        }
        break;
    }
    case 6: {  // fork into free slots
        int free_slots[kSlots], nfree = 0;
        for (int i = 0; i < kSlots; ++i)
            if (!c.stream_live[i]) free_slots[nfree++] = i;
        const uint32_t n = in.below(uint32_t(nfree) + 1);  // 0 is refused
        qd_stream kids[kSlots] = {};
        const qd_stream parent = any_stream(in);
        if (expect("qd_stream_fork", qd_stream_fork(parent, n, kids),
                   {S(INVALID_ARGUMENT), S(INVALID_HANDLE), S(POOL_EXHAUSTED), S(OUT_OF_MEMORY),
                    LOST}) == QD_SUCCESS) {
            Ctx *owner = nullptr;
            for (Ctx &x : ctx)
                if (x.live && (x.def == parent || [&] {
                        for (int i = 0; i < kSlots; ++i)
                            if (x.stream_live[i] && x.streams[i] == parent) return true;
                        return false;
                    }()))
                    owner = &x;
            if (!owner) violation("qd_stream_fork (of a stream the sequence does not have)", 0);
            // The children are leases of the parent's context: put them in its free slots.
            int placed = 0;
            for (int i = 0; i < kSlots && placed < int(n); ++i)
                if (!owner->stream_live[i]) {
                    owner->streams[i] = kids[placed++];
                    owner->stream_live[i] = owner->stream_leased[i] = true;
                }
            for (; placed < int(n); ++placed)  // no slot left in that context: give it back
                expect("qd_stream_release", qd_stream_release(kids[placed]), {});
        }
        break;
    }
    case 7: {  // join some streams
        const uint32_t n = in.below(4);
        qd_stream kids[4];
        for (uint32_t i = 0; i < n; ++i) kids[i] = any_stream(in);
        const qd_stream parent = any_stream(in);
        const qd_status st = expect("qd_stream_join", qd_stream_join(parent, n ? kids : nullptr, n),
                                    {S(INVALID_ARGUMENT), S(INVALID_HANDLE), S(WRONG_CONTEXT),
                                     S(INVALID_OPERATION), S(OUT_OF_MEMORY), LOST});
        if (st == QD_SUCCESS)
            for (uint32_t i = 0; i < n; ++i) {
                Ctx *owner;
                int slot;
                if (!find_stream(kids[i], &owner, &slot) || !owner->stream_leased[slot])
                    violation("qd_stream_join (of a stream that is not a live lease)", st);
                kill_stream(*owner, slot);
            }
        break;
    }
    case 8: {  // kernel from a host function
        const int i = int(in.below(kSlots));
        if (c.kernel_live[i]) break;
        qd_kernel h = 0;
        const qd_host_kernel_fn fn = kKernelFns[in.below(4)];
        if (expect("qd_kernel_from_host_fn",
                   qd_kernel_from_host_fn(c.handle, fn, in.flag() ? "fuzz" : nullptr, &h),
                   {S(INVALID_HANDLE), S(OUT_OF_MEMORY), LOST}) == QD_SUCCESS) {
            c.kernels[i] = h;
            c.kernel_live[i] = true;
        }
        break;
    }
    case 9: {  // kernel destroy
        const int i = int(in.below(kSlots));
        const qd_kernel h = c.kernels[i];
        if (expect("qd_kernel_destroy", qd_kernel_destroy(h), {S(INVALID_HANDLE)}) == QD_SUCCESS) {
            if (!c.kernel_live[i]) violation("qd_kernel_destroy (of a dead kernel)", 0);
            c.kernel_live[i] = false;
            dead.push_back(h);
        }
        break;
    }
    case 10:
    case 11: {  // launch
        qd_launch_config cfg;
        pick_config(in, &cfg);
        qd_arg args[QD_MAX_ARGS + 1];
        // k_block synchronizes the stream it is launched on: a blocking call on its own
        // context, which qd refuses. (A blocking call on another context is allowed, and two
        // of them waiting on each other would be the program's own deadlock.)
        qd_stream target = any_stream(in);
        qd_stream self = target;
        const uint32_t n = pick_args(in, args, &self);
        expect("qd_launch",
               qd_launch(target, any_kernel(in), in.below(4) ? &cfg : nullptr, args, n),
               {S(INVALID_ARGUMENT), S(OVERFLOW), S(INVALID_HANDLE), S(WRONG_CONTEXT),
                S(LAUNCH_FAILED), S(OUT_OF_MEMORY), LOST});
        break;
    }
    case 12: {  // parallel launch
        const uint32_t n = in.below(6);
        const qd_stream target = any_stream(in);
        qd_task tasks[6];
        qd_arg args[6][QD_MAX_ARGS + 1];
        qd_stream self[6];  // the launch stream: k_block's blocking call is on its own context
        for (uint32_t i = 0; i < n; ++i) {
            tasks[i] = QD_TASK_INIT;
            tasks[i].group = in.below(3);
            tasks[i].kernel = any_kernel(in);
            pick_config(in, &tasks[i].config);
            self[i] = target;
            tasks[i].num_args = pick_args(in, args[i], &self[i]);
            tasks[i].args = args[i];
            if (in.below(16) == 0) tasks[i].struct_size = 40;  // refused
        }
        expect("qd_launch_parallel", qd_launch_parallel(target, n ? tasks : nullptr, n),
               {S(INVALID_ARGUMENT), S(OVERFLOW), S(INVALID_HANDLE), S(WRONG_CONTEXT),
                S(POOL_EXHAUSTED), S(LAUNCH_FAILED), S(OUT_OF_MEMORY), LOST});
        break;
    }
    case 13: {  // host callback; cb_block synchronizes the stream's own context (refused)
        const bool block = in.flag();
        const qd_stream s = any_stream(in);
        qd_context own = 0;
        qd_stream_get_context(s, &own);  // stays 0 for a dead stream, whose enqueue fails
        expect("qd_launch_host_fn",
               qd_launch_host_fn(s, block ? cb_block : cb_noop,
                                 reinterpret_cast<void *>(uintptr_t(own))),
               {S(INVALID_HANDLE), S(OUT_OF_MEMORY), LOST});
        break;
    }
    case 14: {  // event create
        const int i = int(in.below(kSlots));
        if (c.event_live[i]) break;
        qd_event h = 0;
        const uint32_t flags = in.below(8) == 0 ? 0x10 : in.below(2);
        if (expect("qd_event_create", qd_event_create(c.handle, flags, &h),
                   {S(INVALID_ARGUMENT), S(INVALID_HANDLE), S(OUT_OF_MEMORY), LOST}) ==
            QD_SUCCESS) {
            c.events[i] = h;
            c.event_live[i] = true;
        }
        break;
    }
    case 15: {  // event destroy
        const int i = int(in.below(kSlots));
        const qd_event h = c.events[i];
        if (expect("qd_event_destroy", qd_event_destroy(h), {S(INVALID_HANDLE)}) == QD_SUCCESS) {
            if (!c.event_live[i]) violation("qd_event_destroy (of a dead event)", 0);
            c.event_live[i] = false;
            dead.push_back(h);
        }
        break;
    }
    case 16:
        expect("qd_event_record", qd_event_record(any_stream(in), any_event(in)),
               {S(INVALID_HANDLE), S(WRONG_CONTEXT), S(OUT_OF_MEMORY), LOST});
        break;
    case 17:
        expect("qd_stream_wait_event", qd_stream_wait_event(any_stream(in), any_event(in)),
               {S(INVALID_HANDLE), S(WRONG_CONTEXT), LOST});
        break;
    case 18:
        expect("qd_event_query", qd_event_query(any_event(in)),
               {QD_NOT_READY, S(INVALID_HANDLE), LOST});
        expect("qd_stream_query", qd_stream_query(any_stream(in)),
               {QD_NOT_READY, S(INVALID_HANDLE), LOST});
        break;
    case 19: {
        float ms = 0;
        expect("qd_event_elapsed_ms", qd_event_elapsed_ms(any_event(in), any_event(in), &ms),
               {QD_NOT_READY, S(INVALID_HANDLE), S(WRONG_CONTEXT), S(TIMING_DISABLED),
                S(NOT_RECORDED), LOST});
        break;
    }
    case 20:
        switch (in.below(3)) {
        case 0:
            expect("qd_stream_synchronize", qd_stream_synchronize(any_stream(in)),
                   {S(INVALID_HANDLE), S(INVALID_OPERATION), LOST});
            break;
        case 1:
            expect("qd_event_synchronize", qd_event_synchronize(any_event(in)),
                   {S(INVALID_HANDLE), S(INVALID_OPERATION), LOST});
            break;
        default:
            expect("qd_context_synchronize", qd_context_synchronize(c.handle),
                   {S(INVALID_HANDLE), S(INVALID_OPERATION), LOST});
        }
        break;
    case 21: {  // alloc, on the default stream
        uint64_t bytes = in.below(8) == 0 ? (in.flag() ? 0 : ~0ull) : 1 + in.below(255);
        uint64_t a = 0;
        if (expect("qd_mem_alloc_async", qd_mem_alloc_async(c.def, bytes, &a),
                   {S(INVALID_ARGUMENT), S(OVERFLOW), S(INVALID_HANDLE), S(OUT_OF_MEMORY), LOST}) ==
            QD_SUCCESS) {
            if (!c.live || c.blocks.count(a)) violation("qd_mem_alloc_async (an address twice)", 0);
            c.blocks[a] = bytes;
        }
        break;
    }
    case 22: {  // free: a live block, a block's interior, a freed block, or raw memory
        if (!c.live) break;
        uint64_t a = 0;
        const uint32_t kind = in.below(4);
        if (kind < 2 && !c.blocks.empty()) {
            auto it = c.blocks.begin();
            std::advance(it, in.below(uint32_t(c.blocks.size())));
            a = it->first + (kind == 1 ? 1 : 0);
        } else if (kind == 2 && !c.dead_blocks.empty()) {
            a = c.dead_blocks[in.below(uint32_t(c.dead_blocks.size()))];
        } else {
            a = uint64_t(uintptr_t(g_host));
        }
        const qd_status st = expect("qd_mem_free_async", qd_mem_free_async(c.def, a),
                                    {S(INVALID_ADDRESS), S(INVALID_HANDLE), LOST});
        const bool was_live = c.blocks.count(a) != 0;
        if ((st == QD_SUCCESS) != was_live && st != QD_ERROR_DEVICE_LOST)
            violation("qd_mem_free_async (disagrees with the live blocks)", st);
        if (st == QD_SUCCESS) {
            c.blocks.erase(a);
            c.dead_blocks.push_back(a);
        }
        break;
    }
    case 23:
    case 24: {  // memcpy/memset inside or across a live block's end, or with the host buffer
        if (!c.live || c.blocks.empty()) break;
        auto it = c.blocks.begin();
        std::advance(it, in.below(uint32_t(c.blocks.size())));
        const uint64_t off = in.below(uint32_t(it->second) + 1);  // may be the block's end
        const uint64_t bytes = in.below(8) == 0 ? ~0ull - 2 : in.below(300);
        const uint64_t dst = it->first + off;
        const uint64_t host = uint64_t(uintptr_t(g_host)) + in.below(1024);
        qd_status st;
        if (op == 23)
            st = in.flag() ? qd_memcpy_async(c.def, dst, host, bytes)
                           : qd_memcpy_async(c.def, host, dst, bytes);
        else
            st = qd_memset_async(c.def, dst, uint8_t(in.byte()), bytes);
        expect(op == 23 ? "qd_memcpy_async" : "qd_memset_async", st,
               {S(INVALID_ARGUMENT), S(OVERFLOW), S(INVALID_ADDRESS), S(INVALID_HANDLE),
                S(OUT_OF_MEMORY), LOST});
        if (st == QD_SUCCESS && (off + bytes > it->second || bytes > 1024 + 2048))
            violation("memcpy/memset (a range past a block's end was accepted)", st);
        break;
    }
    case 25: {  // pinned host memory
        const int i = int(in.below(2));
        if (!c.host[i]) {
            void *p = nullptr;
            if (expect("qd_host_alloc", qd_host_alloc(c.handle, 1 + in.below(200), &p),
                       {S(INVALID_HANDLE), S(OUT_OF_MEMORY), LOST}) == QD_SUCCESS)
                c.host[i] = p;
        } else {
            if (expect("qd_host_free", qd_host_free(c.handle, c.host[i]), {S(INVALID_HANDLE)}) ==
                QD_SUCCESS)
                c.host[i] = nullptr;
        }
        break;
    }
    case 26: {  // active stream
        qd_stream prev = 0, now = 0;
        const qd_stream s = any_stream(in);
        const qd_status st =
            expect("qd_stream_set_active", qd_stream_set_active(c.handle, s, &prev),
                   {S(INVALID_HANDLE), S(WRONG_CONTEXT)});
        if (expect("qd_stream_get_active", qd_stream_get_active(c.handle, &now),
                   {S(INVALID_HANDLE)}) == QD_SUCCESS &&
            st == QD_SUCCESS && now != s)
            violation("qd_stream_get_active (not what was set)", 0);
        break;
    }
    case 27: {  // forged and stale handles into a few entry points
        const uint64_t forged =
            (uint64_t(in.byte()) << 40) | (uint64_t(in.byte()) << 8) | in.byte();
        expect("qd_stream_query", qd_stream_query(forged), {QD_NOT_READY, S(INVALID_HANDLE), LOST});
        expect("qd_event_destroy", qd_event_destroy(forged), {S(INVALID_HANDLE)});
        expect("qd_context_synchronize", qd_context_synchronize(forged),
               {S(INVALID_HANDLE), LOST, S(INVALID_OPERATION)});
        break;
    }
    case 30: {  // a hazard (a race refused in fail mode) whose handler calls back into qd
        if (!c.live || !c.validating || c.blocks.empty()) break;
        const int i = int(in.below(kSlots));
        if (!c.stream_live[i]) break;
        auto it = c.blocks.begin();
        std::advance(it, in.below(uint32_t(c.blocks.size())));
        const uint64_t a = it->first, bytes = it->second;
        g_hazard_action = in.below(kActions);
        // Ordered after the allocation (the default stream); then the same bytes on another
        // stream, unordered: a race, refused with nothing queued.
        qd_status st = expect("qd_memset_async", qd_memset_async(c.def, a, in.byte(), bytes),
                              {S(INVALID_HANDLE), LOST});
        if (st == QD_SUCCESS) {
            const qd_stream s = c.streams[i];
            st = expect("qd_memset_async (a race)", qd_memset_async(s, a, 0, bytes),
                        {S(HAZARD), S(INVALID_HANDLE), LOST});
            // Not a race after all when the host learnt meanwhile that the first memset ran (a
            // module destructor's query on a worker): then order the block's later use again.
            if (st == QD_SUCCESS)
                expect("qd_stream_synchronize", qd_stream_synchronize(s),
                       {S(INVALID_HANDLE), LOST});
        }
        g_hazard_action = kNothing;
        break;
    }
    case 31: {  // the hook module: its constructor and destructor call back into qd
        if (!c.live) break;
        static const char kPath[] = QD_TEST_HOOK_MODULE_PATH;
        g_ctor_action = in.below(kActions);
        loading_ = &c;
        qd_module m = 0;
        const qd_status st =
            expect("qd_module_load", qd_module_load(c.handle, kPath, sizeof kPath - 1, &m),
                   {S(INVALID_HANDLE), S(OUT_OF_MEMORY), LOST});
        loading_ = nullptr;
        g_ctor_action = kNothing;
        if (st != QD_SUCCESS) {
            if (st == QD_ERROR_INVALID_HANDLE && c.live)
                violation("qd_module_load (INVALID_HANDLE for a live context)", st);
            break;
        }
        qd_kernel k = 0;
        if (expect("qd_kernel_get", qd_kernel_get(m, "qd_test_hook_noop", &k),
                   {S(OUT_OF_MEMORY), LOST}) == QD_SUCCESS) {
            const int n = int(in.below(3));
            for (int j = 0; j < n; ++j) {
                const int i = int(in.below(kSlots));
                const qd_stream s = c.stream_live[i] ? c.streams[i] : c.def;
                qd_launch_config cfg = QD_LAUNCH_CONFIG_INIT;
                qd_arg arg = {g_host, 8};
                expect("qd_launch (the hook module's kernel)", qd_launch(s, k, &cfg, &arg, 1),
                       {S(OUT_OF_MEMORY), LOST});
            }
        }
        g_dtor_stream = c.def;
        g_dtor_action = in.flag() ? kQueryAndSyncOther : kNothing;
        expect("qd_module_unload", qd_module_unload(m), {});
        break;
    }
    case 28: {  // import (the CPU backend has no native streams)
        qd_stream h = 0;
        expect("qd_stream_import", qd_stream_import(c.handle, 1 + in.byte(), &h),
               {S(INVALID_HANDLE), S(NOT_SUPPORTED), LOST});
        break;
    }
    default: {  // priorities and contexts of streams
        int32_t p = 0;
        qd_context owner = 0;
        const qd_stream s = any_stream(in);
        expect("qd_stream_get_priority", qd_stream_get_priority(s, &p), {S(INVALID_HANDLE)});
        if (expect("qd_stream_get_context", qd_stream_get_context(s, &owner),
                   {S(INVALID_HANDLE)}) == QD_SUCCESS) {
            bool found = false;
            for (Ctx &x : ctx) found |= x.live && x.handle == owner;
            if (!found)
                violation("qd_stream_get_context (a context the sequence does not have)", 0);
        }
        break;
    }
    }
    check_counters();
}

// Whether h names an object the sequence has live (of any type).
bool World::is_live(uint64_t h) const {
    for (const Ctx &x : ctx) {
        if (!x.live) continue;
        if (h == x.handle || h == x.def) return true;
        for (int i = 0; i < kSlots; ++i)
            if ((x.stream_live[i] && h == x.streams[i]) || (x.event_live[i] && h == x.events[i]) ||
                (x.kernel_live[i] && h == x.kernels[i]))
                return true;
    }
    return false;
}

// A live handle of c of the given kind (HandleKind), or 0 when c has none (the sequence keeps
// no modules or graphs).
uint64_t World::live_of(const Ctx &c, int kind, Input &in) const {
    if (!c.live) return 0;
    const int from = int(in.below(kSlots));
    for (int j = 0; j < kSlots; ++j) {
        const int i = (from + j) % kSlots;
        if (kind == qd_fuzz::kStream && c.stream_live[i]) return c.streams[i];
        if (kind == qd_fuzz::kEvent && c.event_live[i]) return c.events[i];
        if (kind == qd_fuzz::kKernel && c.kernel_live[i]) return c.kernels[i];
    }
    if (kind == qd_fuzz::kContext) return c.handle;
    if (kind == qd_fuzz::kStream) return c.def;
    return 0;
}

// The values of c for a generated entry's other positions (fuzz_values.h): its default stream
// (every memory operation of the fuzzer goes there), its first live event and kernel, and the
// fuzzer's own host buffer for addresses and host pointers (no allocation of any context: a
// call that got that far is refused with QD_ERROR_INVALID_ADDRESS).
qd_fuzz::Values World::values_of(const Ctx &c) const {
    qd_fuzz::Values v;
    if (c.live) {
        v.handles[qd_fuzz::kContext] = c.handle;
        v.handles[qd_fuzz::kStream] = c.def;
        for (int i = kSlots - 1; i >= 0; --i) {
            if (c.event_live[i]) v.handles[qd_fuzz::kEvent] = c.events[i];
            if (c.kernel_live[i]) v.handles[qd_fuzz::kKernel] = c.kernels[i];
        }
    }
    static const char kImage[] = "/nonexistent/qd-fuzz-module.so";
    v.image = kImage;
    v.image_size = sizeof kImage - 1;
    v.path = "/nonexistent/qd-fuzz-trace.json";
    v.host = g_host + 2048;
    v.dst = uint64_t(uintptr_t(g_host + 2048));
    v.src = uint64_t(uintptr_t(g_host + 2048 + 64));
    return v;
}

// A generated entry (api_table_gen.h: every handle position of every function in qd.h) called
// with a forged, destroyed or other context's handle in that position and c's values elsewhere.
// A forged or destroyed handle must give QD_ERROR_INVALID_HANDLE; another context's live handle
// (only where the function has another handle position, so the call mixes two contexts) may
// give any status qd.h lists for the function.
void World::forged_entry(Ctx &c, Input &in) {
    constexpr uint32_t n = sizeof qd_fuzz::kHandleEntries / sizeof qd_fuzz::kHandleEntries[0];
    static_assert(n <= 0xffff, "two bytes pick an entry");
    const qd_fuzz::HandleEntry &e =
        qd_fuzz::kHandleEntries[((uint32_t(in.byte()) << 8) | in.byte()) % n];
    uint32_t mode = in.below(3);
    if (mode == 2 && e.handle_positions < 2) mode = 1;  // alone, another context's handle is valid
    uint64_t h = 0;
    const char *what = "forged";
    if (mode == 0) {
        h = (uint64_t(in.byte()) << 56) | (uint64_t(in.byte()) << 40) |
            (uint64_t(in.byte()) << 32) | (uint64_t(in.byte()) << 8) | in.byte();
    } else if (mode == 1) {
        what = "destroyed";
        h = dead.empty() ? ~0ull : dead[in.below(uint32_t(dead.size()))];
    } else {
        what = "another context's";
        h = live_of(other_than(c), e.kind, in);
    }
    if (mode != 2 && is_live(h)) return;  // not a bad handle after all
    char label[160];
    std::snprintf(label, sizeof label, "%s (%s %s handle in %s)", e.function, what,
                  qd_fuzz::kHandleKindNames[e.kind], e.position);
    const qd_fuzz::Values v = values_of(c);
    const qd_status st = e.invoke(v, h);
    if (g_trace) std::fprintf(stderr, "api_sequence_fuzz: %s: %s\n", label, qd_status_name(st));
    if (mode == 2) {
        expect(label, st, {st});  // any status qd.h lists
    } else if (h == v.handle(e.kind)) {
        // The value of another position too (0 where c is gone): a join of the parent itself,
        // a peer query of the context itself are refused first ("Which error wins", class 1).
        expect(label, st, {S(INVALID_HANDLE), S(INVALID_ARGUMENT)});
        if (st == QD_SUCCESS) violation(label, st);
    } else {
        expect(label, st, {S(INVALID_HANDLE)});
        if (st == QD_SUCCESS) violation(label, st);
    }
}

// Ends an input: brings every live context back to its baseline (no streams but the default
// one, no leases, events, kernels or allocations, the default stream active; a lost context is
// destroyed), checks the counters there, then destroys every context. Each input starts from
// no context at all, so everything an input made is freed by its end and LeakSanitizer's
// per-input check (libFuzzer -detect_leaks=1) sees a real leak as one: contexts kept across
// inputs left their worker threads holding memory LSan could not attribute.
void World::reset() {
    for (Ctx &c : ctx) {
        if (!c.live) continue;
        const qd_status st =
            expect("qd_context_synchronize", qd_context_synchronize(c.handle), {LOST});
        if (st != QD_SUCCESS) {
            destroy_context(c);
            continue;
        }
        for (int i = 0; i < kSlots; ++i) {
            if (c.stream_live[i])
                expect(c.stream_leased[i] ? "qd_stream_release" : "qd_stream_destroy",
                       c.stream_leased[i] ? qd_stream_release(c.streams[i])
                                          : qd_stream_destroy(c.streams[i]),
                       {});
            if (c.event_live[i]) expect("qd_event_destroy", qd_event_destroy(c.events[i]), {});
            if (c.kernel_live[i]) expect("qd_kernel_destroy", qd_kernel_destroy(c.kernels[i]), {});
            c.stream_live[i] = c.stream_leased[i] = c.event_live[i] = c.kernel_live[i] = false;
        }
        for (auto &kv : c.blocks)
            expect("qd_mem_free_async", qd_mem_free_async(c.def, kv.first), {LOST});
        c.blocks.clear();
        c.dead_blocks.clear();
        for (void *&h : c.host)
            if (h) {
                expect("qd_host_free", qd_host_free(c.handle, h), {});
                h = nullptr;
            }
        expect("qd_stream_set_active", qd_stream_set_active(c.handle, c.def, nullptr), {});
        expect("qd_context_synchronize", qd_context_synchronize(c.handle), {LOST});
    }
    check_counters();
    for (Ctx &c : ctx)
        if (c.live) destroy_context(c);
    dead.clear();
    // A module destructor still to come (its last launch was still queued) does nothing.
    g_dtor_action = kNothing;
    g_dtor_stream = 0;
}

World g_world;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
    // The hook module's constructor and destructor find World::on_module here; set once,
    // before any thread exists.
    char value[32];
    std::snprintf(value, sizeof value, "%llx", (unsigned long long)(uintptr_t)&World::on_module);
    setenv("QDT_MODULE_HOOK", value, 1);
    g_main_thread = std::this_thread::get_id();
    const char *trace = std::getenv("QD_FUZZ_TRACE");
    g_trace = trace && *trace && *trace != '0';
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 4096) return -1;  // longer sequences add time, not states
    Input in{data, size};
    World &w = g_world;
    w.create_context(w.ctx[0], in);
    for (int steps = 0; !in.empty() && steps < 400; ++steps) w.step(in);
    w.reset();
    return 0;
}
