#include "ringlet/topology/visible_gpu.h"

#include <algorithm>
#include <cctype>
#include <set>
#include <utility>

namespace ringlet::topology {
namespace {

constexpr uint16_t kNvidia = 0x10de;

std::string_view trimmed(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> entries_of(std::string_view list) {
  std::vector<std::string_view> out;
  for (size_t at = 0; at <= list.size();) {
    size_t comma = list.find(',', at);
    if (comma == std::string_view::npos) comma = list.size();
    out.push_back(trimmed(list.substr(at, comma - at)));
    at = comma + 1;
  }
  return out;
}

// An index as CUDA reads one (strtoul's way: the leading digits, whatever
// follows them); -1 for a negative number or one without digits.
long index_of(std::string_view entry) {
  bool negative = false;
  if (!entry.empty() && (entry.front() == '+' || entry.front() == '-')) {
    negative = entry.front() == '-';
    entry.remove_prefix(1);
  }
  long value = 0;
  size_t digits = 0;
  for (; digits < entry.size() && entry[digits] >= '0' && entry[digits] <= '9'; ++digits) {
    if (value < 1'000'000) value = value * 10 + (entry[digits] - '0');
  }
  if (digits == 0 || negative) return -1;
  return value;
}

// The GPUs CUDA can enumerate (NVIDIA's, or of no known vendor: a topology
// written by hand), in PCI bus order.
std::vector<int> cuda_gpus_by_bus(const Host& host) {
  std::vector<int> gpus;
  for (size_t i = 0; i < host.gpus.size(); ++i) {
    const uint16_t vendor = host.gpus[i].vendor_id;
    if (vendor == kNvidia || vendor == 0) gpus.push_back(static_cast<int>(i));
  }
  auto key = [&](int g) {
    const std::string& bus = host.gpus[static_cast<size_t>(g)].bus_id;
    const auto k = pci_bus_key(bus);
    return std::make_pair(k.value_or(UINT64_MAX), bus);
  };
  std::stable_sort(gpus.begin(), gpus.end(), [&](int a, int b) { return key(a) < key(b); });
  return gpus;
}

// The one GPU among `gpus` whose UUID begins with `prefix`: -1 for none, -2
// for several (CUDA takes a prefix only where it names one GPU).
int gpu_by_uuid_prefix(const Host& host, const std::vector<int>& gpus, std::string_view prefix) {
  int found = -1;
  for (int g : gpus) {
    const std::string& uuid = host.gpus[static_cast<size_t>(g)].uuid;
    if (uuid.empty() || !uuid.starts_with(prefix)) continue;
    if (found >= 0) return -2;
    found = g;
  }
  return found;
}

std::string ordinal_text(int local_rank, size_t n, size_t k) {
  return std::to_string(k) + " of " + std::to_string(n) + " (local rank " +
         std::to_string(local_rank) + " % " + std::to_string(n) + ")";
}

struct Order {
  bool pci = false;  // CUDA numbers by PCI bus id: the rules are not a guess
  std::string text;  // how the indexes were read
};

Order order_of(const Host& host, const std::vector<int>& gpus, const CudaSettings& cuda) {
  Order o;
  const std::string value = cuda.device_order.value_or("");
  if (value == "PCI_BUS_ID") {
    o.pci = true;
    o.text = "in PCI bus order (CUDA_DEVICE_ORDER=PCI_BUS_ID)";
    return o;
  }
  std::set<std::pair<uint16_t, uint16_t>> models;
  for (int g : gpus) {
    models.insert(
        {host.gpus[static_cast<size_t>(g)].vendor_id, host.gpus[static_cast<size_t>(g)].device_id});
  }
  const std::string setting =
      !cuda.device_order || value.empty() || value == "FASTEST_FIRST"
          ? "CUDA_DEVICE_ORDER " + (cuda.device_order ? "'" + value + "'" : std::string("unset"))
          : "CUDA_DEVICE_ORDER='" + value + "', a value CUDA does not know";
  o.text = "in PCI bus order, ";
  o.text += models.size() <= 1 ? "taken for CUDA's fastest-first order as the GPUs are of one model"
                               : "though CUDA numbers the fastest first and the GPUs are of " +
                                     std::to_string(models.size()) + " models";
  o.text += " (" + setting + ")";
  return o;
}

// CUDA's rules, without its driver.
VisibleGpu by_rules(const Host& host, const CudaSettings& cuda, int local_rank) {
  const std::vector<int> gpus = cuda_gpus_by_bus(host);
  if (gpus.empty()) return {-1, false, "the topology lists no NVIDIA GPU"};
  const Order order = order_of(host, gpus, cuda);
  if (!cuda.visible_devices) {
    const size_t k = static_cast<size_t>(local_rank) % gpus.size();
    return {gpus[k], !order.pci,
            "CUDA device " + ordinal_text(local_rank, gpus.size(), k) + " " + order.text};
  }
  const std::string& list = *cuda.visible_devices;
  const std::string quoted = "CUDA_VISIBLE_DEVICES='" + list + "'";
  const std::vector<std::string_view> entries = entries_of(list);
  enum class Kind { kIndex, kGpuUuid, kMig };
  const std::string_view first = entries.front();
  const Kind kind = first.starts_with("GPU-")   ? Kind::kGpuUuid
                    : first.starts_with("MIG-") ? Kind::kMig
                                                : Kind::kIndex;
  const bool any_uuid = std::any_of(gpus.begin(), gpus.end(), [&](int g) {
    return !host.gpus[static_cast<size_t>(g)].uuid.empty();
  });
  if (kind != Kind::kIndex && !any_uuid) {
    return {-1, false,
            quoted +
                " names GPUs by UUID, which the topology does not record (hwloc records "
                "them with its NVML component)"};
  }
  std::vector<int> listed;
  std::string ended;  // where CUDA stops reading, and why
  for (size_t i = 0; i < entries.size(); ++i) {
    const std::string_view entry = entries[i];
    const std::string at = "entry " + std::to_string(i) + " ('" + std::string(entry) + "')";
    int gpu = -1;
    if (kind == Kind::kIndex) {
      const long index = index_of(entry);
      if (index < 0 || static_cast<size_t>(index) >= gpus.size()) {
        ended = at + " is not an index of the host's " + std::to_string(gpus.size()) + " GPUs";
        break;
      }
      gpu = gpus[static_cast<size_t>(index)];
    } else if (kind == Kind::kMig) {
      // CUDA enumerates one MIG device per process: the first.
      if (i > 0) break;
      // MIG-GPU-<uuid>/<gi>/<ci> names its GPU; MIG-<uuid>, the newer form,
      // names the instance only.
      std::string_view parent = entry.substr(4);
      if (!parent.starts_with("GPU-")) {
        return {-1, false,
                quoted +
                    " names a MIG device by its own UUID, which the topology does not "
                    "list with its GPU"};
      }
      parent = parent.substr(0, parent.find('/'));
      gpu = gpu_by_uuid_prefix(host, gpus, parent);
      if (gpu < 0) {
        ended = at + (gpu == -2 ? " names several GPUs" : " names no GPU the topology lists");
        break;
      }
    } else {
      gpu = entry.starts_with("GPU-") ? gpu_by_uuid_prefix(host, gpus, entry) : -1;
      if (gpu < 0) {
        ended = at + (!entry.starts_with("GPU-") ? " is not a GPU UUID"
                      : gpu == -2                ? " begins the UUIDs of several GPUs"
                                                 : " begins no UUID the topology lists");
        break;
      }
    }
    if (std::find(listed.begin(), listed.end(), gpu) != listed.end()) {
      return {-1, false,
              quoted + " names GPU " + host.gpus[static_cast<size_t>(gpu)].name +
                  " twice, which makes CUDA hide every GPU"};
    }
    listed.push_back(gpu);
  }
  if (listed.empty()) {
    return {-1, false,
            quoted + " makes no GPU of this host visible" + (ended.empty() ? "" : ": " + ended)};
  }
  const size_t k = static_cast<size_t>(local_rank) % listed.size();
  std::string how = "entry " + ordinal_text(local_rank, listed.size(), k) + " of " + quoted;
  if (kind == Kind::kIndex) {
    how += ", an index " + order.text;
  } else {
    how += ", by the topology's GPU UUIDs";
  }
  if (!ended.empty()) how += "; CUDA reads no further than " + ended;
  return {listed[k], kind == Kind::kIndex && !order.pci, how};
}

}  // namespace

std::optional<uint64_t> pci_bus_key(const std::string& bus_id) {
  // domain:bus:device.function, each in hex digits only (no sign, no 0x).
  uint64_t fields[4] = {};
  const char separators[4] = {':', ':', '.', '\0'};
  size_t at = 0;
  for (int f = 0; f < 4; ++f) {
    size_t digits = 0;
    for (; at < bus_id.size() && std::isxdigit(static_cast<unsigned char>(bus_id[at])); ++at) {
      if (++digits > 8) return std::nullopt;
      const char c = static_cast<char>(std::tolower(static_cast<unsigned char>(bus_id[at])));
      fields[f] = fields[f] * 16 + static_cast<uint64_t>(c <= '9' ? c - '0' : c - 'a' + 10);
    }
    if (digits == 0) return std::nullopt;
    if (separators[f] == '\0') break;
    if (at >= bus_id.size() || bus_id[at] != separators[f]) return std::nullopt;
    ++at;
  }
  if (at != bus_id.size() || fields[1] > 0xff || fields[2] > 0x1f || fields[3] > 7) {
    return std::nullopt;
  }
  return (fields[0] << 16) | (fields[1] << 8) | (fields[2] << 3) | fields[3];
}

VisibleGpu visible_gpu(const Host& host, const CudaSettings& cuda,
                       const std::optional<std::vector<CudaDevice>>& driver, int local_rank) {
  if (host.gpus.empty()) return {-1, false, "the topology lists no GPU"};
  std::string instead;  // why the driver's answer was not used
  if (driver && !driver->empty()) {
    const size_t k = static_cast<size_t>(local_rank) % driver->size();
    const CudaDevice& d = (*driver)[k];
    const auto key = pci_bus_key(d.bus_id);
    int gpu = -1;
    for (size_t i = 0; i < host.gpus.size() && gpu < 0; ++i) {
      const PciDevice& g = host.gpus[i];
      if ((key && pci_bus_key(g.bus_id) == key) || (!d.uuid.empty() && g.uuid == d.uuid)) {
        gpu = static_cast<int>(i);
      }
    }
    const std::string device = "CUDA device " + ordinal_text(local_rank, driver->size(), k);
    if (gpu >= 0) {
      return {gpu, false, device + ", PCI " + d.bus_id + ", as the CUDA driver reports"};
    }
    instead = "the CUDA driver's " + device + ", PCI " + d.bus_id +
              ", is not among the topology's GPUs; by CUDA's rules: ";
  } else if (driver) {
    instead = "the CUDA driver lists no device; by CUDA's rules: ";
  }
  VisibleGpu v = by_rules(host, cuda, local_rank);
  v.how = instead + v.how;
  return v;
}

}  // namespace ringlet::topology
