/* Native frames -> function, file, line through libdw's offline reporting (symbolize.h). One
 * Dwfl per module file, cached by (path, build id). libdw is never linked: its headers give the
 * types (CUPTRACE_HAVE_LIBDW_HEADERS) and libdw.so.1 is loaded with dlopen on first use, so a
 * cuptrace built here starts on machines without elfutils. Without the headers at build time,
 * or libdw.so.1 at run time, every lookup fails and the first one says why. */
#include "symbolize/symbolize.h"
#include "common/log.h"
#include "common/util.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef CUPTRACE_HAVE_LIBDW_HEADERS
#include <elfutils/libdwfl.h>
#include <pthread.h>

/* libdw's entry points, looked up once (dlsym gives each symbol's default version, the one the
 * headers declare); the handle stays open for the life of the process. why: set when not ok. */
static struct {
	__typeof__(dwfl_begin) *begin;
	__typeof__(dwfl_end) *end;
	__typeof__(dwfl_report_offline) *report_offline;
	__typeof__(dwfl_report_end) *report_end;
	__typeof__(dwfl_module_build_id) *module_build_id;
	__typeof__(dwfl_module_getelf) *module_getelf;
	__typeof__(dwfl_module_addrname) *module_addrname;
	__typeof__(dwfl_module_getsrc) *module_getsrc;
	__typeof__(dwfl_lineinfo) *lineinfo;
	/* Dwfl_Callbacks members: libdw calls these through the pointers we give it. */
	__typeof__(dwfl_build_id_find_elf) *build_id_find_elf;
	__typeof__(dwfl_standard_find_debuginfo) *standard_find_debuginfo;
	__typeof__(dwfl_offline_section_address) *offline_section_address;
	int ok;
	char why[256];
} dw;
static pthread_once_t dw_once = PTHREAD_ONCE_INIT;

static void dw_load(void)
{
	/* CUPTRACE_LIBDW_NAME: a test hook only (tests name a missing library). */
	const char *name = getenv("CUPTRACE_LIBDW_NAME");
	if (!name || !*name)
		name = "libdw.so.1";
	void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		snprintf(dw.why, sizeof(dw.why),
		         "%s (elfutils) not found: native frames stay unsymbolized; apt install "
		         "libdw1",
		         name);
		return;
	}
#define SYM(field, sym)                                                                            \
	do {                                                                                       \
		*(void **)&dw.field = dlsym(h, #sym);                                              \
		if (!dw.field) {                                                                   \
			snprintf(dw.why, sizeof(dw.why),                                           \
			         "%s lacks %s: native frames stay unsymbolized", name, #sym);      \
			dlclose(h);                                                                \
			return;                                                                    \
		}                                                                                  \
	} while (0)
	SYM(begin, dwfl_begin);
	SYM(end, dwfl_end);
	SYM(report_offline, dwfl_report_offline);
	SYM(report_end, dwfl_report_end);
	SYM(module_build_id, dwfl_module_build_id);
	SYM(module_getelf, dwfl_module_getelf);
	SYM(module_addrname, dwfl_module_addrname);
	SYM(module_getsrc, dwfl_module_getsrc);
	SYM(lineinfo, dwfl_lineinfo);
	SYM(build_id_find_elf, dwfl_build_id_find_elf);
	SYM(standard_find_debuginfo, dwfl_standard_find_debuginfo);
	SYM(offline_section_address, dwfl_offline_section_address);
#undef SYM
	dw.ok = 1;
}

static int dw_ready(void)
{
	pthread_once(&dw_once, dw_load);
	return dw.ok;
}
#endif

struct symmod {
	const char *path, *build_id; /* as recorded (interned) */
	int state;                   /* 0: not tried, 1: loaded, -1: not usable */
#ifdef CUPTRACE_HAVE_LIBDW_HEADERS
	Dwfl *dwfl;
	Dwfl_Module *mod;
	GElf_Addr bias;
#endif
};

struct cuptrace_symbolizer {
	char **dirs; /* --symbol-dir, CUPTRACE_SYMBOL_PATH, /usr/lib/debug */
	size_t ndirs;
	char *dipath; /* libdw's debuginfo path: ":.debug:" then the dirs */
	struct cuptrace_strtab strs, keys;
	struct symmod *mods; /* by key id - 1 */
	size_t nmods, modcap;
	char *(*demangle)(const char *, char *, size_t *, int *);
	int said_unavailable;
#ifdef CUPTRACE_HAVE_LIBDW_HEADERS
	Dwfl_Callbacks cb;
#endif
};

int cuptrace_symbolizer_available(void)
{
#ifdef CUPTRACE_HAVE_LIBDW_HEADERS
	return dw_ready();
#else
	return 0;
#endif
}

static int add_dir(struct cuptrace_symbolizer *s, const char *d, size_t n)
{
	size_t cap = s->ndirs;
	if (!n)
		return 0;
	char **a = cuptrace_grow(s->dirs, &cap, s->ndirs + 1, sizeof(*a));
	if (!a)
		return -ENOMEM;
	s->dirs = a;
	if (!(a[s->ndirs] = strndup(d, n)))
		return -ENOMEM;
	s->ndirs++;
	return 0;
}

struct cuptrace_symbolizer *cuptrace_symbolizer_new(const char *const *dirs, size_t ndirs)
{
	struct cuptrace_symbolizer *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	cuptrace_strtab_init(&s->strs);
	cuptrace_strtab_init(&s->keys);
	int err = 0;
	for (size_t i = 0; i < ndirs && !err; i++)
		err = add_dir(s, dirs[i], strlen(dirs[i]));
	const char *env = getenv("CUPTRACE_SYMBOL_PATH");
	for (const char *p = env; p && *p && !err;) {
		const char *c = strchr(p, ':');
		size_t n = c ? (size_t)(c - p) : strlen(p);
		err = add_dir(s, p, n);
		p = c ? c + 1 : p + n;
	}
	if (!err)
		err = add_dir(s, "/usr/lib/debug", 14);
	size_t len = 8;
	for (size_t i = 0; i < s->ndirs; i++)
		len += strlen(s->dirs[i]) + 1;
	if (err || !(s->dipath = malloc(len))) {
		cuptrace_symbolizer_free(s);
		return NULL;
	}
	strcpy(s->dipath, ":.debug");
	for (size_t i = 0; i < s->ndirs; i++) {
		strcat(s->dipath, ":");
		strcat(s->dipath, s->dirs[i]);
	}
	/* C++ names: libstdc++'s demangler where the library is on the machine (it is not linked
	 * in: cuptrace is C). */
	void *h = dlopen("libstdc++.so.6", RTLD_LAZY | RTLD_LOCAL);
	if (h)
		*(void **)&s->demangle = dlsym(h, "__cxa_demangle");
	return s;
}

void cuptrace_symbolizer_free(struct cuptrace_symbolizer *s)
{
	if (!s)
		return;
#ifdef CUPTRACE_HAVE_LIBDW_HEADERS
	for (size_t i = 0; i < s->nmods; i++)
		if (s->mods[i].dwfl)
			dw.end(s->mods[i].dwfl);
#endif
	for (size_t i = 0; i < s->ndirs; i++)
		free(s->dirs[i]);
	free(s->dirs);
	free(s->dipath);
	free(s->mods);
	cuptrace_strtab_free(&s->strs);
	cuptrace_strtab_free(&s->keys);
	free(s);
}

static const char *keep(struct cuptrace_symbolizer *s, const char *str)
{
	uint32_t id = str ? cuptrace_strtab_intern(&s->strs, str, strlen(str)) : 0;
	return id ? cuptrace_strtab_str(&s->strs, id) : NULL;
}

#ifdef CUPTRACE_HAVE_LIBDW_HEADERS

static __thread struct cuptrace_symbolizer *cur; /* for the debuginfo callback */

static void hex_of(const unsigned char *b, int n, char *out)
{
	for (int i = 0; i < n; i++) {
		out[2 * i] = "0123456789abcdef"[b[i] >> 4];
		out[2 * i + 1] = "0123456789abcdef"[b[i] & 15];
	}
	out[n > 0 ? 2 * n : 0] = 0;
}

static int try_open(const char *path, char **name)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0 && !(*name = strdup(path))) {
		close(fd);
		return -1;
	}
	return fd;
}

/* libdw's own search (build-id directories and debuglink in the usual places, the symbol
 * directories among them), then the debuglink's name directly in each symbol directory. */
static int find_debuginfo(Dwfl_Module *mod, void **ud, const char *modname, Dwarf_Addr base,
                          const char *file_name, const char *debuglink, GElf_Word crc, char **out)
{
	int fd = dw.standard_find_debuginfo(mod, ud, modname, base, file_name, debuglink, crc, out);
	if (fd >= 0 || !cur)
		return fd;
	const unsigned char *bits;
	GElf_Addr vaddr;
	int n = dw.module_build_id(mod, &bits, &vaddr);
	char hex[256], path[4096];
	hex_of(bits, n > 0 && n < 127 ? n : 0, hex);
	for (size_t i = 0; i < cur->ndirs; i++) {
		if (hex[0] && hex[1] && hex[2]) {
			snprintf(path, sizeof(path), "%s/.build-id/%.2s/%s.debug", cur->dirs[i],
			         hex, hex + 2);
			if ((fd = try_open(path, out)) >= 0)
				return fd;
		}
		if (debuglink) {
			snprintf(path, sizeof(path), "%s/%s", cur->dirs[i], debuglink);
			if ((fd = try_open(path, out)) >= 0)
				return fd;
		}
	}
	return -1;
}

/* Reports path offline into a fresh Dwfl; keeps it if its build id is want (or either has
 * none). 1 kept, 0 not this one (*mismatch set if the ids differ). */
static int load(struct cuptrace_symbolizer *s, struct symmod *m, const char *path, const char *want,
                int *mismatch)
{
	if (access(path, R_OK))
		return 0;
	Dwfl *d = dw.begin(&s->cb);
	Dwfl_Module *mod = d ? dw.report_offline(d, path, path, -1) : NULL;
	if (!mod || dw.report_end(d, NULL, NULL)) {
		if (d)
			dw.end(d);
		return 0;
	}
	const unsigned char *bits;
	GElf_Addr vaddr;
	char hex[256];
	int n = dw.module_build_id(mod, &bits, &vaddr);
	hex_of(bits, n > 0 && n < 127 ? n : 0, hex);
	if (want && *want && hex[0] && strcmp(hex, want)) {
		*mismatch = 1;
		dw.end(d);
		return 0;
	}
	m->dwfl = d;
	m->mod = mod;
	if (!dw.module_getelf(mod, &m->bias)) {
		dw.end(d);
		m->dwfl = NULL;
		return 0;
	}
	return 1;
}

static void open_module(struct cuptrace_symbolizer *s, struct symmod *m)
{
	const char *want = m->build_id;
	int mismatch = 0;
	char path[4096];
	if (m->path && load(s, m, m->path, want, &mismatch)) {
		m->state = 1;
		return;
	}
	const char *base = m->path ? strrchr(m->path, '/') : NULL;
	base = base ? base + 1 : m->path;
	for (size_t i = 0; i < s->ndirs; i++) {
		if (want && strlen(want) > 2) {
			snprintf(path, sizeof(path), "%s/.build-id/%.2s/%s", s->dirs[i], want,
			         want + 2);
			if (load(s, m, path, want, &mismatch))
				goto found;
			snprintf(path, sizeof(path), "%s/.build-id/%.2s/%s.debug", s->dirs[i], want,
			         want + 2);
			if (load(s, m, path, want, &mismatch))
				goto found;
		}
		if (base && *base) {
			snprintf(path, sizeof(path), "%s/%s", s->dirs[i], base);
			if (load(s, m, path, want, &mismatch))
				goto found;
		}
	}
	m->state = -1;
	if (mismatch)
		cuptrace_warn("symbolize: %s: the file here is not the one recorded (build id %s "
		              "differs), and no file with that build id was found: its frames stay "
		              "unsymbolized (--symbol-dir DIR to say where it is)",
		              m->path ? m->path : "?", want);
	else
		cuptrace_warn("symbolize: %s (build id %s) not found: its frames stay unsymbolized "
		              "(--symbol-dir DIR to say where it is)",
		              m->path ? m->path : "?", want ? want : "none");
	return;
found:
	m->state = 1;
}

static int lookup(struct cuptrace_symbolizer *s, struct symmod *m, uint64_t rel_pc,
                  struct cuptrace_symbol *out)
{
	/* A return address: the call is the instruction before it. */
	Dwarf_Addr a = m->bias + (rel_pc ? rel_pc - 1 : 0);
	const char *fn = dw.module_addrname(m->mod, a);
	Dwfl_Line *l = dw.module_getsrc(m->mod, a);
	int line = 0;
	const char *file = l ? dw.lineinfo(l, NULL, &line, NULL, NULL, NULL) : NULL;
	if (fn && s->demangle && fn[0] == '_' && fn[1] == 'Z') {
		int st = -1;
		char *d = s->demangle(fn, NULL, NULL, &st);
		if (d && !st)
			out->function = keep(s, d);
		free(d);
	}
	if (!out->function)
		out->function = keep(s, fn);
	out->file = keep(s, file);
	out->line = line > 0 ? (uint32_t)line : 0;
	return out->function || out->file ? 0 : -ENOENT;
}

#endif /* CUPTRACE_HAVE_LIBDW_HEADERS */

int cuptrace_symbolize(struct cuptrace_symbolizer *s, const char *module, const char *build_id,
                       uint64_t rel_pc, struct cuptrace_symbol *out)
{
	memset(out, 0, sizeof(*out));
#ifndef CUPTRACE_HAVE_LIBDW_HEADERS
	if (!s->said_unavailable) {
		s->said_unavailable = 1;
		cuptrace_warn("symbolize: this cuptrace was built without libdw (elfutils' "
		              "libdw-dev): native frames stay unsymbolized");
	}
	(void)module, (void)build_id, (void)rel_pc, (void)keep;
	return -ENOENT;
#else
	if (!dw_ready()) {
		if (!s->said_unavailable) {
			s->said_unavailable = 1;
			cuptrace_warn("symbolize: %s", dw.why);
		}
		return -ENOENT;
	}
	if (!module && !build_id)
		return -ENOENT;
	char key[8192];
	int kn =
	    snprintf(key, sizeof(key), "%s%c%s", module ? module : "", 0, build_id ? build_id : "");
	if (kn < 0 || (size_t)kn >= sizeof(key))
		return -ENOENT;
	/* Room first: key ids and mods stay in step (id k is mods[k - 1]). */
	if (CUPTRACE_GROW(s->mods, s->modcap, s->nmods + 1))
		return -ENOMEM;
	size_t before = s->keys.n;
	uint32_t id = cuptrace_strtab_intern(&s->keys, key, (size_t)kn);
	if (!id)
		return -ENOMEM;
	if (s->keys.n != before) {
		s->mods[s->nmods++] =
		    (struct symmod){.path = keep(s, module), .build_id = keep(s, build_id)};
	}
	struct symmod *m = &s->mods[id - 1];
	if (!s->cb.find_elf) {
		s->cb = (Dwfl_Callbacks){.find_elf = dw.build_id_find_elf,
		                         .find_debuginfo = find_debuginfo,
		                         .section_address = dw.offline_section_address,
		                         .debuginfo_path = &s->dipath};
	}
	cur = s;
	if (!m->state)
		open_module(s, m);
	int rc = m->state > 0 ? lookup(s, m, rel_pc, out) : -ENOENT;
	cur = NULL;
	return rc;
#endif
}
