/* GPU hardware metrics: one counter track per configured metric under its GPU, fed by the
 * sample stream of convert/gpumetrics.h. A family of its own, called by convert.c only. */
#include "convert/conv_state.h"
#include "convert/gpumetrics.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One GPU's configured metrics and its stream; freed with the converter. */
struct conv_gm {
	size_t n;
	struct cuptrace_gm_metric *m; /* m[i].raw and m[i].name point into names */
	char **names;                 /* raw and shown names, owned: 2 per metric */
	uint64_t *uuid;               /* counter track per metric */
	struct cuptrace_gm_stream stream;
	uint64_t interval_ns;
};

static void gm_free(struct conv_gm *g)
{
	if (!g)
		return;
	for (size_t i = 0; i < 2 * g->n; i++)
		free(g->names ? g->names[i] : NULL);
	free(g->names);
	free(g->m);
	free(g->uuid);
	free(g);
}

static int emit(struct cuptrace_converter *c, uint64_t track, int64_t ts, double v)
{
	struct cuptrace_counter e = {.track_uuid = track, .ts = ts, .is_double = 1, .d = v};
	if (!c->err)
		c->err = c->sink->ops->counter(c->sink, &e);
	return c->err;
}

/* Every track of g drops to 0 at ts: sampling ended or samples were lost. */
static int drop_to_zero(struct cuptrace_converter *c, struct conv_gm *g, int64_t ts)
{
	for (size_t i = 0; i < g->n; i++)
		emit(c, g->uuid[i], ts, 0);
	return c->err;
}

static int gm_close(struct cuptrace_converter *c, uint32_t dev, struct conv_gm *g)
{
	int64_t end = cuptrace_gm_stream_end(&g->stream);
	if (end >= 0)
		drop_to_zero(c, g, end);
	char key[48];
	snprintf(key, sizeof(key), "gpu%u_metrics_samples", dev);
	conv_meta_set(c, key, NULL, (int64_t)g->stream.samples, 1);
	snprintf(key, sizeof(key), "gpu%u_metrics_gaps", dev);
	conv_meta_set(c, key, NULL, (int64_t)g->stream.gaps, 1);
	return c->err;
}

int conv_gpumetrics_config(struct cuptrace_converter *c, const struct cuptrace_gm_config *cfg)
{
	if (c->err)
		return c->err;
	if (!cfg->nmetrics || cfg->nmetrics > 256)
		return 0;
	uint32_t dev = cfg->device % MAX_GPUS;
	struct gpu *gp = &c->gpus[dev];
	/* Samples may come before the GPU's DEVICE record (activity comes in late buffers): the
	 * sampler's device name names the GPU's group as the DEVICE record would. */
	if (!gp->known && !gp->declared && cfg->device_name && *cfg->device_name) {
		gp->known = 1;
		snprintf(gp->name, sizeof(gp->name), "%s", cfg->device_name);
	}
	if (conv_declare_gpu(c, dev))
		return c->err;
	if (c->gm[dev]) {
		gm_close(c, dev, c->gm[dev]);
		gm_free(c->gm[dev]);
		c->gm[dev] = NULL;
	}
	struct conv_gm *g = calloc(1, sizeof(*g));
	if (!g || !(g->m = calloc(cfg->nmetrics, sizeof(*g->m))) ||
	    !(g->names = calloc(2 * cfg->nmetrics, sizeof(char *))) ||
	    !(g->uuid = calloc(cfg->nmetrics, sizeof(uint64_t)))) {
		gm_free(g);
		return c->err = -ENOMEM;
	}
	g->n = cfg->nmetrics;
	g->interval_ns = cfg->interval_ns;
	cuptrace_gm_stream_init(&g->stream, cfg->clock_offset_ns, c->start, cfg->interval_ns);
	c->gm[dev] = g;
	for (size_t i = 0; i < g->n; i++) {
		struct cuptrace_gm_metric m;
		cuptrace_gm_describe(cfg->metrics[i] ? cfg->metrics[i] : "?", &m);
		g->names[2 * i] = strdup(m.raw);
		g->names[2 * i + 1] = strdup(m.name);
		if (!g->names[2 * i] || !g->names[2 * i + 1])
			return c->err = -ENOMEM;
		m.raw = g->names[2 * i];
		m.name = g->names[2 * i + 1];
		/* Two metrics shown under one name (a list with both forms of one metric) would
		 * share a track in Chrome JSON: the later one keeps its raw name. */
		for (size_t k = 0; k < i; k++)
			if (!strcmp(g->m[k].name, m.name))
				m.name = m.raw;
		g->m[i] = m;
		/* uuids: GPU metric tracks of device dev, per configuration slot. */
		g->uuid[i] =
		    conv_uuid(c, U_COUNTER, 0x200000u + dev * 0x1000u + c->gm_configs * 256u + i);
		struct cuptrace_track t = {
		    .uuid = g->uuid[i],
		    .kind = CUPTRACE_TRACK_COUNTER,
		    .parent_uuid = gp->uuid,
		    .pid = c->pid,
		    .name = m.name,
		    .description = m.raw,
		    .sort_rank = -100 + m.rank, /* above the streams */
		};
		if (!c->err)
			c->err = c->sink->ops->track(c->sink, &t);
	}
	c->gm_configs = (c->gm_configs + 1) % 16;
	return c->err;
}

int conv_gpumetrics_samples(struct cuptrace_converter *c, uint32_t device, size_t nmetrics,
                            const uint64_t *times, const double *values, size_t n)
{
	struct conv_gm *g = c->gm[device % MAX_GPUS];
	if (c->err || !g)
		return c->err;
	if (nmetrics != g->n)
		return 0; /* not this configuration's samples: nothing sane to draw */
	for (size_t s = 0; s < n && !c->err; s++) {
		uint64_t start = times[2 * s], end = times[2 * s + 1];
		struct cuptrace_gm_points p = cuptrace_gm_stream_next(&g->stream, start, end);
		if (!p.accepted)
			continue;
		if (p.has_gap)
			drop_to_zero(c, g, p.gap_ts);
		for (size_t i = 0; i < g->n; i++) {
			double v =
			    cuptrace_gm_value(&g->m[i], values[s * nmetrics + i], end - start);
			if (!isnan(v))
				emit(c, g->uuid[i], p.ts, v);
		}
	}
	return c->err;
}

int conv_gpumetrics_finish(struct cuptrace_converter *c)
{
	for (uint32_t d = 0; d < MAX_GPUS; d++)
		if (c->gm[d])
			gm_close(c, d, c->gm[d]);
	return c->err;
}

void conv_gpumetrics_free(struct cuptrace_converter *c)
{
	for (uint32_t d = 0; d < MAX_GPUS; d++) {
		gm_free(c->gm[d]);
		c->gm[d] = NULL;
	}
}
