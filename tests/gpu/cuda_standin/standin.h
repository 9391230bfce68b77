// A recording stand-in for the CUDA runtime and NCCL, for tests on machines
// without a GPU: libringlet_cuda_standin.so, loaded with LD_PRELOAD into real
// rank processes that ringletrun starts, so that the device path's control
// flow (which device each thread makes current, which contexts it makes,
// which handles it opens and closes, which NCCL communicators it makes and
// how it ends them) runs through the real runtime on a CPU-only machine.
// Test-only: built where CUDA and NCCL are found, never installed.
//
// Why interposition at the C ABI is the thin interface. The calls that the
// control path makes are already behind an interface: the CUDA runtime's and
// NCCL's own C functions, which libringlet reaches through the dynamic
// linker (libcudart.so.<major>, whose symbols carry the version node
// `libcudart.so.<major>`, and libnccl.so.2, unversioned). A library loaded
// first that defines the same symbols, the CUDA ones under the same version
// node (libcudart.map.in), takes every such call, from libringlet, its
// kernels' registration and launch stubs, and the test program alike. The
// library keeps one code path, the one the device check runs on a real GPU;
// a C++ interface inside core/gpu would put a second, test-only path beside
// it and leave the real calls themselves untested.
//
// What it emulates (RINGLET_STANDIN_DEVICES devices, 4 by default; it
// ignores CUDA_VISIBLE_DEVICES):
// - A current device per thread that starts at 0 without a context, as CUDA
//   does. cudaSetDevice makes the device's primary context (CUDA 12 and
//   later do); so does every call that needs one (memory, streams, events,
//   copies, launches, IPC, pools, NCCL's communicators), on the thread's
//   current device. Queries that a real driver answers without a context
//   make none: cudaGetDevice, cudaGetDeviceCount, cudaGetDeviceProperties,
//   cudaDeviceGetAttribute, cudaDeviceCanAccessPeer, the error calls,
//   cudaGetDriverEntryPointByVersion, registration and __cudaGetKernel; nor
//   do NCCL's ncclCommGetAsyncError, ncclCommFinalize, ncclCommDestroy and
//   ncclCommAbort, which switch to the communicator's device themselves.
//   Calls are counted by the device current on the calling thread, apart
//   for those two kinds.
// - Device memory is host memory; copies and sets run at once. Streams and
//   events are objects whose work is always complete, except after a NCCL
//   collective under RINGLET_STANDIN_NCCL_HANG=1 (below); a stream that
//   waits for an event that never completes hangs too. Kernels are recorded
//   and do nothing: results that a kernel or NCCL would compute are
//   meaningless here. A call on a stream of another device than the
//   current one is noted (CUDA refuses most), and so is an event recorded
//   on a stream of another device (refused, as CUDA does).
// - CUDA IPC: handles name the exporting process and allocation; opening one
//   maps fresh host memory of its size (nothing is shared between
//   processes). Opens and closes are counted.
// - cudaGetDriverEntryPointByVersion finds cuDevicePrimaryCtxGetState (which
//   says active where this process made the device's context) and nothing
//   else.
// - NCCL: communicators are per process (nothing crosses processes); each
//   records the device current at its ncclCommInitRankConfig, and every
//   collective records the current device and the stream's, each checked
//   against the communicator's. Non-blocking communicators answer
//   ncclInProgress once after init, a group and a finalize, as NCCL may.
//
// Knobs: RINGLET_STANDIN_DEVICES (count), RINGLET_STANDIN_PEER_ACCESS (0:
// no device reaches another; default 1), RINGLET_STANDIN_NCCL_HANG (1: a NCCL
// collective never ends: its stream's later events never complete and its
// communicator's ncclCommGetAsyncError stays ncclInProgress, as with a peer
// that died mid-collective, until ncclCommAbort ends it).
//
// The report: at exit (or when ringlet_standin_write_report is called),
// where RINGLET_STANDIN_REPORT_DIR is set and the process made a call, JSON
// in <dir>/<pid>.json: the rank (RINGLET_RANK), the devices with a context,
// calls per device, kernel launches, IPC handles exported, opened and
// closed (peer events: destroyed), each NCCL communicator (device, calls,
// finalized, destroyed, aborted, hung), every NCCL call made on another
// device than its communicator's, every call whose stream belongs to another
// device than the current one, and misuse (a freed pointer not allocated,
// an attribute it does not know, a call on a communicator already aborted
// or destroyed).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

struct CUstream_st;

namespace standin {

// One lock for everything the stand-in keeps (recursive: a call that
// records while holding it, and a report written from within a call).
std::recursive_mutex& state_mutex();

// RINGLET_STANDIN_DEVICES.
int device_count();
// The calling thread's current device.
int current_device();
void set_current_device(int device);

// Records one call by `name` on the thread's current device; `needs_context`
// marks that device's primary context as made.
void record(const char* name, bool needs_context);
// Marks `device`'s primary context (cudaSetDevice).
void make_context(int device);
bool has_context(int device);

// What a call did wrong or suspiciously, kept for the report (the first few).
void note_error(const std::string& what);
// A call whose stream belongs to `stream_device` while the thread's current
// device is another.
void note_stream_mismatch(const char* name, int stream_device);
void count_launch();

// IPC counters.
enum class Ipc { kMemExported, kMemOpened, kMemClosed, kEventExported, kEventOpened, kEventClosed };
void count_ipc(Ipc what);

// Work that never ends (RINGLET_STANDIN_NCCL_HANG): a stream behind a
// blocked gate, and the events recorded on it then, stay incomplete until
// the gate opens (ncclCommAbort ends the communicator's kernels).
struct Gate {
  bool blocked = true;
};
// Blocks `stream` from here on (nothing for the legacy and per-thread
// streams) and returns its gate, to open later; under state_mutex().
std::shared_ptr<Gate> hang_stream(CUstream_st* stream);
// The device a stream belongs to (the current one for the special streams).
int stream_device(CUstream_st* stream);

// NCCL communicators initialized and neither destroyed nor aborted yet.
long nccl_live_communicators();
// NCCL's part of the report (nccl.cc): a JSON object.
std::string nccl_report_json();
// `text` as a JSON string, quoted.
std::string json_string(const std::string& text);

bool env_flag(const char* name, bool fallback);

}  // namespace standin

// For tests that want a report before the process ends: writes it now (and
// again at exit). Returns 0, or -1 where RINGLET_STANDIN_REPORT_DIR is unset
// or the file could not be written.
extern "C" int ringlet_standin_write_report();
// For tests that check what is held at some point (found with dlsym):
// "live_communicators" (NCCL's, initialized and neither destroyed nor
// aborted), "ipc_mem_open" (peers' allocations opened and not closed), or
// -1 for another name.
extern "C" long ringlet_standin_count(const char* what);
