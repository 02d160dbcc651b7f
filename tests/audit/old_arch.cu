// Built for sm_80 by the test build: griddepcontrol does not exist there, so the wait and the
// trigger compile out while a launch may still set the PDL attribute. The audit must flag it
// when a launches file launches it with PDL.

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define OLD_WAIT() asm volatile("griddepcontrol.wait;" ::: "memory")
#else
#define OLD_WAIT()
#endif

extern "C" __global__ void old_arch_consumer(int const* data, int* out) {
  int const early = data[threadIdx.x];
  OLD_WAIT();
  out[threadIdx.x] = early + data[threadIdx.x + 32];
}
