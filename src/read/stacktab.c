/* The call-stack table: content-addressed storage of stacks for the readers and the sinks that
 * forward stacks (stacktab.h). */
#include "read/stacktab.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void cuptrace_stacktab_init(struct cuptrace_stacktab *t)
{
	memset(t, 0, sizeof(*t));
	cuptrace_strtab_init(&t->strs);
	cuptrace_strtab_init(&t->keys);
}

void cuptrace_stacktab_free(struct cuptrace_stacktab *t)
{
	if (!t)
		return;
	cuptrace_strtab_free(&t->strs);
	cuptrace_strtab_free(&t->keys);
	free(t->frames);
	free(t->stacks);
	free(t->kbuf);
	memset(t, 0, sizeof(*t));
}

/* A string's interned id (0 for NULL), or UINT32_MAX on allocation failure. */
static uint32_t str_id(struct cuptrace_stacktab *t, const char *s)
{
	if (!s)
		return 0;
	uint32_t id = cuptrace_strtab_intern(&t->strs, s, strlen(s));
	return id ? id : UINT32_MAX;
}

struct fkey { /* one frame's content in a key: string ids, so equal strings compare equal */
	uint32_t kind, function, file, line, module, build_id;
	uint64_t rel_pc;
};

uint32_t cuptrace_stacktab_add(struct cuptrace_stacktab *t, const struct cuptrace_frame *frames,
                               size_t n)
{
	size_t kn = n * sizeof(struct fkey);
	if (n > SIZE_MAX / sizeof(struct fkey) / 2 || CUPTRACE_GROW(t->kbuf, t->kcap, kn ? kn : 1))
		return 0;
	for (size_t i = 0; i < n; i++) {
		const struct cuptrace_frame *f = &frames[i];
		struct fkey k = {
		    .kind = (uint32_t)f->kind,
		    .function = str_id(t, f->function),
		    .file = str_id(t, f->file),
		    .line = f->line,
		    .module = str_id(t, f->module),
		    .build_id = str_id(t, f->build_id),
		    .rel_pc = f->rel_pc,
		};
		if (k.function == UINT32_MAX || k.file == UINT32_MAX || k.module == UINT32_MAX ||
		    k.build_id == UINT32_MAX)
			return 0;
		memcpy(t->kbuf + i * sizeof(k), &k, sizeof(k));
	}
	/* Room first, so that a key is never interned without its stack: ids and stacks stay in
	 * step (id k is stacks[k - 1]). */
	if (CUPTRACE_GROW(t->stacks, t->scap, t->nstacks + 1) ||
	    CUPTRACE_GROW(t->frames, t->fcap, t->nframes + n))
		return 0;
	size_t before = t->keys.n;
	uint32_t id = cuptrace_strtab_intern(&t->keys, (const char *)t->kbuf, kn);
	if (!id || t->keys.n == before)
		return id; /* failure, or a stack already stored */
	t->stacks[t->nstacks++] =
	    (struct cuptrace_stab_entry){.frame0 = t->nframes, .nframes = n, .sent = 0};
	for (size_t i = 0; i < n; i++) {
		struct fkey k;
		memcpy(&k, t->kbuf + i * sizeof(k), sizeof(k));
		t->frames[t->nframes++] = (struct cuptrace_frame){
		    .kind = (enum cuptrace_frame_kind)k.kind,
		    .function = k.function ? cuptrace_strtab_str(&t->strs, k.function) : NULL,
		    .file = k.file ? cuptrace_strtab_str(&t->strs, k.file) : NULL,
		    .line = k.line,
		    .module = k.module ? cuptrace_strtab_str(&t->strs, k.module) : NULL,
		    .build_id = k.build_id ? cuptrace_strtab_str(&t->strs, k.build_id) : NULL,
		    .rel_pc = k.rel_pc,
		};
	}
	return id;
}

int cuptrace_stacktab_get(const struct cuptrace_stacktab *t, uint32_t id,
                          struct cuptrace_stack *out)
{
	if (!id || id > t->nstacks)
		return -ENOENT;
	const struct cuptrace_stab_entry *e = &t->stacks[id - 1];
	*out = (struct cuptrace_stack){
	    .id = id, .frames = e->nframes ? t->frames + e->frame0 : NULL, .nframes = e->nframes};
	return 0;
}

int cuptrace_stacktab_send(struct cuptrace_stacktab *t, uint32_t id, struct cuptrace_sink *sink,
                           uint64_t id_offset)
{
	struct cuptrace_stack st;
	if (!sink || !sink->ops->stack || cuptrace_stacktab_get(t, id, &st))
		return 0;
	struct cuptrace_stab_entry *e = &t->stacks[id - 1];
	if (e->sent)
		return 0;
	e->sent = 1;
	st.id += id_offset;
	return sink->ops->stack(sink, &st);
}

/* One line of a text stack into f (strings point into line, which the caller NUL-terminates at
 * the right places: line is writable). Forms: "function (file:line)", "function (file)",
 * "function", "function (module+0xPC)", "module+0xPC"; "??" is an unknown function. */
static void parse_line(char *line, struct cuptrace_frame *f)
{
	size_t n = strlen(line);
	char *fn = line, *loc = NULL;
	memset(f, 0, sizeof(*f));
	if (n && line[n - 1] == ')') {
		char *open = NULL;
		for (char *p = line; (p = strstr(p, " (")); p++)
			open = p;
		if (open) {
			*open = 0;
			line[n - 1] = 0;
			loc = open + 2;
		}
	} else if (strstr(line, "+0x") && !strchr(line, ' ')) {
		loc = line;
		fn = NULL;
	}
	if (fn && *fn && strcmp(fn, "??"))
		f->function = fn;
	f->kind = CUPTRACE_FRAME_PYTHON;
	if (!loc)
		return;
	char *plus = strstr(loc, "+0x"), *colon = strrchr(loc, ':');
	if (plus && !strchr(plus + 3, ':') && !strchr(plus + 3, ' ')) {
		char *end;
		unsigned long long pc = strtoull(plus + 3, &end, 16);
		if (!*end) {
			*plus = 0;
			f->kind = CUPTRACE_FRAME_NATIVE;
			f->module = *loc ? loc : NULL;
			f->rel_pc = pc;
			return;
		}
	}
	if (colon && colon[1]) {
		char *end;
		unsigned long v = strtoul(colon + 1, &end, 10);
		if (!*end && v <= UINT32_MAX) {
			*colon = 0;
			f->line = (uint32_t)v;
		}
	}
	f->file = *loc ? loc : NULL;
	/* A native frame that was symbolized before it was written keeps its file and line but
	 * loses its module here; ".py" and "<frozen ...>" files are Python's. */
	if (f->file && !cuptrace_ends_with(f->file, ".py") && f->file[0] != '<')
		f->kind = CUPTRACE_FRAME_NATIVE;
}

uint32_t cuptrace_stacktab_add_text(struct cuptrace_stacktab *t, const char *text, size_t len)
{
	char *buf = malloc(len + 1);
	size_t n = 0, cap = 0;
	struct cuptrace_frame *fr = NULL;
	uint32_t id = 0;
	if (!buf)
		return 0;
	memcpy(buf, text, len);
	buf[len] = 0;
	for (char *p = buf, *nl; p && *p; p = nl) {
		if ((nl = strchr(p, '\n')))
			*nl++ = 0;
		if (!*p)
			continue;
		if (CUPTRACE_GROW(fr, cap, n + 1))
			goto out;
		parse_line(p, &fr[n++]);
	}
	/* The text is innermost first; stacks are outermost first. */
	for (size_t i = 0; i < n / 2; i++) {
		struct cuptrace_frame tmp = fr[i];
		fr[i] = fr[n - 1 - i];
		fr[n - 1 - i] = tmp;
	}
	id = cuptrace_stacktab_add(t, fr, n);
out:
	free(fr);
	free(buf);
	return id;
}

int cuptrace_stack_format_line(const struct cuptrace_frame *f, char *buf, size_t size)
{
	if (f->function || f->file || f->kind == CUPTRACE_FRAME_PYTHON || !f->module) {
		if (f->file && f->line)
			return snprintf(buf, size, "%s (%s:%u)", f->function ? f->function : "??",
			                f->file, f->line);
		if (f->file)
			return snprintf(buf, size, "%s (%s)", f->function ? f->function : "??",
			                f->file);
		if (!f->module)
			return snprintf(buf, size, "%s", f->function ? f->function : "??");
	}
	return snprintf(buf, size, "%s (%s+0x%llx)", f->function ? f->function : "??", f->module,
	                (unsigned long long)f->rel_pc);
}
