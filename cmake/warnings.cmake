# Every target of the project gets the same warning set through this interface target.
add_library(gatewayd_warnings INTERFACE)
target_compile_options(gatewayd_warnings INTERFACE -Wall -Wextra -Wpedantic)
if(GATEWAYD_WERROR)
  target_compile_options(gatewayd_warnings INTERFACE -Werror)
endif()
