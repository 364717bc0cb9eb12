# cmake -DBUILD=<aspen build dir> -DSOURCE=<aspen source dir> -DWORK=<scratch dir>
#       -DCXX=<compiler> -DMODE=find_package|add_subdirectory|shared_library
#       [-DBUILD_TYPE=Release|Debug|MinSizeRel] [-DLIBCXX=ON] -P run.cmake
# Builds tests/consumer against aspen (installed from BUILD into WORK, or
# added as a subdirectory) and runs it; fails unless it prints fib(25) and
# the two chains' sums. shared_library builds aspen again from SOURCE with
# -DBUILD_SHARED_LIBS=ON, installs it, and also builds the C API's test
# program (tests/capi/capi_c_test.c) as a plain C program against the
# installed libaspen.so, as a language runtime would; both must run from
# the shared library. LIBCXX=ON builds everything with clang's standard
# library (CXX must be a clang; -stdlib=libc++) and checks that the program
# uses it alone.
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

# Builds the library alone from SOURCE, with the given cache arguments, and
# installs it into WORK/prefix.
function(install_from_source)
  run("configure aspen" ${CMAKE_COMMAND} -S ${SOURCE} -B ${WORK}/aspen -G Ninja -DCMAKE_BUILD_TYPE=${BUILD_TYPE}
      -DCMAKE_CXX_COMPILER=${CXX} -DASPEN_BUILD_TESTS=OFF -DASPEN_BUILD_BENCH=OFF -DASPEN_BUILD_EXAMPLES=OFF
      ${stdlib} ${ARGN})
  run("build aspen" ${CMAKE_COMMAND} --build ${WORK}/aspen)
  run("cmake --install" ${CMAKE_COMMAND} --install ${WORK}/aspen --prefix ${WORK}/prefix)
endfunction()

file(REMOVE_RECURSE ${WORK})
set(configure ${CMAKE_COMMAND} -S ${SOURCE}/tests/consumer -B ${WORK}/build -G Ninja
    -DCMAKE_BUILD_TYPE=${BUILD_TYPE} -DCMAKE_CXX_COMPILER=${CXX})
set(stdlib "")
if(LIBCXX)
  set(stdlib -DCMAKE_CXX_FLAGS=-stdlib=libc++ -DCMAKE_EXE_LINKER_FLAGS=-stdlib=libc++
      -DCMAKE_SHARED_LINKER_FLAGS=-stdlib=libc++)
  list(APPEND configure ${stdlib})
endif()
if(MODE STREQUAL "find_package")
  run("cmake --install" ${CMAKE_COMMAND} --install ${BUILD} --prefix ${WORK}/prefix)
  run("configure" ${configure} -DCMAKE_PREFIX_PATH=${WORK}/prefix)
elseif(MODE STREQUAL "add_subdirectory")
  run("configure" ${configure} -DASPEN_SOURCE_DIR=${SOURCE})
elseif(MODE STREQUAL "shared_library")
  install_from_source(-DBUILD_SHARED_LIBS=ON)
  file(GLOB_RECURSE shared ${WORK}/prefix/*/libaspen.so)
  file(GLOB_RECURSE static ${WORK}/prefix/*/libaspen.a)
  if(NOT shared OR static)
    message(FATAL_ERROR "expected libaspen.so and no libaspen.a, found: ${shared} ${static}")
  endif()
  # The C compiler that goes with CXX (the environment's CC may name another).
  string(REGEX REPLACE "clang\\+\\+" "clang" cc "${CXX}")
  string(REGEX REPLACE "g\\+\\+" "gcc" cc "${cc}")
  run("configure" ${configure} -DCMAKE_PREFIX_PATH=${WORK}/prefix -DCMAKE_C_COMPILER=${cc}
      -DASPEN_CONSUMER_C_PROGRAM=${SOURCE}/tests/capi/capi_c_test.c)
else()
  message(FATAL_ERROR "run.cmake: MODE must be find_package, add_subdirectory or shared_library")
endif()
run("build" ${CMAKE_COMMAND} --build ${WORK}/build)
run("consumer" ${WORK}/build/consumer)
if(NOT last_output MATCHES "consumer: fib\\(25\\) = 75025\nconsumer: chains 1000000 1000000")
  message(FATAL_ERROR "the consumer printed: ${last_output}")
endif()
set(summary "${last_output}")
if(LIBCXX)
  run("readelf" readelf -d ${WORK}/build/consumer)
  if(NOT last_output MATCHES "NEEDED[^\n]*libc\\+\\+\\.so" OR last_output MATCHES "libstdc\\+\\+")
    message(FATAL_ERROR "the consumer does not use libc++ alone:\n${last_output}")
  endif()
  string(APPEND summary "libc++ alone\n")
endif()
if(MODE STREQUAL "shared_library")
  # Both programs load aspen from the shared library, not a copy of it.
  foreach(program consumer capi_c)
    run("readelf" readelf -d ${WORK}/build/${program})
    if(NOT last_output MATCHES "NEEDED[^\n]*libaspen\\.so")
      message(FATAL_ERROR "${program} does not load libaspen.so:\n${last_output}")
    endif()
  endforeach()
  run("the C API's program" ${WORK}/build/capi_c)
  string(APPEND summary "capi_c: ${last_output}")
endif()
message(STATUS "consumer (${MODE}, ${BUILD_TYPE}, ${CXX}): ${summary}")
