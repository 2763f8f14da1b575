# Install rules and the CMake package `stategraph` (included from the top-level CMakeLists.txt
# when STATEGRAPH_INSTALL is on).
#
#   find_package(stategraph 0.1 CONFIG REQUIRED COMPONENTS sqlite)
#   target_link_libraries(app PRIVATE stategraph::dsl stategraph::sqlite)
#
# Install a Release and a Debug build into one prefix to give consumers both (see below):
#
#   cmake --install build-release --prefix /opt/stategraph
#   cmake --install build-debug   --prefix /opt/stategraph
#
# core, checkpoint, graph, dsl and server need only Boost, Threads and (the server's run store) SQLite 3: they are always loaded, in
# stategraphTargets.cmake. sqlite (SQLite 3), postgres (libpq), redis (hiredis), tiered (both of these) and nodes (OpenSSL)
# have export files of their own,
# loaded, with their dependency, only when a component names them.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(stategraph_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/stategraph)

# Installed names match the in-tree aliases: stategraph_graph is stategraph::graph everywhere.
set(stategraph_base_parts core checkpoint graph dsl)
if(TARGET stategraph_server)
  list(APPEND stategraph_base_parts server)
endif()
set(stategraph_optional_parts)
foreach(part sqlite postgres redis nodes)
  if(TARGET stategraph_${part})
    list(APPEND stategraph_optional_parts ${part})
  endif()
endforeach()
# tiered (Redis in front of PostgreSQL) is built when both of them are.
if(TARGET stategraph_tiered)
  list(APPEND stategraph_optional_parts tiered)
endif()
# mcp (the MCP client) is built with nodes and installed in its export set (component nodes).
if("nodes" IN_LIST stategraph_optional_parts AND TARGET stategraph_mcp)
  list(APPEND stategraph_optional_parts mcp)
endif()
foreach(part IN LISTS stategraph_base_parts stategraph_optional_parts)
  set_target_properties(stategraph_${part} PROPERTIES EXPORT_NAME ${part})
endforeach()

# Release and Debug side by side in one prefix: a Debug build's libraries are named
# libstategraph_<part>d.a (the others' libstategraph_<part>.a), and each install writes its own
# stategraph*Targets-<config>.cmake beside the shared stategraph*Targets.cmake. Installing
# build-release and build-debug into one prefix so leaves both; stategraphConfig.cmake then maps
# the consumer's configuration to the matching one (an optimized one never to Debug silently).
# A CMAKE_DEBUG_POSTFIX of the project's own wins.
if(NOT DEFINED CMAKE_DEBUG_POSTFIX)
  foreach(part IN LISTS stategraph_base_parts stategraph_optional_parts)
    get_target_property(stategraph_type stategraph_${part} TYPE)
    if(NOT stategraph_type STREQUAL "INTERFACE_LIBRARY")
      set_target_properties(stategraph_${part} PROPERTIES DEBUG_POSTFIX d)
    endif()
  endforeach()
endif()

# One export set for the base, one per optional part. INCLUDES DESTINATION is the installed
# include dir of every exported target (their INSTALL_INTERFACE; the source trees' include dirs
# are BUILD_INTERFACE only).
function(stategraph_install_parts export_set)
  set(targets)
  foreach(part IN LISTS ARGN)
    list(APPEND targets stategraph_${part})
  endforeach()
  install(TARGETS ${targets} EXPORT ${export_set}
          ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
          LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
          RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
          INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  install(EXPORT ${export_set} NAMESPACE stategraph:: DESTINATION ${stategraph_cmake_dir}
          FILE ${export_set}.cmake)
endfunction()
# The umbrella (stategraph::stategraph) and the precompiled header (stategraph::precompiled) are
# interface targets of the base set; their header is dsl's.
set_target_properties(stategraph_precompiled PROPERTIES EXPORT_NAME precompiled)
set_target_properties(stategraph_stategraph PROPERTIES EXPORT_NAME stategraph)
stategraph_install_parts(stategraphTargets ${stategraph_base_parts} precompiled stategraph)
if("sqlite" IN_LIST stategraph_optional_parts)
  stategraph_install_parts(stategraphSqliteTargets sqlite)
endif()
if("redis" IN_LIST stategraph_optional_parts)
  stategraph_install_parts(stategraphRedisTargets redis)
endif()
if("postgres" IN_LIST stategraph_optional_parts)
  stategraph_install_parts(stategraphPostgresTargets postgres)
endif()
if("nodes" IN_LIST stategraph_optional_parts)
  set(stategraph_nodes_parts nodes)
  if("mcp" IN_LIST stategraph_optional_parts)
    list(APPEND stategraph_nodes_parts mcp)
  endif()
  stategraph_install_parts(stategraphNodesTargets ${stategraph_nodes_parts})
endif()
if("tiered" IN_LIST stategraph_optional_parts)
  stategraph_install_parts(stategraphTieredTargets tiered) # refers to stategraph::redis and ::postgres
endif()

# Headers: every layer's include/ lands in one include/ (all under stategraph/).
foreach(part IN LISTS stategraph_base_parts)
  set(exclude)
  if(part STREQUAL "checkpoint" AND NOT "sqlite" IN_LIST stategraph_optional_parts)
    list(APPEND exclude PATTERN sqlite_saver.hpp EXCLUDE)
  endif()
  if(part STREQUAL "checkpoint" AND NOT "postgres" IN_LIST stategraph_optional_parts)
    list(APPEND exclude PATTERN postgres_saver.hpp EXCLUDE)
  endif()
  if(part STREQUAL "checkpoint" AND NOT "redis" IN_LIST stategraph_optional_parts)
    list(APPEND exclude PATTERN redis_saver.hpp EXCLUDE)
  endif()
  if(part STREQUAL "checkpoint" AND NOT "tiered" IN_LIST stategraph_optional_parts)
    list(APPEND exclude PATTERN tiered_saver.hpp EXCLUDE)
  endif()
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${part}/include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
          FILES_MATCHING PATTERN *.hpp ${exclude})
endforeach()
if("nodes" IN_LIST stategraph_optional_parts)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/nodes/include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
          FILES_MATCHING PATTERN *.hpp)
endif()
if("mcp" IN_LIST stategraph_optional_parts)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/mcp/include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
          FILES_MATCHING PATTERN *.hpp)
endif()

# SameMajorVersion: a request for 1.2 accepts 1.2 to 1.x and refuses 2.0. The library is mostly
# templates compiled into the user's code, so a new major version may change any of them:
# AnyNewerVersion would promise compatibility we do not keep. (While the version is 0.x every
# 0.y counts as compatible; move to SameMinorVersion if 0.y releases start breaking users.)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/stategraphConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/stategraphConfig.cmake.in
                              ${CMAKE_CURRENT_BINARY_DIR}/stategraphConfig.cmake
                              INSTALL_DESTINATION ${stategraph_cmake_dir}
                              NO_SET_AND_CHECK_MACRO)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/stategraphConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/stategraphConfigVersion.cmake
        DESTINATION ${stategraph_cmake_dir})
