# The compiler cache. A rebuild of the same sources (a build folder made anew, another
# clone, CI's fresh clone on a machine where the suite ran before) takes the cached objects
# instead of compiling: the suite's four builds take minutes of its time on 2 cores.
# TESSERA_CCACHE: AUTO (default: when ccache is installed; tools/setup.sh installs it), ON
# (stop when it is not), OFF. A launcher given on the command line
# (CMAKE_<LANG>_COMPILER_LAUNCHER) is kept as it is.
# Paths under the source tree are hashed relative to it (CCACHE_BASEDIR) and the build
# folder's own path is not hashed (CCACHE_NOHASHDIR), so clones in other folders share the
# cache; the price is that a cached object's debug information names the folder it was
# first compiled in. Nothing else changes: ccache returns the object the compiler would.
set(TESSERA_CCACHE AUTO CACHE STRING "Compiler cache: AUTO (when ccache is found), ON, OFF")
set_property(CACHE TESSERA_CCACHE PROPERTY STRINGS AUTO ON OFF)
if(NOT TESSERA_CCACHE STREQUAL "OFF")
  find_program(TESSERA_CCACHE_PROGRAM ccache)
  if(NOT TESSERA_CCACHE_PROGRAM AND TESSERA_CCACHE STREQUAL "ON")
    message(FATAL_ERROR "TESSERA_CCACHE=ON but ccache is not installed (apt-get install ccache, "
                        "or -DTESSERA_CCACHE=OFF)")
  endif()
  if(TESSERA_CCACHE_PROGRAM)
    set(_tessera_launcher ${CMAKE_COMMAND} -E env CCACHE_BASEDIR=${CMAKE_SOURCE_DIR}
        CCACHE_NOHASHDIR=1 ${TESSERA_CCACHE_PROGRAM})
    foreach(lang C CXX CUDA)
      if(NOT CMAKE_${lang}_COMPILER_LAUNCHER)
        set(CMAKE_${lang}_COMPILER_LAUNCHER ${_tessera_launcher})
      endif()
    endforeach()
    message(STATUS "tessera: compiler cache ${TESSERA_CCACHE_PROGRAM}")
  endif()
endif()
