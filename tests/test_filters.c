/* The trivial-runtime-call filter's list and keep rule, and PyTorch op-name cleanup. The
 * converter-level effect (what a real capture shows with and without the filter) is checked in
 * test_convert. */
#include <cupti_runtime_cbid.h>

#include "check.h"
#include "convert/opname.h"
#include "convert/runtime_filter.h"

static void test_trivial_list(void)
{
	/* The calls the filter is for, in every variant CUPTI has. */
	CHECK(cuptrace_runtime_cbid_is_trivial(CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020));
	CHECK(cuptrace_runtime_cbid_is_trivial(CUPTI_RUNTIME_TRACE_CBID_cudaGetLastError_v3020));
	CHECK(cuptrace_runtime_cbid_is_trivial(CUPTI_RUNTIME_TRACE_CBID_cudaPeekAtLastError_v3020));
	CHECK(cuptrace_runtime_cbid_is_trivial(CUPTI_RUNTIME_TRACE_CBID_cudaGetDeviceCount_v3020));
	CHECK(cuptrace_runtime_cbid_is_trivial(
	    CUPTI_RUNTIME_TRACE_CBID_cudaDeviceGetAttribute_v5000));
	CHECK(cuptrace_runtime_cbid_is_trivial(
	    CUPTI_RUNTIME_TRACE_CBID_cudaStreamIsCapturing_v10000));
	CHECK(cuptrace_runtime_cbid_is_trivial(
	    CUPTI_RUNTIME_TRACE_CBID_cudaStreamIsCapturing_ptsz_v10000));
	CHECK(cuptrace_runtime_cbid_is_trivial(CUPTI_RUNTIME_TRACE_CBID_cudaSetDevice_v3020));
	CHECK(cuptrace_runtime_cbid_is_set_device(CUPTI_RUNTIME_TRACE_CBID_cudaSetDevice_v3020));
	CHECK(!cuptrace_runtime_cbid_is_set_device(CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020));
	/* Never: launches, copies, synchronization, allocation, events. */
	CHECK(!cuptrace_runtime_cbid_is_trivial(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000));
	CHECK(!cuptrace_runtime_cbid_is_trivial(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020));
	CHECK(!cuptrace_runtime_cbid_is_trivial(
	    CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020));
	CHECK(!cuptrace_runtime_cbid_is_trivial(CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020));
	CHECK(!cuptrace_runtime_cbid_is_trivial(CUPTI_RUNTIME_TRACE_CBID_cudaEventRecord_v3020));
	CHECK(!cuptrace_runtime_cbid_is_trivial(CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000));
	/* "cudaGetDevice" must not catch cudaGetDeviceFlags or cudaGetDevicePropertiesXyz by
	 * prefix. */
	CHECK(!cuptrace_runtime_cbid_is_trivial(CUPTI_RUNTIME_TRACE_CBID_cudaGetDeviceFlags_v7000));
	CHECK(!cuptrace_runtime_cbid_is_trivial(0));
	CHECK(!cuptrace_runtime_cbid_is_trivial(1u << 30));
	/* The cbid list handed to CUPTI is exactly the set the predicate accepts. */
	uint32_t ids[256];
	size_t n = cuptrace_runtime_trivial_cbids(ids, 256);
	size_t names = 0;
	while (cuptrace_runtime_trivial_names[names])
		names++;
	CHECK(n >= names);
	for (size_t i = 0; i < n; i++)
		CHECK(cuptrace_runtime_cbid_is_trivial(ids[i]));
	int has_getdevice = 0;
	for (size_t i = 0; i < n; i++)
		has_getdevice |= ids[i] == CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020;
	CHECK(has_getdevice);
	CHECK_EQ_INT(cuptrace_runtime_trivial_cbids(ids, 2), 2);
}

static void test_keep_rule(void)
{
	uint32_t gd = CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020;
	CHECK(!cuptrace_runtime_keep(gd, 0, 300));
	CHECK(!cuptrace_runtime_keep(gd, 0, CUPTRACE_RUNTIME_SLOW_NS - 1));
	CHECK(cuptrace_runtime_keep(gd, 0, CUPTRACE_RUNTIME_SLOW_NS)); /* stalled */
	CHECK(cuptrace_runtime_keep(gd, 101, 300));                    /* failed */
	CHECK(cuptrace_runtime_keep(CUPTI_RUNTIME_TRACE_CBID_cudaSetDevice_v3020, 0, 300));
	CHECK(cuptrace_runtime_keep(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, 0, 300));
}

static void check_op(const char *in, const char *name, int64_t seq, int64_t op_id,
                     const char *sizes)
{
	struct cuptrace_opname o;
	CHECK(cuptrace_opname_parse(in, &o));
	char buf[256];
	snprintf(buf, sizeof(buf), "%.*s", (int)o.name_len, in);
	CHECK_EQ_STR(buf, name);
	CHECK_EQ_INT(o.has_seq, seq >= 0);
	if (seq >= 0)
		CHECK_EQ_INT(o.seq, seq);
	CHECK_EQ_INT(o.has_op_id, op_id >= 0);
	if (op_id >= 0)
		CHECK_EQ_INT(o.op_id, op_id);
	if (sizes) {
		snprintf(buf, sizeof(buf), "%.*s", (int)o.sizes_len, o.sizes ? o.sizes : "");
		CHECK_EQ_STR(buf, sizes);
	} else {
		CHECK(!o.sizes);
	}
}

static void test_opname(void)
{
	/* The forms PyTorch's NVTX mode writes (getNvtxStr): seq only for ops with one. */
	check_op("aten::add, seq = 12, op_id = 345", "aten::add", 12, 345, NULL);
	check_op("aten::empty_strided, op_id = 7", "aten::empty_strided", -1, 7, NULL);
	check_op("AddBackward0, seq = 12, op_id = 900", "AddBackward0", 12, 900, NULL);
	check_op("autograd::engine::evaluate_function: MmBackward0, seq = 3, op_id = 41",
	         "autograd::engine::evaluate_function: MmBackward0", 3, 41, NULL);
	check_op("aten::mm, seq = 2, op_id = 10, sizes = [[64, 128], [128, 32]], input_op_ids = "
	         "[(8, 0), (0, -1)]",
	         "aten::mm", 2, 10, "[[64, 128], [128, 32]]");
	check_op("aten::cat, op_id = 5, sizes = [[[2], [3]], []]", "aten::cat", -1, 5,
	         "[[[2], [3]], []]");
	struct cuptrace_opname o;
	CHECK(cuptrace_opname_parse("aten::mm, seq = 2, op_id = 10, sizes = [[1]], input_op_ids "
	                            "= [(8, 0)]",
	                            &o));
	CHECK_EQ_INT(o.input_op_ids_len, 8);
	/* A name with a comma of its own keeps it. */
	check_op("step 3, warmup, seq = 1", "step 3, warmup", 1, -1, NULL);
	/* Ordinary NVTX names, and look-alikes that are not well formed, are left alone. */
	CHECK(!cuptrace_opname_parse("step 3", &o));
	CHECK(!cuptrace_opname_parse("nn.Module: Linear", &o));
	CHECK(!cuptrace_opname_parse("a, b = 3", &o));
	CHECK(!cuptrace_opname_parse(", seq = 3", &o));                     /* no name */
	CHECK(!cuptrace_opname_parse("x, seq = ", &o));                     /* no value */
	CHECK(!cuptrace_opname_parse("x, seq = 3x", &o));                   /* junk after */
	CHECK(!cuptrace_opname_parse("x, seq = 3, seq = 4", &o));           /* twice */
	CHECK(!cuptrace_opname_parse("x, sizes = [[1, 2]", &o));            /* unclosed */
	CHECK(!cuptrace_opname_parse("x, seq = 99999999999999999999", &o)); /* too long */
	CHECK(!cuptrace_opname_parse("", &o));
	CHECK(!cuptrace_opname_parse(NULL, &o));
}

TEST_MAIN(T(test_trivial_list), T(test_keep_rule), T(test_opname))
