# Runs `stategraph_bench <scenario> <checkpointer> --smoke` for each pair below and fails on
# the first pair that exits non-zero, or that leaves its PostgreSQL schema or Redis keys behind
# (checked with psql and redis-cli when installed). Usage: cmake -DBENCH=<exe> -DDB_DIR=<dir> -P bench_smoke.cmake
set(pairs
  "chain20 none" "chain20 memory" "chain20 sqlite_normal"
  "durability memory" "durability sqlite_normal"
  "fanout8 memory" "fanout8 sqlite_normal"
  "hitl memory" "hitl sqlite_normal"
  "throughput memory" "throughput sqlite_normal"
  "supervisor none" "supervisor memory" "supervisor sqlite_normal"
  "checkpoint_size memory" "checkpoint_size sqlite_normal"
  "sqlite_commit sqlite_normal")
# The server checkpointers only when a server is given (and the saver is built in): no server
# is needed otherwise.
execute_process(COMMAND ${BENCH} --list OUTPUT_VARIABLE listed)
foreach(kind_var IN ITEMS "postgres;POSTGRES" "redis;REDIS")
  list(GET kind_var 0 kind)
  list(GET kind_var 1 var)
  set(url "$ENV{STATEGRAPH_BENCH_${var}}$ENV{STATEGRAPH_TEST_${var}}")
  if(NOT url STREQUAL "" AND listed MATCHES "chain20 ${kind}\n")
    list(APPEND pairs "chain20 ${kind}" "supervisor ${kind}")
  endif()
endforeach()
# "tiered" (Redis in front of PostgreSQL) when both servers are given.
if(NOT "$ENV{STATEGRAPH_BENCH_POSTGRES}$ENV{STATEGRAPH_TEST_POSTGRES}" STREQUAL "" AND
   NOT "$ENV{STATEGRAPH_BENCH_REDIS}$ENV{STATEGRAPH_TEST_REDIS}" STREQUAL "" AND listed MATCHES "chain20 tiered\n")
  list(APPEND pairs "chain20 tiered" "supervisor tiered")
endif()
find_program(psql psql)
find_program(redis_cli redis-cli)
foreach(pair IN LISTS pairs)
  separate_arguments(args UNIX_COMMAND "${pair}")
  execute_process(COMMAND ${BENCH} ${args} --smoke --db-dir ${DB_DIR}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "bench_smoke: ${pair} failed (${rc}):\n${err}")
  endif()
  string(FIND "${out}" "\"metrics\":[{" found)
  if(found EQUAL -1)
    message(FATAL_ERROR "bench_smoke: ${pair} printed no metrics:\n${out}")
  endif()
  # The throughput row on SQLite carries its rows' floor (scripts/bench's limit line reads it).
  if(pair STREQUAL "throughput sqlite_normal" AND NOT out MATCHES "\"rows_floor\":{\"us_per_run\":[0-9]")
    message(FATAL_ERROR "bench_smoke: ${pair} printed no rows_floor:\n${out}")
  endif()
  # and the CPU its runs took (the floor with the runs' work reads it, from the memory row)
  if(pair MATCHES "^throughput " AND NOT out MATCHES "\"cpu_us_per_run\":[0-9]")
    message(FATAL_ERROR "bench_smoke: ${pair} printed no cpu_us_per_run:\n${out}")
  endif()
  # HITL on SQLite carries its calls' statements alone, measured on the rows it stored: three
  # checkpoints up to the interrupt, two after it (scripts/bench's limit hitl lines read it).
  if(pair STREQUAL "hitl sqlite_normal" AND NOT out MATCHES "\"calls_floor\":{\"us_first_call\":[0-9][^}]*\"rows\":\\[3,2\\]")
    message(FATAL_ERROR "bench_smoke: ${pair} printed no calls_floor of 3 and 2 rows:\n${out}")
  endif()
  # What a run stored on a server goes with it.
  set(pg_url "$ENV{STATEGRAPH_BENCH_POSTGRES}")
  if(pg_url STREQUAL "")
    set(pg_url "$ENV{STATEGRAPH_TEST_POSTGRES}")
  endif()
  set(redis_url "$ENV{STATEGRAPH_BENCH_REDIS}")
  if(redis_url STREQUAL "")
    set(redis_url "$ENV{STATEGRAPH_TEST_REDIS}")
  endif()
  if(out MATCHES "\"postgres_schema\":\"([A-Za-z0-9_]+)\"" AND psql)
    set(schema "${CMAKE_MATCH_1}")
    execute_process(COMMAND ${psql} "${pg_url}" -Atc "SELECT count(*) FROM pg_namespace WHERE nspname = '${schema}'"
                    OUTPUT_VARIABLE left OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE prc)
    if(NOT prc EQUAL 0 OR NOT left STREQUAL "0")
      message(FATAL_ERROR "bench_smoke: ${pair} left its PostgreSQL schema ${schema} behind (${left})")
    endif()
  endif()
  if(out MATCHES "\"redis_key_prefix\":\"([A-Za-z0-9_]+)\"" AND redis_cli)
    set(prefix "${CMAKE_MATCH_1}")
    execute_process(COMMAND ${redis_cli} -u "${redis_url}" --scan --pattern "${prefix}*"
                    OUTPUT_VARIABLE left OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE rrc)
    if(NOT rrc EQUAL 0 OR NOT left STREQUAL "")
      message(FATAL_ERROR "bench_smoke: ${pair} left Redis keys of ${prefix} behind")
    endif()
  endif()
  message(STATUS "bench_smoke: ${pair}: ok")
endforeach()
