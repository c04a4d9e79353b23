// Pareto fronts: dominance, non-dominated sorting, crowding distance and exact hypervolume, each
// against an independent computation (hand-worked fronts, inclusion-exclusion, peeling).
#include "hyperpack/tuner/pareto.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

namespace hyperpack::tuner {
namespace {

// The hypervolume by inclusion-exclusion over every non-empty subset: the union of the boxes
// [p, ref] is the alternating sum of their intersections, each the box from the componentwise
// maximum to ref. Exponential, and independent of the sweep and the slicing.
double InclusionExclusion(const std::vector<ObjectiveVector>& points, const ObjectiveVector& ref) {
  const size_t n = points.size(), d = ref.size();
  double total = 0.0;
  for (unsigned mask = 1; mask < (1u << n); ++mask) {
    ObjectiveVector corner(d, -std::numeric_limits<double>::infinity());
    int members = 0;
    for (size_t i = 0; i < n; ++i) {
      if (!(mask & (1u << i))) continue;
      ++members;
      for (size_t j = 0; j < d; ++j) corner[j] = std::max(corner[j], points[i][j]);
    }
    double volume = 1.0;
    for (size_t j = 0; j < d; ++j) volume *= std::max(0.0, ref[j] - corner[j]);
    total += (members % 2 == 1 ? 1.0 : -1.0) * volume;
  }
  return total;
}

// Points on a coarse grid, so that ties and duplicates occur, some beyond the reference point.
std::vector<ObjectiveVector> GridPoints(int n, int d, std::mt19937_64& rng) {
  std::uniform_int_distribution<int> cell(0, 6);
  std::vector<ObjectiveVector> points(n, ObjectiveVector(d));
  for (auto& p : points)
    for (double& v : p) v = 0.2 * cell(rng);
  return points;
}

TEST(ParetoTest, DominanceNeedsOneStrictlyBetterObjectiveAndNoWorseOne) {
  EXPECT_TRUE(Dominates(ObjectiveVector{1, 2}, ObjectiveVector{1, 3}));
  EXPECT_FALSE(Dominates(ObjectiveVector{1, 2}, ObjectiveVector{1, 2}));
  EXPECT_FALSE(Dominates(ObjectiveVector{1, 4}, ObjectiveVector{2, 3}));
  EXPECT_FALSE(Dominates(ObjectiveVector{2, 3}, ObjectiveVector{1, 4}));
}

TEST(ParetoTest, HypervolumeOfAHandWorkedStaircase) {
  // Boxes [1,4]x[3,4], [2,4]x[2,4], [3,4]x[1,4]: columns of height 1, 2 and 3.
  std::vector<ObjectiveVector> front = {{1, 3}, {2, 2}, {3, 1}};
  EXPECT_DOUBLE_EQ(Hypervolume(front, ObjectiveVector{4, 4}), 6.0);
  // A dominated point and one beyond the reference point add nothing.
  front.push_back({2.5, 2.5});
  front.push_back({0.5, 4.0});
  EXPECT_DOUBLE_EQ(Hypervolume(front, ObjectiveVector{4, 4}), 6.0);
  // Each point's own part: the box between its neighbours, [1,2]x[3,4] and [3,4]x[1,2] at the
  // ends, and [2,3]x[2,3] in the middle less the corner the dominated point covers as well.
  std::vector<double> contributions = HypervolumeContributions(front, ObjectiveVector{4, 4});
  EXPECT_DOUBLE_EQ(contributions[0], 1.0);
  EXPECT_DOUBLE_EQ(contributions[1], 0.75);
  EXPECT_DOUBLE_EQ(contributions[2], 1.0);
  EXPECT_DOUBLE_EQ(contributions[3], 0.0);
  EXPECT_DOUBLE_EQ(contributions[4], 0.0);
}

TEST(ParetoTest, HypervolumeEqualsInclusionExclusionInTwoToFourDimensions) {
  std::mt19937_64 rng(1);
  for (int d = 2; d <= 4; ++d) {
    const ObjectiveVector ref(d, 1.1);
    for (int trial = 0; trial < 40; ++trial) {
      std::vector<ObjectiveVector> points = GridPoints(1 + trial % 9, d, rng);
      EXPECT_NEAR(Hypervolume(points, ref), InclusionExclusion(points, ref), 1e-12)
          << d << " objectives, trial " << trial;
    }
  }
}

TEST(ParetoTest, ContributionsAreWhatEachPointAloneAddsAndZeroForDuplicates) {
  std::mt19937_64 rng(2);
  const ObjectiveVector ref(3, 1.1);
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<ObjectiveVector> points = GridPoints(8, 3, rng);
    points.push_back(points[0]);  // a duplicate: neither copy adds anything alone
    std::vector<double> contributions = HypervolumeContributions(points, ref);
    EXPECT_EQ(contributions[0], 0.0);
    EXPECT_EQ(contributions.back(), 0.0);
    for (size_t i = 0; i < points.size(); ++i) {
      std::vector<ObjectiveVector> others = points;
      others.erase(others.begin() + static_cast<std::ptrdiff_t>(i));
      EXPECT_NEAR(contributions[i],
                  InclusionExclusion(points, ref) - InclusionExclusion(others, ref), 1e-12);
    }
  }
}

TEST(ParetoTest, NonDominatedSortPeelsFrontsLikeRepeatedFiltering) {
  std::mt19937_64 rng(3);
  for (int trial = 0; trial < 30; ++trial) {
    const int d = 2 + trial % 3;
    std::vector<ObjectiveVector> points = GridPoints(25, d, rng);
    std::vector<std::vector<int>> fronts = NonDominatedSort(points);
    // Peel: the points no remaining point dominates, again and again.
    std::vector<int> left(points.size());
    for (size_t i = 0; i < left.size(); ++i) left[i] = static_cast<int>(i);
    size_t k = 0;
    while (!left.empty()) {
      std::vector<int> front, rest;
      for (int i : left) {
        bool dominated = std::any_of(left.begin(), left.end(),
                                     [&](int j) { return Dominates(points[j], points[i]); });
        (dominated ? rest : front).push_back(i);
      }
      ASSERT_LT(k, fronts.size());
      EXPECT_EQ(fronts[k], front) << "front " << k;
      left = rest;
      ++k;
    }
    EXPECT_EQ(k, fronts.size());
  }
}

TEST(ParetoTest, CrowdingDistanceIsTheNormalisedGapBetweenNeighbours) {
  // A 2-D front of four: x 0, 1, 3, 4 and y 4, 3, 1, 0; both ranges 4.
  std::vector<ObjectiveVector> points = {{3, 1}, {0, 4}, {1, 3}, {4, 0}};
  std::vector<int> front = {0, 1, 2, 3};
  std::vector<double> distance = CrowdingDistance(points, front);
  EXPECT_TRUE(std::isinf(distance[1]));
  EXPECT_TRUE(std::isinf(distance[3]));
  EXPECT_DOUBLE_EQ(distance[2], (3.0 - 0.0) / 4 + (4.0 - 1.0) / 4);  // neighbours {0,4} and {3,1}
  EXPECT_DOUBLE_EQ(distance[0], (4.0 - 1.0) / 4 + (3.0 - 0.0) / 4);
  std::vector<int> pair = {0, 1};
  for (double v : CrowdingDistance(points, pair)) EXPECT_TRUE(std::isinf(v));
}

}  // namespace
}  // namespace hyperpack::tuner
