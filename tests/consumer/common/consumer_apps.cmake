# SPDX-License-Identifier: MIT
# consumer_apps.cmake - the consumer programs, shared by the CMake-package
# and add_subdirectory consumers (tests/consumer/package, .../subdir).
#
# consumer_apps(<shared target> <static target> <have hpp> [<expected version>])
# defines three executables from tests/consumer/common:
#   app_shared  main.c + part_c.c + part_cpp.cpp, linked with <shared target>
#   app_static  the same, linked with <static target>
#   app_c       main.c + part_c.c only (a pure C program), <shared target>
#   app_malloc_static  tests/c_api_ctest.c with the drop-in linked
#               statically (arenakit::malloc_static): malloc & co. are
#               arenakit's in a program with no libarenakit*.so
set(CONSUMER_COMMON_DIR ${CMAKE_CURRENT_LIST_DIR})

function(consumer_apps shared_target static_target have_hpp)
  set(expect_version ${ARGV3})
  foreach(t IN ITEMS ${shared_target} ${static_target})
    if(NOT TARGET ${t})
      message(FATAL_ERROR "consumer: target ${t} does not exist")
    endif()
  endforeach()
  set(common ${CONSUMER_COMMON_DIR})
  foreach(app IN ITEMS app_shared app_static app_c)
    if(app STREQUAL "app_c")
      add_executable(${app} ${common}/main.c ${common}/part_c.c)
      target_compile_definitions(${app} PRIVATE CONSUMER_NO_CXX=1)
    else()
      add_executable(${app} ${common}/main.c ${common}/part_c.c ${common}/part_cpp.cpp)
    endif()
    if(app STREQUAL "app_static")
      target_link_libraries(${app} PRIVATE ${static_target})
    else()
      target_link_libraries(${app} PRIVATE ${shared_target})
    endif()
    target_compile_definitions(${app} PRIVATE AK_CONSUMER_HAVE_HPP=${have_hpp})
    if(expect_version)
      target_compile_definitions(${app} PRIVATE AK_CONSUMER_EXPECT_VERSION=${expect_version})
    endif()
    set_target_properties(${app} PROPERTIES
      C_STANDARD 11 C_STANDARD_REQUIRED ON C_EXTENSIONS OFF
      CXX_STANDARD 17 CXX_STANDARD_REQUIRED ON CXX_EXTENSIONS OFF)
    target_compile_options(${app} PRIVATE -Wall -Wextra)
  endforeach()
  if(NOT TARGET arenakit::malloc_static)
    message(FATAL_ERROR "consumer: target arenakit::malloc_static does not exist")
  endif()
  add_executable(app_malloc_static ${common}/../../c_api_ctest.c)
  target_link_libraries(app_malloc_static PRIVATE arenakit::malloc_static)
  target_compile_definitions(app_malloc_static PRIVATE AK_TEST_OVERRIDE=1)
  set_target_properties(app_malloc_static PROPERTIES C_STANDARD 11 C_STANDARD_REQUIRED ON)
endfunction()

# consumer_from_source(<arenakit source dir> <how>): for the consumers that
# build arenakit from source (add_subdirectory, FetchContent): checks that
# arenakit builds its library only and installs nothing there, then
# defines the programs.
function(consumer_from_source source how)
  if(AK_BUILD_TESTS OR AK_BUILD_BENCH OR AK_INSTALL)
    message(FATAL_ERROR "consumer: arenakit taken with ${how} defaults AK_BUILD_TESTS=${AK_BUILD_TESTS} "
                        "AK_BUILD_BENCH=${AK_BUILD_BENCH} AK_INSTALL=${AK_INSTALL}; all should be OFF")
  endif()
  set(have_hpp 0)
  if(EXISTS "${source}/include/arenakit/arenakit.hpp")
    set(have_hpp 1)
  endif()
  message(STATUS "consumer: arenakit from source ${source} (${how}); arenakit.hpp: ${have_hpp}")
  consumer_apps(arenakit::arenakit arenakit::arenakit_static ${have_hpp})
endfunction()
