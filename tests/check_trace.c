/* check_trace: asserts what a trace file holds; used by the GPU tests after recording.
 *   check_trace FILE [--clean] [--count CAT[:NAME]=N] [--at-least CAT[:NAME]=N]
 *                    [--threads PREFIX=N] [--flows N] [--meta KEY] [--dump-tracks]
 *                    [--allow-unlinked N] [--groups N] [--layout] [--view none|first-kernel|any]
 *                    [--dump-meta-track]
 * FILE: any format cuptrace reads (read/read.h).
 * --clean: the file obeys Perfetto's import rules (all reader checks zero, for .pftrace), no
 * partial overlap on any track, no negative time, every GPU slice ends a flow from an API call.
 * Counts match slices by category and name prefix.
 * --layout: the timeline as ui.perfetto.dev draws it (src/format/TIMELINE.md): no
 * event on a process's own track (a row named like the process), no process_labels (drawn
 * across its header), no descriptor without events on it or below, and at most one CUPTI
 * overhead track name per process (lanes of one name are one row; the only check on JSON).
 * --view: where the UI opens (the trace's service event): nowhere but the start (none), or just
 * before the first kernel, by at most 2% of what follows (first-kernel), or anywhere (any: printed
 * for tests/view_check.py, which computes where from the capture).
 * Prints what it checked; exit 1 on failure. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stats/stats.h"
#include "format/formats.h"
#include "read/read.h"

static int failures;

#define FAIL(...)                                                                                  \
	do {                                                                                       \
		fprintf(stderr, "check_trace: FAIL: " __VA_ARGS__);                                \
		fputc('\n', stderr);                                                               \
		failures++;                                                                        \
	} while (0)

static uint64_t count_slices(const struct cuptrace_stats *st, const char *spec)
{
	char cat[512], *name = NULL;
	snprintf(cat, sizeof(cat), "%s", spec);
	char *colon = strchr(cat, ':');
	if (colon) {
		*colon = 0;
		name = colon + 1;
	}
	uint64_t n = 0;
	for (size_t i = 0; i < st->nnames; i++)
		if (!strcmp(st->names[i].category, cat) &&
		    (!name || !strncmp(st->names[i].name, name, strlen(name))))
			n += st->names[i].count;
	return n;
}

static int parse_eq(const char *arg, char *key, size_t n, long long *val)
{
	const char *eq = strrchr(arg, '=');
	if (!eq || (size_t)(eq - arg) >= n)
		return -1;
	memcpy(key, arg, (size_t)(eq - arg));
	key[eq - arg] = 0;
	*val = atoll(eq + 1);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: check_trace FILE [checks]\n");
		return 2;
	}
	const char *path = argv[1];
	struct cuptrace_stats st;
	memset(&st, 0, sizeof(st));
	struct cuptrace_sink *sink = cuptrace_stats_sink_new(&st);
	struct cuptrace_pf_check chk;
	memset(&chk, 0, sizeof(chk));
	/* Perfetto through its reader, for the import-rule checks; the rest as stats reads it. */
	int pf = 0;
	FILE *f = fopen(path, "rb");
	if (f) {
		unsigned char head[4096];
		size_t n = fread(head, 1, sizeof(head), f);
		pf = cuptrace_sniff(head, n) == CUPTRACE_FORMAT_PERFETTO;
		fclose(f);
	}
	int r = pf ? cuptrace_perfetto_read(path, sink, &chk) : cuptrace_read_trace(path, sink, 0);
	if (!r)
		r = sink->ops->finish(sink);
	cuptrace_sink_destroy(sink);
	if (r) {
		fprintf(stderr, "check_trace: cannot read %s (%d)\n", path, r);
		return 1;
	}
	printf("%s: %llu tracks, %llu slices, %llu instants, %llu counter values, %llu flows, "
	       "%llu/%llu GPU slices with a flow in\n",
	       path, (unsigned long long)st.tracks, (unsigned long long)st.slices,
	       (unsigned long long)st.instants, (unsigned long long)st.counters,
	       (unsigned long long)st.flows, (unsigned long long)st.gpu_slices_with_flow_in,
	       (unsigned long long)st.gpu_slices);
	/* A program stopped by a signal while launching may lose the API record of its last
	 * launch on each thread, and a graph launched from the GPU has no API call at all:
	 * --allow-unlinked N tolerates that many GPU slices without a flow. */
	long long allow_unlinked = 0;
	for (int i = 2; i + 1 < argc; i++)
		if (!strcmp(argv[i], "--allow-unlinked"))
			allow_unlinked = atoll(argv[i + 1]);
	for (int i = 2; i < argc; i++) {
		char key[256];
		long long v;
		if (!strcmp(argv[i], "--allow-unlinked")) {
			i++;
		} else if (!strcmp(argv[i], "--clean")) {
			uint64_t ov = 0;
			for (size_t t = 0; t < st.ntrk; t++)
				ov += st.trk[t].partial_overlaps;
			const struct {
				const char *what;
				uint64_t n;
			} bad[] = {
			    {"partially overlapping slice pairs", ov},
			    {"negative timestamps", st.negative_ts},
			    {"events on undeclared tracks", st.unknown_track_events},
			    {"TrackEvents without sequence id", chk.missing_sequence_id},
			    {"TrackEvents without timestamp", chk.missing_timestamp},
			    {"sequences not starting with a cleared state",
			     chk.seq_first_not_cleared},
			    {"interned ids used before definition", chk.unknown_iid},
			    {"counter values before their descriptor",
			     chk.counter_before_descriptor},
			    {"events on unknown tracks", chk.event_on_unknown_track},
			    {"slice ends without begin", chk.end_without_begin},
			    {"unterminated slices", chk.unterminated_slices},
			    {"misnested slices", chk.partial_overlaps},
			    {"TrackEvents at a negative Perfetto time (reader)",
			     chk.negative_timestamps},
			    {"track descriptors at a negative Perfetto time",
			     chk.negative_packet_timestamps},
			    {"events before the clock snapshot", chk.before_snapshot},
			    {"duplicate thread uuids", chk.duplicate_thread_uuid},
			    {"duplicate process uuids", chk.duplicate_process_uuid},
			    {"clock errors", chk.clock_errors},
			    {"corrupt packets", chk.corrupt},
			    {"truncated bytes", chk.truncated_bytes},
			};
			for (size_t b = 0; b < sizeof(bad) / sizeof(bad[0]); b++)
				if (bad[b].n)
					FAIL("%s: %llu %s", path, (unsigned long long)bad[b].n,
					     bad[b].what);
			if (st.gpu_slices - st.gpu_slices_with_flow_in > (uint64_t)allow_unlinked)
				FAIL("%llu of %llu GPU slices have no incoming flow",
				     (unsigned long long)(st.gpu_slices -
				                          st.gpu_slices_with_flow_in),
				     (unsigned long long)st.gpu_slices);
			printf("  clean: ok\n");
		} else if ((!strcmp(argv[i], "--count") || !strcmp(argv[i], "--at-least")) &&
		           i + 1 < argc && !parse_eq(argv[i + 1], key, sizeof(key), &v)) {
			uint64_t n = count_slices(&st, key);
			int exact = !strcmp(argv[i], "--count");
			printf("  %s: %llu (%s %lld)\n", key, (unsigned long long)n,
			       exact ? "expected" : "at least", v);
			if (exact ? n != (uint64_t)v : n < (uint64_t)v)
				FAIL("%s: %llu slices, expected %s%lld", key, (unsigned long long)n,
				     exact ? "" : ">= ", v);
			i++;
		} else if (!strcmp(argv[i], "--threads") && i + 1 < argc &&
		           !parse_eq(argv[i + 1], key, sizeof(key), &v)) {
			long long n = 0;
			for (size_t t = 0; t < st.ntrk; t++)
				if (st.trk[t].kind == CUPTRACE_TRACK_THREAD &&
				    !strncmp(st.trk[t].name, key, strlen(key)))
					n++;
			printf("  threads named %s*: %lld\n", key, n);
			if (n != v)
				FAIL("%lld threads named %s*, expected %lld", n, key, v);
			i++;
		} else if (!strcmp(argv[i], "--groups") && i + 1 < argc) {
			/* GPU groups: exactly N, each holding GPU slices */
			long long ngroups = atoll(argv[++i]), n = 0, busy = 0;
			for (size_t t = 0; t < st.ntrk; t++) {
				if (st.trk[t].kind != CUPTRACE_TRACK_GROUP)
					continue;
				n++;
				uint64_t sl = 0;
				for (size_t u = 0; u < st.ntrk; u++)
					if (st.trk[u].group_uuid == st.trk[t].uuid)
						sl += st.trk[u].slices;
				busy += sl > 0;
				printf("  group %s: %llu slices\n", st.trk[t].name,
				       (unsigned long long)sl);
			}
			if (n != ngroups || busy != ngroups)
				FAIL("%lld GPU groups (%lld with slices), expected %lld", n, busy,
				     ngroups);
		} else if (!strcmp(argv[i], "--flows") && i + 1 < argc) {
			long long want = atoll(argv[++i]);
			printf("  flows: %llu\n", (unsigned long long)st.flows);
			if ((long long)st.flows != want)
				FAIL("%llu flows, expected %lld", (unsigned long long)st.flows,
				     want);
		} else if (!strcmp(argv[i], "--dump-tracks")) {
			/* name, slices, instants, counter values: one line per track */
			for (size_t t = 0; t < st.ntrk; t++)
				printf("track\t%s\t%llu\t%llu\t%llu\n", st.trk[t].name,
				       (unsigned long long)st.trk[t].slices,
				       (unsigned long long)st.trk[t].instants,
				       (unsigned long long)st.trk[t].counters);
		} else if (!strcmp(argv[i], "--layout")) {
			/* JSON: the overhead tracks only (chk is Perfetto's) */
			/* CUPTI overhead track names per process: distinct names, by pid */
			uint64_t worst = 0;
			for (size_t t = 0; t < st.ntrk; t++) {
				const struct cuptrace_stats_track *a = &st.trk[t];
				if (strncmp(a->name, "CUPTI overhead", 14))
					continue;
				uint64_t names = 0;
				for (size_t u = 0; u < st.ntrk; u++) {
					const struct cuptrace_stats_track *b = &st.trk[u];
					int first = 1;
					if (b->pid != a->pid ||
					    strncmp(b->name, "CUPTI overhead", 14))
						continue;
					for (size_t w = 0; w < u && first; w++)
						first = !(st.trk[w].pid == b->pid &&
						          !strcmp(st.trk[w].name, b->name));
					names += first;
				}
				worst = names > worst ? names : worst;
			}
			printf("  layout: %llu events on process tracks, %llu process labels, "
			       "%llu tracks without events, at most %llu overhead tracks per "
			       "process\n",
			       (unsigned long long)chk.process_track_events,
			       (unsigned long long)chk.process_labels,
			       (unsigned long long)chk.tracks_without_events,
			       (unsigned long long)worst);
			if (chk.process_track_events || chk.process_labels ||
			    chk.tracks_without_events || worst > 1)
				FAIL("%s: timeline layout (see above)", path);
		} else if (!strcmp(argv[i], "--view") && i + 1 < argc) {
			const char *want = argv[++i];
			int64_t gpu = INT64_MAX;
			for (size_t t = 0; t < st.ntrk; t++)
				if (st.trk[t].group_uuid && st.trk[t].kernels &&
				    st.trk[t].first_kernel_ts < gpu)
					gpu = st.trk[t].first_kernel_ts;
			printf("  view start: %s%lld ns (first kernel at %lld ns, end %lld ns)\n",
			       chk.has_view_start ? "" : "none, ", (long long)chk.view_start_ns,
			       (long long)(gpu == INT64_MAX ? -1 : gpu), (long long)st.max_ts);
			if (!strcmp(want, "any")) {
				/* printed only: tests/view_check.py computes where it should be */
			} else if (!strcmp(want, "none")) {
				if (chk.has_view_start)
					FAIL("a view start, expected none");
			} else if (!chk.has_view_start || gpu == INT64_MAX ||
			           chk.view_start_ns <= 0 || chk.view_start_ns > gpu ||
			           gpu - chk.view_start_ns > (st.max_ts - gpu) / 50) {
				FAIL("view start %lld ns is not just before the first kernel",
				     (long long)chk.view_start_ns);
			}
		} else if (!strcmp(argv[i], "--dump-meta-track")) {
			/* the track of the trace info/summary instants that --dump-tracks leaves
			 * out (the reader does not replay them; trace_processor counts them) */
			for (size_t t = 0; t < st.ntrk && chk.meta_instants; t++)
				if (st.trk[t].uuid == chk.meta_track)
					printf("meta\t%s\t%llu\n", st.trk[t].name,
					       (unsigned long long)chk.meta_instants);
		} else if (!strcmp(argv[i], "--meta") && i + 1 < argc) {
			const char *k = argv[++i];
			int found = 0;
			for (size_t m = 0; m < st.nmeta; m++)
				if (!strcmp(st.meta[m].key, k))
					found = 1;
			printf("  metadata %s: %s\n", k, found ? "present" : "missing");
			if (!found)
				FAIL("metadata key %s missing", k);
		} else {
			fprintf(stderr, "check_trace: bad argument %s\n", argv[i]);
			cuptrace_stats_free(&st);
			return 2;
		}
	}
	cuptrace_stats_free(&st);
	return failures ? 1 : 0;
}
