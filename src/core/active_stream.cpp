#include "core/active_stream.h"

#include <vector>

#include "common/error.h"
#include "core/context.h"

namespace qd::core {

namespace active_detail {
__thread Entry t_inline[kInline] __attribute__((tls_model("initial-exec")));
__thread uint32_t t_count __attribute__((tls_model("initial-exec")));
}  // namespace active_detail

namespace {

using active_detail::Entry;
using active_detail::kInline;
using active_detail::t_count;
using active_detail::t_inline;

// Entries past the 16 inline ones; leaked per thread only if ever used.
__thread std::vector<Entry> *t_spill __attribute__((tls_model("initial-exec")));

Entry *find(uint64_t ctx) {
    for (uint32_t i = 0; i < t_count; ++i)
        if (t_inline[i].ctx == ctx) return &t_inline[i];
    if (t_spill)
        for (Entry &e : *t_spill)
            if (e.ctx == ctx) return &e;
    return nullptr;
}

bool context_alive(uint64_t ctx) {
    uint64_t owner;
    return HandleTable::instance().check(ctx, Tag::Context, &owner, false) == QD_SUCCESS;
}

// First use of a context on this thread: its active stream starts as the default stream.
void add_entry(const Context &ctx, Entry **out) {
    // The context is live (api/ resolved it), so its slot exists.
    const Entry fresh{ctx.handle(), ctx.default_stream(),
                      HandleTable::instance().live_word(ctx.handle(), Tag::Context)};
    if (t_count == kInline) {
        // Entries of destroyed contexts are inert (context handles are never reissued); drop
        // them to make room.
        uint32_t kept = 0;
        for (uint32_t i = 0; i < t_count; ++i)
            if (context_alive(t_inline[i].ctx)) t_inline[kept++] = t_inline[i];
        t_count = kept;
    }
    if (t_count < kInline) {
        t_inline[t_count] = fresh;
        *out = &t_inline[t_count++];
        return;
    }
    if (!t_spill) t_spill = new std::vector<Entry>();
    std::vector<Entry> kept;
    for (const Entry &e : *t_spill)
        if (context_alive(e.ctx)) kept.push_back(e);
    t_spill->swap(kept);
    t_spill->push_back(fresh);
    *out = &t_spill->back();
}

}  // namespace

qd_status set_active_stream(const Context &ctx, uint64_t stream, uint64_t *previous) {
    Entry *e = find(ctx.handle());
    if (!e) add_entry(ctx, &e);
    if (previous) *previous = e->stream;
    e->stream = stream;
    return QD_SUCCESS;
}

qd_status get_active_stream(const Context &ctx, uint64_t *out) {
    Entry *e = find(ctx.handle());
    if (!e) add_entry(ctx, &e);
    *out = e->stream;
    return QD_SUCCESS;
}

}  // namespace qd::core
