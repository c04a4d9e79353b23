// The in-memory backend of Storage (storage.h): a store that lives as long as a handle on it, for
// the virtual-time driver, tests and programs that keep nothing. Handles opened on the same name
// share one store; a transaction holds the store's lock, so another handle's reads see it whole
// or not at all, and its failure restores what was there before it began.
// Thread-safety: Storage's contract; the store itself is guarded by its mutex.
#pragma once

#include <memory>
#include <string>

#include "hyperpack/storage/storage.h"

namespace hyperpack::storage {

// The store `name` ("" for a fresh one no other handle can open); `url` is what path() says.
Result<std::unique_ptr<Storage>> OpenMemory(const std::string& name, const std::string& url,
                                            const Storage::Options& options);

}  // namespace hyperpack::storage
