// Arithmetic over parameters, as in `resources: {gpus: "{data_parallel} * 2"}`.
//
// Grammar: numbers, `{param}` references, + - * /, unary minus and parentheses.
// Thread-safety: an Expression is immutable after Parse; Evaluate is const.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "hyperpack/space.h"
#include "hyperpack/status.h"

namespace hyperpack {

class Expression {
 public:
  // Parses `text`; on error the message names the offending character's 1-based offset.
  static Result<Expression> Parse(const std::string& text);
  // A constant.
  static Expression Constant(double value);

  // The value given `config`; an error when a referenced parameter is absent or not numeric.
  Result<double> Evaluate(const Config& config) const;
  // Names referenced as {name}, in order of first appearance.
  const std::vector<std::string>& references() const { return references_; }
  const std::string& text() const { return text_; }

  struct Node;

 private:
  std::shared_ptr<const Node> root_;
  std::vector<std::string> references_;
  std::string text_;
};

}  // namespace hyperpack
