#include "hyperpack/study/template.h"

#include <cctype>

#include "hyperpack/env_vars.h"

namespace hyperpack::study {
namespace {

// Walks `text`, calling on_literal for plain runs and on_name for each {name}.
template <typename Literal, typename Name>
Status Scan(const std::string& text, Literal on_literal, Name on_name) {
  size_t i = 0;
  while (i < text.size()) {
    char c = text[i];
    if ((c == '{' || c == '}') && i + 1 < text.size() && text[i + 1] == c) {
      on_literal(std::string(1, c));
      i += 2;
      continue;
    }
    // `${NAME}` is the shell's: passed through untouched.
    if (c == '{' && i > 0 && text[i - 1] == '$') {
      size_t close = text.find('}', i + 1);
      if (close == std::string::npos) close = text.size() - 1;
      on_literal(text.substr(i, close - i + 1));
      i = close + 1;
      continue;
    }
    if (c == '}')
      return Status::Invalid("unmatched '}' at character ", i + 1,
                             " (write '}}' for a literal brace)");
    if (c != '{') {
      size_t j = text.find_first_of("{}", i);
      if (j == std::string::npos) j = text.size();
      on_literal(text.substr(i, j - i));
      i = j;
      continue;
    }
    size_t close = text.find('}', i + 1);
    if (close == std::string::npos)
      return Status::Invalid("'{' at character ", i + 1,
                             " is not closed (write '{{' for a literal brace)");
    std::string name = text.substr(i + 1, close - i - 1);
    if (name.empty() || name.find_first_of("{ \t") != std::string::npos)
      return Status::Invalid("'{", name, "}' at character ", i + 1, " is not a parameter name");
    on_name(name);
    i = close + 1;
  }
  return Status::Ok();
}

}  // namespace

Result<std::vector<std::string>> TemplatePlaceholders(const std::string& text) {
  std::vector<std::string> names;
  Status s = Scan(
      text, [](const std::string&) {}, [&](const std::string& n) { names.push_back(n); });
  if (!s.ok()) return s;
  return names;
}

std::string RenderTemplate(const std::string& text, const Config& config,
                           const std::map<std::string, std::string>& builtins) {
  std::string out;
  Status s = Scan(
      text, [&](const std::string& lit) { out += lit; },
      [&](const std::string& name) {
        if (auto b = builtins.find(name); b != builtins.end()) {
          out += b->second;
        } else if (auto v = config.find(name); v != config.end()) {
          out += FormatValue(v->second);
        }
      });
  (void)s;  // templates are validated when the study file is parsed
  return out;
}

std::string ParamEnvName(const std::string& param) {
  std::string out = env::kParamPrefix;
  // A shell's variable name holds letters, digits and '_' only: optimizer.lr is HP_OPTIMIZER_LR.
  for (char c : param)
    out += std::isalnum(static_cast<unsigned char>(c))
               ? static_cast<char>(std::toupper(static_cast<unsigned char>(c)))
               : '_';
  return out;
}

}  // namespace hyperpack::study
