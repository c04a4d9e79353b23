#include "hyperpack/table.h"

#include <algorithm>

#include "hyperpack/text.h"

namespace hyperpack {
namespace {

std::string Cut(const std::string& s, size_t width) {
  if (s.size() <= width) return s;
  return s.substr(0, width > 3 ? width - 3 : width) + "...";
}

bool LooksNumeric(const std::string& s) { return !s.empty() && ParseDouble(s).has_value(); }

}  // namespace

void Table::AddRow(std::vector<std::string> cells) {
  cells.resize(headers_.size());
  rows_.push_back(std::move(cells));
}

void Table::Print(std::ostream& out, size_t max_width) const {
  size_t n = headers_.size();
  std::vector<size_t> width(n, 0);
  std::vector<bool> numeric(n, true);
  for (size_t c = 0; c < n; ++c) width[c] = headers_[c].size();
  for (const auto& row : rows_) {
    for (size_t c = 0; c < n; ++c) {
      width[c] = std::max(width[c], std::min(row[c].size(), max_width));
      if (!row[c].empty() && row[c] != "-" && !LooksNumeric(row[c])) numeric[c] = false;
    }
  }
  auto line = [&](const std::vector<std::string>& cells, bool header) {
    std::string text;
    for (size_t c = 0; c < n; ++c) {
      std::string cell = Cut(cells[c], max_width);
      std::string pad(width[c] - cell.size(), ' ');
      bool right = numeric[c] && !header;
      if (c + 1 == n && !right) {
        text += cell;
      } else {
        text += right ? pad + cell : cell + pad;
      }
      if (c + 1 < n) text += "  ";
    }
    while (!text.empty() && text.back() == ' ') text.pop_back();
    out << text << "\n";
  };
  line(headers_, true);
  for (const auto& row : rows_) line(row, false);
}

}  // namespace hyperpack
