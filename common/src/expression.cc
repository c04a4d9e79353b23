#include "hyperpack/expression.h"

#include <algorithm>
#include <cctype>

#include "hyperpack/text.h"

namespace hyperpack {

struct Expression::Node {
  char op = 0;  // 0: number, 'p': parameter, 'n': negate, or one of + - * /
  double number = 0;
  std::string param;
  std::shared_ptr<const Node> left, right;
};

namespace {

using NodePtr = std::shared_ptr<const Expression::Node>;

// Recursive descent over: expr := term (('+'|'-') term)*; term := unary (('*'|'/') unary)*;
// unary := '-' unary | atom; atom := number | '{' name '}' | '(' expr ')'.
class Parser {
 public:
  explicit Parser(const std::string& text) : text_(text) {}

  Result<NodePtr> ParseAll(std::vector<std::string>* refs) {
    refs_ = refs;
    auto node = ParseExpr();
    if (!node.ok()) return node;
    SkipSpace();
    if (pos_ != text_.size()) return Error("unexpected '", text_[pos_], "'");
    return node;
  }

 private:
  template <typename... Args>
  Status Error(const Args&... args) {
    return Status::Invalid("in expression \"", text_, "\" at character ", pos_ + 1, ": ", args...);
  }
  void SkipSpace() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  bool Accept(char c) {
    SkipSpace();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  static NodePtr Binary(char op, NodePtr l, NodePtr r) {
    auto n = std::make_shared<Expression::Node>();
    n->op = op;
    n->left = std::move(l);
    n->right = std::move(r);
    return n;
  }

  Result<NodePtr> ParseExpr() {
    auto left = ParseTerm();
    if (!left.ok()) return left;
    NodePtr node = *left;
    while (true) {
      char op = Accept('+') ? '+' : Accept('-') ? '-' : 0;
      if (!op) return node;
      auto right = ParseTerm();
      if (!right.ok()) return right;
      node = Binary(op, node, *right);
    }
  }
  Result<NodePtr> ParseTerm() {
    auto left = ParseUnary();
    if (!left.ok()) return left;
    NodePtr node = *left;
    while (true) {
      char op = Accept('*') ? '*' : Accept('/') ? '/' : 0;
      if (!op) return node;
      auto right = ParseUnary();
      if (!right.ok()) return right;
      node = Binary(op, node, *right);
    }
  }
  Result<NodePtr> ParseUnary() {
    if (Accept('-')) {
      auto inner = ParseUnary();
      if (!inner.ok()) return inner;
      return Binary('n', *inner, nullptr);
    }
    return ParseAtom();
  }
  Result<NodePtr> ParseAtom() {
    SkipSpace();
    if (pos_ >= text_.size()) return Error("expected a number, {parameter} or '('");
    if (Accept('(')) {
      auto inner = ParseExpr();
      if (!inner.ok()) return inner;
      if (!Accept(')')) return Error("expected ')'");
      return inner;
    }
    if (Accept('{')) {
      size_t close = text_.find('}', pos_);
      if (close == std::string::npos) {
        --pos_;  // name the '{' itself, not the character after it
        return Error("'{' is not closed");
      }
      std::string name = text_.substr(pos_, close - pos_);
      if (name.empty()) return Error("empty parameter name in {}");
      pos_ = close + 1;
      auto n = std::make_shared<Expression::Node>();
      n->op = 'p';
      n->param = name;
      if (std::find(refs_->begin(), refs_->end(), name) == refs_->end()) refs_->push_back(name);
      return NodePtr(n);
    }
    size_t start = pos_;
    while (pos_ < text_.size() && (std::isdigit(static_cast<unsigned char>(text_[pos_])) ||
                                   text_[pos_] == '.' || text_[pos_] == 'e' || text_[pos_] == 'E' ||
                                   ((text_[pos_] == '-' || text_[pos_] == '+') && pos_ > start &&
                                    (text_[pos_ - 1] == 'e' || text_[pos_ - 1] == 'E'))))
      ++pos_;
    auto number = ParseDouble(std::string_view(text_).substr(start, pos_ - start));
    if (pos_ == start || !number) {
      pos_ = start;
      return Error("expected a number, {parameter} or '('");
    }
    auto n = std::make_shared<Expression::Node>();
    n->number = *number;
    return NodePtr(n);
  }

  const std::string& text_;
  size_t pos_ = 0;
  std::vector<std::string>* refs_ = nullptr;
};

Result<double> Eval(const Expression::Node& n, const Config& config) {
  switch (n.op) {
    case 0:
      return n.number;
    case 'p': {
      auto it = config.find(n.param);
      if (it == config.end())
        return Status::Invalid("parameter '", n.param, "' has no value in this configuration");
      auto x = ValueAsNumber(it->second);
      if (!x) return Status::Invalid("parameter '", n.param, "' is not a number");
      return *x;
    }
    case 'n': {
      auto x = Eval(*n.left, config);
      if (!x.ok()) return x;
      return -*x;
    }
    default:
      break;
  }
  auto l = Eval(*n.left, config);
  if (!l.ok()) return l;
  auto r = Eval(*n.right, config);
  if (!r.ok()) return r;
  switch (n.op) {
    case '+':
      return *l + *r;
    case '-':
      return *l - *r;
    case '*':
      return *l * *r;
    default:
      if (*r == 0) return Status::Invalid("division by zero");
      return *l / *r;
  }
}

}  // namespace

Result<Expression> Expression::Parse(const std::string& text) {
  Expression e;
  e.text_ = text;
  Parser parser(text);
  auto root = parser.ParseAll(&e.references_);
  if (!root.ok()) return root.status();
  e.root_ = *root;
  return e;
}

Expression Expression::Constant(double value) {
  Expression e;
  auto n = std::make_shared<Node>();
  n->number = value;
  e.root_ = n;
  e.text_ = FormatDouble(value);
  return e;
}

Result<double> Expression::Evaluate(const Config& config) const {
  if (!root_) return 0.0;
  return Eval(*root_, config);
}

}  // namespace hyperpack
