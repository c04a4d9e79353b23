// OpenStorage: a store's URL to its backend.
#include <string_view>

#include "hyperpack/host.h"
#include "hyperpack/storage/storage.h"
#include "memory_storage.h"
#ifdef HYPERPACK_WITH_POSTGRES
#include "postgres_storage.h"
#endif
#include "sqlite_storage.h"

namespace hyperpack::storage {

Result<std::unique_ptr<Storage>> OpenStorage(const std::string& url,
                                             const Storage::Options& options) {
  constexpr std::string_view kSqlite = "sqlite://", kMemory = "memory:";
  const std::string_view u(url);
  if (u.starts_with(kSqlite)) {
    const std::string path(u.substr(kSqlite.size()));  // sqlite:///abs or sqlite://rel
    if (path.empty()) return Status::Invalid("storage URL ", url, " names no file");
    return OpenSqlite(path, options);
  }
  if (u.starts_with(kMemory)) {
    std::string_view name = u.substr(kMemory.size());
    if (name.starts_with("//")) name.remove_prefix(2);
    return OpenMemory(std::string(name), url, options);
  }
  if (u.starts_with("postgresql://") || u.starts_with("postgres://")) {
#ifdef HYPERPACK_WITH_POSTGRES
    return OpenPostgres(url, options);
#else
    return Status::Invalid("storage URL ", u.substr(0, u.find("://")),
                           "://...: this hyperpack was built without libpq (install libpq-dev and "
                           "build again)");
#endif
  }
  const size_t scheme = u.find("://");
  if (scheme != std::string_view::npos && scheme > 0 &&
      u.substr(0, scheme).find('/') == std::string_view::npos)
    return Status::Invalid("storage URL ", url, ": '", u.substr(0, scheme),
                           "' is not a backend this hyperpack has; give a file path, "
                           "sqlite:///PATH, postgresql://USER@HOST/DB or memory://NAME");
  return OpenSqlite(url, options);
}

bool RunnerAlive(const StudyRecord& study) {
  if (!study.runner_pid) return false;
  return study.runner_host != HostName() || ProcessAlive(*study.runner_pid);
}

std::optional<std::string> StorageFile(const std::string& url) {
  constexpr std::string_view kSqlite = "sqlite://";
  const std::string_view u(url);
  if (u.starts_with(kSqlite)) return std::string(u.substr(kSqlite.size()));
  if (u.starts_with("memory:") || u.find("://") != std::string_view::npos) return std::nullopt;
  return url;
}

Result<std::unique_ptr<Storage>> Storage::Open(const std::string& url, const Options& options) {
  return OpenStorage(url, options);
}

}  // namespace hyperpack::storage
