# Third-party dependencies. On the GPU machine they come from Debian packages unpacked into a
# prefix (scripts/device_deps.sh); pass that prefix through CMAKE_PREFIX_PATH.

find_package(HDF5 REQUIRED COMPONENTS C CXX)
find_package(Boost 1.74 REQUIRED CONFIG COMPONENTS program_options unit_test_framework)
find_package(nlohmann_json 3.10 REQUIRED CONFIG)
find_package(Threads REQUIRED)

# Debian's Kokkos (Trilinos 13.2, Kokkos 3.4.1, Serial backend). Its exported Kokkos::kokkos
# target lists a wrong include directory; Kokkos_INCLUDE_DIRS from the same package is right, so
# build our own interface target from the package variables and the imported core library.
find_package(Kokkos REQUIRED CONFIG)
if(NOT TARGET trilinos_kokkoscore)
  message(FATAL_ERROR "Kokkos package found but its target trilinos_kokkoscore is missing")
endif()
add_library(moefin_kokkos INTERFACE)
target_include_directories(moefin_kokkos SYSTEM INTERFACE ${Kokkos_INCLUDE_DIRS})
target_link_libraries(moefin_kokkos INTERFACE trilinos_kokkoscore ${CMAKE_DL_LIBS})
set(MOEFIN_KOKKOS_VERSION "${Kokkos_VERSION}")

if(MOEFIN_ENABLE_CUDA)
  find_package(CUDAToolkit REQUIRED)
endif()
