// moefin_store_writer: a host-only experiment that appends rows to a result file exactly the way
// the GPU experiments do (ResultWriter::open, one TableWriter, a row per configuration, --resume
// skipping finished ones), so that the kill tests can interrupt the row-appending store without
// a GPU. Every row is a function of its index, so a reader can check each one.
//
//   moefin_store_writer (--out FILE | --resume FILE) [--rows N] [--delay-us D]
//
// stdout: "done i" after row i is appended (and flushed to the file), "skip i" for a row the
// resumed file already holds, "finished N" after commit.

#include "core/store/h5store.hpp"
#include "core/ops/errors.hpp"
#include "tests/store_rows.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

int main(int argc, char** argv) {
  using namespace moefin;
  std::string out, resume;
  long rows = 40, delay_us = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string const flag = argv[i], value = argv[i + 1];
    if (flag == "--out")
      out = value;
    else if (flag == "--resume")
      resume = value;
    else if (flag == "--rows")
      rows = std::strtol(value.c_str(), nullptr, 10);
    else if (flag == "--delay-us")
      delay_us = std::strtol(value.c_str(), nullptr, 10);
    else {
      std::fprintf(stderr, "moefin_store_writer: unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  if (out.empty() == resume.empty() || rows < 1) {
    std::fprintf(stderr, "usage: moefin_store_writer (--out FILE | --resume FILE) [--rows N] "
                         "[--delay-us D]\n");
    return 2;
  }
  h5::set_command_line(argc, argv);
  try {
    auto file = h5::ResultWriter::open(out, resume, 11);
    auto table = file.table(test::kStoreTable, test::store_columns(), "rows of the kill tests");
    for (long i = 0; i < rows; ++i) {
      std::string const key = test::store_key(i);
      if (table.has(key)) {
        std::printf("skip %ld\n", i);
        continue;
      }
      if (delay_us > 0)
        ::usleep(static_cast<useconds_t>(delay_us));
      table.append(key, test::store_row(i), test::store_samples(i));
      std::printf("done %ld\n", i);
      std::fflush(stdout);
    }
    file.commit();
    std::printf("finished %ld\n", rows);
    return 0;
  } catch (std::exception const& e) {
    std::fprintf(stderr, "moefin_store_writer: error: %s\n", e.what());
    return 1;
  }
}
