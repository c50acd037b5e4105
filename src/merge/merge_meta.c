/* Each input's trace info and summary kept in a side-by-side merge, as labelled instants
 * (merge_meta.h). */
#include "merge/merge_meta.h"
#include "common/util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Sets key in list (replacing its value if present); 0 or -ENOMEM. */
static int put(struct merge_meta_entry **list, size_t *n, size_t *cap, const char *key, int is_int,
               int64_t i, const char *s)
{
	struct merge_meta_entry *e = NULL;
	char *v = NULL;

	if (!key)
		return 0;
	if (!is_int && !(v = strdup(s ? s : "")))
		return -ENOMEM;
	for (size_t k = 0; k < *n && !e; k++)
		if (!strcmp((*list)[k].key, key))
			e = &(*list)[k];
	if (!e) {
		char *kd = strdup(key);
		if (!kd || CUPTRACE_GROW(*list, *cap, *n + 1)) {
			free(kd);
			free(v);
			return -ENOMEM;
		}
		e = &(*list)[(*n)++];
		*e = (struct merge_meta_entry){.key = kd};
	}
	free(e->s);
	e->is_int = is_int;
	e->i = i;
	e->s = v;
	return 0;
}

int merge_meta_info(struct merge_meta *mm, const struct cuptrace_trace_info *info)
{
	struct merge_meta_entry **l = &mm->info;
	size_t *n = &mm->ninfo, *c = &mm->infocap;
	int err = put(l, n, c, "pid", 1, info->pid, NULL);

	if (!err && info->process_name)
		err = put(l, n, c, "process_name", 0, 0, info->process_name);
	if (!err && info->hostname)
		err = put(l, n, c, "hostname", 0, 0, info->hostname);
	if (!err)
		err = put(l, n, c, "start_realtime_ns", 1, info->start_realtime_ns, NULL);
	if (!err)
		err = put(l, n, c, "start_boottime_ns", 1, info->start_boottime_ns, NULL);
	for (size_t k = 0; !err && k < info->nmeta; k++)
		err = put(l, n, c, info->meta[k].key, info->meta[k].is_int, info->meta[k].i,
		          info->meta[k].s);
	return err;
}

int merge_meta_summary(struct merge_meta *mm, const struct cuptrace_meta *m, size_t n)
{
	int err = 0;
	for (size_t k = 0; !err && k < n; k++)
		err = put(&mm->sum, &mm->nsum, &mm->sumcap, m[k].key, m[k].is_int, m[k].i, m[k].s);
	return err;
}

int merge_meta_write(const struct merge_meta *mm, int summary, const char *label, const char *path,
                     struct cuptrace_sink *out, uint64_t track, int64_t ts)
{
	const struct merge_meta_entry *l = summary ? mm->sum : mm->info;
	size_t n = summary ? mm->nsum : mm->ninfo;
	const char *what = summary ? MERGE_META_SUMMARY : MERGE_META_INFO;

	if (summary && !n)
		return 0;
	size_t len = strlen(what) + strlen(label) + 4;
	char *name = malloc(len);
	struct cuptrace_arg *args = calloc(n + 2, sizeof(*args));
	int err = -ENOMEM;

	if (!name || !args)
		goto out;
	snprintf(name, len, "%s (%s)", what, label);
	args[0] =
	    (struct cuptrace_arg){.key = "merge_input", .type = CUPTRACE_ARG_STRING, .v.s = label};
	args[1] = (struct cuptrace_arg){
	    .key = "merge_file", .type = CUPTRACE_ARG_STRING, .v.s = path ? path : ""};
	for (size_t k = 0; k < n; k++) {
		args[k + 2].key = l[k].key;
		if (l[k].is_int) {
			args[k + 2].type = CUPTRACE_ARG_INT;
			args[k + 2].v.i = l[k].i;
		} else {
			args[k + 2].type = CUPTRACE_ARG_STRING;
			args[k + 2].v.s = l[k].s;
		}
	}
	struct cuptrace_instant e = {.track_uuid = track,
	                             .ts = ts,
	                             .name = name,
	                             .category = CUPTRACE_META_CATEGORY,
	                             .args = args,
	                             .nargs = n + 2};
	err = out->ops->instant(out, &e);
out:
	free(name);
	free(args);
	return err;
}

static void free_list(struct merge_meta_entry *l, size_t n)
{
	for (size_t k = 0; l && k < n; k++) {
		free(l[k].key);
		free(l[k].s);
	}
	free(l);
}

void merge_meta_free(struct merge_meta *mm)
{
	if (!mm)
		return;
	free_list(mm->info, mm->ninfo);
	free_list(mm->sum, mm->nsum);
	memset(mm, 0, sizeof(*mm));
}
