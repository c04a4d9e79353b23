// The stored schema: one chain of versioned steps that both SQL backends follow, each step written
// once. The two dialects differ in a few words, put in by one function (schema.cc, Expand): the
// type of a table's own key, of a 64-bit integer and of a double, and the key column the metrics
// table needs where the engine keeps no row id of its own (PostgreSQL).
//
// A step is never edited once released: tests/fixtures/schema/ keeps each released step, and
// tests/storage_test.cc checks that SQLite's steps are still those texts and that PostgreSQL's
// make the tables its released chain (which began at version 4) made.
// Thread-safety: the chains are built once, on first use, and read-only after.
#pragma once

#include <vector>

#include "hyperpack/storage/storage.h"

namespace hyperpack::storage {

enum class Dialect { kSqlite, kPostgres };

// Every step, oldest first, in `dialect`.
const std::vector<Migration>& SchemaMigrations(Dialect dialect);

}  // namespace hyperpack::storage
