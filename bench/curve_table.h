// A table of real learning curves, as bench/lc_table.py writes it: the configurations of one
// search space, each trained epoch by epoch to the same length, with its validation error and
// the seconds of every epoch. A replay serves it in virtual time: a method that trains a
// configuration for e epochs is shown the first e errors and charged the first e epochs' seconds.
//
// The file is read whole and checked before anything uses it (a table is input like any other):
// every configuration holds every parameter of the space within its bounds, every curve has
// `epochs` finite errors and non-negative seconds. A table's configurations are a finite sample
// of a continuous space (float and int parameters), so a configuration a tuner proposes is served
// by its nearest neighbour in the space's unit cube, log-scaled dimensions in log space.
//
// Thread-safety: a CurveTable is immutable once read; its const methods may be called from any
// thread.
#pragma once

#include <string>
#include <vector>

#include "hyperpack/space.h"
#include "hyperpack/status.h"

namespace hyperpack::bench {

struct Curve {
  Config config;
  std::vector<double> error;    // after epochs 1..N
  std::vector<double> seconds;  // of epochs 1..N
};

class CurveTable {
 public:
  // The table in `path`; an error names the file and the field that is wrong.
  static Result<CurveTable> Read(const std::string& path);
  // The same from the file's text (for tests); `name` stands for the file in errors.
  static Result<CurveTable> Parse(const std::string& text, const std::string& name);

  const std::string& family() const { return family_; }
  int epochs() const { return epochs_; }
  const SearchSpace& space() const { return space_; }
  const std::vector<Curve>& curves() const { return curves_; }

  // The index of the curve whose configuration is nearest to `config` (ties: the lower index).
  size_t Nearest(const Config& config) const;
  // The distance between two configurations in the unit cube (the rule Nearest uses).
  double Distance(const Config& a, const Config& b) const;
  // The lowest final error in the table.
  double BestFinalError() const;
  // The mean over configurations of the seconds of a full-length run.
  double MeanFullSeconds() const;
  // `config`'s coordinates in the unit cube, one per parameter.
  std::vector<double> Coordinates(const Config& config) const;

 private:
  std::string family_;
  int epochs_ = 0;
  SearchSpace space_;
  std::vector<Curve> curves_;
  std::vector<std::vector<double>> coordinates_;  // of curves_[i].config
};

// Re-runs of each configuration of `table` with other seeds: the final errors of the first `draws`
// seeds besides the table's own in lc_table.py's repeats file (`repeats` of every configuration,
// at `offsets`, 0 the table's own), draw by draw, each by table index. A replay serves draw k to a
// configuration's (k+2)-th run (budget.finalists and their third runs); the seeds after them are
// left to judge by. Errors name the file and what is wrong: another family, a configuration
// missing, fewer seeds than `draws` besides the table's.
Result<std::vector<std::vector<double>>> ReadRepeats(const std::string& path,
                                                     const CurveTable& table, int draws);
// The same from the file's text; `name` stands for the file in errors.
Result<std::vector<std::vector<double>>> ParseRepeats(const std::string& text,
                                                      const std::string& name,
                                                      const CurveTable& table, int draws);

// The whole curves of other seeds' trainings, where a repeats file keeps them (lc_table.py
// repeats --curves): those of the first `draws` offsets in its `curve_offsets`, draw by draw, each
// by table index, each `epochs()` finite errors ending at that seed's final error in the file.
// A replay with --draw-curves serves them where it would serve ReadRepeats' draws. Errors name
// the file and what is wrong: fewer seeds' curves than `draws`, a configuration missing, a curve
// of another length or one that does not end at its final error.
using RepeatCurves = std::vector<std::vector<std::vector<double>>>;
Result<RepeatCurves> ReadRepeatCurves(const std::string& path, const CurveTable& table, int draws);
Result<RepeatCurves> ParseRepeatCurves(const std::string& text, const std::string& name,
                                       const CurveTable& table, int draws);

}  // namespace hyperpack::bench
