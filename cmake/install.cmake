# Install rules: the daemon, the systemd unit and the sample configuration, in the standard
# places (GNUInstallDirs). CPack packages the same rules (cmake/packaging.cmake).
#
#   cmake --install build/release --prefix /usr     binary /usr/sbin/gatewayd, unit in
#                                                   systemd's unit dir, configs in /etc/gatewayd
#   cmake --install build/release --prefix /opt/x   everything under /opt/x (etc/, lib/systemd/)
#
# The layout is decided when the rules run, not when CMake configures, so `--prefix` and
# DESTDIR given to `cmake --install` are honoured; the unit's paths are rewritten to match.
include(GNUInstallDirs)

install(TARGETS gatewayd RUNTIME DESTINATION ${CMAKE_INSTALL_SBINDIR})

# systemd's own idea of its unit directory (Debian 12: /lib/systemd/system), used when the
# prefix is the system's (/usr); any other prefix gets <prefix>/lib/systemd/system.
set(GATEWAYD_SYSTEMD_UNIT_DIR "" CACHE PATH
    "Where the unit goes for a /usr install (empty: pkg-config systemd, else /lib/systemd/system)")
set(gatewayd_system_unit_dir "${GATEWAYD_SYSTEMD_UNIT_DIR}")
if(NOT gatewayd_system_unit_dir)
  find_package(PkgConfig QUIET)
  if(PKG_CONFIG_FOUND)
    pkg_get_variable(gatewayd_system_unit_dir systemd systemdsystemunitdir)
  endif()
  if(NOT gatewayd_system_unit_dir)
    set(gatewayd_system_unit_dir /lib/systemd/system)
  endif()
endif()

# Variables for the install-time script, then the script itself.
install(CODE "
set(gatewayd_unit_source \"${PROJECT_SOURCE_DIR}/systemd/gatewayd.service\")
set(gatewayd_unit_staging \"${PROJECT_BINARY_DIR}/install\")
set(gatewayd_config_sources \"${PROJECT_SOURCE_DIR}/etc/gatewayd.toml;${PROJECT_SOURCE_DIR}/etc/routes.toml\")
set(gatewayd_system_unit_dir \"${gatewayd_system_unit_dir}\")
set(gatewayd_sbindir \"${CMAKE_INSTALL_SBINDIR}\")
set(gatewayd_sysconfdir \"${CMAKE_INSTALL_SYSCONFDIR}\")
set(gatewayd_docdir \"${CMAKE_INSTALL_DATADIR}/doc/gatewayd\")
")
install(SCRIPT ${CMAKE_CURRENT_LIST_DIR}/install_layout.cmake)

# CPack must install into a staging DESTDIR with the real prefix (/usr), so the rules above
# see a system install and put the configuration in /etc, not <staging>/usr/etc.
if(NOT DEFINED CPACK_SET_DESTDIR)
  set(CPACK_SET_DESTDIR ON)
endif()
