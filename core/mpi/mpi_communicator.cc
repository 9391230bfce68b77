// MPI communicators per Ringlet communicator, and what the MPI algorithms share
// (datatypes, reduction ops, error reports).
#include "core/mpi/mpi_communicator.h"

#include <array>
#include <string>
#include <vector>

#include "core/mpi/mpi_call.h"
#include "ringlet/kernels/cpu.h"
#include "ringlet/transport/transport.h"

namespace ringlet::core::collectives {

namespace {

std::string mpi_error_text(int code) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) {
    return "MPI error code " + std::to_string(code);
  }
  return std::string(text, static_cast<size_t>(len));
}

// A call made while the communicator is built, before anything can watch it.
void check(int code, const char* call) {
  if (code != MPI_SUCCESS) throw_mpi_error(call, code);
}

// MPI_Op over Ringlet's kernels: inout[i] = in[i] (op) inout[i]. The ops
// passed here are commutative, so the operand order is MPI's to choose. MPI
// calls it from C: it must not throw, and reduce() throws only on a dtype or
// op that the table below never passes.
template <DataType D, ReduceOp O>
void reduce_with_kernels(void* in, void* inout, int* len, MPI_Datatype*) noexcept {
  kernels::cpu::reduce(D, O, inout, in, inout, static_cast<size_t>(*len));
}

// Ringlet's own ops, by dtype and op; MPI_OP_NULL where MPI's built-in op serves.
struct UserOps {
  std::array<std::array<MPI_Op, kNumReduceOps>, kNumDataTypes> op;
};

template <DataType D, ReduceOp... Os>
void create_ops(UserOps& u) {
  (MPI_Op_create(&reduce_with_kernels<D, Os>, 1,
                 &u.op[static_cast<size_t>(D)][static_cast<size_t>(Os)]),
   ...);
}

const UserOps& user_ops() {
  // Made once, after MPI_Init (the first MpiCommunicator::world()); MPI
  // releases them at MPI_Finalize.
  static const UserOps ops = [] {
    UserOps u{};
    for (auto& per_type : u.op) per_type.fill(MPI_OP_NULL);
    using enum ReduceOp;
    create_ops<DataType::kFloat16, kSum, kProd, kMin, kMax>(u);
    create_ops<DataType::kBFloat16, kSum, kProd, kMin, kMax>(u);
    create_ops<DataType::kFloat32, kMin, kMax>(u);
    create_ops<DataType::kFloat64, kMin, kMax>(u);
    return u;
  }();
  return ops;
}

}  // namespace

[[noreturn]] void throw_mpi_error(const char* call, int code) {
  throw transport::Error(-1, std::string(call) + " failed: " + mpi_error_text(code));
}

MPI_Datatype mpi_datatype(DataType t) {
  switch (t) {
    case DataType::kFloat32: return MPI_FLOAT;
    case DataType::kFloat64: return MPI_DOUBLE;
    case DataType::kFloat16: return MPI_UINT16_T;
    case DataType::kBFloat16: return MPI_UINT16_T;
    case DataType::kInt8: return MPI_INT8_T;
    case DataType::kUInt8: return MPI_UINT8_T;
    case DataType::kInt16: return MPI_INT16_T;
    case DataType::kUInt16: return MPI_UINT16_T;
    case DataType::kInt32: return MPI_INT32_T;
    case DataType::kInt64: return MPI_INT64_T;
  }
  throw common::caller_error("invalid dtype " + std::to_string(static_cast<int>(t)));
}

MPI_Op mpi_reduce_op(DataType t, ReduceOp op) {
  const ReduceOp as = op == ReduceOp::kAvg ? ReduceOp::kSum : op;
  const MPI_Op own = user_ops().op.at(static_cast<size_t>(t)).at(static_cast<size_t>(as));
  if (own != MPI_OP_NULL) return own;
  switch (as) {
    case ReduceOp::kSum: return MPI_SUM;
    case ReduceOp::kProd: return MPI_PROD;
    case ReduceOp::kMin: return MPI_MIN;
    case ReduceOp::kMax: return MPI_MAX;
    case ReduceOp::kAvg: break;
  }
  throw common::caller_error("invalid reduce op " + std::to_string(static_cast<int>(op)));
}

MpiCommunicator::MpiCommunicator(std::unique_ptr<Handles> h) : handles_(std::move(h)) {}

std::unique_ptr<MpiCommunicator> MpiCommunicator::world() {
  (void)user_ops();  // on init's thread, before any collective needs them
  auto h = std::make_unique<Handles>();
  check(MPI_Comm_dup(MPI_COMM_WORLD, &h->comm), "MPI_Comm_dup(MPI_COMM_WORLD)");
  // From here an error returns to Ringlet, which fails the collective with
  // MPI's words instead of letting MPI end the process.
  std::unique_ptr<MpiCommunicator> c(new MpiCommunicator(std::move(h)));
  check(MPI_Comm_set_errhandler(c->handles_->comm, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
  return c;
}

std::unique_ptr<MpiCommunicator> MpiCommunicator::subset(std::span<const int> members,
                                                         std::chrono::milliseconds timeout) const {
  const std::vector<int> ranks(members.begin(), members.end());
  MPI_Group all = MPI_GROUP_NULL, group = MPI_GROUP_NULL;
  auto h = std::make_unique<Handles>();
  int code = MPI_Comm_group(handles_->comm, &all);
  if (code == MPI_SUCCESS)
    code = MPI_Group_incl(all, static_cast<int>(ranks.size()), ranks.data(), &group);
  if (code == MPI_SUCCESS) {
    // Collective over the members only, as the process set's creation is.
    const MpiWatch watch("MPI_Comm_create_group", timeout);
    code = MPI_Comm_create_group(handles_->comm, group, 0, &h->comm);
  }
  if (group != MPI_GROUP_NULL) MPI_Group_free(&group);
  if (all != MPI_GROUP_NULL) MPI_Group_free(&all);
  check(code, "MPI_Comm_create_group");
  std::unique_ptr<MpiCommunicator> c(new MpiCommunicator(std::move(h)));
  check(MPI_Comm_set_errhandler(c->handles_->comm, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
  return c;
}

MpiCommunicator::~MpiCommunicator() {
  // A program that finalized MPI itself (mpi4py at exit) has freed it already.
  int finalized = 0;
  if (handles_->comm != MPI_COMM_NULL && MPI_Finalized(&finalized) == MPI_SUCCESS && !finalized) {
    MPI_Comm_free(&handles_->comm);
  }
}

}  // namespace ringlet::core::collectives
