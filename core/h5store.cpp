#include "core/h5store.hpp"

#include "core/build_info.hpp"
#include "core/device_info.hpp"
#include "core/ops/errors.hpp"

#include <hdf5.h>

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <ctime>
#include <fstream>
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
  std::string const& path() const { return path_; }

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

/// Reads a scalar attribute of any string or numeric type as text.
std::string read_attr_text(File const& f, hid_t obj, std::string const& name) {
  Hid attr(f.check(H5Aopen(obj, name.c_str(), H5P_DEFAULT), "cannot open attribute " + name),
           H5Aclose);
  Hid type(H5Aget_type(attr.get()), H5Tclose);
  H5T_class_t const cls = H5Tget_class(type.get());
  if (cls == H5T_STRING) {
    if (H5Tis_variable_str(type.get()) > 0) {
      Hid mem(H5Tcopy(H5T_C_S1), H5Tclose);
      H5Tset_size(mem.get(), H5T_VARIABLE);
      H5Tset_cset(mem.get(), H5Tget_cset(type.get()));
      char* ptr = nullptr;
      f.check(H5Aread(attr.get(), mem.get(), &ptr), "cannot read attribute " + name);
      std::string out = ptr ? ptr : "";
      H5free_memory(ptr);
      return out;
    }
    std::size_t const n = H5Tget_size(type.get());
    std::string buf(n, '\0');
    f.check(H5Aread(attr.get(), type.get(), buf.data()), "cannot read attribute " + name);
    buf.resize(std::strlen(buf.c_str()));
    return buf;
  }
  if (cls == H5T_INTEGER) {
    long long v = 0;
    f.check(H5Aread(attr.get(), H5T_NATIVE_LLONG, &v), "cannot read attribute " + name);
    return std::to_string(v);
  }
  if (cls == H5T_FLOAT) {
    double v = 0;
    f.check(H5Aread(attr.get(), H5T_NATIVE_DOUBLE, &v), "cannot read attribute " + name);
    return std::to_string(v);
  }
  return "(unsupported attribute type)";
}

std::map<std::string, std::string> read_all_attrs(File const& f, hid_t obj) {
  std::vector<std::string> names;
  auto collect = [](hid_t, char const* n, H5A_info_t const*, void* op) -> herr_t {
    static_cast<std::vector<std::string>*>(op)->push_back(n);
    return 0;
  };
  hsize_t idx = 0;
  f.check(H5Aiterate2(obj, H5_INDEX_NAME, H5_ITER_INC, &idx, collect, &names),
          "cannot list attributes");
  std::map<std::string, std::string> out;
  for (auto const& n : names)
    out[n] = read_attr_text(f, obj, n);
  return out;
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

/// Columns of a stored compound type, in file order.
std::vector<Column> columns_of(File const& f, hid_t type) {
  if (H5Tget_class(type) != H5T_COMPOUND)
    f.fail("table is not a compound dataset");
  int const n = H5Tget_nmembers(type);
  std::vector<Column> cols;
  for (int i = 0; i < n; ++i) {
    char* name = H5Tget_member_name(type, static_cast<unsigned>(i));
    Column c;
    c.name = name;
    H5free_memory(name);
    Hid mt(H5Tget_member_type(type, static_cast<unsigned>(i)), H5Tclose);
    switch (H5Tget_class(mt.get())) {
    case H5T_INTEGER:
      c.type = ColType::kInt64;
      break;
    case H5T_FLOAT:
      c.type = ColType::kFloat64;
      break;
    case H5T_STRING:
      if (H5Tis_variable_str(mt.get()) > 0)
        f.fail("column " + c.name + " is a variable-length string (not a moefin table)");
      c.type = ColType::kString;
      c.str_len = H5Tget_size(mt.get());
      break;
    default:
      f.fail("column " + c.name + " has an unsupported type");
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

/// Opens an HDF5 file and checks that it is a moefin result file.
std::shared_ptr<File> open_checked(std::string const& path, unsigned flags) {
  silence_hdf5();
  {
    std::ifstream probe(path, std::ios::binary);
    if (!probe)
      throw FileError(path, "cannot open for reading (missing or unreadable)");
  }
  htri_t const is = H5Fis_hdf5(path.c_str());
  if (is <= 0)
    throw FileError(path, "not an HDF5 file");
  hid_t id = H5Fopen(path.c_str(), flags, H5P_DEFAULT);
  if (id < 0)
    throw FileError(path, "HDF5 library cannot open it (truncated or damaged?)");
  auto f = std::make_shared<File>(id, path);
  if (H5Aexists(id, "moefin_schema") <= 0)
    f->fail("not a moefin result file (no moefin_schema attribute)");
  std::string const schema = read_attr_text(*f, id, "moefin_schema");
  if (schema != kSchema)
    f->fail("unsupported schema '" + schema + "' (this moefin reads " + kSchema + ")");
  return f;
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

  Hid g = open_or_create_group(f, impl_->group, "table");
  if (link_exists(g.get(), "table")) {
    impl_->table =
        Hid(f.check(H5Dopen2(g.get(), "table", H5P_DEFAULT), "cannot open table"), H5Dclose);
    impl_->samples =
        Hid(f.check(H5Dopen2(g.get(), "samples", H5P_DEFAULT), "table without samples dataset"),
            H5Dclose);
    Hid stored(H5Dget_type(impl_->table.get()), H5Tclose);
    std::vector<Column> const have = columns_of(f, stored.get());
    bool same = have.size() == impl_->columns.size();
    for (std::size_t i = 0; same && i < have.size(); ++i)
      same = have[i].name == impl_->columns[i].name && have[i].type == impl_->columns[i].type &&
             have[i].str_len == impl_->columns[i].str_len;
    if (!same)
      f.fail("table " + impl_->group +
             " has other columns than this moefin writes (written by another version?)");
    // Existing keys, so that a resumed run skips finished configurations.
    rows_ = extent_1d(f, impl_->table.get());
    if (rows_ > 0) {
      Hid key_type(H5Tcreate(H5T_COMPOUND, 160), H5Tclose);
      Hid s(H5Tcopy(H5T_C_S1), H5Tclose);
      H5Tset_size(s.get(), 160);
      H5Tset_strpad(s.get(), H5T_STR_NULLTERM);
      H5Tinsert(key_type.get(), "key", 0, s.get());
      std::vector<char> buf(rows_ * 160);
      f.check(
          H5Dread(impl_->table.get(), key_type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data()),
          "cannot read keys of " + impl_->group);
      for (std::size_t i = 0; i < rows_; ++i)
        keys_.insert(std::string(buf.data() + i * 160, strnlen(buf.data() + i * 160, 160)));
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

ResultWriter ResultWriter::create(std::string const& path, Provenance const& prov, bool overwrite) {
  silence_hdf5();
  if (!overwrite && std::ifstream(path).good())
    throw FileError(path, "already exists (use --resume to continue it, or remove it)");
  hid_t id = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  if (id < 0)
    throw FileError(path, "cannot create (is the directory writable?)");
  auto f = std::make_shared<File>(id, path);
  for (auto const& kv : prov)
    write_str_attr(*f, id, kv.first, kv.second);
  f->check(H5Fflush(id, H5F_SCOPE_GLOBAL), "cannot flush");
  return ResultWriter(std::move(f), path, prov);
}

ResultWriter ResultWriter::resume(std::string const& path) {
  auto f = open_checked(path, H5F_ACC_RDWR);
  Provenance prov = read_all_attrs(*f, f->id());
  write_str_attr(*f, f->id(), "resumed_by", command_line());
  write_str_attr(*f, f->id(), "resumed_date_utc", utc_now());
  return ResultWriter(std::move(f), path, std::move(prov));
}

ResultWriter ResultWriter::open(std::string const& out_path, std::string const& resume_path,
                                std::uint64_t seed) {
  if (!resume_path.empty())
    return resume(resume_path);
  return create(out_path, collect_provenance(seed));
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

void ResultWriter::set_attr(std::string const& group, std::string const& name,
                            std::string const& value) {
  Hid g = open_or_create_group(*file_, group, "arrays");
  write_str_attr(*file_, g.get(), name, value);
  file_->check(H5Fflush(file_->id(), H5F_SCOPE_GLOBAL), "cannot flush");
}

void ResultWriter::flush() {
  file_->check(H5Fflush(file_->id(), H5F_SCOPE_GLOBAL), "cannot flush");
}

// ---------------------------------------------------------------------------------------------
// Reader

bool Table::has_column(std::string const& name) const {
  return std::any_of(columns.begin(), columns.end(),
                     [&](Column const& c) { return c.name == name; });
}

std::vector<double> Table::row_samples(std::size_t i) const {
  auto const off = static_cast<std::size_t>(ints.at("sample_offset").at(i));
  auto const cnt = static_cast<std::size_t>(ints.at("sample_count").at(i));
  if (off + cnt > samples.size())
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
    : file_(open_checked(path, H5F_ACC_RDONLY)), path_(path) {
  prov_ = read_all_attrs(*file_, file_->id());
}

ResultReader::~ResultReader() = default;
ResultReader::ResultReader(ResultReader&&) noexcept = default;

std::vector<std::string> ResultReader::groups() const {
  std::vector<std::string> names;
  auto collect = [](hid_t loc, char const* n, H5L_info_t const*, void* op) -> herr_t {
    hid_t obj = H5Oopen(loc, n, H5P_DEFAULT);
    if (obj >= 0) {
      if (H5Iget_type(obj) == H5I_GROUP)
        static_cast<std::vector<std::string>*>(op)->push_back(n);
      H5Oclose(obj);
    }
    return 0;
  };
  hsize_t idx = 0;
  file_->check(H5Literate(file_->id(), H5_INDEX_NAME, H5_ITER_INC, &idx, collect, &names),
               "cannot list groups");
  return names;
}

bool ResultReader::has_group(std::string const& group) const {
  return link_exists(file_->id(), group);
}

std::map<std::string, std::string> ResultReader::group_attrs(std::string const& group) const {
  if (!has_group(group))
    file_->fail("no group " + group);
  Hid g(file_->check(H5Gopen2(file_->id(), group.c_str(), H5P_DEFAULT), "cannot open " + group),
        H5Gclose);
  return read_all_attrs(*file_, g.get());
}

Table ResultReader::read_table(std::string const& experiment) const {
  File const& f = *file_;
  std::string const tpath = experiment + "/table";
  if (!has_group(experiment) || !link_exists(f.id(), tpath))
    f.fail("no table for experiment '" + experiment + "'");
  Hid dset(f.check(H5Dopen2(f.id(), tpath.c_str(), H5P_DEFAULT), "cannot open " + tpath), H5Dclose);
  Hid stored(H5Dget_type(dset.get()), H5Tclose);
  Table t;
  t.columns = columns_of(f, stored.get());
  for (char const* required : {"key", "sample_offset", "sample_count"})
    if (!t.has_column(required))
      f.fail("table " + experiment + " lacks the column " + required);
  t.rows = extent_1d(f, dset.get());
  // Read through our own packed layout so that decoding does not depend on the writer's padding.
  Hid mem = make_compound(t.columns);
  std::size_t const row_bytes = H5Tget_size(mem.get());
  std::vector<char> buf(t.rows * row_bytes);
  if (t.rows)
    f.check(H5Dread(dset.get(), mem.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data()),
            "cannot read " + tpath + " (truncated?)");
  std::size_t off = 0;
  for (auto const& c : t.columns) {
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
  if (link_exists(f.id(), experiment + "/samples"))
    t.samples = read_reals(experiment, "samples");
  return t;
}

namespace {

template <class T>
std::vector<T> read_dataset(File const& f, std::string const& p, std::vector<std::size_t>* dims) {
  if (!link_exists(f.id(), p))
    f.fail("no dataset " + p);
  Hid d(f.check(H5Dopen2(f.id(), p.c_str(), H5P_DEFAULT), "cannot open " + p), H5Dclose);
  Hid space(H5Dget_space(d.get()), H5Sclose);
  int const nd = H5Sget_simple_extent_ndims(space.get());
  std::vector<hsize_t> hd(static_cast<std::size_t>(std::max(nd, 0)));
  H5Sget_simple_extent_dims(space.get(), hd.data(), nullptr);
  std::size_t numel = 1;
  for (auto x : hd)
    numel *= x;
  if (dims)
    dims->assign(hd.begin(), hd.end());
  std::vector<T> out(numel);
  if (numel)
    f.check(H5Dread(d.get(), native_type<T>(), H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()),
            "cannot read " + p + " (wrong type or truncated)");
  return out;
}

} // namespace

std::vector<std::int64_t> ResultReader::read_ints(std::string const& group, std::string const& name,
                                                  std::vector<std::size_t>* dims) const {
  if (!has_group(group))
    file_->fail("no group " + group);
  return read_dataset<std::int64_t>(*file_, group + "/" + name, dims);
}

std::vector<double> ResultReader::read_reals(std::string const& group, std::string const& name,
                                             std::vector<std::size_t>* dims) const {
  if (!has_group(group))
    file_->fail("no group " + group);
  return read_dataset<double>(*file_, group + "/" + name, dims);
}

} // namespace moefin::h5
