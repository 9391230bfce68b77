// Horovod's timeline: a Chrome-trace JSON file (chrome://tracing, Perfetto)
// with one "process" per tensor. Per tensor: a NEGOTIATE_<OP> span with an
// instant mark per rank as it reports the tensor ready, then the op span
// (<OP>) with nested activities: QUEUE, then the phases the algorithm reports
// (an allreduce on the ring: MEMCPY_IN_FUSION_BUFFER, RING_REDUCESCATTER,
// RING_ALLGATHER, MEMCPY_OUT_FUSION_BUFFER; on one host DIRECT_REDUCESCATTER,
// DIRECT_ALLGATHER or ONESTEP_ALLREDUCE: see collectives::PhaseObserver; other
// collectives: the algorithm, e.g. DIRECT_ALLGATHER). Optional CYCLE marks.
//
// The file is strict JSON after every write, so that a process killed at any
// moment (SIGKILL included) leaves a file that any JSON parser reads: it
// starts as "[\n]", and each batch of whole events goes to the file in one
// pwrite() at the closing bracket's offset, the batch ending with a new
// closing bracket (",\n{event},\n{event}\n]"). Nothing is ever written in
// pieces of an event, and the bytes before the bracket never change. Every
// write is checked: the first failure is reported once (the error callback),
// and the writer then stops writing, leaving the file as the last good write
// left it. A writer thread does the formatting and the I/O; the runtime's loop
// only appends to a queue under a short lock, so it never waits on disk.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace ringlet::core::timeline {

class Timeline {
 public:
  // Called once, from the writer thread, with the first write error.
  using ErrorReport = std::function<void(const std::string& error)>;
  // Creates (truncates) `path`; throws an invalid-argument common::Failure
  // naming it on failure. `writer_timeout` bounds flush().
  Timeline(const std::string& path, bool mark_cycles,
           std::chrono::milliseconds writer_timeout = std::chrono::seconds(30),
           ErrorReport on_error = {});
  // Writes what is queued, closes the array and the file.
  ~Timeline();
  Timeline(const Timeline&) = delete;
  Timeline& operator=(const Timeline&) = delete;

  const std::string& path() const { return path_; }
  bool mark_cycles() const { return mark_cycles_; }

  void negotiate_start(const std::string& tensor, const std::string& op_upper);
  void rank_ready(const std::string& tensor, int rank);
  void negotiate_end(const std::string& tensor);
  void op_start(const std::string& tensor, const std::string& op_upper, int64_t bytes);
  void activity_start(const std::string& tensor, const std::string& activity);
  void activity_end(const std::string& tensor);
  void op_end(const std::string& tensor);
  void cycle_start();

  // Blocks until everything queued so far is in the file (tests). Throws an
  // internal common::Failure naming the file when a write failed, or when
  // the writer has not written it within the writer timeout.
  void flush();

 private:
  struct Event {
    char phase;  // 'B', 'E', 'i', 'M'
    int pid;
    int64_t ts_us;
    std::string name;
    std::string args;  // JSON object text or empty
  };
  int pid_of(const std::string& tensor);  // mu_ held
  void push(Event e);                      // mu_ held
  void writer();
  // Whole events, then the closing bracket, in one write; false on failure
  // (error_ says why).
  bool write_batch(const std::vector<Event>& batch);
  int64_t now_us() const;

  const std::string path_;
  const bool mark_cycles_;
  const std::chrono::steady_clock::time_point epoch_ = std::chrono::steady_clock::now();
  const std::chrono::milliseconds writer_timeout_;
  const ErrorReport on_error_;
  int fd_ = -1;
  // Writer thread only: where the closing bracket is, whether an event precedes it.
  int64_t bracket_at_ = 0;
  bool first_event_ = true;

  std::mutex mu_;
  std::condition_variable cv_;       // writer: events queued or stopping
  std::condition_variable flushed_;  // flush(): a batch reached the disk
  std::vector<Event> queue_;
  uint64_t queued_ = 0, written_ = 0;
  std::string error_;  // the first write failure; nothing is written after it
  bool stop_ = false;
  std::unordered_map<std::string, int> pids_;
  std::unordered_map<int, int> depth_;  // open spans per pid
  std::thread thread_;
};

}  // namespace ringlet::core::timeline
