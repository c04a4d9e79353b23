// A thread that owns the runner's Storage and applies writes in the order they were posted,
// batching whatever has queued up into one transaction. The io_context thread never waits on
// SQLite.
// Thread-safety: Post and Close may be called from any thread; the Storage is touched only by the
// writer thread once it has started.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "hyperpack/status.h"
#include "hyperpack/storage/storage.h"

namespace hyperpack::scheduler {

class StorageWriter {
 public:
  using Op = std::function<Status(storage::Storage&)>;
  // `on_error` runs on the writer thread when a batch fails (it has been rolled back); later
  // batches are still attempted.
  StorageWriter(std::unique_ptr<storage::Storage> db, std::function<void(Status)> on_error);
  ~StorageWriter();

  void Post(Op op);
  // Like Post; `then` runs on the writer thread once the batch holding `op` has committed (OK) or
  // failed (the batch's error).
  void PostThen(Op op, std::function<void(const Status&)> then);
  // Applies everything posted so far, then stops the thread. Idempotent.
  void Close();

 private:
  void Loop();

  std::unique_ptr<storage::Storage> db_;
  std::function<void(Status)> on_error_;
  std::mutex mu_;
  std::condition_variable cv_;
  struct Entry {
    Op op;
    std::function<void(const Status&)> then;
  };
  std::deque<Entry> queue_;  // guarded by mu_
  bool closing_ = false;     // guarded by mu_
  std::thread thread_;
};

}  // namespace hyperpack::scheduler
