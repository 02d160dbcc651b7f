// Reading a result file back: tables, arrays and attributes, every size checked against the
// file before it is allocated.
#include "core/store/hdf5_file.hpp"

#include <algorithm>
#include <cstring>
#include <set>

namespace moefin::h5 {

using namespace detail;

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
