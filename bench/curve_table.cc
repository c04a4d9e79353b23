#include "curve_table.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

namespace hyperpack::bench {
namespace {

using Json = nlohmann::json;

// `text` as JSON; an error names the file (`name`) and the byte where it stops being JSON.
Result<Json> ParseJson(const std::string& text, const std::string& name) {
  try {
    return Json::parse(text);
  } catch (const Json::parse_error& e) {
    return Status::Invalid(name, ": not JSON (byte ", e.byte, ")");
  }
}

constexpr size_t kMaxCurves = 100000;

// A file's bytes; NotFound naming it where it cannot be opened.
Result<std::string> ReadWhole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound(path, ": cannot open");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}
constexpr int kMaxEpochs = 10000;

// A parameter of the table's space: float or int, with finite bounds (positive where log).
Result<ParamSpec> ReadParam(const Json& j, const std::string& where) {
  if (!j.is_object()) return Status::Invalid(where, ": expected an object");
  ParamSpec p;
  if (!j.contains("name") || !j["name"].is_string() || j["name"].get<std::string>().empty())
    return Status::Invalid(where, ".name: expected a non-empty string");
  p.name = j["name"].get<std::string>();
  const std::string type = j.value("type", "");
  if (type == "float") {
    p.type = ParamType::kFloat;
  } else if (type == "int") {
    p.type = ParamType::kInt;
  } else {
    return Status::Invalid(where, ".type: '", type, "'; expected float or int");
  }
  if (!j.contains("low") || !j["low"].is_number() || !j.contains("high") || !j["high"].is_number())
    return Status::Invalid(where, ": low and high must be numbers");
  p.low = j["low"].get<double>();
  p.high = j["high"].get<double>();
  p.log = j.value("log", false);
  if (!std::isfinite(p.low) || !std::isfinite(p.high) || !(p.low < p.high) ||
      (p.log && !(p.low > 0)))
    return Status::Invalid(where, ": bounds [", p.low, ", ", p.high, "] are not a range",
                           p.log ? " of positive numbers (log: true)" : "");
  return p;
}

// A list of `n` finite numbers (non-negative where `non_negative`).
Result<std::vector<double>> ReadSeries(const Json& j, size_t n, bool non_negative,
                                       const std::string& where) {
  if (!j.is_array() || j.size() != n)
    return Status::Invalid(where, ": expected a list of ", n, " numbers (one per epoch)");
  std::vector<double> v;
  v.reserve(n);
  for (const Json& x : j) {
    if (!x.is_number()) return Status::Invalid(where, "[", v.size(), "]: not a number");
    const double d = x.get<double>();
    if (!std::isfinite(d) || (non_negative && d < 0))
      return Status::Invalid(where, "[", v.size(), "]: ", d, " is not a finite",
                             non_negative ? " non-negative" : "", " number");
    v.push_back(d);
  }
  return v;
}

Result<Curve> ReadCurve(const Json& j, const SearchSpace& space, int epochs,
                        const std::string& where) {
  if (!j.is_object() || !j.contains("params") || !j["params"].is_object())
    return Status::Invalid(where, ": expected an object with params, error and seconds");
  Curve c;
  for (const ParamSpec& p : space.params()) {
    const auto it = j["params"].find(p.name);
    if (it == j["params"].end() || !it->is_number())
      return Status::Invalid(where, ".params.", p.name, ": missing or not a number");
    if (p.type == ParamType::kInt) {
      if (!it->is_number_integer())
        return Status::Invalid(where, ".params.", p.name, ": expected an integer");
      c.config[p.name] = it->get<int64_t>();
    } else {
      c.config[p.name] = it->get<double>();
    }
  }
  if (Status s = space.Validate(c.config); !s.ok()) return s.WithContext(where + ".params");
  const size_t n = static_cast<size_t>(epochs);
  HP_ASSIGN_OR_RETURN(c.error, ReadSeries(j.value("error", Json()), n, false, where + ".error"));
  HP_ASSIGN_OR_RETURN(c.seconds,
                      ReadSeries(j.value("seconds", Json()), n, true, where + ".seconds"));
  return c;
}

}  // namespace

Result<CurveTable> CurveTable::Read(const std::string& path) {
  HP_ASSIGN_OR_RETURN(std::string text, ReadWhole(path));
  return Parse(text, path);
}

Result<CurveTable> CurveTable::Parse(const std::string& text, const std::string& name) {
  HP_ASSIGN_OR_RETURN(Json j, ParseJson(text, name));
  if (!j.is_object()) return Status::Invalid(name, ": expected a JSON object");
  try {
    CurveTable t;
    t.family_ = j.value("family", "");
    if (!j.contains("epochs") || !j["epochs"].is_number_integer())
      return Status::Invalid(name, ": epochs: expected a whole number");
    t.epochs_ = j["epochs"].get<int>();
    if (t.epochs_ < 1 || t.epochs_ > kMaxEpochs)
      return Status::Invalid(name, ": epochs: ", t.epochs_, " is not in 1..", kMaxEpochs);
    if (!j.contains("space") || !j["space"].is_array() || j["space"].empty())
      return Status::Invalid(name, ": space: expected a non-empty list of parameters");
    std::vector<ParamSpec> params;
    for (size_t i = 0; i < j["space"].size(); ++i) {
      HP_ASSIGN_OR_RETURN(ParamSpec p,
                          ReadParam(j["space"][i], name + ": space[" + std::to_string(i) + "]"));
      params.push_back(std::move(p));
    }
    t.space_ = SearchSpace(std::move(params));
    if (!j.contains("configs") || !j["configs"].is_array() || j["configs"].empty() ||
        j["configs"].size() > kMaxCurves)
      return Status::Invalid(name, ": configs: expected a list of 1 to ", kMaxCurves, " curves");
    for (size_t i = 0; i < j["configs"].size(); ++i) {
      HP_ASSIGN_OR_RETURN(Curve c, ReadCurve(j["configs"][i], t.space_, t.epochs_,
                                             name + ": configs[" + std::to_string(i) + "]"));
      t.coordinates_.push_back(t.Coordinates(c.config));
      t.curves_.push_back(std::move(c));
    }
    return t;
  } catch (const Json::exception& e) {  // a field of an unexpected type
    return Status::Invalid(name, ": ", e.what());
  }
}

std::vector<double> CurveTable::Coordinates(const Config& config) const {
  std::vector<double> x;
  for (const ParamSpec& p : space_.params()) {
    const auto it = config.find(p.name);
    const double v = it == config.end() ? p.low : ValueAsNumber(it->second).value_or(p.low);
    const double clamped = std::clamp(v, p.low, p.high);
    x.push_back(p.log ? std::log(clamped / p.low) / std::log(p.high / p.low)
                      : (clamped - p.low) / (p.high - p.low));
  }
  return x;
}

double CurveTable::Distance(const Config& a, const Config& b) const {
  const std::vector<double> x = Coordinates(a), y = Coordinates(b);
  double d = 0;
  for (size_t k = 0; k < x.size(); ++k) d += (x[k] - y[k]) * (x[k] - y[k]);
  return std::sqrt(d);
}

size_t CurveTable::Nearest(const Config& config) const {
  const std::vector<double> x = Coordinates(config);
  size_t best = 0;
  double best_d = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < coordinates_.size(); ++i) {
    double d = 0;
    for (size_t k = 0; k < x.size(); ++k)
      d += (x[k] - coordinates_[i][k]) * (x[k] - coordinates_[i][k]);
    if (d < best_d) {
      best_d = d;
      best = i;
    }
  }
  return best;
}

double CurveTable::BestFinalError() const {
  double best = std::numeric_limits<double>::infinity();
  for (const Curve& c : curves_) best = std::min(best, c.error.back());
  return best;
}

double CurveTable::MeanFullSeconds() const {
  double sum = 0;
  for (const Curve& c : curves_)
    for (double s : c.seconds) sum += s;
  return sum / static_cast<double>(curves_.size());
}

namespace {

// The positions in a repeats file's `offsets` of the seeds a replay serves: the first `draws`
// that are not the table's own (0).
Result<std::vector<size_t>> ServedSeeds(const Json& j, const std::string& name, int draws) {
  std::vector<size_t> seeds;
  for (size_t k = 0; k < j["offsets"].size(); ++k)
    if (j["offsets"][k] != 0 && static_cast<int>(seeds.size()) < draws) seeds.push_back(k);
  if (seeds.empty() || static_cast<int>(seeds.size()) < draws)
    return Status::Invalid(name, ": ", seeds.size(), " seeds besides the table's own (offsets), ",
                           draws, " wanted");
  return seeds;
}

// Configuration `c`'s curve at `at` in its `curves`, checked: `epochs` finite errors ending at
// `final` (its repeat at that seed).
Result<std::vector<double>> OneCurve(const Json& c, size_t at, int epochs, double final,
                                     const std::string& name) {
  const std::string where = "configuration " + c.value("index", Json()).dump() + ": ";
  if (!c.contains("curves") || !c["curves"].is_array() || c["curves"].size() <= at ||
      !c["curves"][at].is_array() || c["curves"][at].size() != static_cast<size_t>(epochs))
    return Status::Invalid(name, ": ", where, "expected ", epochs, " errors in curves[", at, "]");
  std::vector<double> curve;
  for (const Json& v : c["curves"][at]) {
    if (!v.is_number() || !std::isfinite(v.get<double>()))
      return Status::Invalid(name, ": ", where, "curves[", at, "] holds ", v.dump(),
                             ", not a finite error");
    curve.push_back(v.get<double>());
  }
  if (curve.back() != final)
    return Status::Invalid(name, ": ", where, "curves[", at, "] ends at ", curve.back(),
                           ", its repeat is ", final);
  return curve;
}

}  // namespace

Result<RepeatCurves> ReadRepeatCurves(const std::string& path, const CurveTable& table, int draws) {
  HP_ASSIGN_OR_RETURN(std::string text, ReadWhole(path));
  return ParseRepeatCurves(text, path, table, draws);
}

Result<RepeatCurves> ParseRepeatCurves(const std::string& text, const std::string& name,
                                       const CurveTable& table, int draws) {
  HP_ASSIGN_OR_RETURN(Json j, ParseJson(text, name));
  if (!j.is_object() || !j.contains("curve_offsets") || !j["curve_offsets"].is_array() ||
      static_cast<int>(j["curve_offsets"].size()) < draws)
    return Status::Invalid(name, ": expected the whole curves of ", draws,
                           " seeds (curve_offsets): lc_table.py repeats --curves");
  // The finals: the same checks as the repeats', and what each curve must end at.
  const Json offsets = j.value("offsets", Json::array());
  const int others = static_cast<int>(offsets.size()) -
                     static_cast<int>(std::count(offsets.begin(), offsets.end(), 0));
  HP_ASSIGN_OR_RETURN(const std::vector<std::vector<double>> finals,
                      ParseRepeats(text, name, table, others));
  RepeatCurves out(static_cast<size_t>(draws),
                   std::vector<std::vector<double>>(table.curves().size()));
  for (size_t d = 0; d < out.size(); ++d) {
    const Json& offset = j["curve_offsets"][d];
    if (offset == 0 || std::count(offsets.begin(), offsets.end(), offset) != 1)
      return Status::Invalid(name, ": curve offset ", offset.dump(),
                             " is not one of the file's seeds besides the table's own (offsets ",
                             offsets.dump(), ")");
    // Its position among the offsets that are not 0, which is where ParseRepeats put it.
    size_t k = 0;
    for (const Json& o : offsets) {
      if (o == offset) break;
      k += o != 0;
    }
    for (const Json& c : j["configs"]) {
      const size_t i = c["index"].get<size_t>();
      HP_ASSIGN_OR_RETURN(out[d][i], OneCurve(c, d, table.epochs(), finals[k][i], name));
    }
  }
  return out;
}

Result<std::vector<std::vector<double>>> ReadRepeats(const std::string& path,
                                                     const CurveTable& table, int draws) {
  HP_ASSIGN_OR_RETURN(std::string text, ReadWhole(path));
  return ParseRepeats(text, path, table, draws);
}

Result<std::vector<std::vector<double>>> ParseRepeats(const std::string& text,
                                                      const std::string& name,
                                                      const CurveTable& table, int draws) {
  HP_ASSIGN_OR_RETURN(Json j, ParseJson(text, name));
  if (!j.is_object() || !j.contains("offsets") || !j["offsets"].is_array() ||
      !j.contains("configs") || !j["configs"].is_array())
    return Status::Invalid(name, ": expected lc_table.py repeats' output (offsets, configs)");
  if (j.value("family", "") != table.family())
    return Status::Invalid(name, ": repeats of '", j.value("family", ""), "', not of '",
                           table.family(), "'");
  HP_ASSIGN_OR_RETURN(const std::vector<size_t> seeds, ServedSeeds(j, name, draws));
  const size_t n = table.curves().size();
  std::vector<std::vector<double>> out(
      seeds.size(), std::vector<double>(n, std::numeric_limits<double>::quiet_NaN()));
  for (const Json& c : j["configs"]) {
    if (!c.is_object() || !c.contains("index") || !c["index"].is_number_unsigned() ||
        c["index"].get<size_t>() >= n || !c.contains("repeats") || !c["repeats"].is_array() ||
        c["repeats"].size() <= seeds.back())
      return Status::Invalid(name,
                             ": configs: expected {index: a table index, repeats: one "
                             "final error per offset}, got ",
                             c.dump().substr(0, 80));
    for (size_t d = 0; d < seeds.size(); ++d)
      if (c["repeats"][seeds[d]].is_number())
        out[d][c["index"].get<size_t>()] = c["repeats"][seeds[d]].get<double>();
  }
  for (size_t i = 0; i < n; ++i)
    for (const std::vector<double>& draw : out)
      if (!std::isfinite(draw[i]))
        return Status::Invalid(name, ": configuration ", i, " of the table has no finite repeat ",
                               "(lc_table.py repeats --top ", n, ")");
  return out;
}

}  // namespace hyperpack::bench
