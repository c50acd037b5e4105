// driver_api: a program that uses the CUDA driver API itself: module load from PTX,
// cuLaunchKernel (exactly 3 launches), copies with cuMemcpy*, cuCtxSynchronize.
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>

#define CKD(call)                                                                                  \
	do {                                                                                       \
		CUresult r_ = (call);                                                              \
		if (r_ != CUDA_SUCCESS) {                                                          \
			const char *s_ = "?";                                                      \
			cuGetErrorName(r_, &s_);                                                   \
			fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, s_);         \
			exit(1);                                                                   \
		}                                                                                  \
	} while (0)

// scale(float *x, float a, int n): x[i] *= a. PTX so the driver JIT-compiles it for any GPU.
static const char ptx[] =
    ".version 8.0\n.target sm_50\n.address_size 64\n"
    ".visible .entry scale(.param .u64 p0, .param .f32 p1, .param .u32 p2)\n{\n"
    ".reg .pred %p<2>;\n.reg .f32 %f<4>;\n.reg .b32 %r<6>;\n.reg .b64 %rd<5>;\n"
    "ld.param.u64 %rd1, [p0];\nld.param.f32 %f1, [p1];\nld.param.u32 %r2, [p2];\n"
    "mov.u32 %r3, %ctaid.x;\nmov.u32 %r4, %ntid.x;\nmov.u32 %r5, %tid.x;\n"
    "mad.lo.s32 %r1, %r3, %r4, %r5;\nsetp.ge.s32 %p1, %r1, %r2;\n@%p1 bra DONE;\n"
    "cvta.to.global.u64 %rd2, %rd1;\nmul.wide.s32 %rd3, %r1, 4;\nadd.s64 %rd4, %rd2, %rd3;\n"
    "ld.global.f32 %f2, [%rd4];\nmul.f32 %f3, %f2, %f1;\nst.global.f32 [%rd4], %f3;\n"
    "DONE:\nret;\n}\n";

int main(void)
{
	CKD(cuInit(0));
	CUdevice dev;
	CKD(cuDeviceGet(&dev, 0));
	char name[128];
	CKD(cuDeviceGetName(name, sizeof(name), dev));
	CUcontext ctx;
	CKD(cuDevicePrimaryCtxRetain(&ctx, dev));
	CKD(cuCtxSetCurrent(ctx));
	CUmodule mod;
	CKD(cuModuleLoadData(&mod, ptx));
	CUfunction fn;
	CKD(cuModuleGetFunction(&fn, mod, "scale"));
	const int n = 1 << 16;
	float *h = (float *)malloc(n * sizeof(float));
	for (int i = 0; i < n; i++)
		h[i] = 1.0f;
	CUdeviceptr d;
	CKD(cuMemAlloc(&d, n * sizeof(float)));
	CKD(cuMemcpyHtoD(d, h, n * sizeof(float)));
	float a = 2.0f;
	int nn = n;
	void *args[] = {&d, &a, &nn};
	for (int i = 0; i < 3; i++)
		CKD(cuLaunchKernel(fn, (n + 255) / 256, 1, 1, 256, 1, 1, 0, NULL, args, NULL));
	CKD(cuCtxSynchronize());
	CKD(cuMemcpyDtoH(h, d, n * sizeof(float)));
	for (int i = 0; i < n; i++)
		if (h[i] != 8.0f) {
			fprintf(stderr, "driver_api: wrong result %f at %d\n", h[i], i);
			return 1;
		}
	CKD(cuMemFree(d));
	CKD(cuModuleUnload(mod));
	CKD(cuDevicePrimaryCtxRelease(dev));
	free(h);
	printf("driver_api: ok on %s\n", name);
	return 0;
}
