// kernels/cuda/emu/cudnn.cpp — the emulated device has no cuDNN (cuemu.h): cudnnCreate
// and every backend-API call answer CUDNN_STATUS_NOT_SUPPORTED, so the CUDA backend's
// attention takes its own kernels (TESSERA_CUDA_ATTENTION=auto), which is what the
// emulation tests; TESSERA_CUDA_ATTENTION=cudnn fails with cuDNN's error, as it would on a
// GPU where cuDNN refuses the graphs. cuDNN's own graphs are checked elsewhere: deviceless
// planning for an H100 (tests/kernels/test_cuda_sdpa_plan.c) and on a GPU.
#include <cudnn.h>
#include <stdio.h>

extern "C" {

size_t cudnnGetVersion(void) { return 0; }
const char *cudnnGetErrorString(cudnnStatus_t s) {
  return s == CUDNN_STATUS_SUCCESS ? "CUDNN_STATUS_SUCCESS"
                                   : "CUDNN_STATUS_NOT_SUPPORTED (no cuDNN on the emulated device)";
}
void cudnnGetLastErrorString(char *message, size_t max_size) {
  if (message && max_size) snprintf(message, max_size, "no cuDNN on the emulated device");
}
cudnnStatus_t cudnnCreate(cudnnHandle_t *h) {
  *h = NULL;
  return CUDNN_STATUS_NOT_SUPPORTED;
}
cudnnStatus_t cudnnDestroy(cudnnHandle_t h) {
  (void)h;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnSetStream(cudnnHandle_t h, cudaStream_t s) {
  (void)h, (void)s;
  return CUDNN_STATUS_NOT_SUPPORTED;
}
cudnnStatus_t cudnnBackendCreateDescriptor(cudnnBackendDescriptorType_t t, cudnnBackendDescriptor_t *d) {
  (void)t;
  *d = NULL;
  return CUDNN_STATUS_NOT_SUPPORTED;
}
cudnnStatus_t cudnnBackendDestroyDescriptor(cudnnBackendDescriptor_t d) {
  (void)d;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnBackendFinalize(cudnnBackendDescriptor_t d) {
  (void)d;
  return CUDNN_STATUS_NOT_SUPPORTED;
}
cudnnStatus_t cudnnBackendSetAttribute(cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t n,
                                       cudnnBackendAttributeType_t t, int64_t c, const void *v) {
  (void)d, (void)n, (void)t, (void)c, (void)v;
  return CUDNN_STATUS_NOT_SUPPORTED;
}
cudnnStatus_t cudnnBackendGetAttribute(cudnnBackendDescriptor_t const d, cudnnBackendAttributeName_t n,
                                       cudnnBackendAttributeType_t t, int64_t want, int64_t *got,
                                       void *v) {
  (void)d, (void)n, (void)t, (void)want, (void)v;
  if (got) *got = 0;
  return CUDNN_STATUS_NOT_SUPPORTED;
}
cudnnStatus_t cudnnBackendExecute(cudnnHandle_t h, cudnnBackendDescriptor_t plan, cudnnBackendDescriptor_t pack) {
  (void)h, (void)plan, (void)pack;
  return CUDNN_STATUS_NOT_SUPPORTED;
}

}  // extern "C"
