// The hostile-input probe and the checked open: a file's attributes are read once in a child
// process (its address space capped) before this process trusts libhdf5 with them.
#include "core/store/hdf5_file.hpp"

#include <fcntl.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <new>

namespace moefin::h5::detail {

namespace {

/// Every attribute this reader can read: those of the root and of each group below it.
void read_every_attribute(File const& f) {
  read_all_attrs(f, f.id(), "/");
  std::vector<std::string> names;
  auto collect = [](hid_t, char const* n, H5L_info_t const* info, void* op) -> herr_t {
    auto* v = static_cast<std::vector<std::string>*>(op);
    if (v->size() >= kMaxAttributes)
      return -1;
    if (info->type == H5L_TYPE_HARD)
      v->push_back(n);
    return 0;
  };
  hsize_t idx = 0;
  H5Literate(f.id(), H5_INDEX_NAME, H5_ITER_INC, &idx, collect, &names);
  for (auto const& n : names) {
    H5O_info_t info{};
    if (H5Oget_info_by_name2(f.id(), n.c_str(), &info, H5O_INFO_BASIC, H5P_DEFAULT) < 0 ||
        info.type != H5O_TYPE_GROUP)
      continue;
    Hid g(H5Gopen2(f.id(), n.c_str(), H5P_DEFAULT), H5Gclose);
    if (g.valid())
      read_all_attrs(f, g.get(), "/" + n);
  }
}

/// Address space the attribute probe may add to what the process holds: a moefin file's
/// attributes take a few KiB; a damaged variable-length string's length can ask for gigabytes.
constexpr rlim_t kProbeMemory = rlim_t{1} << 30;

/// Caps this process's address space at what it maps now plus kProbeMemory (the child of the
/// probe only: the caller's own reads of large tables stay unbounded).
void cap_probe_memory() {
  std::ifstream statm("/proc/self/statm");
  unsigned long long pages = 0;
  if (!(statm >> pages))
    return;
  rlim_t const now = static_cast<rlim_t>(pages) * static_cast<rlim_t>(::sysconf(_SC_PAGESIZE));
  rlimit lim{};
  if (::getrlimit(RLIMIT_AS, &lim) != 0)
    return;
  rlim_t const cap = now + kProbeMemory;
  if (lim.rlim_max != RLIM_INFINITY && cap > lim.rlim_max)
    return;
  lim.rlim_cur = cap;
  ::setrlimit(RLIMIT_AS, &lim);
}

/// libhdf5 1.10 trusts sizes it reads from a file: a damaged global heap (where variable-length
/// strings live) makes H5Aread copy past its buffer and crash, or convert a string whose length
/// field says gigabytes (one fuzzed file asked for 12 GiB, zeroed for a minute). So the
/// attributes are read once in a child process first, its address space capped at kProbeMemory
/// more than it starts with; if the child dies or runs out of that memory, the file is reported
/// as damaged instead of taking this process down. The child's stderr is discarded (what it
/// would print is the library's crash); a problem it reports in an orderly way is found again by
/// the caller.
void probe_metadata(std::string const& path) {
  constexpr int kProbeOk = 0, kProbeFileError = 3, kProbeNoMemory = 4;
  std::fflush(nullptr);
  pid_t const pid = ::fork();
  if (pid < 0)
    return; // no probe possible (out of processes): read directly
  if (pid == 0) {
    int const null = ::open("/dev/null", O_WRONLY);
    if (null >= 0)
      ::dup2(null, 2);
    cap_probe_memory();
    int code = kProbeOk;
    errno = 0;
    try {
      hid_t const id = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
      if (id >= 0) {
        File f(id, path);
        read_every_attribute(f);
      }
    } catch (std::bad_alloc const&) {
      code = kProbeNoMemory;
    } catch (...) {
      // The library's failed allocation leaves ENOMEM (malloc sets it; nothing after resets it).
      code = errno == ENOMEM ? kProbeNoMemory : kProbeFileError;
    }
    ::_exit(code);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR)
      return;
  if (WIFEXITED(status) &&
      (WEXITSTATUS(status) == kProbeOk || WEXITSTATUS(status) == kProbeFileError))
    return;
  if (WIFEXITED(status) && WEXITSTATUS(status) == kProbeNoMemory)
    throw FileError(path, "damaged: reading its attributes asks for more than " +
                              std::to_string(kProbeMemory >> 20) +
                              " MiB (a corrupt string length or heap)");
  throw FileError(path, "damaged: the HDF5 library crashes reading its attributes (a corrupt "
                        "heap or object header)");
}

} // namespace

std::shared_ptr<File> open_checked(std::string const& path, unsigned flags, Accept accept) {
  silence_hdf5();
  {
    std::error_code ec;
    auto const st = std::filesystem::status(path, ec);
    if (ec || !std::filesystem::exists(st))
      throw FileError(path, "cannot open for reading (missing or unreadable)");
    if (!std::filesystem::is_regular_file(st))
      throw FileError(path, "not a regular file");
    std::ifstream probe(path, std::ios::binary);
    if (!probe)
      throw FileError(path, "cannot open for reading (missing or unreadable)");
  }
  htri_t const is = H5Fis_hdf5(path.c_str());
  if (is <= 0)
    throw FileError(path, "not an HDF5 file");
  probe_metadata(path);
  hid_t id = H5Fopen(path.c_str(), flags, H5P_DEFAULT);
  if (id < 0)
    throw FileError(path, "HDF5 library cannot open it (truncated or damaged?)");
  auto f = std::make_shared<File>(id, path);
  if (H5Aexists(id, "moefin_schema") <= 0)
    f->fail("not a moefin result file (no moefin_schema attribute)");
  std::string const schema = read_attr_text(*f, id, "/", "moefin_schema");
  if (schema != kSchema)
    f->fail("unsupported schema '" + schema.substr(0, 80) + "' (this moefin reads " + kSchema +
            ")");
  htri_t const has_state = H5Aexists(id, kStateAttr);
  if (has_state < 0)
    f->fail("cannot read the root attributes (damaged?)");
  if (has_state > 0) {
    std::string const state = read_attr_text(*f, id, "/", kStateAttr);
    if (state == kStateIncomplete) {
      if (accept != Accept::kIncompleteToo)
        f->fail(std::string("incomplete (moefin_state = incomplete: the run writing it was "
                            "interrupted or is still running; continue it with --resume ") +
                path + ")");
    } else if (state != kStateComplete) {
      f->fail("unknown moefin_state '" + state.substr(0, 80) +
              "' (expected complete or "
              "incomplete)");
    }
  }
  return f;
}

} // namespace moefin::h5::detail
