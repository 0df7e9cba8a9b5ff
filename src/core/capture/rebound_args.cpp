// The argument values of a graph's kernel nodes as rebound (core/capture/rebound_args.h).
#include "core/capture/rebound_args.h"

#include <cstring>

#include "core/capture/graph.h"

namespace qd::core {

ReboundArgs::ReboundArgs(const GraphData &data) {
    const size_t count = data.launches.size();
    size_t total_args = 0, total_bytes = 0;
    for (uint32_t index : data.launches) {
        const GraphNode &n = data.nodes[index];
        total_args += n.args.size();
        for (const qd_arg &a : n.args) total_bytes += a.size;
    }
    bytes_.resize(total_bytes);
    args_.resize(total_args);
    first_.resize(count + 1);
    rebound_.assign(count, 0);
    size_t arg = 0, at = 0;
    for (size_t k = 0; k < count; ++k) {
        first_[k] = uint32_t(arg);
        for (const qd_arg &a : data.nodes[data.launches[k]].args) {
            std::memcpy(bytes_.data() + at, a.data, a.size);
            args_[arg].data = bytes_.data() + at;
            args_[arg].size = a.size;
            at += a.size;
            ++arg;
        }
    }
    first_[count] = uint32_t(arg);
}

ReboundArgs::ReboundArgs(const ReboundArgs &other)
    : bytes_(other.bytes_), args_(other.args_), first_(other.first_), rebound_(other.rebound_) {
    const uint8_t *base = other.bytes_.data();
    for (qd_arg &a : args_) a.data = bytes_.data() + (static_cast<const uint8_t *>(a.data) - base);
}

void ReboundArgs::write(uint32_t k, const qd_arg *args) {
    const uint32_t n = num_args(k);
    qd_arg *mine = args_.data() + first_[k];
    for (uint32_t i = 0; i < n; ++i)
        std::memcpy(const_cast<void *>(mine[i].data), args[i].data, mine[i].size);
    rebound_[k] = 1;
}

}  // namespace qd::core
