// A plain-text table for people: a header row, aligned columns, numbers right-aligned.
// Thread-safety: a value; one thread at a time.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace hyperpack {

class Table {
 public:
  explicit Table(std::vector<std::string> headers) : headers_(std::move(headers)) {}
  void AddRow(std::vector<std::string> cells);
  size_t rows() const { return rows_.size(); }
  // Cells wider than `max_width` are cut with "...".
  void Print(std::ostream& out, size_t max_width = 60) const;

 private:
  std::vector<std::string> headers_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace hyperpack
