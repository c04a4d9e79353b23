#include "denormals.h"

#include <ATen/Context.h>
#include <ATen/Parallel.h>

namespace hyperpack::trainer {

bool SetFlushDenormals(bool on) {
  if (!at::globalContext().setFlushDenormal(on)) return false;
  // One chunk per pool thread, so that each sets its own mode (a chunk runs on the thread that
  // takes it; with one thread the loop runs here, which was set above).
  const int64_t threads = at::get_num_threads();
  at::parallel_for(0, threads, 1,
                   [on](int64_t, int64_t) { at::globalContext().setFlushDenormal(on); });
  return true;
}

}  // namespace hyperpack::trainer
