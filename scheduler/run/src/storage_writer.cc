#include "storage_writer.h"

namespace hyperpack::scheduler {

StorageWriter::StorageWriter(std::unique_ptr<storage::Storage> db,
                             std::function<void(Status)> on_error)
    : db_(std::move(db)), on_error_(std::move(on_error)), thread_([this] { Loop(); }) {}

StorageWriter::~StorageWriter() { Close(); }

void StorageWriter::Post(Op op) { PostThen(std::move(op), nullptr); }

void StorageWriter::PostThen(Op op, std::function<void(const Status&)> then) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back({std::move(op), std::move(then)});
  }
  cv_.notify_one();
}

void StorageWriter::Close() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closing_ && !thread_.joinable()) return;
    closing_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void StorageWriter::Loop() {
  while (true) {
    std::deque<Entry> batch;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return closing_ || !queue_.empty(); });
      if (queue_.empty() && closing_) return;
      batch.swap(queue_);
    }
    Status s = db_->Transaction([&]() -> Status {
      for (Entry& e : batch) HP_RETURN_IF_ERROR(e.op(*db_));
      return Status::Ok();
    });
    if (!s.ok() && on_error_) on_error_(s);
    for (Entry& e : batch)
      if (e.then) e.then(s);
  }
}

}  // namespace hyperpack::scheduler
