#include "audit/process.hpp"

#include <atomic>
#include <cerrno>
#include <cstring>
#include <exception>
#include <mutex>
#include <thread>

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

namespace moefin::audit {

namespace {

void drain(int fd, std::string& into, bool& open) {
  char buf[65536];
  ssize_t const n = read(fd, buf, sizeof buf);
  if (n > 0)
    into.append(buf, static_cast<std::size_t>(n));
  else if (n == 0 || (errno != EINTR && errno != EAGAIN))
    open = false;
}

} // namespace

ProcessResult run_process(std::vector<std::string> const& argv, std::string const& cwd) {
  ProcessResult r;
  if (argv.empty())
    return r;
  int out_pipe[2], err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0)
    return r;
  if (pipe2(err_pipe, O_CLOEXEC) != 0) {
    close(out_pipe[0]);
    close(out_pipe[1]);
    return r;
  }
  std::vector<char*> args;
  for (auto const& a : argv)
    args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t const pid = fork();
  if (pid == 0) {
    dup2(out_pipe[1], STDOUT_FILENO);
    dup2(err_pipe[1], STDERR_FILENO);
    int const devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0)
      dup2(devnull, STDIN_FILENO);
    if (!cwd.empty() && chdir(cwd.c_str()) != 0)
      _exit(127);
    execvp(args[0], args.data());
    // Only reached when the program could not start.
    char const* msg = std::strerror(errno);
    ssize_t const ignored = write(STDERR_FILENO, msg, std::strlen(msg));
    (void)ignored;
    _exit(127);
  }
  close(out_pipe[1]);
  close(err_pipe[1]);
  if (pid < 0) {
    close(out_pipe[0]);
    close(err_pipe[0]);
    return r;
  }
  bool out_open = true, err_open = true;
  while (out_open || err_open) {
    pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
    int const n = poll(fds, 2, -1);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      break;
    if (out_open && (fds[0].revents & (POLLIN | POLLHUP | POLLERR)))
      drain(out_pipe[0], r.out, out_open);
    if (err_open && (fds[1].revents & (POLLIN | POLLHUP | POLLERR)))
      drain(err_pipe[0], r.err, err_open);
  }
  close(out_pipe[0]);
  close(err_pipe[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status))
    r.status = WEXITSTATUS(status);
  else if (WIFSIGNALED(status))
    r.status = 128 + WTERMSIG(status);
  return r;
}

void parallel_for(std::size_t n, int jobs, std::function<void(std::size_t)> const& job) {
  std::size_t const workers = std::min<std::size_t>(n, static_cast<std::size_t>(std::max(1, jobs)));
  if (workers <= 1) {
    for (std::size_t i = 0; i < n; ++i)
      job(i);
    return;
  }
  std::atomic<std::size_t> next{0};
  std::exception_ptr first;
  std::mutex m;
  std::vector<std::thread> pool;
  for (std::size_t w = 0; w < workers; ++w)
    pool.emplace_back([&] {
      for (;;) {
        std::size_t const i = next++;
        if (i >= n)
          return;
        {
          std::lock_guard<std::mutex> lock(m);
          if (first)
            return;
        }
        try {
          job(i);
        } catch (...) {
          std::lock_guard<std::mutex> lock(m);
          if (!first)
            first = std::current_exception();
        }
      }
    });
  for (auto& t : pool)
    t.join();
  if (first)
    std::rethrow_exception(first);
}

int available_cpus() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0)
    return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

std::string command_text(std::vector<std::string> const& argv) {
  std::string s;
  for (auto const& a : argv) {
    bool const quote = a.empty() || a.find_first_of(" \t'\"") != std::string::npos;
    s += (s.empty() ? "" : " ") + (quote ? "'" + a + "'" : a);
  }
  return s;
}

} // namespace moefin::audit
