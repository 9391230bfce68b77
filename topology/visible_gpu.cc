#include "ringlet/topology/visible_gpu.h"

#include <algorithm>
#include <charconv>
#include <numeric>
#include <vector>

namespace ringlet::topology {
namespace {

std::string_view trimmed(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace

VisibleGpu visible_gpu(const Host& host, std::string_view cuda_visible_devices, int local_rank) {
  const std::string quoted = "CUDA_VISIBLE_DEVICES='" + std::string(cuda_visible_devices) + "'";
  if (host.gpus.empty()) return {-1, "the topology lists no GPU"};
  // The list's indexes count CUDA's devices as if nothing were hidden: for a
  // host's GPUs of one model, PCI bus order. (Not Host::gpus' cudaN order: a
  // live discovery under this very variable numbers only the visible ones.)
  std::vector<int> by_bus(host.gpus.size());
  std::iota(by_bus.begin(), by_bus.end(), 0);
  std::stable_sort(by_bus.begin(), by_bus.end(), [&](int a, int b) {
    return host.gpus[static_cast<size_t>(a)].bus_id < host.gpus[static_cast<size_t>(b)].bus_id;
  });
  std::vector<int> listed;
  for (size_t at = 0; at <= cuda_visible_devices.size();) {
    size_t comma = cuda_visible_devices.find(',', at);
    if (comma == std::string_view::npos) comma = cuda_visible_devices.size();
    const std::string_view entry = trimmed(cuda_visible_devices.substr(at, comma - at));
    at = comma + 1;
    if (entry.starts_with("GPU-") || entry.starts_with("MIG-")) {
      if (listed.empty())
        return {-1, quoted + " names GPUs by UUID, which the topology does not list"};
      break;
    }
    int index = -1;
    const auto [end, ec] = std::from_chars(entry.data(), entry.data() + entry.size(), index);
    // CUDA reads up to the first entry that is not a visible index.
    if (ec != std::errc() || end != entry.data() + entry.size() || index < 0 ||
        static_cast<size_t>(index) >= by_bus.size()) {
      break;
    }
    listed.push_back(by_bus[static_cast<size_t>(index)]);
  }
  if (listed.empty()) return {-1, quoted + " makes no GPU of this host visible"};
  return {listed[static_cast<size_t>(local_rank) % listed.size()], ""};
}

}  // namespace ringlet::topology
