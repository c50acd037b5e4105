/* Shared containers and helpers (see util.h). */
#define _GNU_SOURCE /* RTLD_DEFAULT, RTLD_NOLOAD */
#include "util.h"

#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void *cuptrace_grow(void *arr, size_t *cap, size_t n, size_t size)
{
	if (n <= *cap)
		return arr;
	if (!size || n > SIZE_MAX / size)
		return NULL;
	size_t ncap = *cap ? *cap : 16;
	while (ncap < n)
		ncap = ncap > SIZE_MAX / 2 ? n : ncap * 2;
	if (ncap > SIZE_MAX / size)
		ncap = n; /* doubling would overflow: exactly what is needed still fits */
	void *p = realloc(arr, ncap * size);
	if (p)
		*cap = ncap;
	return p;
}

int cuptrace_grow_to(void *arrp, size_t *cap, size_t n, size_t size)
{
	void *arr;

	if (n <= *cap)
		return 0;
	/* memcpy, not a cast to void **: arrp may point to any object pointer type. */
	memcpy(&arr, arrp, sizeof(arr));
	void *p = cuptrace_grow(arr, cap, n, size);
	if (!p)
		return -ENOMEM;
	memcpy(arrp, &p, sizeof(p));
	return 0;
}

size_t cuptrace_put_varint(uint8_t *p, uint64_t v)
{
	size_t n = 0;
	while (v >= 0x80) {
		p[n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	p[n++] = (uint8_t)v;
	return n;
}

uint64_t cuptrace_hash64(uint64_t x)
{
	/* splitmix64 finalizer: cheap and mixes sequential ids well. */
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

uint64_t cuptrace_hash_bytes(const void *p, size_t n)
{
	const uint8_t *b = p;
	uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
	for (size_t i = 0; i < n; i++) {
		h ^= b[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

void cuptrace_u64map_init(struct cuptrace_u64map *m)
{
	memset(m, 0, sizeof(*m));
}

void cuptrace_u64map_free(struct cuptrace_u64map *m)
{
	free(m->keys);
	free(m->vals);
	free(m->used);
	memset(m, 0, sizeof(*m));
}

static size_t find_slot(const struct cuptrace_u64map *m, uint64_t key)
{
	size_t mask = m->cap - 1, i = cuptrace_hash64(key) & mask;
	while (m->used[i] == 1 ? m->keys[i] != key : m->used[i] == 2)
		i = (i + 1) & mask;
	return i;
}

/* Rehashes into a table twice as large, or as large as now when most of the load is tombstones
 * (a map used as a sliding window, like the converter's correlation index, deletes as much as it
 * inserts and must not double forever). */
static int grow(struct cuptrace_u64map *m)
{
	size_t ncap = !m->cap ? 64 : m->len * 2 < m->cap ? m->cap : m->cap * 2;
	struct cuptrace_u64map n = {
	    .keys = malloc(ncap * sizeof(uint64_t)),
	    .vals = malloc(ncap * sizeof(uint64_t)),
	    .used = calloc(ncap, 1),
	    .cap = ncap,
	};
	if (!n.keys || !n.vals || !n.used) {
		cuptrace_u64map_free(&n);
		return -ENOMEM;
	}
	for (size_t i = 0; i < m->cap; i++) {
		if (m->used[i] != 1)
			continue;
		size_t j = find_slot(&n, m->keys[i]);
		n.used[j] = 1;
		n.keys[j] = m->keys[i];
		n.vals[j] = m->vals[i];
		n.len++;
	}
	cuptrace_u64map_free(m);
	*m = n;
	return 0;
}

/* used[]: 0 empty, 1 full, 2 deleted (tombstone). Tombstones count toward the load factor. */
uint64_t *cuptrace_u64map_put(struct cuptrace_u64map *m, uint64_t key, int *created)
{
	if (m->cap) {
		size_t i = find_slot(m, key);
		if (m->used[i] == 1) {
			if (created)
				*created = 0;
			return &m->vals[i];
		}
	}
	if ((m->len + m->tombs + 1) * 4 >= m->cap * 3 && grow(m))
		return NULL;
	size_t i = cuptrace_hash64(key) & (m->cap - 1);
	while (m->used[i] == 1)
		i = (i + 1) & (m->cap - 1);
	if (m->used[i] == 2)
		m->tombs--;
	m->used[i] = 1;
	m->keys[i] = key;
	m->vals[i] = 0;
	m->len++;
	if (created)
		*created = 1;
	return &m->vals[i];
}

uint64_t *cuptrace_u64map_get(const struct cuptrace_u64map *m, uint64_t key)
{
	if (!m->cap)
		return NULL;
	size_t i = find_slot(m, key);
	return m->used[i] == 1 ? &m->vals[i] : NULL;
}

int cuptrace_u64map_del(struct cuptrace_u64map *m, uint64_t key)
{
	if (!m->cap)
		return 0;
	size_t i = find_slot(m, key);
	if (m->used[i] != 1)
		return 0;
	m->used[i] = 2;
	m->len--;
	m->tombs++;
	return 1;
}

void cuptrace_strtab_init(struct cuptrace_strtab *t)
{
	memset(t, 0, sizeof(*t));
}

void cuptrace_strtab_free(struct cuptrace_strtab *t)
{
	for (size_t i = 0; i < t->n; i++)
		free(t->strs[i]);
	free(t->strs);
	free(t->lens);
	free(t->slots);
	memset(t, 0, sizeof(*t));
}

static int strtab_rehash(struct cuptrace_strtab *t, size_t nslots)
{
	uint32_t *s = calloc(nslots, sizeof(uint32_t));
	if (!s)
		return -ENOMEM;
	for (size_t id = 1; id <= t->n; id++) {
		size_t i = cuptrace_hash_bytes(t->strs[id - 1], t->lens[id - 1]) & (nslots - 1);
		while (s[i])
			i = (i + 1) & (nslots - 1);
		s[i] = (uint32_t)id;
	}
	free(t->slots);
	t->slots = s;
	t->nslots = nslots;
	return 0;
}

uint32_t cuptrace_strtab_intern(struct cuptrace_strtab *t, const char *str, size_t len)
{
	if ((t->n + 1) * 2 >= t->nslots && strtab_rehash(t, t->nslots ? t->nslots * 2 : 256))
		return 0;
	size_t i = cuptrace_hash_bytes(str, len) & (t->nslots - 1);
	while (t->slots[i]) {
		uint32_t id = t->slots[i];
		if (t->lens[id - 1] == len && !memcmp(t->strs[id - 1], str, len))
			return id;
		i = (i + 1) & (t->nslots - 1);
	}
	/* Two arrays of one capacity: each grows from the same one to the same one. */
	size_t cap_strs = t->cap, cap_lens = t->cap;
	if (CUPTRACE_GROW(t->strs, cap_strs, t->n + 1) ||
	    CUPTRACE_GROW(t->lens, cap_lens, t->n + 1))
		return 0;
	t->cap = cap_strs;
	char *copy = malloc(len + 1);
	if (!copy)
		return 0;
	memcpy(copy, str, len);
	copy[len] = 0;
	t->strs[t->n] = copy;
	t->lens[t->n] = len;
	t->n++;
	t->slots[i] = (uint32_t)t->n;
	return (uint32_t)t->n;
}

const char *cuptrace_strtab_str(const struct cuptrace_strtab *t, uint32_t id)
{
	return id && id <= t->n ? t->strs[id - 1] : NULL;
}

int64_t cuptrace_now_ns(int clock_id)
{
	struct timespec ts;
	clock_gettime(clock_id, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* A non-negative decimal environment value, or -1. */
static int env_int(const char *name)
{
	const char *v = getenv(name);
	if (!v || !*v)
		return -1;
	char *end;
	long x = strtol(v, &end, 10);
	return *end || x < 0 || x > 0x7fffffff ? -1 : (int)x;
}

struct cuptrace_rank cuptrace_launcher_rank(void)
{
	static const struct {
		const char *launcher, *rank, *local, *world;
	} l[] = {
	    {"torchrun", "RANK", "LOCAL_RANK", "WORLD_SIZE"},
	    {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
	     "OMPI_COMM_WORLD_SIZE"},
	    {"pmi", "PMI_RANK", "MPI_LOCALRANKID", "PMI_SIZE"},
	    {"slurm", "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS"},
	};
	for (size_t i = 0; i < sizeof(l) / sizeof(l[0]); i++) {
		int r = env_int(l[i].rank);
		if (r >= 0)
			return (struct cuptrace_rank){r, env_int(l[i].local), env_int(l[i].world),
			                              l[i].launcher};
	}
	return (struct cuptrace_rank){-1, -1, -1, NULL};
}

char *cuptrace_path_expand(const char *tmpl, int pid)
{
	struct cuptrace_rank rk = cuptrace_launcher_rank();
	char host[256] = "unknown";
	gethostname(host, sizeof(host) - 1);
	host[sizeof(host) - 1] = 0;
	size_t cap = strlen(tmpl) + 1, n = 0;
	for (const char *p = tmpl; *p; p++)
		if (*p == '%')
			cap += sizeof(host) + 16;
	char *out = malloc(cap);
	if (!out)
		return NULL;
	for (const char *p = tmpl; *p; p++) {
		if (*p == '%' && p[1] == 'p') {
			n += (size_t)snprintf(out + n, cap - n, "%d", pid);
			p++;
		} else if (*p == '%' && p[1] == 'h') {
			n += (size_t)snprintf(out + n, cap - n, "%s", host);
			p++;
		} else if (*p == '%' && (p[1] == 'r' || p[1] == 'l')) {
			int v = p[1] == 'r' ? rk.rank : rk.local_rank;
			n += (size_t)snprintf(out + n, cap - n, "%d", v >= 0 ? v : pid);
			p++;
		} else if (*p == '%' && p[1] == '%') {
			out[n++] = '%';
			p++;
		} else {
			out[n++] = *p;
		}
	}
	out[n] = 0;
	return out;
}

char *cuptrace_path_with_tag(const char *path, const char *tag)
{
	const char *slash = strrchr(path, '/');
	const char *dot = strchr(slash ? slash : path, '.');
	size_t at = dot ? (size_t)(dot - path) : strlen(path);
	size_t len = strlen(path) + strlen(tag) + 2;
	char *out = malloc(len);
	if (out)
		snprintf(out, len, "%.*s-%s%s", (int)at, path, tag, path + at);
	return out;
}

int cuptrace_ends_with(const char *s, const char *suffix)
{
	size_t a = strlen(s), b = strlen(suffix);
	return a >= b && !strcmp(s + a - b, suffix);
}

int cuptrace_thread_start(pthread_t *t, void *(*fn)(void *), void *arg)
{
	static const int faults[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGSYS};
	sigset_t mask, old;
	sigfillset(&mask);
	for (size_t i = 0; i < sizeof(faults) / sizeof(faults[0]); i++)
		sigdelset(&mask, faults[i]);
	pthread_sigmask(SIG_SETMASK, &mask, &old); /* the new thread inherits it */
	int r = pthread_create(t, NULL, fn, arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return -r;
}

void *cuptrace_loaded_sym(const char *soname, const char *name)
{
	void *h = dlopen(soname, RTLD_LAZY | RTLD_NOLOAD);
	void *s = h ? dlsym(h, name) : NULL;
	if (h)
		dlclose(h); /* drops only the reference NOLOAD took: the library stays */
	return s ? s : dlsym(RTLD_DEFAULT, name);
}

char *cuptrace_str_join3(const char *a, const char *sep, const char *b)
{
	size_t n = strlen(a) + strlen(sep) + strlen(b) + 1;
	char *p = malloc(n);
	if (p)
		snprintf(p, n, "%s%s%s", a, sep, b);
	return p;
}
