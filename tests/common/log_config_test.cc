// The logger's rows of the configuration table: HOROVOD_LOG_LEVEL and
// HOROVOD_LOG_TIMESTAMP reach the logger when a communicator starts, and bad
// values are refused, naming the variable, before anything else happens.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <string>

#include "core/bootstrap/launch_info.h"
#include "core/communicator.h"
#include "core/config.h"
#include "ringlet/common/host_name.h"
#include "ringlet/common/logging.h"

namespace ringlet::core {
namespace {

using Env = std::map<std::string, std::string>;

std::string error_of(const Env& env) {
  try {
    load_config(&env);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(LogConfig, DefaultsAreHorovods) {
  const Env none;
  const Config c = load_config(&none);
  const common::LogSettings s = log_settings(c, 5);
  EXPECT_EQ(s.level, common::LogLevel::kWarning);
  EXPECT_FALSE(s.timestamp);
  EXPECT_EQ(s.rank, 5);
}

TEST(LogConfig, ValuesReachTheSettings) {
  const Env env = {{"HOROVOD_LOG_LEVEL", "trace"}, {"HOROVOD_LOG_TIMESTAMP", "1"}};
  const common::LogSettings s = log_settings(load_config(&env), 0);
  EXPECT_EQ(s.level, common::LogLevel::kTrace);
  EXPECT_TRUE(s.timestamp);
  const Env error = {{"HOROVOD_LOG_LEVEL", "Error"}, {"HOROVOD_LOG_TIMESTAMP", "false"}};
  EXPECT_EQ(log_settings(load_config(&error), 0).level, common::LogLevel::kError);
}

TEST(LogConfig, BadValuesNameTheVariable) {
  EXPECT_EQ(error_of({{"HOROVOD_LOG_LEVEL", "loud"}}),
            "HOROVOD_LOG_LEVEL='loud' is not valid: expected one of "
            "TRACE|DEBUG|INFO|WARNING|ERROR|FATAL (any case)");
  EXPECT_EQ(error_of({{"HOROVOD_LOG_TIMESTAMP", "yes"}}),
            "HOROVOD_LOG_TIMESTAMP='yes' is not valid: expected one of 0|1|true|false");
}

TEST(LogConfig, HostNameRowOverridesTheMachinesName) {
  const Env none;
  EXPECT_EQ(host_name(load_config(&none)), common::host_name());
  const Env fake = {{"RINGLET_HOSTNAME", "simhost1"}};
  EXPECT_EQ(host_name(load_config(&fake)), "simhost1");
  EXPECT_EQ(error_of({{"RINGLET_HOSTNAME", "a\nb"}}),
            "RINGLET_HOSTNAME='a\nb' is not valid: expected a host name without a newline");
}

// A communicator's start sets the logger for its rank.
TEST(LogConfig, ACommunicatorConfiguresTheLogger) {
  const common::LogSettings saved = common::log_settings();
  const Env env = {{"HOROVOD_LOG_LEVEL", "debug"}, {"HOROVOD_LOG_TIMESTAMP", "true"}};
  LaunchInfo launch;
  launch.launcher = "single";
  auto comm = Communicator::create(load_config(&env), launch);
  const common::LogSettings s = common::log_settings();
  common::configure_log(saved);
  EXPECT_EQ(s.level, common::LogLevel::kDebug);
  EXPECT_TRUE(s.timestamp);
  EXPECT_EQ(s.rank, 0);
  EXPECT_EQ(s.fd, 2);
}

}  // namespace
}  // namespace ringlet::core
