// A result file's lifecycle: created under a temporary name or as `incomplete`, resumed, and
// committed (renamed into place or marked `complete`), so that under its final name a file is
// complete or absent.
#include "core/store/hdf5_file.hpp"

#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>

namespace moefin::h5 {

using namespace detail;

namespace detail {

/// `.NAME.PID.N.partial` beside `path`: where create() writes before commit() renames (N tells
/// two writers of one process apart).
std::string temporary_name(std::string const& path) {
  static std::atomic<unsigned> counter{0};
  std::filesystem::path const p(path);
  std::string const name = "." + p.filename().string() + "." + std::to_string(::getpid()) + "." +
                           std::to_string(counter++) + ".partial";
  return (p.parent_path() / name).string();
}

/// Renames `from` onto `to`; without `replace`, an existing `to` is an error (checked
/// atomically where the file system can, so two runs cannot both take one name).
void rename_into_place(std::string const& from, std::string const& to, bool replace) {
  if (!replace) {
#ifdef RENAME_NOREPLACE
    if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE) == 0)
      return;
    if (errno == EEXIST)
      throw FileError(to, "exists already (another run wrote it meanwhile)");
    if (errno != EINVAL && errno != ENOSYS && errno != ENOTSUP)
      throw FileError(to, std::string("cannot rename the finished file onto it (") +
                              std::strerror(errno) + ")");
#endif
    if (std::filesystem::exists(to))
      throw FileError(to, "exists already (another run wrote it meanwhile)");
  }
  if (::rename(from.c_str(), to.c_str()) != 0)
    throw FileError(to, std::string("cannot rename the finished file onto it (") +
                            std::strerror(errno) + ")");
}

/// Flushes HDF5's buffers and asks the OS to put the file on disk before it is renamed.
void flush_to_disk(File const& f) {
  f.check(H5Fflush(f.id(), H5F_SCOPE_GLOBAL), "cannot flush");
  Hid fapl(H5Fget_access_plist(f.id()), H5Pclose);
  void* handle = nullptr;
  if (fapl.valid() && H5Pget_driver(fapl.get()) == H5FD_SEC2 &&
      H5Fget_vfd_handle(f.id(), H5P_DEFAULT, &handle) >= 0 && handle)
    ::fsync(*static_cast<int*>(handle));
}

} // namespace detail

namespace {

/// A new HDF5 file at `at` whose first durable content is the state `incomplete`, then `prov`.
std::shared_ptr<File> new_file(std::string const& at, std::string const& final_path,
                               Provenance const& prov) {
  silence_hdf5();
  // The default result files live in out/ (cli::default_out): create the folder on first use.
  std::filesystem::path const parent = std::filesystem::path(at).parent_path();
  if (!parent.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(parent, ec); // H5Fcreate reports what remains wrong
  }
  hid_t id = H5Fcreate(at.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  if (id < 0)
    throw FileError(final_path, "cannot create (is the directory writable?)");
  auto f = std::make_shared<File>(id, final_path);
  write_str_attr(*f, id, kStateAttr, kStateIncomplete);
  f->check(H5Fflush(id, H5F_SCOPE_GLOBAL), "cannot flush");
  for (auto const& kv : prov)
    if (kv.first != kStateAttr)
      write_str_attr(*f, id, kv.first, kv.second);
  f->check(H5Fflush(id, H5F_SCOPE_GLOBAL), "cannot flush");
  return f;
}

void make_parent(std::string const& path) {
  auto const parent = std::filesystem::path(path).parent_path();
  if (parent.empty())
    return;
  std::error_code ec;
  std::filesystem::create_directories(parent, ec);
  if (ec)
    throw FileError(path, "cannot create its directory (" + ec.message() + ")");
}

} // namespace

ResultWriter::ResultWriter(std::shared_ptr<File> f, std::string path, Provenance prov,
                           std::unique_ptr<WriteState> state)
    : file_(std::move(f)), path_(std::move(path)), prov_(std::move(prov)),
      state_(std::move(state)) {
  state_->uncaught = std::uncaught_exceptions();
}

ResultWriter::ResultWriter(ResultWriter&&) noexcept = default;
ResultWriter& ResultWriter::operator=(ResultWriter&& o) noexcept {
  if (this != &o) {
    end_of_scope();
    file_ = std::move(o.file_);
    path_ = std::move(o.path_);
    prov_ = std::move(o.prov_);
    state_ = std::move(o.state_);
  }
  return *this;
}

ResultWriter::~ResultWriter() {
  end_of_scope();
}

void ResultWriter::end_of_scope() noexcept {
  if (!file_ || file_->committed)
    return;
  bool const unwinding = std::uncaught_exceptions() > state_->uncaught;
  if (!unwinding) {
    try {
      commit();
      return;
    } catch (std::exception const& e) {
      std::fprintf(stderr, "moefin: error: %s\n", e.what());
    }
  }
  if (state_->whole) {
    file_.reset(); // closes the file unless a TableWriter still holds it; unlink works either way
    std::error_code ec;
    std::filesystem::remove(state_->temp, ec);
  }
  file_.reset();
}

ResultWriter ResultWriter::create(std::string const& path, Provenance const& prov, bool overwrite) {
  if (!overwrite && std::filesystem::exists(path))
    throw FileError(path, "already exists (use --resume to continue it, or remove it)");
  make_parent(path);
  auto state = std::make_unique<WriteState>();
  state->whole = true;
  state->overwrite = overwrite;
  state->temp = temporary_name(path);
  auto f = new_file(state->temp, path, prov);
  return ResultWriter(std::move(f), path, prov, std::move(state));
}

ResultWriter ResultWriter::create_resumable(std::string const& path, Provenance const& prov) {
  if (std::filesystem::exists(path))
    throw FileError(path, "already exists (use --resume to continue it, or remove it)");
  make_parent(path);
  // Written under a temporary name until the state and the provenance are on disk, so that the
  // final name never holds a file that cannot be resumed.
  std::string const temp = temporary_name(path);
  auto f = new_file(temp, path, prov);
  try {
    rename_into_place(temp, path, /*replace=*/false);
  } catch (...) {
    f.reset();
    std::error_code ec;
    std::filesystem::remove(temp, ec);
    throw;
  }
  return ResultWriter(std::move(f), path, prov, std::make_unique<WriteState>());
}

ResultWriter ResultWriter::resume(std::string const& path) {
  auto f = open_checked(path, H5F_ACC_RDWR, Accept::kIncompleteToo);
  Provenance prov = read_all_attrs(*f, f->id(), "/");
  prov.erase(kStateAttr);
  // Incomplete first and on disk before anything else changes.
  write_str_attr_in_place(*f, f->id(), kStateAttr, kStateIncomplete);
  f->check(H5Fflush(f->id(), H5F_SCOPE_GLOBAL), "cannot flush");
  write_str_attr(*f, f->id(), "resumed_by", command_line());
  write_str_attr(*f, f->id(), "resumed_date_utc", utc_now());
  f->check(H5Fflush(f->id(), H5F_SCOPE_GLOBAL), "cannot flush");
  auto state = std::make_unique<WriteState>();
  state->resumed = true;
  return ResultWriter(std::move(f), path, std::move(prov), std::move(state));
}

ResultWriter ResultWriter::open(std::string const& out_path, std::string const& resume_path,
                                std::uint64_t seed) {
  if (!resume_path.empty())
    return resume(resume_path);
  return create_resumable(out_path, collect_provenance(seed));
}

bool ResultWriter::resumed() const {
  return state_ && state_->resumed;
}

bool ResultWriter::committed() const {
  return file_ && file_->committed;
}

void ResultWriter::commit() {
  if (!file_)
    throw std::logic_error("commit of a moved-from ResultWriter");
  File& f = *file_;
  f.require_open("commit");
  write_str_attr_in_place(f, f.id(), kStateAttr, kStateComplete);
  if (state_->whole) {
    flush_to_disk(f);
    rename_into_place(state_->temp, path_, state_->overwrite);
  } else {
    f.check(H5Fflush(f.id(), H5F_SCOPE_GLOBAL), "cannot flush");
  }
  f.committed = true;
}

std::uint64_t ResultWriter::seed() const {
  auto it = prov_.find("seed");
  if (it == prov_.end())
    throw FileError(path_, "no seed attribute");
  try {
    return std::stoull(it->second);
  } catch (std::exception const&) {
    throw FileError(path_, "seed attribute is not a number: " + it->second);
  }
}

} // namespace moefin::h5
