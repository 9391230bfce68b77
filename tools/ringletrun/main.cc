// ringletrun: starts the ranks of a Ringlet (or Horovod) job on this host and
// on the hosts of -H/--hostfile (through ssh or --rsh), as horovodrun and
// mpirun do, or hands the job to mpirun with --mpi.
//
// Everything after the first word that is not one of ringletrun's options is
// the command, passed through untouched: `ringletrun -np 2 python train.py
// --verbose` gives --verbose to train.py, not to ringletrun.
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "check_build.h"
#include "hosts.h"
#include "job.h"
#include "path_search.h"
#include "remote_agent.h"
#include "slurm.h"

namespace ringletrun {
namespace {

// Usage errors exit with 2, as most command-line tools do.
constexpr int kUsageError = 2;

struct Args {
  std::optional<int> np;
  std::string host_list;
  std::string hostfile;
  std::string rsh;
  std::optional<int> ssh_port;
  std::string ssh_identity_file;
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
  bool hierarchical_allgather = false;
  bool no_hierarchical_allgather = false;
  bool verbose = false;
  bool check_build = false;
  // Elastic jobs (horovodrun's flags): any of these hands the job to the
  // elastic driver (ringlet.runner.elastic_driver).
  std::optional<int> min_np;
  std::optional<int> max_np;
  std::string host_discovery_script;
  std::optional<double> elastic_timeout;
  std::optional<int> reset_limit;
  std::optional<int> blacklist_failures;
  // (lower, upper) seconds; (0, 0) where not given (a given one is at least 1).
  std::pair<int, int> blacklist_cooldown_range{0, 0};
  std::vector<std::string> command;

  bool elastic() const { return min_np || max_np || !host_discovery_script.empty(); }
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
  CLI::App app{"Starts N ranks of a Ringlet or Horovod job on this host or others.", "ringletrun"};
  app.add_option("--np,--num-proc", args.np, "number of ranks (spelled -np, as horovodrun does)");
  auto* hosts = app.add_option("-H,--hosts", args.host_list,
                               "host:slots,... : ranks fill the hosts in this order");
  auto* hostfile = app.add_option("--hostfile", args.hostfile, "file of 'host slots=N' lines");
  hosts->excludes(hostfile);
  app.add_option("--rsh", args.rsh,
                 "the remote shell that starts ranks on other hosts, the host name following "
                 "its words (default: RINGLET_RSH, else 'ssh -o BatchMode=yes -o "
                 "ConnectTimeout=S', S the start timeout)");
  app.add_option("-p,--ssh-port", args.ssh_port, "ssh's port on the other hosts")
      ->check(CLI::Range(1, 65535));
  app.add_option("-i,--ssh-identity-file", args.ssh_identity_file,
                 "ssh's identity file for the other hosts");
  app.add_flag("--mpi", args.mpi, "run the command under mpirun instead");
  app.add_option("--timeline-filename", args.timeline, "sets HOROVOD_TIMELINE for the ranks");
  app.add_option("--network-interface", args.network_interface,
                 "sets RINGLET_NETWORK_INTERFACE for the ranks, and NCCL_SOCKET_IFNAME "
                 "where the environment has none");
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
                   "sets HOROVOD_HIERARCHICAL_ALLREDUCE=1: allreduce within each host, "
                   "across hosts, then within again, at every size (where every host holds "
                   "as many ranks, several each)");
  app.add_flag("--no-hierarchical-allreduce", args.no_hierarchical_allreduce,
               "sets HOROVOD_HIERARCHICAL_ALLREDUCE=0")
      ->excludes(hierarchical);
  auto* hierarchical_gather =
      app.add_flag("--hierarchical-allgather", args.hierarchical_allgather,
                   "sets HOROVOD_HIERARCHICAL_ALLGATHER=1: allgather within each host, across "
                   "hosts, then within again, at every size (where some host holds several ranks)");
  app.add_flag("--no-hierarchical-allgather", args.no_hierarchical_allgather,
               "sets HOROVOD_HIERARCHICAL_ALLGATHER=0")
      ->excludes(hierarchical_gather);
  app.add_option("--min-np", args.min_np,
                 "elastic: the fewest workers the job goes on with (default -np)")
      ->check(CLI::PositiveNumber);
  app.add_option("--max-np", args.max_np, "elastic: the most workers the job grows to")
      ->check(CLI::PositiveNumber);
  app.add_option("--host-discovery-script", args.host_discovery_script,
                 "elastic: a program that prints the job's hosts, one 'host:slots' a line; "
                 "run every second");
  app.add_option("--elastic-timeout", args.elastic_timeout,
                 "elastic: seconds the job waits for --min-np workers (default "
                 "HOROVOD_ELASTIC_TIMEOUT, else 600)")
      ->check(CLI::PositiveNumber);
  app.add_option("--reset-limit", args.reset_limit,
                 "elastic: the most times the job may re-form before it fails")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--blacklist-failures", args.blacklist_failures,
                 "elastic: failed workers after which a host leaves the job (default 1)")
      ->check(CLI::PositiveNumber);
  app.add_option("--blacklist-cooldown-range", args.blacklist_cooldown_range,
                 "elastic: LOWER UPPER seconds: a host that left the job comes back after a "
                 "cooldown, doubling each time, held in this range (default: never)")
      ->check(CLI::Range(1, 3600));
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
  return cmd.find('/') == std::string::npos ? !find_on_path(cmd).empty() : is_executable_file(cmd);
}

// Where each rank runs, from -H / --hostfile (every rank here without them).
// Returns the exit code when the hosts cannot be used.
std::optional<int> place_job(const Args& args, int np, std::vector<RankPlace>& places) {
  if (args.host_list.empty() && args.hostfile.empty()) {
    places = place_here(np);
    return std::nullopt;
  }
  std::string flag = args.host_list.empty() ? "--hostfile " + args.hostfile : "-H";
  try {
    std::vector<HostSlots> hosts;
    if (!args.host_list.empty()) {
      hosts = parse_host_list(args.host_list);
    } else {
      std::ifstream in(args.hostfile);
      if (!in) return usage_error("cannot read the hostfile " + args.hostfile);
      hosts = parse_hostfile(in);
    }
    places = place_ranks(hosts, np, this_hostname());
  } catch (const std::invalid_argument& e) {
    return usage_error(flag + ": " + e.what());
  }
  return std::nullopt;
}

// Where rank 0 serves the rendezvous store, as every rank can reach it:
// loopback for a job on this machine alone, this machine's address on the
// chosen interface when rank 0 is here and others are not, else rank 0's host
// as named (each rank resolves it).
std::string rendezvous_host(const std::vector<RankPlace>& places, const Args& args) {
  const bool spans =
      std::any_of(places.begin(), places.end(), [](const RankPlace& p) { return !p.local(); });
  if (!spans) return "127.0.0.1";
  if (!places.front().local()) return places.front().host;
  std::string interface = args.network_interface;
  if (const char* env = std::getenv("RINGLET_NETWORK_INTERFACE"); interface.empty() && env) {
    interface = env;
  }
  return interface_address(interface);
}

// The ranks' start timeout: --start-timeout, else RINGLET_START_TIMEOUT_SECONDS
// where it is a whole number of seconds (the ranks check it), else 30.
int start_timeout_seconds(const Args& args) {
  if (args.start_timeout) return *args.start_timeout;
  const char* env = std::getenv("RINGLET_START_TIMEOUT_SECONDS");
  if (env != nullptr && *env != '\0') {
    char* end = nullptr;
    const long v = std::strtol(env, &end, 10);
    if (*end == '\0' && v > 0 && v <= 86400) return static_cast<int>(v);
  }
  return 30;
}

// The words that start a command on another host, the host name following them.
std::vector<std::string> remote_shell(const Args& args) {
  std::string text = args.rsh;
  if (text.empty()) {
    const char* env = std::getenv("RINGLET_RSH");
    if (env && *env) text = env;
  }
  std::vector<std::string> words;
  std::istringstream split(text);
  for (std::string w; split >> w;) words.push_back(w);
  if (words.empty()) {
    // ssh's own connect has no deadline (a host that drops packets holds it
    // for minutes): it gets the ranks' start timeout.
    words = {"ssh", "-o", "BatchMode=yes", "-o",
             "ConnectTimeout=" + std::to_string(start_timeout_seconds(args))};
  }
  if (words.front() == "ssh" || words.front().ends_with("/ssh")) {
    if (args.ssh_port) words.insert(words.end(), {"-p", std::to_string(*args.ssh_port)});
    if (!args.ssh_identity_file.empty()) words.insert(words.end(), {"-i", args.ssh_identity_file});
  }
  return words;
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
  if (!args.network_interface.empty()) {
    env.set("RINGLET_NETWORK_INTERFACE", args.network_interface);
    // NCCL picks its own socket interface between hosts, maybe one the other
    // hosts cannot reach: as horovodrun does, the named one is NCCL's too,
    // unless the user chose NCCL's already.
    const std::string* nccl = env.get("NCCL_SOCKET_IFNAME");
    if (nccl == nullptr || nccl->empty()) env.set("NCCL_SOCKET_IFNAME", args.network_interface);
  }
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
  if (args.hierarchical_allgather) env.set("HOROVOD_HIERARCHICAL_ALLGATHER", "1");
  if (args.no_hierarchical_allgather) env.set("HOROVOD_HIERARCHICAL_ALLGATHER", "0");
  // The flag wins; without it a value from the environment stands, else 30 s.
  if (args.start_timeout) {
    env.set("RINGLET_START_TIMEOUT_SECONDS", std::to_string(*args.start_timeout));
  } else if (!env.get("RINGLET_START_TIMEOUT_SECONDS")) {
    env.set("RINGLET_START_TIMEOUT_SECONDS", "30");
  }
}

// Replaces ringletrun with argv[0] (looked up on PATH), given `env`: how the
// job goes to mpirun or srun. Returns only when that fails (127, as a shell).
int exec_handing_over(std::vector<std::string> argv, const Environment& env) {
  std::vector<std::string> entries = env.entries();
  std::vector<char*> cargv, cenv;
  for (auto& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  for (auto& e : entries) cenv.push_back(e.data());
  cenv.push_back(nullptr);
  ::execvpe(cargv[0], cargv.data(), cenv.data());
  std::cerr << "ringletrun: cannot execute " << argv[0] << ": " << std::strerror(errno) << "\n";
  return 127;
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
  // Open MPI reads both as horovodrun does: "host:slots,..." and "host slots=N" lines.
  if (!args.host_list.empty()) argv.insert(argv.end(), {"-H", args.host_list});
  if (!args.hostfile.empty()) argv.insert(argv.end(), {"--hostfile", args.hostfile});
  // Open MPI hands ranks on other hosts only the variables -x names (as
  // horovodrun's mpi_run does): the job's settings, the secret among them,
  // and NCCL's and UCX's travel by name, their values through mpirun's own
  // channel, never on a command line.
  for (const std::string& entry : env.entries()) {
    const std::string name = entry.substr(0, entry.find('='));
    for (std::string_view prefix : {"HOROVOD_", "RINGLET_", "NCCL_", "UCX_"}) {
      if (name.starts_with(prefix)) {
        argv.insert(argv.end(), {"-x", name});
        break;
      }
    }
  }
  // MPI's own TCP traffic on the interface named, as horovodrun does.
  if (!args.network_interface.empty()) {
    argv.insert(argv.end(), {"--mca", "btl_tcp_if_include", args.network_interface});
  }
  argv.insert(argv.end(), args.command.begin(), args.command.end());
  if (args.verbose) {
    std::string line = "ringletrun: exec";
    for (const auto& a : argv) line += " " + a;
    std::cerr << line << "\n";
  }
  return exec_handing_over(argv, env);
}

// This ringletrun's path, which the other hosts are expected to share (as
// horovodrun expects its Python environment on every host).
std::string this_executable() {
  std::error_code ec;
  auto path = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("ringletrun") : path.string();
}

// Inside a Slurm allocation: srun starts the ranks on the allocation's nodes,
// each rank reads Slurm's variables, and the ranks meet at the rendezvous
// named here, on the node srun gives task 0. The secret travels in the
// environment, as srun passes it on, never on a command line.
int exec_srun(const Args& args, int np) {
  Environment env = Environment::from_process();
  apply_flags(args, env);
  // Slurm's names say who each rank is; stale ones of ours would win over them.
  for (std::string_view prefix : {"RINGLET_", "HOROVOD_"}) {
    for (std::string_view what :
         {"RANK", "SIZE", "LOCAL_RANK", "LOCAL_SIZE", "CROSS_RANK", "CROSS_SIZE"}) {
      env.erase(std::string(prefix) + std::string(what));
    }
  }
  const char* nodelist = std::getenv("SLURM_JOB_NODELIST");
  if (!nodelist || !*nodelist) nodelist = std::getenv("SLURM_NODELIST");
  if (!nodelist || !*nodelist) {
    return usage_error(
        "inside a Slurm allocation (SLURM_JOB_ID is set) but SLURM_JOB_NODELIST "
        "is not: cannot tell where srun puts rank 0");
  }
  JobIdentity job;
  try {
    job = make_job_identity(first_slurm_host(nodelist));
  } catch (const std::invalid_argument& e) {
    return usage_error(e.what());
  }
  env.set("RINGLET_RENDEZVOUS", job.rendezvous);
  env.set("RINGLET_SECRET", job.secret);
  env.set("RINGLET_JOB_ID", job.job_id);
  // Every task's lines carry its rank ("3: ..."); a failed task ends the step.
  std::vector<std::string> argv = {"srun", "--ntasks=" + std::to_string(np), "--kill-on-bad-exit=1",
                                   "--label"};
  argv.insert(argv.end(), args.command.begin(), args.command.end());
  if (args.verbose) {
    std::string line = "ringletrun: in Slurm job " + std::string(std::getenv("SLURM_JOB_ID")) +
                       ", rendezvous " + job.rendezvous + ": exec";
    for (const auto& a : argv) line += " " + a;
    std::cerr << line << "\n";
  }
  return exec_handing_over(argv, env);
}

// An elastic job is run by the elastic driver, a Python module, since its
// workers are Python programs (hvd.elastic) in any case: the Python of
// RINGLET_PYTHON (the pip-installed command sets it), else python3.
int exec_elastic_driver(const Args& args) {
  if (args.host_discovery_script.empty()) {
    return usage_error("--min-np/--max-np need --host-discovery-script: the elastic driver "
                       "learns the job's hosts from it");
  }
  if (!args.host_list.empty() || !args.hostfile.empty() || args.mpi) {
    return usage_error("an elastic job takes its hosts from --host-discovery-script, not "
                       "-H, --hostfile or --mpi");
  }
  const char* python = std::getenv("RINGLET_PYTHON");
  std::vector<std::string> argv = {python && *python ? python : "python3", "-m",
                                   "ringlet.runner.elastic_driver",
                                   "--np", std::to_string(*args.np),
                                   "--host-discovery-script", args.host_discovery_script,
                                   "--ringletrun", this_executable()};
  auto add = [&argv](const std::string& flag, const auto& value) {
    if (value) argv.insert(argv.end(), {flag, std::to_string(*value)});
  };
  add("--min-np", args.min_np);
  add("--max-np", args.max_np);
  add("--elastic-timeout", args.elastic_timeout);
  add("--reset-limit", args.reset_limit);
  add("--blacklist-failures", args.blacklist_failures);
  if (const auto& [lower, upper] = args.blacklist_cooldown_range; lower > 0) {
    argv.insert(argv.end(), {"--blacklist-cooldown-range", std::to_string(lower),
                             std::to_string(upper)});
  }
  const std::vector<std::string> rsh = remote_shell(args);
  std::string rsh_words;
  for (const auto& w : rsh) rsh_words += (rsh_words.empty() ? "" : " ") + w;
  argv.insert(argv.end(), {"--rsh", rsh_words});
  if (!args.network_interface.empty()) {
    argv.insert(argv.end(), {"--network-interface", args.network_interface});
  }
  argv.push_back("--");
  argv.insert(argv.end(), args.command.begin(), args.command.end());
  Environment env = Environment::from_process();
  apply_flags(args, env);
  if (args.verbose) {
    std::string line = "ringletrun: elastic job: exec";
    for (const auto& a : argv) line += " " + a;
    std::cerr << line << "\n";
  }
  return exec_handing_over(argv, env);
}

int run(int argc, char** argv) {
  // Not a user's option: the launcher's way in on another host.
  if (argc == 2 && std::string_view(argv[1]) == "--remote-agent") return run_remote_agent();
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
    features.ssh = !find_on_path("ssh").empty();
    features.srun = !find_on_path("srun").empty();
    features.mpirun = !find_on_path("mpirun").empty();
    std::cout << format_check_build(features, built_version());
    return 0;
  }
  if (!args.np) return usage_error("-np N is required: the number of ranks to start");
  if (*args.np < 1)
    return usage_error("-np must be at least 1 (got " + std::to_string(*args.np) + ")");
  if (args.command.empty()) return usage_error("no command given");
  std::vector<RankPlace> places;
  if (auto code = place_job(args, *args.np, places)) return *code;
  const bool spans_hosts =
      std::any_of(places.begin(), places.end(), [](const RankPlace& p) { return !p.local(); });
  // The command is looked for here only when it runs here: another host may
  // have what this one lacks.
  if (!spans_hosts && !command_exists(args.command.front())) {
    return usage_error("command not found (or not executable): " + args.command.front());
  }
  if (args.elastic()) return exec_elastic_driver(args);
  if (args.mpi) return exec_mpirun(args, *args.np);
  // Without hosts named, an allocation's nodes are the hosts (-H localhost:N
  // keeps a job on this node).
  if (args.host_list.empty() && args.hostfile.empty() && in_slurm_allocation() &&
      command_exists("srun")) {
    return exec_srun(args, *args.np);
  }

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
  job.places = places;
  if (spans_hosts) {
    job.remote_shell = remote_shell(args);
    job.agent_path = this_executable();
    job.cwd = std::filesystem::current_path().string();
  }
  try {
    job.identity = make_job_identity(rendezvous_host(places, args));
  } catch (const std::invalid_argument& e) {
    return usage_error(e.what());
  }
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
