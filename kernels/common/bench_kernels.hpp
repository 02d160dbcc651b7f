#pragma once
// Kernels the timing experiments need besides the operation under test: the launch floor and a
// memory-bound producer. Host-visible header: no CUDA includes.

#include <cstddef>

struct CUstream_st;

namespace moefin::bench {

/// One CTA that does nothing: the per-launch floor of a chain of launches.
void launch_empty(CUstream_st* stream, bool pdl);

/// A memory-bound writer: copies `bytes` (a multiple of 16, both pointers 16-byte aligned) from
/// src to dst with 128-bit accesses over at most `max_ctas` CTAs of 256 threads (SMs x 8 fills
/// the GPU). Launched without the PDL attribute and never triggering, like a GEMM whose trigger
/// placement is unknown; the kernel launched after it with the attribute is its PDL secondary.
void launch_copy_producer(void* dst, void const* src, std::size_t bytes, int max_ctas,
                          CUstream_st* stream);

} // namespace moefin::bench
