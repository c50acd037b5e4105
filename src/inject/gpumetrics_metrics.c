/* GPU metrics, the host side (see gpumetrics_state.h): which metrics a GPU can sample in one
 * pass (the list asked for, or the default roles), CUPTI profiler host objects, and
 * `cuptrace record --list-gpu-metrics`. Runs on the sampler thread, or in `record`'s call. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "inject/gpumetrics.h"
#include "inject/gpumetrics_state.h"
#include "common/log.h"
#include "common/util.h"

void *gm_cuda_sym(const char *name)
{
	void *s = cuptrace_loaded_sym("libcuda.so.1", name);
	if (!s) {
		/* `record --list-gpu-metrics`: nothing loaded the driver yet; it stays loaded */
		void *h = dlopen("libcuda.so.1", RTLD_NOW);
		s = h ? dlsym(h, name) : NULL;
	}
	return s;
}

const char *gm_res_str(CUptiResult r)
{
	const char *s = NULL;
	if (cuptiGetResultString(r, &s) != CUPTI_SUCCESS || !s)
		s = "unknown CUPTI error";
	return s;
}

/* ---- the host side: which metrics, in one pass ---- */

CUpti_Profiler_Host_Object *gm_host_new(const char *chip, const uint8_t *avail, CUptiResult *r)
{
	CUpti_Profiler_Host_Initialize_Params p;
	memset(&p, 0, sizeof(p));
	p.structSize = CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE;
	p.profilerType = CUPTI_PROFILER_TYPE_PM_SAMPLING;
	p.pChipName = chip;
	p.pCounterAvailabilityImage = avail;
	*r = cuptiProfilerHostInitialize(&p);
	return *r == CUPTI_SUCCESS ? p.pHostObject : NULL;
}

void gm_host_free(CUpti_Profiler_Host_Object *h)
{
	if (!h)
		return;
	CUpti_Profiler_Host_Deinitialize_Params p;
	memset(&p, 0, sizeof(p));
	p.structSize = CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE;
	p.pHostObject = h;
	cuptiProfilerHostDeinitialize(&p);
}

/* Adds names to a fresh host object; on one pass, keeps it (*keep) and its config image. */
/* A fresh host object holding the names, or NULL where the GPU does not take one of them. */
static CUpti_Profiler_Host_Object *host_with(const char *chip, const uint8_t *avail,
                                             const char **names, size_t n)
{
	CUptiResult r;
	CUpti_Profiler_Host_Object *h = gm_host_new(chip, avail, &r);
	if (!h)
		return NULL;
	CUpti_Profiler_Host_ConfigAddMetrics_Params a;
	memset(&a, 0, sizeof(a));
	a.structSize = CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE;
	a.pHostObject = h;
	a.ppMetricNames = names;
	a.numMetrics = n;
	if (cuptiProfilerHostConfigAddMetrics(&a) != CUPTI_SUCCESS) {
		gm_host_free(h);
		return NULL;
	}
	return h;
}

int gm_try_metrics(const char *chip, const uint8_t *avail, const char **names, size_t n,
                   CUpti_Profiler_Host_Object **keep, uint8_t **cfg, size_t *cfg_size)
{
	CUpti_Profiler_Host_Object *h = host_with(chip, avail, names, n);
	if (!h)
		return -1;
	int ok = 0;
	CUpti_Profiler_Host_GetConfigImageSize_Params s;
	memset(&s, 0, sizeof(s));
	s.structSize = CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE;
	s.pHostObject = h;
	uint8_t *img = NULL;
	if (cuptiProfilerHostGetConfigImageSize(&s) == CUPTI_SUCCESS &&
	    (img = malloc(s.configImageSize))) {
		CUpti_Profiler_Host_GetConfigImage_Params g;
		memset(&g, 0, sizeof(g));
		g.structSize = CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE;
		g.pHostObject = h;
		g.configImageSize = s.configImageSize;
		g.pConfigImage = img;
		CUpti_Profiler_Host_GetNumOfPasses_Params np;
		memset(&np, 0, sizeof(np));
		np.structSize = CUpti_Profiler_Host_GetNumOfPasses_Params_STRUCT_SIZE;
		np.configImageSize = s.configImageSize;
		np.pConfigImage = img;
		ok = cuptiProfilerHostGetConfigImage(&g) == CUPTI_SUCCESS &&
		     cuptiProfilerHostGetNumOfPasses(&np) == CUPTI_SUCCESS && np.numOfPasses == 1;
	}
	if (ok && keep) {
		*keep = h;
		*cfg = img;
		*cfg_size = s.configImageSize;
	} else {
		free(img);
		gm_host_free(h);
	}
	return ok ? 0 : -1;
}

/* Whether the GPU takes the name at all: cheap (no config image), so the default set is
 * settled with one full configuration where it fits rather than one per metric (on the H100
 * the choice then took 40 to 100 ms of the ~0.5 s setup). */
static int known_metric(const char *chip, const uint8_t *avail, const char *name)
{
	CUpti_Profiler_Host_Object *h = host_with(chip, avail, &name, 1);
	gm_host_free(h);
	return h != NULL;
}

/* Appends a name to the comma-separated list of what was left out. */
static void note_left(char *left, size_t cap, const char *what)
{
	size_t k = strlen(left);
	snprintf(left + k, cap - k, "%s%s", k ? ", " : "", what);
}

/* The default roles one by one: each role's first name that still fits one pass with those
 * before it. Sets left to the roles left out; returns the count. */
static size_t greedy_default(const char *chip, const uint8_t *avail, const char **out, char *left,
                             size_t cap)
{
	size_t n = 0;
	left[0] = 0;
	for (const struct cuptrace_gm_role *r = cuptrace_gm_default_roles; r->role; r++) {
		size_t before = n;
		for (const char *const *c = r->candidates; *c && n < GM_MAX_METRICS; c++) {
			out[n] = *c;
			if (!gm_try_metrics(chip, avail, out, n + 1, NULL, NULL, NULL)) {
				n++;
				break;
			}
		}
		if (n == before)
			note_left(left, cap, r->role);
	}
	return n;
}

/* The metrics for a device: the list asked for (each kept if the set still fits one pass), or
 * per default role the first candidate that does. Returns the count. */
size_t gm_choose_metrics(int dev, const char *chip, const uint8_t *avail, const char **out)
{
	size_t n = 0;
	struct gm_dev *d = &gm_sampler.dev[dev];
	char left[512] = "";
	free(d->list);
	d->list = gm_sampler.list ? strdup(gm_sampler.list) : NULL;
	if (gm_sampler.list && d->list) {
		char *save = NULL;
		for (char *t = strtok_r(d->list, ",", &save); t && n < GM_MAX_METRICS;
		     t = strtok_r(NULL, ",", &save)) {
			out[n] = t;
			if (!gm_try_metrics(chip, avail, out, n + 1, NULL, NULL, NULL))
				n++;
			else
				note_left(left, sizeof(left), t);
		}
	} else {
		/* Fast path: per role the first name the GPU knows; all in one pass? */
		for (const struct cuptrace_gm_role *r = cuptrace_gm_default_roles;
		     r->role && n < GM_MAX_METRICS; r++) {
			const char *const *c = r->candidates;
			while (*c && !known_metric(chip, avail, *c))
				c++;
			if (*c)
				out[n++] = *c;
			else
				note_left(left, sizeof(left), r->role);
		}
		/* Else role by role, as the next fits (greedy_default). */
		if (!n || gm_try_metrics(chip, avail, out, n, NULL, NULL, NULL))
			n = greedy_default(chip, avail, out, left, sizeof(left));
	}
	/* One line in all: what was left out, and why it may be. */
	if (left[0] && n)
		cuptrace_warn("GPU %d (%s): GPU metrics left out: %s (unknown to this GPU, or not "
		              "in one sampling pass with the others)",
		              dev, chip, left);
	else if (left[0])
		cuptrace_err("GPU metrics off for GPU %d (%s): none of %s can be sampled here (in "
		             "one pass); `cuptrace record --list-gpu-metrics` lists what can; the "
		             "trace goes on without them",
		             dev, chip, left);
	return n;
}

int cuptrace_gm_list(FILE *out)
{
	cu_init_fn init = (cu_init_fn)gm_cuda_sym("cuInit");
	cu_count_fn count = (cu_count_fn)gm_cuda_sym("cuDeviceGetCount");
	int n = 0;
	if (!init || !count || init(0) || count(&n) || n <= 0) {
		fprintf(stderr, "cuptrace: no CUDA GPU found (is the NVIDIA driver loaded?)\n");
		return -ENODEV;
	}
	CUpti_Profiler_Initialize_Params ip;
	memset(&ip, 0, sizeof(ip));
	ip.structSize = CUpti_Profiler_Initialize_Params_STRUCT_SIZE;
	CUptiResult r = cuptiProfilerInitialize(&ip);
	if (r != CUPTI_SUCCESS) {
		fprintf(stderr, "cuptrace: cannot start CUPTI's profiler: %s\n", gm_res_str(r));
		return -EIO;
	}
	static const char *const types[] = {"counter", "ratio", "throughput"};
	int ret = 0;
	for (int i = 0; i < n; i++) {
		CUpti_Device_GetChipName_Params cn;
		memset(&cn, 0, sizeof(cn));
		cn.structSize = CUpti_Device_GetChipName_Params_STRUCT_SIZE;
		cn.deviceIndex = (size_t)i;
		CUpti_PmSampling_GetCounterAvailability_Params ca;
		memset(&ca, 0, sizeof(ca));
		ca.structSize = CUpti_PmSampling_GetCounterAvailability_Params_STRUCT_SIZE;
		ca.deviceIndex = (size_t)i;
		uint8_t *avail = NULL;
		CUpti_Profiler_Host_Object *h = NULL;
		if ((r = cuptiDeviceGetChipName(&cn)) != CUPTI_SUCCESS ||
		    (r = cuptiPmSamplingGetCounterAvailability(&ca)) != CUPTI_SUCCESS ||
		    !(avail = malloc(ca.counterAvailabilityImageSize + 1)) ||
		    (ca.pCounterAvailabilityImage = avail,
		     (r = cuptiPmSamplingGetCounterAvailability(&ca)) != CUPTI_SUCCESS) ||
		    !(h = gm_host_new(cn.pChipName, avail, &r))) {
			fprintf(stderr, "cuptrace: GPU %d: no PM sampling metrics: %s\n", i,
			        gm_res_str(r));
			free(avail);
			ret = -EIO;
			continue;
		}
		fprintf(out,
		        "GPU %d (%s): PM sampling metrics (base names; add .sum, .avg, "
		        ".max, .pct_of_peak_sustained_elapsed, .per_second as CUPTI allows)\n",
		        i, cn.pChipName);
		for (int t = 0; t < 3; t++) {
			CUpti_Profiler_Host_GetBaseMetrics_Params b;
			memset(&b, 0, sizeof(b));
			b.structSize = CUpti_Profiler_Host_GetBaseMetrics_Params_STRUCT_SIZE;
			b.pHostObject = h;
			b.metricType = (CUpti_MetricType)t;
			if (cuptiProfilerHostGetBaseMetrics(&b) != CUPTI_SUCCESS)
				continue;
			for (size_t k = 0; k < b.numMetrics; k++) {
				CUpti_Profiler_Host_GetMetricProperties_Params mp;
				memset(&mp, 0, sizeof(mp));
				mp.structSize =
				    CUpti_Profiler_Host_GetMetricProperties_Params_STRUCT_SIZE;
				mp.pHostObject = h;
				mp.pMetricName = b.ppMetricNames[k];
				int okp =
				    cuptiProfilerHostGetMetricProperties(&mp) == CUPTI_SUCCESS;
				fprintf(out, "  %-10s %-60s %s\n", types[t], b.ppMetricNames[k],
				        okp && mp.pDescription ? mp.pDescription : "");
			}
		}
		gm_host_free(h);
		free(avail);
	}
	return ret;
}
