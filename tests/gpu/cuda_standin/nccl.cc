// The stand-in's NCCL: communicators that record where they live and what
// was called on them, and collectives that record the device they were
// called on and do nothing else. Nothing crosses processes. See standin.h.
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <unistd.h>

#include <atomic>
#include <climits>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "standin.h"

struct ncclComm {
  int id = 0;
  int device = 0;  // current at ncclCommInitRankConfig
  int nranks = 0;
  int rank = 0;
  bool blocking = true;
  bool finalized = false;
  bool destroyed = false;
  bool aborted = false;
  bool hung = false;    // a collective never ends (RINGLET_STANDIN_NCCL_HANG)
  int in_progress = 0;  // ncclCommGetAsyncError answers ncclInProgress this often yet
  std::map<std::string, long> calls;
  std::vector<std::shared_ptr<standin::Gate>> gates;  // of its hung collectives
};

namespace standin {

namespace {

constexpr size_t kKeep = 64;

struct Nccl {
  std::vector<ncclComm*> comms;  // never freed: a late call on one is recorded, not a crash
  std::vector<std::string> wrong_device;
  std::vector<std::string> misuse;
};

Nccl& nccl() {
  static auto* n = new Nccl;
  return *n;
}

thread_local int t_group_depth = 0;
thread_local std::set<ncclComm*> t_group;

void keep(std::vector<std::string>& list, std::string what) {
  if (list.size() < kKeep) list.push_back(std::move(what));
}

std::string comm_text(const ncclComm* c) {
  return "communicator " + std::to_string(c->id) + " (cuda:" + std::to_string(c->device) + ")";
}

// Whether `comm` may still be used; records the misuse where not.
bool usable(ncclComm* comm, const char* call) {
  if (comm == nullptr) {
    keep(nccl().misuse, std::string(call) + " on a null communicator");
    return false;
  }
  if (comm->aborted || comm->destroyed) {
    keep(nccl().misuse, std::string(call) + " on " + comm_text(comm) + ", already " +
                            (comm->aborted ? "aborted" : "destroyed"));
    return false;
  }
  return true;
}

// One collective or point-to-point call of `comm` on `stream`.
ncclResult_t collective(const char* name, ncclComm* comm, cudaStream_t stream) {
  record(name, true);
  std::lock_guard lock(state_mutex());
  if (!usable(comm, name)) return ncclInvalidUsage;
  ++comm->calls[name];
  const int current = current_device(), on = stream_device(stream);
  if (current != comm->device || on != comm->device) {
    keep(nccl().wrong_device, std::string(name) + " on " + comm_text(comm) +
                                  " while cuda:" + std::to_string(current) +
                                  " is current, on a stream of cuda:" + std::to_string(on));
  }
  if (env_flag("RINGLET_STANDIN_NCCL_HANG", false)) {
    comm->hung = true;
    if (auto gate = hang_stream(stream)) comm->gates.push_back(std::move(gate));
  }
  if (t_group_depth > 0) t_group.insert(comm);
  return ncclSuccess;
}

ncclResult_t init(ncclComm_t* out, int nranks, int rank, bool blocking, const char* name) {
  record(name, true);  // NCCL makes the communicator on the current device
  if (nranks < 1 || rank < 0 || rank >= nranks) return ncclInvalidArgument;
  std::lock_guard lock(state_mutex());
  auto* c = new ncclComm;
  c->id = static_cast<int>(nccl().comms.size());
  c->device = current_device();
  c->nranks = nranks;
  c->rank = rank;
  c->blocking = blocking;
  nccl().comms.push_back(c);
  *out = c;
  if (blocking) return ncclSuccess;
  c->in_progress = 1;  // joining: as NCCL's non-blocking mode says
  return ncclInProgress;
}

std::string bool_text(bool b) { return b ? "true" : "false"; }

}  // namespace

long nccl_live_communicators() {
  std::lock_guard lock(state_mutex());
  long n = 0;
  for (const ncclComm* c : nccl().comms) n += !c->destroyed && !c->aborted;
  return n;
}

std::string nccl_report_json() {
  std::lock_guard lock(state_mutex());
  std::string out = "{\"communicators\": [";
  bool first = true;
  for (const ncclComm* c : nccl().comms) {
    out += first ? "\n    {" : ",\n    {";
    first = false;
    out += "\"id\": " + std::to_string(c->id) + ", \"device\": " + std::to_string(c->device) +
           ", \"nranks\": " + std::to_string(c->nranks) + ", \"rank\": " + std::to_string(c->rank) +
           ", \"blocking\": " + bool_text(c->blocking) +
           ", \"finalized\": " + bool_text(c->finalized) +
           ", \"destroyed\": " + bool_text(c->destroyed) +
           ", \"aborted\": " + bool_text(c->aborted) + ", \"hung\": " + bool_text(c->hung) +
           ", \"calls\": {";
    bool first_call = true;
    for (const auto& [name, n] : c->calls) {
      out += (first_call ? "" : ", ") + json_string(name) + ": " + std::to_string(n);
      first_call = false;
    }
    out += "}}";
  }
  out += "],\n    \"wrong_device\": [";
  for (size_t i = 0; i < nccl().wrong_device.size(); ++i) {
    out += (i ? ", " : "") + json_string(nccl().wrong_device[i]);
  }
  out += "],\n    \"misuse\": [";
  for (size_t i = 0; i < nccl().misuse.size(); ++i) {
    out += (i ? ", " : "") + json_string(nccl().misuse[i]);
  }
  out += "]}";
  return out;
}

}  // namespace standin

using namespace standin;

// What the library exports (it builds with hidden visibility).
#pragma GCC visibility push(default)
extern "C" {

ncclResult_t ncclGetVersion(int* version) {
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  record("ncclGetUniqueId", false);
  static std::atomic<int> made{0};
  std::memset(id, 0, sizeof *id);
  const int pid = getpid(), n = made++;
  std::memcpy(id->internal, &pid, sizeof pid);
  std::memcpy(id->internal + sizeof pid, &n, sizeof n);
  return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId, int rank,
                                    ncclConfig_t* config) {
  // NCCL_CONFIG_UNDEF_INT (INT_MIN) is NCCL's default: blocking.
  const bool blocking = config == nullptr || config->blocking != 0;
  return init(comm, nranks, rank, blocking, "ncclCommInitRankConfig");
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId, int rank) {
  return init(comm, nranks, rank, true, "ncclCommInitRank");
}

// Communicator lifetimes: NCCL switches to the communicator's device itself,
// so these make no context on the caller's.
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* state) {
  record("ncclCommGetAsyncError", false);
  std::lock_guard lock(state_mutex());
  if (!usable(comm, "ncclCommGetAsyncError")) return ncclInvalidArgument;
  if (comm->hung) {
    *state = ncclInProgress;
  } else if (comm->in_progress > 0) {
    --comm->in_progress;
    *state = ncclInProgress;
  } else {
    *state = ncclSuccess;
  }
  return ncclSuccess;
}

ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  record("ncclCommFinalize", false);
  std::lock_guard lock(state_mutex());
  if (!usable(comm, "ncclCommFinalize")) return ncclInvalidArgument;
  ++comm->calls["ncclCommFinalize"];
  comm->finalized = true;
  if (comm->blocking) return comm->hung ? ncclSystemError : ncclSuccess;
  comm->in_progress = 1;
  return ncclInProgress;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  record("ncclCommDestroy", false);
  std::lock_guard lock(state_mutex());
  if (!usable(comm, "ncclCommDestroy")) return ncclInvalidArgument;
  ++comm->calls["ncclCommDestroy"];
  comm->destroyed = true;
  return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  record("ncclCommAbort", false);
  std::lock_guard lock(state_mutex());
  if (!usable(comm, "ncclCommAbort")) return ncclInvalidArgument;
  ++comm->calls["ncclCommAbort"];
  comm->aborted = true;
  // Aborting ends the communicator's kernels: its streams move on.
  for (const auto& gate : comm->gates) gate->blocked = false;
  comm->gates.clear();
  return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  *count = comm->nranks;
  return ncclSuccess;
}

ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) {
  *device = comm->device;
  return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  *rank = comm->rank;
  return ncclSuccess;
}

const char* ncclGetErrorString(ncclResult_t r) {
  switch (r) {
    case ncclSuccess:
      return "no error";
    case ncclInProgress:
      return "NCCL operation in progress";
    case ncclInvalidUsage:
      return "invalid usage (the Ringlet NCCL stand-in)";
    case ncclInvalidArgument:
      return "invalid argument (the Ringlet NCCL stand-in)";
    default:
      return "an error of the Ringlet NCCL stand-in";
  }
}

const char* ncclGetLastError(ncclComm_t) { return ""; }

ncclResult_t ncclGroupStart() {
  ++t_group_depth;
  return ncclSuccess;
}

ncclResult_t ncclGroupEnd() {
  if (t_group_depth == 0) {
    std::lock_guard lock(state_mutex());
    keep(nccl().misuse, "ncclGroupEnd without ncclGroupStart");
    return ncclInvalidUsage;
  }
  if (--t_group_depth > 0) return ncclSuccess;
  std::lock_guard lock(state_mutex());
  bool waiting = false;
  for (ncclComm* c : t_group) {
    if (c->blocking || c->aborted || c->destroyed) continue;
    c->in_progress = 1;  // a non-blocking group is launched in the background
    waiting = true;
  }
  t_group.clear();
  return waiting ? ncclInProgress : ncclSuccess;
}

ncclResult_t ncclAllReduce(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t comm,
                           cudaStream_t stream) {
  return collective("ncclAllReduce", comm, stream);
}

ncclResult_t ncclBroadcast(const void*, void*, size_t, ncclDataType_t, int, ncclComm_t comm,
                           cudaStream_t stream) {
  return collective("ncclBroadcast", comm, stream);
}

ncclResult_t ncclBcast(void*, size_t, ncclDataType_t, int, ncclComm_t comm, cudaStream_t stream) {
  return collective("ncclBcast", comm, stream);
}

ncclResult_t ncclReduce(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, int,
                        ncclComm_t comm, cudaStream_t stream) {
  return collective("ncclReduce", comm, stream);
}

ncclResult_t ncclAllGather(const void*, void*, size_t, ncclDataType_t, ncclComm_t comm,
                           cudaStream_t stream) {
  return collective("ncclAllGather", comm, stream);
}

ncclResult_t ncclReduceScatter(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t,
                               ncclComm_t comm, cudaStream_t stream) {
  return collective("ncclReduceScatter", comm, stream);
}

ncclResult_t ncclSend(const void*, size_t, ncclDataType_t, int, ncclComm_t comm,
                      cudaStream_t stream) {
  return collective("ncclSend", comm, stream);
}

ncclResult_t ncclRecv(void*, size_t, ncclDataType_t, int, ncclComm_t comm, cudaStream_t stream) {
  return collective("ncclRecv", comm, stream);
}

}  // extern "C"
#pragma GCC visibility pop
