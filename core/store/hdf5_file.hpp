#pragma once
// Internal to the result store (core/store/*.cpp): HDF5 handles, the open file, and the checked
// helpers every part of the store uses to read and write attributes, links, extents and the
// compound row type. Nothing outside core/store/ includes this header.

#include "core/ops/errors.hpp"
#include "core/store/h5store.hpp"

#include <hdf5.h>

#include <cstddef>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace moefin::h5 {

namespace detail {

class Hid {
public:
  Hid() = default;
  Hid(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  ~Hid() { reset(); }
  Hid(Hid&& o) noexcept : id_(std::exchange(o.id_, -1)), close_(o.close_) {}
  Hid& operator=(Hid&& o) noexcept {
    if (this != &o) {
      reset();
      id_ = std::exchange(o.id_, -1);
      close_ = o.close_;
    }
    return *this;
  }
  Hid(Hid const&) = delete;
  Hid& operator=(Hid const&) = delete;
  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }
  void reset() {
    if (id_ >= 0 && close_)
      close_(id_);
    id_ = -1;
  }

private:
  hid_t id_ = -1;
  herr_t (*close_)(hid_t) = nullptr;
};

} // namespace detail

class File {
public:
  File(hid_t id, std::string path) : id_(id, H5Fclose), path_(std::move(path)) {}
  hid_t id() const { return id_.get(); }
  std::string const& path() const { return path_; } // the final name, for messages

  /// Set by ResultWriter::commit(): nothing may be written afterwards.
  bool committed = false;
  void require_open(char const* what) const {
    if (committed)
      throw std::logic_error(path_ + ": " + what + " after the file was committed");
  }

  [[noreturn]] void fail(std::string const& what) const { throw FileError(path_, what); }
  hid_t check(hid_t id, std::string const& what) const {
    if (id < 0)
      fail(what);
    return id;
  }
  void check(herr_t rc, std::string const& what) const {
    if (rc < 0)
      fail(what);
  }

private:
  detail::Hid id_;
  std::string path_;
};

/// How create() and create_resumable() finish a file (lifecycle.cpp).
struct WriteState {
  bool whole = false;     // create(): written under `temp`, renamed by commit()
  bool overwrite = false; // create(): the rename may replace an existing file
  std::string temp;
  int uncaught = 0;     // std::uncaught_exceptions() when the writer was made
  bool resumed = false; // resume(): the file held rows of an earlier run
};

namespace detail {

/// HDF5 prints its error stack to stderr by default; moefin reports one line instead.
void silence_hdf5();

// Bounds of what a moefin file holds; anything larger is a damaged or hostile file, rejected
// before a buffer of that size is allocated.
constexpr std::size_t kMaxAttrTextBytes = std::size_t(1) << 20; // a command line, a description
constexpr std::size_t kMaxAttributes = 4096;                    // per object
constexpr int kMaxRank = 8;
constexpr int kMaxColumns = 1024;
constexpr std::size_t kMaxStringColumn = 4096;
// zlib's deflate stores at least one byte per ~1032 bytes of input, so a deflated dataset cannot
// expand by more than this (with margin); unfiltered data cannot expand at all.
constexpr double kMaxDeflateRatio = 1100.0;

// Attributes, links and extents (hdf5_file.cpp).
bool link_exists(hid_t loc, std::string const& name);
void write_str_attr(File const& f, hid_t obj, std::string const& name, std::string const& value);
/// "/" for the root, "/name" for a group: how messages name the object an attribute sits on.
std::string object_name(std::string const& group);
/// Whether `s` is well-formed UTF-8 (no overlong forms, no surrogates, at most U+10FFFF).
bool valid_utf8(std::string const& s);
/// Reads a scalar attribute of a string or numeric type as text; `where` names the object.
std::string read_attr_text(File const& f, hid_t obj, std::string const& where,
                           std::string const& name);
std::map<std::string, std::string> read_all_attrs(File const& f, hid_t obj,
                                                  std::string const& where);
/// Writes a scalar variable-length string attribute in place when it exists with that type (the
/// state flips from incomplete to complete without a moment in which it is absent).
void write_str_attr_in_place(File const& f, hid_t obj, std::string const& name,
                             std::string const& value);
/// Link `name` in `loc` as a plain (hard) link; moefin files hold no soft or external links,
/// which could loop or reach into other files.
bool hard_link_exists(File const& f, hid_t loc, std::string const& where, std::string const& name);
/// Checks that a path "a/b/c" below the root consists of plain links only.
bool plain_path_exists(File const& f, std::string const& path);
/// Bytes the dataset keeps on disk, checked against the file: a dataset cannot hold more
/// elements than its storage can encode (kMaxDeflateRatio with filters, 1 without), and that
/// storage must lie in the file. Called before any buffer of the extent's size is allocated.
void check_extent_fits(File const& f, hid_t dset, std::string const& where, hsize_t elements,
                       std::size_t elem_bytes);
/// Element count of a dataspace of at most kMaxRank dimensions, overflow-checked.
hsize_t extent_of(File const& f, hid_t space, std::string const& where, std::vector<hsize_t>* dims);
Hid open_or_create_group(File const& f, std::string const& group, char const* kind);
/// Extendible 1-D dataset of `type`, chunked.
Hid create_extendible(File const& f, hid_t loc, char const* name, hid_t type, hsize_t chunk);
hsize_t extent_1d(File const& f, hid_t dset);
/// Appends `count` elements of `mem_type` at the end of a 1-D extendible dataset.
void append_1d(File const& f, hid_t dset, hid_t mem_type, void const* data, hsize_t count,
               std::string const& what);

// The compound row type of a table (hdf5_file.cpp).
std::vector<Column> with_store_columns(std::vector<Column> const& columns);
std::size_t column_size(Column const& c);
Hid make_compound(std::vector<Column> const& cols);
/// Columns of a stored compound type, in file order; `where` names the dataset.
std::vector<Column> columns_of(File const& f, hid_t type, std::string const& where);

template <class T> hid_t native_type();
template <> inline hid_t native_type<std::int32_t>() {
  return H5T_NATIVE_INT32;
}
template <> inline hid_t native_type<std::int64_t>() {
  return H5T_NATIVE_INT64;
}
template <> inline hid_t native_type<float>() {
  return H5T_NATIVE_FLOAT;
}
template <> inline hid_t native_type<double>() {
  return H5T_NATIVE_DOUBLE;
}
template <> inline hid_t native_type<std::uint16_t>() {
  return H5T_NATIVE_UINT16;
}
template <> inline hid_t native_type<std::uint8_t>() {
  return H5T_NATIVE_UINT8;
}

// Opening a file to read or resume (probe.cpp).
enum class Accept { kComplete, kIncompleteToo };
/// Opens an HDF5 file and checks that it is a moefin result file in an accepted state, after the
/// probe of its attributes in a child process.
std::shared_ptr<File> open_checked(std::string const& path, unsigned flags, Accept accept);

// The file's lifecycle (lifecycle.cpp).
/// `.NAME.PID.N.partial` beside `path`: where create() writes before commit() renames.
std::string temporary_name(std::string const& path);
/// Renames `from` onto `to`; without `replace`, an existing `to` is an error.
void rename_into_place(std::string const& from, std::string const& to, bool replace);
/// Flushes HDF5's buffers and asks the OS to put the file on disk before it is renamed.
void flush_to_disk(File const& f);

} // namespace detail
} // namespace moefin::h5
