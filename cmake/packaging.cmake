# Debian package (CPack DEB): scripts/package turns the install rules into gatewayd_<version>_amd64.deb.
#
# The binary, the unit and /etc/gatewayd come from the install rules (cmake/install.cmake);
# this file adds what only a package needs (copyright, changelog, man page, docs, the
# monitoring samples) and the package metadata. Configure with -DCMAKE_INSTALL_PREFIX=/usr.
include(GNUInstallDirs)

set(gatewayd_pkg_dir ${PROJECT_SOURCE_DIR}/packaging)
set(gatewayd_pkg_out ${PROJECT_BINARY_DIR}/packaging)
file(MAKE_DIRECTORY ${gatewayd_pkg_out})

# Debian wants the changelog and the man page compressed with gzip -9n (no name, no time:
# reproducible); they are built with `all`, so cpack's install step finds them.
# The version has no Debian revision (a native package), so the changelog is changelog.gz.
configure_file(${gatewayd_pkg_dir}/changelog.in ${gatewayd_pkg_out}/changelog.Debian @ONLY)
add_custom_command(
  OUTPUT ${gatewayd_pkg_out}/changelog.gz ${gatewayd_pkg_out}/gatewayd.8.gz
  COMMAND gzip -9nc ${gatewayd_pkg_out}/changelog.Debian > ${gatewayd_pkg_out}/changelog.gz
  COMMAND gzip -9nc ${PROJECT_SOURCE_DIR}/docs/gatewayd.8 > ${gatewayd_pkg_out}/gatewayd.8.gz
  DEPENDS ${gatewayd_pkg_out}/changelog.Debian ${PROJECT_SOURCE_DIR}/docs/gatewayd.8
  COMMENT "Compressing the Debian changelog and the man page")
add_custom_target(gatewayd_package_files ALL
  DEPENDS ${gatewayd_pkg_out}/changelog.gz ${gatewayd_pkg_out}/gatewayd.8.gz)

set(gatewayd_doc_dir ${CMAKE_INSTALL_DATADIR}/doc/gatewayd)
install(FILES ${gatewayd_pkg_dir}/copyright ${gatewayd_pkg_out}/changelog.gz
        DESTINATION ${gatewayd_doc_dir})
install(FILES ${gatewayd_pkg_out}/gatewayd.8.gz DESTINATION ${CMAKE_INSTALL_MANDIR}/man8)
# /etc/gatewayd/credentials is 0700 on purpose (it holds private keys): say so to lintian.
install(FILES ${gatewayd_pkg_dir}/lintian-overrides DESTINATION ${CMAKE_INSTALL_DATADIR}/lintian/overrides
        RENAME gatewayd)
# Documentation goes where Debian policy puts it, /usr/share/doc/gatewayd (no man pages
# there: they are installed above).
file(GLOB gatewayd_docs CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/docs/*.md)
install(FILES ${PROJECT_SOURCE_DIR}/README.md ${gatewayd_docs} DESTINATION ${gatewayd_doc_dir})

# Monitoring samples under /usr/share/gatewayd: whatever of them exists in this checkout
# (the Grafana dashboard and the Prometheus scrape config may land after this file).
if(IS_DIRECTORY ${PROJECT_SOURCE_DIR}/etc/grafana)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/etc/grafana DESTINATION ${CMAKE_INSTALL_DATADIR}/gatewayd)
endif()
# The scrape config and the alert rules it names sit side by side, as in etc/; beside them the
# HAProxy front for several nodes (docs/scaling.md).
foreach(sample prometheus.yml gatewayd_alerts.yml haproxy.cfg)
  if(EXISTS ${PROJECT_SOURCE_DIR}/etc/${sample})
    install(FILES ${PROJECT_SOURCE_DIR}/etc/${sample} DESTINATION ${CMAKE_INSTALL_DATADIR}/gatewayd)
  endif()
endforeach()

# The configs are conffiles: dpkg keeps an operator's edits over an upgrade and asks.
file(WRITE ${gatewayd_pkg_out}/conffiles "/etc/gatewayd/gatewayd.toml\n/etc/gatewayd/routes.toml\n")

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME gatewayd)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "gatewayd maintainers <gatewayd@example.org>")
set(CPACK_PACKAGE_VENDOR "The gatewayd authors")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "message-routing gateway daemon")
# Debian wants the extended description in lines of at most 80 characters.
string(CONCAT CPACK_PACKAGE_DESCRIPTION
  "gatewayd accepts TCP connections from suppliers that send addressed\n"
  "frames, routes each frame by its address through a routing table loaded\n"
  "from TOML (wildcards, fan-out) and forwards it to consumers, each with its\n"
  "own bounded queue and overflow policy. It runs under systemd (notify,\n"
  "watchdog, live reload of the routing table) and exports Prometheus metrics.")
# A package installs under /usr whatever prefix the build tree was configured with.
set(CPACK_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_OUTPUT_FILE_PREFIX ${PROJECT_BINARY_DIR})

set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
# Library dependencies come from dpkg-shlibdeps; procps is for the unit's ExecReload=/bin/kill.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS procps)
set(CPACK_DEBIAN_COMPRESSION_TYPE xz)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    ${gatewayd_pkg_out}/conffiles ${gatewayd_pkg_dir}/postinst ${gatewayd_pkg_dir}/prerm
    ${gatewayd_pkg_dir}/postrm)

include(CPack)
