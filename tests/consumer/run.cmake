# cmake -DBUILD=<aspen build dir> -DSOURCE=<aspen source dir> -DWORK=<scratch dir>
#       -DCXX=<compiler> -DMODE=find_package|add_subdirectory
#       [-DBUILD_TYPE=Release|Debug] -P run.cmake
# Builds tests/consumer against aspen (installed from BUILD into WORK, or
# added as a subdirectory) and runs it; fails unless it prints fib(25) and
# the two chains' sums.
foreach(var BUILD SOURCE WORK CXX MODE)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "run.cmake: -D${var}=... is missing")
  endif()
endforeach()

function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${out}\n${err}")
  endif()
  set(last_output "${out}" PARENT_SCOPE)
endfunction()

if(NOT DEFINED BUILD_TYPE)
  set(BUILD_TYPE Release)
endif()

file(REMOVE_RECURSE ${WORK})
set(configure ${CMAKE_COMMAND} -S ${SOURCE}/tests/consumer -B ${WORK}/build -G Ninja
    -DCMAKE_BUILD_TYPE=${BUILD_TYPE} -DCMAKE_CXX_COMPILER=${CXX})
if(MODE STREQUAL "find_package")
  run("cmake --install" ${CMAKE_COMMAND} --install ${BUILD} --prefix ${WORK}/prefix)
  run("configure" ${configure} -DCMAKE_PREFIX_PATH=${WORK}/prefix)
elseif(MODE STREQUAL "add_subdirectory")
  run("configure" ${configure} -DASPEN_SOURCE_DIR=${SOURCE})
else()
  message(FATAL_ERROR "run.cmake: MODE must be find_package or add_subdirectory")
endif()
run("build" ${CMAKE_COMMAND} --build ${WORK}/build)
run("consumer" ${WORK}/build/consumer)
if(NOT last_output MATCHES "consumer: fib\\(25\\) = 75025\nconsumer: chains 1000000 1000000")
  message(FATAL_ERROR "the consumer printed: ${last_output}")
endif()
message(STATUS "consumer (${MODE}, ${BUILD_TYPE}): ${last_output}")
