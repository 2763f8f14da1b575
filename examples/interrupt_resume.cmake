# The test of examples/interrupt_resume.cpp: two processes in sequence on one fresh SQLite file.
#   cmake -DEXAMPLE=<example_interrupt_resume> -DDB=<file> -P interrupt_resume.cmake
file(REMOVE ${DB} ${DB}-wal ${DB}-shm)

# Runs the example with ARGN; fails unless it exits 0 and its output matches `expect`.
function(run_process expect)
  execute_process(COMMAND ${EXAMPLE} ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  string(JOIN " " args ${ARGN})
  message("$ interrupt_resume ${args}\n${out}${err}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "exited with ${rc}")
  elseif(NOT out MATCHES "${expect}")
    message(FATAL_ERROR "the output does not match '${expect}'")
  endif()
endfunction()

run_process("paused in 'ask': Which day for a table for two\\?" ask ${DB} table-7)
run_process("reply: +Booked a table for two on Friday\\." answer ${DB} table-7 Friday)
