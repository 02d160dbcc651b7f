#pragma once
// Kernels the timing experiments need besides the operation under test: the launch floor and a
// memory-bound producer. Host-visible header: no CUDA includes.

#include <cstddef>

struct CUstream_st;

namespace moefin::bench {

/// One CTA that does nothing: the per-launch floor of a chain of launches.
void launch_empty(CUstream_st* stream, bool pdl);

/// How the producer of finalize's mode b is launched (docs/design/experiments.md#finalize-sweep).
enum class Producer {
  // With the PDL attribute, waiting on its primary at entry, as GEMM2 is: the finalize before
  // it that triggers early lets it launch (and sit in its wait) before that finalize ends.
  kPdlWait,
  // Without the attribute and without a wait (files before 2026-12-04): it launches only once
  // the kernel before it has completed, so finalize's trigger can never start it early.
  kPlain,
};

/// A memory-bound writer: copies `bytes` (a multiple of 16, both pointers 16-byte aligned) from
/// src to dst with 128-bit accesses over at most `max_ctas` CTAs of 256 threads (SMs x 8 fills
/// the GPU), launched as `how` says; it never triggers explicitly, like a GEMM at its default
/// trigger (exit), and the kernel launched after it with the attribute is its PDL secondary.
void launch_copy_producer(void* dst, void const* src, std::size_t bytes, int max_ctas,
                          CUstream_st* stream, Producer how);

/// A memory-bound reader: reads `bytes` (a multiple of 64, src 16-byte aligned) with 128-bit
/// streaming loads, four in flight per thread, over SMs x 4 CTAs of 256 threads; writes one word
/// to `sink` only if the data XORs to a value that random data never gives (so the loads stay).
/// The ceiling of a kernel that only reads, beside the copy bandwidth.
void launch_read_stream(void const* src, std::size_t bytes, unsigned* sink, CUstream_st* stream);

} // namespace moefin::bench
