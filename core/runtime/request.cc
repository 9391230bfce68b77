#include "core/runtime/request.h"

#include <algorithm>
#include <cstring>

namespace ringlet::core::runtime {

std::string_view to_string(CollectiveKind k) {
  switch (k) {
    case CollectiveKind::kAllreduce:
      return "allreduce";
    case CollectiveKind::kAllgather:
      return "allgather";
    case CollectiveKind::kBroadcast:
      return "broadcast";
    case CollectiveKind::kReducescatter:
      return "reducescatter";
    case CollectiveKind::kAlltoall:
      return "alltoall";
    case CollectiveKind::kSend:
      return "send";
    case CollectiveKind::kRecv:
      return "recv";
  }
  return "unknown";
}

std::string_view to_upper_string(CollectiveKind k) {
  switch (k) {
    case CollectiveKind::kAllreduce:
      return "ALLREDUCE";
    case CollectiveKind::kAllgather:
      return "ALLGATHER";
    case CollectiveKind::kBroadcast:
      return "BROADCAST";
    case CollectiveKind::kReducescatter:
      return "REDUCESCATTER";
    case CollectiveKind::kAlltoall:
      return "ALLTOALL";
    case CollectiveKind::kSend:
      return "SEND";
    case CollectiveKind::kRecv:
      return "RECV";
  }
  return "UNKNOWN";
}

int64_t Metadata::elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

int64_t Metadata::row_elements() const {
  int64_t n = 1;
  for (size_t i = 1; i < shape.size(); ++i) n *= shape[i];
  return n;
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

namespace {

// What a peer sent cannot be read: a protocol failure, which the caller
// attributes to the rank that sent it.
[[noreturn]] void truncated() {
  throw common::Failure(common::FailureKind::kTransport, "a truncated negotiation message");
}

template <class T>
void put(std::string& out, T v) {
  char buf[sizeof(T)];
  std::memcpy(buf, &v, sizeof(T));
  out.append(buf, sizeof(T));
}

template <class T>
T get(std::string_view in, size_t& at) {
  if (at + sizeof(T) > in.size()) truncated();
  T v;
  std::memcpy(&v, in.data() + at, sizeof(T));
  at += sizeof(T);
  return v;
}

void put_vec(std::string& out, const std::vector<int64_t>& v) {
  put<uint32_t>(out, static_cast<uint32_t>(v.size()));
  for (int64_t x : v) put(out, x);
}

std::vector<int64_t> get_vec(std::string_view in, size_t& at) {
  const uint32_t n = get<uint32_t>(in, at);
  if (static_cast<size_t>(n) * 8 > in.size() - at) truncated();
  std::vector<int64_t> v(n);
  for (auto& x : v) x = get<int64_t>(in, at);
  return v;
}

}  // namespace

void serialize(const Metadata& m, std::string& out) {
  put<uint32_t>(out, static_cast<uint32_t>(m.name.size()));
  out.append(m.name);
  put<uint8_t>(out, static_cast<uint8_t>(m.kind));
  put<int32_t>(out, static_cast<int32_t>(m.dtype));
  put<int32_t>(out, static_cast<int32_t>(m.op));
  put<int32_t>(out, m.root);
  put<int32_t>(out, m.peer);
  put<double>(out, m.prescale);
  put<double>(out, m.postscale);
  put<int32_t>(out, m.device);
  put<int32_t>(out, m.process_set);
  put_vec(out, m.shape);
  put_vec(out, m.splits);
  put<uint32_t>(out, static_cast<uint32_t>(m.group.size()));
  out.append(m.group);
  put<int32_t>(out, m.group_size);
}

Metadata deserialize(std::string_view in, size_t& at) {
  Metadata m;
  const uint32_t len = get<uint32_t>(in, at);
  if (len > in.size() - at) truncated();
  m.name.assign(in.data() + at, len);
  at += len;
  m.kind = static_cast<CollectiveKind>(get<uint8_t>(in, at));
  m.dtype = static_cast<DataType>(get<int32_t>(in, at));
  m.op = static_cast<ReduceOp>(get<int32_t>(in, at));
  m.root = get<int32_t>(in, at);
  m.peer = get<int32_t>(in, at);
  m.prescale = get<double>(in, at);
  m.postscale = get<double>(in, at);
  m.device = get<int32_t>(in, at);
  m.process_set = get<int32_t>(in, at);
  m.shape = get_vec(in, at);
  m.splits = get_vec(in, at);
  const uint32_t glen = get<uint32_t>(in, at);
  if (glen > in.size() - at) truncated();
  m.group.assign(in.data() + at, glen);
  at += glen;
  m.group_size = get<int32_t>(in, at);
  return m;
}

}  // namespace ringlet::core::runtime
