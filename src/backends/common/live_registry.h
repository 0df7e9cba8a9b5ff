// The registry of a context's live streams, for every backend: Context::synchronize and
// shutdown wait for the streams it lists (qd's own, not other work on the device), and the GPU
// layer names their last kernels in fault messages.
//
// An object registers once it is owned by a shared_ptr (after make_shared: snapshot() locks
// its weak self-reference) and unregisters in its destructor with the entry add() gave it, so
// the registry holds no reference and never keeps a stream alive. close() refuses every later
// add(): a shutdown that snapshots after close() sees every stream that will ever exist.
#pragma once

#include <list>
#include <memory>
#include <mutex>
#include <vector>

namespace qd::backend {

template <class T>  // T derives from std::enable_shared_from_this<T>
class LiveRegistry {
  public:
    using Entry = typename std::list<T *>::iterator;

    // False (nothing registered) once close() has run.
    bool add(T *object, Entry *entry) {
        std::lock_guard<std::mutex> lock(mutex_);
        if (closed_) return false;
        *entry = objects_.insert(objects_.end(), object);
        return true;
    }
    void remove(Entry entry) noexcept {
        std::lock_guard<std::mutex> lock(mutex_);
        objects_.erase(entry);
    }
    void close() noexcept {
        std::lock_guard<std::mutex> lock(mutex_);
        closed_ = true;
    }
    // Every registered object, with a reference each. An object whose destruction has begun
    // (its weak self-reference no longer locks) is left out.
    std::vector<std::shared_ptr<T>> snapshot() {
        std::vector<std::shared_ptr<T>> out;
        std::lock_guard<std::mutex> lock(mutex_);
        out.reserve(objects_.size());
        // A registered object's memory is valid while the lock is held: its destructor
        // unregisters under it.
        for (T *object : objects_)
            if (std::shared_ptr<T> live = object->weak_from_this().lock())
                out.push_back(std::move(live));
        return out;
    }

  private:
    std::mutex mutex_;
    std::list<T *> objects_;
    bool closed_ = false;
};

}  // namespace qd::backend
