// The stand-in's state (devices, contexts, what was called where) and its
// report. See standin.h.
#include "standin.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

namespace standin {

namespace {

constexpr size_t kKeep = 64;  // entries kept per list of the report

struct State {
  std::vector<bool> contexts;
  // Calls by device current on the calling thread: those that need a
  // context, and those that do not.
  std::map<int, std::map<std::string, long>> context_calls, query_calls;
  std::map<int, long> launches;
  std::map<Ipc, long> ipc;
  std::vector<std::string> errors, stream_mismatches;
  long dropped_errors = 0;
  bool any_call = false;
  bool exited = false;  // the report was written at exit: later calls write it again
};

// Never destroyed: calls may come during the process's exit, after static
// destructors ran.
State& state() {
  static State* s = [] {
    auto* st = new State;
    st->contexts.assign(device_count(), false);
    return st;
  }();
  return *s;
}

thread_local int t_device = 0;

void append_counts(std::string& out, const std::map<int, std::map<std::string, long>>& calls) {
  out += "{";
  bool first_device = true;
  for (const auto& [device, names] : calls) {
    out += (first_device ? "\"" : ", \"") + std::to_string(device) + "\": {";
    first_device = false;
    bool first = true;
    for (const auto& [name, n] : names) {
      out += (first ? "" : ", ") + json_string(name) + ": " + std::to_string(n);
      first = false;
    }
    out += "}";
  }
  out += "}";
}

void append_list(std::string& out, const std::vector<std::string>& items) {
  out += "[";
  for (size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + json_string(items[i]);
  out += "]";
}

std::string report_json() {
  std::lock_guard lock(state_mutex());
  State& s = state();
  std::string out = "{\n  \"pid\": " + std::to_string(getpid()) + ",\n  \"rank\": ";
  const char* rank = std::getenv("RINGLET_RANK");
  out += rank ? json_string(rank) : "null";
  out += ",\n  \"devices\": " + std::to_string(device_count()) + ",\n  \"contexts\": [";
  bool first = true;
  for (int d = 0; d < device_count(); ++d) {
    if (!s.contexts[d]) continue;
    out += (first ? "" : ", ") + std::to_string(d);
    first = false;
  }
  out += "],\n  \"context_calls\": ";
  append_counts(out, s.context_calls);
  out += ",\n  \"query_calls\": ";
  append_counts(out, s.query_calls);
  out += ",\n  \"launches\": {";
  first = true;
  for (const auto& [device, n] : s.launches) {
    out += (first ? "\"" : ", \"") + std::to_string(device) + "\": " + std::to_string(n);
    first = false;
  }
  auto ipc = [&](Ipc what) { return std::to_string(s.ipc[what]); };
  out += "},\n  \"ipc\": {\"mem_exported\": " + ipc(Ipc::kMemExported) +
         ", \"mem_opened\": " + ipc(Ipc::kMemOpened) + ", \"mem_closed\": " + ipc(Ipc::kMemClosed) +
         ", \"events_exported\": " + ipc(Ipc::kEventExported) +
         ", \"events_opened\": " + ipc(Ipc::kEventOpened) +
         ", \"events_closed\": " + ipc(Ipc::kEventClosed) + "},\n  \"stream_mismatches\": ";
  append_list(out, s.stream_mismatches);
  out += ",\n  \"errors\": ";
  append_list(out, s.errors);
  out += ",\n  \"errors_dropped\": " + std::to_string(s.dropped_errors);
  out += ",\n  \"nccl\": " + nccl_report_json() + "\n}\n";
  return out;
}

int write_report_now() {
  const char* dir = std::getenv("RINGLET_STANDIN_REPORT_DIR");
  if (dir == nullptr || *dir == '\0') return -1;
  std::lock_guard lock(state_mutex());
  if (!state().any_call) return 0;  // a process that never used CUDA (ringletrun, a shell)
  const std::string text = report_json();
  const std::string path = std::string(dir) + "/" + std::to_string(getpid()) + ".json";
  const std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "w");
  if (f == nullptr) return -1;
  const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  if (std::fclose(f) != 0 || !ok) return -1;
  return std::rename(tmp.c_str(), path.c_str()) == 0 ? 0 : -1;
}

__attribute__((destructor)) void report_at_exit() {
  std::lock_guard lock(state_mutex());
  state().exited = true;
  (void)write_report_now();
}

}  // namespace

std::recursive_mutex& state_mutex() {
  static auto* mu = new std::recursive_mutex;
  return *mu;
}

bool env_flag(const char* name, bool fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  return std::string(v) != "0";
}

int device_count() {
  static const int n = [] {
    const char* v = std::getenv("RINGLET_STANDIN_DEVICES");
    const int parsed = v ? std::atoi(v) : 0;
    return parsed > 0 ? parsed : 4;
  }();
  return n;
}

int current_device() { return t_device; }
void set_current_device(int device) { t_device = device; }

void make_context(int device) {
  std::lock_guard lock(state_mutex());
  state().contexts.at(device) = true;
}

bool has_context(int device) {
  std::lock_guard lock(state_mutex());
  return device >= 0 && device < device_count() && state().contexts[device];
}

void record(const char* name, bool needs_context) {
  std::lock_guard lock(state_mutex());
  State& s = state();
  s.any_call = true;
  if (needs_context) {
    s.contexts.at(t_device) = true;
    ++s.context_calls[t_device][name];
  } else {
    ++s.query_calls[t_device][name];
  }
  if (s.exited) (void)write_report_now();
}

void note_error(const std::string& what) {
  std::lock_guard lock(state_mutex());
  State& s = state();
  if (s.errors.size() < kKeep) {
    s.errors.push_back(what);
  } else {
    ++s.dropped_errors;
  }
}

void note_stream_mismatch(const char* name, int stream_device) {
  std::lock_guard lock(state_mutex());
  State& s = state();
  if (s.stream_mismatches.size() < kKeep) {
    s.stream_mismatches.push_back(std::string(name) + " on a stream of device " +
                                  std::to_string(stream_device) + " while device " +
                                  std::to_string(t_device) + " is current");
  }
}

void count_launch() {
  std::lock_guard lock(state_mutex());
  ++state().launches[t_device];
}

void count_ipc(Ipc what) {
  std::lock_guard lock(state_mutex());
  ++state().ipc[what];
}

std::string json_string(const std::string& text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

}  // namespace standin

extern "C" __attribute__((visibility("default"))) int ringlet_standin_write_report() {
  return standin::write_report_now();
}

extern "C" __attribute__((visibility("default"))) long ringlet_standin_count(const char* what) {
  using standin::Ipc;
  const std::string name = what;
  if (name == "live_communicators") return standin::nccl_live_communicators();
  if (name == "ipc_mem_open") {
    std::lock_guard lock(standin::state_mutex());
    auto& ipc = standin::state().ipc;
    return ipc[Ipc::kMemOpened] - ipc[Ipc::kMemClosed];
  }
  return -1;
}
