// The sizes a message gives its blocks, for tests that check which size a message names (the
// size asked for, never the end guard's n + 1). Header only; no qd call.
#pragma once

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace qdt {

// Each decimal number a message writes as a size ("the 1001-byte allocation", "(1001 bytes)"),
// in the order they appear. Never digits inside a handle or an address, which messages print in
// hex and which may hold any digits: a test that looks for a number anywhere in a message
// depends on the handles and addresses of its run.
inline std::vector<uint64_t> sizes_named(const std::string &message) {
    std::vector<std::pair<size_t, uint64_t>> found;  // (where, size)
    for (const char *unit : {"-byte", " bytes)"}) {
        for (size_t at = message.find(unit); at != std::string::npos;
             at = message.find(unit, at + 1)) {
            size_t first = at;
            while (first > 0 && std::isdigit(static_cast<unsigned char>(message[first - 1])))
                --first;
            if (first == at) continue;  // no number before the unit
            if (first > 0 && std::isalnum(static_cast<unsigned char>(message[first - 1])))
                continue;  // the tail of a hex number
            found.emplace_back(first, std::stoull(message.substr(first, at - first)));
        }
    }
    std::sort(found.begin(), found.end());
    std::vector<uint64_t> sizes;
    for (const auto &f : found) sizes.push_back(f.second);
    return sizes;
}

}  // namespace qdt
