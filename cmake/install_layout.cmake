# Runs at install time (from cmake/install.cmake): installs the systemd unit with its paths
# fitted to the prefix, the sample configuration unless an operator's copy is there, and the
# (empty) directory the unit's LoadCredential= reads.
# Inputs: gatewayd_unit_source, gatewayd_unit_staging (a directory), gatewayd_config_sources,
# gatewayd_system_unit_dir, gatewayd_sbindir, gatewayd_sysconfdir, gatewayd_docdir.

function(gatewayd_full_path out dir)
  if(IS_ABSOLUTE "${dir}")
    set(${out} "${dir}" PARENT_SCOPE)
  elseif(CMAKE_INSTALL_PREFIX STREQUAL "/")
    set(${out} "/${dir}" PARENT_SCOPE)
  else()
    set(${out} "${CMAKE_INSTALL_PREFIX}/${dir}" PARENT_SCOPE)
  endif()
endfunction()

# A system install (/usr or /) puts configuration in /etc and the unit where systemd looks
# for packaged units, as GNUInstallDirs does for CMAKE_INSTALL_FULL_SYSCONFDIR.
if(CMAKE_INSTALL_PREFIX STREQUAL "/usr" OR CMAKE_INSTALL_PREFIX STREQUAL "/")
  set(system_install TRUE)
else()
  set(system_install FALSE)
endif()

gatewayd_full_path(sbindir "${gatewayd_sbindir}")
gatewayd_full_path(docdir "${gatewayd_docdir}")
if(system_install AND NOT IS_ABSOLUTE "${gatewayd_sysconfdir}")
  set(sysconfdir "/${gatewayd_sysconfdir}")
else()
  gatewayd_full_path(sysconfdir "${gatewayd_sysconfdir}")
endif()
if(system_install)
  set(unitdir "${gatewayd_system_unit_dir}")
else()
  gatewayd_full_path(unitdir "lib/systemd/system")
endif()

# The unit names /usr/sbin/gatewayd and /etc/gatewayd/; point it at this layout.
file(READ "${gatewayd_unit_source}" unit)
string(REPLACE "/usr/sbin/gatewayd" "${sbindir}/gatewayd" unit "${unit}")
string(REPLACE "/etc/gatewayd/" "${sysconfdir}/gatewayd/" unit "${unit}")
string(REPLACE "/usr/share/doc/gatewayd/" "${docdir}/" unit "${unit}")
# Staged per destination: installs of one build tree to different places may run at once.
string(MD5 destination "$ENV{DESTDIR}|${CMAKE_INSTALL_PREFIX}")
set(staged "${gatewayd_unit_staging}/${destination}/gatewayd.service")
file(WRITE "${staged}" "${unit}")
file(INSTALL DESTINATION "${unitdir}" TYPE FILE PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ
     WORLD_READ FILES "${staged}")

# An operator's configuration is never overwritten: a sample is installed only where no file
# of that name exists yet (packages mark them as conffiles instead).
foreach(source IN LISTS gatewayd_config_sources)
  get_filename_component(name "${source}" NAME)
  set(target "$ENV{DESTDIR}${sysconfdir}/gatewayd/${name}")
  if(EXISTS "${target}")
    message(STATUS "Keeping existing: ${target}")
  else()
    # The sample's spools are a folder beside it (what ./scripts/run works with); an installed
    # one's are the unit's StateDirectory=, the one place the service may write.
    file(READ "${source}" text)
    string(REPLACE "spool_dir = \"spool\"" "spool_dir = \"/var/lib/gatewayd/spool\"" text
           "${text}")
    set(staged_config "${gatewayd_unit_staging}/${destination}/${name}")
    file(WRITE "${staged_config}" "${text}")
    file(INSTALL DESTINATION "${sysconfdir}/gatewayd" TYPE FILE PERMISSIONS OWNER_READ
         OWNER_WRITE GROUP_READ WORLD_READ FILES "${staged_config}")
  endif()
endforeach()

# Where the unit's LoadCredential= takes the TLS keys and certificates from: root's alone (0700),
# shipped empty (TLS off), so that the unit starts (systemd fails a start whose credential
# directory is missing). Files an operator put there are kept.
set(empty_credentials "${gatewayd_unit_staging}/${destination}/credentials")
file(MAKE_DIRECTORY "${empty_credentials}")
file(INSTALL DESTINATION "${sysconfdir}/gatewayd" TYPE DIRECTORY DIR_PERMISSIONS OWNER_READ
     OWNER_WRITE OWNER_EXECUTE FILES "${empty_credentials}")
