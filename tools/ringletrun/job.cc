#include "job.h"

#include <dirent.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <system_error>

#include "agent_wire.h"
#include "child.h"
#include "fd.h"
#include "output_mux.h"

namespace ringletrun {
namespace {

using Clock = std::chrono::steady_clock;

void say(const std::string& line) { write_fully(STDERR_FILENO, "ringletrun: " + line + "\n"); }

const char* signal_name(int sig) {
  switch (sig) {
    case SIGINT:
      return "SIGINT";
    case SIGTERM:
      return "SIGTERM";
    case SIGHUP:
      return "SIGHUP";
    default:
      return "a signal";
  }
}

// The launcher's signals, read as data in the poll loop instead of by
// handlers. They stay blocked after the job: ringletrun only cleans up and
// exits from then on, and a late ^C must not cut the clean-up short.
class SignalFd {
 public:
  SignalFd() {
    // A SIGCHLD ignored by whoever started us is inherited across exec and
    // would make the kernel reap the ranks before their status can be read.
    ::signal(SIGCHLD, SIG_DFL);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    for (int s : {SIGINT, SIGTERM, SIGHUP}) {
      // A stop signal that was ignored on entry (nohup, `cmd &` in a script)
      // stays ignored, for the launcher as for its ranks: a blocked signal is
      // queued even when ignored, so it must not be added to the set.
      struct sigaction old {};
      ::sigaction(s, nullptr, &old);
      if (old.sa_handler != SIG_IGN) sigaddset(&set, s);
    }
    // Blocked before the first fork, so that no SIGCHLD can be lost.
    if (::sigprocmask(SIG_BLOCK, &set, nullptr) != 0) {
      throw std::system_error(errno, std::generic_category(), "sigprocmask");
    }
    fd_.reset(::signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC));
    if (!fd_.valid()) throw std::system_error(errno, std::generic_category(), "signalfd");
  }
  int fd() const { return fd_.get(); }

 private:
  Fd fd_;
};

struct Rank {
  Child child;
  int out_id;  // OutputMux ids
  int err_id;
};

class JobRunner {
 public:
  explicit JobRunner(const JobOptions& o)
      : opt_(o),
        places_(o.places.empty() ? place_here(o.np) : o.places),
        mux_(STDOUT_FILENO, STDERR_FILENO) {}

  int run() {
    ranks_.reserve(static_cast<std::size_t>(opt_.np));
    for (int r = 0; r < opt_.np; ++r) {
      ranks_.push_back(Rank{Child::spawn(spec_of(r)), mux_.add(r, OutputMux::Stream::kStdout),
                            mux_.add(r, OutputMux::Stream::kStderr)});
    }
    if (opt_.verbose) {
      std::string pids;
      for (const Rank& r : ranks_) pids += " " + std::to_string(r.child.pid());
      say("started " + std::to_string(opt_.np) + " ranks, pids" + pids);
    }
    loop();
    if (failure_code_) return *failure_code_;
    if (interrupt_signal_) return 128 + interrupt_signal_;
    return 0;
  }

 private:
  const RankPlace& place_of(int rank) const { return places_[static_cast<std::size_t>(rank)]; }

  ChildSpec spec_of(int rank) const {
    const RankPlace& place = place_of(rank);
    std::vector<std::string> env =
        rank_environment(opt_.base_env, opt_.identity, rank, opt_.np, place);
    ChildSpec spec;
    if (place.local()) {
      spec.argv = opt_.command;
      spec.env = std::move(env);
      // As mpirun does: rank 0 reads the launcher's stdin, the rest read nothing,
      // so that ranks never compete for one terminal.
      spec.inherit_stdin = rank == 0;
      return spec;
    }
    spec.argv = opt_.remote_shell;
    spec.argv.insert(spec.argv.end(), {place.host, opt_.agent_path, "--remote-agent"});
    spec.env = opt_.base_env.entries();
    // The rank's own environment goes through the agent's stdin; the remote
    // shell runs with the launcher's, which holds no job secret.
    std::erase_if(spec.env, [](const std::string& e) { return e.rfind("RINGLET_SECRET=", 0) == 0; });
    AgentLaunch launch{opt_.cwd, opt_.command, {}};
    for (std::string& entry : env) {
      if (forwarded_to_other_hosts(entry)) launch.env.push_back(std::move(entry));
    }
    spec.stdin_data = encode_agent_launch(launch);
    return spec;
  }

  // "rank 3", and its host when the job spans hosts.
  std::string rank_name(int rank) const {
    const RankPlace& place = place_of(rank);
    std::string name = "rank " + std::to_string(rank);
    if (spans_hosts()) name += " (on " + (place.local() ? this_hostname() : place.host) + ")";
    return name;
  }

  bool spans_hosts() const {
    return std::any_of(places_.begin(), places_.end(),
                       [](const RankPlace& p) { return !p.local(); });
  }

  void loop() {
    std::vector<pollfd> fds;
    std::vector<Fd*> pipe_of;  // parallel to fds[1..]
    std::vector<int> mux_of;
    while (true) {
      bool running = std::any_of(ranks_.begin(), ranks_.end(),
                                 [](const Rank& r) { return r.child.running(); });
      if (!running && !drain_deadline_) drain_deadline_ = Clock::now() + opt_.drain_after_exit;
      if (!running && (no_open_pipes() || Clock::now() >= *drain_deadline_)) break;

      fds.assign(1, pollfd{signals_.fd(), POLLIN, 0});
      pipe_of.clear();
      mux_of.clear();
      for (Rank& r : ranks_) {
        for (auto [pipe, id] : {std::pair{&r.child.stdout_pipe(), r.out_id},
                                std::pair{&r.child.stderr_pipe(), r.err_id}}) {
          if (!pipe->valid()) continue;
          fds.push_back(pollfd{pipe->get(), POLLIN, 0});
          pipe_of.push_back(pipe);
          mux_of.push_back(id);
        }
      }
      int n = ::poll(fds.data(), fds.size(), poll_timeout_ms());
      if (n < 0 && errno != EINTR) throw std::system_error(errno, std::generic_category(), "poll");
      if (n > 0) {
        for (std::size_t i = 1; i < fds.size(); ++i) {
          if (fds[i].revents != 0) drain(*pipe_of[i - 1], mux_of[i - 1]);
        }
        if (fds[0].revents != 0) read_signals();
      }
      act_on_deadlines();
    }
    // Output still held open by a rank's leftover background process is cut
    // off here; what was read so far is flushed.
    for (Rank& r : ranks_) {
      close_stream(r.child.stdout_pipe(), r.out_id);
      close_stream(r.child.stderr_pipe(), r.err_id);
    }
  }

  bool no_open_pipes() const {
    return std::none_of(ranks_.begin(), ranks_.end(), [](const Rank& r) {
      return r.child.stdout_pipe().valid() || r.child.stderr_pipe().valid();
    });
  }

  // Reads what the pipe has now, without blocking. A bounded number of reads
  // per wake-up keeps one chatty rank from starving the others.
  void drain(Fd& pipe, int mux_id, int max_reads = 16) {
    char buf[64 * 1024];
    for (int i = 0; i < max_reads && pipe.valid(); ++i) {
      ssize_t n = ::read(pipe.get(), buf, sizeof buf);
      if (n > 0) {
        mux_.feed(mux_id, std::string_view(buf, static_cast<std::size_t>(n)));
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        return;
      } else {
        close_stream(pipe, mux_id);  // EOF, or an error that makes it one
      }
    }
  }

  void close_stream(Fd& pipe, int mux_id) {
    if (!pipe.valid()) return;
    pipe.reset();
    mux_.finish(mux_id);
  }

  void read_signals() {
    signalfd_siginfo si;
    while (::read(signals_.fd(), &si, sizeof si) == static_cast<ssize_t>(sizeof si)) {
      int sig = static_cast<int>(si.ssi_signo);
      if (sig == SIGCHLD) {
        reap();
      } else {
        on_stop_signal(sig, si.ssi_code == SI_KERNEL);
      }
    }
    // SIGCHLDs coalesce, and one may be pending for a child reaped here already;
    // reaping after every wake-up is cheap and cannot miss an exit.
    reap();
  }

  void on_stop_signal(int sig, bool from_terminal) {
    if (interrupt_signal_) {
      say("received " + std::string(signal_name(sig)) + " again, killing the ranks");
      signal_all(SIGKILL);
      return;
    }
    interrupt_signal_ = sig;
    say("received " + std::string(signal_name(sig)) + ", stopping the job");
    // A signal from the terminal (^C) already went to the whole foreground
    // process group, ranks included; sending it again would interrupt their
    // clean-up a second time.
    if (!from_terminal) signal_all(sig);
    term_at_.reset();
    // An earlier SIGKILL deadline (a failure's SIGTERM already went out) stands.
    auto kill_at = Clock::now() + opt_.kill_after_signal;
    if (!kill_at_ || kill_at < *kill_at_) kill_at_ = kill_at;
  }

  void reap() {
    for (std::size_t r = 0; r < ranks_.size(); ++r) {
      Child& c = ranks_[r].child;
      if (!c.running() || !c.try_reap()) continue;
      on_rank_exit(static_cast<int>(r), *c.wait_status());
    }
  }

  void on_rank_exit(int rank, int status) {
    bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    std::string what = rank_name(rank) + " " + describe_wait_status(status);
    bool first_failure = !ok && !failure_code_ && !interrupt_signal_;
    if (first_failure) {
      // Whatever the rank said before it died belongs above the launcher's verdict.
      Rank& r = ranks_[static_cast<std::size_t>(rank)];
      // Bounded all the same: a background process it left may still be writing.
      drain(r.child.stdout_pipe(), r.out_id, 256);
      drain(r.child.stderr_pipe(), r.err_id, 256);
      say(what);
      failure_code_ = exit_code_of(status);
      if (!kill_at_) term_at_ = Clock::now() + opt_.abort_grace;
    } else if (opt_.verbose || (WIFSIGNALED(status) && !signalled_ && !interrupt_signal_)) {
      // A rank killed by a signal the launcher did not send is a cause even
      // when a peer that noticed its death was reaped first.
      say(what);
    }
  }

  void act_on_deadlines() {
    auto now = Clock::now();
    if (term_at_ && now >= *term_at_) {
      term_at_.reset();
      if (any_running()) {
        if (opt_.verbose) say("stopping the remaining ranks (SIGTERM)");
        signal_all(SIGTERM);
        kill_at_ = now + opt_.kill_after;
      }
    }
    if (kill_at_ && now >= *kill_at_) {
      kill_at_.reset();
      if (any_running()) {
        say("ranks still running; sending SIGKILL");
        signal_all(SIGKILL);
      }
    }
  }

  int poll_timeout_ms() const {
    std::optional<Clock::time_point> next;
    for (const auto& d : {term_at_, kill_at_, drain_deadline_}) {
      if (d && (!next || *d < *next)) next = d;
    }
    if (!next) return -1;
    auto left = std::chrono::ceil<std::chrono::milliseconds>(*next - Clock::now()).count();
    return static_cast<int>(std::clamp<long long>(left, 0, 60'000));
  }

  bool any_running() const {
    return std::any_of(ranks_.begin(), ranks_.end(),
                       [](const Rank& r) { return r.child.running(); });
  }

  void signal_all(int sig) {
    signalled_ = true;
    for (const Rank& r : ranks_) r.child.signal(sig);
  }

  const JobOptions& opt_;
  const std::vector<RankPlace> places_;
  SignalFd signals_;  // before ranks_: blocked before the first fork
  OutputMux mux_;
  std::vector<Rank> ranks_;  // destroyed before mux_ and signals_: kills and reaps what is left
  std::optional<int> failure_code_;
  int interrupt_signal_ = 0;
  bool signalled_ = false;  // the launcher has signalled the ranks
  std::optional<Clock::time_point> term_at_;
  std::optional<Clock::time_point> kill_at_;
  std::optional<Clock::time_point> drain_deadline_;
};

}  // namespace

int run_job(const JobOptions& options) { return JobRunner(options).run(); }

int remove_shm_leftovers(const std::string& job_id) {
  if (job_id.empty()) return 0;  // would match every job's segments
  const std::string prefix = "ringlet-" + job_id + "-";
  DIR* dir = ::opendir("/dev/shm");
  if (!dir) return 0;
  int removed = 0;
  while (dirent* e = ::readdir(dir)) {
    if (std::strncmp(e->d_name, prefix.c_str(), prefix.size()) != 0) continue;
    if (::unlinkat(::dirfd(dir), e->d_name, 0) == 0) ++removed;
  }
  ::closedir(dir);
  return removed;
}

}  // namespace ringletrun
