# Enables C (for the C API's test and example) with the C compiler that
# matches the C++ one: the sanitizer presets use clang++-19, and a C object
# built by another compiler would link against another sanitizer runtime.
# A CMAKE_C_COMPILER given on the command line wins.
if(NOT CMAKE_C_COMPILER)
  get_filename_component(aspen_cxx_name ${CMAKE_CXX_COMPILER} NAME)
  string(REPLACE "clang++" "clang" aspen_c_name "${aspen_cxx_name}")
  string(REPLACE "g++" "gcc" aspen_c_name "${aspen_c_name}")
  find_program(aspen_c_compiler NAMES ${aspen_c_name})
  if(aspen_c_compiler)
    set(CMAKE_C_COMPILER ${aspen_c_compiler})
  endif()
endif()
enable_language(C)

# aspen_add_c_program(<name> <source>): a C11 program linked to aspen (the
# C++ linker is chosen for it, as aspen is a C++ library).
function(aspen_add_c_program name src)
  add_executable(${name} ${src})
  set_target_properties(${name} PROPERTIES C_STANDARD 11 C_STANDARD_REQUIRED ON C_EXTENSIONS OFF)
  target_compile_options(${name} PRIVATE -pedantic)
  target_link_libraries(${name} PRIVATE aspen::aspen)
endfunction()
