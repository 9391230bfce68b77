// What the ranks of one host conclude from what each says of its GPU: its
// UUID (the same whatever ordinal a process gives it), the GPUs it has peer
// access to, how many blocks of a waiting kernel it holds, whether MPS
// shares it. Two ranks reach each other's device memory on one GPU, or on two
// GPUs with peer access both ways; elsewhere (PCIe servers without peer
// access, many VMs) their collectives stage through host memory. Their
// kernels that wait on each other run at once where each GPU holds one rank
// (the usual job) or MPS shares it. Pure and without CUDA: every rank
// derives the same answers from the same records, and a test can describe
// any machine.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "ringlet/topology/cuda_driver.h"

namespace ringlet::core::gpu {

// Written as nvidia-smi writes it: topology's uuid_text.
using topology::uuid_text;

using GpuUuid = std::array<uint8_t, 16>;

// What a rank publishes about its GPU. Plain data: it travels through the
// store as bytes.
struct GpuReach {
  static constexpr uint32_t kMaxPeers = 64;
  GpuUuid uuid{};
  uint32_t peer_count = 0;                 // entries of `peers` in use
  std::array<GpuUuid, kMaxPeers> peers{};  // GPUs this rank's GPU has peer access to
};

// The pairs (a < b, indices into `ranks`) that cannot reach each other's
// device memory; empty where every pair can.
std::vector<std::pair<int, int>> unreachable_pairs(std::span<const GpuReach> ranks);

// One rank's GPU as its waiting kernels see it.
struct GpuShare {
  GpuUuid uuid{};
  int resident = 1;  // blocks of the waiting kernel the GPU holds at once
  bool mps = false;  // its contexts are shared through MPS
};
struct WaitingKernels {
  bool concurrent = false;  // every rank's kernels are resident together
  int blocks = 1;           // blocks one rank's kernel may launch (at least 1)
};
// At most `max_blocks` each: the fewest of any GPU's resident blocks over the
// ranks sharing it.
WaitingKernels plan_waiting_kernels(std::span<const GpuShare> ranks, int max_blocks);

}  // namespace ringlet::core::gpu
