#include "core/cli.hpp"

#include <cstdint>
#include <iostream>
#include <limits>
#include <typeinfo>

namespace moefin::cli {

namespace {

bool is_unsigned_value(boost::any const& v) {
  auto const& t = v.type();
  return t == typeid(unsigned char) || t == typeid(unsigned short) || t == typeid(unsigned) ||
         t == typeid(unsigned long) || t == typeid(unsigned long long);
}

/// Boost's conversion to unsigned types takes "-1" and wraps it to the largest value; a leading
/// minus (after blanks) is refused instead.
void reject_negative_unsigned(po::parsed_options const& parsed, po::variables_map const& vm) {
  for (po::option const& o : parsed.options) {
    if (o.string_key.empty() || !vm.count(o.string_key))
      continue;
    if (!is_unsigned_value(vm[o.string_key].value()))
      continue;
    for (std::string const& v : o.value) {
      std::size_t const first = v.find_first_not_of(" \t");
      if (first != std::string::npos && v[first] == '-')
        throw InputError("--" + o.string_key + ": value '" + cut(v) +
                         "' is negative (expected an integer >= 0)");
    }
  }
}

} // namespace

namespace {

/// Bytes of the well-formed UTF-8 sequence starting at value[i], or 0 (a stray byte).
std::size_t utf8_length(std::string const& value, std::size_t i) {
  auto const b = [&](std::size_t k) { return static_cast<unsigned char>(value[k]); };
  unsigned char const lead = b(i);
  std::size_t const n = lead >= 0xC2 && lead <= 0xDF   ? 2
                        : lead >= 0xE0 && lead <= 0xEF ? 3
                        : lead >= 0xF0 && lead <= 0xF4 ? 4
                                                       : 0;
  if (n == 0 || i + n > value.size())
    return 0;
  for (std::size_t k = 1; k < n; ++k)
    if ((b(i + k) & 0xC0) != 0x80)
      return 0;
  return n;
}

} // namespace

std::string cut(std::string const& value, std::size_t max) {
  std::string out;
  for (std::size_t i = 0; i < value.size();) {
    if (out.size() >= max) {
      out.resize(max > 3 ? max - 3 : 0);
      while (!out.empty() && (static_cast<unsigned char>(out.back()) & 0xC0) == 0x80)
        out.pop_back(); // no sequence cut in half
      if (!out.empty() && static_cast<unsigned char>(out.back()) >= 0xC0)
        out.pop_back();
      return out + "...";
    }
    unsigned char const c = static_cast<unsigned char>(value[i]);
    if (c >= 0x80) { // text passes whole; a byte of a binary file is shown as '?'
      std::size_t const n = utf8_length(value, i);
      out += n ? value.substr(i, n) : std::string("?");
      i += n ? n : 1;
      continue;
    }
    out += c < 0x20 || c == 0x7f ? '?' : static_cast<char>(c);
    ++i;
  }
  return out;
}

std::string one_line(std::string const& message) {
  std::string out;
  std::size_t i = 0;
  while (i < message.size()) {
    char const c = message[i];
    if (c == '\'') {
      std::size_t const close = message.find('\'', i + 1);
      if (close != std::string::npos) {
        out += "'" + cut(message.substr(i + 1, close - i - 1)) + "'";
        i = close + 1;
        continue;
      }
    }
    // A run without blanks (a path, an unquoted value) longer than 240 characters is cut too.
    std::size_t end = message.find_first_of(" \t\n\r'", i);
    if (end == std::string::npos)
      end = message.size();
    if (end > i) {
      out += cut(message.substr(i, end - i), 240);
      i = end;
      continue;
    }
    out += c == '\n' || c == '\r' || c == '\t' ? ' ' : c;
    ++i;
  }
  return out;
}

bool parse(std::string const& command, std::string const& synopsis,
           po::options_description const& desc, Args const& args, po::variables_map& vm,
           po::positional_options_description const* positional) {
  for (auto const& arg : args)
    for (auto const& r : renamed_flags()) {
      std::string const old = r.old;
      if (r.command && command != r.command)
        continue;
      // The hint only where the command has the new flag; elsewhere the old one is unknown.
      std::string const now = r.now;
      if (now.rfind("--", 0) == 0 && !desc.find_nothrow(now.substr(2), false))
        continue;
      if (arg == old || arg.rfind(old + "=", 0) == 0)
        throw UsageError(command + ": " + old + " is now " + r.now + " (see 'moefin " + command +
                         " --help')");
    }
  po::options_description all;
  all.add(desc);
  all.add_options()("help,h", "show this help and exit");
  // Every word the command does not take as a positional argument lands here and is refused,
  // naming it (Boost would drop it or say only "too many positional options").
  constexpr char const* kStray = "moefin-stray-word";
  po::options_description hidden;
  hidden.add_options()(kStray, po::value<std::vector<std::string>>(), "");
  po::options_description parsing;
  parsing.add(all).add(hidden);
  po::positional_options_description pos;
  if (positional)
    pos = *positional;
  // After a positional that takes every remaining word there is nothing stray; adding kStray
  // then would take those words from it (Boost keeps one trailing name).
  if (pos.max_total_count() != std::numeric_limits<unsigned>::max())
    pos.add(kStray, -1);
  auto usage = [&] {
    return "; usage: moefin " + command + " " + synopsis + " (see 'moefin " + command + " --help')";
  };
  try {
    po::command_line_parser parser(args);
    parser.options(parsing).style(po::command_line_style::unix_style).positional(pos);
    po::parsed_options const parsed = parser.run();
    for (po::option const& o : parsed.options)
      if (o.string_key == kStray)
        throw UsageError(command + ": unexpected argument '" +
                         cut(o.value.empty() ? std::string() : o.value[0]) + "'" + usage());
    po::store(parsed, vm);
    if (vm.count("help")) {
      std::cout << "usage: moefin " << command << " " << synopsis << "\n\n" << all << "\n";
      return false;
    }
    reject_negative_unsigned(parsed, vm);
    po::notify(vm); // runs the range checks of ranged(), choice() and int_list()
  } catch (po::required_option const& e) {
    // A missing positional argument is named as the synopsis writes it, not as "--chain".
    std::string const name = e.get_option_name();
    for (unsigned i = 0; positional && i < positional->max_total_count() && i < 8; ++i)
      if ("--" + positional->name_for_position(i) == name)
        throw UsageError(command + ": missing argument " + std::to_string(i + 1) + " (" +
                         name.substr(2) + ")" + usage());
    throw UsageError(one_line(command + ": " + e.what() + usage()));
  } catch (po::error const& e) {
    throw UsageError(one_line(command + ": " + e.what() + usage()));
  }
  return true;
}

std::string default_out(std::string const& command) {
  std::string name = command;
  for (char& c : name)
    if (c == ' ' || c == '-')
      c = '_';
  return "out/" + name + ".h5";
}

std::vector<Renamed> const& renamed_flags() {
  static std::vector<Renamed> const kRenamed = {
      {"--shape", "--shapes"},
      {"--delays", "--delay-ns"},
      {"--delay-kernel", "--delay-kernels"},
      // --table GROUP selects a table (show); --print FILE prints a command's tables of files.
      {"--table", "--print", "sweep finalize"},
  };
  return kRenamed;
}

char const* const kListSyntaxHelp =
    "Lists and ranges: a flag that takes several values takes them comma-separated (a,b,c); an\n"
    "integer list also takes inclusive ranges lo:hi or lo:hi:step (1:4 is 1,2,3,4; 16:64:16 is\n"
    "16,32,48,64), mixed with single values (1,2,8:10). The same axis has the same flag in\n"
    "every command (--shapes, --tokens, --delay-ns, --delay-kernels, ...); a renamed spelling\n"
    "fails with a line naming the new one. --print FILE prints a command's tables of result\n"
    "files (no GPU); --table GROUP picks one table of a file (show). Experiments write\n"
    "out/<command>.h5 unless --out names a file (out/sweep_finalize.h5 for `sweep finalize`).\n";

void add_result_options(po::options_description& desc, std::string const& command) {
  desc.add_options()("out,o", po::value<std::string>()->default_value(default_out(command)),
                     "result file to create (HDF5); refuses to overwrite")(
      "resume", po::value<std::string>()->default_value(""),
      "continue this result file, skipping configurations it already holds")(
      "seed", po::value<std::uint64_t>()->default_value(2026), "seed of every random input");
}

po::typed_value<std::string>* choice(std::string const& flag,
                                     std::vector<std::string> const& allowed,
                                     std::string const& default_value) {
  return po::value<std::string>()
      ->default_value(default_value)
      ->notifier([flag, allowed](std::string const& v) { check_choice(flag, v, allowed); });
}

po::typed_value<std::string>* int_list(std::string const& flag, std::int64_t lo, std::int64_t hi,
                                       std::string const& default_value) {
  return po::value<std::string>()
      ->default_value(default_value)
      ->notifier([flag, lo, hi](std::string const& v) { parse_int_list(flag, v, lo, hi); });
}

std::vector<std::int64_t> parse_int_list(std::string const& flag, std::string const& text,
                                         std::int64_t lo, std::int64_t hi) {
  std::vector<std::int64_t> out;
  std::stringstream ss(text);
  std::string item;
  auto to_int = [&](std::string const& s) -> std::int64_t {
    std::size_t used = 0;
    std::int64_t v = 0;
    try {
      v = std::stoll(s, &used);
    } catch (std::exception const&) {
      used = 0;
    }
    if (s.empty() || used != s.size())
      throw InputError(flag + ": '" + cut(s) +
                       "' is not an integer (expected a list like 1,2,4 or 1:8)");
    check_range(flag, v, lo, hi);
    return v;
  };
  while (std::getline(ss, item, ',')) {
    auto const dash = item.find('-', 1);
    auto const colon = item.find(':');
    if (dash != std::string::npos && colon == std::string::npos)
      throw InputError(flag + ": '" + item + "': ranges are written lo:hi[:step] (" +
                       item.substr(0, dash) + ":" + item.substr(dash + 1) + ")");
    if (colon != std::string::npos) {
      auto const second = item.find(':', colon + 1);
      std::int64_t const a = to_int(item.substr(0, colon));
      std::int64_t const b = to_int(item.substr(colon + 1, second - colon - 1));
      std::int64_t step = 1;
      if (second != std::string::npos) {
        std::string const st = item.substr(second + 1);
        std::size_t used = 0;
        try {
          step = std::stoll(st, &used);
        } catch (std::exception const&) {
          used = 0;
        }
        if (st.empty() || used != st.size() || step < 1)
          throw InputError(flag + ": '" + item + "': the step of lo:hi:step is an integer >= 1");
      }
      if (b < a)
        throw InputError(flag + ": empty range '" + cut(item) + "'");
      // A range expands to one value each: 0:1000000000 would allocate gigabytes.
      std::int64_t const count = (b - a) / step + 1;
      if (count > kMaxListValues || static_cast<std::int64_t>(out.size()) + count > kMaxListValues)
        throw InputError(flag + ": more than " + std::to_string(kMaxListValues) + " values in '" +
                         cut(text) + "'");
      for (std::int64_t v = a; v <= b; v += step)
        out.push_back(v);
    } else {
      out.push_back(to_int(item));
      if (out.size() > static_cast<std::size_t>(kMaxListValues))
        throw InputError(flag + ": more than " + std::to_string(kMaxListValues) + " values in '" +
                         cut(text) + "'");
    }
  }
  if (out.empty())
    throw InputError(flag + ": empty list");
  return out;
}

} // namespace moefin::cli
