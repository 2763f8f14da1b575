# The steps of tests/package (cmake -P). MODE:
#   install       BUILD, PREFIX, CONFIG, LIBDIR, INCLUDEDIR: `cmake --install BUILD` into a fresh
#                 PREFIX, then check that the package files and each layer's headers are there
#                 (TIERED: the tiered component's too)
#   find_package  PREFIX: build consumer/ against the installed package
#   subdirectory  STATEGRAPH_SOURCE_DIR: build consumer/ with add_subdirectory() of the sources
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
  foreach(f ${LIBDIR}/cmake/stategraph/stategraphConfig.cmake ${LIBDIR}/cmake/stategraph/stategraphConfigVersion.cmake
            ${LIBDIR}/cmake/stategraph/stategraphTargets.cmake ${LIBDIR}/cmake/stategraph/stategraphSqliteTargets.cmake
            ${LIBDIR}/libstategraph_core.a ${LIBDIR}/libstategraph_graph.a
            ${INCLUDEDIR}/stategraph/error.hpp ${INCLUDEDIR}/stategraph/detail/names.hpp
            ${INCLUDEDIR}/stategraph/state_graph.hpp ${INCLUDEDIR}/stategraph/checkpoint/sqlite_saver.hpp
            ${INCLUDEDIR}/stategraph/dsl/dsl.hpp ${INCLUDEDIR}/stategraph/server/server.hpp
            ${INCLUDEDIR}/stategraph/store/sqlite_store.hpp)
    if(NOT EXISTS ${PREFIX}/${f})
      message(FATAL_ERROR "installed tree lacks ${f}")
    endif()
  endforeach()
  if(TIERED)
    foreach(f ${LIBDIR}/cmake/stategraph/stategraphTieredTargets.cmake ${LIBDIR}/libstategraph_tiered.a
              ${INCLUDEDIR}/stategraph/checkpoint/tiered_saver.hpp)
      if(NOT EXISTS ${PREFIX}/${f})
        message(FATAL_ERROR "installed tree lacks ${f} (the tiered component)")
      endif()
    endforeach()
  endif()
  message(STATUS "installed into ${PREFIX}")
  return()
endif()

file(REMOVE_RECURSE ${BINARY})
set(args -S ${SOURCE} -B ${BINARY} -G ${GENERATOR} -DCMAKE_CXX_COMPILER=${CXX}
    -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-O0 -DSTATEGRAPH_CONSUMER_MODE=${MODE})
if(TIERED)
  list(APPEND args -DSTATEGRAPH_CONSUMER_TIERED=ON)
endif()
if(LAUNCHER)
  list(APPEND args -DCMAKE_CXX_COMPILER_LAUNCHER=${LAUNCHER})
endif()
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
  message(FATAL_ERROR "MODE must be install, find_package or subdirectory")
endif()

run("configuring the consumer" ${CMAKE_COMMAND} ${args})
run("building the consumer" ${CMAKE_COMMAND} --build ${BINARY} --target consumer consumer_server --parallel 2)
run("running the consumer" ${BINARY}/consumer ${BINARY}/orders.db)
message(STATUS "${out}")
if(NOT out MATCHES "consumer: ok")
  message(FATAL_ERROR "the consumer did not report ok")
endif()
run("running consumer_server" ${BINARY}/consumer_server ${BINARY}/parcels.db)
message(STATUS "${out}")
if(NOT out MATCHES "consumer_server: ok")
  message(FATAL_ERROR "consumer_server did not report ok")
endif()
if(TIERED)
  run("building consumer_tiered" ${CMAKE_COMMAND} --build ${BINARY} --target consumer_tiered --parallel 2)
  run("running consumer_tiered" ${BINARY}/consumer_tiered)
  message(STATUS "${out}")
  if(NOT out MATCHES "consumer_tiered: ok")
    message(FATAL_ERROR "consumer_tiered did not report ok")
  endif()
endif()
