// A record's stored columns, each described once: its name in SQL and how its value becomes a
// statement's parameter (a Cell) and is read back from a result row (a RowView). From a record's
// Table come the INSERT and SELECT text that both backends run, the cells an insert binds and the
// reading of a row, so a new stored field is one line in its record's table (rows.cc), beside its
// migration (schema.cc).
//
//   Table<EventRecord> t("events", "study_id", {Stored<&EventRecord::time>("time"), ...});
//   t.insert()  // "INSERT INTO events(study_id, time, ...) VALUES (?, ?, ...)"
//   t.select()  // "SELECT time, ... FROM events "
//
// Pure. Thread-safety: a Table is immutable once made.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "hyperpack/status.h"

namespace hyperpack::storage {

// One parameter of a statement: NULL, a whole number, a double or text.
using Cell = std::variant<std::monostate, int64_t, double, std::string>;

// A result row, as a backend reads it. A column that is NULL reads as nullopt.
class RowView {
 public:
  virtual ~RowView() = default;
  virtual std::optional<std::string> TextAt(int column) const = 0;
  virtual std::optional<int64_t> IntAt(int column) const = 0;
  virtual std::optional<double> DoubleAt(int column) const = 0;
};

// One column of record R. `read` stores the row's column `index` in the record, or returns the
// text it could not read (a state no hyperpack writes).
template <class R>
struct Column {
  const char* name;
  bool inserted;  // false: the key storage assigns, or a column another statement sets
  Cell (*write)(const R&);
  std::optional<std::string> (*read)(const RowView& row, int index, R* record);
};

// A record's table: its name, the parent key an insert binds first (e.g. "study_id"; "" for none)
// and the columns a SELECT reads, in order.
template <class R>
class Table {
 public:
  Table(std::string name, std::string parent, std::vector<Column<R>> columns)
      : name_(std::move(name)), parent_(std::move(parent)), columns_(std::move(columns)) {
    std::string names, inserted, marks;
    auto append = [](std::string* list, const std::string& item) {
      *list += (list->empty() ? "" : ", ") + item;
    };
    if (!parent_.empty()) {
      append(&inserted, parent_);
      append(&marks, "?");
    }
    for (const Column<R>& c : columns_) {
      append(&names, c.name);
      if (!c.inserted) continue;
      append(&inserted, c.name);
      append(&marks, "?");
    }
    names_ = names;
    select_ = "SELECT " + names + " FROM " + name_ + " ";
    insert_ = "INSERT INTO " + name_ + "(" + inserted + ") VALUES (" + marks + ")";
  }

  const std::string& name() const { return name_; }
  const std::string& parent() const { return parent_; }  // "" for none
  // "a, b, c": the columns a row holds, in order.
  const std::string& names() const { return names_; }
  // "SELECT a, b, c FROM t ", for a WHERE or ORDER BY to follow.
  const std::string& select() const { return select_; }
  // "INSERT INTO t(parent, a, b) VALUES (?, ?, ?)": the parent and the inserted columns.
  const std::string& insert() const { return insert_; }

  // "INSERT INTO t(parent, a, b) SELECT id, ?, ? FROM `parents` WHERE id = ?": a row inserted
  // only where its parent exists; its parameters are ColumnCells() and then the parent's key.
  std::string InsertUnder(const std::string& parents) const {
    std::string names = parent_, marks;
    for (const Column<R>& c : columns_) {
      if (!c.inserted) continue;
      names += std::string(", ") + c.name;
      marks += "?, ";
    }
    return "INSERT INTO " + name_ + "(" + names + ") SELECT id, " +
           marks.substr(0, marks.size() - 2) + " FROM " + parents + " WHERE id = ?";
  }

  // The inserted columns' parameters for `record`, in order.
  std::vector<Cell> ColumnCells(const R& record) const {
    std::vector<Cell> cells;
    for (const Column<R>& c : columns_)
      if (c.inserted) cells.push_back(c.write(record));
    return cells;
  }
  // insert()'s parameters for `record` (under `parent`, where the table has one).
  std::vector<Cell> Cells(const R& record, int64_t parent = 0) const {
    std::vector<Cell> cells;
    if (!parent_.empty()) cells.emplace_back(parent);
    for (Cell& cell : ColumnCells(record)) cells.push_back(std::move(cell));
    return cells;
  }

  // A row of select()'s columns into `record`; kIo naming the column and the value that no
  // hyperpack writes ("an unknown state 'x'"), for the caller to say whose row it was.
  Status Read(const RowView& row, R* record) const {
    for (size_t i = 0; i < columns_.size(); ++i) {
      const std::optional<std::string> bad = columns_[i].read(row, static_cast<int>(i), record);
      if (bad) return Status::Io("an unknown ", columns_[i].name, " '", *bad, "'");
    }
    return Status::Ok();
  }

 private:
  std::string name_, parent_;
  std::vector<Column<R>> columns_;
  std::string names_, select_, insert_;
};

namespace columns_internal {

template <class T>
struct MemberOf;
template <class R, class M>
struct MemberOf<M R::*> {
  using Record = R;
  using Type = M;
};

template <class M>
Cell ToCell(const M& v) {
  if constexpr (std::is_same_v<M, std::string>) {
    return v;
  } else if constexpr (std::is_same_v<M, double>) {
    return v;
  } else if constexpr (std::is_integral_v<M>) {  // bool, int, int64_t and the seed's uint64_t
    return static_cast<int64_t>(v);
  } else {  // std::optional of one of those: NULL when unset
    return v ? ToCell(*v) : Cell();
  }
}

template <class M>
void FromRow(const RowView& row, int i, M* out) {
  if constexpr (std::is_same_v<M, std::string>) {
    *out = row.TextAt(i).value_or("");
  } else if constexpr (std::is_same_v<M, double>) {
    *out = row.DoubleAt(i).value_or(0);
  } else if constexpr (std::is_same_v<M, bool>) {
    *out = row.IntAt(i).value_or(0) != 0;
  } else if constexpr (std::is_integral_v<M>) {
    *out = static_cast<M>(row.IntAt(i).value_or(0));
  } else if constexpr (std::is_same_v<M, std::optional<double>>) {
    *out = row.DoubleAt(i);
  } else {  // std::optional of a whole number
    const std::optional<int64_t> v = row.IntAt(i);
    *out = v ? std::optional<typename M::value_type>(static_cast<typename M::value_type>(*v))
             : std::nullopt;
  }
}

}  // namespace columns_internal

template <auto Member>
using RecordOf = typename columns_internal::MemberOf<decltype(Member)>::Record;

// A column stored as it is: text, a whole number, a double, a flag, or NULL for an unset optional.
template <auto Member>
Column<RecordOf<Member>> Stored(const char* name, bool inserted = true) {
  using R = RecordOf<Member>;
  return {name, inserted, [](const R& r) { return columns_internal::ToCell(r.*Member); },
          [](const RowView& row, int i, R* r) -> std::optional<std::string> {
            columns_internal::FromRow(row, i, &(r->*Member));
            return std::nullopt;
          }};
}

// A column an insert leaves out: the key storage assigns, or one another statement sets.
template <auto Member>
Column<RecordOf<Member>> ReadOnly(const char* name) {
  return Stored<Member>(name, /*inserted=*/false);
}

// A column stored as text that `Encode` writes and `Decode` reads (a configuration as JSON).
template <auto Member, auto Encode, auto Decode>
Column<RecordOf<Member>> Coded(const char* name) {
  using R = RecordOf<Member>;
  return {name, true, [](const R& r) { return Cell(std::string(Encode(r.*Member))); },
          [](const RowView& row, int i, R* r) -> std::optional<std::string> {
            r->*Member = Decode(row.TextAt(i).value_or(""));
            return std::nullopt;
          }};
}

// An enum stored by its name: `Name` writes it, `Parse` reads it (nullopt: a name no hyperpack
// writes, which Table::Read reports).
template <auto Member, auto Name, auto Parse>
Column<RecordOf<Member>> Named(const char* name) {
  using R = RecordOf<Member>;
  return {name, true, [](const R& r) { return Cell(std::string(Name(r.*Member))); },
          [](const RowView& row, int i, R* r) -> std::optional<std::string> {
            const std::string text = row.TextAt(i).value_or("");
            auto parsed = Parse(text);
            if (!parsed) return text;
            r->*Member = *parsed;
            return std::nullopt;
          }};
}

}  // namespace hyperpack::storage
