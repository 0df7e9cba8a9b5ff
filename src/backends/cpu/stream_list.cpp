#include "backends/cpu/stream_list.h"

#include "backends/cpu/cpu_stream.h"

namespace qd::backend::cpu {

void StreamList::push_back(std::shared_ptr<CpuStream> stream) noexcept {
    CpuStream *raw = stream.get();
    raw->link_.next = nullptr;
    raw->link_.self = std::move(stream);
    if (tail_) {
        tail_->link_.next = raw;
    } else {
        head_ = raw;
    }
    tail_ = raw;
}

std::shared_ptr<CpuStream> StreamList::pop_front() noexcept {
    CpuStream *raw = head_;
    if (!raw) return nullptr;
    head_ = raw->link_.next;
    if (!head_) tail_ = nullptr;
    raw->link_.next = nullptr;
    return std::move(raw->link_.self);
}

void StreamList::splice_back(StreamList &other) noexcept {
    if (!other.head_) return;
    if (tail_) {
        tail_->link_.next = other.head_;
    } else {
        head_ = other.head_;
    }
    tail_ = other.tail_;
    other.head_ = other.tail_ = nullptr;
}

void StreamList::clear() noexcept {
    while (std::shared_ptr<CpuStream> stream = pop_front()) {
    }
}

}  // namespace qd::backend::cpu
