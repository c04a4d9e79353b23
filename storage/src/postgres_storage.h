// The PostgreSQL backend of Storage (storage.h), for a team's shared database: a
// postgresql://USER@HOST:PORT/DB URL as libpq reads it. Built where libpq is found (libpq-dev).
//
// Its schema is its own (postgres_storage.cc's migrations, versioned as SQLite's are); opening
// applies what is missing under an advisory lock, so two processes that open a new database at
// once do not both create it; a database written by a newer hyperpack is refused, untouched.
// Thread-safety: one libpq connection per handle (Storage's contract).
#pragma once

#include <memory>
#include <string>

#include "hyperpack/storage/storage.h"

namespace hyperpack::storage {

// Connects to `url`; options.migrations is SQLite's and is not used here.
Result<std::unique_ptr<Storage>> OpenPostgres(const std::string& url,
                                              const Storage::Options& options);

// `url` with its password, if it has one, replaced by "***": what messages may show.
std::string RedactedUrl(const std::string& url);

}  // namespace hyperpack::storage
