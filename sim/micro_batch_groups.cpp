#include "sim/micro_batch_groups.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "model/config_error.hpp"

namespace kvtier::sim {

MicroBatchGroups::MicroBatchGroups(int groups) {
  if (groups < 1 || groups > kMaxSimMicroBatches)
    throw ConfigError("micro-batches: 1.." + std::to_string(kMaxSimMicroBatches) + ", got " +
                      std::to_string(groups));
  open_.assign(static_cast<std::size_t>(groups), 0);
}

int MicroBatchGroups::begin(RequestId r) {
  const auto least = std::min_element(open_.begin(), open_.end());
  const int k = static_cast<int>(least - open_.begin());
  if (!group_.emplace(r, k).second)
    throw std::logic_error("micro-batches: request " + std::to_string(r) + " began twice");
  ++*least;
  return k;
}

int MicroBatchGroups::end(RequestId r) {
  const int k = group_of(r);
  group_.erase(r);
  --open_[static_cast<std::size_t>(k)];
  return k;
}

int MicroBatchGroups::group_of(RequestId r) const {
  const auto it = group_.find(r);
  if (it == group_.end())
    throw std::logic_error("micro-batches: request " + std::to_string(r) + " is not open");
  return it->second;
}

void MicroBatchGroups::split(const traces::Forward& f, std::vector<traces::Forward>& out) const {
  const std::size_t groups = open_.size();
  out.resize(groups);
  std::vector<std::vector<std::size_t>> rows(groups);  // [group] indices into f.rows
  for (std::size_t r = 0; r < f.rows.size(); ++r)
    rows[static_cast<std::size_t>(group_of(f.rows[r].request))].push_back(r);
  for (std::size_t k = 0; k < groups; ++k) {
    traces::Forward& sub = out[k];
    sub.layers = f.layers;
    sub.rows.clear();
    sub.ids.clear();
    sub.offsets.assign(1, 0);
    for (const std::size_t r : rows[k])
      sub.rows.push_back(f.rows[r]);
    // offsets run layer-major: [layer * rows + row]
    for (int l = 0; l < f.layers; ++l) {
      for (const std::size_t r : rows[k]) {
        const auto sel = f.selection(l, static_cast<int>(r));
        sub.ids.insert(sub.ids.end(), sel.begin(), sel.end());
        sub.offsets.push_back(static_cast<std::int64_t>(sub.ids.size()));
      }
    }
  }
}

}  // namespace kvtier::sim
