#include "core/h5store.hpp"

#include "core/build_info.hpp"
#include "core/device_info.hpp"
#include "core/ops/errors.hpp"

#include <hdf5.h>

#include <fcntl.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <exception>
#include <filesystem>
#include <fstream>
#include <limits>
#include <new>
#include <stdexcept>
#include <utility>

namespace moefin::h5 {

// ---------------------------------------------------------------------------------------------
// Handles and error plumbing

namespace {

/// HDF5 prints its error stack to stderr by default; moefin reports one line instead.
void silence_hdf5() {
  static bool const done = [] {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    return true;
  }();
  (void)done;
}

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

std::string host_name() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof(buf) - 1) != 0)
    return "unknown";
  return buf;
}

std::string g_command_line = "(not recorded)";

} // namespace

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
  Hid id_;
  std::string path_;
};

namespace {

bool link_exists(hid_t loc, std::string const& name) {
  return H5Lexists(loc, name.c_str(), H5P_DEFAULT) > 0;
}

void write_str_attr(File const& f, hid_t obj, std::string const& name, std::string const& value) {
  if (H5Aexists(obj, name.c_str()) > 0)
    f.check(H5Adelete(obj, name.c_str()), "cannot replace attribute " + name);
  Hid type(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(type.get(), H5T_VARIABLE);
  H5Tset_cset(type.get(), H5T_CSET_UTF8);
  Hid space(H5Screate(H5S_SCALAR), H5Sclose);
  Hid attr(f.check(H5Acreate2(obj, name.c_str(), type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT),
                   "cannot create attribute " + name),
           H5Aclose);
  char const* ptr = value.c_str();
  f.check(H5Awrite(attr.get(), type.get(), &ptr), "cannot write attribute " + name);
}

/// "/" for the root, "/name" for a group: how messages name the object an attribute sits on.
std::string object_name(std::string const& group) {
  if (group.empty() || group == "/")
    return "/";
  return group[0] == '/' ? group : "/" + group;
}

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

/// Whether `s` is well-formed UTF-8 (no overlong forms, no surrogates, at most U+10FFFF).
bool valid_utf8(std::string const& s) {
  auto const* p = reinterpret_cast<unsigned char const*>(s.data());
  std::size_t const n = s.size();
  for (std::size_t i = 0; i < n;) {
    unsigned const c = p[i];
    std::size_t len = 0;
    unsigned cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c >> 5) == 0x6) {
      len = 2;
      cp = c & 0x1f;
    } else if ((c >> 4) == 0xe) {
      len = 3;
      cp = c & 0x0f;
    } else if ((c >> 3) == 0x1e) {
      len = 4;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + len > n)
      return false;
    for (std::size_t k = 1; k < len; ++k) {
      if ((p[i + k] >> 6) != 0x2)
        return false;
      cp = (cp << 6) | (p[i + k] & 0x3f);
    }
    unsigned const min[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
      return false;
    i += len;
  }
  return true;
}

/// The text of a scalar string attribute, variable or fixed length.
std::string read_attr_string(File const& f, hid_t attr, hid_t type, std::string const& what) {
  htri_t const vlen = H5Tis_variable_str(type);
  if (vlen < 0)
    f.fail("cannot read the string type of " + what + " (damaged?)");
  if (vlen > 0) {
    Hid mem(H5Tcopy(H5T_C_S1), H5Tclose);
    H5Tset_size(mem.get(), H5T_VARIABLE);
    H5Tset_cset(mem.get(), H5Tget_cset(type) == H5T_CSET_UTF8 ? H5T_CSET_UTF8 : H5T_CSET_ASCII);
    char* ptr = nullptr;
    if (H5Aread(attr, mem.get(), &ptr) < 0)
      f.fail("cannot read " + what + " (damaged?)");
    std::string out;
    if (ptr) {
      std::size_t const n = strnlen(ptr, kMaxAttrTextBytes + 1);
      bool const too_long = n > kMaxAttrTextBytes;
      if (!too_long)
        out.assign(ptr, n);
      H5free_memory(ptr);
      if (too_long)
        f.fail(what + " is longer than " + std::to_string(kMaxAttrTextBytes) + " bytes");
    }
    return out;
  }
  std::size_t const n = H5Tget_size(type);
  if (n == 0 || n > kMaxAttrTextBytes)
    f.fail(what + " is a fixed string of " + std::to_string(n) + " bytes (expected 1.." +
           std::to_string(kMaxAttrTextBytes) + ")");
  // Read through a type of our own: the stored one may be space-padded or of another cset.
  Hid mem(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(mem.get(), n + 1);
  H5Tset_strpad(mem.get(), H5T_STR_NULLTERM);
  std::string buf(n + 1, '\0');
  if (H5Aread(attr, mem.get(), buf.data()) < 0)
    f.fail("cannot read " + what + " (damaged?)");
  buf.resize(strnlen(buf.c_str(), n));
  return buf;
}

/// Reads a scalar attribute of a string or numeric type as text; `where` names the object.
std::string read_attr_text(File const& f, hid_t obj, std::string const& where,
                           std::string const& name) {
  std::string const what = "attribute '" + name + "' of " + where;
  Hid attr(H5Aopen(obj, name.c_str(), H5P_DEFAULT), H5Aclose);
  if (!attr.valid())
    f.fail("cannot open " + what + " (damaged?)");
  Hid space(H5Aget_space(attr.get()), H5Sclose);
  if (!space.valid())
    f.fail("cannot read the dataspace of " + what + " (damaged?)");
  H5S_class_t const sc = H5Sget_simple_extent_type(space.get());
  hssize_t const points = H5Sget_simple_extent_npoints(space.get());
  if (sc == H5S_NULL || points == 0)
    f.fail(what + " has no value");
  if ((sc != H5S_SCALAR && sc != H5S_SIMPLE) || points != 1)
    f.fail(what + " is an array of " + std::to_string(points) +
           " values (expected a single string)");
  Hid type(H5Aget_type(attr.get()), H5Tclose);
  if (!type.valid())
    f.fail("cannot read the type of " + what + " (damaged?)");
  H5T_class_t const cls = H5Tget_class(type.get());
  if (cls == H5T_STRING) {
    std::string const text = read_attr_string(f, attr.get(), type.get(), what);
    // The schema's strings are UTF-8 (data/README.md); analysis/ reads them as such.
    if (!valid_utf8(text))
      f.fail(what + " is not valid UTF-8");
    return text;
  }
  if (cls == H5T_INTEGER) {
    if (H5Tget_size(type.get()) > 8)
      f.fail(what + " is an integer wider than 64 bits");
    bool const is_unsigned = H5Tget_sign(type.get()) == H5T_SGN_NONE;
    if (is_unsigned) {
      unsigned long long v = 0;
      if (H5Aread(attr.get(), H5T_NATIVE_ULLONG, &v) < 0)
        f.fail("cannot read " + what + " (damaged?)");
      return std::to_string(v);
    }
    long long v = 0;
    if (H5Aread(attr.get(), H5T_NATIVE_LLONG, &v) < 0)
      f.fail("cannot read " + what + " (damaged?)");
    return std::to_string(v);
  }
  if (cls == H5T_FLOAT) {
    if (H5Tget_size(type.get()) > 8)
      f.fail(what + " is a float wider than 64 bits");
    double v = 0;
    if (H5Aread(attr.get(), H5T_NATIVE_DOUBLE, &v) < 0)
      f.fail("cannot read " + what + " (damaged?)");
    return std::to_string(v);
  }
  f.fail(what + " is neither a string nor a number (HDF5 type class " + std::to_string(cls) + ")");
}

std::map<std::string, std::string> read_all_attrs(File const& f, hid_t obj,
                                                  std::string const& where) {
  H5O_info_t info{};
  if (H5Oget_info2(obj, &info, H5O_INFO_NUM_ATTRS) < 0)
    f.fail("cannot read the header of " + where + " (damaged?)");
  if (info.num_attrs > kMaxAttributes)
    f.fail(where + " has " + std::to_string(info.num_attrs) + " attributes (at most " +
           std::to_string(kMaxAttributes) + ")");
  std::vector<std::string> names;
  auto collect = [](hid_t, char const* n, H5A_info_t const*, void* op) -> herr_t {
    auto* v = static_cast<std::vector<std::string>*>(op);
    if (v->size() >= kMaxAttributes)
      return -1;
    v->push_back(n);
    return 0;
  };
  hsize_t idx = 0;
  if (H5Aiterate2(obj, H5_INDEX_NAME, H5_ITER_INC, &idx, collect, &names) < 0)
    f.fail("cannot list the attributes of " + where + " (damaged?)");
  std::map<std::string, std::string> out;
  for (auto const& n : names)
    out[n] = read_attr_text(f, obj, where, n);
  return out;
}

/// Writes a scalar variable-length string attribute in place when it exists with that type (the
/// state flips from incomplete to complete without a moment in which it is absent).
void write_str_attr_in_place(File const& f, hid_t obj, std::string const& name,
                             std::string const& value) {
  Hid type(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(type.get(), H5T_VARIABLE);
  H5Tset_cset(type.get(), H5T_CSET_UTF8);
  if (H5Aexists(obj, name.c_str()) > 0) {
    Hid attr(H5Aopen(obj, name.c_str(), H5P_DEFAULT), H5Aclose);
    Hid stored(attr.valid() ? H5Aget_type(attr.get()) : -1, H5Tclose);
    Hid space(attr.valid() ? H5Aget_space(attr.get()) : -1, H5Sclose);
    if (stored.valid() && space.valid() && H5Tget_class(stored.get()) == H5T_STRING &&
        H5Tis_variable_str(stored.get()) > 0 &&
        H5Sget_simple_extent_type(space.get()) == H5S_SCALAR) {
      char const* ptr = value.c_str();
      f.check(H5Awrite(attr.get(), type.get(), &ptr), "cannot write attribute " + name);
      return;
    }
  }
  write_str_attr(f, obj, name, value);
}

/// Link `name` in `loc` as a plain (hard) link; moefin files hold no soft or external links,
/// which could loop or reach into other files.
bool hard_link_exists(File const& f, hid_t loc, std::string const& where, std::string const& name) {
  htri_t const e = H5Lexists(loc, name.c_str(), H5P_DEFAULT);
  if (e <= 0)
    return false;
  H5L_info_t info{};
  if (H5Lget_info(loc, name.c_str(), &info, H5P_DEFAULT) < 0)
    f.fail("cannot read the link " + where + " (damaged?)");
  if (info.type != H5L_TYPE_HARD)
    f.fail(where + " is " + (info.type == H5L_TYPE_SOFT ? "a soft" : "an external") +
           " link (moefin files hold only plain groups and datasets)");
  return true;
}

/// Checks that a path "a/b/c" below the root consists of plain links only.
bool plain_path_exists(File const& f, std::string const& path) {
  std::string prefix;
  std::size_t start = path[0] == '/' ? 1 : 0;
  while (start <= path.size()) {
    std::size_t const slash = path.find('/', start);
    std::string const part = path.substr(start, slash == std::string::npos ? slash : slash - start);
    if (part.empty())
      return false;
    prefix += "/" + part;
    if (!hard_link_exists(f, f.id(), prefix, prefix))
      return false;
    if (slash == std::string::npos)
      break;
    start = slash + 1;
  }
  return true;
}

/// Bytes the dataset keeps on disk, checked against the file: a dataset cannot hold more
/// elements than its storage can encode (kMaxDeflateRatio with filters, 1 without), and that
/// storage must lie in the file. Called before any buffer of the extent's size is allocated.
void check_extent_fits(File const& f, hid_t dset, std::string const& where, hsize_t elements,
                       std::size_t elem_bytes) {
  if (elements == 0)
    return;
  double const logical = static_cast<double>(elements) * static_cast<double>(elem_bytes);
  hsize_t const stored = H5Dget_storage_size(dset);
  hsize_t file_size = 0;
  if (H5Fget_filesize(f.id(), &file_size) < 0)
    f.fail("cannot read the file size");
  Hid dcpl(H5Dget_create_plist(dset), H5Pclose);
  if (!dcpl.valid())
    f.fail("cannot read the storage properties of " + where + " (damaged?)");
  int const filters = H5Pget_nfilters(dcpl.get());
  if (filters < 0)
    f.fail("cannot read the filters of " + where + " (damaged?)");
  for (int i = 0; i < filters; ++i) {
    unsigned flags = 0;
    std::size_t nelem = 0;
    unsigned config = 0;
    H5Z_filter_t const id = H5Pget_filter2(dcpl.get(), static_cast<unsigned>(i), &flags, &nelem,
                                           nullptr, 0, nullptr, &config);
    if (id != H5Z_FILTER_DEFLATE && id != H5Z_FILTER_SHUFFLE && id != H5Z_FILTER_FLETCHER32)
      f.fail(where + " uses the HDF5 filter " + std::to_string(id) +
             " (moefin reads deflate, shuffle and fletcher32 only)");
  }
  if (stored > file_size)
    f.fail(where + " claims " + std::to_string(stored) + " stored bytes in a file of " +
           std::to_string(file_size) + " (truncated or damaged?)");
  double const ratio = filters > 0 ? kMaxDeflateRatio : 1.0;
  if (logical > ratio * static_cast<double>(stored))
    f.fail(where + " claims " + std::to_string(elements) + " elements (" +
           std::to_string(static_cast<unsigned long long>(logical)) + " bytes) but stores " +
           std::to_string(stored) + " bytes (damaged?)");
}

/// Element count of a dataspace of at most kMaxRank dimensions, overflow-checked.
hsize_t extent_of(File const& f, hid_t space, std::string const& where,
                  std::vector<hsize_t>* dims) {
  H5S_class_t const sc = H5Sget_simple_extent_type(space);
  if (sc == H5S_NULL) {
    dims->clear();
    return 0;
  }
  if (sc != H5S_SCALAR && sc != H5S_SIMPLE)
    f.fail("cannot read the dataspace of " + where + " (damaged?)");
  int const nd = H5Sget_simple_extent_ndims(space);
  if (nd < 0 || nd > kMaxRank)
    f.fail(where + " has rank " + std::to_string(nd) + " (at most " + std::to_string(kMaxRank) +
           ")");
  dims->assign(static_cast<std::size_t>(nd), 0);
  if (nd > 0 && H5Sget_simple_extent_dims(space, dims->data(), nullptr) < 0)
    f.fail("cannot read the extent of " + where + " (damaged?)");
  hsize_t n = 1;
  for (hsize_t d : *dims) {
    if (d != 0 && n > std::numeric_limits<hsize_t>::max() / d)
      f.fail(where + " has an extent whose element count overflows");
    n *= d;
  }
  return n;
}

Hid open_or_create_group(File const& f, std::string const& group, char const* kind) {
  if (group == "/" || group.empty())
    return Hid(f.check(H5Gopen2(f.id(), "/", H5P_DEFAULT), "cannot open root group"), H5Gclose);
  if (link_exists(f.id(), group))
    return Hid(f.check(H5Gopen2(f.id(), group.c_str(), H5P_DEFAULT), "cannot open group " + group),
               H5Gclose);
  Hid g(f.check(H5Gcreate2(f.id(), group.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                "cannot create group " + group),
        H5Gclose);
  write_str_attr(f, g.get(), "kind", kind);
  return g;
}

/// Extendible 1-D dataset of `type`, chunked.
Hid create_extendible(File const& f, hid_t loc, char const* name, hid_t type, hsize_t chunk) {
  hsize_t dims[1] = {0};
  hsize_t maxdims[1] = {H5S_UNLIMITED};
  Hid space(H5Screate_simple(1, dims, maxdims), H5Sclose);
  Hid plist(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
  hsize_t chunks[1] = {chunk};
  H5Pset_chunk(plist.get(), 1, chunks);
  return Hid(
      f.check(H5Dcreate2(loc, name, type, space.get(), H5P_DEFAULT, plist.get(), H5P_DEFAULT),
              std::string("cannot create dataset ") + name),
      H5Dclose);
}

hsize_t extent_1d(File const& f, hid_t dset) {
  Hid space(H5Dget_space(dset), H5Sclose);
  if (H5Sget_simple_extent_ndims(space.get()) != 1)
    f.fail("table dataset is not one-dimensional");
  hsize_t dims[1] = {0};
  H5Sget_simple_extent_dims(space.get(), dims, nullptr);
  return dims[0];
}

/// Appends `count` elements of `mem_type` at the end of a 1-D extendible dataset.
void append_1d(File const& f, hid_t dset, hid_t mem_type, void const* data, hsize_t count,
               std::string const& what) {
  if (count == 0)
    return;
  hsize_t const old = extent_1d(f, dset);
  hsize_t newdims[1] = {old + count};
  f.check(H5Dset_extent(dset, newdims), "cannot extend " + what);
  Hid fspace(H5Dget_space(dset), H5Sclose);
  hsize_t start[1] = {old};
  hsize_t cnt[1] = {count};
  f.check(H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, start, nullptr, cnt, nullptr),
          "cannot select rows of " + what);
  Hid mspace(H5Screate_simple(1, cnt, nullptr), H5Sclose);
  f.check(H5Dwrite(dset, mem_type, mspace.get(), fspace.get(), H5P_DEFAULT, data),
          "cannot write " + what);
}

std::vector<Column> with_store_columns(std::vector<Column> const& columns) {
  std::vector<Column> all{str_col("key", 160), int_col("sample_offset"), int_col("sample_count")};
  for (auto const& c : columns) {
    if (c.name == "key" || c.name == "sample_offset" || c.name == "sample_count")
      throw std::invalid_argument("column name reserved by the store: " + c.name);
    if (c.type == ColType::kString && c.str_len < 2)
      throw std::invalid_argument("string column needs a length: " + c.name);
    all.push_back(c);
  }
  return all;
}

std::size_t column_size(Column const& c) {
  return c.type == ColType::kString ? c.str_len : 8;
}

Hid make_compound(std::vector<Column> const& cols) {
  std::size_t total = 0;
  for (auto const& c : cols)
    total += column_size(c);
  Hid type(H5Tcreate(H5T_COMPOUND, total), H5Tclose);
  std::size_t off = 0;
  for (auto const& c : cols) {
    if (c.type == ColType::kString) {
      Hid s(H5Tcopy(H5T_C_S1), H5Tclose);
      H5Tset_size(s.get(), c.str_len);
      H5Tset_strpad(s.get(), H5T_STR_NULLTERM);
      H5Tinsert(type.get(), c.name.c_str(), off, s.get());
    } else {
      H5Tinsert(type.get(), c.name.c_str(), off,
                c.type == ColType::kInt64 ? H5T_NATIVE_INT64 : H5T_NATIVE_DOUBLE);
    }
    off += column_size(c);
  }
  return type;
}

/// Columns of a stored compound type, in file order; `where` names the dataset.
std::vector<Column> columns_of(File const& f, hid_t type, std::string const& where) {
  if (H5Tget_class(type) != H5T_COMPOUND)
    f.fail(where + " is not a compound dataset");
  int const n = H5Tget_nmembers(type);
  if (n < 0 || n > kMaxColumns)
    f.fail(where + " has " + std::to_string(n) + " columns (at most " +
           std::to_string(kMaxColumns) + ")");
  std::vector<Column> cols;
  std::set<std::string> names;
  for (int i = 0; i < n; ++i) {
    char* name = H5Tget_member_name(type, static_cast<unsigned>(i));
    if (!name)
      f.fail("cannot read the name of column " + std::to_string(i) + " of " + where);
    Column c;
    c.name = name;
    H5free_memory(name);
    if (!names.insert(c.name).second)
      f.fail(where + " has two columns named '" + c.name + "'");
    Hid mt(H5Tget_member_type(type, static_cast<unsigned>(i)), H5Tclose);
    if (!mt.valid())
      f.fail("cannot read the type of column " + c.name + " of " + where);
    std::size_t const size = H5Tget_size(mt.get());
    switch (H5Tget_class(mt.get())) {
    case H5T_INTEGER:
      if (size == 0 || size > 8)
        f.fail("column " + c.name + " of " + where + " is an integer of " + std::to_string(size) +
               " bytes");
      c.type = ColType::kInt64;
      break;
    case H5T_FLOAT:
      if (size == 0 || size > 8)
        f.fail("column " + c.name + " of " + where + " is a float of " + std::to_string(size) +
               " bytes");
      c.type = ColType::kFloat64;
      break;
    case H5T_STRING:
      if (H5Tis_variable_str(mt.get()) != 0)
        f.fail("column " + c.name + " of " + where +
               " is a variable-length string (not a moefin table)");
      if (size < 1 || size > kMaxStringColumn)
        f.fail("column " + c.name + " of " + where + " is a string of " + std::to_string(size) +
               " bytes (expected 1.." + std::to_string(kMaxStringColumn) + ")");
      c.type = ColType::kString;
      c.str_len = size;
      break;
    default:
      f.fail("column " + c.name + " of " + where + " has an unsupported type");
    }
    cols.push_back(c);
  }
  return cols;
}

template <class T> hid_t native_type();
template <> hid_t native_type<std::int32_t>() {
  return H5T_NATIVE_INT32;
}
template <> hid_t native_type<std::int64_t>() {
  return H5T_NATIVE_INT64;
}
template <> hid_t native_type<float>() {
  return H5T_NATIVE_FLOAT;
}
template <> hid_t native_type<double>() {
  return H5T_NATIVE_DOUBLE;
}
template <> hid_t native_type<std::uint16_t>() {
  return H5T_NATIVE_UINT16;
}
template <> hid_t native_type<std::uint8_t>() {
  return H5T_NATIVE_UINT8;
}

template <class T>
void write_array_impl(File const& f, std::string const& group, std::string const& name,
                      std::vector<T> const& data, std::vector<std::size_t> const& dims) {
  std::size_t numel = 1;
  for (auto d : dims)
    numel *= d;
  if (dims.empty() || numel != data.size())
    throw std::invalid_argument("write_array " + group + "/" + name + ": " +
                                std::to_string(data.size()) + " elements do not fill the dims");
  f.require_open("write_array");
  Hid g = open_or_create_group(f, group, "arrays");
  if (link_exists(g.get(), name))
    f.check(H5Ldelete(g.get(), name.c_str(), H5P_DEFAULT), "cannot replace " + name);
  std::vector<hsize_t> hd(dims.begin(), dims.end());
  Hid space(H5Screate_simple(static_cast<int>(hd.size()), hd.data(), nullptr), H5Sclose);
  Hid plist(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
  if (numel >= 4096) {
    // Chunk along the first axis so committed files stay small (deflate is in every HDF5 build).
    std::vector<hsize_t> chunk = hd;
    std::size_t row = numel / std::max<std::size_t>(dims[0], 1);
    chunk[0] =
        std::max<hsize_t>(1, std::min<hsize_t>(hd[0], (1u << 16) / std::max<std::size_t>(row, 1)));
    H5Pset_chunk(plist.get(), static_cast<int>(chunk.size()), chunk.data());
    H5Pset_deflate(plist.get(), 4);
  }
  Hid dset(f.check(H5Dcreate2(g.get(), name.c_str(), native_type<T>(), space.get(), H5P_DEFAULT,
                              plist.get(), H5P_DEFAULT),
                   "cannot create dataset " + group + "/" + name),
           H5Dclose);
  if (numel > 0)
    f.check(H5Dwrite(dset.get(), native_type<T>(), H5S_ALL, H5S_ALL, H5P_DEFAULT, data.data()),
            "cannot write dataset " + group + "/" + name);
  f.check(H5Fflush(f.id(), H5F_SCOPE_GLOBAL), "cannot flush");
}

enum class Accept { kComplete, kIncompleteToo };

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

/// Opens an HDF5 file and checks that it is a moefin result file in an accepted state.
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

} // namespace

// ---------------------------------------------------------------------------------------------
// Provenance

std::string utc_now() {
  std::time_t const t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

void set_command_line(int argc, char** argv) {
  std::string s;
  for (int i = 0; i < argc; ++i) {
    if (i)
      s += ' ';
    std::string a = argv[i];
    if (a.find_first_of(" \t\"'") != std::string::npos)
      a = "'" + a + "'";
    s += a;
  }
  g_command_line = s;
}

std::string const& command_line() {
  return g_command_line;
}

Provenance collect_provenance(std::uint64_t seed) {
  BuildInfo const& b = build_info();
  DeviceInfo const d = query_device();
  Provenance p;
  p["moefin_schema"] = kSchema;
  p["moefin_version"] = b.version;
  p["git_commit"] = b.git_commit;
  p["command_line"] = command_line();
  p["seed"] = std::to_string(seed);
  p["date_utc"] = utc_now();
  p["host"] = host_name();
  p["compiler"] = b.cxx_compiler;
  p["cuda_compiler_version"] = b.cuda_version;
  p["cuda_architectures"] = b.cuda_architectures;
  p["kokkos_version"] = b.kokkos_version;
  p["hdf5_version"] = b.hdf5_version;
  p["build_type"] = b.build_type;
  p["gpu_name"] = d.present ? d.name : "none";
  p["compute_capability"] = d.compute_capability();
  p["arch"] = d.arch();
  p["sm_count"] = d.present ? std::to_string(d.sm_count) : "none";
  p["l2_bytes"] = d.present ? std::to_string(d.l2_bytes) : "none";
  p["max_sm_clock_mhz"] = d.present ? std::to_string(d.max_sm_clock_khz / 1000) : "none";
  p["max_mem_clock_mhz"] = d.present ? std::to_string(d.max_mem_clock_khz / 1000) : "none";
  p["driver_version"] = d.present ? cuda_version_string(d.driver_version) : "none";
  p["cuda_runtime_version"] = d.present ? cuda_version_string(d.runtime_version) : "none";
  p["gpu_note"] = d.present ? "" : d.reason;
  return p;
}

// ---------------------------------------------------------------------------------------------
// Row

Row& Row::set(std::string const& col, std::int64_t v) {
  values_[col] = v;
  return *this;
}
Row& Row::set(std::string const& col, double v) {
  values_[col] = v;
  return *this;
}
Row& Row::set(std::string const& col, std::string v) {
  values_[col] = std::move(v);
  return *this;
}

// ---------------------------------------------------------------------------------------------
// TableWriter

struct TableWriter::Impl {
  std::shared_ptr<File> file;
  std::string group;
  std::vector<Column> columns; // including the store's own
  Hid type;
  Hid table;
  Hid samples;
  std::size_t row_bytes = 0;
};

TableWriter::TableWriter(std::shared_ptr<File> file, std::string group, std::vector<Column> columns)
    : impl_(std::make_unique<Impl>()) {
  File const& f = *file;
  impl_->file = std::move(file);
  impl_->group = std::move(group);
  impl_->columns = with_store_columns(columns);
  impl_->type = make_compound(impl_->columns);
  impl_->row_bytes = H5Tget_size(impl_->type.get());

  f.require_open("adding a table");
  Hid g = open_or_create_group(f, impl_->group, "table");
  std::string const where = object_name(impl_->group) + "/table";
  if (link_exists(g.get(), "table")) {
    impl_->table =
        Hid(f.check(H5Dopen2(g.get(), "table", H5P_DEFAULT), "cannot open " + where), H5Dclose);
    impl_->samples = Hid(f.check(H5Dopen2(g.get(), "samples", H5P_DEFAULT),
                                 object_name(impl_->group) + " has no samples dataset"),
                         H5Dclose);
    Hid stored(H5Dget_type(impl_->table.get()), H5Tclose);
    std::vector<Column> const have = columns_of(f, stored.get(), where);
    bool same = have.size() == impl_->columns.size();
    for (std::size_t i = 0; same && i < have.size(); ++i)
      same = have[i].name == impl_->columns[i].name && have[i].type == impl_->columns[i].type &&
             have[i].str_len == impl_->columns[i].str_len;
    if (!same)
      f.fail("table " + impl_->group +
             " has other columns than this moefin writes (written by another version?)");
    // Existing keys, so that a resumed run skips finished configurations.
    hsize_t const stored_rows = extent_1d(f, impl_->table.get());
    check_extent_fits(f, impl_->table.get(), where, stored_rows, H5Tget_size(stored.get()));
    hsize_t const samples = extent_1d(f, impl_->samples.get());
    check_extent_fits(f, impl_->samples.get(), object_name(impl_->group) + "/samples", samples, 8);
    if (stored_rows > 0) {
      constexpr std::size_t kRec = 176; // key[160], sample_offset, sample_count
      Hid rec_type(H5Tcreate(H5T_COMPOUND, kRec), H5Tclose);
      Hid s(H5Tcopy(H5T_C_S1), H5Tclose);
      H5Tset_size(s.get(), 160);
      H5Tset_strpad(s.get(), H5T_STR_NULLTERM);
      H5Tinsert(rec_type.get(), "key", 0, s.get());
      H5Tinsert(rec_type.get(), "sample_offset", 160, H5T_NATIVE_INT64);
      H5Tinsert(rec_type.get(), "sample_count", 168, H5T_NATIVE_INT64);
      std::vector<char> buf(stored_rows * kRec);
      f.check(
          H5Dread(impl_->table.get(), rec_type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data()),
          "cannot read keys of " + impl_->group);
      // A run killed inside a flush may leave its last rows pointing past the samples that
      // reached the disk; those rows never finished (append returns after the flush), so the
      // table is cut back to the rows before them. A bad row followed by good ones is damage.
      std::size_t valid = 0;
      bool bad_seen = false;
      for (std::size_t i = 0; i < stored_rows; ++i) {
        char const* rec = buf.data() + i * kRec;
        std::int64_t off = 0, cnt = 0;
        std::memcpy(&off, rec + 160, 8);
        std::memcpy(&cnt, rec + 168, 8);
        bool const ok =
            off >= 0 && cnt >= 0 && static_cast<std::uint64_t>(off) <= samples &&
            static_cast<std::uint64_t>(cnt) <= samples - static_cast<std::uint64_t>(off);
        if (!ok) {
          bad_seen = true;
          continue;
        }
        if (bad_seen)
          f.fail(where + ": row " + std::to_string(i - 1) +
                 " points past the samples but later rows do not (damaged?)");
        std::string key(rec, strnlen(rec, 160));
        if (!keys_.insert(key).second)
          f.fail(where + ": duplicate key '" + key.substr(0, 80) + "'");
        ++valid;
      }
      if (valid < stored_rows) {
        hsize_t cut[1] = {valid};
        f.check(H5Dset_extent(impl_->table.get(), cut),
                "cannot drop the unfinished rows of " + where);
      }
      rows_ = valid;
    }
  } else {
    write_str_attr(f, g.get(), "experiment", impl_->group);
    impl_->table = create_extendible(f, g.get(), "table", impl_->type.get(), 64);
    impl_->samples = create_extendible(f, g.get(), "samples", H5T_NATIVE_DOUBLE, 4096);
    f.check(H5Fflush(f.id(), H5F_SCOPE_GLOBAL), "cannot flush");
  }
}

TableWriter::~TableWriter() = default;
TableWriter::TableWriter(TableWriter&&) noexcept = default;
TableWriter& TableWriter::operator=(TableWriter&&) noexcept = default;

void TableWriter::append(std::string const& key, Row const& row,
                         std::vector<double> const& samples) {
  File const& f = *impl_->file;
  f.require_open("appending a row");
  if (key.empty() || key.size() >= 160)
    throw std::invalid_argument("row key must have 1..159 characters: '" + key + "'");
  if (keys_.count(key))
    throw std::invalid_argument("duplicate row key in " + impl_->group + ": " + key);
  auto const& values = row.values();
  for (auto const& kv : values) {
    bool known = false;
    for (auto const& c : impl_->columns)
      known = known || c.name == kv.first;
    if (!known)
      throw std::invalid_argument("row sets unknown column " + kv.first + " of " + impl_->group);
  }

  hsize_t const offset = extent_1d(f, impl_->samples.get());
  std::vector<char> buf(impl_->row_bytes, '\0');
  std::size_t off = 0;
  for (auto const& c : impl_->columns) {
    Value v;
    if (c.name == "key")
      v = key;
    else if (c.name == "sample_offset")
      v = static_cast<std::int64_t>(offset);
    else if (c.name == "sample_count")
      v = static_cast<std::int64_t>(samples.size());
    else {
      auto it = values.find(c.name);
      if (it == values.end())
        throw std::invalid_argument("row of " + impl_->group + " misses column " + c.name);
      v = it->second;
    }
    char* dst = buf.data() + off;
    switch (c.type) {
    case ColType::kInt64: {
      std::int64_t x = 0;
      if (auto const* p = std::get_if<std::int64_t>(&v))
        x = *p;
      else
        throw std::invalid_argument("column " + c.name + " expects an integer");
      std::memcpy(dst, &x, 8);
      break;
    }
    case ColType::kFloat64: {
      double x = 0;
      if (auto const* p = std::get_if<double>(&v))
        x = *p;
      else if (auto const* q = std::get_if<std::int64_t>(&v))
        x = static_cast<double>(*q);
      else
        throw std::invalid_argument("column " + c.name + " expects a number");
      std::memcpy(dst, &x, 8);
      break;
    }
    case ColType::kString: {
      auto const* p = std::get_if<std::string>(&v);
      if (!p)
        throw std::invalid_argument("column " + c.name + " expects a string");
      if (p->size() >= c.str_len)
        throw std::invalid_argument("value of column " + c.name + " longer than " +
                                    std::to_string(c.str_len - 1) + " characters: " + *p);
      std::memcpy(dst, p->data(), p->size());
      break;
    }
    }
    off += column_size(c);
  }

  // Samples first: a row never points at samples that are not on disk.
  append_1d(f, impl_->samples.get(), H5T_NATIVE_DOUBLE, samples.data(), samples.size(),
            impl_->group + "/samples");
  append_1d(f, impl_->table.get(), impl_->type.get(), buf.data(), 1, impl_->group + "/table");
  f.check(H5Fflush(f.id(), H5F_SCOPE_GLOBAL), "cannot flush");
  keys_.insert(key);
  ++rows_;
}

// ---------------------------------------------------------------------------------------------
// ResultWriter

struct WriteState {
  bool whole = false;     // create(): written under `temp`, renamed by commit()
  bool overwrite = false; // create(): the rename may replace an existing file
  std::string temp;
  int uncaught = 0;     // std::uncaught_exceptions() when the writer was made
  bool resumed = false; // resume(): the file held rows of an earlier run
};

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

TableWriter ResultWriter::table(std::string const& experiment, std::vector<Column> const& columns,
                                std::string const& description) {
  if (experiment.empty() || experiment == "/" || experiment.find('/') != std::string::npos)
    throw std::invalid_argument("table name must be one group name: '" + experiment + "'");
  TableWriter t(file_, experiment, columns);
  if (!description.empty()) {
    Hid g(file_->check(H5Gopen2(file_->id(), experiment.c_str(), H5P_DEFAULT), "no group"),
          H5Gclose);
    if (H5Aexists(g.get(), "description") <= 0)
      write_str_attr(*file_, g.get(), "description", description);
  }
  return t;
}

void ResultWriter::write_array(std::string const& g, std::string const& n,
                               std::vector<std::int32_t> const& d,
                               std::vector<std::size_t> const& dims) {
  write_array_impl(*file_, g, n, d, dims);
}
void ResultWriter::write_array(std::string const& g, std::string const& n,
                               std::vector<std::int64_t> const& d,
                               std::vector<std::size_t> const& dims) {
  write_array_impl(*file_, g, n, d, dims);
}
void ResultWriter::write_array(std::string const& g, std::string const& n,
                               std::vector<float> const& d, std::vector<std::size_t> const& dims) {
  write_array_impl(*file_, g, n, d, dims);
}
void ResultWriter::write_array(std::string const& g, std::string const& n,
                               std::vector<double> const& d, std::vector<std::size_t> const& dims) {
  write_array_impl(*file_, g, n, d, dims);
}
void ResultWriter::write_array(std::string const& g, std::string const& n,
                               std::vector<std::uint16_t> const& d,
                               std::vector<std::size_t> const& dims) {
  write_array_impl(*file_, g, n, d, dims);
}
void ResultWriter::write_array(std::string const& g, std::string const& n,
                               std::vector<std::uint8_t> const& d,
                               std::vector<std::size_t> const& dims) {
  write_array_impl(*file_, g, n, d, dims);
}

void ResultWriter::keep_root_attr(std::string const& name, std::string const& value,
                                  std::string const& legacy, std::string const& flag,
                                  std::string const& what) {
  auto const was = prov_.find(name);
  std::string const old = was != prov_.end() ? was->second : resumed() ? legacy : value;
  if (old != value)
    throw InputError(flag + ": '" + value + "' differs from '" + old + "', the " + what +
                     " of the resumed file's rows");
  set_attr("/", name, value);
}

void ResultWriter::set_attr(std::string const& group, std::string const& name,
                            std::string const& value) {
  file_->require_open("set_attr");
  bool const root = group.empty() || group == "/";
  if (root && (name == kStateAttr || name == "moefin_schema")) // a copy in a group is data
    throw std::invalid_argument("attribute " + name + " is the store's own");
  Hid g = open_or_create_group(*file_, group, "arrays");
  write_str_attr(*file_, g.get(), name, value);
  file_->check(H5Fflush(file_->id(), H5F_SCOPE_GLOBAL), "cannot flush");
}

bool ResultWriter::has_group(std::string const& group) const {
  return !group.empty() && link_exists(file_->id(), group) &&
         H5Oexists_by_name(file_->id(), group.c_str(), H5P_DEFAULT) > 0;
}

void ResultWriter::flush() {
  file_->check(H5Fflush(file_->id(), H5F_SCOPE_GLOBAL), "cannot flush");
}

// ---------------------------------------------------------------------------------------------
// Reader

template <class T> void ColumnMap<T>::missing(std::string const& name) const {
  std::string const what =
      (table.empty() ? std::string("table") : table) + " has no " + kind + " column '" + name + "'";
  if (file.empty())
    throw std::out_of_range(what);
  throw FileError(file, what);
}
template class ColumnMap<std::int64_t>;
template class ColumnMap<double>;
template class ColumnMap<std::string>;

bool Table::has_column(std::string const& name) const {
  return std::any_of(columns.begin(), columns.end(),
                     [&](Column const& c) { return c.name == name; });
}

std::vector<double> Table::row_samples(std::size_t i) const {
  auto const off = static_cast<std::size_t>(ints.at("sample_offset").at(i));
  auto const cnt = static_cast<std::size_t>(ints.at("sample_count").at(i));
  if (off > samples.size() || cnt > samples.size() - off)
    throw std::out_of_range("row " + std::to_string(i) + " points past the samples");
  return std::vector<double>(samples.begin() + static_cast<std::ptrdiff_t>(off),
                             samples.begin() + static_cast<std::ptrdiff_t>(off + cnt));
}

std::size_t Table::find(std::string const& key) const {
  auto const& k = keys();
  auto it = std::find(k.begin(), k.end(), key);
  if (it == k.end())
    throw std::out_of_range("no row with key " + key);
  return static_cast<std::size_t>(it - k.begin());
}

ResultReader::ResultReader(std::string const& path)
    : file_(open_checked(path, H5F_ACC_RDONLY, Accept::kComplete)), path_(path) {
  prov_ = read_all_attrs(*file_, file_->id(), "/");
}

ResultReader::~ResultReader() = default;
ResultReader::ResultReader(ResultReader&&) noexcept = default;

std::vector<std::string> ResultReader::groups() const {
  File const& f = *file_;
  struct Listing {
    std::vector<std::pair<std::string, H5L_type_t>> links;
  } list;
  auto collect = [](hid_t, char const* n, H5L_info_t const* info, void* op) -> herr_t {
    auto* l = static_cast<Listing*>(op);
    if (l->links.size() >= kMaxAttributes)
      return -1;
    l->links.emplace_back(n, info->type);
    return 0;
  };
  hsize_t idx = 0;
  if (H5Literate(f.id(), H5_INDEX_NAME, H5_ITER_INC, &idx, collect, &list) < 0)
    f.fail("cannot list the groups (damaged, or more than " + std::to_string(kMaxAttributes) +
           " objects?)");
  std::vector<std::string> names;
  for (auto const& [name, type] : list.links) {
    if (type != H5L_TYPE_HARD)
      f.fail("/" + name + " is " + (type == H5L_TYPE_SOFT ? "a soft" : "an external") +
             " link (moefin files hold only plain groups and datasets)");
    H5O_info_t info{};
    if (H5Oget_info_by_name2(f.id(), name.c_str(), &info, H5O_INFO_BASIC, H5P_DEFAULT) < 0)
      f.fail("cannot read /" + name + " (damaged?)");
    if (info.type == H5O_TYPE_GROUP)
      names.push_back(name);
  }
  return names;
}

bool ResultReader::has_group(std::string const& group) const {
  if (group.empty())
    return false;
  if (!plain_path_exists(*file_, group))
    return false;
  H5O_info_t info{};
  if (H5Oget_info_by_name2(file_->id(), group.c_str(), &info, H5O_INFO_BASIC, H5P_DEFAULT) < 0)
    file_->fail("cannot read " + object_name(group) + " (damaged?)");
  return info.type == H5O_TYPE_GROUP;
}

std::map<std::string, std::string> ResultReader::group_attrs(std::string const& group) const {
  if (!has_group(group))
    file_->fail("no group " + object_name(group));
  Hid g(file_->check(H5Gopen2(file_->id(), group.c_str(), H5P_DEFAULT),
                     "cannot open " + object_name(group)),
        H5Gclose);
  auto attrs = read_all_attrs(*file_, g.get(), object_name(group));
  auto const kind = attrs.find("kind");
  if (kind != attrs.end() && kind->second != "table" && kind->second != "arrays")
    file_->fail("group " + object_name(group) + " has kind '" + kind->second.substr(0, 80) +
                "' (expected table or arrays)");
  return attrs;
}

namespace {

/// Opens a dataset below the root through plain links only.
Hid open_dataset(File const& f, std::string const& p) {
  if (!plain_path_exists(f, p))
    f.fail("no dataset " + object_name(p));
  H5O_info_t info{};
  if (H5Oget_info_by_name2(f.id(), p.c_str(), &info, H5O_INFO_BASIC, H5P_DEFAULT) < 0)
    f.fail("cannot read " + object_name(p) + " (damaged?)");
  if (info.type != H5O_TYPE_DATASET)
    f.fail(object_name(p) + " is not a dataset");
  return Hid(f.check(H5Dopen2(f.id(), p.c_str(), H5P_DEFAULT), "cannot open " + object_name(p)),
             H5Dclose);
}

/// Turns an allocation failure for a dataset into a FileError naming it.
template <class T> std::vector<T> allocate(File const& f, std::string const& where, hsize_t n) {
  try {
    return std::vector<T>(static_cast<std::size_t>(n));
  } catch (std::bad_alloc const&) {
    f.fail("cannot allocate " + std::to_string(n) + " elements for " + where);
  } catch (std::length_error const&) {
    f.fail("cannot allocate " + std::to_string(n) + " elements for " + where);
  }
}

} // namespace

Table ResultReader::read_table(std::string const& experiment) const {
  File const& f = *file_;
  std::string const gname = object_name(experiment);
  if (!has_group(experiment))
    f.fail("no table for experiment '" + experiment + "'");
  auto const attrs = group_attrs(experiment);
  auto const kind = attrs.find("kind");
  if (kind == attrs.end() || kind->second != "table")
    f.fail("group " + gname + " is not a table (kind '" +
           (kind == attrs.end() ? std::string("none") : kind->second) + "')");
  std::string const tpath = experiment + "/table";
  std::string const where = gname + "/table";
  if (!plain_path_exists(f, tpath))
    f.fail("no table for experiment '" + experiment + "'");
  Hid dset = open_dataset(f, tpath);
  Hid stored(H5Dget_type(dset.get()), H5Tclose);
  if (!stored.valid())
    f.fail("cannot read the type of " + where + " (damaged?)");
  Table t;
  for (auto* m : {&t.ints.file, &t.reals.file, &t.strings.file})
    *m = f.path();
  t.ints.table = t.reals.table = t.strings.table = where;
  t.ints.kind = "integer";
  t.reals.kind = "float";
  t.strings.kind = "string";
  t.columns = columns_of(f, stored.get(), where);
  if (t.columns.size() < 3 || t.columns[0].name != "key" || t.columns[0].type != ColType::kString ||
      t.columns[1].name != "sample_offset" || t.columns[1].type != ColType::kInt64 ||
      t.columns[2].name != "sample_count" || t.columns[2].type != ColType::kInt64)
    f.fail(where + " does not start with the columns key (string), sample_offset and "
                   "sample_count (integers)");
  Hid space(H5Dget_space(dset.get()), H5Sclose);
  std::vector<hsize_t> dims;
  hsize_t const rows = extent_of(f, space.get(), where, &dims);
  if (dims.size() != 1)
    f.fail(where + " is not one-dimensional");
  check_extent_fits(f, dset.get(), where, rows, H5Tget_size(stored.get()));
  t.rows = static_cast<std::size_t>(rows);
  // Read through our own packed layout so that decoding does not depend on the writer's padding.
  Hid mem = make_compound(t.columns);
  std::size_t const row_bytes = H5Tget_size(mem.get());
  std::vector<char> buf = allocate<char>(f, where, rows * row_bytes);
  if (t.rows)
    f.check(H5Dread(dset.get(), mem.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data()),
            "cannot read " + where + " (truncated?)");
  std::size_t off = 0;
  for (auto const& c : t.columns) {
    // Every column exists in the table read back, also with no rows.
    if (c.type == ColType::kInt64)
      t.ints[c.name].reserve(t.rows);
    else if (c.type == ColType::kFloat64)
      t.reals[c.name].reserve(t.rows);
    else
      t.strings[c.name].reserve(t.rows);
    for (std::size_t r = 0; r < t.rows; ++r) {
      char const* src = buf.data() + r * row_bytes + off;
      if (c.type == ColType::kInt64) {
        std::int64_t x;
        std::memcpy(&x, src, 8);
        t.ints[c.name].push_back(x);
      } else if (c.type == ColType::kFloat64) {
        double x;
        std::memcpy(&x, src, 8);
        t.reals[c.name].push_back(x);
      } else {
        t.strings[c.name].emplace_back(src, strnlen(src, c.str_len));
      }
    }
    off += column_size(c);
  }
  if (!plain_path_exists(f, experiment + "/samples"))
    f.fail(gname + " has no samples dataset");
  t.samples = read_reals(experiment, "samples");
  std::set<std::string> seen;
  auto const& keys = t.strings.at("key");
  auto const& offsets = t.ints.at("sample_offset");
  auto const& counts = t.ints.at("sample_count");
  auto const n = static_cast<std::uint64_t>(t.samples.size());
  for (std::size_t r = 0; r < t.rows; ++r) {
    if (keys[r].empty())
      f.fail(where + ": row " + std::to_string(r) + " has an empty key");
    if (!seen.insert(keys[r]).second)
      f.fail(where + ": duplicate key '" + keys[r].substr(0, 80) + "' (row " + std::to_string(r) +
             ")");
    std::int64_t const o = offsets[r], c = counts[r];
    if (o < 0 || c < 0 || static_cast<std::uint64_t>(o) > n ||
        static_cast<std::uint64_t>(c) > n - static_cast<std::uint64_t>(o))
      f.fail(where + ": row " + std::to_string(r) + " ('" + keys[r].substr(0, 80) +
             "') points at samples [" + std::to_string(o) + ", +" + std::to_string(c) +
             ") outside the " + std::to_string(n) + " stored");
  }
  return t;
}

namespace {

template <class T>
std::vector<T> read_dataset(File const& f, std::string const& p, std::vector<std::size_t>* dims,
                            bool integers_only) {
  std::string const where = object_name(p);
  Hid d = open_dataset(f, p);
  Hid type(H5Dget_type(d.get()), H5Tclose);
  if (!type.valid())
    f.fail("cannot read the type of " + where + " (damaged?)");
  H5T_class_t const cls = H5Tget_class(type.get());
  std::size_t const size = H5Tget_size(type.get());
  bool const ok =
      (cls == H5T_INTEGER || (!integers_only && cls == H5T_FLOAT)) && size >= 1 && size <= 8;
  if (!ok)
    f.fail(where + " is not " + (integers_only ? "an integer" : "a numeric") +
           " dataset (HDF5 type class " + std::to_string(cls) + ", " + std::to_string(size) +
           " bytes)");
  Hid space(H5Dget_space(d.get()), H5Sclose);
  if (!space.valid())
    f.fail("cannot read the dataspace of " + where + " (damaged?)");
  std::vector<hsize_t> hd;
  hsize_t const numel = extent_of(f, space.get(), where, &hd);
  check_extent_fits(f, d.get(), where, numel, size);
  if (dims)
    dims->assign(hd.begin(), hd.end());
  std::vector<T> out = allocate<T>(f, where, numel);
  if (numel)
    f.check(H5Dread(d.get(), native_type<T>(), H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()),
            "cannot read " + where + " (wrong type or truncated)");
  return out;
}

} // namespace

std::vector<std::int64_t> ResultReader::read_ints(std::string const& group, std::string const& name,
                                                  std::vector<std::size_t>* dims) const {
  if (!has_group(group))
    file_->fail("no group " + object_name(group));
  return read_dataset<std::int64_t>(*file_, group + "/" + name, dims, true);
}

std::vector<double> ResultReader::read_reals(std::string const& group, std::string const& name,
                                             std::vector<std::size_t>* dims) const {
  if (!has_group(group))
    file_->fail("no group " + object_name(group));
  return read_dataset<double>(*file_, group + "/" + name, dims, false);
}

} // namespace moefin::h5
