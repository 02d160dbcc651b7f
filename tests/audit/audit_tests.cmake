# test_audit (label unit): the audit's facts on small kernels with known answers (tests/audit/*.cu,
# compiled here for sm_90 and sm_100a into cubins; old_arch.cu for sm_80), moefin's own chain
# kernels (the moefin binary) against the chain description the verifier uses, a mutant permute
# kernel, and the H200 race matrix. Needs nvcc (CUDA builds) and cuobjdump/nvdisasm (set-up).
if(MOEFIN_ENABLE_CUDA)
  find_package(Python3 COMPONENTS Interpreter REQUIRED)
  set(MOEFIN_AUDIT_DIR ${CMAKE_CURRENT_BINARY_DIR}/audit)
  set(_src ${CMAKE_CURRENT_SOURCE_DIR}/audit)
  set(_outputs)
  function(audit_cubin name source arch)
    cmake_parse_arguments(C "" "" "FLAGS;DEPENDS" ${ARGN})
    set(out ${MOEFIN_AUDIT_DIR}/${name}.${arch}.cubin)
    add_custom_command(OUTPUT ${out}
      COMMAND ${CMAKE_COMMAND} -E make_directory ${MOEFIN_AUDIT_DIR}
      COMMAND ${CMAKE_CUDA_COMPILER} -cubin -arch=${arch} -std=c++17 ${C_FLAGS} -o ${out} ${source}
      DEPENDS ${source} ${C_DEPENDS}
      COMMENT "audit test input ${name}.${arch}.cubin" VERBATIM)
    set(_outputs ${_outputs} ${out} PARENT_SCOPE)
  endfunction()
  foreach(arch sm_90 sm_100a)
    audit_cubin(pdl_cases ${_src}/pdl_cases.cu ${arch})
    audit_cubin(tma_param ${_src}/tma_param.cu ${arch})
  endforeach()
  audit_cubin(old_arch ${_src}/old_arch.cu sm_80)
  audit_cubin(mutant_permute ${_src}/mutant_permute.cu sm_90
    FLAGS -I${PROJECT_SOURCE_DIR} --expt-relaxed-constexpr
    DEPENDS ${PROJECT_SOURCE_DIR}/kernels/permute/permute_kernels.cuh
            ${PROJECT_SOURCE_DIR}/kernels/common/pdl_stage.cuh)

  # Parameter layouts from the headers, offsets from the compiler (tools/audit/struct_layout.py).
  set(_layout_tool ${PROJECT_SOURCE_DIR}/tools/audit/struct_layout.py)
  set(_cases_layout ${MOEFIN_AUDIT_DIR}/pdl_cases_layout.json)
  add_custom_command(OUTPUT ${_cases_layout}
    COMMAND ${Python3_EXECUTABLE} ${_layout_tool} --compiler ${CMAKE_CUDA_COMPILER}
      --header ${_src}/pdl_cases.cu --struct FlagParams --struct BigParams
      --kernel runtime_flag=p:FlagParams --kernel struct_params=p:BigParams
      --source tests/audit/pdl_cases.cu --out ${_cases_layout}
    DEPENDS ${_layout_tool} ${_src}/pdl_cases.cu
    COMMENT "audit test layout pdl_cases_layout.json" VERBATIM)
  list(APPEND _outputs ${_cases_layout})
  set(_chain_layout ${MOEFIN_AUDIT_DIR}/moefin_chain_layout.json)
  set(_k ${PROJECT_SOURCE_DIR}/kernels)
  set(_o ${PROJECT_SOURCE_DIR}/core/ops)
  set(_chain_headers ${_o}/routing_params.hpp ${_o}/permute_params.hpp
    ${_o}/gemm_params.hpp ${_o}/scale_layout.hpp ${_o}/decode_gemm_params.hpp
    ${_k}/gemm/decode_plan.hpp
    ${_o}/activation_params.hpp
    ${_o}/finalize_params.hpp ${_k}/common/pdl_stage.cuh
    ${_k}/finalize/finalize_kernels.cuh ${_k}/chain/chain_kernels.cuh)
  set(_header_args)
  foreach(h ${_chain_headers})
    list(APPEND _header_args --header ${h})
  endforeach()
  add_custom_command(OUTPUT ${_chain_layout}
    COMMAND ${Python3_EXECUTABLE} ${_layout_tool} --compiler ${CMAKE_CUDA_COMPILER}
      -I ${PROJECT_SOURCE_DIR} --flag=--expt-relaxed-constexpr ${_header_args}
      --struct moefin::routing::RoutingParams=RoutingParams
      --struct moefin::permute::PermuteParams=PermuteParams
      --struct moefin::gemm::GroupedGemmParams=GroupedGemmParams
      --struct moefin::gemm::DecodeGemmParams=DecodeGemmParams
      --struct moefin::gemm::DecodeLaunch=DecodeLaunch
      --struct moefin::activation::ActivationParams=ActivationParams
      --struct moefin::finalize::FinalizeParams=FinalizeParams
      --struct moefin::PdlDevice=PdlDevice
      --struct moefin::finalize::kernels::Knobs=FinalizeKnobs
      --struct moefin::chain::ChecksumParams=ChecksumParams
      --kernel routing_block_kernel=p:RoutingParams,k:PdlDevice
      --kernel routing_multi_kernel=p:RoutingParams,k:PdlDevice
      --kernel routing_fast_kernel=p:RoutingParams,k:PdlDevice
      --kernel permute_kernel=p:PermuteParams,k:PdlDevice
      --kernel grouped_gemm_kernel=p:GroupedGemmParams,k:PdlDevice
      --kernel decode_gemm_kernel=p:DecodeGemmParams,launch:DecodeLaunch,k:PdlDevice
      --kernel decode_gemm_tscale_kernel=p:DecodeGemmParams,launch:DecodeLaunch,k:PdlDevice
      --kernel decode_gemm_wpack_kernel=p:DecodeGemmParams,launch:DecodeLaunch,k:PdlDevice
      --kernel decode_gemm_wide_kernel=p:DecodeGemmParams,launch:DecodeLaunch,k:PdlDevice
      --kernel decode_gemm_tiles_kernel=p:DecodeGemmParams,launch:DecodeLaunch,k:PdlDevice
      --expand DecodeGemmParams.gemm=GroupedGemmParams
      --kernel activation_kernel=p:ActivationParams,k:PdlDevice
      --kernel 8finalize7kernels=p:FinalizeParams,k:FinalizeKnobs
      --kernel checksum_kernel=p:ChecksumParams
      --source "the chain kernels' parameter structs (kernels/*)" --out ${_chain_layout}
    DEPENDS ${_layout_tool} ${_chain_headers}
    COMMENT "audit layout moefin_chain_layout.json" VERBATIM)
  list(APPEND _outputs ${_chain_layout})
  add_custom_target(audit_test_inputs ALL DEPENDS ${_outputs})

  moefin_test(test_audit LABEL unit SOURCES test_audit.cpp LIBS moefin_experiments)
  add_dependencies(test_audit audit_test_inputs moefin)
  target_compile_definitions(test_audit PRIVATE MOEFIN_AUDIT_DIR="${MOEFIN_AUDIT_DIR}")
endif()
