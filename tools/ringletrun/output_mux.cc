#include "output_mux.h"

#include <poll.h>
#include <unistd.h>

#include <cerrno>

namespace ringletrun {

void LineSplitter::feed(std::string_view data, std::string& out) {
  while (!data.empty()) {
    std::size_t nl = data.find('\n');
    if (nl == std::string_view::npos) {
      pending_.append(data);
      if (pending_.size() >= kMaxPending) finish(out);
      return;
    }
    out += prefix_;
    out += pending_;
    out.append(data.substr(0, nl + 1));
    pending_.clear();
    data.remove_prefix(nl + 1);
  }
}

void LineSplitter::finish(std::string& out) {
  if (pending_.empty()) return;
  out += prefix_;
  out += pending_;
  out += '\n';
  pending_.clear();
}

int OutputMux::add(int rank, Stream stream) {
  bool is_out = stream == Stream::kStdout;
  std::string prefix = "[" + std::to_string(rank) + "]" + (is_out ? "<stdout>:" : "<stderr>:");
  sources_.push_back(Source{LineSplitter(std::move(prefix)), is_out ? stdout_fd_ : stderr_fd_});
  return static_cast<int>(sources_.size()) - 1;
}

void OutputMux::feed(int id, std::string_view data) {
  Source& s = sources_.at(static_cast<std::size_t>(id));
  scratch_.clear();
  s.splitter.feed(data, scratch_);
  emit(s.fd, scratch_);
}

void OutputMux::finish(int id) {
  Source& s = sources_.at(static_cast<std::size_t>(id));
  scratch_.clear();
  s.splitter.finish(scratch_);
  emit(s.fd, scratch_);
}

void OutputMux::emit(int fd, const std::string& text) {
  if (!text.empty()) write_fully(fd, text);
}

void write_fully(int fd, std::string_view text) {
  while (!text.empty()) {
    ssize_t n = ::write(fd, text.data(), text.size());
    if (n > 0) {
      text.remove_prefix(static_cast<std::size_t>(n));
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      // Our stdout was handed to us non-blocking: wait until it drains.
      pollfd p{fd, POLLOUT, 0};
      ::poll(&p, 1, 1000);
    } else {
      return;
    }
  }
}

}  // namespace ringletrun
