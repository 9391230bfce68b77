// Records the seed corpora of the fuzz targets from a real job: run as two
// ranks over TCP,
//
//   ringletrun -np 2 fuzz_record_corpus tests/fuzz/corpus
//
// (RINGLET_TRANSPORT=tcp is set here), it runs a workload that touches every
// kind of negotiation message (each collective, a transfer, the response cache, a
// grouped allreduce, a mismatch, a message too long for its slot, a process
// set, join) and writes what each rank received, as the fuzz targets read it:
//   store_frames/          one connection's bytes: a client's requests as the
//                          store read them, the store's replies as a client did;
//   tcp_frames/            runs of data-link frames (headers and payloads);
//   shm_slots/             the same runs' sizes, as a shm sender's slot headers;
//   tcp_handshake/         the data link's handshake frames (handshake.h);
//   negotiation_messages/  runs of the messages other ranks sent in negotiation.
// Every byte is caught where it enters the process: this program defines
// recv, recvmsg and close, which the library's calls reach before libc's.
#include <dlfcn.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "ringlet/ringlet.h"

namespace {

// What one socket brought in: through recv() (the store's traffic, the data
// link's handshake) and through recvmsg() (the data link's frames).
struct Stream {
  std::vector<uint8_t> by_recv;
  std::vector<uint8_t> by_recvmsg;
};

std::mutex g_mu;
std::map<int, Stream> g_open;  // by file descriptor
std::vector<Stream> g_closed;  // in the order they closed
bool g_recording = true;

template <class F>
F real(const char* name) {
  static std::mutex mu;
  std::lock_guard lock(mu);
  return reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
}

void note(int fd, const void* data, size_t n, bool by_recvmsg) {
  std::lock_guard lock(g_mu);
  if (!g_recording) return;
  auto& s = g_open[fd];
  auto& to = by_recvmsg ? s.by_recvmsg : s.by_recv;
  const auto* p = static_cast<const uint8_t*>(data);
  to.insert(to.end(), p, p + n);
}

}  // namespace

extern "C" ssize_t recv(int fd, void* buf, size_t len, int flags) {
  static auto f = real<ssize_t (*)(int, void*, size_t, int)>("recv");
  const ssize_t n = f(fd, buf, len, flags);
  if (n > 0) note(fd, buf, static_cast<size_t>(n), false);
  return n;
}

extern "C" ssize_t recvmsg(int fd, msghdr* msg, int flags) {
  static auto f = real<ssize_t (*)(int, msghdr*, int)>("recvmsg");
  const ssize_t n = f(fd, msg, flags);
  size_t left = n > 0 ? static_cast<size_t>(n) : 0;
  for (size_t i = 0; i < msg->msg_iovlen && left > 0; ++i) {
    const size_t part = std::min(left, msg->msg_iov[i].iov_len);
    note(fd, msg->msg_iov[i].iov_base, part, true);
    left -= part;
  }
  return n;
}

extern "C" int close(int fd) {
  static auto f = real<int (*)(int)>("close");
  {
    std::lock_guard lock(g_mu);
    if (auto it = g_open.find(fd); it != g_open.end()) {
      g_closed.push_back(std::move(it->second));
      g_open.erase(it);
    }
  }
  return f(fd);
}

namespace {

namespace fs = std::filesystem;
using ringlet::DataType;
using ringlet::ReduceOp;
using ringlet::Tensor;

// The data link's frame header (tcp_pair.h), as a receiver reads it.
struct Header {
  uint64_t kind, bytes, aux;
};
constexpr uint64_t kData = 0x52474c44;
// The negotiation's per-rank slot (runtime.cc): u32 length, then the message.
constexpr size_t kSlotBytes = 1024;
constexpr size_t kSlotPayload = kSlotBytes - 4;
constexpr size_t kMaxSeedFrame = 4096;
constexpr size_t kHandshakeFrame = 112;
// Seeds stay small: a few KiB, a few dozen per target.
constexpr size_t kMaxSeedBytes = 4096;

struct Writer {
  fs::path root;
  int rank;
  std::set<std::vector<uint8_t>> seen;
  std::map<std::string, int> count;

  void write(const std::string& target, const std::vector<uint8_t>& bytes) {
    if (!seen.insert(bytes).second) return;
    const int n = count[target]++;
    fs::create_directories(root / target);
    std::ofstream(root / target / ("rank" + std::to_string(rank) + "-" + std::to_string(n)),
                  std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()),
               static_cast<std::streamsize>(bytes.size()));
  }
};

struct Frame {
  std::vector<uint8_t> wire;  // header and payload, as they arrived
  std::vector<uint8_t> payload;
};

std::vector<Frame> frames_of(const std::vector<uint8_t>& s) {
  std::vector<Frame> out;
  for (size_t at = 0; s.size() - at >= sizeof(Header);) {
    Header h;
    std::memcpy(&h, s.data() + at, sizeof h);
    const size_t payload = h.kind == kData ? h.bytes : 0;
    if (s.size() - at - sizeof h < payload) break;
    Frame f;
    f.wire.assign(s.begin() + at, s.begin() + at + sizeof h + payload);
    f.payload.assign(f.wire.begin() + sizeof h, f.wire.end());
    out.push_back(std::move(f));
    at += sizeof h + payload;
  }
  return out;
}

void put_u16(std::vector<uint8_t>& out, size_t v) {
  out.push_back(static_cast<uint8_t>(v));
  out.push_back(static_cast<uint8_t>(v >> 8));
}

void put_u32(std::vector<uint8_t>& out, size_t v) {
  put_u16(out, v & 0xffff);
  put_u16(out, v >> 16);
}

void write_seeds(Writer& w, const std::vector<Stream>& streams) {
  std::vector<std::vector<uint8_t>> messages;  // other ranks' negotiation messages, in order
  for (const Stream& s : streams) {
    const auto& r = s.by_recv;
    if (!r.empty() && s.by_recvmsg.empty()) {
      // The store's traffic: a client sees the hello ("RLS1") first.
      const bool client = r.size() >= 4 && std::memcmp(r.data(), "RLS1", 4) == 0;
      std::vector<uint8_t> seed{static_cast<uint8_t>((client ? 0x10 : 0) | 0x0e | 1)};
      seed.insert(seed.end(), r.begin(),
                  r.begin() + static_cast<ptrdiff_t>(std::min<size_t>(r.size(), 4000)));
      w.write("store_frames", seed);
      seed[0] = static_cast<uint8_t>((client ? 0x10 : 0) | 1);  // the same, a byte at a time
      w.write("store_frames", seed);
    }
    // The data link's handshake (handshake.h): fixed-size frames read
    // through recv() before the link's first data frame. Seed: the step that
    // checks the frame's kind, flags (sign; two ranks; this rank), the frame.
    for (size_t at = 0; !s.by_recvmsg.empty() && r.size() - at >= kHandshakeFrame;
         at += kHandshakeFrame) {
      if (std::memcmp(r.data() + at, "RLTH", 4) != 0) break;
      const int kind = r[at + 6] | (r[at + 7] << 8);  // 1 HELLO ... 4 WELCOME
      std::vector<uint8_t> seed{static_cast<uint8_t>(kind - 1),
                                static_cast<uint8_t>(1 | (1 << 1) | (w.rank << 4))};
      seed.insert(seed.end(), r.begin() + static_cast<ptrdiff_t>(at),
                  r.begin() + static_cast<ptrdiff_t>(at + kHandshakeFrame));
      w.write("tcp_handshake", seed);
    }
    const std::vector<Frame> frames = frames_of(s.by_recvmsg);
    // Runs of up to four frames, each run a seed: flags, sizes, bytes.
    for (size_t i = 0; i < frames.size() && w.count["tcp_frames"] < 8; i += 4) {
      std::vector<uint8_t> sizes, bytes;
      size_t n = 0;
      for (size_t j = i; j < frames.size() && n < 4; ++j, ++n) {
        if (frames[j].payload.size() > kMaxSeedFrame) break;
        if (n > 0 && bytes.size() + frames[j].wire.size() > kMaxSeedBytes) break;
        put_u16(sizes, frames[j].payload.size());
        bytes.insert(bytes.end(), frames[j].wire.begin(), frames[j].wire.end());
      }
      if (n == 0) continue;
      std::vector<uint8_t> seed{static_cast<uint8_t>((n - 1) | (i % 8 == 0 ? 4 : 0))};
      seed.insert(seed.end(), sizes.begin(), sizes.end());
      seed.insert(seed.end(), bytes.begin(), bytes.end());
      w.write("tcp_frames", seed);
      // The same messages as a shm sender publishes them: one round, one
      // slot header (message size, chunk size) per message (each fits a slot).
      std::vector<uint8_t> slots{static_cast<uint8_t>(n - 1)};
      slots.insert(slots.end(), sizes.begin(), sizes.end());
      slots.push_back(static_cast<uint8_t>(n - 1));
      for (size_t j = i; j < i + n; ++j) {
        for (int k = 0; k < 2; ++k) put_u32(slots, frames[j].payload.size());
      }
      w.write("shm_slots", slots);
    }
    // A negotiation slot: 1 KiB whose length field fits; a longer message
    // follows in a frame of its own length.
    size_t pending = 0;
    for (const Frame& f : frames) {
      if (pending != 0 && f.payload.size() == pending) {
        messages.push_back(f.payload);
        pending = 0;
        continue;
      }
      if (f.payload.size() != kSlotBytes) continue;
      uint32_t len;
      std::memcpy(&len, f.payload.data(), 4);
      if (len == 0) continue;
      if (len > kSlotPayload) {
        pending = len;
      } else {
        messages.emplace_back(f.payload.begin() + 4, f.payload.begin() + 4 + len);
      }
    }
  }
  // Runs of up to eight cycles: first as one rank's, then as the same message
  // from each of two ranks (so that names complete and fuse).
  for (size_t i = 0; i < messages.size() && w.count["negotiation_messages"] < 8; i += 8) {
    for (uint8_t ranks : {0, 1}) {
      std::vector<uint8_t> seed{ranks, 20 /* 1 MiB fusion threshold */, 4 /* cache slots */};
      for (size_t j = i; j < messages.size() && j < i + 8; ++j) {
        if (j > i && seed.size() + (ranks + 1) * (2 + messages[j].size()) > kMaxSeedBytes) break;
        for (int r = 0; r <= ranks; ++r) {
          put_u16(seed, messages[j].size());
          seed.insert(seed.end(), messages[j].begin(), messages[j].end());
        }
      }
      w.write("negotiation_messages", seed);
    }
  }
  std::printf(
      "record: rank %d wrote %d store, %d tcp, %d shm and %d negotiation seeds (%zu messages)\n",
      w.rank, w.count["store_frames"], w.count["tcp_frames"], w.count["shm_slots"],
      w.count["negotiation_messages"], messages.size());
}

Tensor tensor(std::vector<float>& v, std::vector<int64_t> shape) {
  return Tensor{v.data(), DataType::kFloat32, std::move(shape), -1};
}

void workload() {
  const int rank = ringlet::rank(), size = ringlet::size();
  // Not 1 KiB anywhere, so that no tensor passes for a negotiation slot.
  std::vector<float> a(17, 1.0f), b(15, 2.0f), c(6 * size, 3.0f);
  for (int step = 0; step < 4; ++step) {  // repeats: the response cache answers
    std::vector<int64_t> handles = {
        ringlet::allreduce_async("fc1.weight", tensor(a, {17}), tensor(a, {17})),
        ringlet::allreduce_async("fc1.bias", tensor(b, {5, 3}), tensor(b, {5, 3}), ReduceOp::kSum,
                                 0.5, 2.0),
    };
    for (int64_t h : handles) ringlet::synchronize(h);
  }
  std::vector<float> rows(3 * (rank + 1), 1.0f);
  ringlet::synchronize(ringlet::allgather_async("gather", tensor(rows, {rank + 1, 3})));
  ringlet::synchronize(ringlet::broadcast_async("bcast", tensor(b, {15}), size - 1));
  ringlet::synchronize(ringlet::reducescatter_async("rs", tensor(c, {2 * size, 3})));
  std::vector<int64_t> splits(size, 1);
  splits[0] = 2 * size - (size - 1);
  ringlet::synchronize(ringlet::alltoall_async("a2a", tensor(c, {2 * size, 3}), splits));
  // A transfer each way between the first and the last rank.
  std::vector<float> t(6, 1.0f);
  const int peer = rank == 0 ? size - 1 : 0;
  if (rank == 0 || rank == size - 1) {
    const int64_t sent =
        ringlet::send_async(rank == 0 ? "to.last" : "to.first", tensor(t, {6}), peer);
    ringlet::synchronize(
        ringlet::recv_async(rank == 0 ? "to.first" : "to.last", tensor(t, {2, 3}), peer));
    ringlet::synchronize(sent);
  }
  std::vector<float> g1(9, 1.0f), g2(4, 1.0f);
  for (int64_t h :
       ringlet::grouped_allreduce_async({"group.a", "group.b"}, {tensor(g1, {9}), tensor(g2, {4})},
                                        {tensor(g1, {9}), tensor(g2, {4})}))
    ringlet::synchronize(h);
  try {  // a shape that differs between ranks: an error on every rank
    std::vector<float> m(2 + rank, 1.0f);
    ringlet::synchronize(
        ringlet::allreduce_async("mismatch", tensor(m, {2 + rank}), tensor(m, {2 + rank})));
  } catch (const ringlet::Error&) {
  }
  // Many names in one cycle: a message longer than its slot.
  std::vector<std::vector<float>> many(24, std::vector<float>(3, 1.0f));
  std::vector<int64_t> handles;
  for (size_t i = 0; i < many.size(); ++i) {
    const std::string name =
        "model.encoder.layer." + std::to_string(i) + ".attention.output.weight";
    handles.push_back(ringlet::allreduce_async(name, tensor(many[i], {3}), tensor(many[i], {3})));
  }
  for (int64_t h : handles) ringlet::synchronize(h);
  const int set = ringlet::add_process_set({size - 1});
  if (rank == size - 1) {
    ringlet::synchronize(ringlet::allreduce_async("in.set", tensor(a, {17}), tensor(a, {17}),
                                                  ReduceOp::kSum, 1.0, 1.0, set));
  }
  ringlet::remove_process_set(set);
  if (rank == 0) {  // the others join while rank 0 still reduces
    ringlet::synchronize(ringlet::allreduce_async("last", tensor(a, {17}), tensor(a, {17})));
  }
  ringlet::join();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: ringletrun -np 2 %s CORPUS_DIR\n", argv[0]);
    return 2;
  }
  setenv("RINGLET_TRANSPORT", "tcp", 1);
  ringlet::init();
  const int rank = ringlet::rank();
  workload();
  ringlet::shutdown();
  std::vector<Stream> streams;
  {
    std::lock_guard lock(g_mu);
    g_recording = false;
    streams = std::move(g_closed);
    for (auto& [fd, s] : g_open) streams.push_back(std::move(s));
  }
  Writer w{argv[1], rank, {}, {}};
  write_seeds(w, streams);
  return 0;
}
