// ringletrun: starts the ranks of a Ringlet (or Horovod) job on this host, as
// horovodrun and mpirun do, or hands the job to mpirun with --mpi.
//
// Everything after the first word that is not one of ringletrun's options is
// the command, passed through untouched: `ringletrun -np 2 python train.py
// --verbose` gives --verbose to train.py, not to ringletrun.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "check_build.h"
#include "hosts.h"
#include "job.h"

namespace ringletrun {
namespace {

// Usage errors exit with 2, as most command-line tools do.
constexpr int kUsageError = 2;

struct Args {
  std::optional<int> np;
  std::string host_list;
  std::string hostfile;
  bool mpi = false;
  std::string timeline;
  std::string network_interface;
  std::optional<int> start_timeout;
  // horovodrun's tuning flags, each the environment variable it names.
  std::optional<double> fusion_threshold_mb;
  std::optional<double> cycle_time_ms;
  std::optional<int> cache_capacity;
  bool timeline_mark_cycles = false;
  std::string log_level;
  bool hierarchical_allreduce = false;
  bool no_hierarchical_allreduce = false;
  bool verbose = false;
  bool check_build = false;
  std::vector<std::string> command;
};

int usage_error(const std::string& message) {
  std::cerr << "ringletrun: " << message << "\n"
            << "usage: ringletrun -np N [options] CMD ARGS...   (ringletrun --help for more)\n";
  return kUsageError;
}

// CLI11 only knows one-letter short options, and horovodrun's spelling is
// "-np". The rewritten copy is only for CLI11; the command is taken from the
// original argv, so a child's own "-np" is never touched.
std::vector<std::string> spell_np_for_cli11(int argc, char** argv) {
  std::vector<std::string> out(argv, argv + argc);
  for (std::string& a : out) {
    if (a == "-np" || a.rfind("-np=", 0) == 0) a.insert(0, "-");
  }
  return out;
}

// Returns the exit code when parsing already decided it (help, errors).
std::optional<int> parse_args(int argc, char** argv, Args& args) {
  CLI::App app{"Starts N ranks of a Ringlet or Horovod job on this host.", "ringletrun"};
  app.add_option("--np,--num-proc", args.np, "number of ranks (spelled -np, as horovodrun does)");
  auto* hosts = app.add_option("-H,--hosts", args.host_list,
                               "host:slots,... (only this host is supported yet)");
  auto* hostfile = app.add_option("--hostfile", args.hostfile,
                                  "file of 'host slots=N' lines (only this host is supported yet)");
  hosts->excludes(hostfile);
  app.add_flag("--mpi", args.mpi, "run the command under mpirun instead");
  app.add_option("--timeline-filename", args.timeline, "sets HOROVOD_TIMELINE for the ranks");
  app.add_option("--network-interface", args.network_interface,
                 "sets RINGLET_NETWORK_INTERFACE for the ranks");
  app.add_option("--start-timeout", args.start_timeout,
                 "seconds the ranks wait for each other at start-up "
                 "(sets RINGLET_START_TIMEOUT_SECONDS; default 30)")
      ->check(CLI::PositiveNumber);
  app.add_option("--fusion-threshold-mb", args.fusion_threshold_mb,
                 "fuse tensors up to this many MiB per collective (sets HOROVOD_FUSION_THRESHOLD)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--cycle-time-ms", args.cycle_time_ms,
                 "milliseconds between negotiation cycles (sets HOROVOD_CYCLE_TIME)")
      ->check(CLI::PositiveNumber);
  app.add_option("--cache-capacity", args.cache_capacity,
                 "responses kept in the response cache (sets HOROVOD_CACHE_CAPACITY)")
      ->check(CLI::NonNegativeNumber);
  app.add_flag("--timeline-mark-cycles", args.timeline_mark_cycles,
               "mark negotiation cycles in the timeline (sets HOROVOD_TIMELINE_MARK_CYCLES=1)");
  app.add_option("--log-level", args.log_level, "sets HOROVOD_LOG_LEVEL for the ranks")
      ->check(
          CLI::IsMember({"TRACE", "DEBUG", "INFO", "WARNING", "ERROR", "FATAL"}, CLI::ignore_case));
  // Two flags, not one negatable flag: without either, the environment's value stands.
  auto* hierarchical =
      app.add_flag("--hierarchical-allreduce", args.hierarchical_allreduce,
                   "sets HOROVOD_HIERARCHICAL_ALLREDUCE=1 (refused by the ranks: not served yet)");
  app.add_flag("--no-hierarchical-allreduce", args.no_hierarchical_allreduce,
               "sets HOROVOD_HIERARCHICAL_ALLREDUCE=0")
      ->excludes(hierarchical);
  app.add_flag("--verbose", args.verbose, "say what ringletrun does");
  app.add_flag("--check-build", args.check_build, "print what this build contains and exit");
  app.footer(
      "Usage: ringletrun -np N [OPTIONS] CMD ARGS...\n"
      "CMD and everything after it is every rank's command, passed through untouched.\n"
      "Environment: RINGLET_ABORT_GRACE_SECONDS (default 3): after a rank fails, how long\n"
      "the others get to fail on their own before they are sent SIGTERM.");
  // Stop at the first word that is not ours: it and the rest are the command.
  app.prefix_command();

  std::vector<std::string> spelled = spell_np_for_cli11(argc, argv);
  std::vector<char*> cargv;
  for (std::string& s : spelled) cargv.push_back(s.data());
  try {
    app.parse(argc, cargv.data());
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return usage_error(e.what());
  }

  std::size_t rest = app.remaining().size();
  args.command.assign(argv + (argc - static_cast<int>(rest)), argv + argc);
  if (!args.command.empty() && args.command.front() == "--") {
    args.command.erase(args.command.begin());
  } else if (!args.command.empty() && args.command.front().size() > 1 &&
             args.command.front()[0] == '-') {
    return usage_error("unknown option " + args.command.front());
  }
  return std::nullopt;
}

// execvp's search, done up front so that a typo is one clear usage error
// rather than N ranks each failing to start.
bool command_exists(const std::string& cmd) {
  auto runnable = [](const std::string& path) {
    struct stat st;
    return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
           ::access(path.c_str(), X_OK) == 0;
  };
  if (cmd.find('/') != std::string::npos) return runnable(cmd);
  const char* path = std::getenv("PATH");
  std::string_view dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  while (true) {
    std::size_t colon = dirs.find(':');
    std::string dir(dirs.substr(0, colon));
    if (runnable((dir.empty() ? "." : dir) + "/" + cmd)) return true;
    if (colon == std::string_view::npos) return false;
    dirs.remove_prefix(colon + 1);
  }
}

// -H / --hostfile may only describe this host, with enough slots for -np.
std::optional<int> check_hosts(const Args& args, int np) {
  if (args.host_list.empty() && args.hostfile.empty()) return std::nullopt;
  std::vector<HostSlots> hosts;
  std::string flag = args.host_list.empty() ? "--hostfile " + args.hostfile : "-H";
  try {
    if (!args.host_list.empty()) {
      hosts = parse_host_list(args.host_list);
    } else {
      std::ifstream in(args.hostfile);
      if (!in) return usage_error("cannot read the hostfile " + args.hostfile);
      hosts = parse_hostfile(in);
    }
  } catch (const std::invalid_argument& e) {
    return usage_error(flag + ": " + e.what());
  }
  std::string me = this_hostname();
  long slots = 0;
  for (const HostSlots& h : hosts) {
    if (!is_local_host(h.host, me)) {
      std::cerr << "ringletrun: running on other hosts (" << flag << " " << h.host
                << ") is not supported yet\n";
      return kUsageError;
    }
    slots += h.slots;
  }
  if (slots < np) {
    return usage_error("-np " + std::to_string(np) + " needs " + std::to_string(np) +
                       " slots but " + flag + " gives this host " + std::to_string(slots));
  }
  return std::nullopt;
}

// RINGLET_ABORT_GRACE_SECONDS: how long the other ranks get to fail on their
// own after the first one did (they then print errors that name it).
std::optional<std::chrono::milliseconds> abort_grace(std::string& error) {
  const char* v = std::getenv("RINGLET_ABORT_GRACE_SECONDS");
  if (!v || !*v) return std::chrono::milliseconds(3000);
  char* end = nullptr;
  double s = std::strtod(v, &end);
  if (*end != '\0' || !std::isfinite(s) || s < 0 || s > 86400) {
    error = "RINGLET_ABORT_GRACE_SECONDS=" + std::string(v) +
            " is not a number of seconds between 0 and 86400";
    return std::nullopt;
  }
  return std::chrono::milliseconds(static_cast<long long>(s * 1000));
}

// The ranks' settings that come from ringletrun's flags.
void apply_flags(const Args& args, Environment& env) {
  if (!args.timeline.empty()) env.set("HOROVOD_TIMELINE", args.timeline);
  if (!args.network_interface.empty()) env.set("RINGLET_NETWORK_INTERFACE", args.network_interface);
  if (args.fusion_threshold_mb) {
    const double bytes = std::round(*args.fusion_threshold_mb * 1024 * 1024);
    env.set("HOROVOD_FUSION_THRESHOLD", std::to_string(static_cast<long long>(bytes)));
  }
  if (args.cycle_time_ms) {
    std::ostringstream ms;  // "2.5", not std::to_string's "2.500000"
    ms << *args.cycle_time_ms;
    env.set("HOROVOD_CYCLE_TIME", ms.str());
  }
  if (args.cache_capacity) env.set("HOROVOD_CACHE_CAPACITY", std::to_string(*args.cache_capacity));
  if (args.timeline_mark_cycles) env.set("HOROVOD_TIMELINE_MARK_CYCLES", "1");
  if (!args.log_level.empty()) env.set("HOROVOD_LOG_LEVEL", args.log_level);
  if (args.hierarchical_allreduce) env.set("HOROVOD_HIERARCHICAL_ALLREDUCE", "1");
  if (args.no_hierarchical_allreduce) env.set("HOROVOD_HIERARCHICAL_ALLREDUCE", "0");
  // The flag wins; without it a value from the environment stands, else 30 s.
  if (args.start_timeout) {
    env.set("RINGLET_START_TIMEOUT_SECONDS", std::to_string(*args.start_timeout));
  } else if (!env.get("RINGLET_START_TIMEOUT_SECONDS")) {
    env.set("RINGLET_START_TIMEOUT_SECONDS", "30");
  }
}

// --mpi: mpirun starts the ranks, and Ringlet reads OMPI_COMM_WORLD_* there.
int exec_mpirun(const Args& args, int np) {
  if (!command_exists("mpirun")) {
    return usage_error("--mpi needs mpirun on PATH, and there is none");
  }
  Environment env = Environment::from_process();
  apply_flags(args, env);
  std::vector<std::string> argv = {"mpirun"};
  // Open MPI refuses root without this; containers often run as root.
  if (::geteuid() == 0) argv.push_back("--allow-run-as-root");
  argv.push_back("--oversubscribe");  // horovodrun's behaviour: -np may exceed the cores
  argv.insert(argv.end(), {"-np", std::to_string(np)});
  argv.insert(argv.end(), args.command.begin(), args.command.end());
  if (args.verbose) {
    std::string line = "ringletrun: exec";
    for (const auto& a : argv) line += " " + a;
    std::cerr << line << "\n";
  }
  std::vector<std::string> entries = env.entries();
  std::vector<char*> cargv, cenv;
  for (auto& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  for (auto& e : entries) cenv.push_back(e.data());
  cenv.push_back(nullptr);
  ::execvpe("mpirun", cargv.data(), cenv.data());
  std::cerr << "ringletrun: cannot execute mpirun: " << std::strerror(errno) << "\n";
  return 127;
}

int run(int argc, char** argv) {
  Args args;
  if (auto code = parse_args(argc, argv, args)) return *code;
  if (args.check_build) {
    BuildFeatures features = built_features();
    if (features.python) {
      features.torch = python_has_module("torch");
      features.tensorflow = python_has_module("tensorflow");
      features.tf_keras = python_has_module("tf_keras");
    }
    if (features.cuda) count_cuda_devices(features);
    std::cout << format_check_build(features, built_version());
    return 0;
  }
  if (!args.np) return usage_error("-np N is required: the number of ranks to start");
  if (*args.np < 1)
    return usage_error("-np must be at least 1 (got " + std::to_string(*args.np) + ")");
  if (args.command.empty()) return usage_error("no command given");
  if (auto code = check_hosts(args, *args.np)) return *code;
  if (!command_exists(args.command.front())) {
    return usage_error("command not found (or not executable): " + args.command.front());
  }
  if (args.mpi) return exec_mpirun(args, *args.np);

  JobOptions job;
  job.command = args.command;
  job.np = *args.np;
  job.verbose = args.verbose;
  std::string error;
  auto grace = abort_grace(error);
  if (!grace) return usage_error(error);
  job.abort_grace = *grace;
  job.base_env = Environment::from_process();
  apply_flags(args, job.base_env);
  job.identity = make_job_identity();
  if (args.verbose) {
    std::cerr << "ringletrun: job " << job.identity.job_id << ", " << job.np
              << " ranks, rendezvous " << job.identity.rendezvous << "\n";
  }

  // A reader that went away (`ringletrun ... | head`) must not kill the
  // launcher mid-job: its writes just fail, and the ranks keep being drained.
  // Each rank gets SIGPIPE's default back before exec.
  ::signal(SIGPIPE, SIG_IGN);
  int code = run_job(job);
  int removed = remove_shm_leftovers(job.identity.job_id);
  if (args.verbose && removed > 0) {
    std::cerr << "ringletrun: removed " << removed << " leftover /dev/shm/ringlet-"
              << job.identity.job_id << "-* segment(s)\n";
  }
  return code;
}

}  // namespace
}  // namespace ringletrun

int main(int argc, char** argv) {
  try {
    return ringletrun::run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "ringletrun: " << e.what() << "\n";
    return 1;
  }
}
