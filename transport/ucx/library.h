// UCX, loaded when the first UCX carrier is made rather than with Ringlet.
//
// Loading UCX has effects on the whole process: libucm patches mmap, munmap,
// madvise and brk in every loaded library (its memory events), and libucp.so.0
// becomes a requirement of every program that links Ringlet. Through dlopen,
// a process that never links a pair over UCX (a job on one host under auto,
// any job under RINGLET_TRANSPORT=tcp) never loads it, and a build with UCX
// also runs where UCX is not installed. Loaded once, never unloaded.
//
// Each member is the UCX function of the same name; ucp_init, inline in
// UCX's header, is ucp_init_version with the header's API version.
#pragma once

#include <ucp/api/ucp.h>

namespace ringlet::transport::ucx {

struct Library {
  decltype(&::ucp_config_read) ucp_config_read;
  decltype(&::ucp_config_modify) ucp_config_modify;
  decltype(&::ucp_config_release) ucp_config_release;
  decltype(&::ucp_init_version) ucp_init_version;
  decltype(&::ucp_cleanup) ucp_cleanup;
  decltype(&::ucp_context_query) ucp_context_query;
  decltype(&::ucp_worker_create) ucp_worker_create;
  decltype(&::ucp_worker_destroy) ucp_worker_destroy;
  decltype(&::ucp_worker_get_address) ucp_worker_get_address;
  decltype(&::ucp_worker_release_address) ucp_worker_release_address;
  decltype(&::ucp_worker_get_efd) ucp_worker_get_efd;
  decltype(&::ucp_worker_arm) ucp_worker_arm;
  decltype(&::ucp_worker_progress) ucp_worker_progress;
  decltype(&::ucp_ep_create) ucp_ep_create;
  decltype(&::ucp_ep_close_nbx) ucp_ep_close_nbx;
  decltype(&::ucp_tag_send_nbx) ucp_tag_send_nbx;
  decltype(&::ucp_tag_send_sync_nbx) ucp_tag_send_sync_nbx;
  decltype(&::ucp_tag_recv_nbx) ucp_tag_recv_nbx;
  decltype(&::ucp_tag_recv_request_test) ucp_tag_recv_request_test;
  decltype(&::ucp_tag_probe_nb) ucp_tag_probe_nb;
  decltype(&::ucp_tag_msg_recv_nbx) ucp_tag_msg_recv_nbx;
  decltype(&::ucp_request_check_status) ucp_request_check_status;
  decltype(&::ucp_request_cancel) ucp_request_cancel;
  decltype(&::ucp_request_free) ucp_request_free;
  decltype(&::ucs_status_string) ucs_status_string;
};

// The soname loaded: UCX 1.x.
inline constexpr const char* kLibraryName = "libucp.so.0";

// UCX's functions, loading UCX at the first call. Throws transport::Error
// naming the library and the loader's reason when it cannot be loaded (later
// calls try again).
const Library& library();

}  // namespace ringlet::transport::ucx
