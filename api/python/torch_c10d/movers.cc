// The ringlet backend's collectives that only move data: broadcast,
// all_gather (list, tensor, coalesced), all_to_all (single, list), gather and
// scatter. They move bytes, so every dtype is served.
#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <numeric>

#include "ringlet/ringlet.h"
#include "torch_c10d/backend.h"
#include "torch_c10d/tensor_views.h"
#include "torch_c10d/work.h"

namespace ringlet::torch_c10d {

c10::intrusive_ptr<c10d::Work> Backend::broadcast(std::vector<at::Tensor>& tensors,
                                                  const c10d::BroadcastOptions& opts) {
  check_one(tensors, "broadcast");
  TORCH_CHECK(opts.rootRank >= 0 && opts.rootRank < getSize(), "ringlet: broadcast root ",
              opts.rootRank, " is not a rank of the group of ", getSize());
  TORCH_CHECK(opts.rootTensor == 0, "ringlet: broadcast root tensor must be 0");
  Collective c = begin(c10d::OpType::BROADCAST, tensors, tensors);
  at::Tensor user = tensors[0];
  at::Tensor buf = staged(user);
  const int root = global_ranks_[opts.rootRank];
  auto handle = submit(
      c.what, [&] { return ringlet::broadcast_async(c.name, as_bytes(buf), root, process_set_); });
  c.work->start({handle}, [user, buf](std::vector<ringlet::Result>&) mutable {
    if (!user.is_same(buf)) user.copy_(buf);
  });
  return c.work;
}

c10::intrusive_ptr<c10d::Work> Backend::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                  std::vector<at::Tensor>& inputs,
                                                  const c10d::AllgatherOptions&) {
  check_one(inputs, "all_gather");
  TORCH_CHECK(outputs.size() == 1 && static_cast<int>(outputs[0].size()) == getSize(),
              "ringlet: all_gather needs one output list of ", getSize(), " tensors");
  const at::Tensor& input = inputs[0];
  for (const auto& out : outputs[0]) {
    check_tensor(out, "all_gather");
    TORCH_CHECK(out.scalar_type() == input.scalar_type() && out.numel() == input.numel(),
                "ringlet: all_gather's outputs must match its input (", input.scalar_type(), ", ",
                input.numel(), " elements), not ", out.scalar_type(), ", ", out.numel());
  }
  Collective c = begin(c10d::OpType::ALLGATHER, outputs[0], inputs);
  at::Tensor buf = staged(input);
  auto handle =
      submit(c.what, [&] { return ringlet::allgather_async(c.name, as_bytes(buf), process_set_); });
  std::vector<at::Tensor> outs = outputs[0];
  const size_t each = input.nbytes();
  c.work->start({handle}, [outs, buf, each](std::vector<ringlet::Result>& results) mutable {
    const auto& data = results[0].data;
    TORCH_CHECK(data.size() == each * outs.size(), "the ranks gathered ", data.size(),
                " bytes, not ", outs.size(), " x ", each, ": the ranks' inputs differ in size");
    for (size_t r = 0; r < outs.size(); ++r) copy_into(outs[r], data.data() + r * each, each);
  });
  return c.work;
}

c10::intrusive_ptr<c10d::Work> Backend::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                        const c10d::AllgatherOptions&) {
  check_tensor(input, "all_gather_into_tensor");
  check_tensor(output, "all_gather_into_tensor");
  TORCH_CHECK(output.scalar_type() == input.scalar_type(),
              "ringlet: all_gather_into_tensor's output is ", output.scalar_type(),
              " but its input ", input.scalar_type());
  TORCH_CHECK(output.numel() == input.numel() * getSize(),
              "ringlet: all_gather_into_tensor's output holds ", output.numel(),
              " elements, not the group's size times the input's (", getSize(), " x ",
              input.numel(), ")");
  Collective c = begin(c10d::OpType::_ALLGATHER_BASE, std::vector<at::Tensor>{output},
                       std::vector<at::Tensor>{input});
  at::Tensor buf = staged(input);
  auto handle =
      submit(c.what, [&] { return ringlet::allgather_async(c.name, as_bytes(buf), process_set_); });
  at::Tensor out = output;
  c.work->start({handle}, [out, buf](std::vector<ringlet::Result>& results) mutable {
    const auto& data = results[0].data;
    TORCH_CHECK(data.size() == out.nbytes(), "the ranks gathered ", data.size(),
                " bytes for an output of ", out.nbytes(), ": the ranks' inputs differ in size");
    copy_into(out, data.data(), data.size());
  });
  return c.work;
}

// Several all_gather_into_tensor in one Work (FSDP's coalesced gathers): one
// handle each, submitted together.
c10::intrusive_ptr<c10d::Work> Backend::allgather_into_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions&) {
  TORCH_CHECK(outputs.size() == inputs.size(), "ringlet: allgather_into_tensor_coalesced needs ",
              "one output per input, not ", outputs.size(), " for ", inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    check_tensor(inputs[i], "allgather_into_tensor_coalesced");
    check_tensor(outputs[i], "allgather_into_tensor_coalesced");
    TORCH_CHECK(outputs[i].scalar_type() == inputs[i].scalar_type() &&
                    outputs[i].numel() == inputs[i].numel() * getSize(),
                "ringlet: allgather_into_tensor_coalesced's output ", i, " (", outputs[i].numel(),
                " ", outputs[i].scalar_type(), ") is not the group's size times its input (",
                getSize(), " x ", inputs[i].numel(), " ", inputs[i].scalar_type(), ")");
  }
  Collective c = begin(c10d::OpType::ALLGATHER_INTO_TENSOR_COALESCED, outputs, inputs);
  std::vector<at::Tensor> bufs;
  std::vector<int64_t> handles;
  for (size_t i = 0; i < inputs.size(); ++i) {
    bufs.push_back(staged(inputs[i]));
    handles.push_back(submit(c.what, [&] {
      return ringlet::allgather_async(c.name + "." + std::to_string(i), as_bytes(bufs.back()),
                                      process_set_);
    }));
  }
  std::vector<at::Tensor> outs = outputs;
  c.work->start(handles, [outs, bufs](std::vector<ringlet::Result>& results) mutable {
    for (size_t i = 0; i < outs.size(); ++i) {
      TORCH_CHECK(results[i].data.size() == outs[i].nbytes(), "the ranks gathered ",
                  results[i].data.size(), " bytes for output ", i, " of ", outs[i].nbytes(),
                  ": the ranks' inputs differ in size");
      copy_into(outs[i], results[i].data.data(), results[i].data.size());
    }
  });
  return c.work;
}

// all_gather_coalesced (deprecated in torch.distributed, served by Gloo):
// outputs[r][j] is rank r's inputs[j]; one allgather per input, one Work.
c10::intrusive_ptr<c10d::Work> Backend::allgather_coalesced(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions&) {
  TORCH_CHECK(static_cast<int>(outputs.size()) == getSize(), "ringlet: all_gather_coalesced needs ",
              getSize(), " output lists, one per rank, not ", outputs.size());
  for (const auto& in : inputs) check_tensor(in, "all_gather_coalesced");
  for (size_t r = 0; r < outputs.size(); ++r) {
    TORCH_CHECK(outputs[r].size() == inputs.size(), "ringlet: all_gather_coalesced's output list ",
                r, " holds ", outputs[r].size(), " tensors, not one per input (", inputs.size(),
                ")");
    for (size_t j = 0; j < inputs.size(); ++j) {
      check_tensor(outputs[r][j], "all_gather_coalesced");
      TORCH_CHECK(outputs[r][j].scalar_type() == inputs[j].scalar_type() &&
                      outputs[r][j].sizes() == inputs[j].sizes(),
                  "ringlet: all_gather_coalesced's output ", j, " of rank ", r, " (",
                  outputs[r][j].scalar_type(), " ", outputs[r][j].sizes(),
                  ") does not match input ", j, " (", inputs[j].scalar_type(), " ",
                  inputs[j].sizes(), ")");
    }
  }
  std::vector<at::Tensor> flat_outputs;
  for (const auto& list : outputs)
    flat_outputs.insert(flat_outputs.end(), list.begin(), list.end());
  Collective c = begin(c10d::OpType::ALLGATHER_COALESCED, flat_outputs, inputs);
  std::vector<at::Tensor> bufs;
  std::vector<size_t> gathered;  // the inputs with bytes to gather, in handle order
  std::vector<int64_t> handles;
  for (size_t j = 0; j < inputs.size(); ++j) {
    if (inputs[j].nbytes() == 0) continue;
    bufs.push_back(staged(inputs[j]));
    gathered.push_back(j);
    handles.push_back(submit(c.what, [&] {
      return ringlet::allgather_async(c.name + "." + std::to_string(j), as_bytes(bufs.back()),
                                      process_set_);
    }));
  }
  std::vector<std::vector<at::Tensor>> outs = outputs;
  c.work->start(handles, [outs, bufs, gathered](std::vector<ringlet::Result>& results) mutable {
    for (size_t h = 0; h < gathered.size(); ++h) {
      const size_t j = gathered[h];
      const size_t each = bufs[h].nbytes();
      const auto& data = results[h].data;
      TORCH_CHECK(data.size() == each * outs.size(), "the ranks gathered ", data.size(),
                  " bytes for input ", j, ", not ", outs.size(), " x ", each,
                  ": the ranks' inputs differ in size");
      for (size_t r = 0; r < outs.size(); ++r) copy_into(outs[r][j], data.data() + r * each, each);
    }
  });
  return c.work;
}

c10::intrusive_ptr<c10d::Work> Backend::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                      std::vector<int64_t>& output_splits,
                                                      std::vector<int64_t>& input_splits,
                                                      const c10d::AllToAllOptions&) {
  check_tensor(input, "all_to_all_single");
  check_tensor(output, "all_to_all_single");
  TORCH_CHECK(output.scalar_type() == input.scalar_type(),
              "ringlet: all_to_all_single's output is ", output.scalar_type(), " but its input ",
              input.scalar_type());
  const int n = getSize();
  // Splits count rows of dim 0; Ringlet moves bytes, so they become bytes.
  auto split_bytes = [n](const at::Tensor& t, const std::vector<int64_t>& splits,
                         const char* which) {
    std::vector<int64_t> bytes(n);
    if (splits.empty()) {
      TORCH_CHECK(t.dim() == 0 ? n == 1 : t.size(0) % n == 0, "ringlet: all_to_all_single's ",
                  which, " of ", t.dim() == 0 ? 1 : t.size(0), " rows does not split evenly among ",
                  n, " ranks");
      std::fill(bytes.begin(), bytes.end(), static_cast<int64_t>(t.nbytes()) / n);
      return bytes;
    }
    TORCH_CHECK(static_cast<int>(splits.size()) == n, "ringlet: all_to_all_single's ", which,
                " split sizes have ", splits.size(), " entries, not one per rank (", n, ")");
    TORCH_CHECK(t.dim() >= 1, "ringlet: all_to_all_single with split sizes needs a ", which,
                " of at least one dimension");
    const int64_t total = std::accumulate(splits.begin(), splits.end(), int64_t{0});
    TORCH_CHECK(total == t.size(0), "ringlet: all_to_all_single's ", which,
                " split sizes add up to ", total, " rows, but it has ", t.size(0));
    const int64_t row = t.size(0) == 0 ? 0 : static_cast<int64_t>(t.nbytes()) / t.size(0);
    for (int i = 0; i < n; ++i) {
      TORCH_CHECK(splits[i] >= 0, "ringlet: all_to_all_single's ", which,
                  " split sizes must not be negative");
      bytes[i] = splits[i] * row;
    }
    return bytes;
  };
  std::vector<int64_t> send = split_bytes(input, input_splits, "input");
  std::vector<int64_t> expect = split_bytes(output, output_splits, "output");
  Collective c = begin(c10d::OpType::ALLTOALL_BASE, std::vector<at::Tensor>{output},
                       std::vector<at::Tensor>{input});
  at::Tensor buf = staged(input);
  auto handle = submit(
      c.what, [&] { return ringlet::alltoall_async(c.name, as_bytes(buf), send, process_set_); });
  at::Tensor out = output;
  c.work->start({handle}, [out, buf, expect](std::vector<ringlet::Result>& results) mutable {
    const auto& res = results[0];
    for (size_t i = 0; i < expect.size() && i < res.received_splits.size(); ++i) {
      TORCH_CHECK(res.received_splits[i] == expect[i], "rank ", i, " sent ", res.received_splits[i],
                  " bytes where the output's split sizes expect ", expect[i]);
    }
    copy_into(out, res.data.data(), res.data.size());
  });
  return c.work;
}

c10::intrusive_ptr<c10d::Work> Backend::alltoall(std::vector<at::Tensor>& outputs,
                                                 std::vector<at::Tensor>& inputs,
                                                 const c10d::AllToAllOptions&) {
  const int n = getSize();
  TORCH_CHECK(static_cast<int>(inputs.size()) == n && static_cast<int>(outputs.size()) == n,
              "ringlet: all_to_all needs ", n, " input and ", n, " output tensors, not ",
              inputs.size(), " and ", outputs.size());
  std::vector<int64_t> send, expect;
  std::vector<at::Tensor> flat;
  for (int i = 0; i < n; ++i) {
    check_tensor(inputs[i], "all_to_all");
    check_tensor(outputs[i], "all_to_all");
    TORCH_CHECK(inputs[i].scalar_type() == inputs[0].scalar_type() &&
                    outputs[i].scalar_type() == inputs[0].scalar_type(),
                "ringlet: all_to_all takes tensors of one dtype");
    send.push_back(static_cast<int64_t>(inputs[i].nbytes()));
    expect.push_back(static_cast<int64_t>(outputs[i].nbytes()));
    flat.push_back(inputs[i].reshape({-1}));
  }
  Collective c = begin(c10d::OpType::ALLTOALL, outputs, inputs);
  at::Tensor buf = at::cat(flat);
  auto handle = submit(
      c.what, [&] { return ringlet::alltoall_async(c.name, as_bytes(buf), send, process_set_); });
  std::vector<at::Tensor> outs = outputs;
  c.work->start({handle}, [outs, buf, expect](std::vector<ringlet::Result>& results) mutable {
    const auto& res = results[0];
    size_t offset = 0;
    for (size_t i = 0; i < outs.size(); ++i) {
      const int64_t got = i < res.received_splits.size() ? res.received_splits[i] : -1;
      TORCH_CHECK(got == expect[i], "rank ", i, " sent ", got, " bytes for an output of ",
                  expect[i]);
      copy_into(outs[i], res.data.data() + offset, static_cast<size_t>(got));
      offset += static_cast<size_t>(got);
    }
  });
  return c.work;
}

// gather and scatter: an alltoall where only the root receives (gather) or
// only the root sends (scatter); every other pair moves nothing.
c10::intrusive_ptr<c10d::Work> Backend::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                               std::vector<at::Tensor>& inputs,
                                               const c10d::GatherOptions& opts) {
  check_one(inputs, "gather");
  const int n = getSize();
  TORCH_CHECK(opts.rootRank >= 0 && opts.rootRank < n, "ringlet: gather root ", opts.rootRank,
              " is not a rank of the group of ", n);
  const bool root = opts.rootRank == getRank();
  const at::Tensor& input = inputs[0];
  std::vector<at::Tensor> outs;
  if (root) {
    TORCH_CHECK(outputs.size() == 1 && static_cast<int>(outputs[0].size()) == n,
                "ringlet: gather's root needs one output list of ", n, " tensors");
    for (const auto& out : outputs[0]) {
      check_tensor(out, "gather");
      TORCH_CHECK(out.scalar_type() == input.scalar_type() && out.numel() == input.numel(),
                  "ringlet: gather's outputs must match its input (", input.scalar_type(), ", ",
                  input.numel(), " elements), not ", out.scalar_type(), ", ", out.numel());
    }
    outs = outputs[0];
  } else {
    TORCH_CHECK(outputs.empty() || (outputs.size() == 1 && outputs[0].empty()),
                "ringlet: gather takes output tensors only on the root (rank ", opts.rootRank, ")");
  }
  Collective c = begin(c10d::OpType::GATHER, outs, inputs);
  at::Tensor buf = staged(input);
  std::vector<int64_t> send(n, 0);
  send[opts.rootRank] = static_cast<int64_t>(buf.nbytes());
  auto handle = submit(
      c.what, [&] { return ringlet::alltoall_async(c.name, as_bytes(buf), send, process_set_); });
  const size_t each = input.nbytes();
  c.work->start({handle}, [outs, buf, each](std::vector<ringlet::Result>& results) mutable {
    const auto& res = results[0];
    size_t offset = 0;
    for (size_t r = 0; r < outs.size(); ++r) {
      const int64_t got = r < res.received_splits.size() ? res.received_splits[r] : -1;
      TORCH_CHECK(got == static_cast<int64_t>(each), "rank ", r, " sent ", got,
                  " bytes to gather into a tensor of ", each);
      copy_into(outs[r], res.data.data() + offset, each);
      offset += each;
    }
  });
  return c.work;
}

c10::intrusive_ptr<c10d::Work> Backend::scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ScatterOptions& opts) {
  check_one(outputs, "scatter");
  const int n = getSize();
  TORCH_CHECK(opts.rootRank >= 0 && opts.rootRank < n, "ringlet: scatter root ", opts.rootRank,
              " is not a rank of the group of ", n);
  const bool root = opts.rootRank == getRank();
  at::Tensor out = outputs[0];
  std::vector<int64_t> send(n, 0);
  at::Tensor buf;
  if (root) {
    TORCH_CHECK(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == n,
                "ringlet: scatter's root needs one input list of ", n, " tensors");
    std::vector<at::Tensor> flat;
    for (int i = 0; i < n; ++i) {
      const at::Tensor& in = inputs[0][i];
      check_tensor(in, "scatter");
      TORCH_CHECK(in.scalar_type() == out.scalar_type() && in.numel() == out.numel(),
                  "ringlet: scatter's inputs must match its output (", out.scalar_type(), ", ",
                  out.numel(), " elements), not ", in.scalar_type(), ", ", in.numel());
      send[i] = static_cast<int64_t>(in.nbytes());
      flat.push_back(in.reshape({-1}));
    }
    buf = at::cat(flat);
  } else {
    TORCH_CHECK(inputs.empty() || (inputs.size() == 1 && inputs[0].empty()),
                "ringlet: scatter takes input tensors only on the root (rank ", opts.rootRank, ")");
    buf = at::empty({0}, out.options());
  }
  Collective c = begin(c10d::OpType::SCATTER, outputs,
                       root ? std::optional<std::vector<at::Tensor>>(inputs[0]) : std::nullopt);
  auto handle = submit(
      c.what, [&] { return ringlet::alltoall_async(c.name, as_bytes(buf), send, process_set_); });
  c.work->start({handle}, [out, buf](std::vector<ringlet::Result>& results) mutable {
    TORCH_CHECK(results[0].data.size() == out.nbytes(), "received ", results[0].data.size(),
                " bytes from the root for an output of ", out.nbytes());
    copy_into(out, results[0].data.data(), results[0].data.size());
  });
  return c.work;
}

}  // namespace ringlet::torch_c10d
