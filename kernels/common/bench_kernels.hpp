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

/// A memory-bound reader: reads `bytes` (a multiple of 64, src 16-byte aligned) with 128-bit
/// streaming loads, four in flight per thread, over SMs x 4 CTAs of 256 threads; writes one word
/// to `sink` only if the data XORs to a value that random data never gives (so the loads stay).
/// The ceiling of a kernel that only reads, beside the copy bandwidth.
void launch_read_stream(void const* src, std::size_t bytes, unsigned* sink, CUstream_st* stream);

} // namespace moefin::bench
