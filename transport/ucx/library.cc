#include "ucx/library.h"

#include <dlfcn.h>

#include <cstdlib>
#include <string>

#include "ringlet/transport/transport.h"

namespace ringlet::transport::ucx {
namespace {

#if defined(__SANITIZE_THREAD__)
constexpr bool kThreadSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
constexpr bool kThreadSanitizer = true;
#else
constexpr bool kThreadSanitizer = false;
#endif
#else
constexpr bool kThreadSanitizer = false;
#endif

std::string loader_error() {
  const char* e = ::dlerror();
  return e != nullptr ? e : "unknown reason";
}

template <class F>
void resolve(void* handle, const char* name, F& out) {
  out = reinterpret_cast<F>(::dlsym(handle, name));
  if (out == nullptr) {
    throw Error(-1, std::string("ucx: ") + kLibraryName + " has no " + name + " (" +
                        loader_error() + "): UCX 1.13 or newer is needed");
  }
}

Library load() {
  // ThreadSanitizer builds only: UCX's memory events (libucm's patched
  // madvise) crash inside TSan's interceptors whenever a thread exits. UCX
  // reads UCX_MEM_EVENTS when it is loaded, so it is set (where unset) just
  // before; the transports that need the events (registration caches of RDMA
  // devices) are not where sanitizers run.
  if (kThreadSanitizer) ::setenv("UCX_MEM_EVENTS", "no", /*overwrite=*/0);
  // Never unloaded: UCX leaves threads, hooks and callbacks behind it.
  void* h = ::dlopen(kLibraryName, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (h == nullptr) {
    throw Error(-1, std::string("ucx: cannot load ") + kLibraryName + " (" + loader_error() +
                        "): UCX is not installed where this rank runs");
  }
  Library l{};
  resolve(h, "ucp_config_read", l.ucp_config_read);
  resolve(h, "ucp_config_modify", l.ucp_config_modify);
  resolve(h, "ucp_config_release", l.ucp_config_release);
  resolve(h, "ucp_init_version", l.ucp_init_version);
  resolve(h, "ucp_cleanup", l.ucp_cleanup);
  resolve(h, "ucp_context_query", l.ucp_context_query);
  resolve(h, "ucp_worker_create", l.ucp_worker_create);
  resolve(h, "ucp_worker_destroy", l.ucp_worker_destroy);
  resolve(h, "ucp_worker_get_address", l.ucp_worker_get_address);
  resolve(h, "ucp_worker_release_address", l.ucp_worker_release_address);
  resolve(h, "ucp_worker_get_efd", l.ucp_worker_get_efd);
  resolve(h, "ucp_worker_arm", l.ucp_worker_arm);
  resolve(h, "ucp_worker_progress", l.ucp_worker_progress);
  resolve(h, "ucp_ep_create", l.ucp_ep_create);
  resolve(h, "ucp_ep_close_nbx", l.ucp_ep_close_nbx);
  resolve(h, "ucp_tag_send_nbx", l.ucp_tag_send_nbx);
  resolve(h, "ucp_tag_send_sync_nbx", l.ucp_tag_send_sync_nbx);
  resolve(h, "ucp_tag_recv_nbx", l.ucp_tag_recv_nbx);
  resolve(h, "ucp_tag_recv_request_test", l.ucp_tag_recv_request_test);
  resolve(h, "ucp_tag_probe_nb", l.ucp_tag_probe_nb);
  resolve(h, "ucp_tag_msg_recv_nbx", l.ucp_tag_msg_recv_nbx);
  resolve(h, "ucp_request_check_status", l.ucp_request_check_status);
  resolve(h, "ucp_request_cancel", l.ucp_request_cancel);
  resolve(h, "ucp_request_free", l.ucp_request_free);
  // libucs, which libucp needs: dlsym searches the library's dependencies too.
  resolve(h, "ucs_status_string", l.ucs_status_string);
  return l;
}

}  // namespace

const Library& library() {
  // A load that throws leaves the static uninitialized: the next call retries.
  static const Library loaded = load();
  return loaded;
}

}  // namespace ringlet::transport::ucx
