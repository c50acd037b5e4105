/* The trace's output: the capture, or the sink (file, OTLP or both) and its converter, and the
 * metadata written at the start and at the end (see collect_state.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "inject/collect_otlp.h"
#include "inject/collect_state.h"
#include "inject/gpumetrics.h"
#include "inject/runtime_watch.h"
#include "common/log.h"
#include "common/options.h"
#include "common/privacy.h"
#include "convert/capture.h"
#include "format/event.h"
#include "format/otlp.h"
#include "output/recfile.h"

#ifndef CUPTRACE_VERSION
#define CUPTRACE_VERSION "0.1.0"
#endif

void collect_read_comm(const char *path, char *out, size_t n)
{
	snprintf(out, n, "?");
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	ssize_t k = read(fd, out, n - 1);
	close(fd);
	if (k <= 0) {
		snprintf(out, n, "?");
		return;
	}
	out[k] = 0;
	char *nl = strchr(out, '\n');
	if (nl)
		*nl = 0;
}

/* ---- metadata ---- */

static char *read_cmdline(void)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)getpid());
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return strdup("?");
	char buf[8192];
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return strdup("?");
	for (ssize_t i = 0; i < n - 1; i++)
		if (!buf[i])
			buf[i] = ' ';
	buf[n] = 0;
	return strdup(buf);
}

struct kv {
	char key[40];
	char val[512];
};

static size_t collect_meta(struct collect_session *s, struct kv *m, size_t max)
{
	size_t n = 0;
#define ADD(k, ...)                                                                                \
	do {                                                                                       \
		if (n < max) {                                                                     \
			snprintf(m[n].key, sizeof(m[n].key), "%s", k);                             \
			snprintf(m[n].val, sizeof(m[n].val), __VA_ARGS__);                         \
			n++;                                                                       \
		}                                                                                  \
	} while (0)
	char host[256] = "?";
	gethostname(host, sizeof(host) - 1);
	ADD("pid", "%d", (int)s->pid);
	/* Where the launcher says: the process's place in the job (merging ranks needs it). */
	struct cuptrace_rank rk = cuptrace_launcher_rank();
	if (rk.rank >= 0) {
		ADD("rank", "%d", rk.rank);
		if (rk.local_rank >= 0)
			ADD("local_rank", "%d", rk.local_rank);
		if (rk.world_size >= 0)
			ADD("world_size", "%d", rk.world_size);
		ADD("launcher", "%s", rk.launcher);
	}
	char comm[64];
	collect_read_comm("/proc/self/comm", comm, sizeof(comm));
	ADD("process_name", "%s", comm);
	ADD("hostname", "%s", host);
	char *cmd = read_cmdline();
	ADD("cmdline", "%s", cmd ? cmd : "?");
	free(cmd);
	ADD("start_realtime_ns", "%lld", (long long)s->start_real);
	ADD("start_boottime_ns", "%lld", (long long)s->start_boot);
	/* Which boot of which machine BOOTTIME counts from: traces with the same boot id share
	 * one BOOTTIME, so `merge --ranks` lines them up exactly. */
	char boot_id[64];
	collect_read_comm("/proc/sys/kernel/random/boot_id", boot_id, sizeof(boot_id));
	if (strcmp(boot_id, "?"))
		ADD("boot_id", "%s", boot_id);
	time_t secs = (time_t)(s->start_real / 1000000000);
	struct tm tm;
	char iso[64];
	gmtime_r(&secs, &tm);
	strftime(iso, sizeof(iso), "%Y-%m-%dT%H:%M:%SZ", &tm);
	ADD("start_time", "%s", iso);
	ADD("cuptrace_version", "%s", CUPTRACE_VERSION);
	uint32_t cv = 0;
	if (cuptiGetVersion(&cv) == CUPTI_SUCCESS)
		ADD("cupti_version", "%u", cv);
	ADD("cupti_api_version_built", "%u", (unsigned)CUPTI_API_VERSION);
	/* The driver is loaded (it is the one injecting us); ask it without linking libcuda. */
	int (*drv)(int *) =
	    (int (*)(int *))cuptrace_loaded_sym("libcuda.so.1", "cuDriverGetVersion");
	int dv = 0;
	if (drv && drv(&dv) == 0)
		ADD("cuda_driver_api_version", "%d.%d", dv / 1000, (dv % 1000) / 10);
	char drvline[256];
	collect_read_comm("/proc/driver/nvidia/version", drvline, sizeof(drvline));
	char *k = strstr(drvline, "Kernel Module");
	if (k) {
		char ver[64] = "";
		if (sscanf(k, "Kernel Module for %*s %63s", ver) == 1 ||
		    sscanf(k, "Kernel Module %63s", ver) == 1)
			ADD("driver_version", "%s", ver);
	}
	struct utsname u;
	if (!uname(&u))
		ADD("os", "%s %s %s", u.sysname, u.release, u.machine);
	const char *tool_cmd = getenv("CUPTRACE_CMDLINE");
	if (tool_cmd)
		ADD("record_cmdline", "%s", tool_cmd);
	if (cuptrace_private_env()) { /* record --private: nothing that names the host or user */
		n = cuptrace_private_filter(m, n, sizeof(*m), offsetof(struct kv, key),
		                            offsetof(struct kv, val), sizeof(m->val));
		/* An empty host name, as the live writers get: "no host" in a converted capture
		 * too, where a capture with no host name at all reads as an unknown one ("?"). */
		ADD("hostname", "%s", "");
	}
#undef ADD
	return n;
}

/* The partial file the trace is written to until it is complete (output/recfile.h), noted in
 * the run's directory where `record` made one. 0 or a negative errno. */
static int begin_file(struct collect_output *o)
{
	o->rf = calloc(1, sizeof(*o->rf));
	if (!o->rf)
		return -ENOMEM;
	int in_place = 0;
	int e = cuptrace_recfile_begin(o->rf, o->path, getenv("CUPTRACE_CLAIMS"), &in_place);
	if (e) {
		free(o->rf);
		o->rf = NULL;
		return e;
	}
	if (in_place)
		cuptrace_warn("%s: its directory takes no new file: the trace is written in place, "
		              "over the old one (a killed program leaves it cut)",
		              o->path);
	return 0;
}

static int open_writers(struct collect_session *s, struct collect_output *o)
{
	struct cuptrace_setting_value f, z, zl;
	cuptrace_setting_env(CUPTRACE_SET_FORMAT, &f);
	cuptrace_setting_env(CUPTRACE_SET_COMPRESS, &z);
	cuptrace_setting_env(CUPTRACE_SET_COMPRESS_LEVEL, &zl);
	const char *fmt = f.s; /* NULL: from the extension */
	s->capture =
	    f.i == CUPTRACE_OUTFMT_CAPTURE || (!fmt && cuptrace_ends_with(o->path, ".cupti"));
	/* -o none: spans only. A collector that cannot be used costs the spans, not the file. */
	int none = !strcmp(o->path, "none");
	int e = none ? 0 : begin_file(o);
	if (e)
		return e;
	const char *wpath = o->rf ? o->rf->tmp : o->path; /* the format: o->path's */
	struct kv meta[32];
	size_t nmeta = collect_meta(s, meta, 32);
	if (s->capture) {
		if (cuptrace_collect_otlp_wanted())
			cuptrace_warn(
			    "OTLP needs a converted trace, not a raw capture: no spans are "
			    "sent (cuptrace convert %s --otlp URL sends them later)",
			    o->path);
		if ((e = cuptrace_capture_open(wpath, &o->cons)))
			return e;
		for (size_t i = 0; i < nmeta; i++)
			cuptrace_consumer_meta(&o->cons, meta[i].key, meta[i].val);
		return cuptrace_consumer_flush(&o->cons);
	}
	o->sink = none ? NULL : cuptrace_sink_open_recorder(o->path, wpath, fmt, z.s, (int)zl.i);
	if (!none && !o->sink)
		return -errno;
	o->otlp = cuptrace_collect_otlp_wanted() ? cuptrace_collect_otlp_open() : NULL;
	if (none && !o->otlp)
		return -ENOENT;
	if (o->otlp)
		o->sink = o->sink ? cuptrace_tee_sink_new(o->sink, o->otlp) : o->otlp;
	if (!o->sink) {
		o->otlp = NULL; /* the tee freed both */
		return -ENOMEM;
	}
	struct cuptrace_meta m[32];
	for (size_t i = 0; i < nmeta; i++)
		m[i] = (struct cuptrace_meta){.key = meta[i].key, .s = meta[i].val};
	char host[256] = "?", comm[64];
	gethostname(host, sizeof(host) - 1);
	collect_read_comm("/proc/self/comm", comm, sizeof(comm));
	struct cuptrace_trace_info info = {
	    .pid = s->pid,
	    .process_name = comm,
	    .hostname = cuptrace_private_env() ? "" : host, /* "": none; NULL: the writer's */
	    .start_realtime_ns = s->start_real,
	    .start_boottime_ns = s->start_boot,
	    .trace_uuid_hi = cuptrace_hash64((uint64_t)s->start_real ^ ((uint64_t)s->pid << 32)),
	    .trace_uuid_lo =
	        cuptrace_hash64((uint64_t)s->start_boot + cuptrace_hash_bytes(host, strlen(host))),
	    .meta = m,
	    .nmeta = nmeta,
	};
	struct cuptrace_setting_value ovh;
	cuptrace_setting_env(CUPTRACE_SET_OVERHEAD_TRACKS, &ovh);
	struct cuptrace_convert_opts co = {.sz = sizeof(co),
	                                   .driver_all = s->driver_mode == CUPTRACE_DRIVER_ALL,
	                                   .runtime_all = s->runtime_mode == CUPTRACE_RUNTIME_ALL,
	                                   .overhead_per_thread =
	                                       ovh.i == CUPTRACE_OVERHEAD_THREAD};
	struct cuptrace_converter *c = cuptrace_converter_new(o->sink, &info, &co);
	if (!c)
		return -ENOMEM;
	o->cons = cuptrace_converter_consumer(c);
	o->conv = c;
	return 0;
}

int collect_open_watch_output(struct collect_session *s, struct collect_output *o)
{
	struct stat st;
	if (!lstat(o->path, &st))
		return -EEXIST;
	struct kv meta[32];
	size_t nmeta = collect_meta(s, meta, 32);
	int e = cuptrace_capture_open(o->path, &o->cons);
	if (e)
		return e;
	for (size_t i = 0; i < nmeta; i++)
		cuptrace_consumer_meta(&o->cons, meta[i].key, meta[i].val);
	return cuptrace_consumer_flush(&o->cons);
}

int collect_open_output(struct collect_session *s, struct collect_output *o)
{
	int e = open_writers(s, o);
	if (e)
		collect_discard_output(o); /* the partial file too: the old file stays as it was */
	return e;
}

const char *collect_settle_output(struct collect_output *o, int keep, int write_err)
{
	struct cuptrace_recfile *rf = o->rf;
	if (!rf)
		return NULL; /* -o none, or a file per window (each settled by its own) */
	if (!keep) {
		cuptrace_recfile_discard(rf);
		return NULL;
	}
	int r = cuptrace_recfile_commit(rf, write_err != 0);
	if (r == 1)
		cuptrace_err("%s is kept as it was: this run's trace, cut where writing failed, is "
		             "%s",
		             o->path, rf->tmp);
	else if (r < 0)
		cuptrace_err("cannot put the trace in place as %s (%s): it is %s", o->path,
		             strerror(-r), rf->tmp);
	return r ? rf->tmp : o->path;
}

uint64_t collect_file_size(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return 0;
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fclose(f);
	return n > 0 ? (uint64_t)n : 0;
}

static double ms_of(uint64_t ns)
{
	return (double)ns / 1e6;
}

void collect_cost(struct collect_session *s, struct collect_cost *c)
{
	struct rusage ru;
	double proc = 0;
	if (!getrusage(RUSAGE_SELF, &ru))
		proc = (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
		       (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
	long long peak = atomic_load(&s->buffers_live_peak);
	*c = (struct collect_cost){
	    .writer_ms = ms_of(s->writer_cpu_ns),
	    .compress_ms = ms_of(cuptrace_output_workers_cpu_ns()),
	    .flush_ms = ms_of(s->flusher_cpu_ns),
	    .callbacks_ms = ms_of(atomic_load(&s->callbacks_cpu_ns)),
	    .process_ms = proc,
	    .by_zlib = !!(cuptrace_output_codecs() & CUPTRACE_CODEC_ZLIB),
	    .requested = atomic_load(&s->buffers_requested),
	    .live_peak = !s->win.active && !s->win.ring && peak > 0 ? (uint64_t)peak : 0,
	    .buffer_size = s->buffer_size,
	    .queue_peak = s->queue.high_water,
	    .queue_cap = s->queue.cap,
	};
}

/* Metadata known only at the end: the closing clock readings (with the opening ones they give
 * REALTIME's rate against BOOTTIME over the run: NTP slews it), each visible GPU's PCI bus id
 * (from the driver; CUPTI's device record has no PCI address) and the NCCL version if the
 * program loaded NCCL. Called on the finishing thread after the writer thread has ended. */
static void late_meta(struct collect_session *s,
                      void (*put)(void *ctx, const char *k, const char *v), void *ctx)
{
	char k[48], v[96];
	snprintf(v, sizeof(v), "%lld", (long long)cuptrace_now_ns(CLOCK_REALTIME));
	put(ctx, "end_realtime_ns", v);
	snprintf(v, sizeof(v), "%lld", (long long)cuptrace_now_ns(CLOCK_BOOTTIME));
	put(ctx, "end_boottime_ns", v);
	collect_stacks_meta(put, ctx);
	int (*count)(int *) =
	    (int (*)(int *))cuptrace_loaded_sym("libcuda.so.1", "cuDeviceGetCount");
	int (*bus)(char *, int, int) =
	    (int (*)(char *, int, int))cuptrace_loaded_sym("libcuda.so.1", "cuDeviceGetPCIBusId");
	int n = 0;
	if (count && bus && count(&n) == 0)
		for (int d = 0; d < n && d < 64; d++)
			if (bus(v, (int)sizeof(v), d) == 0) {
				snprintf(k, sizeof(k), "gpu%d_pci_bus_id", d);
				put(ctx, k, v);
			}
	/* NCCL: loaded by soname (PyTorch, JAX, CuPy ship libnccl.so.2), or linked in. */
	int (*ver)(int *) = (int (*)(int *))cuptrace_loaded_sym("libnccl.so.2", "ncclGetVersion");
	int code = 0;
	if (ver && ver(&code) == 0 && code > 0) {
		/* NCCL_VERSION_CODE: X*10000+Y*100+Z since 2.9, X*1000+Y*100+Z before */
		if (code >= 20900)
			snprintf(v, sizeof(v), "%d.%d.%d", code / 10000, code / 100 % 100,
			         code % 100);
		else
			snprintf(v, sizeof(v), "%d.%d.%d", code / 1000, code / 100 % 10,
			         code % 100);
		put(ctx, "nccl_version", v);
	}
	/* The tracer's cost until now (the writer and flush threads have ended; the last chunks
	 * are still to be compressed): the summary prints the final figures. */
	struct collect_cost cost;
	collect_cost(s, &cost);
	const struct {
		const char *key;
		double v;
	} ms[] = {{"tracer_cpu_writer_ms", cost.writer_ms},
	          {"tracer_cpu_compress_ms", cost.compress_ms},
	          {"tracer_cpu_flush_ms", cost.flush_ms},
	          {"tracer_cpu_callbacks_ms", cost.callbacks_ms},
	          {"process_cpu_ms", cost.process_ms}};
	for (size_t i = 0; i < sizeof(ms) / sizeof(ms[0]); i++) {
		snprintf(v, sizeof(v), "%.1f", ms[i].v);
		put(ctx, ms[i].key, v);
	}
	snprintf(v, sizeof(v), "%llu", (unsigned long long)cost.requested);
	put(ctx, "cupti_buffers_requested", v);
	if (cost.live_peak) {
		snprintf(v, sizeof(v), "%llu",
		         (unsigned long long)(cost.live_peak * cost.buffer_size));
		put(ctx, "cupti_buffers_peak_bytes", v);
	}
	snprintf(v, sizeof(v), "%llu", (unsigned long long)cost.queue_peak);
	put(ctx, "writer_queue_peak_buffers", v);
	snprintf(v, sizeof(v), "%llu", (unsigned long long)(cost.queue_cap * cost.buffer_size));
	put(ctx, "writer_queue_bound_bytes", v);
	const char *gm = cuptrace_gm_status();
	if (gm)
		put(ctx, "gpu_metrics", gm);
	/* Node by node, the work of these graphs is missing from the trace (collect_callbacks.c).
	 */
	unsigned long long dg = atomic_load(&s->device_launch_graphs);
	if (dg) {
		snprintf(v, sizeof(v), "%llu", dg);
		put(ctx, CUPTRACE_META_UNRECORDED_DEVICE_GRAPHS, v);
	}
	uint64_t samples;
	int64_t cpu_ns;
	if (cuptrace_gm_cost(&samples, &cpu_ns)) {
		snprintf(v, sizeof(v), "%.1f", cpu_ns / 1e6);
		put(ctx, "gpu_metrics_sampler_cpu_ms", v);
		cuptrace_debug(
		    "GPU metrics: %llu samples, sampler thread CPU %.1f ms (%.1f us each)",
		    (unsigned long long)samples, cpu_ns / 1e6,
		    samples ? cpu_ns / 1e3 / samples : 0.0);
	}
}

static void late_meta_put(void *ctx, const char *k, const char *v)
{
	cuptrace_consumer_meta(ctx, k, v);
}

int collect_finish_output(struct collect_session *s, struct collect_output *o, int64_t *t_converted)
{
	if (o->cons.ops)
		late_meta(s, late_meta_put, &o->cons);
	int err = cuptrace_consumer_finish(&o->cons);
	if (t_converted)
		*t_converted = o->sink ? cuptrace_now_ns(CLOCK_MONOTONIC) : 0;
	if (o->sink) {
		int e = o->sink->ops->finish(o->sink);
		err = err ? err : e;
	}
	return err;
}

void collect_release_output(struct collect_output *o)
{
	/* Settled already (collect_settle_output); a file still live is left where it is. */
	free(o->rf);
	o->rf = NULL;
	cuptrace_consumer_destroy(&o->cons);
	o->conv = NULL;
	cuptrace_sink_destroy(o->sink);
	o->sink = NULL;
	o->otlp = NULL; /* inside sink: a tee, or the sink itself */
}

void collect_discard_output(struct collect_output *o)
{
	cuptrace_consumer_destroy(&o->cons); /* a capture's last bytes, before its file goes */
	if (o->rf)
		cuptrace_recfile_discard(o->rf);
	collect_release_output(o);
}

/* The first write error is the one reported, once, whenever it shows (a full disk shows at a
 * periodic write or only at the end); what was written before it still loads. Writer thread,
 * or the finishing thread once the writer has ended. */
void collect_note_output_err(struct collect_session *s, const struct collect_output *o, int err)
{
	if (!err || s->write_err)
		return;
	s->write_err = err;
	cuptrace_err("writing %s failed: %s; the trace stops there (what was written before "
	             "loads)",
	             o->path, strerror(-err));
}

void collect_note_write_err(struct collect_session *s, int err)
{
	collect_note_output_err(s, &s->out, err);
}
