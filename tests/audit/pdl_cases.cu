// Small kernels with known PDL facts for test_audit. Each comment says what the audit must
// find; tests/test_audit.cpp asserts exactly that, on the SASS of sm_90 and of sm_100a (and
// old_arch.cu for sm_80). extern "C" keeps the symbols plain.

#include <cstdint>

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define CASE_WAIT() asm volatile("griddepcontrol.wait;" ::: "memory")
#define CASE_TRIGGER() asm volatile("griddepcontrol.launch_dependents;" ::: "memory")
#else
#define CASE_WAIT()
#define CASE_TRIGGER()
#endif

// Waits on every path and before it triggers; reads `a` before the wait, `b` after it, writes
// `c` after the trigger.
extern "C" __global__ void straight_line(int const* a, int const* b, int* c) {
  int const x = a[threadIdx.x];
  CASE_WAIT();
  CASE_TRIGGER();
  c[threadIdx.x] = x + b[threadIdx.x];
}

// CTAs past `n` exit before the wait: not every path waits, and those CTAs trigger (at their
// exit) before waiting. `a` is read after the wait only.
extern "C" __global__ void early_exit(int const* a, int* c, int n) {
  if (static_cast<int>(blockIdx.x) >= n)
    return;
  CASE_WAIT();
  c[blockIdx.x * blockDim.x + threadIdx.x] = a[threadIdx.x];
}

// A loop over `a` before the wait, a loop writing `out` after it; never triggers explicitly.
extern "C" __global__ void loops(float const* a, float* out, int n) {
  float s = 0.0f;
  for (int i = threadIdx.x; i < n; i += blockDim.x)
    s += a[i];
  CASE_WAIT();
  for (int i = threadIdx.x; i < n; i += blockDim.x)
    out[i] = s * static_cast<float>(i);
}

// Predicated loads of `idx` before the wait (four guarded loads, no branch); `out` written after
// the trigger.
extern "C" __global__ void predicated_load(int const* idx, int* out, int n) {
  int v[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    int const k = static_cast<int>(threadIdx.x) + 32 * j;
    v[j] = k < n ? idx[k] : -1;
  }
  CASE_WAIT();
  CASE_TRIGGER();
  out[threadIdx.x] = v[0] + v[1] + v[2] + v[3];
}

__device__ __forceinline__ unsigned warp_index() {
  return __shfl_sync(0xffffffffu, threadIdx.x / 32, 0);
}

// Warp 0 waits, copies and triggers; warp 1 triggers without waiting. Launched with 64 threads
// the CTA triggers before its wait (warp 1), although warp 0 waits on all of its paths.
extern "C" __global__ void roles_trigger_early(int const* a, int* out) {
  unsigned const w = warp_index();
  if (w == 0) {
    CASE_WAIT();
    out[threadIdx.x] = a[threadIdx.x];
    CASE_TRIGGER();
  } else if (w == 1) {
    CASE_TRIGGER();
  }
}

// Warp 0 waits, copies and triggers; warp 1 only exits. Thread paths exit without waiting
// (warp 1's), but with 64 threads every CTA has warp 0: the CTA waits before it triggers.
extern "C" __global__ void roles_one_waits(int const* a, int* out) {
  unsigned const w = warp_index();
  if (w == 0) {
    CASE_WAIT();
    out[threadIdx.x] = a[threadIdx.x];
    CASE_TRIGGER();
  }
}

// Warp 1 reads `b` before any barrier, then every thread passes __syncthreads after warp 0's
// wait and reads `a`. Warp 1 never waits, so both reads may run before its own wait; only the
// read of `b` runs before any barrier (no other warp's wait can order it).
extern "C" __global__ void roles_barrier(int const* a, int const* b, int* out) {
  unsigned const w = warp_index();
  int x = 0;
  if (w == 1)
    x = b[threadIdx.x];
  if (w == 0)
    CASE_WAIT();
  __syncthreads();
  out[threadIdx.x] = a[threadIdx.x] + x;
}

struct FlagParams {
  int* out;
  int const* in;
  int use_pdl;
};

// A runtime PDL switch: the wait runs only when p.use_pdl != 0. A PDL launch is assumed to take
// the branch that waits; --assume p.use_pdl=0 takes the other.
extern "C" __global__ void runtime_flag(FlagParams p) {
  if (p.use_pdl)
    CASE_WAIT();
  CASE_TRIGGER();
  p.out[threadIdx.x] = p.in[threadIdx.x];
}

struct BigParams {
  int const* src;
  char pad[512];
  int* dst;
  int const* meta;
  int n;
};

// A struct of more than 500 bytes by value: `meta` read before the wait, `src` after it, `dst`
// written after the trigger. With the layout file the fields have their names.
extern "C" __global__ void struct_params(BigParams p) {
  int const m = p.meta[threadIdx.x];
  CASE_WAIT();
  CASE_TRIGGER();
  if (static_cast<int>(threadIdx.x) < p.n)
    p.dst[threadIdx.x] = p.src[m & 255];
}

// The knob pattern of moefin's chain kernels: `where` chooses the trigger placement at run time
// (2: at entry, 3: after the wait); without a value both are possible.
extern "C" __global__ void knob_trigger(int const* a, int* out, int where) {
  if (where == 2)
    CASE_TRIGGER();
  int const x = a[threadIdx.x];
  CASE_WAIT();
  if (where == 3)
    CASE_TRIGGER();
  out[threadIdx.x] = x;
}

__device__ __noinline__ void wait_in_callee(int* flag) {
  CASE_WAIT();
  flag[0] = 1;
}

// The wait sits in a called function: every path waits (through CALL and RET), `a` is read
// after it; no explicit trigger.
extern "C" __global__ void wait_in_call(int const* a, int* out, int* flag) {
  wait_in_callee(flag);
  out[threadIdx.x] = a[threadIdx.x];
}
