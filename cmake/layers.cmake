# The source folders form a DAG (docs/architecture.md, scripts/check-layers). Each library gets
# an include root of its own holding one symlink, <root>/<folder> -> the source folder, and
# publishes it to the targets that link it: "#include \"routing/pattern.hpp\"" then resolves only
# in targets that link gatewayd_routing, so an include against the DAG fails to compile. There is
# no include path to the repository root.
function(gatewayd_folder_includes target scope folder)
  set(root "${PROJECT_BINARY_DIR}/include/${folder}")
  set(link "${root}/${folder}")
  if(NOT EXISTS "${link}")
    get_filename_component(parent "${link}" DIRECTORY)
    file(MAKE_DIRECTORY "${parent}")
    file(CREATE_LINK "${PROJECT_SOURCE_DIR}/${folder}" "${link}" SYMBOLIC)
  endif()
  target_include_directories(${target} ${scope} "${root}")
endfunction()
