// Writing rows, arrays and attributes into an open result file (Row, TableWriter and the
// ResultWriter calls that add content).
#include "core/store/hdf5_file.hpp"

#include <algorithm>
#include <cstring>

namespace moefin::h5 {

using namespace detail;

namespace {

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

} // namespace

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

} // namespace moefin::h5
