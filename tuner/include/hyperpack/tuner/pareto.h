// Pareto fronts of objective vectors, every objective minimised (a maximised one enters
// negated): dominance, non-dominated sorting, crowding distance, and the exact hypervolume with
// each point's exclusive contribution. What a study with several objectives ranks trials by: the
// tuner's hypervolume improvement, the pruners' rungs and `best`'s Pareto set.
//
// The hypervolume is exact: a sweep in 2-D (O(n log n)), and above that slices along the last
// objective, each a hypervolume one dimension down (Hypervolume by Slicing Objectives, While et
// al. 2006): O(n^(d-1) log n), meant for a study's fronts (hundreds of points, 2 to 4 objectives).
// Objective vectors of one call have the same length; coordinates are finite (a NaN is never
// below the reference point, so such a point adds no volume).
// Thread-safety: pure functions.
#pragma once

#include <span>
#include <vector>

namespace hyperpack::tuner {

using ObjectiveVector = std::vector<double>;

// a is no worse than b in every objective and better in at least one.
bool Dominates(std::span<const double> a, std::span<const double> b);

// Fronts by non-dominated sorting (Deb et al. 2002): indices into `points`, the non-dominated
// front first, each front in ascending index order. Equal points share a front.
std::vector<std::vector<int>> NonDominatedSort(std::span<const ObjectiveVector> points);

// The crowding distance of each member of `front` (indices into `points`), in front's order: over
// the objectives, the gap between a member's two neighbours along that objective divided by the
// objective's range on the front, summed; infinite at each objective's extremes, so for fronts of
// one or two members.
std::vector<double> CrowdingDistance(std::span<const ObjectiveVector> points,
                                     std::span<const int> front);

// The volume dominated by `points` and bounded above by `ref`. A point that is not strictly below
// `ref` in every objective adds nothing.
double Hypervolume(std::span<const ObjectiveVector> points, std::span<const double> ref);

// Each point's exclusive contribution: the hypervolume of all the points less that of all but it.
// 0 for a dominated point and for each of two equal points.
std::vector<double> HypervolumeContributions(std::span<const ObjectiveVector> points,
                                             std::span<const double> ref);

}  // namespace hyperpack::tuner
