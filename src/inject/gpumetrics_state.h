/* What the two halves of the GPU metrics sampler share: gpumetrics.c (the sampler thread, per
 * device start/decode/finish, and the session's entry points) and gpumetrics_metrics.c (which
 * metrics: the CUPTI profiler host side, and `record --list-gpu-metrics`). Private to
 * src/inject. Calls go one way: gpumetrics.c -> gpumetrics_metrics.c. */
#ifndef CUPTRACE_INJECT_GPUMETRICS_STATE_H
#define CUPTRACE_INJECT_GPUMETRICS_STATE_H

#include <cupti_pmsampling.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_target.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "convert/gpumetrics.h"

#define GM_MAX_DEV      64
#define GM_MAX_METRICS  64
#define GM_DECODE_MS    50
#define GM_QUEUE_MAX    (64u << 20)
#define GM_HWBUF        (64u << 20)
#define GM_STOP_WAIT_S  3
#define GM_START_WAIT_S 5

struct gm_item {
	struct gm_item *next;
	int is_config;
	uint32_t device;
	size_t nmetrics, n;
	uint64_t *times;
	double *values;
	struct cuptrace_gm_config cfg; /* is_config: strings owned below */
	char *device_name;
	char **metrics;
	size_t bytes;
};

struct gm_dev {
	pthread_mutex_t mu; /* every CUPTI call on this device, and the fields below */
	int wanted, active, failed;
	int ended; /* stopped, never disabled: not started again in this process (dev_finish) */
	int start_pending; /* gm_sampler.lock: a context's thread waits for the start
	                      (gm_sampler.started) */
	CUpti_PmSampling_Object *obj;
	CUpti_Profiler_Host_Object *host;
	const char *metrics[GM_MAX_METRICS];
	size_t nmetrics;
	uint8_t *img, *blank;
	size_t img_size;
	int config_sent, first_pending;
	int contexts; /* live contexts on this device (gm_sampler.lock) */
	int64_t offset_ns;
	int64_t start_boot, start_real; /* BOOTTIME and REALTIME just before Start */
	char name[128];
	uint64_t lost;
	char *list;     /* this device's copy of the metric list: metrics[] point into it */
	uint8_t *avail; /* counter availability image: the host object may refer to it */
	uint8_t *cfg;   /* config image: CUPTI keeps the pointer from SetConfig and reads it in
	                 * every decode (freeing it after SetConfig crashed the first decode) */
};

struct gm_sampler_state {
	int on;
	uint64_t interval_ns;
	char *list; /* CUPTRACE_GPU_METRICS as given, when a list */
	int clock;  /* forced sample clock, or -1: found per device */
	int nice;   /* the sampler thread's nice value (CUPTRACE_GPU_METRICS_NICE) */
	pthread_mutex_t lock;
	pthread_cond_t cond, started;
	pthread_t thread;
	int have_thread, stop, profiler_ready;
	int atexit_set, abandoned;
	pid_t pid; /* the process that started the sampler thread (a forked child has none) */
	struct gm_dev dev[GM_MAX_DEV];
	struct gm_item *head, *tail;
	size_t queued;
	atomic_ullong lost_samples;
	atomic_ullong decoded;  /* samples evaluated (the sampler, or a context's last thread) */
	int64_t sampler_cpu_ns; /* the sampler thread's CPU time, at its end; -1: unknown */
	char status[256];
};

/* The sampler's one state (gpumetrics.c defines it); locking as marked above. */
extern struct gm_sampler_state gm_sampler;

/* ---- libcuda, looked up: the library links no libcuda (the application loads it) ---- */

typedef int (*cu_init_fn)(unsigned);
typedef int (*cu_count_fn)(int *);
typedef int (*cu_get_fn)(int *, int);
typedef int (*cu_name_fn)(char *, int, int);

/* A libcuda function, loading the driver if nothing has (`record --list-gpu-metrics`). */
void *gm_cuda_sym(const char *name);
const char *gm_res_str(CUptiResult r);

/* ---- gpumetrics_metrics.c: the host side, which metrics in one pass ---- */
/* A host object for chip with the counter availability image avail; NULL with *r on failure. */
CUpti_Profiler_Host_Object *gm_host_new(const char *chip, const uint8_t *avail, CUptiResult *r);
void gm_host_free(CUpti_Profiler_Host_Object *h);
/* Do names[0..n) fit one sampling pass? 0 if so, else non-zero (see gpumetrics_metrics.c for
 * keep, cfg and cfg_size: what the caller takes over when it asks). */
int gm_try_metrics(const char *chip, const uint8_t *avail, const char **names, size_t n,
                   CUpti_Profiler_Host_Object **keep, uint8_t **cfg, size_t *cfg_size);
/* The metrics for device dev into out (GM_MAX_METRICS): the list asked for, or the default
 * roles; says what was left out. Returns the count. */
size_t gm_choose_metrics(int dev, const char *chip, const uint8_t *avail, const char **out);

#endif
