/* The Perfetto protobuf sink: turns the event model of event.h into TracePackets, one framed
 * packet per cuptrace_output_write(), laid out for trace_processor's import rules
 * (shared/reference/perfetto-format.md) and for size after zlib.
 *
 * Two encoders. protobuf-c defines our proto subset and packs the rare packets (descriptors,
 * metadata, clock snapshots, the defaults that open a sequence): this file. The hot packets (slice
 * BEGIN and END, instants, counters: all but a handful of a trace's packets) are written by hand,
 * straight into the packing buffer, by perfetto_encode.c, which says why. */
#include "format/formats.h"
#include "common/log.h"
#include "common/util.h"
#include "format/perfetto_sink.h"
#include "perfetto_trace.pb-c.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

/* Layout (see the reference, sections 2, 7 and 8):
 *  - sequence 1 holds the metadata: trace uuid, the clock snapshot that maps relative time 0 to
 *    BOOTTIME and REALTIME, system info, trace attributes and every track descriptor;
 *  - every track with events gets a sequence of its own, opened by a packet that clears the
 *    incremental state and sets the defaults (clock 64, the track's uuid) and a snapshot of the
 *    sequence clock 64 (incremental, ns). Events then carry only the delta since the previous
 *    packet on clock 64, no track uuid, and interned names, categories, arg names and string arg
 *    values. An event older than the last one written on its sequence is written on BOOTTIME in
 *    absolute ns instead, which leaves the clock-64 chain alone. */

enum { ORDER_EXPLICIT = 3, PROCESS_ORDERING_EXPLICIT = 1 };

struct pf_meta {
	char *key, *s;
	int is_int;
	int64_t i;
};

/* Sequence 1: its first packet clears the incremental state like every other sequence's, which
 * costs nothing and keeps every sequence's start alike. The clock snapshot must not be first:
 * trace_processor reads nothing but the snapshot from its packet. */
static int emit_meta(struct pf_sink *s, Cuptrace__Pb__TracePacket *p)
{
	p->has_trusted_packet_sequence_id = 1;
	p->trusted_packet_sequence_id = SEQ_META;
	if (!s->meta_packets++ && !p->clock_snapshot) {
		p->has_sequence_flags = 1;
		p->sequence_flags = SEQ_CLEARED | SEQ_NEEDS;
	}
	return pf_emit(s, p);
}
/* ---- ops ---- */

/* An instant that lists metadata, so that the UI shows it; the reader recognises these by
 * category and name and does not replay them. It goes on the first process's main thread
 * (meta_track; the Chrome writer's too), not on the process track: an event there makes
 * trace_processor a process track of its own, which ui.perfetto.dev draws as a row named like the
 * process, empty but for two instants (src/format/TIMELINE.md). */
static int meta_instant(struct pf_sink *s, const char *name, int64_t ts,
                        const struct cuptrace_meta *m, size_t n)
{
	struct cuptrace_arg *args = n ? calloc(n, sizeof(*args)) : NULL;
	struct cuptrace_instant e = {
	    .track_uuid = s->meta_track ? s->meta_track : s->process_uuid,
	    .ts = ts,
	    .name = name,
	    .category = CUPTRACE_META_CATEGORY,
	    .args = args,
	    .nargs = n,
	};
	int err;

	if (n && !args)
		return fail(s, -ENOMEM);
	for (size_t i = 0; i < n; i++) {
		args[i].key = m[i].key;
		if (m[i].is_int) {
			args[i].type = CUPTRACE_ARG_INT;
			args[i].v.i = m[i].i;
		} else {
			args[i].type = CUPTRACE_ARG_STRING;
			args[i].v.s = m[i].s ? m[i].s : "";
		}
	}
	err = s->base.ops->instant(&s->base, &e);
	free(args);
	return err;
}

/* CUPTRACE_META_VIEW_START: a TracingServiceEvent "all data sources started" at that time.
 * trace_processor keeps the last one it reads (file order) as all_data_source_started_ns, and
 * ui.perfetto.dev opens on the trace from there to its end; nothing is hidden or dropped. */
static int emit_view_start(struct pf_sink *s, int64_t rel_ns)
{
	Cuptrace__Pb__TracePacket p = CUPTRACE__PB__TRACE_PACKET__INIT;
	Cuptrace__Pb__TracingServiceEvent ev = CUPTRACE__PB__TRACING_SERVICE_EVENT__INIT;

	if (rel_ns <= 0)
		return 0; /* the trace's start: the UI's default */
	ev.has_all_data_sources_started = 1;
	ev.all_data_sources_started = 1;
	p.has_timestamp = 1;
	p.timestamp = (uint64_t)s->start_boottime + (uint64_t)rel_ns;
	p.service_event = &ev;
	return emit_meta(s, &p);
}

static int meta_store(struct pf_sink *s, const struct cuptrace_meta *m)
{
	struct pf_meta *e = NULL;
	char *v = NULL;

	if (!m->key)
		return 0;
	if (m->is_int && !strcmp(m->key, CUPTRACE_META_VIEW_START) && emit_view_start(s, m->i))
		return s->err;
	if (!m->is_int && !(v = strdup(m->s ? m->s : "")))
		return -ENOMEM;
	for (size_t i = 0; i < s->nmeta && !e; i++)
		if (!strcmp(s->meta[i].key, m->key))
			e = &s->meta[i];
	if (!e) {
		struct pf_meta *arr =
		    cuptrace_grow(s->meta, &s->metacap, s->nmeta + 1, sizeof(*arr));
		char *k = arr ? strdup(m->key) : NULL;
		if (arr)
			s->meta = arr;
		if (!k) {
			free(v);
			return -ENOMEM;
		}
		e = &s->meta[s->nmeta++];
		*e = (struct pf_meta){.key = k};
	}
	free(e->s);
	e->s = v;
	e->is_int = m->is_int;
	e->i = m->is_int ? m->i : 0;
	return 0;
}

/* TraceAttributes with every key known so far (each packet is complete on its own). */
static int emit_attributes(struct pf_sink *s)
{
	Cuptrace__Pb__TracePacket p = CUPTRACE__PB__TRACE_PACKET__INIT;
	Cuptrace__Pb__TraceAttributes ta = CUPTRACE__PB__TRACE_ATTRIBUTES__INIT;
	Cuptrace__Pb__TraceAttributes__Attribute *at = NULL, **atp = NULL;
	int err;

	if (!s->nmeta)
		return 0;
	at = calloc(s->nmeta, sizeof(*at));
	atp = calloc(s->nmeta, sizeof(*atp));
	if (!at || !atp) {
		err = fail(s, -ENOMEM);
		goto out;
	}
	for (size_t i = 0; i < s->nmeta; i++) {
		cuptrace__pb__trace_attributes__attribute__init(&at[i]);
		at[i].key = s->meta[i].key;
		if (s->meta[i].is_int) {
			at[i].has_long_value = 1;
			at[i].long_value = s->meta[i].i;
		} else {
			at[i].string_value = s->meta[i].s;
		}
		atp[i] = &at[i];
	}
	ta.n_attribute = s->nmeta;
	ta.attribute = atp;
	p.trace_attributes = &ta;
	err = emit_meta(s, &p);
out:
	free(at);
	free(atp);
	return err;
}

static int pf_begin(struct cuptrace_sink *sk, const struct cuptrace_trace_info *info)
{
	struct pf_sink *s = to_pf(sk);
	int err;

	if (s->err)
		return s->err;
	if (s->begun)
		return fail(s, -EINVAL);
	s->begun = 1;
	/* trace_processor's time is the BOOTTIME reading, start_boottime + ts, and it drops every
	 * TrackEvent whose time is negative (track_event_invalid_timestamp). event.h promises a
	 * reading >= 0 (0: none known); one below breaks that promise (a reader of a damaged file,
	 * a merge of old), and writing it would lose every event before -start_boottime. 0 keeps
	 * them all: relative times, and REALTIME at relative 0, stay as they are. */
	s->start_boottime = info->start_boottime_ns > 0 ? info->start_boottime_ns : 0;
	if (info->start_boottime_ns < 0)
		cuptrace_warn("trace start's BOOTTIME reading is negative (%lld ns): written as 0, "
		              "so that Perfetto keeps every event",
		              (long long)info->start_boottime_ns);

	if (info->trace_uuid_hi || info->trace_uuid_lo) {
		/* Without one trace_processor derives a uuid; a constant one would make the UI's
		 * trace cache mix up different traces. */
		Cuptrace__Pb__TracePacket p = CUPTRACE__PB__TRACE_PACKET__INIT;
		Cuptrace__Pb__TraceUuid u = CUPTRACE__PB__TRACE_UUID__INIT;
		u.has_msb = u.has_lsb = 1;
		u.msb = (int64_t)info->trace_uuid_hi;
		u.lsb = (int64_t)info->trace_uuid_lo;
		p.trace_uuid = &u;
		if (emit_meta(s, &p))
			return s->err;
	}

	/* The traced host's system is what the collector recorded as "os" (sysname, release,
	 * machine). uname() describes the machine that runs the writer: use it, for the kernel's
	 * version string too, only when that is the traced host. Host names alone do not say so
	 * (VMs are often all "vm" or "localhost"), so "os" must match as well. A capture converted
	 * elsewhere gets what "os" says; a trace without it, the host name alone. */
	Cuptrace__Pb__TracePacket sp = CUPTRACE__PB__TRACE_PACKET__INIT;
	Cuptrace__Pb__SystemInfo si = CUPTRACE__PB__SYSTEM_INFO__INIT;
	Cuptrace__Pb__Utsname un = CUPTRACE__PB__UTSNAME__INIT;
	struct utsname uts;
	char host[256] = "", mine[3 * sizeof(uts.release) + 3];
	char os_sys[65], os_rel[65], os_mach[65];
	const char *os = NULL;
	for (size_t i = 0; i < info->nmeta; i++)
		if (!info->meta[i].is_int && info->meta[i].s && !strcmp(info->meta[i].key, "os"))
			os = info->meta[i].s;
	int local = !gethostname(host, sizeof(host) - 1) &&
	            (!info->hostname || !strcmp(info->hostname, host));
	int same_os = 0;
	if (local && !uname(&uts)) {
		snprintf(mine, sizeof(mine), "%s %s %s", uts.sysname, uts.release, uts.machine);
		same_os = !os || !strcmp(os, mine);
	}
	if (same_os) {
		un.sysname = uts.sysname;
		un.version = uts.version;
		un.release = uts.release;
		un.machine = uts.machine;
		si.utsname = &un;
	} else if (os && sscanf(os, "%64s %64s %64s", os_sys, os_rel, os_mach) == 3) {
		un.sysname = os_sys;
		un.release = os_rel;
		un.machine = os_mach;
		si.utsname = &un;
	}
	const char *machine = info->hostname ? info->hostname : local ? host : NULL;
	/* "" is a host name removed on purpose (`cuptrace share`, private recording): none. */
	si.machine_name = (char *)(machine && *machine ? machine : NULL);
	sp.system_info = &si;
	if (emit_meta(s, &sp))
		return s->err;

	Cuptrace__Pb__TracePacket cp = CUPTRACE__PB__TRACE_PACKET__INIT;
	Cuptrace__Pb__ClockSnapshot cs = CUPTRACE__PB__CLOCK_SNAPSHOT__INIT;
	Cuptrace__Pb__ClockSnapshot__Clock bt = CUPTRACE__PB__CLOCK_SNAPSHOT__CLOCK__INIT;
	Cuptrace__Pb__ClockSnapshot__Clock rt = CUPTRACE__PB__CLOCK_SNAPSHOT__CLOCK__INIT;
	Cuptrace__Pb__ClockSnapshot__Clock *clocks[2] = {&bt, &rt};
	bt.has_clock_id = bt.has_timestamp = 1;
	bt.clock_id = CLOCK_BOOTTIME_ID;
	bt.timestamp = (uint64_t)s->start_boottime;
	rt.has_clock_id = rt.has_timestamp = 1;
	rt.clock_id = CLOCK_REALTIME_ID;
	rt.timestamp = (uint64_t)info->start_realtime_ns;
	cs.n_clocks = 2;
	cs.clocks = clocks;
	cs.has_primary_trace_clock = 1;
	cs.primary_trace_clock = CLOCK_BOOTTIME_ID;
	cp.clock_snapshot = &cs;
	if (emit_meta(s, &cp))
		return s->err;

	for (size_t i = 0; i < info->nmeta; i++)
		if ((err = meta_store(s, &info->meta[i])))
			return fail(s, err);
	return emit_attributes(s);
}

/* An instant of every metadata entry known so far. */
static int meta_instant_all(struct pf_sink *s, const char *name, int64_t ts)
{
	if (!s->nmeta)
		return s->err;
	struct cuptrace_meta *m = calloc(s->nmeta, sizeof(*m));
	if (!m)
		return fail(s, -ENOMEM);
	for (size_t i = 0; i < s->nmeta; i++)
		m[i] = (struct cuptrace_meta){s->meta[i].key, s->meta[i].is_int, s->meta[i].i,
		                              s->meta[i].s};
	meta_instant(s, name, ts, m, s->nmeta);
	free(m);
	return s->err;
}

/* The trace info at time 0, once: the metadata known when its track is declared (as of
 * begin(), unless meta() came before the first thread). */
static int write_info(struct pf_sink *s)
{
	if (s->info_written)
		return s->err;
	s->info_written = 1;
	return meta_instant_all(s, CUPTRACE_META_INFO, 0);
}

/* A process track with a sort rank (several processes in one trace, as `cuptrace merge` writes
 * them): the root descriptor (uuid 0) asks for processes in rank order, once, before the first
 * such process. trace_processor then gives each process the arg process_sort_index_hint, which
 * the UI sorts by; without it the UI orders processes by their slice counts. */
static int emit_process_ordering(struct pf_sink *s)
{
	Cuptrace__Pb__TracePacket p = CUPTRACE__PB__TRACE_PACKET__INIT;
	Cuptrace__Pb__TrackDescriptor td = CUPTRACE__PB__TRACK_DESCRIPTOR__INIT;

	s->process_ordering = 1;
	td.has_uuid = 1;
	td.uuid = 0;
	td.has_process_ordering = 1;
	td.process_ordering = PROCESS_ORDERING_EXPLICIT;
	p.track_descriptor = &td;
	return emit_meta(s, &p);
}

static int pf_track(struct cuptrace_sink *sk, const struct cuptrace_track *t)
{
	struct pf_sink *s = to_pf(sk);
	Cuptrace__Pb__TracePacket p = CUPTRACE__PB__TRACE_PACKET__INIT;
	Cuptrace__Pb__TrackDescriptor td = CUPTRACE__PB__TRACK_DESCRIPTOR__INIT;
	Cuptrace__Pb__ProcessDescriptor pd = CUPTRACE__PB__PROCESS_DESCRIPTOR__INIT;
	Cuptrace__Pb__ThreadDescriptor thd = CUPTRACE__PB__THREAD_DESCRIPTOR__INIT;
	Cuptrace__Pb__CounterDescriptor cd = CUPTRACE__PB__COUNTER_DESCRIPTOR__INIT;
	int meta_here = 0;

	if (s->err)
		return s->err;
	td.has_uuid = 1;
	td.uuid = t->uuid;
	td.description = (char *)t->description;
	if (t->sort_rank) {
		td.has_sibling_order_rank = 1;
		td.sibling_order_rank = t->sort_rank;
	}
	/* trace_processor ignores parent_uuid on process and thread tracks; on threads it still
	 * tells a reader which process track the producer meant. */
	if (t->parent_uuid && t->kind != CUPTRACE_TRACK_PROCESS) {
		td.has_parent_uuid = 1;
		td.parent_uuid = t->parent_uuid;
	}
	switch (t->kind) {
	case CUPTRACE_TRACK_PROCESS:
		if (t->sort_rank && !s->process_ordering && emit_process_ordering(s))
			return s->err;
		pd.has_pid = 1;
		pd.pid = t->pid;
		pd.process_name = (char *)t->name;
		pd.n_cmdline = t->cmdline_len;
		pd.cmdline = (char **)t->cmdline;
		/* No process_labels: ui.perfetto.dev draws them, comma-joined, across the
		 * process's header (its subtitle), and they are the only process args this path
		 * gives. The metadata is in the trace attributes and the instants below. */
		td.process = &pd;
		if (!s->process_uuid) {
			s->process_uuid = t->uuid;
			s->process_pid = t->pid;
		}
		break;
	case CUPTRACE_TRACK_THREAD:
		if (s->process_uuid && t->pid == s->process_pid && !s->first_thread)
			s->first_thread = t->uuid;
		meta_here = s->process_uuid && !s->meta_track && t->pid == s->process_pid &&
		            t->tid == t->pid;
		thd.has_pid = thd.has_tid = 1;
		thd.pid = t->pid;
		thd.tid = t->tid;
		thd.thread_name = (char *)t->name;
		td.thread = &thd;
		break;
	case CUPTRACE_TRACK_GROUP:
		td.name = (char *)t->name;
		td.has_child_ordering = 1;
		td.child_ordering = ORDER_EXPLICIT;
		break;
	case CUPTRACE_TRACK_COUNTER:
		td.name = (char *)t->name;
		if (t->unit != CUPTRACE_UNIT_NONE) {
			cd.has_unit = 1;
			cd.unit = t->unit;
		}
		td.counter = &cd;
		break;
	case CUPTRACE_TRACK_SLICES:
	default:
		/* Lanes share the main track's name: the UI merges same-name siblings. */
		td.name = (char *)t->name;
		break;
	}
	p.track_descriptor = &td;
	emit_meta(s, &p);
	if (s->err || !meta_here)
		return s->err;
	s->meta_track = t->uuid;
	return write_info(s);
}

/* Later metadata (dropped and record counts): the attributes again, complete, and an instant at
 * the latest time seen so far that shows this call's values. */
static int pf_meta(struct cuptrace_sink *sk, const struct cuptrace_meta *m, size_t n)
{
	struct pf_sink *s = to_pf(sk);
	int err;

	if (s->err)
		return s->err;
	for (size_t i = 0; i < n; i++)
		if ((err = meta_store(s, &m[i])))
			return fail(s, err);
	if (emit_attributes(s))
		return s->err;
	if (s->meta_track && n)
		meta_instant(s, CUPTRACE_META_SUMMARY, s->max_ts, m, n);
	else if (n)
		s->summary_pending = 1; /* no thread yet: at finish, with every entry */
	return s->err;
}

/* Idle-time flush from the writer thread: the pending chunk reaches the file about once a
 * second, so a killed process loses little. */
static int pf_tick(struct cuptrace_sink *sk)
{
	struct pf_sink *s = to_pf(sk);
	if (s->err || s->finished || !s->out)
		return s->err;
	int r = cuptrace_output_tick(s->out);
	return r ? fail(s, r) : 0;
}

static int pf_finish(struct cuptrace_sink *sk)
{
	struct pf_sink *s = to_pf(sk);
	int err;

	if (s->finished)
		return s->err ? s->err : -EINVAL;
	s->finished = 1;
	/* A process whose main thread never called CUDA: its first thread; one without a
	 * thread: its own track after all. */
	if (!s->meta_track)
		s->meta_track = s->first_thread;
	if (!s->err && s->process_uuid && !s->info_written)
		write_info(s);
	if (!s->err && s->process_uuid && s->summary_pending)
		meta_instant_all(s, CUPTRACE_META_SUMMARY, s->max_ts);
	/* Every packet is handed to the output as it is built: nothing is pending here. */
	err = cuptrace_output_close(s->out);
	s->out = NULL;
	return s->err ? s->err : err;
}

static void pf_destroy(struct cuptrace_sink *sk)
{
	struct pf_sink *s = to_pf(sk);

	if (!s)
		return;
	cuptrace_output_close(s->out);
	for (size_t i = 0; i < s->nseqs; i++)
		pf_seq_free(s->seqs[i]);
	free(s->seqs);
	cuptrace_u64map_free(&s->seq_of);
	for (size_t i = 0; i < s->nmeta; i++) {
		free(s->meta[i].key);
		free(s->meta[i].s);
	}
	free(s->meta);
	free(s->buf);
	free(s->ai);
	pf_stacks_free(s);
	free(s);
}

static const struct cuptrace_sink_ops pf_ops = {
    .name = "perfetto",
    .begin = pf_begin,
    .track = pf_track,
    .slice = pf_slice,
    .stack = pf_stack,
    .sample = pf_sample,
    .instant = pf_instant,
    .counter = pf_counter,
    .meta = pf_meta,
    .tick = pf_tick,
    .finish = pf_finish,
    .destroy = pf_destroy,
};

struct cuptrace_sink *cuptrace_perfetto_sink_new(struct cuptrace_output *out)
{
	struct pf_sink *s;

	if (!out) {
		errno = EINVAL;
		return NULL;
	}
	if (!(s = calloc(1, sizeof(*s)))) {
		cuptrace_output_close(out);
		errno = ENOMEM;
		return NULL;
	}
	s->base.ops = &pf_ops;
	s->out = out;
	cuptrace_u64map_init(&s->seq_of);
	return &s->base;
}
