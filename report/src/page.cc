#include "page.h"

#include "hyperpack/text.h"
#include "page_assets.h"

namespace hyperpack::report {

std::string StudyPageHtml(const nlohmann::json& data, const std::string& title,
                          const std::string& source) {
  // Trial output (an error's tail) may hold bytes that are not UTF-8: replaced, not thrown on.
  std::string json = data.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  // Inside <script> only "</script" could end the element early; '<' appears in JSON only within
  // strings, where \u003c reads back the same.
  std::string safe;
  safe.reserve(json.size());
  for (char c : json) {
    if (c == '<') {
      safe += "\\u003c";
    } else {
      safe += c;
    }
  }
  std::string html;
  html.reserve(safe.size() + assets::ChartJs().size() + assets::Script().size() + 16384);
  html += "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n";
  // Nothing outside the page: scripts and styles are inline; the dashboard's polling is the only
  // request the page may make, and only to where it came from.
  html +=
      "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; script-src "
      "'unsafe-inline'; style-src 'unsafe-inline'; img-src data:; connect-src 'self'\">\n";
  html += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  html += "<title>" + HtmlEscape(title) + " \xe2\x80\x94 hyperpack</title>\n<style>\n";
  html += assets::Styles();
  html += "</style></head>\n<body data-source=\"" + HtmlEscape(source) + "\">\n";
  html += assets::Body();
  html += "\n<script>\n";
  html += assets::ChartJs();
  html += "\n</script>\n<script id=\"hp-data\" type=\"application/json\">";
  html += safe;
  html += "</script>\n<script>\n";
  html += assets::Script();
  html += "\n</script>\n</body></html>\n";
  return html;
}

}  // namespace hyperpack::report
