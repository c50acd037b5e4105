/* Unit tests of `cuptrace diff`: base names of C++ functions, the aggregating sink's families on
 * hand-built event streams, and the comparison (added, removed, changed, --per, --fail-above,
 * devices), with every number known by hand. */
#include "check.h"
#include "compare/diff.h"
#include "names/base_name.h"
#include "ranks.h"
#include "steps.h"

#include <errno.h>
#include <math.h>

static void check_base(const char *name, const char *want)
{
	char out[512];
	size_t n = cuptrace_name_base(name, out, sizeof(out));
	CHECK_EQ_STR(out, want);
	CHECK_EQ_INT(n, strlen(want));
}

static void test_name_base(void)
{
	check_base("void gemm<float, 128>(float*, int)", "gemm");
	check_base("gemm<float, 64>", "gemm");
	check_base("gemm", "gemm");
	check_base("void ns::gemm<float, 64>(float const*, float*)", "ns::gemm");
	/* Nested <> and (), and ">>" closing two lists. */
	check_base("void at::native::vectorized_elementwise_kernel<4, "
	           "at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>>(int, "
	           "at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)",
	           "at::native::vectorized_elementwise_kernel");
	check_base("void k<(int)3, decltype((a<b))>(int (*)(float), void (*)())", "k");
	/* A comparison inside parentheses is no template bracket. */
	check_base("void k<(1>2)>(int)", "k");
	check_base("void at::native::(anonymous namespace)::max_pool_backward_nchw<float, "
	           "float>(float const*, long*, int, int)",
	           "at::native::(anonymous namespace)::max_pool_backward_nchw");
	check_base("(anonymous namespace)::helper(int)", "(anonymous namespace)::helper");
	/* Template arguments holding a lambda. */
	check_base("void at::native::elementwise_kernel<128, 2, "
	           "at::native::gpu_kernel_impl<at::native::AbsFunctor<float>>(at::"
	           "TensorIteratorBase&, at::native::AbsFunctor<float> const&)::{lambda(int)#1}>"
	           "(int, at::native::gpu_kernel_impl<at::native::AbsFunctor<float>>(at::"
	           "TensorIteratorBase&, at::native::AbsFunctor<float> const&)::{lambda(int)#1})",
	           "at::native::elementwise_kernel");
	/* A lambda as the function itself. */
	check_base("void f<int>(int)::{lambda(float)#1}::operator()(float) const",
	           "f::{lambda(float)#1}::operator()");
	/* Operators: their symbol is part of the name. */
	check_base("std::ostream& ns::operator<< <float>(std::ostream&, float const&)",
	           "ns::operator<<");
	check_base("std::ostream& operator<<(std::ostream&, A const&)", "operator<<");
	check_base("bool operator<(A const&, A const&)", "operator<");
	check_base("A::operator()(int) const", "A::operator()");
	check_base("int A::operator[](unsigned long)", "A::operator[]");
	check_base("void* operator new[](unsigned long)", "operator new[]");
	check_base("A::operator bool() const", "A::operator bool");
	check_base("X::operator<=>(X const&) const", "X::operator<=>");
	/* Return types of several words, qualifiers and suffixes. */
	check_base("unsigned long long count_kernel<int>(int*)", "count_kernel");
	check_base("std::vector<int, std::allocator<int>> ns::make<int>(int)", "ns::make");
	check_base("void foo(int) [clone .constprop.0]", "foo");
	check_base("void foo[abi:cxx11](int)", "foo");
	check_base("void bar(int) noexcept", "bar");
	/* Not signatures: names of ranges, ops, copies, API calls stay as they are. */
	check_base("aten::add", "aten::add");
	check_base("nn.Module: Linear", "nn.Module: Linear");
	check_base("Memcpy HtoD (Pageable -> Device)", "Memcpy HtoD (Pageable -> Device)");
	check_base("autograd::engine::evaluate_function: MmBackward0",
	           "autograd::engine::evaluate_function: MmBackward0");
	check_base("step <3>", "step <3>");
	check_base("[rank 0] step", "[rank 0] step");
	check_base("", "");
	/* Unbalanced: kept whole rather than cut somewhere arbitrary. */
	check_base("void broken<int(float)", "void broken<int(float)");
	check_base("void broken(int", "void broken(int");
	check_base("a<b", "a<b");
	check_base("f(x]", "f(x]");
	/* Too deep to follow: kept whole. */
	char deep[300] = "k";
	for (int i = 0; i < 100; i++)
		strcat(deep, "<");
	for (int i = 0; i < 100; i++)
		strcat(deep, ">");
	check_base(deep, deep);
	/* A small buffer cuts the base, NUL-terminated. */
	char small[4];
	CHECK_EQ_INT(cuptrace_name_base("void gemm<float>(int)", small, sizeof(small)), 3);
	CHECK_EQ_STR(small, "gem");
}

/* ---- a hand-built run ---- */

enum { PROC = 1, MAIN = 2, GPU0 = 3, STREAM = 4, NVTXT = 5 };

struct run_spec {
	int steps;
	int64_t gemm_ns; /* per step */
	int softmax;     /* add a softmax kernel per step */
	const char *gpu0_name;
	const char *gemm_name;
};

/* The helpers of the synthetic loop: they keep the first error in steps_err. */
static void track(struct cuptrace_sink *s, struct cuptrace_track t)
{
	steps_track(s, t);
}

static void slice_a(struct cuptrace_sink *s, uint64_t trk, int64_t ts, int64_t dur, const char *cat,
                    const char *name, const struct cuptrace_arg *args, size_t nargs)
{
	steps_slice(s, trk, ts, dur, cat, name, args, nargs, 0, 0);
}

static void slice(struct cuptrace_sink *s, uint64_t trk, int64_t ts, int64_t dur, const char *cat,
                  const char *name)
{
	steps_slice(s, trk, ts, dur, cat, name, NULL, 0, 0, 0);
}

/* Per step of 10000 ns on MAIN: a "step" range holding an op with a seq argument, a launch per
 * kernel and a copy; on the GPU gemm, relu (500 ns), maybe softmax (800 ns) and the copy
 * (1000 ns, 4096 bytes). Besides: things that are in no family. */
static void feed(struct cuptrace_sink *s, const struct run_spec *r)
{
	struct cuptrace_trace_info info = {.pid = 100, .process_name = "steps"};
	static const struct cuptrace_arg seq = {.key = "seq", .type = CUPTRACE_ARG_INT, .v.i = 7};
	static const struct cuptrace_arg bytes = {
	    .key = "bytes", .type = CUPTRACE_ARG_UINT, .v.u = 4096};

	steps_err = 0;
	CHECK_EQ_INT(s->ops->begin(s, &info), 0);
	track(s, (struct cuptrace_track){
	             .uuid = PROC, .kind = CUPTRACE_TRACK_PROCESS, .pid = 100, .name = "steps"});
	track(s, (struct cuptrace_track){.uuid = MAIN,
	                                 .kind = CUPTRACE_TRACK_THREAD,
	                                 .parent_uuid = PROC,
	                                 .pid = 100,
	                                 .tid = 100,
	                                 .name = "main"});
	track(s, (struct cuptrace_track){.uuid = NVTXT,
	                                 .kind = CUPTRACE_TRACK_SLICES,
	                                 .parent_uuid = PROC,
	                                 .pid = 100,
	                                 .name = "NVTX ranges"});
	track(s, (struct cuptrace_track){.uuid = GPU0,
	                                 .kind = CUPTRACE_TRACK_GROUP,
	                                 .parent_uuid = PROC,
	                                 .pid = 100,
	                                 .name = r->gpu0_name});
	track(s, (struct cuptrace_track){.uuid = STREAM,
	                                 .kind = CUPTRACE_TRACK_SLICES,
	                                 .parent_uuid = GPU0,
	                                 .pid = 100,
	                                 .name = "Stream 7"});
	for (int i = 0; i < r->steps; i++) {
		int64_t t = 10000 * (int64_t)i;
		slice(s, MAIN, t, 10000, "nvtx", "step");
		slice_a(s, MAIN, t + 100, 300, "nvtx", "mm_op", &seq, 1); /* an op by its seq */
		slice(s, MAIN, t + 100, 50, "cuda_runtime", "cudaLaunchKernel");
		slice(s, MAIN, t + 200, 50, "cuda_runtime", "cudaLaunchKernel");
		slice(s, MAIN, t + 300, 100, "cuda_driver", "cuMemcpyHtoDAsync");
		slice(s, MAIN, t + 400, 10, "sync", "Wait: stream");       /* no family */
		slice(s, MAIN, t + 500, 10, "cupti_overhead", "overhead"); /* no family */
		slice(s, STREAM, t + 1000, r->gemm_ns, "kernel", r->gemm_name);
		slice(s, STREAM, t + 7000, 500, "kernel", "relu(float*)");
		slice_a(s, STREAM, t + 7500, 1000, "memcpy", "Memcpy HtoD", &bytes, 1);
		if (r->softmax) {
			slice(s, MAIN, t + 600, 50, "cuda_runtime", "cudaLaunchKernel");
			slice(s, STREAM, t + 8500, 800, "kernel", "void softmax<float>(float*)");
		}
		/* A range of a named domain, a torch.profiler annotation and op, and an aten op. */
		slice(s, NVTXT, t + 2000, 100, "my_domain", "phase");
		slice(s, MAIN, t + 2000, 40, "user_annotation", "annot");
		slice(s, MAIN, t + 2100, 30, "cpu_op", "aten::relu");
		slice(s, MAIN, t + 2200, 20, "nvtx", "aten::mm");
		slice(s, MAIN, t + 2300, 20, "nvtx", "nn.Module: Linear");
		/* A range on a GPU track (torch.profiler's gpu_user_annotation): not a range. */
		slice(s, STREAM, t + 9500, 100, "nvtx", "step");
	}
	CHECK_EQ_INT(steps_err, 0);
	CHECK_EQ_INT(s->ops->finish(s), 0);
}

static void profile(const struct run_spec *r, int base, const char *per, struct cuptrace_profile *p)
{
	struct cuptrace_profile_opts o = {.sz = sizeof(o), .group_by_base = base, .per_name = per};
	struct cuptrace_sink *s = cuptrace_profile_sink_new(p, &o);
	CHECK(s != NULL);
	if (!s)
		return;
	feed(s, r);
	cuptrace_sink_destroy(s);
}

static const struct cuptrace_profile_name *pname(const struct cuptrace_profile *p, int fam,
                                                 const char *name)
{
	for (size_t i = 0; i < p->nnames[fam]; i++)
		if (!strcmp(p->names[fam][i].name, name))
			return &p->names[fam][i];
	return NULL;
}

static void check_pname(const struct cuptrace_profile *p, int fam, const char *name, uint64_t count,
                        int64_t total)
{
	const struct cuptrace_profile_name *n = pname(p, fam, name);
	CHECK(n != NULL);
	if (!n) {
		fprintf(stderr, "  missing: %s\n", name);
		return;
	}
	CHECK_EQ_INT(n->count, count);
	CHECK_EQ_INT(n->total_ns, total);
}

static const struct run_spec BASE = {3, 3000, 0, "GPU 0: NVIDIA H200",
                                     "void gemm<float, 128>(float const*, float*, int)"};

static void test_profile_families(void)
{
	struct cuptrace_profile p;
	profile(&BASE, 0, "step", &p);

	CHECK_EQ_INT(p.span_ns, 30000);
	/* gemm, relu and the copy; the "step" range on the GPU track is not work. */
	CHECK_EQ_INT(p.gpu_busy_ns, 3 * (3000 + 500 + 1000));
	CHECK_EQ_INT(p.kernels, 6);
	CHECK_EQ_INT(p.bytes_copied, 3 * 4096);
	CHECK_EQ_INT(p.per_count, 3); /* the "step" on the GPU track does not count */
	CHECK_EQ_INT(p.ndev, 1);
	if (p.ndev) {
		CHECK_EQ_STR(p.dev[0].name, "GPU 0: NVIDIA H200");
		CHECK_EQ_INT(p.dev[0].busy_ns, p.gpu_busy_ns);
	}
	CHECK_EQ_INT(p.nnames[CUPTRACE_FAM_KERNEL], 2);
	check_pname(&p, CUPTRACE_FAM_KERNEL, BASE.gemm_name, 3, 9000);
	check_pname(&p, CUPTRACE_FAM_KERNEL, "relu(float*)", 3, 1500);
	CHECK_EQ_INT(p.nnames[CUPTRACE_FAM_API], 2);
	check_pname(&p, CUPTRACE_FAM_API, "cudaLaunchKernel", 6, 300);
	check_pname(&p, CUPTRACE_FAM_API, "cuMemcpyHtoDAsync", 3, 300);
	CHECK_EQ_INT(p.nnames[CUPTRACE_FAM_COPY], 1);
	check_pname(&p, CUPTRACE_FAM_COPY, "Memcpy HtoD", 3, 3000);
	CHECK_EQ_INT(p.nnames[CUPTRACE_FAM_NVTX], 3);
	check_pname(&p, CUPTRACE_FAM_NVTX, "step", 3, 30000);
	check_pname(&p, CUPTRACE_FAM_NVTX, "phase", 3, 300);
	check_pname(&p, CUPTRACE_FAM_NVTX, "annot", 3, 120);
	CHECK_EQ_INT(p.nnames[CUPTRACE_FAM_OP], 4);
	check_pname(&p, CUPTRACE_FAM_OP, "mm_op", 3, 900);
	check_pname(&p, CUPTRACE_FAM_OP, "aten::relu", 3, 90);
	check_pname(&p, CUPTRACE_FAM_OP, "aten::mm", 3, 60);
	check_pname(&p, CUPTRACE_FAM_OP, "nn.Module: Linear", 3, 60);
	/* Sorted by name, for merging. */
	for (int f = 0; f < CUPTRACE_FAM_N; f++)
		for (size_t i = 1; i < p.nnames[f]; i++)
			CHECK(strcmp(p.names[f][i - 1].name, p.names[f][i].name) < 0);
	cuptrace_profile_free(&p);
	cuptrace_profile_free(&p); /* twice is fine */

	/* Grouped by base name. */
	profile(&BASE, 1, NULL, &p);
	check_pname(&p, CUPTRACE_FAM_KERNEL, "gemm", 3, 9000);
	check_pname(&p, CUPTRACE_FAM_KERNEL, "relu", 3, 1500);
	check_pname(&p, CUPTRACE_FAM_COPY, "Memcpy HtoD", 3, 3000);
	CHECK_EQ_INT(p.per_count, 0);
	cuptrace_profile_free(&p);
}

static const struct cuptrace_diff_row *row(const struct cuptrace_diff *d, int fam, const char *n)
{
	for (size_t i = 0; i < d->nrows[fam]; i++)
		if (!strcmp(d->rows[fam][i].name, n))
			return &d->rows[fam][i];
	return NULL;
}

static void check_row(const struct cuptrace_diff *d, int fam, const char *name, int status,
                      double cb, double cn, double tb, double tn)
{
	const struct cuptrace_diff_row *r = row(d, fam, name);
	CHECK(r != NULL);
	if (!r) {
		fprintf(stderr, "  no row: %s\n", name);
		return;
	}
	CHECK_EQ_INT(r->status, status);
	CHECK(fabs(r->count.base - cb) < 1e-9 && fabs(r->count.new_ - cn) < 1e-9);
	CHECK(fabs(r->total_ns.base - tb) < 1e-6 && fabs(r->total_ns.new_ - tn) < 1e-6);
}

static int compare(const struct run_spec *a, const struct run_spec *b, int base, const char *per,
                   double fail_pct, struct cuptrace_diff *d)
{
	struct cuptrace_profile pa, pb;
	profile(a, base, per, &pa);
	profile(b, base, per, &pb);
	struct cuptrace_diff_opts o = {.sz = sizeof(o),
	                               .base_path = "a",
	                               .new_path = "b",
	                               .per_name = per,
	                               .group_by_base = base,
	                               .fail_above_pct = fail_pct};
	int r = cuptrace_diff_compute(&pa, &pb, &o, d);
	cuptrace_profile_free(&pa);
	cuptrace_profile_free(&pb);
	return r;
}

static void test_diff_same(void)
{
	struct cuptrace_diff d;
	CHECK_EQ_INT(compare(&BASE, &BASE, 0, NULL, 0, &d), 0);
	CHECK_EQ_INT(d.nfail, 0); /* nothing grew, even against 0% */
	CHECK(d.span_ns.base == 30000 && d.span_ns.new_ == 30000);
	for (int f = 0; f < CUPTRACE_FAM_N; f++)
		for (size_t i = 0; i < d.nrows[f]; i++) {
			const struct cuptrace_diff_row *r = &d.rows[f][i];
			CHECK_EQ_INT(r->status, CUPTRACE_DIFF_COMMON);
			CHECK(r->count.base == r->count.new_ &&
			      r->total_ns.base == r->total_ns.new_);
		}
	/* Unchanged rows: the larger total first. */
	CHECK(d.nrows[CUPTRACE_FAM_KERNEL] == 2 &&
	      !strcmp(d.rows[CUPTRACE_FAM_KERNEL][0].name, BASE.gemm_name));
	cuptrace_diff_free(&d);
	cuptrace_diff_free(&d);
}

static void test_diff_changed(void)
{
	struct run_spec slow = BASE;
	struct cuptrace_diff d;
	slow.gemm_ns = 6000;
	slow.softmax = 1;
	CHECK_EQ_INT(compare(&BASE, &slow, 0, NULL, 10, &d), 0);
	CHECK(d.gpu_busy_ns.base == 13500 && d.gpu_busy_ns.new_ == 13500 + 3 * (3000 + 800));
	CHECK(d.kernels.base == 6 && d.kernels.new_ == 9);
	CHECK(d.bytes_copied.base == 12288 && d.bytes_copied.new_ == 12288);
	/* Sorted by |change in total|: gemm +9000, softmax +2400, relu 0. */
	int K = CUPTRACE_FAM_KERNEL;
	CHECK_EQ_INT(d.nrows[K], 3);
	if (d.nrows[K] == 3) {
		CHECK_EQ_STR(d.rows[K][0].name, BASE.gemm_name);
		CHECK_EQ_STR(d.rows[K][1].name, "void softmax<float>(float*)");
		CHECK_EQ_STR(d.rows[K][2].name, "relu(float*)");
	}
	check_row(&d, K, BASE.gemm_name, CUPTRACE_DIFF_COMMON, 3, 3, 9000, 18000);
	check_row(&d, K, "void softmax<float>(float*)", CUPTRACE_DIFF_ADDED, 0, 3, 0, 2400);
	check_row(&d, K, "relu(float*)", CUPTRACE_DIFF_COMMON, 3, 3, 1500, 1500);
	check_row(&d, CUPTRACE_FAM_API, "cudaLaunchKernel", CUPTRACE_DIFF_COMMON, 6, 9, 300, 450);
	/* Fail above 10%: GPU busy time (+82.6%), gemm (+100%), softmax (new, 17% of the base's GPU
	 * time), cudaLaunchKernel (+50% and half of its family); relu and the copy did not grow. */
	CHECK_EQ_INT(d.nfail, 4);
	if (d.nfail == 4) {
		CHECK(d.fail[0].family == -1 && d.fail[0].name == NULL);
		CHECK(d.fail[1].family == K && !strcmp(d.fail[1].name, BASE.gemm_name));
		CHECK(d.fail[2].family == K &&
		      !strcmp(d.fail[2].name, "void softmax<float>(float*)"));
		CHECK(d.fail[3].family == CUPTRACE_FAM_API &&
		      !strcmp(d.fail[3].name, "cudaLaunchKernel"));
	}
	cuptrace_diff_free(&d);

	/* 150%: nothing grew that much but softmax, new. */
	CHECK_EQ_INT(compare(&BASE, &slow, 0, NULL, 150, &d), 0);
	CHECK_EQ_INT(d.nfail, 1);
	CHECK(d.nfail == 1 && d.fail[0].name &&
	      !strcmp(d.fail[0].name, "void softmax<float>(float*)"));
	cuptrace_diff_free(&d);

	/* The other way round: softmax removed, nothing grew. */
	CHECK_EQ_INT(compare(&slow, &BASE, 0, NULL, 0, &d), 0);
	check_row(&d, K, "void softmax<float>(float*)", CUPTRACE_DIFF_REMOVED, 3, 0, 2400, 0);
	CHECK_EQ_INT(d.nfail, 0);
	cuptrace_diff_free(&d);

	/* A name under 1% of the base's GPU busy time does not fail however it grows. */
	struct run_spec tiny = BASE;
	tiny.gemm_ns = 40; /* busy: 3 * 1640 = 4920; gemm 120 ns = 2.4% */
	struct run_spec tiny2 = tiny;
	tiny2.gemm_ns = 4; /* to 12 ns: shrinks */
	CHECK_EQ_INT(compare(&tiny2, &tiny, 0, NULL, 50, &d), 0);
	/* 12 ns of 3 * 1604 = 4812 ns is 0.25% in base, but 120 ns is 2.5% in new: counts. */
	CHECK_EQ_INT(d.nfail, 1);
	cuptrace_diff_free(&d);
	tiny.gemm_ns = 10; /* 30 ns of 4812: 0.6% in both: below the floor */
	CHECK_EQ_INT(compare(&tiny2, &tiny, 0, NULL, 50, &d), 0);
	CHECK_EQ_INT(d.nfail, 0);
	cuptrace_diff_free(&d);
}

static void test_diff_group_by_base(void)
{
	struct run_spec other = BASE;
	struct cuptrace_diff d;
	other.gemm_name = "void gemm<float, 64>(float const*, float*, int)";
	CHECK_EQ_INT(compare(&BASE, &other, 0, NULL, -1, &d), 0);
	check_row(&d, CUPTRACE_FAM_KERNEL, BASE.gemm_name, CUPTRACE_DIFF_REMOVED, 3, 0, 9000, 0);
	check_row(&d, CUPTRACE_FAM_KERNEL, other.gemm_name, CUPTRACE_DIFF_ADDED, 0, 3, 0, 9000);
	CHECK(d.fail == NULL && d.fail_above_pct < 0);
	cuptrace_diff_free(&d);
	CHECK_EQ_INT(compare(&BASE, &other, 1, NULL, -1, &d), 0);
	CHECK_EQ_INT(d.nrows[CUPTRACE_FAM_KERNEL], 2);
	check_row(&d, CUPTRACE_FAM_KERNEL, "gemm", CUPTRACE_DIFF_COMMON, 3, 3, 9000, 9000);
	CHECK(d.group_by_base);
	cuptrace_diff_free(&d);
}

static void test_diff_per(void)
{
	struct run_spec lng = BASE;
	struct cuptrace_diff d;
	lng.steps = 7;
	/* Raw: everything more than doubles. */
	CHECK_EQ_INT(compare(&BASE, &lng, 0, NULL, 10, &d), 0);
	CHECK(d.kernels.base == 6 && d.kernels.new_ == 14);
	CHECK(d.nfail > 0);
	cuptrace_diff_free(&d);
	/* Per step: the same run. */
	CHECK_EQ_INT(compare(&BASE, &lng, 0, "step", 0, &d), 0);
	CHECK(d.base_per == 3 && d.new_per == 7);
	CHECK(d.kernels.base == 2 && d.kernels.new_ == 2);
	CHECK(d.span_ns.base == 10000 && d.span_ns.new_ == 10000);
	CHECK(d.gpu_busy_ns.base == 4500 && d.gpu_busy_ns.new_ == 4500);
	CHECK_EQ_STR(d.per_name, "step");
	check_row(&d, CUPTRACE_FAM_KERNEL, BASE.gemm_name, CUPTRACE_DIFF_COMMON, 1, 1, 3000, 3000);
	check_row(&d, CUPTRACE_FAM_API, "cudaLaunchKernel", CUPTRACE_DIFF_COMMON, 2, 2, 100, 100);
	CHECK(d.ndev == 1 && d.dev[0].busy_ns.base == 4500 && d.dev[0].busy_ns.new_ == 4500);
	CHECK_EQ_INT(d.nfail, 0);
	cuptrace_diff_free(&d);
	/* Per a range one run lacks: an error, said as -ENOENT. */
	CHECK_EQ_INT(compare(&BASE, &lng, 0, "epoch", 0, &d), -ENOENT);
	cuptrace_diff_free(&d);
	/* Fractional counts: per "phase" of the NVTX domain (3 and 7 too). */
	CHECK_EQ_INT(compare(&BASE, &lng, 0, "phase", -1, &d), 0);
	CHECK(d.kernels.base == 2);
	cuptrace_diff_free(&d);
}

static void test_diff_devices(void)
{
	struct run_spec h100 = BASE;
	struct cuptrace_diff d;
	h100.gpu0_name = "GPU 0: NVIDIA H100";
	CHECK_EQ_INT(compare(&BASE, &h100, 0, NULL, -1, &d), 0);
	CHECK_EQ_INT(d.ndev, 1);
	if (d.ndev == 1) {
		CHECK_EQ_STR(d.dev[0].name, "GPU 0: NVIDIA H200");
		CHECK_EQ_STR(d.dev[0].other_name, "GPU 0: NVIDIA H100");
		CHECK(d.dev[0].in_base && d.dev[0].in_new);
	}
	cuptrace_diff_free(&d);
	/* Another index and no index in common: the same work on another GPU, paired by
	 * position, not one GPU removed and one added. */
	h100.gpu0_name = "GPU 1: NVIDIA H200";
	CHECK_EQ_INT(compare(&BASE, &h100, 0, NULL, -1, &d), 0);
	CHECK_EQ_INT(d.ndev, 1);
	CHECK(d.dev_by_position);
	if (d.ndev == 1) {
		CHECK(d.dev[0].in_base && d.dev[0].in_new);
		CHECK(d.dev[0].busy_ns.base == 13500 && d.dev[0].busy_ns.new_ == 13500);
		CHECK_EQ_STR(d.dev[0].name, "GPU 0: NVIDIA H200");
		CHECK_EQ_STR(d.dev[0].other_name, "GPU 1: NVIDIA H200");
	}
	cuptrace_diff_free(&d);
	/* The same index: by index, as ever. */
	CHECK_EQ_INT(compare(&BASE, &BASE, 0, NULL, -1, &d), 0);
	CHECK(!d.dev_by_position && d.ndev == 1 && d.dev[0].other_name == NULL);
	cuptrace_diff_free(&d);
}

/* One rank of the simulated job of tests/ranks.h as a profile. */
static void rank_profile(const struct ranks_job *j, int r, struct cuptrace_profile *p)
{
	struct cuptrace_profile_opts o = {.sz = sizeof(o)};
	struct cuptrace_sink *s = cuptrace_profile_sink_new(p, &o);
	CHECK(s != NULL);
	if (!s)
		return;
	ranks_err = 0;
	CHECK_EQ_INT(ranks_feed(s, j, r), 0);
	CHECK_EQ_INT(s->ops->finish(s), 0);
	cuptrace_sink_destroy(s);
}

/* Rank r's GPU busy time from the job's truth: per step the gemm and the all-reduce, 5 us
 * apart (no drift: the rank's clock keeps durations). */
static int64_t rank_busy(const struct ranks_job *j, int r)
{
	int64_t busy = 0;
	for (int i = 0; i < j->steps; i++) {
		struct ranks_step t = ranks_truth(j, r, i);
		busy += (t.gemm_end - t.gemm) + (t.ar_end - t.ar);
	}
	return busy;
}

/* Two ranks of one job (issue 25): rank 0 on GPU 0 against rank 1 on GPU 1 compares the two
 * GPUs, and says so; two ranks on "GPU 0" of their own machines pair by position too. */
static void test_diff_ranks(void)
{
	struct ranks_job j = RANKS_JOB_DEFAULT;
	struct cuptrace_profile pa, pb;
	struct cuptrace_diff d;
	struct cuptrace_diff_opts o = {
	    .sz = sizeof(o), .base_path = "rank0", .new_path = "rank1", .fail_above_pct = -1};

	j.steps = 10;
	for (int local = 1; local >= 0; local--) {
		j.per_host = local ? 2 : 1;
		j.gpu_local = local;
		rank_profile(&j, 0, &pa);
		rank_profile(&j, 1, &pb);
		CHECK(pa.has_rank && pa.rank == 0 && pb.has_rank && pb.rank == 1);
		CHECK_EQ_INT(cuptrace_diff_compute(&pa, &pb, &o, &d), 0);
		CHECK(d.dev_by_position);
		CHECK(d.base_rank == 0 && d.new_rank == 1);
		CHECK_EQ_INT(d.ndev, 1);
		if (d.ndev == 1) {
			CHECK(d.dev[0].in_base && d.dev[0].in_new);
			CHECK_EQ_STR(d.dev[0].name, "GPU 0: NVIDIA H200");
			if (local)
				CHECK_EQ_STR(d.dev[0].other_name, "GPU 1: NVIDIA H200");
			else
				CHECK(d.dev[0].other_name == NULL);
			CHECK(d.dev[0].busy_ns.base == (double)rank_busy(&j, 0));
			CHECK(d.dev[0].busy_ns.new_ == (double)rank_busy(&j, 1));
		}
		if (local) {
			char *buf = NULL;
			size_t len = 0;
			FILE *f = open_memstream(&buf, &len);
			CHECK(f != NULL);
			if (f) {
				cuptrace_diff_print(&d, f, 0);
				fclose(f);
				char *row = strstr(buf, "GPU 0: NVIDIA H200 (base) vs GPU 1: "
				                        "NVIDIA H200 (new)");
				CHECK(row != NULL);
				CHECK(strstr(buf, "base is rank 0, new is rank 1") != NULL);
				/* one row for both GPUs, with a change, neither "removed" nor
				 * "added"; no other row names a GPU */
				char *eol = row ? strchr(row, '\n') : NULL;
				if (eol) {
					*eol = 0;
					CHECK(!strstr(row, "removed") && !strstr(row, "added"));
					CHECK(strstr(row, "%") || strstr(row, "+") ||
					      strstr(row, "-"));
					CHECK(strstr(eol + 1, "GPU 1") == NULL);
				}
				free(buf);
			}
			buf = NULL;
			f = open_memstream(&buf, &len);
			if (f) {
				CHECK_EQ_INT(cuptrace_diff_print_json(&d, f), 0);
				fclose(f);
				CHECK(strstr(buf, "\"devices_matched_by\":\"position\"") != NULL);
				CHECK(strstr(buf, "\"ranks\":{\"base\":0,\"new\":1}") != NULL);
				free(buf);
			}
		}
		cuptrace_diff_free(&d);
		cuptrace_profile_free(&pa);
		cuptrace_profile_free(&pb);
	}
	/* The same rank twice: by index. */
	rank_profile(&j, 1, &pa);
	rank_profile(&j, 1, &pb);
	CHECK_EQ_INT(cuptrace_diff_compute(&pa, &pb, &o, &d), 0);
	CHECK(!d.dev_by_position && d.ndev == 1);
	cuptrace_diff_free(&d);
	cuptrace_profile_free(&pa);
	cuptrace_profile_free(&pb);
}

/* The printed report of the changed run: the rows, the markers, the verdict. */
static void test_diff_print(void)
{
	struct run_spec slow = BASE;
	struct cuptrace_diff d;
	char *buf = NULL;
	size_t len = 0;
	slow.gemm_ns = 6000;
	slow.softmax = 1;
	CHECK_EQ_INT(compare(&BASE, &slow, 0, NULL, 10, &d), 0);
	FILE *f = open_memstream(&buf, &len);
	CHECK(f != NULL);
	if (!f)
		return;
	cuptrace_diff_print(&d, f, 1);
	fclose(f);
	CHECK(buf && strstr(buf, "| Wall span | 30.00 us | 30.00 us | 0 ns | 0.0 |\n"));
	CHECK(buf && strstr(buf, "| GPU busy | 13.50 us | 24.90 us | +11.40 us | +84.4 |\n"));
	CHECK(buf && strstr(buf, "| Kernels | 6 | 9 | +3 | +50.0 |\n"));
	CHECK(buf && strstr(buf, "#### Kernels (1 added, 0 removed)\n"));
	CHECK(buf && strstr(buf, "| void gemm<float, 128>(float const*, float*, int) | 3 | 3 | "
	                         "9.000 us | 18.00 us | +9.000 us | +100.0 | +100.0 |\n"));
	CHECK(buf && strstr(buf, "| void softmax<float>(float*) | - | 3 | 0 ns | 2.400 us | "
	                         "+2.400 us | added |  |\n"));
	CHECK(buf && strstr(buf, "| relu(float*) | 3 | 3 | 1.500 us | 1.500 us | 0 ns | 0.0 | "
	                         "0.0 |\n"));
	CHECK(buf && strstr(buf, "#### Fail above 10%\n\n4 grew by more than 10%:\n\n"
	                         "- GPU busy time: 13.50 us -> 24.90 us (+84.4%)\n"));
	CHECK(buf && strstr(buf, "- kernel void softmax<float>(float*): 0 ns -> 2.400 us (new)\n"));
	free(buf);
	cuptrace_diff_free(&d);
}

/* --group-by op: one op ("aten::addmm") launches kernel A in BASE and kernel B in NEW (a library
 * picking another variant), through a launch call with a flow to the kernel. Grouped by op they
 * are one row; by name, one removed and one added. A launch inside aten::linear but outside
 * addmm goes to aten::linear; ProfilerStep#N around everything is not an op; a kernel with no
 * flow is "(no op) NAME". NEW is fed GPU side first: the attribution must not depend on it. */
static void op_slice(struct cuptrace_sink *s, uint64_t trk, int64_t ts, int64_t dur,
                     const char *cat, const char *name, uint64_t out, uint64_t in)
{
	struct cuptrace_slice e = {.track_uuid = trk,
	                           .ts = ts,
	                           .dur = dur,
	                           .name = name,
	                           .category = cat,
	                           .flows_out = &out,
	                           .nflows_out = out != 0,
	                           .flows_in = &in,
	                           .nflows_in = in != 0};
	CHECK_EQ_INT(s->ops->slice(s, &e), 0);
}

static void op_feed(struct cuptrace_sink *s, const char *kernel, int64_t kdur, int gpu_first)
{
	enum { T = 2, G = 3, S7 = 4, LANE = 5 };
	struct cuptrace_trace_info info = {.pid = 100, .process_name = "p"};
	CHECK_EQ_INT(s->ops->begin(s, &info), 0);
	track(s, (struct cuptrace_track){.uuid = 1, .kind = CUPTRACE_TRACK_PROCESS, .pid = 100});
	track(s, (struct cuptrace_track){.uuid = T,
	                                 .kind = CUPTRACE_TRACK_THREAD,
	                                 .parent_uuid = 1,
	                                 .pid = 100,
	                                 .tid = 1,
	                                 .name = "main"});
	/* a lane of main, as the JSON reader makes for partially overlapping slices */
	track(s,
	      (struct cuptrace_track){
	          .uuid = LANE, .kind = CUPTRACE_TRACK_SLICES, .parent_uuid = 1, .name = "main"});
	track(s, (struct cuptrace_track){
	             .uuid = G, .kind = CUPTRACE_TRACK_GROUP, .parent_uuid = 1, .name = "GPU 0"});
	track(s, (struct cuptrace_track){
	             .uuid = S7, .kind = CUPTRACE_TRACK_SLICES, .parent_uuid = G, .name = "s7"});
	for (int pass = 0; pass < 2; pass++) {
		int gpu = pass == (gpu_first ? 0 : 1);
		for (int i = 0; i < 3; i++) {
			int64_t t = 10000 * (int64_t)i;
			uint64_t f1 = 10 * (uint64_t)i + 1, f2 = f1 + 1;
			if (gpu) {
				op_slice(s, S7, t + 100, kdur, "kernel", kernel, 0, f1);
				op_slice(s, S7, t + 700, 100, "kernel", "relu", 0, f2);
				op_slice(s, S7, t + 900, 50, "kernel", "orphan", 0, 0);
				op_slice(s, S7, t + 1000, 10, "kernel", "gemm2", 0, f1 + 5);
				continue;
			}
			op_slice(s, T, t, 5000, "user_annotation", "ProfilerStep#1", 0, 0);
			op_slice(s, T, t + 5, 1000, "cpu_op", "aten::linear", 0, 0);
			op_slice(s, T, t + 10, 500, "cpu_op", "aten::addmm", 0, 0);
			op_slice(s, T, t + 20, 30, "cuda_runtime", "cudaLaunchKernel", f1, 0);
			op_slice(s, T, t + 600, 30, "cuda_runtime", "cudaLaunchKernel", f2, 0);
			op_slice(s, LANE, t + 30, 30, "cuda_runtime", "cudaLaunchKernel", f1 + 5,
			         0);
		}
	}
	CHECK_EQ_INT(s->ops->finish(s), 0);
}

static void op_profile(const char *kernel, int64_t kdur, int gpu_first, int by_op,
                       struct cuptrace_profile *p)
{
	struct cuptrace_profile_opts o = {.sz = sizeof(o), .group_by_op = by_op};
	struct cuptrace_sink *s = cuptrace_profile_sink_new(p, &o);
	CHECK(s != NULL);
	if (!s)
		return;
	op_feed(s, kernel, kdur, gpu_first);
	cuptrace_sink_destroy(s);
}

static void test_diff_group_by_op(void)
{
	struct cuptrace_profile pa, pb;
	struct cuptrace_diff d;
	for (int by_op = 0; by_op < 2; by_op++) {
		op_profile("kernA", 200, 0, by_op, &pa);
		op_profile("kernB", 250, 1, by_op, &pb);
		struct cuptrace_diff_opts o = {.sz = sizeof(o),
		                               .base_path = "a",
		                               .new_path = "b",
		                               .group_by_op = by_op,
		                               .fail_above_pct = -1};
		CHECK_EQ_INT(cuptrace_diff_compute(&pa, &pb, &o, &d), 0);
		CHECK_EQ_INT(pa.kernels, 12);
		CHECK_EQ_INT(d.nrows[CUPTRACE_FAM_KERNEL], by_op ? 3 : 5);
		if (by_op) {
			/* kernel A or B, and gemm2 (launched from main's lane) */
			check_row(&d, CUPTRACE_FAM_KERNEL, "aten::addmm", CUPTRACE_DIFF_COMMON, 6,
			          6, 630, 780);
			check_row(&d, CUPTRACE_FAM_KERNEL, "aten::linear", CUPTRACE_DIFF_COMMON, 3,
			          3, 300, 300);
			check_row(&d, CUPTRACE_FAM_KERNEL, "(no op) orphan", CUPTRACE_DIFF_COMMON,
			          3, 3, 150, 150);
			CHECK(d.group_by_op);
		} else {
			check_row(&d, CUPTRACE_FAM_KERNEL, "kernA", CUPTRACE_DIFF_REMOVED, 3, 0,
			          600, 0);
			check_row(&d, CUPTRACE_FAM_KERNEL, "kernB", CUPTRACE_DIFF_ADDED, 0, 3, 0,
			          750);
		}
		/* the ops themselves are counted as ever */
		check_row(&d, CUPTRACE_FAM_OP, "aten::addmm", CUPTRACE_DIFF_COMMON, 3, 3, 1500,
		          1500);
		cuptrace_profile_free(&pa);
		cuptrace_profile_free(&pb);
		cuptrace_diff_free(&d);
	}
}

TEST_MAIN(T(test_name_base), T(test_profile_families), T(test_diff_same), T(test_diff_changed),
          T(test_diff_group_by_base), T(test_diff_group_by_op), T(test_diff_per),
          T(test_diff_devices), T(test_diff_ranks), T(test_diff_print))
