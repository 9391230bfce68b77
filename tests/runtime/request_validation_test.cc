// Request validation alone: what a rank refuses before queueing, with the
// message the caller sees.
#include "core/runtime/request_validation.h"

#include <gtest/gtest.h>

#include "core/gpu/device_collectives.h"

namespace ringlet::core::runtime {
namespace {

Request request(CollectiveKind kind, std::vector<int64_t> shape, int32_t set = 0) {
  static float buffer[64];
  Request r;
  r.meta.name = "t";
  r.meta.kind = kind;
  r.meta.shape = std::move(shape);
  r.meta.process_set = set;
  r.input = buffer;
  r.output = buffer;
  return r;
}

std::string refusal(Request r, int rank, const ProcessSetTable& sets,
                    GpuOperations gpu_operations = GpuOperations::kNccl) {
  try {
    validate_request(r, rank, sets, gpu_operations);
  } catch (const RuntimeError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    return e.what();
  }
  return "";
}

TEST(RequestValidation, AcceptsAWellFormedRequest) {
  ProcessSetTable sets(2, 0);
  Request r = request(CollectiveKind::kAllreduce, {4, 4});
  r.device.id = -1;
  r.meta.device = 7;
  validate_request(r, 0, sets);
  EXPECT_EQ(r.meta.device, -1);  // the metadata carries the request's device
}

TEST(RequestValidation, RefusesWhatThisRankCanTellIsWrong) {
  ProcessSetTable sets(2, 0);
  Request unnamed = request(CollectiveKind::kAllreduce, {4});
  unnamed.meta.name = "";
  EXPECT_EQ(refusal(unnamed, 0, sets), "rank 0: allreduce '': a collective needs a non-empty name");
  EXPECT_EQ(refusal(request(CollectiveKind::kAllreduce, {4, -1}), 1, sets),
            "rank 1: allreduce 't': negative dimension in shape [4, -1]");
  Request bad_dtype = request(CollectiveKind::kAllreduce, {4});
  bad_dtype.meta.dtype = static_cast<DataType>(42);
  EXPECT_EQ(refusal(bad_dtype, 0, sets), "rank 0: allreduce 't': invalid dtype 42");
  Request device = request(CollectiveKind::kAllreduce, {4});
  device.device.id = 0;
  // Served where this build has CUDA and NCCL; otherwise refused, naming why.
  const std::string why = gpu::device_refusal(GpuOperations::kNccl, true, DataType::kFloat32, 0);
  EXPECT_EQ(refusal(device, 0, sets), why.empty() ? "" : "rank 0: allreduce 't': " + why);
  Request null = request(CollectiveKind::kAllreduce, {4});
  null.output = nullptr;
  EXPECT_EQ(refusal(null, 0, sets), "rank 0: allreduce 't': null input or output buffer");
  Request empty = request(CollectiveKind::kAllreduce, {0});
  empty.input = empty.output = nullptr;
  EXPECT_EQ(refusal(empty, 0, sets), "");  // nothing to read or write
  EXPECT_EQ(refusal(request(CollectiveKind::kAllgather, {}), 0, sets),
            "rank 0: allgather 't': needs a tensor of at least one dimension");
}

// What a build cannot serve on device memory is refused by name when it is
// submitted: MPI as HOROVOD_GPU_OPERATIONS in every build, what NCCL or
// Ringlet's own algorithms over CUDA IPC lack, and every device tensor in a
// build without CUDA or NCCL.
TEST(RequestValidation, DeviceTensorsNameWhatCannotServeThem) {
  ProcessSetTable sets(2, 0);
  auto on_device = [](CollectiveKind kind, DataType dtype, int device) {
    Request r = request(kind, {4});
    r.meta.dtype = dtype;
    r.device.id = device;
    return r;
  };
  const Request r = on_device(CollectiveKind::kAllreduce, DataType::kFloat32, 1);
  const std::string mpi = refusal(r, 0, sets, GpuOperations::kMpi);
  EXPECT_NE(mpi.find("cuda:1"), std::string::npos) << mpi;
  EXPECT_NE(mpi.find("HOROVOD_GPU_OPERATIONS=MPI"), std::string::npos) << mpi;
  const Request shorts = on_device(CollectiveKind::kAllreduce, DataType::kInt16, 0);
  const std::string no_int16 = refusal(shorts, 0, sets, GpuOperations::kNccl);
  EXPECT_NE(no_int16.find("cuda:0"), std::string::npos) << no_int16;
  EXPECT_NE(refusal(on_device(CollectiveKind::kReducescatter, DataType::kInt16, 0), 0, sets,
                    GpuOperations::kNccl),
            "");
#if RINGLET_TEST_NCCL
  // NCCL serves every collective; those that only move data take any dtype.
  for (CollectiveKind kind :
       {CollectiveKind::kAllreduce, CollectiveKind::kAllgather, CollectiveKind::kBroadcast,
        CollectiveKind::kReducescatter, CollectiveKind::kAlltoall}) {
    EXPECT_EQ(refusal(on_device(kind, DataType::kFloat32, 0), 0, sets, GpuOperations::kNccl), "")
        << to_string(kind);
  }
  for (CollectiveKind kind :
       {CollectiveKind::kAllgather, CollectiveKind::kBroadcast, CollectiveKind::kAlltoall}) {
    EXPECT_EQ(refusal(on_device(kind, DataType::kInt16, 0), 0, sets, GpuOperations::kNccl), "")
        << to_string(kind);
  }
  EXPECT_NE(no_int16.find("NCCL has no int16"), std::string::npos) << no_int16;
  // The ring over CUDA IPC serves every collective of every dtype (its
  // kernels reduce int16 too).
  for (CollectiveKind kind :
       {CollectiveKind::kAllreduce, CollectiveKind::kAllgather, CollectiveKind::kBroadcast,
        CollectiveKind::kReducescatter, CollectiveKind::kAlltoall}) {
    for (DataType dtype : {DataType::kFloat32, DataType::kInt16, DataType::kBFloat16}) {
      EXPECT_EQ(refusal(on_device(kind, dtype, 0), 0, sets, GpuOperations::kRing), "")
          << to_string(kind) << " " << to_string(dtype);
    }
  }
  EXPECT_NE(no_int16.find("HOROVOD_GPU_OPERATIONS=RING"), std::string::npos) << no_int16;
#else
  // A build without CUDA or NCCL refuses every device tensor, saying so.
  for (GpuOperations ops : {GpuOperations::kNccl, GpuOperations::kRing}) {
    const std::string why =
        refusal(on_device(CollectiveKind::kAllgather, DataType::kFloat32, 0), 0, sets, ops);
    EXPECT_EQ(why.rfind("rank 0: allgather 't': device tensors (cuda:0)", 0), 0u) << why;
    EXPECT_NE(why.find("not served by this build"), std::string::npos) << why;
    EXPECT_NE(why.find("HOROVOD_GPU_OPERATIONS=" + std::string(to_string(ops))), std::string::npos)
        << why;
  }
#endif
}

TEST(RequestValidation, BroadcastRootMustBeInTheSet) {
  ProcessSetTable sets(4, 0);
  sets.add_static({{0, 2}});
  Request r = request(CollectiveKind::kBroadcast, {4});
  r.meta.root = 4;
  EXPECT_EQ(refusal(r, 0, sets), "rank 0: broadcast 't': root 4 is not a rank (ranks 0..3)");
  Request in_set = request(CollectiveKind::kBroadcast, {4}, 1);
  in_set.meta.root = 1;
  EXPECT_EQ(refusal(in_set, 0, sets),
            "rank 0: broadcast 't': root 1 is not a rank of process set 1 (ranks [0, 2])");
  in_set.meta.root = 2;
  EXPECT_EQ(refusal(in_set, 0, sets), "");
}

TEST(RequestValidation, ProcessSetMustExistAndHoldThisRank) {
  ProcessSetTable sets(4, 0);
  sets.add_static({{0, 2}});
  EXPECT_EQ(refusal(request(CollectiveKind::kAllreduce, {4}, 9), 0, sets),
            "rank 0: allreduce 't': there is no process set 9");
  EXPECT_EQ(refusal(request(CollectiveKind::kAllreduce, {4}, 1), 1, sets),
            "rank 1: allreduce 't': rank 1 is not a member of process set 1 (ranks [0, 2])");
}

TEST(RequestValidation, AlltoallSplitsDefaultEvenAndMustAddUp) {
  ProcessSetTable sets(3, 0);
  Request even = request(CollectiveKind::kAlltoall, {6, 2});
  validate_request(even, 0, sets);
  EXPECT_EQ(even.meta.splits, (std::vector<int64_t>{2, 2, 2}));
  EXPECT_EQ(refusal(request(CollectiveKind::kAlltoall, {5}), 0, sets),
            "rank 0: alltoall 't': first dimension 5 does not split evenly over 3 ranks; give "
            "splits");
  Request wrong = request(CollectiveKind::kAlltoall, {5});
  wrong.meta.splits = {1, 1, 1};
  EXPECT_EQ(refusal(wrong, 0, sets),
            "rank 0: alltoall 't': splits [1, 1, 1] add up to 3, not the first dimension 5");
  Request count = request(CollectiveKind::kAlltoall, {5});
  count.meta.splits = {5};
  EXPECT_EQ(refusal(count, 0, sets), "rank 0: alltoall 't': splits has 1 entries for 3 ranks");
}

}  // namespace
}  // namespace ringlet::core::runtime
