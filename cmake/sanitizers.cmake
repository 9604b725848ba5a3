# Sanitizer builds apply to every target, so the whole program is instrumented alike.
if(GATEWAYD_FUZZ AND NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  message(FATAL_ERROR "GATEWAYD_FUZZ needs clang++ (libFuzzer): -DCMAKE_CXX_COMPILER=clang++")
endif()
if(GATEWAYD_FUZZ)
  # Coverage for libFuzzer in every library; the fuzz targets add -fsanitize=fuzzer (main).
  add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined
                      -fno-omit-frame-pointer)
  add_link_options(-fsanitize=address,undefined)
endif()
if(GATEWAYD_ASAN AND GATEWAYD_TSAN)
  message(FATAL_ERROR "GATEWAYD_ASAN and GATEWAYD_TSAN cannot be combined")
endif()
if(GATEWAYD_ASAN OR GATEWAYD_TSAN)
  # A sanitizer's report needs functions, files and lines: line tables (-g1). Variable locations
  # (-g) cost a fifth of an instrumented build's time and serve only a debugger; for that, build
  # the debug flavour.
  add_compile_options(-g1)
  # -O1, the level the sanitizers' documentation asks for: RelWithDebInfo's -O2 made the ASan
  # build's libraries take a fifth longer to compile (a build of the daemon and five tests:
  # 408 s at -O2, 317 s at -O1) and ran its suite no faster (gateway_e2e_test 12.4 / 13.1 s
  # at -O2, 12.8 / 13.1 s at -O1). The last -O given wins, and a test's own file adds -O0.
  add_compile_options(-O1)
endif()
if(GATEWAYD_ASAN)
  # Asserts on: the state tables (supplier_session, confirm_replies, consumer_link, the
  # consumer's life, flow and writer) assert every transition, and RelWithDebInfo's -DNDEBUG
  # would leave them out of the one build that runs the whole suite under checks. Seven asserts,
  # none per frame. (The last -D/-U given wins.)
  add_compile_options(-UNDEBUG)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
endif()
if(GATEWAYD_TSAN)
  # GCC warns that Asio's atomic_thread_fence is not instrumented; that is Asio's code, not ours.
  add_compile_options(-fsanitize=thread -fno-omit-frame-pointer -Wno-tsan)
  add_link_options(-fsanitize=thread)
endif()
