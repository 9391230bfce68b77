// What a caller submits to the runtime (a Request) and what the ranks exchange
// about it while they negotiate (its Metadata). A request is identified by its
// name: the same name on every rank is the same collective.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ringlet/common/failure.h"
#include "ringlet/types.h"

namespace ringlet::core::gpu {
class Event;  // core/gpu/cuda_resources.h
}

namespace ringlet::core::runtime {

enum class CollectiveKind : uint8_t {
  kAllreduce,
  kAllgather,
  kBroadcast,
  kReducescatter,
  kAlltoall,
  // Point to point: one rank's send meets one rank's recv of the same name,
  // negotiated in the set as a collective of those two ranks alone.
  kSend,
  kRecv
};

inline bool is_point_to_point(CollectiveKind k) {
  return k == CollectiveKind::kSend || k == CollectiveKind::kRecv;
}

// "allreduce", ...; upper case ("ALLREDUCE") for timeline and NVTX names.
std::string_view to_string(CollectiveKind k);
std::string_view to_upper_string(CollectiveKind k);

// Where the tensor lives: the host, or a CUDA device with the stream that
// produced the tensor.
struct Device {
  int32_t id = -1;              // -1: host memory; >= 0: CUDA device ordinal
  void* cuda_stream = nullptr;  // cudaStream_t the producer used; not negotiated
  bool operator==(const Device& o) const { return id == o.id; }
};

// The part of a request that every rank must agree on (except where a
// collective allows a difference: allgather's first dimension, alltoall's
// splits). This is what is serialized during negotiation.
struct Metadata {
  std::string name;
  CollectiveKind kind = CollectiveKind::kAllreduce;
  DataType dtype = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;  // allreduce, reducescatter
  int32_t root = 0;              // broadcast; send/recv: the sending rank
  int32_t peer = -1;             // send/recv: the receiving rank (global, as root)
  double prescale = 1.0;         // allreduce, reducescatter
  double postscale = 1.0;
  int32_t device = -1;
  int32_t process_set = 0;  // 0 = the world (the only set served today)
  std::vector<int64_t> shape;
  std::vector<int64_t> splits;  // alltoall: rows of dim 0 sent to each rank; empty = even
  // Grouped allreduce: members of one group run together in one fused
  // response, whatever the fusion threshold. Empty: not grouped.
  std::string group;
  int32_t group_size = 0;

  int64_t elements() const;      // product of shape (1 for a scalar)
  int64_t row_elements() const;  // product of shape[1:]
};

// A submitted collective. `input` is read, `output` written by the runtime:
// allreduce may run in place (input == output); broadcast works in place on
// `output` (input is ignored); allgather, alltoall and reducescatter write a
// buffer the runtime allocates, because its size is known only after
// negotiation, and hand it back through the handle.
struct Request {
  Metadata meta;
  Device device;
  const void* input = nullptr;
  void* output = nullptr;
  // A device tensor's point on its producer's stream, recorded at submission.
  std::shared_ptr<gpu::Event> ready;
};

std::string shape_string(const std::vector<int64_t>& shape);  // "[4, 5]"
using common::names_text;

// Negotiation wire format: a list of metadata, little-endian, length-prefixed.
void serialize(const Metadata& m, std::string& out);
// Reads one record at `at` and advances it; a truncated record is a
// transport common::Failure (a peer broke the protocol).
Metadata deserialize(std::string_view in, size_t& at);

}  // namespace ringlet::core::runtime
