# cmake/TesseraCuda.cmake — find the CUDA toolkit, cuDNN, NCCL and cuBLASLt (docs/gpu.md).
#
# In:  TESSERA_CUDA (AUTO|ON|OFF|EMU), TESSERA_NVIDIA_PIP (a pip site-packages/nvidia tree,
#      searched first), TESSERA_SANITIZE/TESSERA_FUZZ.
# Out: TESSERA_HAVE_CUDA (ON when the CUDA backend is built; the CUDA language is then
#      enabled with CMAKE_CUDA_ARCHITECTURES set), TESSERA_HAVE_NCCL, the imported
#      targets CUDA::cudart and CUDA::cublasLt (FindCUDAToolkit), tessera::cudnn and
#      tessera::nccl, and TESSERA_CUDNN_VERSION / TESSERA_NCCL_VERSION (strings).
#      TESSERA_CUDA_EMU: ON for EMU, the emulated device (kernels/cuda/emu/cuemu.h): the
#      CUDA backend compiled as C++ and run on the CPU, for tests without a GPU. It needs
#      the toolkit's headers (and cudnn.h), not nvcc; CUDA::cudart, CUDA::cublasLt and
#      tessera::cudnn then name the emulation (kernels/cuda/emu), and NCCL is off.
#
# cuDNN and NCCL are searched under TESSERA_NVIDIA_PIP/{cudnn,nccl}/{include,lib}, the
# toolkit and the system. pip trees ship versioned libraries only (libcudnn.so.9,
# libnccl.so.2), so those file names are searched too.
set(TESSERA_HAVE_CUDA OFF)
set(TESSERA_HAVE_NCCL OFF)
set(TESSERA_CUDA_EMU OFF)

string(TOUPPER "${TESSERA_CUDA}" _tsr_cuda_mode)
if(_tsr_cuda_mode MATCHES "^(ON|YES|TRUE|1|REQUIRED)$")
  set(_tsr_cuda_mode ON)
elseif(_tsr_cuda_mode MATCHES "^(OFF|NO|FALSE|0)$")
  set(_tsr_cuda_mode OFF)
elseif(NOT _tsr_cuda_mode MATCHES "^(AUTO|EMU)$")
  message(FATAL_ERROR "TESSERA_CUDA='${TESSERA_CUDA}': use AUTO, ON, OFF or EMU")
endif()

if(_tsr_cuda_mode STREQUAL "EMU")
  find_path(TESSERA_CUDA_INCLUDE_DIR cuda_runtime.h cublasLt.h cuda_bf16.h
            HINTS ENV CUDA_HOME ENV CUDA_PATH /usr/local/cuda PATH_SUFFIXES include)
  find_path(TESSERA_CUDNN_INCLUDE_DIR cudnn.h HINTS ${TESSERA_NVIDIA_PIP}/cudnn/include
            ${TESSERA_CUDA_INCLUDE_DIR} /usr/local/cuda/include PATH_SUFFIXES include)
  if(NOT TESSERA_CUDA_INCLUDE_DIR OR NOT TESSERA_CUDNN_INCLUDE_DIR)
    message(FATAL_ERROR "TESSERA_CUDA=EMU needs the CUDA toolkit's headers (cuda_runtime.h, "
            "cublasLt.h, cuda_bf16.h) and cudnn.h; found '${TESSERA_CUDA_INCLUDE_DIR}' and "
            "'${TESSERA_CUDNN_INCLUDE_DIR}'")
  endif()
  find_package(Python3 REQUIRED COMPONENTS Interpreter)  # kernels/cuda/emu/translate.py
  enable_language(CXX)  # the translated .cu files, in kernels/cuda/emu and tests alike
  set(CMAKE_CXX_STANDARD 17)
  set(CMAKE_CXX_STANDARD_REQUIRED ON)
  foreach(t CUDA::cudart CUDA::cublasLt tessera::cudnn)
    add_library(${t} INTERFACE IMPORTED)
    set_target_properties(${t} PROPERTIES INTERFACE_LINK_LIBRARIES tsr_cuemu
      INTERFACE_INCLUDE_DIRECTORIES "${TESSERA_CUDA_INCLUDE_DIR};${TESSERA_CUDNN_INCLUDE_DIR}")
  endforeach()
  set(TESSERA_HAVE_CUDA ON)
  set(TESSERA_CUDA_EMU ON)
  set(TESSERA_CUDNN_VERSION "none (emulated device)")
  message(STATUS "tessera: CUDA backend on the emulated device (CPU; kernels/cuda/emu), "
          "headers from ${TESSERA_CUDA_INCLUDE_DIR}")
  return()
endif()

# Sanitizer and fuzz builds check host code; AUTO leaves CUDA out of them (ASan and the
# CUDA runtime need protect_shadow_gap=0, and nvcc's time would be spent for nothing).
if(_tsr_cuda_mode STREQUAL "AUTO" AND (TESSERA_SANITIZE OR TESSERA_FUZZ))
  message(STATUS "tessera: CUDA off in this sanitizer/fuzz build (TESSERA_CUDA=ON forces it)")
  set(_tsr_cuda_mode OFF)
endif()

# Reports why CUDA is not built: fatal under ON, a status line under AUTO.
macro(_tsr_cuda_missing why)
  if(_tsr_cuda_mode STREQUAL "ON")
    message(FATAL_ERROR "TESSERA_CUDA=ON: ${why}. Install it, point -DTESSERA_NVIDIA_PIP= at a "
            "pip site-packages/nvidia tree, or configure with -DTESSERA_CUDA=OFF")
  endif()
  message(STATUS "tessera: CUDA backend off: ${why}")
  return()
endmacro()

if(_tsr_cuda_mode STREQUAL "OFF")
  message(STATUS "tessera: CUDA backend off (TESSERA_CUDA=${TESSERA_CUDA})")
  return()
endif()

include(CheckLanguage)
check_language(CUDA)
if(NOT CMAKE_CUDA_COMPILER)
  _tsr_cuda_missing("no CUDA compiler (nvcc) found (PATH, CUDACXX or CMAKE_CUDA_COMPILER)")
endif()
find_package(CUDAToolkit QUIET)
if(NOT CUDAToolkit_FOUND)
  _tsr_cuda_missing("nvcc found at ${CMAKE_CUDA_COMPILER} but not the CUDA toolkit's libraries")
endif()
if(NOT TARGET CUDA::cublasLt)
  _tsr_cuda_missing("cuBLASLt (libcublasLt) not found in the toolkit ${CUDAToolkit_LIBRARY_DIR}")
endif()

set(_tsr_pip "${TESSERA_NVIDIA_PIP}")
if(_tsr_pip AND NOT IS_DIRECTORY "${_tsr_pip}")
  message(FATAL_ERROR "TESSERA_NVIDIA_PIP=${_tsr_pip} is not a directory")
endif()

# _tsr_find_nvlib(PREFIX header lib soversion pipdir): sets <PREFIX>_INCLUDE_DIR, <PREFIX>_LIBRARY.
function(_tsr_find_nvlib prefix header lib soversion pipdir)
  find_path(${prefix}_INCLUDE_DIR ${header}
            HINTS ${_tsr_pip}/${pipdir}/include ${CUDAToolkit_INCLUDE_DIRS}
            PATH_SUFFIXES include)
  find_library(${prefix}_LIBRARY NAMES ${lib} lib${lib}.so.${soversion} NAMES_PER_DIR
               HINTS ${_tsr_pip}/${pipdir}/lib ${CUDAToolkit_LIBRARY_DIR}
                     ${CUDAToolkit_LIBRARY_ROOT}/lib ${CUDAToolkit_LIBRARY_ROOT}/lib64)
endfunction()

# MAJOR.MINOR.PATCH from "#define <P>_MAJOR n" lines of a header.
function(_tsr_header_version out file p)
  set(v "")
  if(EXISTS "${file}")
    foreach(part MAJOR MINOR PATCHLEVEL PATCH)
      file(STRINGS "${file}" line REGEX "^#define[ \t]+${p}_${part}[ \t]+[0-9]+")
      if(line)
        string(REGEX REPLACE ".*[ \t]([0-9]+).*" "\\1" n "${line}")
        string(APPEND v "${n}.")
      endif()
    endforeach()
    string(REGEX REPLACE "\\.$" "" v "${v}")
  endif()
  set(${out} "${v}" PARENT_SCOPE)
endfunction()

_tsr_find_nvlib(TESSERA_CUDNN cudnn.h cudnn 9 cudnn)
if(NOT TESSERA_CUDNN_INCLUDE_DIR OR NOT TESSERA_CUDNN_LIBRARY)
  _tsr_cuda_missing("cuDNN (cudnn.h, libcudnn.so[.9]) not found")
endif()
_tsr_header_version(TESSERA_CUDNN_VERSION "${TESSERA_CUDNN_INCLUDE_DIR}/cudnn_version.h" CUDNN)
add_library(tessera::cudnn UNKNOWN IMPORTED)
set_target_properties(tessera::cudnn PROPERTIES IMPORTED_LOCATION "${TESSERA_CUDNN_LIBRARY}"
                      INTERFACE_INCLUDE_DIRECTORIES "${TESSERA_CUDNN_INCLUDE_DIR}")

_tsr_find_nvlib(TESSERA_NCCL nccl.h nccl 2 nccl)
if(TESSERA_NCCL_INCLUDE_DIR AND TESSERA_NCCL_LIBRARY)
  set(TESSERA_HAVE_NCCL ON)
  _tsr_header_version(TESSERA_NCCL_VERSION "${TESSERA_NCCL_INCLUDE_DIR}/nccl.h" NCCL)
  add_library(tessera::nccl UNKNOWN IMPORTED)
  set_target_properties(tessera::nccl PROPERTIES IMPORTED_LOCATION "${TESSERA_NCCL_LIBRARY}"
                        INTERFACE_INCLUDE_DIRECTORIES "${TESSERA_NCCL_INCLUDE_DIR}")
elseif(_tsr_cuda_mode STREQUAL "ON")
  message(WARNING "tessera: NCCL not found: the CUDA backend is built without the NCCL "
          "communication path (TESSERA_HAVE_NCCL OFF)")
endif()

# Hopper machine code (sm_90a: wgmma, setmaxnreg) plus compute_90 PTX that the driver
# compiles for any later GPU. CMake turns it into -gencode=arch=compute_90a,code=[sm_90a]
# and -gencode=arch=compute_90,code=[compute_90] (the form HOPPER.md advises for nvcc
# 13.0; configured with CMake 3.25). -DCMAKE_CUDA_ARCHITECTURES=... overrides.
if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
  set(CMAKE_CUDA_ARCHITECTURES "90a-real;90-virtual" CACHE STRING "CUDA architectures")
endif()
enable_language(CUDA)
set(CMAKE_CUDA_STANDARD 17)
set(CMAKE_CUDA_STANDARD_REQUIRED ON)

set(TESSERA_HAVE_CUDA ON)
message(STATUS "tessera: CUDA backend on: nvcc ${CMAKE_CUDA_COMPILER_VERSION} "
        "(${CMAKE_CUDA_ARCHITECTURES}), cuDNN ${TESSERA_CUDNN_VERSION} (${TESSERA_CUDNN_LIBRARY}), "
        "NCCL ${TESSERA_NCCL_VERSION} (${TESSERA_NCCL_LIBRARY}), cuBLASLt ${CUDAToolkit_VERSION}")
