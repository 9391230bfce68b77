#include "core/bootstrap/job_settings.h"

#include <chrono>
#include <thread>

namespace ringlet::core {

namespace {

// (variable, value) lines, one per setting.
std::string encode(const std::vector<std::pair<std::string, std::string>>& settings) {
  std::string text;
  for (const auto& [name, value] : settings) text += name + "=" + value + "\n";
  return text;
}

std::vector<std::pair<std::string, std::string>> decode(const std::vector<uint8_t>& bytes) {
  std::vector<std::pair<std::string, std::string>> settings;
  const std::string text(bytes.begin(), bytes.end());
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(at, end - at);
    const size_t eq = line.find('=');
    if (eq != std::string::npos) settings.emplace_back(line.substr(0, eq), line.substr(eq + 1));
    at = end + 1;
  }
  return settings;
}

// What differs between rank 0's settings and rank r's: empty where nothing.
std::string differences(const std::vector<std::pair<std::string, std::string>>& ours,
                        const std::vector<std::pair<std::string, std::string>>& theirs, int r) {
  std::string found;
  for (const auto& [name, value] : ours) {
    std::string other = "(not set: an older version?)";
    for (const auto& [their_name, their_value] : theirs) {
      if (their_name == name) other = their_value;
    }
    if (other == value) continue;
    found += (found.empty() ? "" : "; ") + name + " is " + value + " on rank 0 but " + other +
             " on rank " + std::to_string(r);
  }
  return found;
}

// The verdict's first byte: the settings agree, or not (the message follows).
constexpr char kAgreed = 'y';
constexpr char kDiffer = 'n';

std::string failure(const std::string& found) {
  return "ranks disagree on settings that every rank of a job must share: " + found +
         " (set them alike on every rank, for example in the launcher's environment)";
}

// A switch Ringlet may choose for: "1", "0", or "unset".
std::string switch_text(const std::optional<bool>& on) {
  return on ? (*on ? "1" : "0") : "unset";
}

}  // namespace

std::vector<std::pair<std::string, std::string>> job_wide_settings(const Config& c) {
  return {
      {"RINGLET_TRANSPORT", std::string(to_string(c.transport))},
      {"HOROVOD_CPU_OPERATIONS", std::string(to_string(c.cpu_operations))},
      {"HOROVOD_GPU_OPERATIONS", std::string(to_string(c.gpu_operations))},
      {"RINGLET_ALGORITHM", std::string(to_string(c.algorithm))},
      {"HOROVOD_FUSION_THRESHOLD", std::to_string(c.fusion_threshold)},
      {"HOROVOD_CACHE_CAPACITY", std::to_string(c.cache_capacity)},
      {"RINGLET_SHM_WINDOW_BYTES", std::to_string(c.shm_window_bytes)},
      {"RINGLET_CUDA_IPC_DIRECT_BYTES", std::to_string(c.cuda_ipc_direct_bytes)},
      {"HOROVOD_HIERARCHICAL_ALLREDUCE", switch_text(c.hierarchical_allreduce)},
      {"HOROVOD_HIERARCHICAL_ALLGATHER", switch_text(c.hierarchical_allgather)},
  };
}

void check_job_settings(const Config& config, int rank, int size, StoreClient& store,
                        transport::Deadline deadline) {
  const auto mine = job_wide_settings(config);
  if (rank != 0) {
    const std::string text = encode(mine);
    store.set("world/settings/" + std::to_string(rank), {text.begin(), text.end()});
    const std::vector<uint8_t> verdict = store.get("world/settings", deadline);
    if (!verdict.empty() && verdict[0] == kAgreed) return;
    try {
      store.add("world/settings_read", 1);
    } catch (const std::exception&) {
      // Rank 0 waits only so long for it.
    }
    throw ConfigError(rank,
                      std::string(verdict.begin() + (verdict.empty() ? 0 : 1), verdict.end()));
  }
  // The first few ranks that differ are named; a count stands for the rest.
  constexpr int kNamed = 4;
  std::string found;
  int differing = 0;
  for (int r = 1; r < size; ++r) {
    std::vector<uint8_t> theirs;
    try {
      theirs = store.get("world/settings/" + std::to_string(r), deadline);
    } catch (const transport::Timeout& e) {
      // It joined the rendezvous moments ago: it died since, or hangs.
      throw transport::Timeout(
          rank, r,
          "rank " + std::to_string(r) +
              " did not send its settings in time after the rendezvous: " + e.cause());
    }
    const std::string d = differences(mine, decode(theirs), r);
    if (d.empty()) continue;
    if (++differing <= kNamed) found += (found.empty() ? "" : "; ") + d;
  }
  if (differing > kNamed) found += "; and " + std::to_string(differing - kNamed) + " more ranks";
  if (found.empty()) {
    store.set("world/settings", {static_cast<uint8_t>(kAgreed)});
    return;
  }
  const std::string message = failure(found);
  const std::string verdict = kDiffer + message;
  store.set("world/settings", {verdict.begin(), verdict.end()});
  // The store dies with this rank: keep it up until the others have read the
  // verdict (every rank is already past the rendezvous, so they read it at
  // once; a few seconds at most on a loaded machine).
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (store.add("world/settings_read", 0) < size - 1 &&
         std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  throw ConfigError(rank, message);
}

}  // namespace ringlet::core
