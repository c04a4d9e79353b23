// The study page's files, embedded at build time by report/embed_assets.cmake: report/page/'s
// body, styles and script, and Chart.js from Debian's libjs-chart.js.
// Thread-safety: immutable data.
#pragma once

#include <string_view>

namespace hyperpack::report::assets {

std::string_view Body();     // report/page/body.html
std::string_view Styles();   // report/page/page.css
std::string_view Script();   // report/page/js/*.js, in report/CMakeLists.txt's order
std::string_view ChartJs();  // chart.min.js

}  // namespace hyperpack::report::assets
