// Command templates: `python3 train.py --lr {learning_rate}`.
//
// `{name}` is replaced by a parameter's value (empty for an inactive conditional parameter) or by a
// built-in (see BuiltinPlaceholders in spec.h); `{{` and `}}` stand for literal braces, and a
// shell expansion `${NAME}` or `${NAME:-default}` is left for the shell.
// Thread-safety: pure functions.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "hyperpack/space.h"
#include "hyperpack/status.h"

namespace hyperpack::study {

// The placeholder names used by `text`, in order; an error for an unclosed or empty brace.
Result<std::vector<std::string>> TemplatePlaceholders(const std::string& text);

// `text` with every placeholder replaced: from `builtins` first, then from `config`.
// Values are formatted so that they read back exactly (FormatValue).
std::string RenderTemplate(const std::string& text, const Config& config,
                           const std::map<std::string, std::string>& builtins);

// The environment variable that carries a parameter to a trial: HP_ and its name in capitals
// ("learning_rate" -> "HP_LEARNING_RATE"); any character but a letter or digit becomes "_"
// ("optimizer.lr" -> "HP_OPTIMIZER_LR").
std::string ParamEnvName(const std::string& param);

}  // namespace hyperpack::study
