// The headers nearly every suite parses, precompiled once per build (tests/CMakeLists.txt).
//
// Parsing them was about a third of a suite's compile (a Release e2e suite 17-19 s without,
// 12-13 s with; an ASan unit suite 18-19 s and 15.6 s): the suites are built at -O0, so
// parsing is most of what is left. Product code never sees this header; a suite that forgets
// an include of its own compiles anyway, which is the price.
#pragma once

#include <boost/test/unit_test.hpp>

#include <asio.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>
