// The trace files of the process: the parts every context wrote into a path, joined by their
// arrows and written whole at each write (observer.h, "Arrows").
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>

#include "common/error.h"
#include "core/trace/snapshot.h"

namespace qd::core {

// fork() (observer.h): lock_trace_files_for_fork() takes the mutex below.
void lock_trace_files_for_fork();
void unlock_trace_files_after_fork();

// The trace files of this process. A file holds one part per context written into it (the part
// of a context that writes again replaces its earlier one), so every write leaves a complete,
// valid file. Written to a temporary file of a unique name next to the path (mkstemp), then
// renamed over the path, which must be a regular file or absent: a FIFO, a device or any other
// special file is never replaced. A file keeps the parts of at most kKeptDestroyed destroyed
// contexts (the oldest go first, counted in the file), so a process that traces many
// short-lived contexts into one path keeps a bounded file, in memory and on disk.
class TraceFiles {
  public:
    static constexpr size_t kKeptDestroyed = 64;  // qd.h, "Timeline trace", says it

    // Never destroyed: exit() runs static destructors while other threads may still flush or
    // stop a trace (or a later destructor or atexit handler may), so the table must outlive
    // them all. A leaked heap object: the pointer is trivially destructible.
    static TraceFiles &instance() {
        static TraceFiles *files = new TraceFiles();
        return *files;
    }

    // Whether path can be written the way write() writes it (a temporary file created next to
    // it; path itself a regular file or absent).
    qd_status check_writable(const std::string &path) {
        std::lock_guard<std::mutex> lock(mutex_);
        qd_status st = refuse_special(path);
        if (st != QD_SUCCESS) return st;
        std::string tmp;
        FILE *f = open_temporary(path, &tmp);
        if (!f)
            return fail(QD_ERROR_INVALID_ARGUMENT, "trace path '%s' cannot be written: %s",
                        path.c_str(), std::strerror(errno));
        std::fclose(f);
        std::remove(tmp.c_str());
        return QD_SUCCESS;
    }

    // Writes the part of context `id` into path's file. `destroyed`: the context's last part
    // (its destroy), after which the part may be dropped to keep the bound.
    qd_status write(const std::string &path, uint32_t id, TracePart part, bool destroyed) {
        std::lock_guard<std::mutex> lock(mutex_);
        File &file = files_[path];
        file.parts[id] = std::move(part);
        if (destroyed) forget_destroyed(file, id);
        return write_file(path, file);
    }

    // The context `id` was destroyed without writing again (its trace was stopped before):
    // its part in every file counts towards the bound. The files are rewritten only when a
    // part is dropped.
    void context_destroyed(uint32_t id) {
        std::lock_guard<std::mutex> lock(mutex_);
        for (auto &f : files_) {
            if (!f.second.parts.count(id)) continue;
            const uint64_t before = f.second.dropped;
            forget_destroyed(f.second, id);
            if (f.second.dropped != before && write_file(f.first, f.second) != QD_SUCCESS)
                std::fprintf(stderr, "qd: trace: %s\n", last_error_message());
        }
    }

  private:
    struct File {
        std::map<uint32_t, TracePart> parts;  // by context id
        std::deque<uint32_t> destroyed;       // ids of destroyed contexts, oldest first
        uint64_t dropped = 0;                 // destroyed contexts' parts dropped
    };

    // Marks id's part destroyed (once) and drops the oldest destroyed parts beyond the bound.
    void forget_destroyed(File &file, uint32_t id) {
        for (uint32_t d : file.destroyed)
            if (d == id) return;
        file.destroyed.push_back(id);
        while (file.destroyed.size() > kKeptDestroyed) {
            file.parts.erase(file.destroyed.front());
            file.destroyed.pop_front();
            ++file.dropped;
        }
    }

    static qd_status refuse_special(const std::string &path) {
        struct stat st;
        if (::stat(path.c_str(), &st) != 0 || S_ISREG(st.st_mode)) return QD_SUCCESS;
        if (S_ISDIR(st.st_mode))
            return fail(QD_ERROR_INVALID_ARGUMENT, "trace path '%s' is a directory", path.c_str());
        const char *what = S_ISFIFO(st.st_mode)   ? "a FIFO"
                           : S_ISCHR(st.st_mode)  ? "a character device"
                           : S_ISBLK(st.st_mode)  ? "a block device"
                           : S_ISSOCK(st.st_mode) ? "a socket"
                                                  : "a special file";
        return fail(QD_ERROR_INVALID_ARGUMENT,
                    "trace path '%s' is %s, not a regular file; it is never replaced", path.c_str(),
                    what);
    }

    // A new file of a unique name next to path (so two processes, or two starts, never share
    // it), with the permissions of the file it will replace, else those of a new file.
    static FILE *open_temporary(const std::string &path, std::string *tmp) {
        std::string name = path + ".tmp-XXXXXX";
        const int fd = ::mkstemp(name.data());
        if (fd < 0) return nullptr;
        struct stat st;
        const mode_t mode =
            ::stat(path.c_str(), &st) == 0 ? (st.st_mode & 07777) : (0666 & ~process_umask());
        (void)::fchmod(fd, mode);
        FILE *f = ::fdopen(fd, "w");
        if (!f) {
            const int err = errno;
            ::close(fd);
            ::unlink(name.c_str());
            errno = err;
            return nullptr;
        }
        *tmp = std::move(name);
        return f;
    }

    // The umask, read without changing it (umask() would, for every thread): Linux says it in
    // /proc/self/status; 022 when it cannot be read.
    static mode_t process_umask() {
        mode_t mask = 022;
        if (FILE *f = std::fopen("/proc/self/status", "r")) {
            char line[256];
            unsigned int m = 0;
            while (std::fgets(line, sizeof line, f))
                if (std::sscanf(line, "Umask: %o", &m) == 1) {
                    mask = static_cast<mode_t>(m);
                    break;
                }
            std::fclose(f);
        }
        return mask;
    }

    qd_status write_file(const std::string &path, const File &file) {
        qd_status st = refuse_special(path);
        if (st != QD_SUCCESS) return st;
        std::string tmp;
        FILE *f = open_temporary(path, &tmp);
        if (!f)
            return fail(QD_ERROR_INVALID_ARGUMENT, "trace path '%s' cannot be written: %s",
                        path.c_str(), std::strerror(errno));
        std::fputs("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n", f);
        bool first = true;
        if (file.dropped) {
            std::fprintf(f,
                         "{\"ph\":\"M\",\"pid\":0,\"name\":\"process_name\",\"args\":{\"name\":"
                         "\"qd trace file\"}},\n"
                         "{\"ph\":\"M\",\"pid\":0,\"name\":\"process_labels\",\"args\":{"
                         "\"labels\":\"parts of %" PRIu64
                         " destroyed contexts dropped (a file keeps the last %zu)\"}}",
                         file.dropped, kKeptDestroyed);
            first = false;
        }
        for (const auto &p : file.parts) {
            if (p.second.events.empty()) continue;
            if (!first) std::fputs(",\n", f);
            first = false;
            std::fputs(p.second.events.c_str(), f);
        }
        write_arrows(f, file, &first);
        std::fputs("\n]}\n", f);
        const bool closed = std::fclose(f) == 0;
        // Checked again just before the rename: a special file made at path since the start is
        // not replaced either.
        if (closed) st = refuse_special(path);
        if (!closed || st != QD_SUCCESS || std::rename(tmp.c_str(), path.c_str()) != 0) {
            const int err = errno;
            std::remove(tmp.c_str());
            if (st != QD_SUCCESS) return st;
            return fail(QD_ERROR_INVALID_ARGUMENT, "trace path '%s' cannot be written: %s",
                        path.c_str(), std::strerror(err));
        }
        return QD_SUCCESS;
    }

    // One arrow per wait whose record is in the file (either part may be any context's),
    // numbered from 1 in the file. It starts inside the record's slice and ends where the wait
    // was satisfied (the end of its slice), or just before the waiting stream's next slice when
    // that starts at the same time, so that the end binds to that slice; an end that the two
    // contexts' time bases would put before the start is moved to the start.
    static void write_arrows(FILE *f, const File &file, bool *first) {
        std::unordered_map<uint64_t, const TracePart::Record *> records;
        for (const auto &p : file.parts)
            for (const TracePart::Record &r : p.second.records) records[r.serial] = &r;
        constexpr double kTick = 0.001;  // the file's resolution: 1 ns
        uint64_t id = 0;
        for (const auto &p : file.parts) {
            for (const TracePart::Wait &w : p.second.waits) {
                auto it = records.find(w.serial);
                if (it == records.end()) continue;
                const TracePart::Record &r = *it->second;
                double end = w.end;
                if (w.next <= end && w.next - kTick >= w.begin) end = w.next - kTick;
                const double start = (r.begin + std::min(r.end, std::max(end, r.begin))) / 2;
                end = std::max(end, start);
                ++id;
                std::fprintf(f,
                             "%s{\"ph\":\"s\",\"id\":%" PRIu64
                             ",\"pid\":%u,\"tid\":%u,"
                             "\"ts\":%.3f,\"name\":\"%s\",\"cat\":\"dependency\"},\n"
                             "{\"ph\":\"f\",\"id\":%" PRIu64
                             ",\"pid\":%u,\"tid\":%u,"
                             "\"ts\":%.3f,\"name\":\"%s\",\"cat\":\"dependency\"}",
                             *first ? "" : ",\n", id, r.pid, r.tid, start, r.name, id, w.pid, w.tid,
                             end, r.name);
                *first = false;
            }
        }
    }

    std::mutex mutex_;
    std::map<std::string, File> files_;

    friend void qd::core::lock_trace_files_for_fork();
    friend void qd::core::unlock_trace_files_after_fork();
};

}  // namespace qd::core
