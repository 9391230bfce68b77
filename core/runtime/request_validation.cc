#include "core/runtime/request_validation.h"

#include <algorithm>
#include <optional>
#include <vector>

#include "core/gpu/device_collectives.h"

namespace ringlet::core::runtime {

RuntimeError request_error(const Request& r, int rank, const std::string& why) {
  return RuntimeError(ErrorKind::kInvalidArgument, rank,
                      std::string(to_string(r.meta.kind)) + " '" + r.meta.name + "': " + why);
}

void validate_request(Request& r, int rank, const ProcessSetTable& sets,
                      GpuOperations gpu_operations) {
  Metadata& m = r.meta;
  auto bad = [&](const std::string& why) { return request_error(r, rank, why); };
  if (m.name.empty()) throw bad("a collective needs a non-empty name");
  if (!is_valid(m.dtype)) throw bad("invalid dtype " + std::to_string(static_cast<int>(m.dtype)));
  if (!is_valid(m.op)) throw bad("invalid reduce op " + std::to_string(static_cast<int>(m.op)));
  for (int64_t d : m.shape) {
    if (d < 0) throw bad("negative dimension in shape " + shape_string(m.shape));
  }
  if (r.device.id >= 0) {
    const std::string why = gpu::device_refusal(
        gpu_operations,
        m.kind == CollectiveKind::kAllreduce || m.kind == CollectiveKind::kReducescatter, m.dtype,
        r.device.id);
    if (!why.empty()) throw bad(why);
  }
  // A set's members size the split collectives and hold the root. The world
  // (most calls) needs no lookup: no lock and no copy per submission.
  const int world_size = sets.world_size();
  std::vector<int> members;
  if (m.process_set != 0) {
    std::optional<std::vector<int>> found = sets.ranks(m.process_set);
    if (!found) throw bad("there is no process set " + std::to_string(m.process_set));
    members = std::move(*found);
    if (!std::binary_search(members.begin(), members.end(), rank)) {
      throw bad("rank " + std::to_string(rank) + " is not a member of process set " +
                std::to_string(m.process_set) + " (ranks " + set_text(members) + ")");
    }
  }
  auto is_member = [&](int g) {
    return m.process_set == 0 ? g >= 0 && g < world_size
                              : std::binary_search(members.begin(), members.end(), g);
  };
  const int set_size = m.process_set == 0 ? world_size : static_cast<int>(members.size());
  const std::string in_set =
      m.process_set == 0 ? "" : " of process set " + std::to_string(m.process_set);
  m.device = r.device.id;
  const int64_t n = m.elements();
  switch (m.kind) {
    case CollectiveKind::kAllreduce:
      if (n > 0 && (!r.input || !r.output)) throw bad("null input or output buffer");
      break;
    case CollectiveKind::kBroadcast:
      if (!is_member(m.root)) {
        throw bad(
            "root " + std::to_string(m.root) + " is not a rank" + in_set + " (ranks " +
            (m.process_set == 0 ? "0.." + std::to_string(world_size - 1) : set_text(members)) +
            ")");
      }
      if (n > 0 && !r.output) throw bad("null buffer");
      break;
    case CollectiveKind::kAllgather:
    case CollectiveKind::kReducescatter:
    case CollectiveKind::kAlltoall:
      if (m.shape.empty()) throw bad("needs a tensor of at least one dimension");
      if (n > 0 && !r.input) throw bad("null input buffer");
      break;
    case CollectiveKind::kSend:
    case CollectiveKind::kRecv: {
      const bool sends = m.kind == CollectiveKind::kSend;
      const int other = sends ? m.peer : m.root;
      if (!is_member(other)) {
        throw bad(
            std::string(sends ? "destination " : "source ") + std::to_string(other) +
            " is not a rank" + in_set + " (ranks " +
            (m.process_set == 0 ? "0.." + std::to_string(world_size - 1) : set_text(members)) +
            ")");
      }
      if (other == rank) throw bad("rank " + std::to_string(rank) + " cannot send to itself");
      if ((sends ? m.root : m.peer) != rank) {
        throw bad(std::string(sends ? "the sender" : "the receiver") + " must be this rank, " +
                  std::to_string(rank));
      }
      if (r.device.id >= 0) throw bad("device tensors are not served by send and recv yet");
      if (n > 0 && (sends ? r.input == nullptr : r.output == nullptr)) throw bad("null buffer");
      break;
    }
  }
  if (m.kind == CollectiveKind::kAlltoall) {
    if (m.splits.empty()) {
      if (m.shape[0] % set_size != 0) {
        throw bad("first dimension " + std::to_string(m.shape[0]) + " does not split evenly over " +
                  std::to_string(set_size) + " ranks" + in_set + "; give splits");
      }
      m.splits.assign(set_size, m.shape[0] / set_size);
    }
    if (static_cast<int>(m.splits.size()) != set_size) {
      throw bad("splits has " + std::to_string(m.splits.size()) + " entries for " +
                std::to_string(set_size) + " ranks" + in_set);
    }
    int64_t sum = 0;
    for (int64_t s : m.splits) {
      if (s < 0) throw bad("negative split in " + shape_string(m.splits));
      sum += s;
    }
    if (sum != m.shape[0]) {
      throw bad("splits " + shape_string(m.splits) + " add up to " + std::to_string(sum) +
                ", not the first dimension " + std::to_string(m.shape[0]));
    }
  }
}

}  // namespace ringlet::core::runtime
