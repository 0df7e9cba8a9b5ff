#include "core/active_stream.h"

#include <vector>

#include "common/error.h"
#include "core/context.h"

namespace qd::core {

namespace {

struct Entry {
    uint64_t ctx;
    uint64_t stream;
};

constexpr size_t kPruneAbove = 16;

thread_local std::vector<Entry> t_active;

Entry *find(uint64_t ctx) {
    for (Entry &e : t_active)
        if (e.ctx == ctx) return &e;
    return nullptr;
}

// First use of a context on this thread: its active stream starts as the default stream.
qd_status add_entry(uint64_t ctx, Entry **out) {
    std::shared_ptr<Context> c;
    qd_status st = resolve(ctx, &c);
    if (st != QD_SUCCESS) return st;
    if (t_active.size() >= kPruneAbove) {
        HandleTable &table = HandleTable::instance();
        std::vector<Entry> kept;
        for (const Entry &e : t_active) {
            uint64_t owner;
            if (table.check(e.ctx, Tag::Context, &owner, false) == QD_SUCCESS) kept.push_back(e);
        }
        t_active.swap(kept);
    }
    t_active.push_back(Entry{ctx, c->default_stream()});
    *out = &t_active.back();
    return QD_SUCCESS;
}

}  // namespace

qd_status set_active_stream(uint64_t ctx, uint64_t stream, uint64_t *previous) {
    HandleTable &table = HandleTable::instance();
    uint64_t owner = 0;
    qd_status st = table.check(ctx, Tag::Context, &owner);
    if (st != QD_SUCCESS) return st;
    st = table.check(stream, Tag::Stream, &owner);
    if (st != QD_SUCCESS) return st;
    if (owner != ctx)
        return fail(QD_ERROR_WRONG_CONTEXT,
                    "stream 0x%016llx belongs to context 0x%016llx, not 0x%016llx",
                    (unsigned long long)stream, (unsigned long long)owner,
                    (unsigned long long)ctx);
    Entry *e = find(ctx);
    if (!e) {
        st = add_entry(ctx, &e);
        if (st != QD_SUCCESS) return st;
    }
    if (previous) *previous = e->stream;
    e->stream = stream;
    return QD_SUCCESS;
}

qd_status get_active_stream(uint64_t ctx, uint64_t *out) {
    uint64_t owner = 0;
    qd_status st = HandleTable::instance().check(ctx, Tag::Context, &owner);
    if (st != QD_SUCCESS) return st;
    Entry *e = find(ctx);
    if (!e) {
        st = add_entry(ctx, &e);
        if (st != QD_SUCCESS) return st;
    }
    *out = e->stream;
    return QD_SUCCESS;
}

}  // namespace qd::core
