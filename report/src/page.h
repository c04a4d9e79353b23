// The study page as one HTML document: Chart.js (Debian's libjs-chart.js), the page's own script,
// styles and body (report/page/), and its data, all inlined at build time or here, so the page
// opens with no network. Its Content-Security-Policy forbids loading anything else.
// Thread-safety: pure functions.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace hyperpack::report {

// `data` is PageData()'s. `source`, when not empty, is the URL the page polls for fresh data
// (the dashboard); a report leaves it empty.
std::string StudyPageHtml(const nlohmann::json& data, const std::string& title,
                          const std::string& source);

}  // namespace hyperpack::report
