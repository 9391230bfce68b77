// The ringlet backend's reductions: all_reduce (and coalesced), reduce,
// reduce_scatter (list and tensor, and coalesced). Each checks, stages a
// contiguous buffer, submits to Ringlet, and says how the result comes back.
#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include "ringlet/ringlet.h"
#include "torch_c10d/backend.h"
#include "torch_c10d/tensor_views.h"
#include "torch_c10d/work.h"

namespace ringlet::torch_c10d {

namespace {

// Reduce-scatter of a contiguous buffer of `size` equal rows into `out`.
int64_t submit_reduce_scatter(const std::string& what, const std::string& name,
                              const at::Tensor& rows, const Reduction& r, int size,
                              int process_set) {
  return submit(what, [&] {
    return ringlet::reducescatter_async(name, as_reduced(rows, r, size), r.op, r.prescale, 1.0,
                                        process_set);
  });
}

void finish_reduce_scatter(at::Tensor& out, const ringlet::Result& result) {
  TORCH_CHECK(result.data.size() == out.nbytes(), "received ", result.data.size(),
              " bytes for an output of ", out.nbytes());
  copy_into(out, result.data.data(), result.data.size());
}

}  // namespace

c10::intrusive_ptr<c10d::Work> Backend::allreduce(std::vector<at::Tensor>& tensors,
                                                  const c10d::AllreduceOptions& opts) {
  check_one(tensors, "all_reduce");
  TORCH_CHECK_NOT_IMPLEMENTED(!opts.sparseIndices.has_value(),
                              "ringlet: all_reduce of sparse tensors is not served");
  if (is_bitwise(opts.reduceOp)) {
    return bitwise_allreduce(tensors[0], opts.reduceOp, c10d::OpType::ALLREDUCE, true);
  }
  const Reduction r = resolve(tensors[0].scalar_type(), opts.reduceOp, "all_reduce");
  Collective c = begin(c10d::OpType::ALLREDUCE, tensors, tensors);
  at::Tensor user = tensors[0];
  at::Tensor buf = staged(user);
  std::vector<int64_t> handles;
  if (buf.numel() > 0) {
    const ringlet::Tensor t = as_reduced(buf, r, 1);
    handles.push_back(submit(c.what, [&] {
      return ringlet::allreduce_async(c.name, t, t, r.op, r.prescale, 1.0, process_set_);
    }));
  }
  c.work->start(handles, [user, buf](std::vector<ringlet::Result>&) mutable {
    if (!user.is_same(buf)) user.copy_(buf);
  });
  return c.work;
}

c10::intrusive_ptr<c10d::Work> Backend::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  TORCH_CHECK(!tensors.empty(), "ringlet: all_reduce_coalesced of no tensors");
  for (const auto& t : tensors) {
    check_tensor(t, "all_reduce_coalesced");
    TORCH_CHECK(t.scalar_type() == tensors[0].scalar_type(),
                "ringlet: all_reduce_coalesced takes tensors of one dtype, got ",
                tensors[0].scalar_type(), " and ", t.scalar_type());
  }
  const Reduction r = resolve(tensors[0].scalar_type(), opts.reduceOp, "all_reduce_coalesced");
  Collective c = begin(c10d::OpType::ALLREDUCE_COALESCED, tensors, tensors);
  std::vector<at::Tensor> users, bufs;
  std::vector<std::string> names;
  std::vector<ringlet::Tensor> views;
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i].numel() == 0) continue;
    users.push_back(tensors[i]);
    bufs.push_back(staged(tensors[i]));
    names.push_back(c.name + "." + std::to_string(i));
    views.push_back(as_reduced(bufs.back(), r, 1));
  }
  std::vector<int64_t> handles;
  if (!views.empty()) {
    handles = submit(c.what, [&] {
      return ringlet::grouped_allreduce_async(names, views, views, r.op, r.prescale, 1.0,
                                              process_set_);
    });
  }
  c.work->start(handles, [users, bufs](std::vector<ringlet::Result>&) mutable {
    for (size_t i = 0; i < users.size(); ++i) {
      if (!users[i].is_same(bufs[i])) users[i].copy_(bufs[i]);
    }
  });
  return c.work;
}

// reduce: an allreduce whose result only the root keeps; the others reduce
// into a scratch tensor, leaving theirs as it was.
c10::intrusive_ptr<c10d::Work> Backend::reduce(std::vector<at::Tensor>& tensors,
                                               const c10d::ReduceOptions& opts) {
  check_one(tensors, "reduce");
  TORCH_CHECK(opts.rootRank >= 0 && opts.rootRank < getSize(), "ringlet: reduce root ",
              opts.rootRank, " is not a rank of the group of ", getSize());
  if (is_bitwise(opts.reduceOp)) {
    return bitwise_allreduce(tensors[0], opts.reduceOp, c10d::OpType::REDUCE,
                             opts.rootRank == getRank());
  }
  const Reduction r = resolve(tensors[0].scalar_type(), opts.reduceOp, "reduce");
  Collective c = begin(c10d::OpType::REDUCE, tensors, tensors);
  at::Tensor user = tensors[0];
  at::Tensor buf = staged(user);
  const bool root = opts.rootRank == getRank();
  at::Tensor out = root ? buf : at::empty_like(buf);
  std::vector<int64_t> handles;
  if (buf.numel() > 0) {
    handles.push_back(submit(c.what, [&] {
      return ringlet::allreduce_async(c.name, as_reduced(buf, r, 1), as_reduced(out, r, 1), r.op,
                                      r.prescale, 1.0, process_set_);
    }));
  }
  c.work->start(handles, [user, buf, out, root](std::vector<ringlet::Result>&) mutable {
    if (root && !user.is_same(buf)) user.copy_(buf);
  });
  return c.work;
}

c10::intrusive_ptr<c10d::Work> Backend::reduce_scatter(std::vector<at::Tensor>& outputs,
                                                       std::vector<std::vector<at::Tensor>>& inputs,
                                                       const c10d::ReduceScatterOptions& opts) {
  check_one(outputs, "reduce_scatter");
  TORCH_CHECK(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == getSize(),
              "ringlet: reduce_scatter needs one input list of ", getSize(), " tensors");
  at::Tensor out = outputs[0];
  for (const auto& in : inputs[0]) {
    check_tensor(in, "reduce_scatter");
    TORCH_CHECK(in.scalar_type() == out.scalar_type() && in.numel() == out.numel(),
                "ringlet: reduce_scatter's inputs must match its output (", out.scalar_type(), ", ",
                out.numel(), " elements), not ", in.scalar_type(), ", ", in.numel());
  }
  const Reduction r = resolve(out.scalar_type(), opts.reduceOp, "reduce_scatter");
  Collective c = begin(c10d::OpType::REDUCE_SCATTER, outputs, inputs[0]);
  std::vector<at::Tensor> flat;
  for (const auto& in : inputs[0]) flat.push_back(in.reshape({-1}));
  at::Tensor rows = at::cat(flat);
  std::vector<int64_t> handles;
  if (out.numel() > 0) {
    handles.push_back(submit_reduce_scatter(c.what, c.name, rows, r, getSize(), process_set_));
  }
  c.work->start(handles, [out, rows](std::vector<ringlet::Result>& results) mutable {
    if (!results.empty()) finish_reduce_scatter(out, results[0]);
  });
  return c.work;
}

c10::intrusive_ptr<c10d::Work> Backend::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  check_tensor(input, "reduce_scatter_tensor");
  check_tensor(output, "reduce_scatter_tensor");
  TORCH_CHECK(output.scalar_type() == input.scalar_type(),
              "ringlet: reduce_scatter_tensor's output is ", output.scalar_type(),
              " but its input ", input.scalar_type());
  TORCH_CHECK(input.numel() == output.numel() * getSize(),
              "ringlet: reduce_scatter_tensor's input holds ", input.numel(),
              " elements, not the group's size times the output's (", getSize(), " x ",
              output.numel(), ")");
  const Reduction r = resolve(output.scalar_type(), opts.reduceOp, "reduce_scatter_tensor");
  Collective c = begin(c10d::OpType::_REDUCE_SCATTER_BASE, std::vector<at::Tensor>{output},
                       std::vector<at::Tensor>{input});
  at::Tensor rows = staged(input);
  std::vector<int64_t> handles;
  if (output.numel() > 0) {
    handles.push_back(submit_reduce_scatter(c.what, c.name, rows, r, getSize(), process_set_));
  }
  at::Tensor out = output;
  c.work->start(handles, [out, rows](std::vector<ringlet::Result>& results) mutable {
    if (!results.empty()) finish_reduce_scatter(out, results[0]);
  });
  return c.work;
}

c10::intrusive_ptr<c10d::Work> Backend::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  TORCH_CHECK(outputs.size() == inputs.size(), "ringlet: reduce_scatter_tensor_coalesced needs ",
              "one output per input, not ", outputs.size(), " for ", inputs.size());
  std::vector<Reduction> reductions;
  for (size_t i = 0; i < inputs.size(); ++i) {
    check_tensor(inputs[i], "reduce_scatter_tensor_coalesced");
    check_tensor(outputs[i], "reduce_scatter_tensor_coalesced");
    TORCH_CHECK(outputs[i].scalar_type() == inputs[i].scalar_type() &&
                    inputs[i].numel() == outputs[i].numel() * getSize(),
                "ringlet: reduce_scatter_tensor_coalesced's input ", i, " (", inputs[i].numel(),
                " ", inputs[i].scalar_type(), ") is not the group's size times its output (",
                getSize(), " x ", outputs[i].numel(), " ", outputs[i].scalar_type(), ")");
    reductions.push_back(
        resolve(inputs[i].scalar_type(), opts.reduceOp, "reduce_scatter_tensor_coalesced"));
  }
  Collective c = begin(c10d::OpType::REDUCE_SCATTER_TENSOR_COALESCED, outputs, inputs);
  std::vector<at::Tensor> outs, rows;
  std::vector<int64_t> handles;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (outputs[i].numel() == 0) continue;
    outs.push_back(outputs[i]);
    rows.push_back(staged(inputs[i]));
    handles.push_back(submit_reduce_scatter(c.what, c.name + "." + std::to_string(i), rows.back(),
                                            reductions[i], getSize(), process_set_));
  }
  c.work->start(handles, [outs, rows](std::vector<ringlet::Result>& results) mutable {
    for (size_t i = 0; i < outs.size(); ++i) finish_reduce_scatter(outs[i], results[i]);
  });
  return c.work;
}

}  // namespace ringlet::torch_c10d
