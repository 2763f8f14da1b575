# The steps of tests/package (cmake -P). MODE:
#   install       BUILD, PREFIX, CONFIG, LIBDIR, INCLUDEDIR: `cmake --install BUILD` into a fresh
#                 PREFIX, then check that the package files and each layer's headers are there
#                 (TIERED: the tiered component's too)
#   find_package  PREFIX: build consumer/ against the installed package
#   subdirectory  STATEGRAPH_SOURCE_DIR: build consumer/ with add_subdirectory() of the sources
#   configs       STATEGRAPH_SOURCE_DIR, BINARY, GENERATOR, CXX, LAUNCHER, CONSUMER (configs/):
#                 builds the graph libraries alone (no server, no optional parts) in Release and
#                 in Debug (BINARY/lib-<config>, kept between runs), installs both into one
#                 BINARY/prefix, then builds CONSUMER in Release, Debug and RelWithDebInfo and
#                 checks that each linked the matching libraries (Debug: libstategraph_graphd.a;
#                 the optimized ones: libstategraph_graph.a) and runs
# The consumer modes also take SOURCE (consumer/), BINARY (its build dir, emptied first),
# GENERATOR, CXX, LAUNCHER (ccache, may be empty), SANITIZE and TIERED (also build and run
# consumer_tiered, which must print "consumer_tiered: ok"); they build at -O0 and run the
# programs, which must print "consumer: ok" and "consumer_server: ok".
# A program that hangs fails its step after this many seconds (builds may take longer).
set(program_timeout 120)
function(run what)
  set(limit 3000)
  if(what MATCHES "^running")
    set(limit ${program_timeout})
  endif()
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out TIMEOUT ${limit})
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${out}")
  endif()
  set(out "${out}" PARENT_SCOPE)
endfunction()

if(MODE STREQUAL "install")
  file(REMOVE_RECURSE ${PREFIX})
  set(config)
  if(CONFIG)
    set(config --config ${CONFIG})
  endif()
  run("cmake --install" ${CMAKE_COMMAND} --install ${BUILD} --prefix ${PREFIX} ${config})
  set(d) # a Debug build's libraries end in "d" (stategraph_install.cmake)
  if(CONFIG STREQUAL "Debug")
    set(d d)
  endif()
  foreach(f ${LIBDIR}/cmake/stategraph/stategraphConfig.cmake ${LIBDIR}/cmake/stategraph/stategraphConfigVersion.cmake
            ${LIBDIR}/cmake/stategraph/stategraphTargets.cmake ${LIBDIR}/cmake/stategraph/stategraphSqliteTargets.cmake
            ${LIBDIR}/libstategraph_core${d}.a ${LIBDIR}/libstategraph_graph${d}.a
            ${INCLUDEDIR}/stategraph/core/error.hpp ${INCLUDEDIR}/stategraph/core/detail/names.hpp
            ${INCLUDEDIR}/stategraph/state_graph.hpp ${INCLUDEDIR}/stategraph/checkpoint/sqlite_saver.hpp
            ${INCLUDEDIR}/stategraph/dsl/dsl.hpp ${INCLUDEDIR}/stategraph/server/server.hpp
            ${INCLUDEDIR}/stategraph/checkpoint/store/sqlite_store.hpp)
    if(NOT EXISTS ${PREFIX}/${f})
      message(FATAL_ERROR "installed tree lacks ${f}")
    endif()
  endforeach()
  # expect_installed(WHAT FILE...): each FILE is under PREFIX, else a failure naming WHAT.
  function(expect_installed what)
    foreach(f ${ARGN})
      if(NOT EXISTS ${PREFIX}/${f})
        message(FATAL_ERROR "installed tree lacks ${f} (${what})")
      endif()
    endforeach()
  endfunction()
  if(MCP)
    expect_installed("stategraph::mcp, component nodes" ${LIBDIR}/cmake/stategraph/stategraphNodesTargets.cmake
                     ${LIBDIR}/libstategraph_mcp${d}.a ${INCLUDEDIR}/stategraph/mcp/client.hpp)
  endif()
  if(TIERED)
    expect_installed("the tiered component" ${LIBDIR}/cmake/stategraph/stategraphTieredTargets.cmake
                     ${LIBDIR}/libstategraph_tiered${d}.a ${INCLUDEDIR}/stategraph/checkpoint/tiered_saver.hpp)
  endif()
  message(STATUS "installed into ${PREFIX}")
  return()
endif()

if(MODE STREQUAL "configs")
  set(prefix ${BINARY}/prefix)
  file(REMOVE_RECURSE ${prefix})
  set(launcher)
  if(LAUNCHER)
    set(launcher -DCMAKE_CXX_COMPILER_LAUNCHER=${LAUNCHER})
  endif()
  foreach(config Release Debug)
    set(lib ${BINARY}/lib-${config})
    run("configuring the ${config} libraries" ${CMAKE_COMMAND} -S ${STATEGRAPH_SOURCE_DIR} -B ${lib} -G ${GENERATOR}
        -DCMAKE_CXX_COMPILER=${CXX} ${launcher} -DCMAKE_BUILD_TYPE=${config} -DSTATEGRAPH_INSTALL=ON
        -DSTATEGRAPH_BUILD_TESTS=OFF -DSTATEGRAPH_BUILD_EXAMPLES=OFF -DSTATEGRAPH_BUILD_BENCH=OFF
        -DSTATEGRAPH_WITH_SERVER=OFF -DSTATEGRAPH_WITH_SQLITE=OFF -DSTATEGRAPH_WITH_NODES=OFF
        -DSTATEGRAPH_WITH_REDIS=OFF -DSTATEGRAPH_WITH_POSTGRES=OFF)
    run("building the ${config} libraries" ${CMAKE_COMMAND} --build ${lib} --parallel 2)
    run("installing the ${config} libraries" ${CMAKE_COMMAND} --install ${lib} --prefix ${prefix})
  endforeach()
  file(GLOB libdir LIST_DIRECTORIES true ${prefix}/lib*)
  foreach(f libstategraph_graph.a libstategraph_graphd.a cmake/stategraph/stategraphTargets-release.cmake
            cmake/stategraph/stategraphTargets-debug.cmake)
    if(NOT EXISTS ${libdir}/${f})
      message(FATAL_ERROR "the prefix holding both configurations lacks ${libdir}/${f}")
    endif()
  endforeach()
  foreach(config Release Debug RelWithDebInfo)
    set(app ${BINARY}/app-${config})
    file(REMOVE_RECURSE ${app})
    run("configuring the ${config} consumer" ${CMAKE_COMMAND} -S ${CONSUMER} -B ${app} -G ${GENERATOR}
        -DCMAKE_CXX_COMPILER=${CXX} ${launcher} -DCMAKE_BUILD_TYPE=${config} -DCMAKE_PREFIX_PATH=${prefix})
    run("building the ${config} consumer" ${CMAKE_COMMAND} --build ${app} --verbose)
    set(trace "${out}")
    file(READ ${app}/linked-${config}.txt linked)
    string(STRIP "${linked}" linked)
    set(expected ${libdir}/libstategraph_graph.a)
    if(config STREQUAL "Debug")
      set(expected ${libdir}/libstategraph_graphd.a)
    endif()
    if(NOT linked STREQUAL expected)
      message(FATAL_ERROR "the ${config} consumer was given ${linked}, not ${expected}")
    endif()
    get_filename_component(name ${expected} NAME)
    string(REGEX MATCHALL "libstategraph_graphd?\\.a" opened "${trace}")
    list(REMOVE_DUPLICATES opened)
    if(NOT opened STREQUAL name)
      message(FATAL_ERROR "the ${config} consumer's linker opened ${opened}, not only ${name}:\n${trace}")
    endif()
    run("running the ${config} consumer" ${app}/configs_app)
    if(NOT out MATCHES "configs_app: ok")
      message(FATAL_ERROR "the ${config} consumer did not report ok:\n${out}")
    endif()
    message(STATUS "${config} consumer: linked ${name}, ran ok")
  endforeach()
  return()
endif()

file(REMOVE_RECURSE ${BINARY})
set(args -S ${SOURCE} -B ${BINARY} -G ${GENERATOR} -DCMAKE_CXX_COMPILER=${CXX}
    -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-O0 -DSTATEGRAPH_CONSUMER_MODE=${MODE})
if(TIERED)
  list(APPEND args -DSTATEGRAPH_CONSUMER_TIERED=ON)
endif()
if(MCP)
  list(APPEND args -DSTATEGRAPH_CONSUMER_MCP=ON)
endif()
# No ccache for the consumer: its precompiled header is built from the installed copy of the
# headers, and a header compiled against a cached precompiled header of an earlier install (a
# cache shared between clones, scripts/test's CCACHE_BASEDIR) failed with "redefinition of
# 'struct sqlite_options'" (stop 49). The consumer is a handful of files.
if(SANITIZE)
  # The libraries were built with the sanitizers; the consumer links their runtimes too.
  list(APPEND args "-DCMAKE_CXX_FLAGS=-fsanitize=address,undefined -fno-omit-frame-pointer"
                   -DCMAKE_EXE_LINKER_FLAGS=-fsanitize=address,undefined)
endif()
if(MODE STREQUAL "find_package")
  list(APPEND args -DCMAKE_PREFIX_PATH=${PREFIX})
elseif(MODE STREQUAL "subdirectory")
  list(APPEND args -DSTATEGRAPH_SOURCE_DIR=${STATEGRAPH_SOURCE_DIR})
else()
  message(FATAL_ERROR "MODE must be install, find_package, subdirectory or configs")
endif()

run("configuring the consumer" ${CMAKE_COMMAND} ${args})
run("building the consumer" ${CMAKE_COMMAND} --build ${BINARY} --target consumer consumer_server consumer_features --parallel 2)
# stategraph::stategraph gave `consumer` the precompiled header; consumer_server has none.
file(GLOB_RECURSE consumer_pch ${BINARY}/CMakeFiles/consumer.dir/cmake_pch.hxx.gch)
file(GLOB_RECURSE server_pch ${BINARY}/CMakeFiles/consumer_server.dir/cmake_pch.hxx.gch)
if(NOT consumer_pch OR server_pch)
  message(FATAL_ERROR "the precompiled header: want one for consumer (stategraph::stategraph), none for consumer_server; "
                      "found '${consumer_pch}' and '${server_pch}'")
endif()
run("running the consumer" ${BINARY}/consumer ${BINARY}/orders.db)
message(STATUS "${out}")
if(NOT out MATCHES "consumer: ok")
  message(FATAL_ERROR "the consumer did not report ok")
endif()
run("running consumer_features" ${BINARY}/consumer_features ${BINARY}/features.db)
message(STATUS "${out}")
if(NOT out MATCHES "consumer_features: ok")
  message(FATAL_ERROR "consumer_features did not report ok")
endif()
run("running consumer_server" ${BINARY}/consumer_server ${BINARY}/parcels.db)
message(STATUS "${out}")
if(NOT out MATCHES "consumer_server: ok")
  message(FATAL_ERROR "consumer_server did not report ok")
endif()
if(MCP)
  run("building consumer_mcp" ${CMAKE_COMMAND} --build ${BINARY} --target consumer_mcp --parallel 2)
  run("running consumer_mcp" ${BINARY}/consumer_mcp)
  message(STATUS "${out}")
  if(NOT out MATCHES "consumer_mcp: ok")
    message(FATAL_ERROR "consumer_mcp did not report ok")
  endif()
endif()
if(TIERED)
  run("building consumer_tiered" ${CMAKE_COMMAND} --build ${BINARY} --target consumer_tiered --parallel 2)
  run("running consumer_tiered" ${BINARY}/consumer_tiered)
  message(STATUS "${out}")
  if(NOT out MATCHES "consumer_tiered: ok")
    message(FATAL_ERROR "consumer_tiered did not report ok")
  endif()
endif()
