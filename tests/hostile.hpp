#pragma once
// Helpers of the hostile-input and interruption tests (test_fuzz, test_interrupt): running a
// program with a time limit and its output captured, killing it at a chosen moment, and telling
// a crash or a sanitizer report from an orderly exit.

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace moefin::test {

/// How a run ended.
struct Outcome {
  int status = -1;        // exit status when it exited
  int signal = 0;         // the signal that ended it (0 when it exited)
  bool timed_out = false; // killed by the time limit
  std::string out, err;
  double seconds = 0;

  bool crashed() const { return signal != 0 && !timed_out; }
  /// A report of AddressSanitizer, LeakSanitizer or UndefinedBehaviorSanitizer on stderr.
  bool sanitizer_report() const {
    for (char const* s :
         {"AddressSanitizer", "LeakSanitizer", "UndefinedBehaviorSanitizer", "runtime error:"})
      if (err.find(s) != std::string::npos)
        return true;
    return false;
  }
  int lines_of_err() const {
    int n = 0;
    for (char c : err)
      n += c == '\n';
    return n;
  }
};

inline std::string slurp(std::string const& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

/// A child process with stdout and stderr going to files, in a process group of its own (so
/// that it and everything it starts can be killed at once).
class Child {
public:
  Child(std::vector<std::string> const& argv, std::string const& out_file,
        std::string const& err_file) {
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, out_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, 2, err_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawnattr_t at;
    posix_spawnattr_init(&at);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&at, 0);
    std::vector<char*> args;
    std::vector<std::string> copy = argv;
    for (auto& a : copy)
      args.push_back(a.data());
    args.push_back(nullptr);
    int const rc = ::posix_spawn(&pid_, args[0], &fa, &at, args.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    if (rc != 0)
      throw std::runtime_error("cannot start " + argv[0]);
    start_ = Clock::now();
  }
  Child(Child const&) = delete;
  Child& operator=(Child const&) = delete;
  ~Child() {
    if (pid_ > 0) {
      ::kill(-pid_, SIGKILL);
      int st = 0;
      ::waitpid(pid_, &st, 0);
    }
  }

  /// Waits up to `timeout_s`; true when the child ended (its status in `o`).
  bool wait(double timeout_s, Outcome& o) {
    auto const deadline = start_ + std::chrono::duration<double>(timeout_s);
    while (true) {
      int st = 0;
      pid_t const r = ::waitpid(pid_, &st, WNOHANG);
      if (r == pid_) {
        pid_ = -1;
        ::kill(-r, SIGKILL); // whatever it started dies with it
        o.seconds = std::chrono::duration<double>(Clock::now() - start_).count();
        if (WIFEXITED(st))
          o.status = WEXITSTATUS(st);
        else
          o.signal = WTERMSIG(st);
        return true;
      }
      if (Clock::now() >= deadline)
        return false;
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }

  /// SIGKILL to the child's whole process group; returns how it ended (signal 9, or an exit if
  /// it finished first).
  Outcome kill_now() {
    Outcome o;
    ::kill(-pid_, SIGKILL);
    int st = 0;
    ::waitpid(pid_, &st, 0);
    o.seconds = std::chrono::duration<double>(Clock::now() - start_).count();
    if (WIFEXITED(st))
      o.status = WEXITSTATUS(st);
    else
      o.signal = WTERMSIG(st);
    pid_ = -1;
    return o;
  }

private:
  using Clock = std::chrono::steady_clock;
  pid_t pid_ = -1;
  Clock::time_point start_;
};

/// Runs `argv` to completion (killed after `timeout_s`), capturing its output in `scratch`.
inline Outcome run(std::vector<std::string> const& argv, std::string const& scratch,
                   double timeout_s = 60) {
  std::string const out = scratch + ".out", err = scratch + ".err";
  Outcome o;
  {
    Child c(argv, out, err);
    if (!c.wait(timeout_s, o)) {
      o = c.kill_now();
      o.timed_out = true;
    }
  }
  o.out = slurp(out);
  o.err = slurp(err);
  return o;
}

/// A fresh directory under the system temp directory, removed at the end.
struct ScratchDir {
  std::filesystem::path path;
  explicit ScratchDir(std::string const& tag) {
    path = std::filesystem::temp_directory_path() /
           ("moefin_" + tag + "_" + std::to_string(::getpid()));
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~ScratchDir() {
    if (std::getenv("MOEFIN_KEEP_SCRATCH")) // to look at the inputs of a failure
      return;
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::string file(std::string const& name) const { return (path / name).string(); }
};

/// The moefin binary under test: $MOEFIN_TEST_BINARY (e.g. an older build, to show what a test
/// catches), else the one of this build.
inline std::string moefin_binary() {
  if (char const* b = std::getenv("MOEFIN_TEST_BINARY"); b && *b)
    return b;
  return MOEFIN_BINARY;
}

} // namespace moefin::test
