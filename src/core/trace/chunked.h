// Chunked<T>: the trace's append-only sequences (a window's slots, its boundaries). Elements
// live in chunks of kChunk that never move, so a reference stays valid while the sequence grows,
// and appending allocates once per kChunk elements (std::deque allocates every 512 bytes: every
// third slot). Copyable (a flush copies its window).
#pragma once

#include <cassert>
#include <cstddef>
#include <memory>
#include <vector>

namespace qd::core {

template <typename T, size_t kChunk = 1024>
class Chunked {
  public:
    Chunked() = default;
    Chunked(Chunked &&) noexcept = default;
    Chunked &operator=(Chunked &&) noexcept = default;
    Chunked(const Chunked &other) { *this = other; }
    Chunked &operator=(const Chunked &other) {
        if (this == &other) return *this;
        chunks_.clear();
        size_ = 0;
        for (size_t i = 0; i < other.size_; ++i) emplace_back() = other[i];
        return *this;
    }

    // A default-constructed element at the end (a chunk's elements are made with it).
    T &emplace_back() {
        if (size_ == chunks_.size() * kChunk) chunks_.push_back(std::make_unique<T[]>(kChunk));
        return (*this)[size_++];
    }
    // An index at or past the end is a caller's bug (one kept across a clear(): observer.h says
    // why none is); checked where asserts are on (every build but release), so that tests fail
    // on it at once rather than write into a freed chunk.
    T &operator[](size_t i) {
        assert(i < size_);
        return chunks_[i / kChunk][i % kChunk];
    }
    const T &operator[](size_t i) const {
        assert(i < size_);
        return chunks_[i / kChunk][i % kChunk];
    }
    size_t size() const { return size_; }
    bool empty() const { return size_ == 0; }
    void clear() {
        chunks_.clear();
        size_ = 0;
    }

    template <typename Owner, typename Ref>
    class Iter {
      public:
        Iter(Owner *c, size_t i) : c_(c), i_(i) {}
        Ref operator*() const { return (*c_)[i_]; }
        Iter &operator++() {
            ++i_;
            return *this;
        }
        bool operator!=(const Iter &o) const { return i_ != o.i_; }

      private:
        Owner *c_;
        size_t i_;
    };
    Iter<Chunked, T &> begin() { return {this, 0}; }
    Iter<Chunked, T &> end() { return {this, size_}; }
    Iter<const Chunked, const T &> begin() const { return {this, 0}; }
    Iter<const Chunked, const T &> end() const { return {this, size_}; }

  private:
    std::vector<std::unique_ptr<T[]>> chunks_;
    size_t size_ = 0;
};

}  // namespace qd::core
