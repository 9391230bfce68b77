# Finds Ringlet's dependencies and turns each AUTO option into a RINGLET_HAVE_*
# boolean. A component asked for with ON that cannot be found is an error.
find_package(Threads REQUIRED)
find_package(PkgConfig)
find_package(OpenSSL REQUIRED)
find_package(nlohmann_json 3 REQUIRED)
find_package(CLI11 CONFIG REQUIRED)
# hwloc through pkg-config where there is one; otherwise by its header and
# library under CMAKE_PREFIX_PATH (a prefix unpacked without pkg-config, as
# tests/gpu/device-check.sh makes on a bare GPU machine).
if(PKG_CONFIG_FOUND)
  pkg_check_modules(HWLOC IMPORTED_TARGET hwloc)
endif()
if(NOT TARGET PkgConfig::HWLOC)
  find_path(RINGLET_HWLOC_INCLUDE_DIR hwloc.h)
  find_library(RINGLET_HWLOC_LIBRARY hwloc)
  if(NOT RINGLET_HWLOC_INCLUDE_DIR OR NOT RINGLET_HWLOC_LIBRARY)
    message(FATAL_ERROR "hwloc was not found, neither by pkg-config nor as hwloc.h and libhwloc "
                        "under CMAKE_PREFIX_PATH (Debian: apt-get install libhwloc-dev)")
  endif()
  add_library(PkgConfig::HWLOC UNKNOWN IMPORTED)
  set_target_properties(PkgConfig::HWLOC PROPERTIES IMPORTED_LOCATION ${RINGLET_HWLOC_LIBRARY}
                        INTERFACE_INCLUDE_DIRECTORIES ${RINGLET_HWLOC_INCLUDE_DIR})
endif()

function(ringlet_resolve_option name found)
  if(RINGLET_WITH_${name} STREQUAL "ON" AND NOT ${found})
    message(FATAL_ERROR "RINGLET_WITH_${name}=ON but ${name} was not found")
  endif()
  if(${found} AND NOT RINGLET_WITH_${name} STREQUAL "OFF")
    set(RINGLET_HAVE_${name} ON PARENT_SCOPE)
  else()
    set(RINGLET_HAVE_${name} OFF PARENT_SCOPE)
  endif()
endfunction()

# CUDA: the toolkit in /usr/local/cuda when no other is named.
set(_cuda_found OFF)
if(NOT RINGLET_WITH_CUDA STREQUAL "OFF")
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    # Ampere for the common case, Hopper for the H100/H200; set before
    # enable_language, which would otherwise pick the compiler's default.
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 80 90)
    endif()
    enable_language(CUDA)
    find_package(CUDAToolkit)
    if(CUDAToolkit_FOUND)
      set(_cuda_found ON)
    endif()
  endif()
endif()
ringlet_resolve_option(CUDA _cuda_found)
string(REPLACE ";" " " RINGLET_CUDA_ARCHITECTURES_TEXT "${CMAKE_CUDA_ARCHITECTURES}")
if(RINGLET_HAVE_CUDA)
  # CMake 3.25 knows nvcc's -std flags only up to C++17 and refuses
  # CUDA_STANDARD 20; nvcc >= 12 accepts -std=c++20, so name the flag for it.
  if(NOT CMAKE_CUDA20_STANDARD_COMPILE_OPTION AND CMAKE_CUDA_COMPILER_VERSION VERSION_GREATER_EQUAL 12.0)
    set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
    set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
  endif()
  set(CMAKE_CUDA_STANDARD 20)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
endif()

set(_nccl_found OFF)
if(RINGLET_HAVE_CUDA)
  find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/local/cuda/include)
  find_library(NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} /usr/local/cuda/lib64)
  if(NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
    set(_nccl_found ON)
    # The version, for --check-build: nccl.h spells it as three defines.
    file(STRINGS ${NCCL_INCLUDE_DIR}/nccl.h _nccl_version_lines REGEX "^#define NCCL_(MAJOR|MINOR|PATCH) ")
    set(RINGLET_NCCL_VERSION "")
    foreach(part MAJOR MINOR PATCH)
      string(REGEX MATCH "NCCL_${part} +([0-9]+)" _m "${_nccl_version_lines}")
      list(APPEND RINGLET_NCCL_VERSION ${CMAKE_MATCH_1})
    endforeach()
    string(JOIN "." RINGLET_NCCL_VERSION ${RINGLET_NCCL_VERSION})
    add_library(Ringlet::nccl UNKNOWN IMPORTED)
    set_target_properties(Ringlet::nccl PROPERTIES IMPORTED_LOCATION ${NCCL_LIBRARY}
                          INTERFACE_INCLUDE_DIRECTORIES ${NCCL_INCLUDE_DIR})
  endif()
endif()
ringlet_resolve_option(NCCL _nccl_found)

if(PKG_CONFIG_FOUND)
  pkg_check_modules(UCX IMPORTED_TARGET ucx)
endif()
ringlet_resolve_option(UCX UCX_FOUND)

find_package(MPI COMPONENTS C)
ringlet_resolve_option(MPI MPI_C_FOUND)

# Python: the extension module is built with nanobind, found through the
# interpreter that will import it (pip install nanobind).
set(_python_found OFF)
if(NOT RINGLET_WITH_PYTHON STREQUAL "OFF")
  find_package(Python 3.9 COMPONENTS Interpreter Development.Module)
  if(Python_FOUND)
    execute_process(COMMAND ${Python_EXECUTABLE} -m nanobind --cmake_dir
                    OUTPUT_VARIABLE _nanobind_dir OUTPUT_STRIP_TRAILING_WHITESPACE
                    RESULT_VARIABLE _nanobind_rc ERROR_QUIET)
    if(_nanobind_rc EQUAL 0)
      find_package(nanobind CONFIG PATHS ${_nanobind_dir} NO_DEFAULT_PATH)
      set(_python_found ${nanobind_FOUND})
    endif()
  endif()
endif()
ringlet_resolve_option(PYTHON _python_found)

# TensorFlow: ringlet.tensorflow's op library is built against the headers of
# the TensorFlow that this Python imports, and at run time uses the
# libtensorflow_framework that TensorFlow has loaded already. Without it
# ringlet.tensorflow runs its collectives as py_function ops instead.
set(_tensorflow_found OFF)
if(RINGLET_HAVE_PYTHON AND NOT RINGLET_WITH_TENSORFLOW STREQUAL "OFF")
  execute_process(
    COMMAND ${Python_EXECUTABLE} -c
      "import os; os.environ['TF_CPP_MIN_LOG_LEVEL'] = '3'; import tensorflow as tf; \
print(tf.sysconfig.get_include()); print(tf.sysconfig.get_lib()); \
print(';'.join(tf.sysconfig.get_compile_flags())); \
print(int(bool(tf.sysconfig.get_build_info().get('is_cuda_build'))))"
    OUTPUT_VARIABLE _tf_out OUTPUT_STRIP_TRAILING_WHITESPACE
    RESULT_VARIABLE _tf_rc ERROR_QUIET)
  if(_tf_rc EQUAL 0)
    string(REPLACE "\n" ";" _tf_lines "${_tf_out}")
    list(GET _tf_lines 0 RINGLET_TENSORFLOW_INCLUDE)
    list(GET _tf_lines 1 _tf_lib_dir)
    list(POP_BACK _tf_lines _tf_cuda_build)
    list(SUBLIST _tf_lines 2 -1 _tf_flags)
    find_library(RINGLET_TENSORFLOW_FRAMEWORK NAMES libtensorflow_framework.so.2
                 PATHS ${_tf_lib_dir} NO_DEFAULT_PATH)
    # Only the definitions matter (the C++ ABI, Eigen's alignment): the
    # standard is ours.
    set(RINGLET_TENSORFLOW_DEFINITIONS "")
    foreach(flag IN LISTS _tf_flags)
      if(flag MATCHES "^-D(.*)")
        list(APPEND RINGLET_TENSORFLOW_DEFINITIONS ${CMAKE_MATCH_1})
      endif()
    endforeach()
    if(RINGLET_TENSORFLOW_FRAMEWORK)
      set(_tensorflow_found ON)
    endif()
    # XLA kernels (tensorflow_ops/xla_ops.cc) need tf2xla's headers and
    # library (pip's TensorFlow ships both) and the hash libraries XLA's
    # headers include (apt: libhighwayhash-dev, libfarmhash-dev).
    find_library(RINGLET_TENSORFLOW_CC NAMES libtensorflow_cc.so.2
                 PATHS ${_tf_lib_dir} NO_DEFAULT_PATH)
    find_path(RINGLET_HIGHWAYHASH_INCLUDE highwayhash/highwayhash.h)
    find_path(RINGLET_FARMHASH_INCLUDE farmhash.h)
    set(RINGLET_TENSORFLOW_XLA OFF)
    if(RINGLET_TENSORFLOW_CC AND RINGLET_HIGHWAYHASH_INCLUDE AND RINGLET_FARMHASH_INCLUDE AND
       EXISTS ${RINGLET_TENSORFLOW_INCLUDE}/tensorflow/compiler/tf2xla/xla_op_kernel.h AND
       EXISTS ${RINGLET_TENSORFLOW_INCLUDE}/xla/ffi/api/ffi.h)
      set(RINGLET_TENSORFLOW_XLA ON)
    else()
      message(STATUS "Ringlet: TensorFlow's ops without XLA kernels (needs libtensorflow_cc, "
                     "tf2xla's headers, highwayhash and farmhash headers)")
    endif()
    # GPU kernels need a TensorFlow built with CUDA (pip's on Linux is), the
    # stream executor's header for its stream's CUstream, and the core's
    # device collectives.
    set(RINGLET_TENSORFLOW_GPU OFF)
    if(_tf_cuda_build STREQUAL "1" AND RINGLET_HAVE_CUDA AND RINGLET_HAVE_NCCL AND
       EXISTS ${RINGLET_TENSORFLOW_INCLUDE}/xla/stream_executor/stream.h)
      set(RINGLET_TENSORFLOW_GPU ON)
    endif()
  endif()
endif()
ringlet_resolve_option(TENSORFLOW _tensorflow_found)

# PyTorch: the torch.distributed backend (ringlet/torch/_c10d) is built
# against the headers and libraries of the torch that this Python imports,
# without torch's CMake package (which looks for a CUDA toolkit and cuDNN that
# a CPU backend does not need). Its Backend class is a pybind11 one, so the
# module uses the pybind11 that torch ships with its headers.
set(_torch_found OFF)
if(RINGLET_HAVE_PYTHON AND NOT RINGLET_WITH_TORCH STREQUAL "OFF")
  execute_process(
    COMMAND ${Python_EXECUTABLE} -c
      "import os, torch; d = os.path.dirname(torch.__file__); \
print(os.path.join(d, 'include')); print(os.path.join(d, 'lib')); \
print(int(torch._C._GLIBCXX_USE_CXX11_ABI)); print(torch.__version__)"
    OUTPUT_VARIABLE _torch_out OUTPUT_STRIP_TRAILING_WHITESPACE
    RESULT_VARIABLE _torch_rc ERROR_QUIET)
  if(_torch_rc EQUAL 0)
    string(REPLACE "\n" ";" _torch_lines "${_torch_out}")
    list(GET _torch_lines 0 RINGLET_TORCH_INCLUDE)
    list(GET _torch_lines 1 _torch_lib_dir)
    list(GET _torch_lines 2 RINGLET_TORCH_CXX11_ABI)
    list(GET _torch_lines 3 RINGLET_TORCH_VERSION)
    set(RINGLET_TORCH_LIBRARIES "")
    foreach(lib c10 torch_cpu torch_python)
      find_library(RINGLET_TORCH_LIB_${lib} NAMES ${lib} PATHS ${_torch_lib_dir} NO_DEFAULT_PATH)
      if(RINGLET_TORCH_LIB_${lib})
        list(APPEND RINGLET_TORCH_LIBRARIES ${RINGLET_TORCH_LIB_${lib}})
      endif()
    endforeach()
    list(LENGTH RINGLET_TORCH_LIBRARIES _torch_nlibs)
    if(_torch_nlibs EQUAL 3 AND
       EXISTS ${RINGLET_TORCH_INCLUDE}/torch/csrc/distributed/c10d/Backend.hpp)
      set(_torch_found ON)
    endif()
  endif()
endif()
ringlet_resolve_option(TORCH _torch_found)

if(RINGLET_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
if(RINGLET_BUILD_BENCH)
  find_package(benchmark REQUIRED)
endif()

# A layer's static library. While a layer has no sources yet it is an
# INTERFACE library, so that the tree configures at every stage.
function(ringlet_add_layer target)
  if(ARGN)
    add_library(${target} STATIC ${ARGN})
    set(RINGLET_LAYER_SCOPE PUBLIC PARENT_SCOPE)
  else()
    add_library(${target} INTERFACE)
    set(RINGLET_LAYER_SCOPE INTERFACE PARENT_SCOPE)
  endif()
endfunction()
