/* Native return addresses and the modules they lie in (see nstack.h). */
#define _GNU_SOURCE
#include "inject/nstack.h"

#include <dlfcn.h>
#include <elf.h>
#include <execinfo.h>
#include <link.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The unwinder: libunwind's unw_backtrace where libunwind.so.8 is installed (Debian's and
 * Ubuntu's libunwind8; it caches what it learns of each return address, and measured 128 ns for
 * 17 frames against glibc backtrace()'s 1,950 on this project's CPU machine), else glibc's
 * backtrace(), which interprets .eh_frame afresh at every frame. Both give the same return
 * addresses (the first entry, inside this function, differs: it is ours and left out).
 * CUPTRACE_UNWINDER=glibc keeps backtrace() (a test hook, to run both paths). */
typedef int (*unw_backtrace_fn)(void **buf, int size);
static unw_backtrace_fn unw_bt;
static pthread_once_t unw_once = PTHREAD_ONCE_INIT;

static void load_unwinder(void)
{
	const char *force = getenv("CUPTRACE_UNWINDER");
	if (force && !strcmp(force, "glibc"))
		return;
	void *h = dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
	if (h && !(unw_bt = (unw_backtrace_fn)dlsym(h, "unw_backtrace")))
		dlclose(h);
}

const char *cuptrace_nstack_unwinder(void)
{
	pthread_once(&unw_once, load_unwinder);
	return unw_bt ? "libunwind" : "glibc";
}

size_t cuptrace_nstack_walk(uint64_t *pcs, size_t max)
{
	void *buf[128];
	pthread_once(&unw_once, load_unwinder);
	int lim = max < 128 ? (int)max : 128;
	int n = unw_bt ? unw_bt(buf, lim) : backtrace(buf, lim);
	for (int i = 0; i < n; i++)
		pcs[i] = (uint64_t)(uintptr_t)buf[i];
	return n > 0 ? (size_t)n : 0;
}

static pthread_mutex_t mods_lock = PTHREAD_MUTEX_INITIALIZER;

void cuptrace_nstack_lock(void)
{
	pthread_mutex_lock(&mods_lock);
}

void cuptrace_nstack_unlock(void)
{
	pthread_mutex_unlock(&mods_lock);
}

static struct {
	struct cuptrace_module *m;
	size_t n, cap;
	unsigned long long adds, subs; /* the loader's counts when the list was read */
	char self[4096];               /* our own library's path */
} mods;

static char *hex(const uint8_t *p, size_t n)
{
	static const char d[] = "0123456789abcdef";
	char *s = n && n <= 64 ? malloc(2 * n + 1) : NULL;
	if (!s)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		s[2 * i] = d[p[i] >> 4];
		s[2 * i + 1] = d[p[i] & 15];
	}
	s[2 * n] = 0;
	return s;
}

/* The GNU build id in a loaded object's PT_NOTE segments. */
static char *build_id(const struct dl_phdr_info *info)
{
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_NOTE)
			continue;
		const uint8_t *p = (const uint8_t *)(info->dlpi_addr + ph->p_vaddr);
		size_t off = 0;
		while (off + sizeof(ElfW(Nhdr)) <= ph->p_memsz) {
			const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)(p + off);
			size_t name = (nh->n_namesz + 3) & ~3u, desc = (nh->n_descsz + 3) & ~3u;
			const uint8_t *np = p + off + sizeof(*nh);
			if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 &&
			    !memcmp(np, "GNU", 4))
				return hex(np + name, nh->n_descsz);
			off += sizeof(*nh) + name + desc;
		}
	}
	return NULL;
}

static int is_ours(const char *path)
{
	const char *b = strrchr(path, '/');
	b = b ? b + 1 : path;
	return !strcmp(path, mods.self) || !strncmp(b, "libcupti.so", 11) ||
	       !strncmp(b, "libcuda.so", 10);
}

static int add_module(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	(void)arg;
	uint64_t lo = UINT64_MAX, hi = 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_LOAD)
			continue;
		uint64_t a = info->dlpi_addr + ph->p_vaddr;
		lo = a < lo ? a : lo;
		hi = a + ph->p_memsz > hi ? a + ph->p_memsz : hi;
	}
	if (lo >= hi)
		return 0;
	if (mods.n == mods.cap) {
		size_t cap = mods.cap ? 2 * mods.cap : 64;
		struct cuptrace_module *m = realloc(mods.m, cap * sizeof(*m));
		if (!m)
			return 1;
		mods.m = m;
		mods.cap = cap;
	}
	char exe[4096];
	const char *path = info->dlpi_name;
	if (!path || !*path) { /* the main program: dl_iterate_phdr names it "" */
		ssize_t k = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
		exe[k > 0 ? k : 0] = 0;
		path = exe;
	}
	struct cuptrace_module *m = &mods.m[mods.n];
	*m = (struct cuptrace_module){.lo = lo, .hi = hi, .bias = info->dlpi_addr};
	if (!(m->path = strdup(path)))
		return 1;
	m->build_id = build_id(info);
	m->ours = is_ours(path);
	mods.n++;
	return 0;
}

static int counts(struct dl_phdr_info *info, size_t size, void *arg)
{
	unsigned long long *c = arg;
	if (size < offsetof(struct dl_phdr_info, dlpi_subs) + sizeof(info->dlpi_subs))
		return 1;
	c[0] = info->dlpi_adds;
	c[1] = info->dlpi_subs;
	return 1; /* the first object says it: stop */
}

static void reload(void)
{
	unsigned long long c[2] = {0, 0};
	dl_iterate_phdr(counts, c);
	/* Nothing loaded or unloaded since: an address outside every module stays so (JIT code,
	 * an anonymous mapping), and must not cost a re-read per launch. */
	if (mods.n && c[0] == mods.adds && c[1] == mods.subs)
		return;
	mods.adds = c[0];
	mods.subs = c[1];
	cuptrace_nstack_free();
	Dl_info di;
	if (!mods.self[0] && dladdr((void *)reload, &di) && di.dli_fname)
		snprintf(mods.self, sizeof(mods.self), "%s", di.dli_fname);
	dl_iterate_phdr(add_module, NULL);
}

static const struct cuptrace_module *find(uint64_t pc)
{
	for (size_t i = 0; i < mods.n; i++)
		if (pc >= mods.m[i].lo && pc < mods.m[i].hi)
			return &mods.m[i];
	return NULL;
}

const struct cuptrace_module *cuptrace_nstack_module(uint64_t pc)
{
	const struct cuptrace_module *m = find(pc);
	if (m)
		return m;
	reload();
	return find(pc);
}

void cuptrace_nstack_free(void)
{
	for (size_t i = 0; i < mods.n; i++) {
		free(mods.m[i].path);
		free(mods.m[i].build_id);
	}
	mods.n = 0;
}
