# Generates build_info.cpp at every build (not only at configure time) so that `moefin info` and
# every result file name the commit the binary was really built from.
set(MOEFIN_BUILD_INFO_CPP "${CMAKE_BINARY_DIR}/generated/build_info.cpp")
if(MOEFIN_ENABLE_CUDA)
  set(_cuda_version "${CMAKE_CUDA_COMPILER_VERSION}")
else()
  set(_cuda_version "none (built without CUDA)")
endif()
add_custom_target(moefin_build_info
  COMMAND ${CMAKE_COMMAND}
    -DSOURCE_DIR=${CMAKE_SOURCE_DIR}
    -DOUTPUT=${MOEFIN_BUILD_INFO_CPP}
    -DVERSION=${PROJECT_VERSION}
    "-DCXX_COMPILER=${CMAKE_CXX_COMPILER_ID} ${CMAKE_CXX_COMPILER_VERSION}"
    "-DCUDA_VERSION=${_cuda_version}"
    "-DCUDA_ARCHS=${CMAKE_CUDA_ARCHITECTURES}"
    "-DKOKKOS_VERSION=${MOEFIN_KOKKOS_VERSION}"
    "-DHDF5_VERSION=${HDF5_VERSION}"
    "-DBOOST_VERSION=${Boost_VERSION}"
    "-DBUILD_TYPE=${CMAKE_BUILD_TYPE}"
    -P ${CMAKE_SOURCE_DIR}/cmake/write_build_info.cmake
  BYPRODUCTS ${MOEFIN_BUILD_INFO_CPP}
  COMMENT "Recording build information"
  VERBATIM)
