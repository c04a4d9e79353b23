// How every backend runs Storage::Transaction: the outermost call begins, commits or rolls back;
// calls inside it (the single-call writes, a nested Transaction) join it. Internal to storage.
// Thread-safety: one per handle, as the handle.
#pragma once

#include <functional>

#include "hyperpack/status.h"

namespace hyperpack::storage {

class TransactionDepth {
 public:
  // Runs `body` in the transaction open on this handle, or in a new one: `begin` first, then
  // `commit` when the body succeeded (rolled back when that fails too) or `rollback` when it did
  // not; the body's error, else the commit's status.
  Status Run(const std::function<Status()>& body, const std::function<Status()>& begin,
             const std::function<Status()>& commit, const std::function<void()>& rollback) {
    if (depth_ > 0) return Nested(body);
    HP_RETURN_IF_ERROR(begin());
    Status s = Nested(body);
    if (!s.ok()) {
      rollback();
      return s;
    }
    Status c = commit();
    if (!c.ok()) rollback();
    return c;
  }
  bool open() const { return depth_ > 0; }

 private:
  Status Nested(const std::function<Status()>& body) {
    ++depth_;
    Status s = body();
    --depth_;
    return s;
  }

  int depth_ = 0;
};

}  // namespace hyperpack::storage
