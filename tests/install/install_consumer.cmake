# cmake --install into a scratch prefix, then build and run a consumer of it.
cmake_minimum_required(VERSION 3.25)

function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  set(last_output "${out}${err}" PARENT_SCOPE)
  if(NOT rc EQUAL 0)
    string(JOIN " " shown ${ARGN})
    message(FATAL_ERROR "${what} failed (${rc}): ${shown}\n${out}${err}")
  endif()
endfunction()

# The consumer prints one line per rank; both must be there.
function(expect_ranks output)
  foreach(r 0 1)
    string(FIND "${output}" "consumer rank ${r} of 2: allreduce ok" at)
    if(at EQUAL -1)
      message(FATAL_ERROR "rank ${r} did not report success:\n${output}")
    endif()
  endforeach()
endfunction()

set(prefix ${WORK_DIR}/prefix)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})

run("install" ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
foreach(f include/ringlet/ringlet.h include/ringlet/ringlet_c.h include/ringlet/types.h bin/ringletrun
          ${LIBDIR}/cmake/Ringlet/RingletConfig.cmake ${LIBDIR}/pkgconfig/ringlet.pc)
  if(NOT EXISTS ${prefix}/${f})
    message(FATAL_ERROR "the install lacks ${f}")
  endif()
endforeach()

# 1. CMake package.
run("configure consumer" ${CMAKE_COMMAND} -S ${CONSUMER_DIR} -B ${WORK_DIR}/cmake-build -G ${GENERATOR}
    -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_CXX_COMPILER=${CXX})
run("build consumer" ${CMAKE_COMMAND} --build ${WORK_DIR}/cmake-build)
run("run consumer" ${prefix}/bin/ringletrun -np 2 ${WORK_DIR}/cmake-build/consumer)
expect_ranks("${last_output}")
message("find_package(Ringlet) consumer ok")

# 2. pkg-config. ringlet.pc names the prefix chosen at configure time, so the
# scratch prefix is given with --define-variable, as for any relocated install.
if(NOT PKG_CONFIG)
  message("pkg-config not found: the pkg-config consumer build is skipped")
  return()
endif()
set(ENV{PKG_CONFIG_PATH} ${prefix}/${LIBDIR}/pkgconfig)
run("pkg-config" ${PKG_CONFIG} --define-variable=prefix=${prefix} --cflags --libs ringlet)
string(STRIP "${last_output}" flags)
separate_arguments(flags UNIX_COMMAND "${flags}")
run("compile with pkg-config flags" ${CXX} -std=c++20 ${CONSUMER_DIR}/consumer.cc ${flags}
    -Wl,-rpath,${prefix}/${LIBDIR} -o ${WORK_DIR}/consumer-pc)
run("run pkg-config consumer" ${prefix}/bin/ringletrun -np 2 ${WORK_DIR}/consumer-pc)
expect_ranks("${last_output}")
message("pkg-config consumer ok")
