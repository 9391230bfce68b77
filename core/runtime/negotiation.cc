#include "core/runtime/negotiation.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstring>
#include <sstream>

namespace ringlet::core::runtime {

std::string encode(const RankMessage& m) {
  std::string out;
  out.push_back(static_cast<char>((m.shutdown ? 1 : 0) | (m.join ? 2 : 0)));
  const uint32_t n = static_cast<uint32_t>(m.ready.size());
  out.append(reinterpret_cast<const char*>(&n), sizeof n);
  for (const Metadata& md : m.ready) serialize(md, out);
  const uint32_t a = static_cast<uint32_t>(m.abort.size());
  out.append(reinterpret_cast<const char*>(&a), sizeof a);
  out.append(m.abort);
  const uint32_t b = static_cast<uint32_t>(m.cached_bits.size());
  out.append(reinterpret_cast<const char*>(&b), sizeof b);
  out.append(reinterpret_cast<const char*>(m.cached_bits.data()), b);
  const uint32_t v = static_cast<uint32_t>(m.invalidate.size());
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
  out.append(reinterpret_cast<const char*>(m.invalidate.data()), v * sizeof(uint32_t));
  const uint32_t c = static_cast<uint32_t>(m.set_changes.size());
  out.append(reinterpret_cast<const char*>(&c), sizeof c);
  for (const SetChange& change : m.set_changes) {
    out.append(reinterpret_cast<const char*>(&change.remove_id), sizeof change.remove_id);
    const uint32_t k = static_cast<uint32_t>(change.ranks.size());
    out.append(reinterpret_cast<const char*>(&k), sizeof k);
    out.append(reinterpret_cast<const char*>(change.ranks.data()), k * sizeof(int32_t));
  }
  const uint32_t f = static_cast<uint32_t>(m.stalled.size());
  out.append(reinterpret_cast<const char*>(&f), sizeof f);
  for (const StalledName& s : m.stalled) {
    for (const std::string* text : {&s.name, &s.error}) {
      const uint32_t k = static_cast<uint32_t>(text->size());
      out.append(reinterpret_cast<const char*>(&k), sizeof k);
      out.append(*text);
    }
  }
  return out;
}

namespace {

// What a rank checks of its own request at submission, checked again of every
// other rank's as it arrives: an enum out of range, a negative dimension, a
// size beyond int64 or splits that do not add up would otherwise travel into
// the collective's arithmetic.
void check_arrived(const Metadata& m) {
  auto bad = [&](const std::string& what) {
    throw common::Failure(common::FailureKind::kTransport,
                          "a malformed negotiation message: tensor '" + m.name + "' " + what);
  };
  if (static_cast<uint8_t>(m.kind) > static_cast<uint8_t>(CollectiveKind::kRecv)) {
    bad("has collective kind " + std::to_string(static_cast<int>(m.kind)));
  }
  if (!is_valid(m.dtype)) bad("has data type " + std::to_string(static_cast<int>(m.dtype)));
  if (!is_valid(m.op)) bad("has reduction op " + std::to_string(static_cast<int>(m.op)));
  // Every partial product of the shape (elements(), row_elements()) fits
  // when the product of the non-zero dimensions, in bytes, does.
  int64_t bytes = static_cast<int64_t>(dtype_size(m.dtype));
  for (int64_t d : m.shape) {
    if (d < 0 || (d > 0 && bytes > INT64_MAX / d)) bad("has shape " + shape_string(m.shape));
    if (d > 0) bytes *= d;
  }
  if (m.kind != CollectiveKind::kAllreduce && m.kind != CollectiveKind::kBroadcast &&
      !is_point_to_point(m.kind) && m.shape.empty()) {
    bad("is a scalar, which " + std::string(to_string(m.kind)) + " cannot take");
  }
  if (m.kind == CollectiveKind::kAlltoall) {
    int64_t sum = 0;
    for (int64_t s : m.splits) {
      if (s < 0 || s > m.shape[0] - sum) bad("has splits " + shape_string(m.splits));
      sum += s;
    }
    if (sum != m.shape[0]) bad("has splits " + shape_string(m.splits));
  }
  if (m.group_size < 0) bad("has group size " + std::to_string(m.group_size));
}

// `what`: the message as a noun phrase ("a truncated negotiation message"),
// which decode() prefixes with the rank that sent it.
[[noreturn]] void malformed(const char* what) {
  throw common::Failure(common::FailureKind::kTransport, what);
}

RankMessage decode_fields(std::string_view bytes) {
  RankMessage m;
  if (bytes.empty()) return m;
  if (bytes.size() < 5) malformed("a truncated negotiation message");
  m.shutdown = (bytes[0] & 1) != 0;
  m.join = (bytes[0] & 2) != 0;
  uint32_t n;
  std::memcpy(&n, bytes.data() + 1, sizeof n);
  size_t at = 5;
  for (uint32_t i = 0; i < n; ++i) {
    m.ready.push_back(deserialize(bytes, at));
    check_arrived(m.ready.back());
  }
  uint32_t a;
  if (at + sizeof a > bytes.size()) malformed("a truncated negotiation message");
  std::memcpy(&a, bytes.data() + at, sizeof a);
  at += sizeof a;
  if (a > bytes.size() - at) malformed("a truncated negotiation message");
  m.abort.assign(bytes.data() + at, a);
  at += a;
  auto read_u32 = [&] {
    uint32_t x;
    if (at + sizeof x > bytes.size()) malformed("a truncated negotiation message");
    std::memcpy(&x, bytes.data() + at, sizeof x);
    at += sizeof x;
    return x;
  };
  const uint32_t b = read_u32();
  if (b > bytes.size() - at) malformed("a truncated negotiation message");
  m.cached_bits.assign(bytes.data() + at, bytes.data() + at + b);
  at += b;
  const uint32_t v = read_u32();
  if (static_cast<size_t>(v) * sizeof(uint32_t) > bytes.size() - at) {
    malformed("a truncated negotiation message");
  }
  m.invalidate.resize(v);
  if (v > 0) std::memcpy(m.invalidate.data(), bytes.data() + at, v * sizeof(uint32_t));
  at += v * sizeof(uint32_t);
  const uint32_t c = read_u32();
  for (uint32_t i = 0; i < c; ++i) {
    SetChange change;
    change.remove_id = static_cast<int32_t>(read_u32());
    const uint32_t k = read_u32();
    if (static_cast<size_t>(k) * sizeof(int32_t) > bytes.size() - at) {
      malformed("a truncated negotiation message");
    }
    change.ranks.resize(k);
    if (k > 0) std::memcpy(change.ranks.data(), bytes.data() + at, k * sizeof(int32_t));
    at += k * sizeof(int32_t);
    m.set_changes.push_back(std::move(change));
  }
  const uint32_t f = read_u32();
  for (uint32_t i = 0; i < f; ++i) {
    StalledName s;
    for (std::string* text : {&s.name, &s.error}) {
      const uint32_t k = read_u32();
      if (k > bytes.size() - at) malformed("a truncated negotiation message");
      text->assign(bytes.data() + at, k);
      at += k;
    }
    m.stalled.push_back(std::move(s));
  }
  if (at != bytes.size()) malformed("a negotiation message with trailing bytes");
  return m;
}

}  // namespace

RankMessage decode(std::string_view bytes, int from) {
  try {
    return decode_fields(bytes);
  } catch (common::Failure& f) {
    f.with_peer(from);
    if (from >= 0) f.set_cause("rank " + std::to_string(from) + " sent " + f.cause());
    throw;
  }
}

namespace {

std::string scale_text(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

std::string device_text(int32_t d) { return d < 0 ? "cpu" : "cuda:" + std::to_string(d); }

std::string splits_text(const Metadata& m) { return shape_string(m.splits); }

std::vector<int64_t> tail(const std::vector<int64_t>& shape) {
  return shape.empty() ? shape : std::vector<int64_t>(shape.begin() + 1, shape.end());
}

std::string allgather_shape_text(const std::vector<int64_t>& shape) {
  // The first dimension may differ: show it as "?" only in the message's sense
  // of "all but the first dimension" — keep the full shape for the user.
  return shape_string(shape);
}

}  // namespace

int Negotiator::index_of(int global) const {
  if (global_ranks_.empty()) return global >= 0 && global < size_ ? global : -1;
  const auto it = std::find(global_ranks_.begin(), global_ranks_.end(), global);
  return it == global_ranks_.end() ? -1 : static_cast<int>(it - global_ranks_.begin());
}

std::pair<int, int> Negotiator::parties(const Entry& e) const {
  for (const auto& m : e.by_rank) {
    if (m) return {index_of(m->root), index_of(m->peer)};
  }
  return {-1, -1};
}

std::optional<std::string> Negotiator::validate_transfer(const Entry& e) const {
  const auto [from, to] = parties(e);
  int first = 0;
  while (!e.by_rank[first]) ++first;
  const Metadata& a = *e.by_rank[first];
  const std::string what = "Mismatched send and recv '" + a.name + "': ";
  if (from < 0 || to < 0 || from == to) {
    return what + "rank " + rank_text(first) + " names sender " + std::to_string(a.root) +
           " and receiver " + std::to_string(a.peer);
  }
  for (int r = 0; r < size_; ++r) {
    if (!e.by_rank[r]) continue;
    const Metadata& b = *e.by_rank[r];
    const CollectiveKind expected = r == from ? CollectiveKind::kSend : CollectiveKind::kRecv;
    if ((r != from && r != to) || b.kind != expected) {
      return what + "rank " + rank_text(r) + " submitted " + std::string(to_string(b.kind)) +
             " of a transfer from rank " + rank_text(from) + " to rank " + rank_text(to);
    }
    if (b.root != a.root || b.peer != a.peer) {
      return what + "rank " + rank_text(first) + " sent from " + std::to_string(a.root) + " to " +
             std::to_string(a.peer) + ", rank " + rank_text(r) + " from " + std::to_string(b.root) +
             " to " + std::to_string(b.peer);
    }
  }
  const Metadata& s = *e.by_rank[from];
  const Metadata& t = *e.by_rank[to];
  const std::string sent = "rank " + rank_text(from) + " sends " + std::string(to_string(s.dtype)) +
                           " " + shape_string(s.shape) + ", rank " + rank_text(to) +
                           " receives into " + std::string(to_string(t.dtype)) + " " +
                           shape_string(t.shape);
  if (s.dtype != t.dtype)
    return "Mismatched send and recv data types for '" + a.name + "': " + sent;
  if (s.elements() != t.elements()) {
    return "Mismatched send and recv sizes for '" + a.name + "': " + sent;
  }
  if ((s.device >= 0) != (t.device >= 0)) {
    return "Mismatched send and recv devices (host and GPU memory) for '" + a.name +
           "': " + device_text(s.device) + " and " + device_text(t.device);
  }
  return std::nullopt;
}

std::optional<std::string> Negotiator::validate(const Entry& e) const {
  int ref = 0;
  while (!e.by_rank[ref]) ++ref;  // the lowest rank that submitted (others joined)
  const Metadata& a = *e.by_rank[ref];
  const std::string kind(to_string(a.kind));
  if (is_point_to_point(a.kind)) return validate_transfer(e);
  if (a.kind != CollectiveKind::kAllreduce) {
    for (int r = 0; r < size_; ++r) {
      if (!e.by_rank[r]) {
        return "Cannot run " + kind + " '" + a.name + "': rank " + rank_text(r) +
               " has joined, and only allreduce runs with joined ranks";
      }
    }
  }
  const std::string who = " for '" + a.name + "': rank " + rank_text(ref) + " sent ";
  for (int r = ref + 1; r < size_; ++r) {
    if (!e.by_rank[r]) continue;
    const Metadata& b = *e.by_rank[r];
    const std::string other = ", rank " + rank_text(r) + " sent ";
    if (b.kind != a.kind) {
      return "Mismatched collective operations" + who + kind + other +
             std::string(to_string(b.kind));
    }
    if (b.process_set != a.process_set) {
      return "Mismatched " + kind + " process sets" + who + std::to_string(a.process_set) + other +
             std::to_string(b.process_set);
    }
    if (b.dtype != a.dtype) {
      return "Mismatched " + kind + " data types" + who + std::string(to_string(a.dtype)) + other +
             std::string(to_string(b.dtype));
    }
    // Host or device must agree; the GPU is each rank's own.
    if ((b.device >= 0) != (a.device >= 0)) {
      return "Mismatched " + kind + " devices (host and GPU memory for one collective)" + who +
             device_text(a.device) + other + device_text(b.device);
    }
    switch (a.kind) {
      case CollectiveKind::kAllreduce:
      case CollectiveKind::kReducescatter:
      case CollectiveKind::kBroadcast:
        if (b.shape != a.shape) {
          return "Mismatched " + kind + " tensor shapes" + who + shape_string(a.shape) + other +
                 shape_string(b.shape);
        }
        break;
      case CollectiveKind::kAllgather:
      case CollectiveKind::kAlltoall:
        if (b.shape.size() != a.shape.size() || tail(b.shape) != tail(a.shape)) {
          return "Mismatched " + kind + " tensor shapes (all but the first dimension must agree)" +
                 who + allgather_shape_text(a.shape) + other + allgather_shape_text(b.shape);
        }
        break;
      case CollectiveKind::kSend:
      case CollectiveKind::kRecv:
        break;  // validate_transfer()
    }
    if (a.kind == CollectiveKind::kAllreduce || a.kind == CollectiveKind::kReducescatter) {
      if (b.op != a.op) {
        return "Mismatched " + kind + " reduction ops" + who + std::string(to_string(a.op)) +
               other + std::string(to_string(b.op));
      }
      if (b.prescale != a.prescale) {
        return "Mismatched " + kind + " prescale factors" + who + scale_text(a.prescale) + other +
               scale_text(b.prescale);
      }
      if (b.postscale != a.postscale) {
        return "Mismatched " + kind + " postscale factors" + who + scale_text(a.postscale) + other +
               scale_text(b.postscale);
      }
    }
    if (a.kind == CollectiveKind::kBroadcast && b.root != a.root) {
      return "Mismatched " + kind + " root ranks" + who + std::to_string(a.root) + other +
             std::to_string(b.root);
    }
    if (b.group != a.group || b.group_size != a.group_size) {
      return "Mismatched " + kind + " groups" + who + "'" + a.group + "' of " +
             std::to_string(a.group_size) + other + "'" + b.group + "' of " +
             std::to_string(b.group_size);
    }
    if (a.kind == CollectiveKind::kAlltoall && b.splits.size() != a.splits.size()) {
      return "Mismatched " + kind + " splits" + who + splits_text(a) + other + splits_text(b);
    }
  }
  return std::nullopt;
}

std::vector<Negotiator::Done> Negotiator::record_arrivals(const std::vector<RankMessage>& messages,
                                                          std::vector<Response>& errors) {
  std::vector<Done> done;
  for (int r = 0; r < size_; ++r) {
    for (const Metadata& m : messages[r].ready) {
      Entry& e = table_[m.name];
      if (e.by_rank.empty()) {
        e.by_rank.resize(size_);
        e.arrival = arrival_sequence_++;
      }
      if (e.by_rank[r]) {
        // Refused locally at enqueue; seen here only from a corrupt peer.
        Response err;
        err.kind = m.kind;
        err.names = {m.name};
        err.error = "rank " + rank_text(r) + " submitted '" + m.name + "' twice";
        errors.push_back(std::move(err));
        continue;
      }
      e.by_rank[r] = m;
      if (r == 0) e.order = rank0_sequence_++;
      // A transfer is complete once its two ranks reported it.
      if (++e.count == (is_point_to_point(first_reported(e).kind) ? 2 : size_)) {
        done.push_back({e.order, e.arrival, m.name});
      }
    }
  }
  return done;
}

void Negotiator::record_joins(const std::vector<RankMessage>& messages) {
  for (int r = 0; r < size_; ++r) {
    if (messages[r].join && !joined_[r]) {
      joined_[r] = true;
      ++joined_count_;
      last_joined_ = r;
    }
  }
}

std::vector<Negotiator::Done> Negotiator::complete_counting_joined() const {
  std::vector<Done> done;
  for (const auto& [name, e] : table_) {
    bool complete = true;
    if (is_point_to_point(first_reported(e).kind)) {
      complete = e.count >= 2;  // a transfer waits for its two ranks, joined or not
    } else {
      for (int r = 0; r < size_ && complete; ++r) complete = e.by_rank[r] || joined_[r];
    }
    if (complete) done.push_back({e.order, e.arrival, name});
  }
  return done;
}

Response Negotiator::single_response(const std::string& name, const Entry& e) const {
  Response resp;
  int ref = 0;
  while (!e.by_rank[ref]) ++ref;
  const Metadata& m0 = *e.by_rank[ref];
  resp.kind = m0.kind;
  resp.names = {name};
  if (auto err = validate(e)) {
    resp.error = *err;
  } else if (is_point_to_point(m0.kind)) {
    // The sender's metadata; the receiver writes into its own request's output.
    const Metadata& sent = *e.by_rank[parties(e).first];
    resp.kind = CollectiveKind::kSend;
    resp.meta = {sent};
    resp.bytes = sent.elements() * static_cast<int64_t>(dtype_size(sent.dtype));
  } else {
    resp.meta = {m0};
    if (m0.kind == CollectiveKind::kAllgather || m0.kind == CollectiveKind::kAlltoall) {
      std::vector<std::vector<int64_t>> per(size_);
      for (int r = 0; r < size_; ++r) {
        per[r] =
            m0.kind == CollectiveKind::kAllgather
                ? std::vector<int64_t>{e.by_rank[r]->shape.empty() ? 1 : e.by_rank[r]->shape[0]}
                : e.by_rank[r]->splits;
      }
      resp.per_rank = {std::move(per)};
    }
    resp.bytes = m0.elements() * static_cast<int64_t>(dtype_size(m0.dtype));
    if (m0.device >= 0) {
      resp.devices.resize(size_, -1);
      for (int r = 0; r < size_; ++r) {
        if (e.by_rank[r]) resp.devices[r] = e.by_rank[r]->device;
      }
    }
  }
  return resp;
}

std::optional<Response> Negotiator::add_to_group(const std::string& group, int32_t group_size,
                                                 int64_t order, Response member) {
  Group& g = groups_[group];
  if (g.members.empty()) g.order = order;
  g.members.push_back(std::move(member));
  if (static_cast<int32_t>(g.members.size()) < group_size) return std::nullopt;
  // Complete: one response for the whole group, or one error for all.
  Response all;
  all.kind = CollectiveKind::kAllreduce;
  for (const Response& r : g.members) {
    if (!r.error.empty() && all.error.empty()) all.error = r.error;
  }
  std::optional<Metadata> k;  // the first valid member's (a copy: members are moved out)
  for (Response& r : g.members) {
    all.names.push_back(r.names[0]);
    if (!r.error.empty()) continue;
    const Metadata& m = r.meta[0];
    if (!k) {
      k = m;
      all.devices = r.devices;
    }
    if (all.error.empty() &&
        (m.kind != CollectiveKind::kAllreduce || m.dtype != k->dtype || m.op != k->op ||
         r.devices != all.devices || m.prescale != k->prescale || m.postscale != k->postscale)) {
      all.error = "Grouped allreduce '" + group + "' mixes tensors that cannot be fused ('" +
                  k->name + "' and '" + m.name + "' differ in dtype, op, device or scale factors)";
    }
    // A group's members each fit int64; their total saturates.
    all.bytes = r.bytes > INT64_MAX - all.bytes ? INT64_MAX : all.bytes + r.bytes;
    all.meta.push_back(std::move(r.meta[0]));
  }
  if (!all.error.empty()) {
    all.meta.clear();
    all.devices.clear();
    std::string members;
    for (const auto& n : all.names) members += (members.empty() ? "'" : ", '") + n + "'";
    all.error += " (group '" + group + "': " + members + ")";
  }
  groups_.erase(group);
  all.group = true;
  return all;
}

// Greedy, in order, looking ahead past other kinds.
void Negotiator::fuse_allreduces(std::vector<Response> singles, int64_t fusion_threshold,
                                 std::vector<Response>& out) {
  std::vector<bool> used(singles.size(), false);
  for (size_t i = 0; i < singles.size(); ++i) {
    if (used[i]) continue;
    used[i] = true;
    Response resp = std::move(singles[i]);
    if (resp.error.empty() && resp.kind == CollectiveKind::kAllreduce && fusion_threshold > 0 &&
        !resp.group) {
      const Metadata k = resp.meta[0];  // a copy: resp.meta grows below
      for (size_t j = i + 1; j < singles.size(); ++j) {
        if (used[j] || !singles[j].error.empty() || singles[j].kind != CollectiveKind::kAllreduce ||
            singles[j].group) {
          continue;
        }
        const Metadata& m = singles[j].meta[0];
        // Equal devices also mean host with host (both empty).
        if (m.dtype != k.dtype || m.op != k.op || singles[j].devices != resp.devices ||
            m.prescale != k.prescale || m.postscale != k.postscale ||
            m.process_set != k.process_set) {
          continue;
        }
        // Each size fits int64 (check_arrived), their sum may not: compared
        // as what is left under the threshold.
        if (singles[j].bytes > fusion_threshold - resp.bytes) continue;
        used[j] = true;
        resp.names.push_back(std::move(singles[j].names[0]));
        resp.meta.push_back(std::move(singles[j].meta[0]));
        resp.bytes += singles[j].bytes;
      }
    }
    out.push_back(std::move(resp));
  }
}

std::vector<Response> Negotiator::add_cycle(const std::vector<RankMessage>& messages,
                                            int64_t fusion_threshold,
                                            std::vector<Response> cached) {
  std::vector<Response> out;
  std::vector<Done> done = record_arrivals(messages, out);
  record_joins(messages);
  // Joined ranks count as submitted: anything the others all submitted runs.
  if (joined_count_ > 0) done = complete_counting_joined();
  // Rank 0's submission order; names rank 0 never submitted (it joined) after.
  std::sort(done.begin(), done.end(), [](const Done& a, const Done& b) {
    const int64_t ka = a.order < 0 ? INT64_MAX : a.order, kb = b.order < 0 ? INT64_MAX : b.order;
    return ka != kb ? ka < kb : a.arrival < b.arrival;
  });

  // Validate and turn complete entries into single responses, in order; a
  // group's members wait for one another and then become one response.
  std::vector<Response> singles = std::move(cached);
  for (const Done& d : done) {
    auto it = table_.find(d.name);
    const Entry e = std::move(it->second);
    table_.erase(it);
    Response resp = single_response(d.name, e);
    const Metadata& m0 = first_reported(e);
    if (m0.group.empty() || m0.group_size <= 1) {
      singles.push_back(std::move(resp));
    } else if (auto group = add_to_group(m0.group, m0.group_size, d.order, std::move(resp))) {
      singles.push_back(std::move(*group));
    }
  }
  fuse_allreduces(std::move(singles), fusion_threshold, out);
  if (joined_count_ == size_) {
    join_result_ = last_joined_;
    std::fill(joined_.begin(), joined_.end(), false);
    joined_count_ = 0;
  }
  return out;
}

std::optional<int> Negotiator::take_join_result() {
  std::optional<int> r;
  r.swap(join_result_);
  return r;
}

std::map<std::string, std::vector<int>> Negotiator::waiting() const {
  std::map<std::string, std::vector<int>> w;
  for (const auto& [name, e] : table_) {
    std::vector<int> missing;
    const bool transfer = is_point_to_point(first_reported(e).kind);
    const auto [from, to] = parties(e);
    for (int r = 0; r < size_; ++r) {
      if (transfer ? (r != from && r != to) : joined_[r]) continue;
      if (!e.by_rank[r]) missing.push_back(global_ranks_.empty() ? r : global_ranks_[r]);
    }
    if (!missing.empty()) w[name] = std::move(missing);
  }
  return w;
}

std::vector<std::string> Negotiator::drop(const std::string& name) {
  std::vector<std::string> dropped;
  std::string group;
  if (auto it = table_.find(name); it != table_.end()) {
    for (const auto& m : it->second.by_rank) {
      if (m && !m->group.empty()) group = m->group;
    }
    table_.erase(it);
    dropped.push_back(name);
  }
  if (group.empty()) {
    for (const auto& [g, members] : groups_) {
      for (const Response& r : members.members) {
        if (r.names[0] == name) group = g;
      }
    }
  }
  if (group.empty()) return dropped;
  // A group runs whole or not at all: its other members go too.
  std::erase_if(table_, [&](const auto& kv) {
    for (const auto& m : kv.second.by_rank) {
      if (m && m->group == group) {
        dropped.push_back(kv.first);
        return true;
      }
    }
    return false;
  });
  if (auto g = groups_.find(group); g != groups_.end()) {
    for (const Response& r : g->second.members) {
      if (r.names[0] != name) dropped.push_back(r.names[0]);
    }
    groups_.erase(g);
  }
  return dropped;
}

std::vector<int> Negotiator::reported_by(const std::string& name) const {
  std::vector<int> ranks;
  auto it = table_.find(name);
  if (it == table_.end()) return ranks;
  for (int r = 0; r < size_; ++r) {
    if (it->second.by_rank[r]) ranks.push_back(r);
  }
  return ranks;
}

}  // namespace ringlet::core::runtime
