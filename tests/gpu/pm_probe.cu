// Standalone probe of CUPTI's PM sampling on a GPU, for the design of `record --gpu-metrics`:
//   1. which PM sampling metrics the GPU has (all base metrics, the submetrics of the
//      interesting ones, and which candidate names configure alone and together in one pass);
//   2. samples of the workloads of gpumetrics_kernels.cuh at a fixed interval, with CUPTI
//      activity records of the same kernels and copies and clock pairs, so that the clock of
//      PM sample timestamps can be related to CUPTI's activity timestamps;
//   3. whether CUPTI activity still works after cuptiPmSamplingDisable, what decoding costs.
// Sampling runs on its own thread, as the library would run it. Output: a summary on stdout
// and raw files in $PM_OUT (default .): pm_metrics.txt, pm_samples.tsv, pm_activity.tsv,
// pm_clock.tsv, pm_marks.tsv.
// Environment: PM_PROBE_METRICS=a,b,c replaces the candidate list; PM_PROBE_INTERVAL_NS
// (default 100000, 10 kHz); PM_PROBE_HWBUF_MB (default 64); PM_PROBE_DECODE_MS (default 20).
#include <cupti.h>
#include <cupti_pmsampling.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_target.h>
#include <cuda.h>
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "../gpumetrics_kernels.cuh"

#define CUPTI_OK(call) cupti_ok((call), #call, __LINE__)

static int cupti_ok(CUptiResult r, const char *what, int line)
{
	if (r == CUPTI_SUCCESS)
		return 1;
	const char *s = "?";
	cuptiGetResultString(r, &s);
	printf("CUPTI_ERROR line %d: %s -> %d %s\n", line, what, (int)r, s);
	fflush(stdout);
	return 0;
}

static const char *out_dir = ".";

static FILE *out_open(const char *name)
{
	char p[4096];
	snprintf(p, sizeof p, "%s/%s", out_dir, name);
	FILE *f = fopen(p, "w");
	if (!f) {
		perror(p);
		exit(3);
	}
	return f;
}

static unsigned long long clk(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

static unsigned long long cupti_now(void)
{
	uint64_t t = 0;
	cuptiGetTimestamp(&t);
	return t;
}

static uint64_t CUPTIAPI boottime_ns(void)
{
	return clk(CLOCK_BOOTTIME);
}

static FILE *clock_f, *marks_f;

static void clock_pair(const char *label)
{
	unsigned long long m0 = clk(CLOCK_MONOTONIC);
	unsigned long long c = cupti_now();
	unsigned long long m1 = clk(CLOCK_MONOTONIC);
	unsigned long long raw = clk(CLOCK_MONOTONIC_RAW);
	unsigned long long rt = clk(CLOCK_REALTIME);
	unsigned long long bt = clk(CLOCK_BOOTTIME);
	fprintf(clock_f, "%s\t%llu\t%llu\t%llu\t%llu\t%llu\t%llu\n", label, c, m0, m1, raw, rt, bt);
}

static void mark(const char *phase, int end)
{
	fprintf(marks_f, "%s\t%s\t%llu\n", phase, end ? "end" : "begin", cupti_now());
}

// ---- CUPTI activity: kernels and copies of the workload ----

struct act {
	int kind; // 0 kernel, 1 memcpy
	char name[64];
	unsigned long long start, end, bytes;
	unsigned device;
};
static struct act acts[4096];
static int nacts;
static pthread_mutex_t act_mu = PTHREAD_MUTEX_INITIALIZER;

static void CUPTIAPI buf_req(uint8_t **buf, size_t *size, size_t *maxrec)
{
	*size = 8u << 20;
	*buf = (uint8_t *)aligned_alloc(8, *size);
	*maxrec = 0;
}

static void CUPTIAPI buf_done(CUcontext ctx, uint32_t stream, uint8_t *buf, size_t size,
                              size_t valid)
{
	CUpti_Activity *r = NULL;
	while (cuptiActivityGetNextRecord(buf, valid, &r) == CUPTI_SUCCESS) {
		pthread_mutex_lock(&act_mu);
		if (nacts < (int)(sizeof acts / sizeof acts[0])) {
			struct act *a = &acts[nacts];
			if (r->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
				const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)r;
				a->kind = 0;
				snprintf(a->name, sizeof a->name, "%s", k->name ? k->name : "?");
				a->start = k->start;
				a->end = k->end;
				a->bytes = 0;
				a->device = k->deviceId;
				nacts++;
			} else if (r->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
				const CUpti_ActivityMemcpy6 *m = (const CUpti_ActivityMemcpy6 *)r;
				a->kind = 1;
				snprintf(a->name, sizeof a->name, "memcpy_kind%d",
				         (int)m->copyKind);
				a->start = m->start;
				a->end = m->end;
				a->bytes = m->bytes;
				a->device = m->deviceId;
				nacts++;
			}
		}
		pthread_mutex_unlock(&act_mu);
	}
	free(buf);
}

// ---- metric candidates ----

static const char *default_candidates[] = {
    // SM activity, issue, occupancy
    "sm__cycles_active.avg.pct_of_peak_sustained_elapsed",
    "sm__inst_executed_realtime.avg.pct_of_peak_sustained_elapsed",
    "sm__warps_active.avg.pct_of_peak_sustained_elapsed",
    // tensor cores
    "sm__pipe_tensor_op_hmma_cycles_active_realtime.avg.pct_of_peak_sustained_elapsed",
    "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed",
    "sm__pipe_tensor_cycles_active_realtime.avg.pct_of_peak_sustained_elapsed",
    "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_elapsed",
    "sm__pipe_shared_cycles_active_realtime.avg.pct_of_peak_sustained_elapsed",
    // DRAM
    "dramc__read_throughput.avg.pct_of_peak_sustained_elapsed",
    "dramc__write_throughput.avg.pct_of_peak_sustained_elapsed",
    "dram__read_throughput.avg.pct_of_peak_sustained_elapsed",
    "dram__write_throughput.avg.pct_of_peak_sustained_elapsed",
    "dram__bytes_read.sum",
    "dram__bytes_write.sum",
    "dramc__sectors_op_read.sum",
    "dramc__sectors_op_write.sum",
    "dram__bytes_read.sum.per_second",
    "dram__bytes_write.sum.per_second",
    // PCIe and NVLink
    "pcie__read_bytes.sum",
    "pcie__write_bytes.sum",
    "pcie__rx_bytes.sum",
    "pcie__tx_bytes.sum",
    "pcie__read_bytes.sum.per_second",
    "pcie__write_bytes.sum.per_second",
    "nvlrx__bytes.sum",
    "nvltx__bytes.sum",
    "nvlrx__bytes.sum.per_second",
    "nvltx__bytes.sum.per_second",
    // raw counts, for ratios computed on the host, and clocks
    "sm__cycles_active.avg",
    "sm__cycles_elapsed.avg",
    "gpc__cycles_elapsed.max",
    "gpc__cycles_elapsed.avg.per_second",
    "sys__cycles_elapsed.avg.per_second",
    "gr__cycles_active.avg.pct_of_peak_sustained_elapsed",
    "sm__warps_active.avg",
    "sm__inst_executed_realtime.sum",
};

static const char *interesting[] = {"tensor",        "hmma", "gmma",          "dram",
                                    "pcie",          "nvl",  "warps_active",  "cycles_active",
                                    "inst_executed", "gr__", "cycles_elapsed"};

static const char *chip;
static uint8_t *avail;
static size_t avail_size;

static CUpti_Profiler_Host_Object *host_new(void)
{
	CUpti_Profiler_Host_Initialize_Params p;
	memset(&p, 0, sizeof p);
	p.structSize = CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE;
	p.profilerType = CUPTI_PROFILER_TYPE_PM_SAMPLING;
	p.pChipName = chip;
	p.pCounterAvailabilityImage = avail;
	if (!CUPTI_OK(cuptiProfilerHostInitialize(&p)))
		return NULL;
	return p.pHostObject;
}

static void host_free(CUpti_Profiler_Host_Object *h)
{
	CUpti_Profiler_Host_Deinitialize_Params p;
	memset(&p, 0, sizeof p);
	p.structSize = CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE;
	p.pHostObject = h;
	cuptiProfilerHostDeinitialize(&p);
}

// Adds the metrics to a fresh host object; returns passes (0 on failure) and the config image.
static size_t try_config(const char **names, size_t n, CUptiResult *res, uint8_t **img,
                         size_t *img_size, CUpti_Profiler_Host_Object **keep)
{
	CUpti_Profiler_Host_Object *h = host_new();
	if (!h)
		return 0;
	CUpti_Profiler_Host_ConfigAddMetrics_Params a;
	memset(&a, 0, sizeof a);
	a.structSize = CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE;
	a.pHostObject = h;
	a.ppMetricNames = names;
	a.numMetrics = n;
	*res = cuptiProfilerHostConfigAddMetrics(&a);
	size_t passes = 0;
	if (*res == CUPTI_SUCCESS) {
		CUpti_Profiler_Host_GetConfigImageSize_Params s;
		memset(&s, 0, sizeof s);
		s.structSize = CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE;
		s.pHostObject = h;
		if (CUPTI_OK(cuptiProfilerHostGetConfigImageSize(&s))) {
			uint8_t *buf = (uint8_t *)malloc(s.configImageSize);
			CUpti_Profiler_Host_GetConfigImage_Params g;
			memset(&g, 0, sizeof g);
			g.structSize = CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE;
			g.pHostObject = h;
			g.configImageSize = s.configImageSize;
			g.pConfigImage = buf;
			if (CUPTI_OK(cuptiProfilerHostGetConfigImage(&g))) {
				CUpti_Profiler_Host_GetNumOfPasses_Params np;
				memset(&np, 0, sizeof np);
				np.structSize =
				    CUpti_Profiler_Host_GetNumOfPasses_Params_STRUCT_SIZE;
				np.configImageSize = s.configImageSize;
				np.pConfigImage = buf;
				if (CUPTI_OK(cuptiProfilerHostGetNumOfPasses(&np)))
					passes = np.numOfPasses;
			}
			if (img) {
				*img = buf;
				*img_size = s.configImageSize;
			} else {
				free(buf);
			}
		}
	}
	if (keep && passes == 1)
		*keep = h;
	else
		host_free(h);
	return passes;
}

static void list_metrics(CUpti_Profiler_Host_Object *h)
{
	FILE *f = out_open("pm_metrics.txt");
	static const char *tn[] = {"counter", "ratio", "throughput"};
	size_t total = 0;
	for (int t = 0; t < 3; t++) {
		CUpti_Profiler_Host_GetBaseMetrics_Params b;
		memset(&b, 0, sizeof b);
		b.structSize = CUpti_Profiler_Host_GetBaseMetrics_Params_STRUCT_SIZE;
		b.pHostObject = h;
		b.metricType = (CUpti_MetricType)t;
		if (!CUPTI_OK(cuptiProfilerHostGetBaseMetrics(&b)))
			continue;
		total += b.numMetrics;
		printf("base metrics of type %s: %zu\n", tn[t], b.numMetrics);
		for (size_t i = 0; i < b.numMetrics; i++) {
			const char *name = b.ppMetricNames[i];
			CUpti_Profiler_Host_GetMetricProperties_Params mp;
			memset(&mp, 0, sizeof mp);
			mp.structSize = CUpti_Profiler_Host_GetMetricProperties_Params_STRUCT_SIZE;
			mp.pHostObject = h;
			mp.pMetricName = name;
			int okp = cuptiProfilerHostGetMetricProperties(&mp) == CUPTI_SUCCESS;
			fprintf(f, "%s\t%s\t%s\t%s\t%s\n", tn[t], name,
			        okp && mp.pHwUnit ? mp.pHwUnit : "",
			        okp && mp.pDimUnit ? mp.pDimUnit : "",
			        okp && mp.pDescription ? mp.pDescription : "");
			int hit = 0;
			for (size_t k = 0; k < sizeof interesting / sizeof interesting[0]; k++)
				hit |= strstr(name, interesting[k]) != NULL;
			if (!hit)
				continue;
			printf("  [%s] %s  (%s; %s)\n", tn[t], name,
			       okp && mp.pDimUnit ? mp.pDimUnit : "",
			       okp && mp.pDescription ? mp.pDescription : "");
			CUpti_Profiler_Host_GetSubMetrics_Params sm;
			memset(&sm, 0, sizeof sm);
			sm.structSize = CUpti_Profiler_Host_GetSubMetrics_Params_STRUCT_SIZE;
			sm.pHostObject = h;
			sm.metricType = (CUpti_MetricType)t;
			sm.pMetricName = name;
			if (cuptiProfilerHostGetSubMetrics(&sm) == CUPTI_SUCCESS) {
				fprintf(f, "  submetrics of %s:", name);
				for (size_t k = 0; k < sm.numOfSubmetrics; k++)
					fprintf(f, " %s", sm.ppSubMetrics[k]);
				fprintf(f, "\n");
			}
		}
	}
	printf("base metrics total: %zu (all in pm_metrics.txt)\n", total);
	fclose(f);
}

// ---- the sampler thread ----

static volatile int stop_flag;
static volatile int sampler_state; // 0 starting, 1 sampling, 2 failed, 3 done
static const char *metrics[64];
static size_t nmetrics;
static unsigned long long interval_ns = 100000;
static size_t hwbuf_mb = 64;
static int decode_ms = 20;

struct sample {
	unsigned long long start, end, decoded_at;
	double v[64];
};
static struct sample *samples;
static size_t nsamples, max_keep = 400000;
static unsigned long long t_before_start, t_after_start, t_before_stop, t_after_stop;
static unsigned long long decode_calls, decode_ns, eval_ns, reinit_ns, overflow_seen;
static int enable_on_main;
static volatile int enable_failed;
static CUpti_PmSampling_Object *main_obj;

static void *sampler(void *arg)
{
	int dev = 0;
	CUpti_Profiler_Initialize_Params ip;
	memset(&ip, 0, sizeof ip);
	ip.structSize = CUpti_Profiler_Initialize_Params_STRUCT_SIZE;
	if (!CUPTI_OK(cuptiProfilerInitialize(&ip))) {
		sampler_state = 2;
		return NULL;
	}
	CUpti_Profiler_Host_Object *host = NULL;
	uint8_t *cfg = NULL;
	size_t cfg_size = 0;
	CUptiResult r;
	size_t passes = try_config(metrics, nmetrics, &r, &cfg, &cfg_size, &host);
	if (passes != 1) {
		printf("final config: passes=%zu result=%d: cannot sample\n", passes, (int)r);
		sampler_state = 2;
		return NULL;
	}
	CUpti_PmSampling_Object *obj = main_obj;
	if (!obj) {
		CUpti_PmSampling_Enable_Params en;
		memset(&en, 0, sizeof en);
		en.structSize = CUpti_PmSampling_Enable_Params_STRUCT_SIZE;
		en.deviceIndex = (size_t)dev;
		if (!CUPTI_OK(cuptiPmSamplingEnable(&en))) {
			printf("enable on the sampler thread (no context current) failed\n");
			enable_failed = 1;
			sampler_state = 2;
			return NULL;
		}
		obj = en.pPmSamplingObject;
		printf("cuptiPmSamplingEnable on the sampler thread (no context current): OK\n");
	}
	CUpti_PmSampling_SetConfig_Params sc;
	memset(&sc, 0, sizeof sc);
	sc.structSize = CUpti_PmSampling_SetConfig_Params_STRUCT_SIZE;
	sc.pPmSamplingObject = obj;
	sc.configSize = cfg_size;
	sc.pConfig = cfg;
	sc.hardwareBufferSize = hwbuf_mb << 20;
	sc.samplingInterval = interval_ns;
	sc.triggerMode = CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_TIME_INTERVAL;
	sc.hwBufferAppendMode = CUPTI_PM_SAMPLING_HARDWARE_BUFFER_APPEND_MODE_KEEP_OLDEST;
	if (!CUPTI_OK(cuptiPmSamplingSetConfig(&sc))) {
		sampler_state = 2;
		return NULL;
	}
	uint32_t max_samples =
	    getenv("PM_PROBE_MAXS") ? (uint32_t)atoi(getenv("PM_PROBE_MAXS")) : 4000;
	CUpti_PmSampling_GetCounterDataSize_Params ds;
	memset(&ds, 0, sizeof ds);
	ds.structSize = CUpti_PmSampling_GetCounterDataSize_Params_STRUCT_SIZE;
	ds.pPmSamplingObject = obj;
	ds.pMetricNames = metrics;
	ds.numMetrics = nmetrics;
	ds.maxSamples = max_samples;
	if (!CUPTI_OK(cuptiPmSamplingGetCounterDataSize(&ds))) {
		sampler_state = 2;
		return NULL;
	}
	size_t img_size = ds.counterDataSize;
	uint8_t *img = (uint8_t *)malloc(img_size), *blank = (uint8_t *)malloc(img_size);
	CUpti_PmSampling_CounterDataImage_Initialize_Params ci;
	memset(&ci, 0, sizeof ci);
	ci.structSize = CUpti_PmSampling_CounterDataImage_Initialize_Params_STRUCT_SIZE;
	ci.pPmSamplingObject = obj;
	ci.counterDataSize = img_size;
	ci.pCounterData = img;
	if (!CUPTI_OK(cuptiPmSamplingCounterDataImageInitialize(&ci))) {
		sampler_state = 2;
		return NULL;
	}
	memcpy(blank, img, img_size);
	printf("counter data image: %zu bytes for %u samples of %zu metrics (%.1f bytes/sample)\n",
	       img_size, max_samples, nmetrics, (double)img_size / max_samples);

	CUpti_PmSampling_Start_Params st;
	memset(&st, 0, sizeof st);
	st.structSize = CUpti_PmSampling_Start_Params_STRUCT_SIZE;
	st.pPmSamplingObject = obj;
	t_before_start = cupti_now();
	if (!CUPTI_OK(cuptiPmSamplingStart(&st))) {
		sampler_state = 2;
		return NULL;
	}
	t_after_start = cupti_now();
	clock_pair("sampling_started");
	sampler_state = 1;

	int stopping = 0, stopped = 0;
	for (;;) {
		if (stop_flag && !stopping) {
			stopping = 1;
			CUpti_PmSampling_Stop_Params sp;
			memset(&sp, 0, sizeof sp);
			sp.structSize = CUpti_PmSampling_Stop_Params_STRUCT_SIZE;
			sp.pPmSamplingObject = obj;
			t_before_stop = cupti_now();
			CUPTI_OK(cuptiPmSamplingStop(&sp));
			t_after_stop = cupti_now();
		}
		int end_of_records = 0;
		for (int round = 0; round < 1000; round++) {
			CUpti_PmSampling_DecodeData_Params dd;
			memset(&dd, 0, sizeof dd);
			dd.structSize = CUpti_PmSampling_DecodeData_Params_STRUCT_SIZE;
			dd.pPmSamplingObject = obj;
			dd.pCounterDataImage = img;
			dd.counterDataImageSize = img_size;
			unsigned long long t0 = clk(CLOCK_MONOTONIC);
			CUptiResult dr = cuptiPmSamplingDecodeData(&dd);
			unsigned long long t1 = clk(CLOCK_MONOTONIC);
			unsigned long long now = cupti_now();
			decode_calls++;
			decode_ns += t1 - t0;
			if (dr != CUPTI_SUCCESS) {
				CUPTI_OK(dr);
				end_of_records = 1;
				break;
			}
			if (dd.overflow && !overflow_seen++)
				printf("hardware buffer overflow reported at decode %llu\n",
				       decode_calls);
			CUpti_PmSampling_GetCounterDataInfo_Params gi;
			memset(&gi, 0, sizeof gi);
			gi.structSize = CUpti_PmSampling_GetCounterDataInfo_Params_STRUCT_SIZE;
			gi.pCounterDataImage = img;
			gi.counterDataImageSize = img_size;
			if (!CUPTI_OK(cuptiPmSamplingGetCounterDataInfo(&gi)))
				break;
			unsigned long long e0 = clk(CLOCK_MONOTONIC);
			for (size_t i = 0; i < gi.numCompletedSamples; i++) {
				CUpti_PmSampling_CounterData_GetSampleInfo_Params si;
				memset(&si, 0, sizeof si);
				si.structSize =
				    CUpti_PmSampling_CounterData_GetSampleInfo_Params_STRUCT_SIZE;
				si.pPmSamplingObject = obj;
				si.pCounterDataImage = img;
				si.counterDataImageSize = img_size;
				si.sampleIndex = i;
				if (!CUPTI_OK(cuptiPmSamplingCounterDataGetSampleInfo(&si)))
					break;
				double v[64];
				CUpti_Profiler_Host_EvaluateToGpuValues_Params ev;
				memset(&ev, 0, sizeof ev);
				ev.structSize =
				    CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE;
				ev.pHostObject = host;
				ev.pCounterDataImage = img;
				ev.counterDataImageSize = img_size;
				ev.rangeIndex = i;
				ev.ppMetricNames = metrics;
				ev.numMetrics = nmetrics;
				ev.pMetricValues = v;
				if (!CUPTI_OK(cuptiProfilerHostEvaluateToGpuValues(&ev)))
					break;
				if (nsamples < max_keep) {
					struct sample *s = &samples[nsamples++];
					s->start = si.startTimestamp;
					s->end = si.endTimestamp;
					s->decoded_at = now;
					memcpy(s->v, v, nmetrics * sizeof(double));
				}
			}
			unsigned long long e1 = clk(CLOCK_MONOTONIC);
			eval_ns += e1 - e0;
			if (round == 0 && decode_calls < 4)
				printf("decode %llu: stop reason %d, total %zu populated %zu "
				       "completed %zu, overflow %d\n",
				       decode_calls, (int)dd.decodeStopReason, gi.numTotalSamples,
				       gi.numPopulatedSamples, gi.numCompletedSamples,
				       (int)dd.overflow);
			memcpy(img, blank, img_size);
			reinit_ns += clk(CLOCK_MONOTONIC) - e1;
			if (dd.decodeStopReason !=
			    CUPTI_PM_SAMPLING_DECODE_STOP_REASON_COUNTER_DATA_FULL) {
				end_of_records =
				    dd.decodeStopReason ==
				    CUPTI_PM_SAMPLING_DECODE_STOP_REASON_END_OF_RECORDS;
				break;
			}
		}
		if (stopping) {
			if (stopped++ >= 1 || end_of_records)
				break;
		}
		usleep((useconds_t)decode_ms * 1000);
	}
	CUpti_PmSampling_Disable_Params dp;
	memset(&dp, 0, sizeof dp);
	dp.structSize = CUpti_PmSampling_Disable_Params_STRUCT_SIZE;
	dp.pPmSamplingObject = obj;
	CUPTI_OK(cuptiPmSamplingDisable(&dp));
	host_free(host);
	free(img);
	free(blank);
	free(cfg);
	sampler_state = 3;
	return NULL;
}

// A subscriber like libcuptrace's, so that sampling is tried beside one.
static volatile int contexts_created;
static void CUPTIAPI on_cb(void *ud, CUpti_CallbackDomain d, CUpti_CallbackId id, const void *data)
{
	if (d == CUPTI_CB_DOMAIN_RESOURCE && id == CUPTI_CBID_RESOURCE_CONTEXT_CREATED)
		contexts_created++;
}

static __global__ void tiny(int *p)
{
	*p += 1;
}

int main(void)
{
	const char *o = getenv("PM_OUT");
	if (o && *o)
		out_dir = o;
	if (getenv("PM_PROBE_INTERVAL_NS"))
		interval_ns = strtoull(getenv("PM_PROBE_INTERVAL_NS"), NULL, 10);
	if (getenv("PM_PROBE_HWBUF_MB"))
		hwbuf_mb = strtoull(getenv("PM_PROBE_HWBUF_MB"), NULL, 10);
	if (getenv("PM_PROBE_DECODE_MS"))
		decode_ms = atoi(getenv("PM_PROBE_DECODE_MS"));
	enable_on_main = getenv("PM_PROBE_ENABLE_ON_MAIN") != NULL;
	clock_f = out_open("pm_clock.tsv");
	fprintf(clock_f, "label\tcupti\tmono_before\tmono_after\tmono_raw\trealtime\tboottime\n");
	marks_f = out_open("pm_marks.tsv");
	fprintf(marks_f, "phase\tedge\tcupti_ts\n");

	CUpti_SubscriberHandle sub;
	if (CUPTI_OK(cuptiSubscribe(&sub, on_cb, NULL)))
		CUPTI_OK(cuptiEnableDomain(1, sub, CUPTI_CB_DOMAIN_RESOURCE));
	// PM_PROBE_TSCB=1: CUPTI's clock from a BOOTTIME timestamp callback, as libcuptrace
	// sets it.
	if (getenv("PM_PROBE_TSCB"))
		CUPTI_OK(cuptiActivityRegisterTimestampCallback(boottime_ns));
	CUPTI_OK(cuptiActivityRegisterCallbacks(buf_req, buf_done));
	CUPTI_OK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
	CUPTI_OK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY));
	// PM_PROBE_KINDS=a,b,c: more activity kinds (CUpti_ActivityKind numbers), as a tracer
	// enables them beside PM sampling.
	if (getenv("PM_PROBE_KINDS")) {
		char *kl = strdup(getenv("PM_PROBE_KINDS"));
		for (char *t = strtok(kl, ","); t; t = strtok(NULL, ","))
			if (cuptiActivityEnable((CUpti_ActivityKind)atoi(t)) != CUPTI_SUCCESS)
				printf("activity kind %s: not enabled\n", t);
		free(kl);
	}
	clock_pair("start");
	GM_CHECK(cudaSetDevice(0));
	GM_CHECK(cudaFree(0));
	cudaDeviceProp prop;
	GM_CHECK(cudaGetDeviceProperties(&prop, 0));
	int drv = 0;
	cudaDriverGetVersion(&drv);
	uint32_t cv = 0;
	cuptiGetVersion(&cv);
	printf("device 0: %s, %d SMs, cc %d.%d, driver API %d, CUPTI API %u, contexts seen by "
	       "the subscriber: %d\n",
	       prop.name, prop.multiProcessorCount, prop.major, prop.minor, drv, cv,
	       contexts_created);

	CUpti_Profiler_Initialize_Params ip;
	memset(&ip, 0, sizeof ip);
	ip.structSize = CUpti_Profiler_Initialize_Params_STRUCT_SIZE;
	CUPTI_OK(cuptiProfilerInitialize(&ip));
	CUdevice cud;
	cuDeviceGet(&cud, 0);
	CUpti_Profiler_DeviceSupported_Params dsup;
	memset(&dsup, 0, sizeof dsup);
	dsup.structSize = CUpti_Profiler_DeviceSupported_Params_STRUCT_SIZE;
	dsup.cuDevice = cud;
	dsup.api = CUPTI_PROFILER_PM_SAMPLING;
	if (CUPTI_OK(cuptiProfilerDeviceSupported(&dsup)))
		printf("device supported: overall %d arch %d sli %d vgpu %d cc %d cmp %d wsl %d "
		       "(3 = supported)\n",
		       dsup.isSupported, dsup.architecture, dsup.sli, dsup.vGpu,
		       dsup.confidentialCompute, dsup.cmp, dsup.wsl);
	CUpti_Device_GetChipName_Params cn;
	memset(&cn, 0, sizeof cn);
	cn.structSize = CUpti_Device_GetChipName_Params_STRUCT_SIZE;
	cn.deviceIndex = 0;
	if (!CUPTI_OK(cuptiDeviceGetChipName(&cn)))
		return 1;
	chip = cn.pChipName;
	printf("chip: %s\n", chip);
	CUpti_PmSampling_GetCounterAvailability_Params ca;
	memset(&ca, 0, sizeof ca);
	ca.structSize = CUpti_PmSampling_GetCounterAvailability_Params_STRUCT_SIZE;
	ca.deviceIndex = 0;
	if (!CUPTI_OK(cuptiPmSamplingGetCounterAvailability(&ca)))
		return 1;
	avail_size = ca.counterAvailabilityImageSize;
	avail = (uint8_t *)malloc(avail_size);
	ca.pCounterAvailabilityImage = avail;
	if (!CUPTI_OK(cuptiPmSamplingGetCounterAvailability(&ca)))
		return 1;
	printf("counter availability image: %zu bytes\n", avail_size);

	unsigned long long h0 = clk(CLOCK_MONOTONIC);
	CUpti_Profiler_Host_Object *h = host_new();
	printf("host object init: %.1f ms\n", (clk(CLOCK_MONOTONIC) - h0) / 1e6);
	if (!h)
		return 1;
	list_metrics(h);
	host_free(h);

	// Candidates one by one, then greedily together in one pass.
	static const char *cand[256];
	size_t ncand = 0;
	char *envlist = getenv("PM_PROBE_METRICS") ? strdup(getenv("PM_PROBE_METRICS")) : NULL;
	if (envlist) {
		for (char *tok = strtok(envlist, ","); tok && ncand < 256; tok = strtok(NULL, ","))
			cand[ncand++] = tok;
	} else {
		for (size_t i = 0; i < sizeof default_candidates / sizeof default_candidates[0];
		     i++)
			cand[ncand++] = default_candidates[i];
	}
	printf("\ncandidate metrics (alone: result, passes):\n");
	int ok_alone[256];
	for (size_t i = 0; i < ncand; i++) {
		CUptiResult r;
		size_t p = try_config(&cand[i], 1, &r, NULL, NULL, NULL);
		const char *s = "?";
		cuptiGetResultString(r, &s);
		ok_alone[i] = r == CUPTI_SUCCESS && p == 1;
		printf("  %-4s %-80s %s passes=%zu\n", ok_alone[i] ? "OK" : "NO", cand[i], s, p);
	}
	for (size_t i = 0; i < ncand && nmetrics < 64; i++) {
		if (!ok_alone[i])
			continue;
		metrics[nmetrics] = cand[i];
		CUptiResult r;
		if (try_config(metrics, nmetrics + 1, &r, NULL, NULL, NULL) == 1)
			nmetrics++;
		else
			printf("  dropped from the set (does not fit one pass with those before): "
			       "%s\n",
			       cand[i]);
	}
	printf("\nSAMPLED SET (%zu metrics, one pass):\n", nmetrics);
	for (size_t i = 0; i < nmetrics; i++)
		printf("  m%zu = %s\n", i, metrics[i]);
	if (!nmetrics)
		return 1;

	if (enable_on_main) {
		CUpti_PmSampling_Enable_Params en;
		memset(&en, 0, sizeof en);
		en.structSize = CUpti_PmSampling_Enable_Params_STRUCT_SIZE;
		en.deviceIndex = 0;
		if (CUPTI_OK(cuptiPmSamplingEnable(&en)))
			main_obj = en.pPmSamplingObject;
	}
	samples = (struct sample *)calloc(max_keep, sizeof *samples);
	pthread_t th;
	pthread_create(&th, NULL, sampler, NULL);
	while (sampler_state == 0)
		usleep(1000);
	if (sampler_state == 2 && enable_failed && !main_obj) {
		pthread_join(th, NULL);
		printf(
		    "retrying with cuptiPmSamplingEnable on the main thread (context current)\n");
		CUpti_PmSampling_Enable_Params en;
		memset(&en, 0, sizeof en);
		en.structSize = CUpti_PmSampling_Enable_Params_STRUCT_SIZE;
		en.deviceIndex = 0;
		if (CUPTI_OK(cuptiPmSamplingEnable(&en)))
			main_obj = en.pPmSamplingObject;
		sampler_state = 0;
		pthread_create(&th, NULL, sampler, NULL);
		while (sampler_state == 0)
			usleep(1000);
	}
	if (sampler_state != 1) {
		printf("sampling did not start\n");
		return 1;
	}
	printf("sampling at %llu ns interval, hw buffer %zu MB, decode every %d ms\n", interval_ns,
	       hwbuf_mb, decode_ms);

	clock_pair("before_work");
	struct gm_work w = gm_work_default();
	unsigned long long *spin_dev;
	GM_CHECK(cudaMalloc(&spin_dev, 2 * w.spin_reps * sizeof(unsigned long long)));
	gm_run(&w, spin_dev, mark);
	unsigned long long spin_host[32];
	GM_CHECK(cudaMemcpy(spin_host, spin_dev, 2 * w.spin_reps * sizeof(unsigned long long),
	                    cudaMemcpyDeviceToHost));
	clock_pair("after_work");
	gm_sleep_ms(30);
	stop_flag = 1;
	pthread_join(th, NULL);
	clock_pair("sampler_done");

	// Does CUPTI activity still work after cuptiPmSamplingDisable?
	int *dp;
	GM_CHECK(cudaMalloc(&dp, sizeof(int)));
	tiny<<<1, 1>>>(dp);
	GM_CHECK(cudaDeviceSynchronize());
	CUPTI_OK(cuptiActivityFlushAll(1));
	int tiny_seen = 0;
	for (int i = 0; i < nacts; i++)
		tiny_seen += strstr(acts[i].name, "tiny") != NULL;
	printf("\nactivity after cuptiPmSamplingDisable: kernel 'tiny' records seen: %d (1 = still "
	       "works)\n",
	       tiny_seen);

	printf("\nsampling: %zu samples kept; start() took %llu ns (cupti %llu..%llu), stop() at "
	       "cupti %llu..%llu\n",
	       nsamples, t_after_start - t_before_start, t_before_start, t_after_start,
	       t_before_stop, t_after_stop);
	printf("decode calls %llu, decode %.3f ms total; evaluate %.3f ms total (%.0f ns/sample); "
	       "image reset %.3f ms; overflows %llu\n",
	       decode_calls, decode_ns / 1e6, eval_ns / 1e6,
	       nsamples ? (double)eval_ns / nsamples : 0.0, reinit_ns / 1e6, overflow_seen);
	if (nsamples) {
		printf("first sample: start %llu end %llu (len %llu); last: start %llu end %llu\n",
		       samples[0].start, samples[0].end, samples[0].end - samples[0].start,
		       samples[nsamples - 1].start, samples[nsamples - 1].end);
		printf("first sample start - cupti ts before Start(): %lld ns\n",
		       (long long)(samples[0].start - t_before_start));
		unsigned long long gaps = 0, maxgap = 0, minlen = ~0ull, maxlen = 0;
		for (size_t i = 0; i < nsamples; i++) {
			unsigned long long len = samples[i].end - samples[i].start;
			minlen = len < minlen ? len : minlen;
			maxlen = len > maxlen ? len : maxlen;
			if (i && samples[i].start != samples[i - 1].end) {
				gaps++;
				long long g = (long long)(samples[i].start - samples[i - 1].end);
				if (g > (long long)maxgap)
					maxgap = (unsigned long long)g;
			}
		}
		printf("sample lengths %llu..%llu ns; %llu non-contiguous starts, largest gap %llu "
		       "ns\n",
		       minlen, maxlen, gaps, maxgap);
		printf("latest decode lag (decode time - sample end), last sample: %lld ns\n",
		       (long long)(samples[nsamples - 1].decoded_at - samples[nsamples - 1].end));
	}
	for (int i = 0; i < w.spin_reps; i++)
		printf("spin %d globaltimer: %llu .. %llu\n", i, spin_host[2 * i],
		       spin_host[2 * i + 1]);

	FILE *fa = out_open("pm_activity.tsv");
	fprintf(fa, "kind\tname\tstart\tend\tbytes\tdevice\n");
	for (int i = 0; i < nacts; i++)
		fprintf(fa, "%s\t%s\t%llu\t%llu\t%llu\t%u\n", acts[i].kind ? "memcpy" : "kernel",
		        acts[i].name, acts[i].start, acts[i].end, acts[i].bytes, acts[i].device);
	for (int i = 0; i < w.spin_reps; i++)
		fprintf(fa, "globaltimer\tspin%d\t%llu\t%llu\t0\t0\n", i, spin_host[2 * i],
		        spin_host[2 * i + 1]);
	fclose(fa);

	// Per activity: the average of each metric over the samples inside it, assuming sample
	// timestamps are on CUPTI's clock (the question this probe answers).
	printf("\nper activity, mean of each metric over samples whose middle lies inside it "
	       "(same-clock assumption):\n");
	for (int i = 0; i < nacts; i++) {
		struct act *a = &acts[i];
		if (a->end - a->start < 1000000)
			continue; // under 1 ms: too few samples
		double sum[64] = {0};
		size_t n = 0;
		for (size_t s = 0; s < nsamples; s++) {
			unsigned long long mid = samples[s].start / 2 + samples[s].end / 2;
			if (mid < a->start || mid > a->end)
				continue;
			for (size_t m = 0; m < nmetrics; m++)
				sum[m] += samples[s].v[m];
			n++;
		}
		printf("  %-6s %-24.24s %8.3f ms %12llu B, %5zu samples:",
		       a->kind ? "memcpy" : "kernel", a->name, (a->end - a->start) / 1e6, a->bytes,
		       n);
		for (size_t m = 0; m < nmetrics; m++)
			printf(" m%zu=%.4g", m, n ? sum[m] / n : 0.0);
		printf("\n");
	}

	FILE *fs = out_open("pm_samples.tsv");
	fprintf(fs, "# chip %s interval_ns %llu\n", chip, interval_ns);
	fprintf(fs, "start\tend\tdecoded_at");
	for (size_t m = 0; m < nmetrics; m++)
		fprintf(fs, "\t%s", metrics[m]);
	fprintf(fs, "\n");
	for (size_t s = 0; s < nsamples; s++) {
		fprintf(fs, "%llu\t%llu\t%llu", samples[s].start, samples[s].end,
		        samples[s].decoded_at);
		for (size_t m = 0; m < nmetrics; m++)
			fprintf(fs, "\t%.9g", samples[s].v[m]);
		fprintf(fs, "\n");
	}
	fclose(fs);
	fclose(clock_f);
	fclose(marks_f);
	printf("\nfiles written to %s: pm_metrics.txt pm_samples.tsv pm_activity.tsv pm_clock.tsv "
	       "pm_marks.tsv\n",
	       out_dir);
	return 0;
}
