#include "tests/support/exposition.hpp"

#include <cstdlib>
#include <sstream>

namespace gatewayd::test {
namespace {

struct sample {
  std::string name, labels;  // labels without braces, as printed
  double value = 0;
};

std::optional<sample> parse_line(const std::string& line) {
  if (line.empty() || line[0] == '#') return std::nullopt;
  sample s;
  const auto brace = line.find('{');
  const auto space = line.find(' ');
  std::size_t value_at = 0;
  if (brace != std::string::npos && brace < space) {
    const auto close = line.rfind('}');
    s.name = line.substr(0, brace);
    s.labels = line.substr(brace + 1, close - brace - 1);
    value_at = close + 2;
  } else {
    s.name = line.substr(0, space);
    value_at = space + 1;
  }
  s.value = std::strtod(line.c_str() + value_at, nullptr);
  return s;
}

template <typename F>
void for_each_sample(const std::string& text, F f) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (auto s = parse_line(line)) f(*s);
}

}  // namespace

std::optional<double> sample_value(const std::string& exposition, const std::string& series) {
  std::optional<double> out;
  for_each_sample(exposition, [&](const sample& s) {
    std::string printed = s.name;
    if (!s.labels.empty()) {
      printed += '{';
      printed += s.labels;
      printed += '}';
    }
    if (printed == series) out = s.value;
  });
  return out;
}

double sum_samples(const std::string& exposition, const std::string& name,
                   const std::string& label_filter) {
  double sum = 0;
  for_each_sample(exposition, [&](const sample& s) {
    if (s.name == name && s.labels.find(label_filter) != std::string::npos) sum += s.value;
  });
  return sum;
}

std::set<std::string> sample_names(const std::string& exposition) {
  std::set<std::string> names;
  for_each_sample(exposition, [&](const sample& s) { names.insert(s.name); });
  return names;
}

}  // namespace gatewayd::test
