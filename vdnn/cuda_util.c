/* Messages for failed CUDA, cuDNN and cuBLAS calls (the wrappers are in cuda_util.h):
 * where, which call, the library's words, and a hint at what to do about it. */
#ifdef VDNN_CUDA

#include "vdnn/cuda_util.h"

static const char *rt_hint(cudaError_t e)
{
    switch (e) {
    case cudaErrorMemoryAllocation:
        return "the GPU is out of memory: lower --budget, or free the GPU (see nvidia-smi)";
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorInvalidDevice:
        return "no usable GPU: check nvidia-smi and CUDA_VISIBLE_DEVICES, or use --device cpu";
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorMisalignedAddress:
        return "a kernel touched memory it should not (a bug in vdnn; the CUDA context is now unusable): rerun "
               "under compute-sanitizer (bench/gpu_sanitizer.sh) and report it";
    case cudaErrorLaunchTimeout:
        return "a kernel ran into the display watchdog: use a GPU without a display, or a smaller batch";
    case cudaErrorNoKernelImageForDevice:
    case cudaErrorUnsupportedPtxVersion:
        return "this build has no code for this GPU: rebuild with CUDA_ARCH set for it (docs/building.md)";
    case cudaErrorInvalidValue:
    case cudaErrorInvalidConfiguration:
        return "a bad argument (a bug in vdnn): please report it with the config";
    default:
        return "see the CUDA documentation for this error";
    }
}

vdnn_status cuda_fail_rt(int err, const char *call, const char *file, int line)
{
    cudaError_t e = (cudaError_t)err;
    cudaGetLastError();   /* clear it unless sticky: the caller decides what comes next */
    return vdnn_fail(VDNN_EDEVICE, "%s:%d: %s failed: %s (%s); %s", file, line, call, cudaGetErrorString(e),
                     cudaGetErrorName(e), rt_hint(e));
}

static const char *dnn_hint(cudnnStatus_t e)
{
    switch (e) {
    case CUDNN_STATUS_NOT_SUPPORTED:
        return "cuDNN does not support this algorithm or shape: pin another algorithm (algo_fwd = ...) or use --algo mem";
    case CUDNN_STATUS_BAD_PARAM:
        return "a descriptor does not match its tensor (a bug in vdnn): please report it with the config";
    case CUDNN_STATUS_ALLOC_FAILED:
        return "cuDNN could not allocate memory of its own: leave more GPU memory outside the budget (lower --budget)";
    case CUDNN_STATUS_NOT_INITIALIZED:
        return "cuDNN could not start: check that its libraries match the driver and the CUDA runtime";
    case CUDNN_STATUS_EXECUTION_FAILED:
        return "a cuDNN kernel failed on the GPU: rerun under compute-sanitizer (bench/gpu_sanitizer.sh)";
    default:
        return "see the cuDNN documentation for this status";
    }
}

vdnn_status cuda_fail_dnn(int err, const char *call, const char *file, int line)
{
    cudnnStatus_t e = (cudnnStatus_t)err;
    return vdnn_fail(VDNN_EDEVICE, "%s:%d: %s failed: %s; %s", file, line, call, cudnnGetErrorString(e), dnn_hint(e));
}

static const char *blas_hint(cublasStatus_t e)
{
    switch (e) {
    case CUBLAS_STATUS_ALLOC_FAILED:
        return "cuBLAS could not allocate its workspace: leave more GPU memory outside the budget (lower --budget)";
    case CUBLAS_STATUS_NOT_INITIALIZED:
        return "cuBLAS could not start: check the driver and that libcublas matches the CUDA runtime";
    case CUBLAS_STATUS_INVALID_VALUE:
        return "a bad GEMM argument (a bug in vdnn): please report it with the config";
    case CUBLAS_STATUS_ARCH_MISMATCH:
        return "this GPU lacks a feature the math mode needs: try --math fp32";
    case CUBLAS_STATUS_EXECUTION_FAILED:
        return "a cuBLAS kernel failed on the GPU: rerun under compute-sanitizer (bench/gpu_sanitizer.sh)";
    default:
        return "see the cuBLAS documentation for this status";
    }
}

vdnn_status cuda_fail_blas(int err, const char *call, const char *file, int line)
{
    cublasStatus_t e = (cublasStatus_t)err;
    return vdnn_fail(VDNN_EDEVICE, "%s:%d: %s failed: %s (%s); %s", file, line, call, cublasGetStatusString(e),
                     cublasGetStatusName(e), blas_hint(e));
}

#else

/* ISO C wants a translation unit to declare something. */
typedef int vdnn_cuda_util_unused;

#endif
