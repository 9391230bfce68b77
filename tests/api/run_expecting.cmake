# Runs one command and checks both its exit status and its output, which
# PASS_REGULAR_EXPRESSION alone cannot do (it ignores the status):
#   cmake -DEXPECT_EXIT=0|nonzero -DEXPECT_OUTPUT=<regex> [-DREJECT_OUTPUT=<regex>]
#         -P run_expecting.cmake -- COMMAND ARGS...
# EXPECT_OUTPUT must match stdout+stderr; REJECT_OUTPUT must not. Arguments
# cannot hold a semicolon (CMake would split them there).
cmake_minimum_required(VERSION 3.25)

set(cmd "")
set(after_dashes FALSE)
math(EXPR last "${CMAKE_ARGC} - 1")
foreach(i RANGE ${last})
  if(after_dashes)
    list(APPEND cmd "${CMAKE_ARGV${i}}")
  elseif(CMAKE_ARGV${i} STREQUAL "--")
    set(after_dashes TRUE)
  endif()
endforeach()
if(NOT cmd)
  message(FATAL_ERROR "run_expecting.cmake: no command after --")
endif()
if(NOT DEFINED EXPECT_EXIT OR NOT DEFINED EXPECT_OUTPUT)
  message(FATAL_ERROR "run_expecting.cmake: set EXPECT_EXIT and EXPECT_OUTPUT")
endif()

string(JOIN " " shown ${cmd})
message("running: ${shown}")
execute_process(COMMAND ${cmd} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}${err}")
set(all "${out}${err}")

if(EXPECT_EXIT STREQUAL "nonzero")
  if(NOT rc MATCHES "^[0-9]+$" OR rc EQUAL 0)
    message(FATAL_ERROR "expected a non-zero exit status, got '${rc}'")
  endif()
elseif(NOT rc STREQUAL "${EXPECT_EXIT}")
  message(FATAL_ERROR "expected exit status ${EXPECT_EXIT}, got '${rc}'")
endif()
if(NOT all MATCHES "${EXPECT_OUTPUT}")
  message(FATAL_ERROR "the output does not match '${EXPECT_OUTPUT}'")
endif()
if(DEFINED REJECT_OUTPUT AND all MATCHES "${REJECT_OUTPUT}")
  message(FATAL_ERROR "the output matches '${REJECT_OUTPUT}', which it must not")
endif()
message("exit status ${rc} and output as expected")
