/* Small shared containers and helpers: a u64->u64 hash map, a string interner, clocks, path
 * templates. None of them is thread-safe; each is owned by one thread (or locked by its owner). */
#ifndef CUPTRACE_COMMON_UTIL_H
#define CUPTRACE_COMMON_UTIL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

/* Open-addressing map from any u64 key to a u64 value (tombstones on delete). */
struct cuptrace_u64map {
	uint64_t *keys;
	uint64_t *vals;
	uint8_t *used;
	size_t cap, len, tombs;
};
void cuptrace_u64map_init(struct cuptrace_u64map *m);
void cuptrace_u64map_free(struct cuptrace_u64map *m);
/* Returns a pointer to the value slot (inserted as 0 if new; *created says which), or NULL on
 * allocation failure. The pointer is valid until the next put. */
uint64_t *cuptrace_u64map_put(struct cuptrace_u64map *m, uint64_t key, int *created);
uint64_t *cuptrace_u64map_get(const struct cuptrace_u64map *m, uint64_t key);
int cuptrace_u64map_del(struct cuptrace_u64map *m, uint64_t key);

/* String interner: equal strings get the same id (1, 2, 3, ... in first-seen order) and one
 * stable copy that lives until the table is freed. */
struct cuptrace_strtab {
	char **strs; /* by id - 1 */
	size_t *lens;
	size_t n, cap;
	uint32_t *slots; /* hash slots holding ids */
	size_t nslots;
};
void cuptrace_strtab_init(struct cuptrace_strtab *t);
void cuptrace_strtab_free(struct cuptrace_strtab *t);
/* Returns the id (>= 1) of s (len bytes, need not be NUL-terminated), or 0 on allocation failure.
 */
uint32_t cuptrace_strtab_intern(struct cuptrace_strtab *t, const char *s, size_t len);
/* The stable NUL-terminated copy for an id. */
const char *cuptrace_strtab_str(const struct cuptrace_strtab *t, uint32_t id);

/* The one growth policy of every growable array: grows arr (elements of size bytes, capacity
 * *cap) to hold at least n, doubling from 16 (amortized O(1) per append), never past what
 * size_t can count in bytes. Returns the (possibly moved) array, or NULL with arr left intact
 * and *cap unchanged (also when n * size would overflow). */
void *cuptrace_grow(void *arr, size_t *cap, size_t n, size_t size);
/* The same through a pointer to the array pointer (any object pointer type), updated in place
 * on success: 0, or -ENOMEM with *arrp and *cap unchanged. Use CUPTRACE_GROW. */
int cuptrace_grow_to(void *arrp, size_t *cap, size_t n, size_t size);
/* CUPTRACE_GROW(arr, cap, n): makes room for n elements in the array lvalue arr of capacity
 * lvalue cap, sized by arr's own element type. 0 or -ENOMEM. */
#define CUPTRACE_GROW(arr, cap, n) cuptrace_grow_to(&(arr), &(cap), (n), sizeof(*(arr)))
/* Protobuf base-128 varint of v into p (up to 10 bytes); returns its length. */
size_t cuptrace_put_varint(uint8_t *p, uint64_t v);

uint64_t cuptrace_hash64(uint64_t x);
uint64_t cuptrace_hash_bytes(const void *p, size_t n);

int64_t cuptrace_now_ns(int clock_id); /* clock_gettime in ns */

/* The process's place in a job, from its launcher's environment: torchrun (RANK, LOCAL_RANK,
 * WORLD_SIZE), Open MPI (OMPI_COMM_WORLD_RANK, _LOCAL_RANK, _SIZE), MPICH/PMI (PMI_RANK,
 * MPI_LOCALRANKID, PMI_SIZE), Slurm (SLURM_PROCID, SLURM_LOCALID, SLURM_NTASKS), first found
 * wins. Fields are -1 where the launcher does not say; launcher is its name or NULL. */
struct cuptrace_rank {
	int rank, local_rank, world_size;
	const char *launcher;
};
struct cuptrace_rank cuptrace_launcher_rank(void);

/* Expands %p (pid), %h (host name), %r (the global rank, or the pid where no launcher gives
 * one), %l (the local rank, or the pid) and %% in a path template. Returns a malloc'd string. */
char *cuptrace_path_expand(const char *tmpl, int pid);

/* NAME.EXT -> NAME-<tag>.EXT, the extension being everything from the first dot of the base
 * name (run.pftrace.gz -> run-123.pftrace.gz): how a process that may not take a trace's name
 * names its own, and how `record` finds those. Returns malloc'd memory or NULL. */
char *cuptrace_path_with_tag(const char *path, const char *tag);
/* a, sep and b in one malloc'd string, or NULL. */
char *cuptrace_str_join3(const char *a, const char *sep, const char *b);
/* True if path ends with suffix. */
int cuptrace_ends_with(const char *s, const char *suffix);

/* Starts one of the library's own threads (writer, flusher, compressors, OTLP sender, GPU
 * metrics sampler). It takes none of the program's asynchronous signals (SIGINT, SIGTERM,
 * SIGCHLD, timers: they stay with the program's threads, whose handlers expect them), but a
 * fault in it (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGSYS) reaches the program's handler as a
 * fault in any thread would: the kernel kills a thread that faults with the signal blocked
 * without running any handler, so Python's faulthandler or a JVM would report nothing.
 * The caller's own mask is unchanged. 0, or a negative errno. */
int cuptrace_thread_start(pthread_t *t, void *(*fn)(void *), void *arg);

/* A function of a library the process has already loaded (the CUDA driver, NCCL), without
 * loading it: from the library loaded under that soname (cudart opens libcuda RTLD_LOCAL, out
 * of the global scope), else from the global scope (linked in). NULL where neither has it. Valid
 * while the library stays loaded (the driver and NCCL are never unloaded while CUDA work runs). */
void *cuptrace_loaded_sym(const char *soname, const char *name);

#endif
