// A tiny NVTX injection library (what Nsight Systems is, to NVTX): loaded
// through NVTX_INJECTION64_PATH, it receives every domain range push/pop and
// appends one line per push to $RINGLET_NVTX_RECORD.<pid>:
//   <domain name>\t<message>\t<payload>\t<category>
// so that a test can check which ranges the runtime opened, in order.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

#include <nvtx3/nvToolsExt.h>

namespace {

std::mutex g_mu;
std::FILE* g_out = nullptr;

struct Domain {
  std::string name;
};

nvtxDomainHandle_t NVTX_API domain_create(const char* name) {
  return reinterpret_cast<nvtxDomainHandle_t>(new Domain{name ? name : ""});
}

int NVTX_API range_push_ex(nvtxDomainHandle_t domain, const nvtxEventAttributes_t* attr) {
  std::lock_guard lock(g_mu);
  if (!g_out) return 0;
  const char* dname = domain ? reinterpret_cast<Domain*>(domain)->name.c_str() : "";
  const char* msg = attr && attr->messageType == NVTX_MESSAGE_TYPE_ASCII ? attr->message.ascii : "";
  unsigned long long payload =
      attr && attr->payloadType == NVTX_PAYLOAD_TYPE_UNSIGNED_INT64 ? attr->payload.ullValue : 0;
  std::fprintf(g_out, "%s\t%s\t%llu\t%u\n", dname, msg, payload, attr ? attr->category : 0u);
  std::fflush(g_out);
  return 0;
}

int NVTX_API range_pop(nvtxDomainHandle_t) { return 0; }

}  // namespace

extern "C" __attribute__((visibility("default"))) int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get) {
  const char* prefix = std::getenv("RINGLET_NVTX_RECORD");
  if (prefix) {
    const std::string path = std::string(prefix) + "." + std::to_string(::getpid());
    g_out = std::fopen(path.c_str(), "w");
  }
  auto* callbacks = static_cast<const NvtxExportTableCallbacks*>(get(NVTX_ETID_CALLBACKS));
  if (!callbacks) return 0;
  NvtxFunctionTable table = nullptr;
  unsigned int size = 0;
  if (!callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &table, &size) || !table) return 0;
  if (size < NVTX_CBID_CORE2_DomainCreateA) return 0;
  *table[NVTX_CBID_CORE2_DomainCreateA] = reinterpret_cast<NvtxFunctionPointer>(&domain_create);
  *table[NVTX_CBID_CORE2_DomainRangePushEx] = reinterpret_cast<NvtxFunctionPointer>(&range_push_ex);
  *table[NVTX_CBID_CORE2_DomainRangePop] = reinterpret_cast<NvtxFunctionPointer>(&range_pop);
  return 1;
}
