#include "core/config.h"

#include <gtest/gtest.h>

#include <set>
#include <sstream>

namespace ringlet::core {
namespace {

using Env = std::map<std::string, std::string>;

Config load(const Env& env) { return load_config(&env); }

// The message a bad value must produce, or "" when none is thrown.
std::string error_of(const std::string& name, const std::string& value) {
  try {
    load({{name, value}});
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}
std::string error_of(const Env& env) {
  try {
    load(env);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(Config, DefaultsMatchHorovod) {
  const Config c = load({});
  EXPECT_EQ(c.transport, TransportKind::kAuto);
  EXPECT_EQ(c.cpu_operations, CpuOperations::kRing);
  EXPECT_EQ(c.gpu_operations, GpuOperations::kNccl);
  EXPECT_EQ(c.algorithm, AlgorithmChoice::kAuto);
  EXPECT_EQ(c.timeout, std::chrono::seconds(30));
  EXPECT_EQ(c.start_timeout, std::chrono::seconds(30));
  EXPECT_EQ(c.network_interface, "");
  EXPECT_EQ(c.bind, BindMode::kAuto);
  EXPECT_EQ(c.topo_file, "");
  EXPECT_EQ(c.fusion_threshold, 134217728);
  EXPECT_DOUBLE_EQ(c.cycle_time_ms, 1.0);
  EXPECT_EQ(c.cache_capacity, 1024);
  EXPECT_EQ(c.timeline, "");
  EXPECT_FALSE(c.timeline_mark_cycles);
  EXPECT_EQ(c.stall_check_seconds, 60);
  EXPECT_EQ(c.stall_shutdown_seconds, 0);
  EXPECT_EQ(c.log_level, "WARNING");
  EXPECT_EQ(c.hierarchical_allreduce, std::nullopt);  // unset: the algorithm table chooses
  EXPECT_EQ(c.hierarchical_allgather, std::nullopt);
  EXPECT_EQ(c.shm_window_bytes, size_t{16} << 20);
  EXPECT_EQ(c.cuda_ipc_direct_bytes, size_t{4} << 20);
  EXPECT_EQ(c.spin_iterations, -1);  // auto: decided from the placement at create
  EXPECT_TRUE(c.nvtx);
}

TEST(Config, TableHasEveryVariableOnceAndItsDefaultParses) {
  std::set<std::string> names;
  for (const EnvVar& var : env_table()) {
    EXPECT_TRUE(names.insert(var.name).second) << var.name;
    Config c;
    if (*var.default_value) {
      EXPECT_NO_THROW(var.parse(var.default_value, c)) << var.name;
    }
  }
  EXPECT_EQ(names.size(), 26u);
  // Parsing every default gives the default Config.
  Env env;
  for (const EnvVar& var : env_table()) env[var.name] = var.default_value;
  const Config c = load(env);
  EXPECT_EQ(c.fusion_threshold, Config{}.fusion_threshold);
  EXPECT_EQ(c.shm_window_bytes, Config{}.shm_window_bytes);
  EXPECT_EQ(c.cuda_ipc_direct_bytes, Config{}.cuda_ipc_direct_bytes);
  EXPECT_EQ(c.nvtx, Config{}.nvtx);
}

TEST(Config, ValidValues) {
  const Config c = load({{"RINGLET_TRANSPORT", "tcp"},
                         {"HOROVOD_CPU_OPERATIONS", "mpi"},
                         {"HOROVOD_GPU_OPERATIONS", "RING"},
                         {"RINGLET_ALGORITHM", "ring"},
                         {"RINGLET_TIMEOUT_SECONDS", "2.5"},
                         {"RINGLET_START_TIMEOUT_SECONDS", "120"},
                         {"RINGLET_NETWORK_INTERFACE", "eth1"},
                         {"RINGLET_BIND", "none"},
                         {"RINGLET_TOPO_FILE", "/etc/ringlet/node.xml"},
                         {"HOROVOD_FUSION_THRESHOLD", "0"},
                         {"HOROVOD_CYCLE_TIME", "0.5"},
                         {"HOROVOD_CACHE_CAPACITY", "0"},
                         {"HOROVOD_TIMELINE", "/tmp/t.json"},
                         {"HOROVOD_TIMELINE_MARK_CYCLES", "true"},
                         {"HOROVOD_STALL_CHECK_TIME_SECONDS", "5"},
                         {"HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", "10"},
                         {"RINGLET_STALL_TIMEOUT_SECONDS", "0"},
                         {"HOROVOD_LOG_LEVEL", "debug"},
                         {"HOROVOD_HIERARCHICAL_ALLREDUCE", "false"},
                         {"HOROVOD_HIERARCHICAL_ALLGATHER", "0"},
                         {"RINGLET_SHM_WINDOW_BYTES", "64K"},
                         {"RINGLET_SPIN", "0"},
                         {"RINGLET_NVTX", "0"}});
  EXPECT_EQ(c.transport, TransportKind::kTcp);
  EXPECT_EQ(c.cpu_operations, CpuOperations::kMpi);
  EXPECT_EQ(c.gpu_operations, GpuOperations::kRing);
  EXPECT_EQ(c.algorithm, AlgorithmChoice::kRing);
  EXPECT_EQ(c.timeout, std::chrono::milliseconds(2500));
  EXPECT_EQ(c.start_timeout, std::chrono::seconds(120));
  EXPECT_EQ(c.network_interface, "eth1");
  EXPECT_EQ(c.bind, BindMode::kNone);
  EXPECT_EQ(c.topo_file, "/etc/ringlet/node.xml");
  EXPECT_EQ(c.fusion_threshold, 0);
  EXPECT_DOUBLE_EQ(c.cycle_time_ms, 0.5);
  EXPECT_EQ(c.cache_capacity, 0);
  EXPECT_EQ(c.timeline, "/tmp/t.json");
  EXPECT_TRUE(c.timeline_mark_cycles);
  EXPECT_EQ(c.stall_check_seconds, 5);
  EXPECT_EQ(c.stall_shutdown_seconds, 10);
  EXPECT_EQ(c.stall_timeout_seconds, 0);
  EXPECT_EQ(c.log_level, "DEBUG");
  EXPECT_EQ(c.hierarchical_allreduce, false);
  EXPECT_EQ(c.hierarchical_allgather, false);
  EXPECT_EQ(c.shm_window_bytes, 64u << 10);
  EXPECT_EQ(c.spin_iterations, 0);
  EXPECT_FALSE(c.nvtx);
}

TEST(Config, MoreValidForms) {
  EXPECT_EQ(load({{"RINGLET_SHM_WINDOW_BYTES", "2g"}}).shm_window_bytes, size_t{2} << 30);
  EXPECT_EQ(load({{"RINGLET_SHM_WINDOW_BYTES", "4096"}}).shm_window_bytes, 4096u);
  EXPECT_EQ(load({{"RINGLET_SHM_WINDOW_BYTES", "3M"}}).shm_window_bytes, size_t{3} << 20);
  EXPECT_EQ(load({{"RINGLET_CUDA_IPC_DIRECT_BYTES", "0"}}).cuda_ipc_direct_bytes, 0u);
  EXPECT_EQ(load({{"RINGLET_CUDA_IPC_DIRECT_BYTES", "1"}}).cuda_ipc_direct_bytes, 1u);
  EXPECT_EQ(load({{"RINGLET_CUDA_IPC_DIRECT_BYTES", "64m"}}).cuda_ipc_direct_bytes,
            size_t{64} << 20);
  EXPECT_EQ(load({{"HOROVOD_CPU_OPERATIONS", "Ring"}}).cpu_operations, CpuOperations::kRing);
  EXPECT_EQ(load({{"HOROVOD_GPU_OPERATIONS", "mpi"}}).gpu_operations, GpuOperations::kMpi);
  EXPECT_EQ(load({{"RINGLET_TRANSPORT", "shm"}}).transport, TransportKind::kShm);
  EXPECT_EQ(load({{"RINGLET_TRANSPORT", "ucx"}}).transport, TransportKind::kUcx);
  EXPECT_EQ(load({{"RINGLET_ALGORITHM", "direct"}}).algorithm, AlgorithmChoice::kDirect);
  EXPECT_EQ(load({{"RINGLET_TIMEOUT_SECONDS", "0.0001"}}).timeout, std::chrono::milliseconds(1));
  EXPECT_TRUE(load({{"RINGLET_NVTX", "TRUE"}}).nvtx);
  EXPECT_FALSE(load({{"HOROVOD_TIMELINE_MARK_CYCLES", "false"}}).timeline_mark_cycles);
  EXPECT_EQ(load({{"HOROVOD_FUSION_THRESHOLD", "+67108864"}}).fusion_threshold, 67108864);
  EXPECT_EQ(load({{"RINGLET_SPIN", "auto"}}).spin_iterations, -1);
  EXPECT_EQ(load({{"RINGLET_SPIN", "500"}}).spin_iterations, 500);
  EXPECT_EQ(load({{"RINGLET_BIND", "AUTO"}}).bind, BindMode::kAuto);
  EXPECT_EQ(load({{"RINGLET_BIND", "None"}}).bind, BindMode::kNone);
  // An empty value keeps the default, as `export VAR=` does in Horovod.
  EXPECT_EQ(load({{"HOROVOD_FUSION_THRESHOLD", ""}}).fusion_threshold, 134217728);
  EXPECT_EQ(load({{"HOROVOD_HIERARCHICAL_ALLREDUCE", ""}}).hierarchical_allreduce, std::nullopt);
  EXPECT_EQ(load({{"HOROVOD_HIERARCHICAL_ALLREDUCE", "1"}}).hierarchical_allreduce, true);
  EXPECT_EQ(load({{"HOROVOD_HIERARCHICAL_ALLGATHER", "TRUE"}}).hierarchical_allgather, true);
  // RINGLET_ALGORITHM=auto leaves the choice to them.
  EXPECT_EQ(load({{"HOROVOD_HIERARCHICAL_ALLREDUCE", "true"}, {"RINGLET_ALGORITHM", "auto"}})
                .hierarchical_allreduce,
            true);
  // Forbidding the hierarchical algorithm beside a forced one is no conflict.
  EXPECT_EQ(load({{"HOROVOD_HIERARCHICAL_ALLGATHER", "0"}, {"RINGLET_ALGORITHM", "ring"}})
                .hierarchical_allgather,
            false);
}

// A hierarchical switch that is on and a forced RINGLET_ALGORITHM would both
// choose the algorithm: refused, naming both.
TEST(Config, HierarchicalAndAForcedAlgorithmAreRefusedTogether) {
  EXPECT_EQ(error_of({{"HOROVOD_HIERARCHICAL_ALLREDUCE", "1"}, {"RINGLET_ALGORITHM", "ring"}}),
            "HOROVOD_HIERARCHICAL_ALLREDUCE=1 and RINGLET_ALGORITHM=ring both choose the "
            "algorithm: set one of them (or RINGLET_ALGORITHM=auto)");
  EXPECT_EQ(error_of({{"HOROVOD_HIERARCHICAL_ALLGATHER", "true"}, {"RINGLET_ALGORITHM", "direct"}}),
            "HOROVOD_HIERARCHICAL_ALLGATHER=true and RINGLET_ALGORITHM=direct both choose the "
            "algorithm: set one of them (or RINGLET_ALGORITHM=auto)");
}

// HOROVOD_CPU_OPERATIONS=MPI takes every host collective: a choice among
// Ringlet's own host algorithms beside it is refused, naming both; what still
// has a meaning (ring for device tensors, a switch at 0) is accepted.
TEST(Config, MpiOperationsRefuseRingletsHostAlgorithms) {
  EXPECT_EQ(error_of({{"HOROVOD_CPU_OPERATIONS", "MPI"}, {"RINGLET_ALGORITHM", "direct"}}),
            "RINGLET_ALGORITHM=direct chooses one of Ringlet's host algorithms, but "
            "HOROVOD_CPU_OPERATIONS=MPI hands every host collective to MPI (accepted with it: "
            "auto, or ring for device tensors under HOROVOD_GPU_OPERATIONS=RING)");
  EXPECT_NE(error_of({{"HOROVOD_CPU_OPERATIONS", "mpi"}, {"RINGLET_ALGORITHM", "onestep"}})
                .find("RINGLET_ALGORITHM=onestep chooses one of Ringlet's host algorithms, but "
                      "HOROVOD_CPU_OPERATIONS=mpi"),
            std::string::npos);
  EXPECT_EQ(error_of({{"HOROVOD_CPU_OPERATIONS", "MPI"}, {"HOROVOD_HIERARCHICAL_ALLREDUCE", "1"}}),
            "HOROVOD_HIERARCHICAL_ALLREDUCE=1 asks for Ringlet's hierarchical host algorithm, but "
            "HOROVOD_CPU_OPERATIONS=MPI hands every host collective to MPI (accepted with it: 0, "
            "or unset)");
  EXPECT_NE(error_of({{"HOROVOD_CPU_OPERATIONS", "MPI"}, {"HOROVOD_HIERARCHICAL_ALLGATHER", "true"}})
                .find("HOROVOD_HIERARCHICAL_ALLGATHER=true asks for"),
            std::string::npos);
  for (const Env& fine : {Env{{"HOROVOD_CPU_OPERATIONS", "MPI"}, {"RINGLET_ALGORITHM", "ring"}},
                          Env{{"HOROVOD_CPU_OPERATIONS", "MPI"}, {"RINGLET_ALGORITHM", "auto"}},
                          Env{{"HOROVOD_CPU_OPERATIONS", "MPI"}, {"HOROVOD_HIERARCHICAL_ALLREDUCE", "0"}},
                          Env{{"HOROVOD_CPU_OPERATIONS", "RING"}, {"RINGLET_ALGORITHM", "direct"}}}) {
    EXPECT_EQ(error_of(fine), "");
  }
  EXPECT_EQ(load({{"HOROVOD_CPU_OPERATIONS", "MPI"}}).cpu_operations, CpuOperations::kMpi);
  EXPECT_EQ(load({{"RINGLET_ALGORITHM", "onestep"}}).algorithm, AlgorithmChoice::kOneStep);
  EXPECT_EQ(load({{"RINGLET_ALGORITHM", "twoshot"}}).algorithm, AlgorithmChoice::kTwoShot);
  EXPECT_NE(error_of({{"HOROVOD_CPU_OPERATIONS", "mpi"}, {"RINGLET_ALGORITHM", "twoshot"}})
                .find("RINGLET_ALGORITHM=twoshot chooses one of Ringlet's host algorithms"),
            std::string::npos);
}

TEST(Config, TheDocumentedMessage) {
  EXPECT_EQ(error_of("HOROVOD_FUSION_THRESHOLD", "abc"),
            "HOROVOD_FUSION_THRESHOLD='abc' is not valid: expected an integer >= 0 (bytes)");
}

struct BadValue {
  std::string name;
  std::string value;
  std::string expected;  // a piece of the accepted values that must appear
};

class ConfigBadValue : public ::testing::TestWithParam<BadValue> {};

TEST_P(ConfigBadValue, NamesTheVariableTheValueAndWhatIsAccepted) {
  const BadValue& b = GetParam();
  const std::string msg = error_of(b.name, b.value);
  ASSERT_FALSE(msg.empty()) << b.name << "='" << b.value << "' was accepted";
  EXPECT_EQ(msg.rfind(b.name + "='" + b.value + "' is not valid: expected ", 0), 0u) << msg;
  EXPECT_NE(msg.find(b.expected), std::string::npos) << msg;
}

INSTANTIATE_TEST_SUITE_P(
    AllKinds, ConfigBadValue,
    ::testing::Values(
        BadValue{"RINGLET_TRANSPORT", "rdma", "auto|shm|tcp|ucx"},
        BadValue{"HOROVOD_CPU_OPERATIONS", "NCCL", "RING|MPI"},
        BadValue{"HOROVOD_GPU_OPERATIONS", "gloo", "NCCL|RING|MPI"},
        BadValue{"RINGLET_ALGORITHM", "tree", "auto|ring|direct|onestep|twoshot"},
        BadValue{"RINGLET_TIMEOUT_SECONDS", "0", "> 0"},
        BadValue{"RINGLET_TIMEOUT_SECONDS", "-1", "> 0"},
        BadValue{"RINGLET_TIMEOUT_SECONDS", "10s", "seconds"},
        BadValue{"RINGLET_TIMEOUT_SECONDS", "nan", "seconds"},
        BadValue{"RINGLET_TIMEOUT_SECONDS", "inf", "seconds"},
        BadValue{"RINGLET_START_TIMEOUT_SECONDS", "soon", "seconds"},
        BadValue{"HOROVOD_FUSION_THRESHOLD", "-1", "integer >= 0"},
        BadValue{"HOROVOD_FUSION_THRESHOLD", "64MB", "integer >= 0"},
        BadValue{"HOROVOD_FUSION_THRESHOLD", "12 ", "integer >= 0"},
        BadValue{"HOROVOD_FUSION_THRESHOLD", " 12", "integer >= 0"},
        BadValue{"HOROVOD_FUSION_THRESHOLD", "1.5", "integer >= 0"},
        BadValue{"HOROVOD_FUSION_THRESHOLD", "99999999999999999999", "integer >= 0"},
        BadValue{"HOROVOD_FUSION_THRESHOLD", "0x10", "integer >= 0"},
        BadValue{"HOROVOD_CYCLE_TIME", "0", "> 0"},
        BadValue{"HOROVOD_CYCLE_TIME", "fast", "milliseconds"},
        BadValue{"HOROVOD_CACHE_CAPACITY", "-5", "integer >= 0"},
        BadValue{"HOROVOD_TIMELINE_MARK_CYCLES", "yes", "0|1|true|false"},
        BadValue{"HOROVOD_STALL_CHECK_TIME_SECONDS", "-1", "integer >= 0"},
        BadValue{"HOROVOD_STALL_CHECK_TIME_SECONDS", "3000000000", "integer >= 0"},
        BadValue{"HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", "x", "integer >= 0"},
        BadValue{"RINGLET_STALL_TIMEOUT_SECONDS", "-1", "integer >= 0"},
        BadValue{"RINGLET_STALL_TIMEOUT_SECONDS", "30m", "integer >= 0"},
        BadValue{"HOROVOD_LOG_LEVEL", "verbose", "TRACE|DEBUG|INFO|WARNING|ERROR|FATAL"},
        BadValue{"HOROVOD_HIERARCHICAL_ALLREDUCE", "2", "0|1|true|false"},
        BadValue{"HOROVOD_HIERARCHICAL_ALLGATHER", "yes", "0|1|true|false"},
        BadValue{"RINGLET_SHM_WINDOW_BYTES", "0", "K|M|G"},
        BadValue{"RINGLET_SHM_WINDOW_BYTES", "16T", "K|M|G"},
        BadValue{"RINGLET_SHM_WINDOW_BYTES", "M", "K|M|G"},
        BadValue{"RINGLET_SHM_WINDOW_BYTES", "99999999999G", "K|M|G"},
        BadValue{"RINGLET_CUDA_IPC_DIRECT_BYTES", "-1", "byte count >= 0"},
        BadValue{"RINGLET_CUDA_IPC_DIRECT_BYTES", "4MB", "K|M|G"},
        BadValue{"RINGLET_SPIN", "-3", "integer >= 0"},
        BadValue{"RINGLET_NVTX", "on", "0|1|true|false"},
        BadValue{"RINGLET_BIND", "core", "auto|none"},
        BadValue{"RINGLET_BIND", "1", "auto|none"}));

// The hierarchical switches are served: on and off parse in every spelling
// Horovod's users write, and an empty value leaves the choice to the table.
TEST(Config, HierarchicalSwitchesParse) {
  for (const char* name : {"HOROVOD_HIERARCHICAL_ALLREDUCE", "HOROVOD_HIERARCHICAL_ALLGATHER"}) {
    for (const char* on : {"1", "true", "TRUE"}) {
      const Config c = load({{name, on}});
      EXPECT_EQ(std::string(name) == "HOROVOD_HIERARCHICAL_ALLREDUCE" ? c.hierarchical_allreduce
                                                                      : c.hierarchical_allgather,
                true)
          << name << "=" << on;
    }
    for (const char* off : {"0", "false", "False"}) {
      const Config c = load({{name, off}});
      EXPECT_EQ(std::string(name) == "HOROVOD_HIERARCHICAL_ALLREDUCE" ? c.hierarchical_allreduce
                                                                      : c.hierarchical_allgather,
                false)
          << name << "=" << off;
    }
  }
}

// Every GPU operations value is accepted at init (a CPU-only job keeps
// running with Horovod's build-time HOROVOD_GPU_OPERATIONS=NCCL in its
// environment); what a device tensor meets is request_validation_test's.
TEST(Config, GpuOperationsAreAcceptedAtInit) {
  for (const char* value : {"NCCL", "RING", "MPI", "nccl"}) {
    EXPECT_EQ(error_of("HOROVOD_GPU_OPERATIONS", value), "") << value;
  }
}

TEST(Config, StrictNumbers) {
  EXPECT_EQ(parse_int64("42"), 42);
  EXPECT_EQ(parse_int64("-7"), -7);
  EXPECT_EQ(parse_int64("9223372036854775807"), INT64_MAX);
  EXPECT_FALSE(parse_int64("9223372036854775808"));
  EXPECT_FALSE(parse_int64(""));
  EXPECT_FALSE(parse_int64("+"));
  EXPECT_FALSE(parse_int64("++1"));
  EXPECT_FALSE(parse_int64("1e3"));
  EXPECT_FALSE(parse_int64("4abc"));
  EXPECT_EQ(parse_double("1.25"), 1.25);
  EXPECT_FALSE(parse_double("1.25x"));
  EXPECT_FALSE(parse_double("inf"));
}

TEST(Config, DescribeIsAlignedAndComplete) {
  const std::string text = describe_env_table();
  for (const EnvVar& var : env_table()) EXPECT_NE(text.find(var.name), std::string::npos);
  // Every line starts its DEFAULT column at the same offset.
  std::istringstream lines(text);
  std::string line;
  std::getline(lines, line);
  const size_t column = line.find("DEFAULT");
  ASSERT_NE(column, std::string::npos);
  while (std::getline(lines, line)) {
    EXPECT_EQ(line[column - 1], ' ') << line;
    EXPECT_NE(line[column], ' ') << line;
  }
}

}  // namespace
}  // namespace ringlet::core
