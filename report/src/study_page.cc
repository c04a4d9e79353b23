// The study page from storage (report.h): WriteStudyPage, and the dashboard's StudyPage and
// StudyPageJson with their cache.
#include <map>
#include <mutex>
#include <utility>

#include "hyperpack/host.h"
#include "hyperpack/report/report.h"
#include "page.h"
#include "page_data.h"

namespace hyperpack::report {

struct PageCache::Impl {
  std::mutex mu;
  std::map<int64_t, std::pair<int, nlohmann::json>> importance;  // study -> (scored, importance)
};

PageCache::PageCache() : impl_(std::make_unique<Impl>()) {}
PageCache::~PageCache() = default;

struct PageCacheAccess {
  // in.importance from the cache when no trial has completed since; else fitted and kept. The fit
  // runs outside the lock: two requests may both fit, and the later result stays.
  static void Fill(PageCache& cache, StudyView& in) {
    const int scored = ScoredTrials(in);
    {
      std::lock_guard<std::mutex> lock(cache.impl_->mu);
      auto it = cache.impl_->importance.find(in.study.id);
      if (it != cache.impl_->importance.end() && it->second.first == scored) {
        in.importance = it->second.second;
        return;
      }
    }
    in.importance = PageImportance(in);
    std::lock_guard<std::mutex> lock(cache.impl_->mu);
    cache.impl_->importance[in.study.id] = {scored, *in.importance};
  }
};

Status WriteStudyPage(storage::Storage& db, const std::string& name, std::ostream& out) {
  HP_ASSIGN_OR_RETURN(StudyView in, ReadStudyView(db, name, ViewParts::kEverything));
  out << StudyPageHtml(PageData(in), in.study.name, /*source=*/"");
  if (!out.good()) return Status::Io("cannot write the study page");
  return Status::Ok();
}

Result<std::string> StudyPage(storage::Storage& db, const std::string& name,
                              const std::string& source, PageCache& cache) {
  HP_ASSIGN_OR_RETURN(StudyView in, ReadStudyView(db, name, ViewParts::kEverything));
  in.live = true;
  PageCacheAccess::Fill(cache, in);
  return StudyPageHtml(PageData(in), in.study.name, source);
}

Result<std::string> StudyPageJson(storage::Storage& db, const std::string& name, PageCache& cache) {
  HP_ASSIGN_OR_RETURN(StudyView in, ReadStudyView(db, name, ViewParts::kEverything));
  in.live = true;
  PageCacheAccess::Fill(cache, in);
  return PageData(in).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace hyperpack::report
