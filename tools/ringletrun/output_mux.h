// Turns the stdout and stderr byte streams of many ranks into whole lines,
// each prefixed with its origin as horovodrun does ("[2]<stderr>:text").
//
// Lines are the unit of output: a rank's partial line is held back until its
// newline (or EOF) arrives, and every write to the launcher's own stdout or
// stderr carries only whole lines. So lines of different ranks interleave,
// but never within a line, even when stdout and stderr go to the same file.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace ringletrun {

// Splits one byte stream into prefixed lines.
class LineSplitter {
 public:
  // A rank that never writes a newline must not make the launcher grow without
  // bound: past this many bytes the pending text is emitted as a line of its own.
  static constexpr std::size_t kMaxPending = 1 << 20;

  explicit LineSplitter(std::string prefix) : prefix_(std::move(prefix)) {}

  // Appends every line completed by `data` to `out`, prefixed and with its
  // newline; keeps the unfinished tail for the next call.
  void feed(std::string_view data, std::string& out);

  // The stream ended: emits the unfinished tail, if any, with a newline added.
  void finish(std::string& out);

 private:
  std::string prefix_;
  std::string pending_;
};

// All ranks' streams, written to the launcher's stdout and stderr.
class OutputMux {
 public:
  enum class Stream { kStdout, kStderr };

  OutputMux(int stdout_fd, int stderr_fd) : stdout_fd_(stdout_fd), stderr_fd_(stderr_fd) {}

  // Registers the stream of `rank`; returns the id used by feed() and finish().
  int add(int rank, Stream stream);

  void feed(int id, std::string_view data);
  void finish(int id);

 private:
  struct Source {
    LineSplitter splitter;
    int fd;
  };
  void emit(int fd, const std::string& text);

  int stdout_fd_;
  int stderr_fd_;
  std::vector<Source> sources_;
  std::string scratch_;
};

// Writes all of `text` to fd, retrying short writes. Errors (a closed pipe on
// the reader's side) are dropped: the job must go on and its ranks must keep
// being drained even when nobody reads the launcher's output any more.
void write_fully(int fd, std::string_view text);

}  // namespace ringletrun
