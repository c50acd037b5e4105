/* GPU hardware metrics through CUPTI PM sampling (see gpumetrics.h).
 *
 * Threads: the subscriber callback (application threads) marks a device as wanted, signals,
 * and waits for its start (below). The sampler thread makes the CUPTI profiler calls: per
 * device, the host object and config image, enable, set config, start; then every decode period
 * it decodes each device's hardware buffer, evaluates the samples and queues them. The writer
 * thread drains the queue. The one exception is a context's destruction (End, below).
 * Memory: the queue is bounded (GM_QUEUE_MAX bytes); what does not fit is counted as lost and
 * shows as a gap in the counters.
 *
 * Start: the thread that creates a device's first context waits (bounded) until the sampler
 * has set the device up, so the program's first kernels are sampled (setup took ~0.5 s on an
 * H100).
 *
 * End (H100, driver 580, CUPTI 13.0): cuptiPmSamplingDisable at the end of a traced run died in
 * libnvperf_host ("double free or corruption"), or Stop hung, though tests/gpu/pm_probe.cu
 * with the same calls never did. So sampling is stopped and its last samples decoded in an exit
 * handler registered when sampling starts (it runs before CUDA's own), and a device whose
 * sampling started is never disabled (dev_finish): the process's end releases it. Every wait on
 * the sampler is bounded. A device whose last context is destroyed mid-run is stopped on the
 * destroying thread, under the device's lock, which the sampler holds for every call on that
 * device, and is not sampled again in this process (tests/gpu_metrics_test.sh, H100).
 *
 * Sample clock: the samples follow CUPTI's clock (BOOTTIME under this library's timestamp
 * callback, REALTIME without one, on the H100). Which one is checked per device: the first
 * sample ends just after the Start call, so the clock whose reading around Start is nearest to
 * that end is taken (CUPTRACE_GPU_METRICS_CLOCK forces one). The first sample itself starts
 * wherever the counters were last read (seconds before) and is dropped. */
#define _GNU_SOURCE
#include "inject/gpumetrics.h"

#include <cupti_pmsampling.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_target.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/options.h"
#include "common/util.h"
#include "inject/gpumetrics_state.h"
#include "convert/gpumetrics.h"

static pthread_once_t dev_mu_once = PTHREAD_ONCE_INIT;
static void dev_mu_init(void)
{
	for (int i = 0; i < GM_MAX_DEV; i++)
		pthread_mutex_init(&gm_sampler.dev[i].mu, NULL);
}

/* One clear line per failure, with what it means for the user where CUPTI's text is terse. */
static void say_failed(int dev, const char *step, CUptiResult r)
{
	const char *why = "";
	if (r == CUPTI_ERROR_INSUFFICIENT_PRIVILEGES)
		why = " (profiling needs root, or the driver option "
		      "NVreg_RestrictProfilingToAdminUsers=0)";
	else if (r == CUPTI_ERROR_NOT_SUPPORTED || r == CUPTI_ERROR_LEGACY_PROFILER_NOT_SUPPORTED)
		why = " (this GPU or its mode, e.g. a MIG slice or vGPU, has no PM sampling)";
	else if (r == CUPTI_ERROR_INVALID_OPERATION)
		why = " (another profiler may hold the GPU's counters)";
	else if (r == CUPTI_ERROR_NOT_INITIALIZED || r == CUPTI_ERROR_UNKNOWN)
		why = " (is libnvperf_host.so of the CUDA toolkit on the library path?)";
	cuptrace_err("GPU metrics off for GPU %d: %s failed: %s%s; the trace goes on without them",
	             dev, step, gm_res_str(r), why);
	snprintf(gm_sampler.status, sizeof(gm_sampler.status), "off on GPU %d: %s: %s", dev, step,
	         gm_res_str(r));
}

static int64_t clock_offset(clockid_t clock)
{
	/* Sample clock minus trace clock (BOOTTIME), read back to back. */
	if (clock == CLOCK_BOOTTIME)
		return 0;
	int64_t b0 = cuptrace_now_ns(CLOCK_BOOTTIME);
	int64_t s = cuptrace_now_ns(clock);
	int64_t b1 = cuptrace_now_ns(CLOCK_BOOTTIME);
	return s - (b0 / 2 + b1 / 2);
}

/* ---- per device ---- */

static void dev_release(struct gm_dev *d)
{
	if (d->obj) {
		CUpti_PmSampling_Disable_Params p;
		memset(&p, 0, sizeof(p));
		p.structSize = CUpti_PmSampling_Disable_Params_STRUCT_SIZE;
		p.pPmSamplingObject = d->obj;
		cuptiPmSamplingDisable(&p);
		d->obj = NULL;
	}
	gm_host_free(d->host);
	d->host = NULL;
	free(d->img);
	free(d->blank);
	d->img = d->blank = NULL;
	free(d->list);
	free(d->avail);
	free(d->cfg);
	d->list = NULL;
	d->avail = NULL;
	d->cfg = NULL;
	d->nmetrics = 0;
	d->active = 0;
}

static int dev_start(int i)
{
	struct gm_dev *d = &gm_sampler.dev[i];
	CUptiResult r;
	int64_t t_begin = cuptrace_now_ns(CLOCK_MONOTONIC);
	if (!gm_sampler.profiler_ready) {
		CUpti_Profiler_Initialize_Params ip;
		memset(&ip, 0, sizeof(ip));
		ip.structSize = CUpti_Profiler_Initialize_Params_STRUCT_SIZE;
		if ((r = cuptiProfilerInitialize(&ip)) != CUPTI_SUCCESS) {
			say_failed(i, "cuptiProfilerInitialize", r);
			return -1;
		}
		gm_sampler.profiler_ready = 1;
	}
	cu_get_fn get = (cu_get_fn)gm_cuda_sym("cuDeviceGet");
	cu_name_fn name = (cu_name_fn)gm_cuda_sym("cuDeviceGetName");
	int cud = 0;
	if (get && name && !get(&cud, i))
		name(d->name, (int)sizeof(d->name), cud);
	CUpti_Device_GetChipName_Params cn;
	memset(&cn, 0, sizeof(cn));
	cn.structSize = CUpti_Device_GetChipName_Params_STRUCT_SIZE;
	cn.deviceIndex = (size_t)i;
	if ((r = cuptiDeviceGetChipName(&cn)) != CUPTI_SUCCESS) {
		say_failed(i, "cuptiDeviceGetChipName", r);
		return -1;
	}
	CUpti_PmSampling_GetCounterAvailability_Params ca;
	memset(&ca, 0, sizeof(ca));
	ca.structSize = CUpti_PmSampling_GetCounterAvailability_Params_STRUCT_SIZE;
	ca.deviceIndex = (size_t)i;
	if ((r = cuptiPmSamplingGetCounterAvailability(&ca)) != CUPTI_SUCCESS) {
		say_failed(i, "reading counter availability", r);
		return -1;
	}
	uint8_t *avail =
	    malloc(ca.counterAvailabilityImageSize ? ca.counterAvailabilityImageSize : 1);
	ca.pCounterAvailabilityImage = avail;
	if (!avail || (r = cuptiPmSamplingGetCounterAvailability(&ca)) != CUPTI_SUCCESS) {
		free(avail);
		say_failed(i, "reading counter availability",
		           avail ? r : CUPTI_ERROR_OUT_OF_MEMORY);
		return -1;
	}
	d->avail = avail; /* freed by dev_release, after the host objects that read it */
	CUpti_Profiler_Host_Object *probe = gm_host_new(cn.pChipName, avail, &r);
	if (!probe) {
		say_failed(i, "cuptiProfilerHostInitialize", r);
		return -1;
	}
	gm_host_free(probe);
	int64_t t_choose = cuptrace_now_ns(CLOCK_MONOTONIC);
	d->nmetrics = gm_choose_metrics(i, cn.pChipName, avail, d->metrics);
	cuptrace_debug("GPU %d: metrics chosen in %.1f ms", i,
	               (double)(cuptrace_now_ns(CLOCK_MONOTONIC) - t_choose) / 1e6);
	uint8_t *cfg = NULL;
	size_t cfg_size = 0;
	if (!d->nmetrics) {
		snprintf(gm_sampler.status, sizeof(gm_sampler.status),
		         "off on GPU %d: no metric fits", i);
		return -1; /* gm_choose_metrics said why */
	}
	if (gm_try_metrics(cn.pChipName, avail, d->metrics, d->nmetrics, &d->host, &cfg,
	                   &cfg_size)) {
		cuptrace_err("GPU metrics off for GPU %d (%s): the metrics chosen do not configure "
		             "together; the trace goes on without them",
		             i, cn.pChipName);
		snprintf(gm_sampler.status, sizeof(gm_sampler.status),
		         "off on GPU %d: no metric fits", i);
		return -1;
	}
	CUpti_PmSampling_Enable_Params en;
	memset(&en, 0, sizeof(en));
	en.structSize = CUpti_PmSampling_Enable_Params_STRUCT_SIZE;
	en.deviceIndex = (size_t)i;
	if ((r = cuptiPmSamplingEnable(&en)) != CUPTI_SUCCESS) {
		free(cfg);
		say_failed(i, "cuptiPmSamplingEnable", r);
		return -1;
	}
	d->obj = en.pPmSamplingObject;
	CUpti_PmSampling_SetConfig_Params sc;
	memset(&sc, 0, sizeof(sc));
	sc.structSize = CUpti_PmSampling_SetConfig_Params_STRUCT_SIZE;
	sc.pPmSamplingObject = d->obj;
	sc.configSize = cfg_size;
	sc.pConfig = cfg;
	sc.hardwareBufferSize = GM_HWBUF;
	sc.samplingInterval = gm_sampler.interval_ns;
	sc.triggerMode = CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_TIME_INTERVAL;
	/* Keep the oldest: an overflow then shows as a gap where it happened, with the flag. */
	sc.hwBufferAppendMode = CUPTI_PM_SAMPLING_HARDWARE_BUFFER_APPEND_MODE_KEEP_OLDEST;
	d->cfg = cfg;
	r = cuptiPmSamplingSetConfig(&sc);
	if (r != CUPTI_SUCCESS) {
		say_failed(i, "cuptiPmSamplingSetConfig", r);
		return -1;
	}
	/* Room for two decode periods of samples per decode call; the decode loops when full. */
	uint64_t per =
	    gm_sampler.interval_ns ? 2 * GM_DECODE_MS * 1000000ull / gm_sampler.interval_ns : 1000;
	CUpti_PmSampling_GetCounterDataSize_Params ds;
	memset(&ds, 0, sizeof(ds));
	ds.structSize = CUpti_PmSampling_GetCounterDataSize_Params_STRUCT_SIZE;
	ds.pPmSamplingObject = d->obj;
	ds.pMetricNames = d->metrics;
	ds.numMetrics = d->nmetrics;
	ds.maxSamples = (uint32_t)(per < 256 ? 256 : per > 100000 ? 100000 : per);
	if ((r = cuptiPmSamplingGetCounterDataSize(&ds)) != CUPTI_SUCCESS) {
		say_failed(i, "cuptiPmSamplingGetCounterDataSize", r);
		return -1;
	}
	d->img_size = ds.counterDataSize;
	d->img = malloc(d->img_size);
	d->blank = malloc(d->img_size);
	if (!d->img || !d->blank) {
		say_failed(i, "allocating the counter data image", CUPTI_ERROR_OUT_OF_MEMORY);
		return -1;
	}
	CUpti_PmSampling_CounterDataImage_Initialize_Params ci;
	memset(&ci, 0, sizeof(ci));
	ci.structSize = CUpti_PmSampling_CounterDataImage_Initialize_Params_STRUCT_SIZE;
	ci.pPmSamplingObject = d->obj;
	ci.counterDataSize = d->img_size;
	ci.pCounterData = d->img;
	if ((r = cuptiPmSamplingCounterDataImageInitialize(&ci)) != CUPTI_SUCCESS) {
		say_failed(i, "cuptiPmSamplingCounterDataImageInitialize", r);
		return -1;
	}
	/* A consumed image is reset by copying the fresh one back: cheaper than initializing. */
	memcpy(d->blank, d->img, d->img_size);
	CUpti_PmSampling_Start_Params st;
	memset(&st, 0, sizeof(st));
	st.structSize = CUpti_PmSampling_Start_Params_STRUCT_SIZE;
	st.pPmSamplingObject = d->obj;
	d->start_real = cuptrace_now_ns(CLOCK_REALTIME);
	d->start_boot = cuptrace_now_ns(CLOCK_BOOTTIME);
	if ((r = cuptiPmSamplingStart(&st)) != CUPTI_SUCCESS) {
		say_failed(i, "cuptiPmSamplingStart", r);
		return -1;
	}
	d->active = 1;
	d->first_pending = 1;
	cuptrace_info("GPU metrics: GPU %d (%s): %zu metrics every %llu ns, set up in %.1f ms", i,
	              cn.pChipName, d->nmetrics, (unsigned long long)gm_sampler.interval_ns,
	              (double)(cuptrace_now_ns(CLOCK_MONOTONIC) - t_begin) / 1e6);
	return 0;
}

/* ---- the queue to the writer ---- */

static void enqueue(struct gm_item *it)
{
	pthread_mutex_lock(&gm_sampler.lock);
	if (!it->is_config && gm_sampler.queued + it->bytes > GM_QUEUE_MAX) {
		pthread_mutex_unlock(&gm_sampler.lock);
		atomic_fetch_add(&gm_sampler.lost_samples, it->n);
		free(it->times);
		free(it->values);
		free(it);
		return;
	}
	gm_sampler.queued += it->bytes;
	if (gm_sampler.tail)
		gm_sampler.tail->next = it;
	else
		gm_sampler.head = it;
	gm_sampler.tail = it;
	pthread_mutex_unlock(&gm_sampler.lock);
}

static void item_free(struct gm_item *it)
{
	if (!it)
		return;
	free(it->times);
	free(it->values);
	free(it->device_name);
	if (it->metrics)
		for (size_t i = 0; i < it->nmetrics; i++)
			free(it->metrics[i]);
	free(it->metrics);
	free(it);
}

/* Picks the clock of this device's sample times from the end of its first sample (just after
 * the Start call) and sends the config with the offset to the trace clock. */
static void send_config(int i, uint64_t first_end)
{
	struct gm_dev *d = &gm_sampler.dev[i];
	int64_t e = (int64_t)(first_end & ((1ull << 62) - 1));
	int64_t dr = e - d->start_real, db = e - d->start_boot;
	enum cuptrace_gm_clock pick =
	    cuptrace_gm_pick_clock(first_end, d->start_real, d->start_boot);
	clockid_t ck = gm_sampler.clock >= 0                ? (clockid_t)gm_sampler.clock
	               : pick == CUPTRACE_GM_CLOCK_BOOTTIME ? CLOCK_BOOTTIME
	                                                    : CLOCK_REALTIME;
	d->offset_ns = clock_offset(ck);
	int64_t diff = ck == CLOCK_BOOTTIME ? db : ck == CLOCK_REALTIME ? dr : 0;
	if (gm_sampler.clock < 0 && pick == CUPTRACE_GM_CLOCK_UNKNOWN) {
		/* Neither clock: take the first sample to end at the Start call (good to about one
		 * sampling interval plus the Start call's own time). */
		cuptrace_warn("GPU %d: PM sample times are on no known clock (%lld ns from "
		              "REALTIME): aligned with the start of sampling instead",
		              i, (long long)dr);
		d->offset_ns = e - d->start_boot;
		ck = -1;
	}
	cuptrace_debug("GPU %d: PM sample clock %s, first sample end - Start call: %lld ns", i,
	               ck == CLOCK_BOOTTIME   ? "boottime"
	               : ck == CLOCK_REALTIME ? "realtime"
	                                      : "?",
	               (long long)diff);
	struct gm_item *it = calloc(1, sizeof(*it));
	if (!it)
		return;
	it->is_config = 1;
	it->device = (uint32_t)i;
	it->nmetrics = d->nmetrics;
	it->device_name = strdup(d->name);
	it->metrics = calloc(d->nmetrics, sizeof(char *));
	for (size_t m = 0; it->metrics && m < d->nmetrics; m++)
		it->metrics[m] = strdup(d->metrics[m]);
	it->cfg = (struct cuptrace_gm_config){.device = (uint32_t)i,
	                                      .device_name = it->device_name,
	                                      .interval_ns = gm_sampler.interval_ns,
	                                      .clock_offset_ns = d->offset_ns,
	                                      .nmetrics = d->nmetrics,
	                                      .metrics = (const char *const *)it->metrics};
	for (size_t m = 0; m < d->nmetrics; m++)
		if (!it->metrics || !it->metrics[m]) {
			item_free(it);
			return;
		}
	enqueue(it);
	d->config_sent = 1;
}

/* Decodes what the hardware buffer holds into samples for the writer. */
static void dev_decode(int i)
{
	struct gm_dev *d = &gm_sampler.dev[i];
	for (int round = 0; round < 64; round++) {
		CUpti_PmSampling_DecodeData_Params dd;
		memset(&dd, 0, sizeof(dd));
		dd.structSize = CUpti_PmSampling_DecodeData_Params_STRUCT_SIZE;
		dd.pPmSamplingObject = d->obj;
		dd.pCounterDataImage = d->img;
		dd.counterDataImageSize = d->img_size;
		CUptiResult r = cuptiPmSamplingDecodeData(&dd);
		if (r != CUPTI_SUCCESS) {
			say_failed(i, "decoding samples", r);
			d->failed = 1;
			return;
		}
		if (dd.overflow && !d->lost++)
			cuptrace_warn(
			    "GPU %d: the PM sampling buffer overflowed: samples were lost "
			    "(a gap in the GPU metrics); a lower --gpu-metrics-rate avoids it",
			    i);
		CUpti_PmSampling_GetCounterDataInfo_Params gi;
		memset(&gi, 0, sizeof(gi));
		gi.structSize = CUpti_PmSampling_GetCounterDataInfo_Params_STRUCT_SIZE;
		gi.pCounterDataImage = d->img;
		gi.counterDataImageSize = d->img_size;
		if (cuptiPmSamplingGetCounterDataInfo(&gi) != CUPTI_SUCCESS)
			return;
		size_t n = gi.numCompletedSamples, k = 0;
		struct gm_item *it = n ? calloc(1, sizeof(*it)) : NULL;
		if (it) {
			it->device = (uint32_t)i;
			it->nmetrics = d->nmetrics;
			it->times = malloc(n * 2 * sizeof(uint64_t));
			it->values = malloc(n * d->nmetrics * sizeof(double));
		}
		for (size_t s = 0; it && it->times && it->values && s < n; s++) {
			CUpti_PmSampling_CounterData_GetSampleInfo_Params si;
			memset(&si, 0, sizeof(si));
			si.structSize =
			    CUpti_PmSampling_CounterData_GetSampleInfo_Params_STRUCT_SIZE;
			si.pPmSamplingObject = d->obj;
			si.pCounterDataImage = d->img;
			si.counterDataImageSize = d->img_size;
			si.sampleIndex = s;
			CUpti_Profiler_Host_EvaluateToGpuValues_Params ev;
			memset(&ev, 0, sizeof(ev));
			ev.structSize = CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE;
			ev.pHostObject = d->host;
			ev.pCounterDataImage = d->img;
			ev.counterDataImageSize = d->img_size;
			ev.rangeIndex = s;
			ev.ppMetricNames = d->metrics;
			ev.numMetrics = d->nmetrics;
			ev.pMetricValues = it->values + k * d->nmetrics;
			if (cuptiPmSamplingCounterDataGetSampleInfo(&si) != CUPTI_SUCCESS ||
			    cuptiProfilerHostEvaluateToGpuValues(&ev) != CUPTI_SUCCESS)
				continue;
			it->times[2 * k] = si.startTimestamp;
			it->times[2 * k + 1] = si.endTimestamp;
			if (d->first_pending) {
				/* The first sample: from the counters' last read (before Start) to
				 * the first trigger. Its end tells the clock; its value is dropped.
				 */
				d->first_pending = 0;
				if (!d->config_sent)
					send_config(i, si.endTimestamp);
				continue;
			}
			k++;
		}
		atomic_fetch_add(&gm_sampler.decoded, k);
		if (it && k && it->times && it->values) {
			it->n = k;
			it->bytes = k * (16 + 8 * d->nmetrics);
			enqueue(it);
		} else {
			item_free(it);
		}
		memcpy(d->img, d->blank, d->img_size);
		if (dd.decodeStopReason != CUPTI_PM_SAMPLING_DECODE_STOP_REASON_COUNTER_DATA_FULL)
			return;
	}
}

/* Stops a device's sampling, decodes what is left and lets it go. Caller holds d->mu. */
static void dev_finish(int i)
{
	struct gm_dev *d = &gm_sampler.dev[i];
	if (!d->active)
		return;
	if (!d->failed) {
		CUpti_PmSampling_Stop_Params sp;
		memset(&sp, 0, sizeof(sp));
		sp.structSize = CUpti_PmSampling_Stop_Params_STRUCT_SIZE;
		sp.pPmSamplingObject = d->obj;
		cuptiPmSamplingStop(&sp);
		dev_decode(i);
	}
	/* No cuptiPmSamplingDisable: at the end of every traced run on an H100 (driver 580, CUPTI
	 * 13.0) it died with "double free or corruption" inside libnvperf_host. The PM sampling
	 * object, the host object and the images CUPTI may still read stay until the process ends
	 * (some MiB per GPU, once), and the device is not sampled again in this process. */
	d->active = 0;
	d->ended = 1;
}

static void *sampler_main(void *arg)
{
	(void)arg;
	prctl(PR_SET_NAME, "cuptrace-gpumet", 0, 0, 0);
	/* Lower this thread's priority (Linux: per thread) so that, where CPUs are short, the
	 * program's threads go first: it costs ~60 us of CPU per sample (0.6 of a core at
	 * 10 kHz on an H100). Samples wait in the hardware buffer for a late decode; an
	 * overflow is reported and shows as a gap. */
	if (gm_sampler.nice)
		setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), gm_sampler.nice);
	pthread_mutex_lock(&gm_sampler.lock);
	for (;;) {
		int stop = gm_sampler.stop;
		int want[GM_MAX_DEV];
		for (int i = 0; i < GM_MAX_DEV; i++) {
			want[i] = gm_sampler.dev[i].wanted && !gm_sampler.dev[i].active &&
			          !gm_sampler.dev[i].failed && !gm_sampler.dev[i].ended;
			if (want[i])
				gm_sampler.dev[i].wanted = 0;
		}
		pthread_mutex_unlock(&gm_sampler.lock);
		for (int i = 0; i < GM_MAX_DEV && !stop; i++) {
			if (!want[i])
				continue;
			pthread_mutex_lock(&gm_sampler.dev[i].mu);
			/* Not for a device whose last context went meanwhile. */
			if (!gm_sampler.dev[i].active &&
			    __atomic_load_n(&gm_sampler.dev[i].contexts, __ATOMIC_ACQUIRE) > 0 &&
			    dev_start(i)) {
				gm_sampler.dev[i].failed = 1;
				dev_release(&gm_sampler.dev[i]);
			}
			pthread_mutex_unlock(&gm_sampler.dev[i].mu);
		}
		pthread_mutex_lock(&gm_sampler.lock);
		for (int i = 0; i < GM_MAX_DEV; i++)
			if (want[i] || stop)
				gm_sampler.dev[i].start_pending = 0;
		pthread_cond_broadcast(&gm_sampler.started);
		pthread_mutex_unlock(&gm_sampler.lock);
		for (int i = 0; i < GM_MAX_DEV; i++) {
			pthread_mutex_lock(&gm_sampler.dev[i].mu);
			if (stop)
				dev_finish(i);
			else if (gm_sampler.dev[i].active && !gm_sampler.dev[i].failed)
				dev_decode(i);
			pthread_mutex_unlock(&gm_sampler.dev[i].mu);
		}
		if (stop) {
			struct timespec cpu;
			if (!clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu))
				gm_sampler.sampler_cpu_ns = cpu.tv_sec * 1000000000ll + cpu.tv_nsec;
			return NULL;
		}
		pthread_mutex_lock(&gm_sampler.lock);
		if (!gm_sampler.stop) {
			struct timespec ts;
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_nsec += GM_DECODE_MS * 1000000l;
			ts.tv_sec += ts.tv_nsec / 1000000000l;
			ts.tv_nsec %= 1000000000l;
			pthread_cond_timedwait(&gm_sampler.cond, &gm_sampler.lock, &ts);
		}
	}
}

/* ---- the session's entry points ---- */

static void want_context(CUcontext ctx);
static void gm_atexit(void);

int cuptrace_gm_setup(CUpti_SubscriberHandle sub)
{
	struct cuptrace_setting_value v;
	cuptrace_setting_env(CUPTRACE_SET_GPU_METRICS, &v);
	gm_sampler.on = v.i != CUPTRACE_GPU_METRICS_OFF;
	gm_sampler.status[0] = 0;
	gm_sampler.stop = 0;
	if (!gm_sampler.on)
		return 0;
	free(gm_sampler.list);
	gm_sampler.list = v.i == CUPTRACE_GPU_METRICS_LIST ? strdup(v.s) : NULL;
	cuptrace_setting_env(CUPTRACE_SET_GPU_METRICS_RATE, &v);
	gm_sampler.interval_ns = (uint64_t)(1e9 / v.r);
	cuptrace_setting_env(CUPTRACE_SET_GPU_METRICS_CLOCK, &v);
	gm_sampler.clock = (int)v.i; /* -1: auto */
	pthread_once(&dev_mu_once, dev_mu_init);
	atomic_store(&gm_sampler.lost_samples, 0);
	atomic_store(&gm_sampler.decoded, 0);
	gm_sampler.sampler_cpu_ns = -1;
	cuptrace_setting_env(CUPTRACE_SET_GPU_METRICS_NICE, &v);
	gm_sampler.nice = (int)v.i;
	snprintf(gm_sampler.status, sizeof(gm_sampler.status), "on, no GPU context seen");
	CUptiResult r = cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RESOURCE,
	                                    CUPTI_CBID_RESOURCE_CONTEXT_CREATED);
	if (r == CUPTI_SUCCESS)
		r = cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RESOURCE,
		                        CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING);
	if (r != CUPTI_SUCCESS) {
		cuptrace_err("GPU metrics off: cannot watch context creation: %s", gm_res_str(r));
		snprintf(gm_sampler.status, sizeof(gm_sampler.status), "off: %s", gm_res_str(r));
		gm_sampler.on = 0;
		return -EIO;
	}
	/* Started by the C API after CUDA initialized: the current context was created before
	 * the callback was on. (cudart opens libcuda out of the global scope, so not dlsym's
	 * default scope: cuptrace_loaded_sym.) */
	typedef int (*cu_ctx_fn)(CUcontext *);
	cu_ctx_fn cur = (cu_ctx_fn)cuptrace_loaded_sym("libcuda.so.1", "cuCtxGetCurrent");
	CUcontext ctx = NULL;
	if (cur && !cur(&ctx) && ctx)
		want_context(ctx);
	return 0;
}

/* Marks a context's device for the sampler thread, starting the thread the first time: not at
 * session start, so a process that never creates a context costs no thread and touches no
 * counters. Signals stay with the application's threads (cuptrace_thread_start). */
static void want_context(CUcontext ctx)
{
	uint32_t dev = 0;
	if (!ctx || cuptiGetDeviceId(ctx, &dev) != CUPTI_SUCCESS || dev >= GM_MAX_DEV)
		return;
	pthread_mutex_lock(&gm_sampler.lock);
	gm_sampler.dev[dev].contexts++;
	gm_sampler.dev[dev].wanted = 1;
	int wait = !gm_sampler.dev[dev].active && !gm_sampler.dev[dev].failed &&
	           !gm_sampler.dev[dev].ended && !gm_sampler.stop;
	if (wait)
		gm_sampler.dev[dev].start_pending = 1;
	if (!gm_sampler.have_thread && !gm_sampler.stop) {
		if (!cuptrace_thread_start(&gm_sampler.thread, sampler_main, NULL)) {
			gm_sampler.have_thread = 1;
			gm_sampler.pid = getpid();
			if (!gm_sampler.atexit_set)
				gm_sampler.atexit_set = !atexit(gm_atexit);
			snprintf(gm_sampler.status, sizeof(gm_sampler.status), "sampled");
		}
	}
	pthread_cond_signal(&gm_sampler.cond);
	/* The context's thread waits (at most GM_START_WAIT_S) until sampling runs: the program's
	 * first kernels are then sampled, and the PM sampling setup does not run beside them
	 * (set up concurrently with a program's first CUDA work, it took ~0.5 s on an H100 and
	 * the process later died in cuptiPmSamplingDisable). */
	if (wait && gm_sampler.have_thread) {
		struct timespec dl;
		clock_gettime(CLOCK_REALTIME, &dl);
		dl.tv_sec += GM_START_WAIT_S;
		while (gm_sampler.dev[dev].start_pending &&
		       pthread_cond_timedwait(&gm_sampler.started, &gm_sampler.lock, &dl) !=
		           ETIMEDOUT)
			;
		if (gm_sampler.dev[dev].start_pending)
			cuptrace_warn(
			    "GPU metrics: GPU %u not set up within %d s; the program goes "
			    "on, sampling starts when it can",
			    dev, GM_START_WAIT_S);
	}
	pthread_mutex_unlock(&gm_sampler.lock);
}

/* The last context of a device is going: its sampling ends here, on the application's thread,
 * before the driver tears the context down (see the top of this file). */
static void context_going(CUcontext ctx)
{
	uint32_t dev = 0;
	if (!ctx || cuptiGetDeviceId(ctx, &dev) != CUPTI_SUCCESS || dev >= GM_MAX_DEV)
		return;
	pthread_mutex_lock(&gm_sampler.lock);
	int last = gm_sampler.dev[dev].contexts > 0 && --gm_sampler.dev[dev].contexts == 0;
	if (last)
		gm_sampler.dev[dev].wanted = 0;
	pthread_mutex_unlock(&gm_sampler.lock);
	if (!last || gm_sampler.abandoned)
		return;
	struct timespec dl;
	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += GM_STOP_WAIT_S;
	if (pthread_mutex_timedlock(&gm_sampler.dev[dev].mu, &dl))
		return; /* the sampler is stuck in CUPTI: never hold the application up */
	if (gm_sampler.dev[dev].active) {
		cuptrace_warn("GPU metrics: GPU %u: its last context was destroyed: sampling ends "
		              "there (not restarted in this process)",
		              dev);
		dev_finish((int)dev);
	}
	pthread_mutex_unlock(&gm_sampler.dev[dev].mu);
}

void cuptrace_gm_on_callback(CUpti_CallbackDomain d, CUpti_CallbackId id, const void *data)
{
	if (!gm_sampler.on || d != CUPTI_CB_DOMAIN_RESOURCE)
		return;
	if (id == CUPTI_CBID_RESOURCE_CONTEXT_CREATED)
		want_context(((const CUpti_ResourceData *)data)->context);
	else if (id == CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING)
		context_going(((const CUpti_ResourceData *)data)->context);
}

int cuptrace_gm_drain(const struct cuptrace_consumer *to)
{
	pthread_mutex_lock(&gm_sampler.lock);
	struct gm_item *it = gm_sampler.head;
	gm_sampler.head = gm_sampler.tail = NULL;
	gm_sampler.queued = 0;
	pthread_mutex_unlock(&gm_sampler.lock);
	int err = 0;
	while (it) {
		struct gm_item *next = it->next;
		int e = 0;
		if (it->is_config)
			e = cuptrace_consumer_gpu_metrics(to, &it->cfg);
		else
			e = cuptrace_consumer_gpu_samples(to, it->device, it->nmetrics, it->times,
			                                  it->values, it->n);
		err = err ? err : e;
		item_free(it);
		it = next;
	}
	return err;
}

/* Ends sampling and the sampler thread; waits at most GM_STOP_WAIT_S for it, so that a driver
 * that no longer answers cannot hold the program's exit up (the thread is then left behind,
 * and its last samples are lost). */
static void stop_sampler(void)
{
	pthread_mutex_lock(&gm_sampler.lock);
	gm_sampler.stop = 1;
	int have = gm_sampler.have_thread && gm_sampler.pid == getpid();
	gm_sampler.have_thread = 0;
	pthread_cond_signal(&gm_sampler.cond);
	pthread_mutex_unlock(&gm_sampler.lock);
	if (!have)
		return;
	struct timespec dl;
	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += GM_STOP_WAIT_S;
	if (pthread_timedjoin_np(gm_sampler.thread, NULL, &dl)) {
		gm_sampler.abandoned = 1;
		pthread_detach(gm_sampler.thread);
		cuptrace_warn("GPU metrics: sampling did not stop within %d s; its last samples "
		              "are lost",
		              GM_STOP_WAIT_S);
	}
}

/* Registered when sampling starts, so it runs before the exit handlers that CUDA registered
 * earlier (atexit runs handlers last-in, first-out): PM sampling stopped after the driver
 * began tearing down at exit hung in cuptiPmSamplingStop or corrupted the heap in
 * cuptiPmSamplingDisable (H100, driver 580), while stopping it here works. */
static void gm_atexit(void)
{
	if (gm_sampler.on && gm_sampler.pid == getpid())
		stop_sampler();
}

void cuptrace_gm_stop(void)
{
	if (!gm_sampler.on)
		return;
	stop_sampler();
	uint64_t lost = atomic_load(&gm_sampler.lost_samples);
	if (lost)
		cuptrace_warn("GPU metrics: %llu samples lost (the writer fell behind)",
		              (unsigned long long)lost);
	for (int i = 0; i < GM_MAX_DEV; i++) {
		gm_sampler.dev[i].wanted = gm_sampler.dev[i].failed = 0;
		gm_sampler.dev[i].config_sent = gm_sampler.dev[i].contexts = 0;
		gm_sampler.dev[i].lost = 0;
	}
}

int cuptrace_gm_cost(uint64_t *samples, int64_t *cpu_ns)
{
	if (!gm_sampler.on || gm_sampler.abandoned || gm_sampler.sampler_cpu_ns < 0)
		return 0;
	*samples = atomic_load(&gm_sampler.decoded);
	*cpu_ns = gm_sampler.sampler_cpu_ns;
	return 1;
}

const char *cuptrace_gm_status(void)
{
	return gm_sampler.on || gm_sampler.status[0] ? gm_sampler.status : NULL;
}
