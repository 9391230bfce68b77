#include "ringlet/topology/affinity.h"

#include <dirent.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <memory>
#include <set>

#include "ringlet/common/failure.h"

namespace ringlet::topology {
namespace {

// A cpu_set_t sized for any CPU index up to `max_cpu`, owned.
struct CpuSet {
  size_t cpus;
  size_t bytes;
  std::unique_ptr<cpu_set_t, decltype(&::free)> set;

  explicit CpuSet(size_t max_cpu)
      : cpus(std::max<size_t>(max_cpu + 1, CPU_SETSIZE)),
        bytes(CPU_ALLOC_SIZE(cpus)),
        set(CPU_ALLOC(cpus), &::free) {
    if (set == nullptr) throw std::bad_alloc();
    CPU_ZERO_S(bytes, set.get());
  }
};

struct DirCloser {
  void operator()(DIR* d) const { ::closedir(d); }
};

std::set<pid_t> threads_of_this_process() {
  std::set<pid_t> tids;
  std::unique_ptr<DIR, DirCloser> dir(::opendir("/proc/self/task"));
  if (dir == nullptr) return {static_cast<pid_t>(::syscall(SYS_gettid))};
  while (const dirent* e = ::readdir(dir.get())) {
    int tid = 0;
    const char* end = e->d_name + std::strlen(e->d_name);
    if (std::from_chars(e->d_name, end, tid).ptr == end && tid > 0) tids.insert(tid);
  }
  return tids;
}

}  // namespace

std::vector<int> process_affinity() {
  // Grow the set until the kernel's mask fits (machines past CPU_SETSIZE).
  for (size_t max_cpu = CPU_SETSIZE - 1;; max_cpu = max_cpu * 2 + 1) {
    CpuSet s(max_cpu);
    if (::sched_getaffinity(0, s.bytes, s.set.get()) == 0) {
      std::vector<int> cpus;
      for (size_t c = 0; c < s.cpus; ++c) {
        if (CPU_ISSET_S(c, s.bytes, s.set.get())) cpus.push_back(static_cast<int>(c));
      }
      return cpus;
    }
    if (errno != EINVAL || max_cpu > (1u << 20)) {
      throw common::Failure(common::FailureKind::kInternal,
                            std::string("topology: sched_getaffinity: ") + std::strerror(errno));
    }
  }
}

std::vector<int> online_cpus() {
  std::ifstream in("/sys/devices/system/cpu/online");
  std::string text;
  if (std::getline(in, text)) {
    if (auto cpus = parse_cpu_list(text); cpus && !cpus->empty()) return *cpus;
  }
  std::vector<int> cpus(static_cast<size_t>(std::max(1L, ::sysconf(_SC_NPROCESSORS_ONLN))));
  for (size_t i = 0; i < cpus.size(); ++i) cpus[i] = static_cast<int>(i);
  return cpus;
}

void bind_process(const std::vector<int>& cpus) {
  if (cpus.empty())
    throw common::Failure(common::FailureKind::kInternal, "topology: no CPU to bind to");
  CpuSet s(static_cast<size_t>(*std::max_element(cpus.begin(), cpus.end())));
  for (int c : cpus) CPU_SET_S(static_cast<size_t>(c), s.bytes, s.set.get());
  // A thread may start while the others are bound, from one not bound yet:
  // go over the threads again until no new one shows up (a few passes).
  std::set<pid_t> done;
  for (int pass = 0; pass < 4; ++pass) {
    bool fresh = false;
    for (pid_t tid : threads_of_this_process()) {
      if (!done.insert(tid).second) continue;
      fresh = true;
      // A thread that ended since the listing is no failure.
      if (::sched_setaffinity(tid, s.bytes, s.set.get()) != 0 && errno != ESRCH) {
        throw common::Failure(common::FailureKind::kInternal,
                              "topology: sched_setaffinity to CPUs " + cpu_list_text(cpus) + ": " +
                                  std::strerror(errno));
      }
    }
    if (!fresh) return;
  }
}

std::string cpu_list_text(const std::vector<int>& cpus) {
  std::string out;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(cpus[i]);
    if (j > i) out += '-' + std::to_string(cpus[j]);
    i = j + 1;
  }
  return out;
}

std::optional<std::vector<int>> parse_cpu_list(const std::string& text) {
  std::set<int> cpus;
  const char* at = text.data();
  const char* end = text.data() + text.size();
  while (end > at && (end[-1] == '\n' || end[-1] == ' ')) --end;
  if (at == end) return std::vector<int>{};
  for (;;) {
    int first = 0, last = 0;
    auto r = std::from_chars(at, end, first);
    if (r.ec != std::errc() || first < 0) return std::nullopt;
    at = r.ptr;
    last = first;
    if (at != end && *at == '-') {
      r = std::from_chars(at + 1, end, last);
      if (r.ec != std::errc() || last < first || last - first > (1 << 20)) return std::nullopt;
      at = r.ptr;
    }
    for (int c = first; c <= last; ++c) cpus.insert(c);
    if (at == end) break;
    if (*at != ',') return std::nullopt;
    ++at;
  }
  return std::vector<int>(cpus.begin(), cpus.end());
}

}  // namespace ringlet::topology
