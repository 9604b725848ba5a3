#include "tests/support/models_list.hpp"

#include <fstream>
#include <sstream>
#include <stdexcept>

namespace gatewayd::test {

std::string model::gateway_toml() const {
  std::string s;
  for (const auto& [key, value] : keys) {
    s += key;
    s += " = ";
    s += value;
    s += '\n';
  }
  return s;
}

std::string model::value_of(const std::string& key, const std::string& fallback) const {
  for (const auto& [k, v] : keys) {
    if (k != key) continue;
    const bool quoted = v.size() >= 2 && v.front() == '"' && v.back() == '"';
    return quoted ? v.substr(1, v.size() - 2) : v;
  }
  return fallback;
}

std::ostream& operator<<(std::ostream& out, const model& m) {
  return out << m.name;
}

std::vector<model> read_models(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) throw std::runtime_error("cannot read " + file.string());
  std::vector<model> models;
  int number = 0;
  for (std::string line; std::getline(in, line);) {
    ++number;
    line = line.substr(0, line.find('#'));
    std::istringstream words(line);
    model m;
    if (!(words >> m.name)) continue;
    for (std::string kv; words >> kv;) {
      const auto eq = kv.find('=');
      if (eq == std::string::npos || eq == 0 || eq + 1 == kv.size())
        throw std::runtime_error(file.string() + ":" + std::to_string(number) + ": '" + kv +
                                 "' is not KEY=VALUE");
      m.keys.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
    }
    models.push_back(std::move(m));
  }
  if (models.empty()) throw std::runtime_error(file.string() + " lists no model");
  return models;
}

}  // namespace gatewayd::test
