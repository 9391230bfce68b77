#include "core/timeline/timeline.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "ringlet/common/failure.h"

namespace ringlet::core::timeline {

namespace {

// Writes all of `text` at `offset`, as one pwrite unless the kernel takes
// less; returns 0 or the errno.
int write_at(int fd, std::string_view text, int64_t offset) {
  while (!text.empty()) {
    const ssize_t n = ::pwrite(fd, text.data(), text.size(), offset);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (n == 0) return EIO;
    text.remove_prefix(static_cast<size_t>(n));
    offset += n;
  }
  return 0;
}

}  // namespace

Timeline::Timeline(const std::string& path, bool mark_cycles,
                   std::chrono::milliseconds writer_timeout, ErrorReport on_error)
    : path_(path),
      mark_cycles_(mark_cycles),
      writer_timeout_(writer_timeout),
      on_error_(std::move(on_error)) {
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    throw common::caller_error("cannot open timeline file '" + path +
                               "' for writing: " + std::strerror(errno));
  }
  if (const int err = write_at(fd_, "[\n]", 0); err != 0) {
    ::close(fd_);
    throw common::caller_error("cannot write timeline file '" + path + "': " + std::strerror(err));
  }
  bracket_at_ = 2;
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
  ::close(fd_);
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
  const bool done = flushed_.wait_for(lock, writer_timeout_,
                                      [&] { return written_ >= target || !error_.empty(); });
  if (!error_.empty()) throw common::Failure(common::FailureKind::kInternal, error_);
  if (!done) {
    throw common::Failure(
        common::FailureKind::kInternal,
        "timeline '" + path_ + "': the writer thread did not write " +
            std::to_string(target - written_) + " queued events within " +
            std::to_string(
                std::chrono::duration_cast<std::chrono::seconds>(writer_timeout_).count()) +
            " s");
  }
}

void Timeline::writer() {
  std::vector<Event> batch;
  std::unique_lock lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty() && stop_) break;
    batch.swap(queue_);
    const bool failed = !error_.empty();
    lock.unlock();
    // After a failure nothing more is written: the file stays as the last
    // good write left it, valid.
    const bool ok = failed || write_batch(batch);
    const uint64_t n = batch.size();
    batch.clear();
    lock.lock();
    written_ += n;
    if (!ok && on_error_) {
      const std::string error = error_;
      lock.unlock();
      on_error_(error);
      lock.lock();
    }
    flushed_.notify_all();
  }
}

bool Timeline::write_batch(const std::vector<Event>& batch) {
  // Over the closing bracket: the events, then the bracket again.
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
  if (const int err = write_at(fd_, text, bracket_at_); err != 0) {
    // Part of the batch may have gone: cut it off and close the array again
    // (best effort; the disk just refused a write).
    if (::ftruncate(fd_, bracket_at_ + 1) == 0) write_at(fd_, "]", bracket_at_);
    std::lock_guard lock(mu_);
    error_ = "timeline '" + path_ + "': writing " + std::to_string(batch.size()) +
             " events failed: " + std::strerror(err) + "; the timeline stops here";
    return false;
  }
  bracket_at_ += static_cast<int64_t>(text.size()) - 1;
  return true;
}

}  // namespace ringlet::core::timeline
