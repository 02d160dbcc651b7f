// The store's HDF5 plumbing: checked attribute, link and extent helpers and the compound row
// type (declared in hdf5_file.hpp).
#include "core/store/hdf5_file.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <set>

namespace moefin::h5::detail {

namespace {

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

} // namespace

/// HDF5 prints its error stack to stderr by default; moefin reports one line instead.
void silence_hdf5() {
  static bool const done = [] {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    return true;
  }();
  (void)done;
}

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
    // The schema's strings are UTF-8 (docs/reference/result-files.md); analysis/ reads them as
    // such.
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

} // namespace moefin::h5::detail
