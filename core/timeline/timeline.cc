#include "core/timeline/timeline.h"

#include <nlohmann/json.hpp>
#include <stdexcept>

namespace ringlet::core::timeline {

Timeline::Timeline(const std::string& path, bool mark_cycles) : path_(path), mark_cycles_(mark_cycles) {
  file_ = std::fopen(path.c_str(), "w");
  if (!file_) throw std::runtime_error("cannot open timeline file '" + path + "' for writing");
  std::fputs("[\n]", file_);
  std::fflush(file_);
  thread_ = std::thread([this] { writer(); });
}

Timeline::~Timeline() {
  {
    std::lock_guard lock(mu_);
    // Close what is still open (tensors negotiating or queued when the
    // timeline stopped), so that the file ends balanced.
    const int64_t ts = now_us();
    for (auto& [pid, depth] : depth_) {
      for (; depth > 0; --depth) queue_.push_back({'E', pid, ts, {}, {}});
    }
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  std::fclose(file_);
}

int64_t Timeline::now_us() const {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - epoch_)
      .count();
}

int Timeline::pid_of(const std::string& tensor) {
  auto [it, fresh] = pids_.try_emplace(tensor, static_cast<int>(pids_.size()) + 1);
  if (fresh) {
    push({'M', it->second, 0, "process_name", nlohmann::json{{"name", tensor}}.dump()});
    push({'M', it->second, 0, "process_sort_index", nlohmann::json{{"sort_index", it->second}}.dump()});
  }
  return it->second;
}

void Timeline::push(Event e) {
  if (e.phase == 'B') ++depth_[e.pid];
  queue_.push_back(std::move(e));
  ++queued_;
}

void Timeline::negotiate_start(const std::string& tensor, const std::string& op_upper) {
  const int64_t ts = now_us();
  std::lock_guard lock(mu_);
  push({'B', pid_of(tensor), ts, "NEGOTIATE_" + op_upper, {}});
  cv_.notify_one();
}

void Timeline::rank_ready(const std::string& tensor, int rank) {
  const int64_t ts = now_us();
  std::lock_guard lock(mu_);
  push({'i', pid_of(tensor), ts, std::to_string(rank), {}});
  cv_.notify_one();
}

void Timeline::negotiate_end(const std::string& tensor) {
  const int64_t ts = now_us();
  std::lock_guard lock(mu_);
  const int pid = pid_of(tensor);
  // A span opened before this timeline started has no 'B' here: drop its end.
  int& depth = depth_[pid];
  if (depth == 0) return;
  --depth;
  push({'E', pid, ts, {}, {}});
  cv_.notify_one();
}

void Timeline::op_start(const std::string& tensor, const std::string& op_upper, int64_t bytes) {
  const int64_t ts = now_us();
  std::lock_guard lock(mu_);
  push({'B', pid_of(tensor), ts, op_upper, nlohmann::json{{"bytes", bytes}}.dump()});
  cv_.notify_one();
}

void Timeline::activity_start(const std::string& tensor, const std::string& activity) {
  const int64_t ts = now_us();
  std::lock_guard lock(mu_);
  push({'B', pid_of(tensor), ts, activity, {}});
  cv_.notify_one();
}

void Timeline::activity_end(const std::string& tensor) { negotiate_end(tensor); }
void Timeline::op_end(const std::string& tensor) { negotiate_end(tensor); }

void Timeline::cycle_start() {
  if (!mark_cycles_) return;
  const int64_t ts = now_us();
  std::lock_guard lock(mu_);
  push({'i', 0, ts, "CYCLE_START", {}});
  cv_.notify_one();
}

void Timeline::flush() {
  std::unique_lock lock(mu_);
  const uint64_t target = queued_;
  cv_.notify_one();
  flushed_.wait(lock, [&] { return written_ >= target; });
}

void Timeline::writer() {
  std::vector<Event> batch;
  std::unique_lock lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty() && stop_) break;
    batch.swap(queue_);
    lock.unlock();
    write_batch(batch);
    const uint64_t n = batch.size();
    batch.clear();
    lock.lock();
    written_ += n;
    flushed_.notify_all();
  }
}

void Timeline::write_batch(const std::vector<Event>& batch) {
  // Overwrite the closing bracket, append, close again.
  std::fseek(file_, -1, SEEK_END);
  std::string text;
  for (const Event& e : batch) {
    nlohmann::json j;
    j["ph"] = std::string(1, e.phase);
    j["pid"] = e.pid;
    j["tid"] = 0;
    j["ts"] = e.ts_us;
    if (!e.name.empty()) j["name"] = e.name;
    if (e.phase == 'i') j["s"] = e.pid == 0 ? "g" : "p";
    if (!e.args.empty()) j["args"] = nlohmann::json::parse(e.args);
    text += first_event_ ? "" : ",\n";
    first_event_ = false;
    text += j.dump();
  }
  text += "\n]";
  std::fwrite(text.data(), 1, text.size(), file_);
  std::fflush(file_);
}

}  // namespace ringlet::core::timeline
