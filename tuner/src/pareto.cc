#include "hyperpack/tuner/pareto.h"

#include <algorithm>
#include <limits>

namespace hyperpack::tuner {
namespace {

// The volume dominated by `pts` in their first k objectives, bounded by ref; every point is
// strictly below ref there.
double Volume(std::vector<const double*> pts, const double* ref, int k) {
  if (pts.empty()) return 0.0;
  if (k == 1) {
    double low = ref[0];
    for (const double* p : pts) low = std::min(low, p[0]);
    return ref[0] - low;
  }
  // Ascending in the last objective used: below each point's value only the ones before it count.
  std::sort(pts.begin(), pts.end(), [k](const double* a, const double* b) {
    return a[k - 1] < b[k - 1] || (a[k - 1] == b[k - 1] && a[0] < b[0]);
  });
  if (k == 2) {
    // In ascending y, each point adds what the lower ones leave: from its x to the smallest x
    // seen so far, from its y up to ref.
    double volume = 0.0, min_x = ref[0];
    for (const double* p : pts) {
      if (p[0] >= min_x) continue;
      volume += (min_x - p[0]) * (ref[1] - p[1]);
      min_x = p[0];
    }
    return volume;
  }
  double volume = 0.0;
  std::vector<const double*> below;
  for (size_t i = 0; i < pts.size(); ++i) {
    below.push_back(pts[i]);
    const double top = i + 1 < pts.size() ? pts[i + 1][k - 1] : ref[k - 1];
    if (top > pts[i][k - 1]) volume += (top - pts[i][k - 1]) * Volume(below, ref, k - 1);
  }
  return volume;
}

bool Below(std::span<const double> p, std::span<const double> ref) {
  for (size_t j = 0; j < ref.size(); ++j)
    if (!(p[j] < ref[j])) return false;
  return true;
}

}  // namespace

bool Dominates(std::span<const double> a, std::span<const double> b) {
  bool better = false;
  for (size_t j = 0; j < a.size(); ++j) {
    if (a[j] > b[j]) return false;
    better = better || a[j] < b[j];
  }
  return better;
}

std::vector<std::vector<int>> NonDominatedSort(std::span<const ObjectiveVector> points) {
  const int n = static_cast<int>(points.size());
  std::vector<std::vector<int>> dominated(n);  // whom each point dominates
  std::vector<int> count(n, 0);                // by how many each point is dominated
  for (int i = 0; i < n; ++i) {
    for (int j = i + 1; j < n; ++j) {
      if (Dominates(points[i], points[j])) {
        dominated[i].push_back(j);
        ++count[j];
      } else if (Dominates(points[j], points[i])) {
        dominated[j].push_back(i);
        ++count[i];
      }
    }
  }
  std::vector<std::vector<int>> fronts;
  std::vector<int> current;
  for (int i = 0; i < n; ++i)
    if (count[i] == 0) current.push_back(i);
  while (!current.empty()) {
    std::vector<int> next;
    for (int i : current)
      for (int j : dominated[i])
        if (--count[j] == 0) next.push_back(j);
    std::sort(next.begin(), next.end());
    fronts.push_back(std::move(current));
    current = std::move(next);
  }
  return fronts;
}

std::vector<double> CrowdingDistance(std::span<const ObjectiveVector> points,
                                     std::span<const int> front) {
  const size_t m = front.size();
  constexpr double kInf = std::numeric_limits<double>::infinity();
  std::vector<double> distance(m, 0.0);
  if (m <= 2) return std::vector<double>(m, kInf);
  std::vector<size_t> order(m);
  for (size_t j = 0; j < points[front[0]].size(); ++j) {
    for (size_t i = 0; i < m; ++i) order[i] = i;
    std::sort(order.begin(), order.end(),
              [&](size_t a, size_t b) { return points[front[a]][j] < points[front[b]][j]; });
    const double low = points[front[order.front()]][j], high = points[front[order.back()]][j];
    distance[order.front()] = distance[order.back()] = kInf;
    if (!(high > low)) continue;
    for (size_t i = 1; i + 1 < m; ++i)
      distance[order[i]] +=
          (points[front[order[i + 1]]][j] - points[front[order[i - 1]]][j]) / (high - low);
  }
  return distance;
}

double Hypervolume(std::span<const ObjectiveVector> points, std::span<const double> ref) {
  if (ref.empty()) return 0.0;
  std::vector<const double*> pts;
  for (const ObjectiveVector& p : points)
    if (Below(p, ref)) pts.push_back(p.data());
  return Volume(std::move(pts), ref.data(), static_cast<int>(ref.size()));
}

std::vector<double> HypervolumeContributions(std::span<const ObjectiveVector> points,
                                             std::span<const double> ref) {
  const double total = Hypervolume(points, ref);
  std::vector<double> out(points.size(), 0.0);
  std::vector<ObjectiveVector> others;
  for (size_t i = 0; i < points.size(); ++i) {
    if (!Below(points[i], ref)) continue;
    others.assign(points.begin(), points.end());
    others.erase(others.begin() + static_cast<std::ptrdiff_t>(i));
    out[i] = std::max(0.0, total - Hypervolume(others, ref));
  }
  return out;
}

}  // namespace hyperpack::tuner
