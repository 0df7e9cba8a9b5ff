// What the validation suites share (semantic/validation_test.cpp,
// semantic/validation_contexts_test.cpp, semantic/hazard_corpus_test.cpp): the reports a hazard
// handler received, and the helpers that keep a program free of real data races while it plants
// hazards for the validation model. Header only; public API only, like the rest of this folder.
#pragma once

#include <qd/qd.h>

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "qd_test.h"

namespace qdt {

// One report, as the hazard handler received it (a null string arrives as "(null)").
struct HazardReport {
    qd_context context = 0;
    uint32_t kind = 0;
    qd_stream stream = 0, other_stream = 0;
    uint64_t allocation = 0, bytes = 0, offset = 0;
    std::string operation, other_operation, message;
};

// The reports of every context installed here, in the order they came (from whichever thread's
// call found them).
class HazardLog {
  public:
    // Sends ctx's reports here (qd_context_set_hazard_handler).
    qd_status install(qd_context ctx) {
        return qd_context_set_hazard_handler(ctx, &HazardLog::on_hazard, this);
    }

    std::vector<HazardReport> seen() {
        std::lock_guard<std::mutex> lock(mutex_);
        return seen_;
    }
    std::string first_message() {
        auto s = seen();
        return s.empty() ? std::string() : s[0].message;
    }
    void clear_seen() {
        std::lock_guard<std::mutex> lock(mutex_);
        seen_.clear();
    }

    // Set: every report must name this context (the one whose call found it).
    qd_context only_context = 0;

    static void on_hazard(const qd_hazard *h, void *user) {
        auto *self = static_cast<HazardLog *>(user);
        EXPECT_EQ(h->struct_size, sizeof(qd_hazard));
        if (self->only_context) {
            EXPECT_EQ(h->context, self->only_context);
        }
        HazardReport r;
        r.context = h->context;
        r.kind = h->kind;
        r.stream = h->stream;
        r.other_stream = h->other_stream;
        r.allocation = h->allocation;
        r.bytes = h->allocation_bytes;
        r.offset = h->offset;
        r.operation = h->operation ? h->operation : "(null)";
        r.other_operation = h->other_operation ? h->other_operation : "(null)";
        r.message = h->message ? h->message : "(null)";
        std::lock_guard<std::mutex> lock(self->mutex_);
        self->seen_.push_back(std::move(r));
    }

  private:
    std::mutex mutex_;
    std::vector<HazardReport> seen_;
};

// Waits until everything queued on a stream so far has run, through a host callback: a real
// ordering for the program (and for TSan), none for the validation model. The flags live as
// long as this object (or until clear_flags()).
class RanFlags {
  public:
    void ran(qd_stream s) {
        auto flag = std::make_unique<Flag>();
        ASSERT_QD_OK(flag->enqueue(s));
        ASSERT_TRUE(flag->wait());
        flags_.push_back(std::move(flag));
    }
    void clear_flags() { flags_.clear(); }

  private:
    std::vector<std::unique_ptr<Flag>> flags_;
};

// The fixture of a validation suite: parameterised over the backends, collecting the reports
// (HazardLog) and keeping its waits (RanFlags).
class ValidationFixture : public ::testing::TestWithParam<qd_backend>,
                          protected HazardLog,
                          protected RanFlags {
  protected:
    // SetUp's first step: the test plants hazards (QDT_RACES_ON_PURPOSE), and is skipped where
    // the backend has no device (skipped_ is then set). SetUp returns when IsSkipped().
    void skip_unless_available() {
        QDT_RACES_ON_PURPOSE();  // plants hazards, and sets the validation flags itself
        std::string why;
        if (!backend_available(GetParam(), &why)) {
            skipped_ = true;
            GTEST_SKIP() << "no " << backend_name(GetParam()) << " device: " << why;
        }
    }

    bool skipped_ = false;
};

inline bool contains(const std::string &s, const char *part) {
    return s.find(part) != std::string::npos;
}

// A block of `bytes` allocated on s, zeroed, and ordered before everything (the host
// synchronized with s).
inline uint64_t zeroed_block(qd_stream s, uint64_t bytes) {
    uint64_t a = 0;
    EXPECT_QD_OK(qd_mem_alloc_async(s, bytes, &a));
    EXPECT_QD_OK(qd_memset_async(s, a, 0, bytes));
    EXPECT_QD_OK(qd_stream_synchronize(s));
    return a;
}

// The first word of a block, read on s through the program's own (untracked) host memory.
inline uint32_t read_u32(qd_stream s, uint64_t address) {
    uint32_t v = 0;
    EXPECT_QD_OK(qd_memcpy_async(s, (uint64_t)(uintptr_t)&v, address, sizeof v));
    EXPECT_QD_OK(qd_stream_synchronize(s));
    return v;
}

}  // namespace qdt
