/* Reading another thread's Python stack without the GIL (see pyread.h and SAMPLING.md).
 *
 * Functions called in the interpreter (dlsym, never linked), all plain reads that take no lock
 * and no GIL: Py_GetVersion, Py_IsInitialized, PyInterpreterState_Main and
 * PyInterpreterState_ThreadHead; PyGILState_GetThisThreadState only in validate, for the
 * calling thread's own state. Everything else is read with process_vm_readv. */
#define _GNU_SOURCE
#include "inject/pyread.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "common/util.h"

/* Offsets into CPython's structures, x86-64 and aarch64 (LP64) builds without Py_DEBUG. */
struct layout {
	int minor;
	/* PyThreadState */
	size_t ts_next, ts_tid, ts_native_tid, ts_frame;
	int via_cframe;        /* ts_frame points to a _PyCFrame (3.11, 3.12) */
	size_t cframe_current; /* _PyCFrame.current_frame */
	/* _PyInterpreterFrame */
	size_t fr_code, fr_previous, fr_instr, fr_owner, fr_size;
	/* PyCodeObject */
	size_t co_filename, co_name, co_qualname, co_linetable, co_firstlineno, co_adaptive;
	/* PyUnicodeObject (compact), PyBytesObject */
	size_t uni_state, uni_length, uni_ascii_size, uni_compact_size;
	size_t bytes_size, bytes_sval;
};

/* From CPython 3.11's and 3.12's headers (Include/cpython/pystate.h, Include/cpython/code.h,
 * Include/internal/pycore_frame.h, Include/cpython/unicodeobject.h); 3.11's were checked with
 * offsetof against the installed headers. validate() checks the thread-state ones at run time. */
static const struct layout L311 = {
    .minor = 11,
    .ts_next = 8,
    .ts_tid = 152,
    .ts_native_tid = 160,
    .ts_frame = 56,
    .via_cframe = 1,
    .cframe_current = 8,
    .fr_code = 32,
    .fr_previous = 48,
    .fr_instr = 56,
    .fr_owner = 69,
    .fr_size = 72,
    .co_filename = 112,
    .co_name = 120,
    .co_qualname = 128,
    .co_linetable = 136,
    .co_firstlineno = 72,
    .co_adaptive = 184,
    .uni_state = 32,
    .uni_length = 16,
    .uni_ascii_size = 48,
    .uni_compact_size = 72,
    .bytes_size = 16,
    .bytes_sval = 32,
};

static const struct layout L312 = {
    .minor = 12,
    .ts_next = 8,
    .ts_tid = 136,
    .ts_native_tid = 144,
    .ts_frame = 56,
    .via_cframe = 1,
    .cframe_current = 0,
    .fr_code = 0,
    .fr_previous = 8,
    .fr_instr = 56,
    .fr_owner = 70,
    .fr_size = 72,
    .co_filename = 112,
    .co_name = 120,
    .co_qualname = 128,
    .co_linetable = 136,
    .co_firstlineno = 68,
    .co_adaptive = 192,
    .uni_state = 32,
    .uni_length = 16,
    .uni_ascii_size = 40,
    .uni_compact_size = 56,
    .bytes_size = 16,
    .bytes_sval = 32,
};

/* A frame owned by the C stack (3.12+: the interpreter's entry "shim" frames) is no Python
 * function: left out. */
#define OWNED_BY_CSTACK 3

#define CODE_CACHE  4096 /* code objects remembered, direct-mapped with a short probe */
#define PROBE       8
#define NAME_MAX_B  512   /* a name or path longer than this is cut */
#define LTAB_MAX    65536 /* a line table longer than this: first line only */
#define THREADS_MAX 4096  /* a thread list longer than this is taken as corrupt */

struct code_ent {
	uint64_t code;                      /* 0: empty */
	uint64_t filename, name, linetable; /* the objects it was read with */
	int32_t firstlineno;
	char *file, *func;
	uint8_t *ltab;
	size_t nltab;
};

static struct {
	pthread_mutex_t lock;
	int tried, found, checked, valid;
	struct layout l;
	char version[16];
	const char *(*get_version)(void);
	int (*is_init)(void);
	void *(*interp_main)(void);
	void *(*thread_head)(void *interp);
	void *(*this_ts)(void);
	uint64_t code_type, unicode_type, bytes_type;
	pid_t pid;
	struct code_ent *cache;
	char *hdr; /* scratch for a code object's header */
} r = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* ---- memory reads that fail instead of faulting ---- */

static int peek(uint64_t addr, void *out, size_t n)
{
	if (!addr)
		return -EFAULT;
	struct iovec local = {out, n}, remote = {(void *)(uintptr_t)addr, n};
	ssize_t got = process_vm_readv(r.pid, &local, 1, &remote, 1, 0);
	return got == (ssize_t)n ? 0 : -EFAULT;
}

static int peek_u64(uint64_t addr, uint64_t *v)
{
	return peek(addr, v, sizeof(*v));
}

/* ---- finding the interpreter and its layout ---- */

/* 3.13: _PyRuntime starts with _Py_DebugOffsets, a cookie, the version and offsets as u64. The
 * indexes below are the fields' places in 3.13's struct (Include/internal/pycore_runtime.h). */
static int layout_from_debug_offsets(struct layout *l)
{
	const uint64_t *d = dlsym(RTLD_DEFAULT, "_PyRuntime");
	uint64_t v[71];
	if (!d || peek((uint64_t)(uintptr_t)d, v, sizeof(v)) || memcmp(v, "xdebugpy", 8))
		return -1;
	if ((v[1] >> 16) != 0x030d || v[2]) /* 3.13, and not the free-threaded build */
		return -1;
	*l = (struct layout){
	    .minor = 13,
	    .ts_next = v[21],
	    .ts_tid = v[24],
	    .ts_native_tid = v[25],
	    .ts_frame = v[23],
	    .via_cframe = 0,
	    .fr_code = v[30],
	    .fr_previous = v[29],
	    .fr_instr = v[31],
	    .fr_owner = v[33],
	    .co_filename = v[35],
	    .co_name = v[36],
	    .co_qualname = v[37],
	    .co_linetable = v[38],
	    .co_firstlineno = v[39],
	    .co_adaptive = v[43],
	    .bytes_size = v[65],
	    .bytes_sval = v[66],
	    .uni_state = v[68],
	    .uni_length = v[69],
	    .uni_ascii_size = v[70],
	    .uni_compact_size = v[70] + 16,
	};
	size_t m = l->fr_code;
	m = l->fr_previous > m ? l->fr_previous : m;
	m = l->fr_instr > m ? l->fr_instr : m;
	m = l->fr_owner > m ? l->fr_owner : m;
	l->fr_size = m + 8;
	/* Sanity: offsets inside the objects they describe. */
	return l->ts_native_tid < 4096 && l->fr_size <= 256 && l->co_adaptive < 512 &&
	               l->co_firstlineno < 512 && l->uni_ascii_size < 128
	           ? 0
	           : -1;
}

int cuptrace_pyread_init(void)
{
	pthread_mutex_lock(&r.lock);
	if (r.found || (r.tried++ % 64)) {
		int ok = r.found;
		pthread_mutex_unlock(&r.lock);
		return ok;
	}
	r.pid = getpid();
	*(void **)&r.get_version = dlsym(RTLD_DEFAULT, "Py_GetVersion");
	*(void **)&r.is_init = dlsym(RTLD_DEFAULT, "Py_IsInitialized");
	*(void **)&r.interp_main = dlsym(RTLD_DEFAULT, "PyInterpreterState_Main");
	*(void **)&r.thread_head = dlsym(RTLD_DEFAULT, "PyInterpreterState_ThreadHead");
	*(void **)&r.this_ts = dlsym(RTLD_DEFAULT, "PyGILState_GetThisThreadState");
	r.code_type = (uint64_t)(uintptr_t)dlsym(RTLD_DEFAULT, "PyCode_Type");
	r.unicode_type = (uint64_t)(uintptr_t)dlsym(RTLD_DEFAULT, "PyUnicode_Type");
	r.bytes_type = (uint64_t)(uintptr_t)dlsym(RTLD_DEFAULT, "PyBytes_Type");
	int major = 0, minor = 0;
	if (r.get_version && r.is_init && r.interp_main && r.thread_head && r.this_ts &&
	    r.code_type && r.unicode_type && r.bytes_type &&
	    sscanf(r.get_version(), "%d.%d", &major, &minor) == 2 && major == 3) {
		int ok = -1;
		if (minor == 11)
			r.l = L311, ok = 0;
		else if (minor == 12)
			r.l = L312, ok = 0;
		else if (minor == 13)
			ok = layout_from_debug_offsets(&r.l);
		if (!ok) {
			snprintf(r.version, sizeof(r.version), "3.%d", minor);
			r.found = 1;
		}
	}
	pthread_mutex_unlock(&r.lock);
	return r.found;
}

uint64_t cuptrace_pyread_anchor(void)
{
	return r.found ? (uint64_t)(uintptr_t)r.get_version : 0;
}

const char *cuptrace_pyread_version(void)
{
	return r.found ? r.version : NULL;
}

int cuptrace_pyread_ready(void)
{
	return __atomic_load_n(&r.valid, __ATOMIC_ACQUIRE);
}

/* The first thread state of the main interpreter; 0 if Python is not running. */
static uint64_t thread_head(void)
{
	if (!r.is_init())
		return 0;
	void *interp = r.interp_main();
	return interp ? (uint64_t)(uintptr_t)r.thread_head(interp) : 0;
}

/* The thread state of kernel thread tid: 0 if none, -EFAULT if the list could not be read. */
static int find_ts(pid_t tid, uint64_t *out)
{
	uint64_t ts = thread_head();
	*out = 0;
	for (int i = 0; ts && i < THREADS_MAX; i++) {
		uint64_t next, ntid;
		struct iovec local[2] = {{&next, 8}, {&ntid, 8}};
		struct iovec remote[2] = {{(void *)(uintptr_t)(ts + r.l.ts_next), 8},
		                          {(void *)(uintptr_t)(ts + r.l.ts_native_tid), 8}};
		if (process_vm_readv(r.pid, local, 2, remote, 2, 0) != 16)
			return -EFAULT;
		if (ntid == (uint64_t)tid) {
			*out = ts;
			return 0;
		}
		ts = next;
	}
	return ts ? -EFAULT : 0; /* a list that does not end */
}

/* The innermost frame of thread state ts (0: none). */
static int top_frame(uint64_t ts, uint64_t *frame)
{
	uint64_t p;
	if (peek_u64(ts + r.l.ts_frame, &p))
		return -EFAULT;
	if (r.l.via_cframe && p && peek_u64(p + r.l.cframe_current, &p))
		return -EFAULT;
	*frame = p;
	return 0;
}

int cuptrace_pyread_validate(void)
{
	if (!cuptrace_pyread_init())
		return -1;
	pthread_mutex_lock(&r.lock);
	int ret = r.checked ? r.valid : -1;
	if (r.checked)
		goto out;
	uint64_t me = (uint64_t)(uintptr_t)r.this_ts();
	if (!me || !r.is_init())
		goto out; /* this thread cannot tell */
	uint64_t tid = 0, ntid = 0, found = 0, frame = 0, code = 0, type = 0;
	int ok = !peek_u64(me + r.l.ts_tid, &tid) && tid == (uint64_t)pthread_self() &&
	         !peek_u64(me + r.l.ts_native_tid, &ntid) && ntid == (uint64_t)syscall(SYS_gettid);
	uint64_t ts = ok ? thread_head() : 0;
	for (int i = 0; ok && ts && i < THREADS_MAX && !found; i++) {
		found = ts == me;
		if (peek_u64(ts + r.l.ts_next, &ts))
			ok = 0;
	}
	ok = ok && found && !top_frame(me, &frame);
	/* Frames (if this thread runs Python now): the innermost one's code is a code object. */
	if (ok && frame)
		ok = !peek_u64(frame + r.l.fr_code, &code) && !peek_u64(code + 8, &type) &&
		     type == r.code_type;
	r.checked = 1;
	r.valid = ok;
	ret = ok;
out:
	pthread_mutex_unlock(&r.lock);
	return ret;
}

/* ---- code objects: names and line tables, cached ---- */

/* A str object's text as UTF-8 (ASCII and Latin-1 compact strings; others become "?"). */
static char *read_str(uint64_t o)
{
	uint8_t h[80];
	uint64_t type;
	if (r.l.uni_compact_size > sizeof(h) || peek(o, h, r.l.uni_compact_size))
		return NULL;
	memcpy(&type, h + 8, 8);
	if (type != r.unicode_type)
		return NULL;
	uint32_t state;
	int64_t len;
	memcpy(&state, h + r.l.uni_state, 4);
	memcpy(&len, h + r.l.uni_length, 8);
	unsigned kind = (state >> 2) & 7, compact = (state >> 5) & 1, ascii = (state >> 6) & 1;
	if (len < 0 || !compact)
		return strdup("?");
	size_t n = (size_t)len < NAME_MAX_B ? (size_t)len : NAME_MAX_B;
	uint8_t raw[NAME_MAX_B];
	char *out = malloc(2 * n + 2);
	if (!out)
		return NULL;
	size_t k = 0;
	if (ascii || kind == 1) {
		if (peek(o + (ascii ? r.l.uni_ascii_size : r.l.uni_compact_size), raw, n)) {
			free(out);
			return NULL;
		}
		for (size_t i = 0; i < n; i++) {
			if (raw[i] < 0x80) {
				out[k++] = (char)raw[i];
			} else { /* Latin-1 to UTF-8 */
				out[k++] = (char)(0xc0 | raw[i] >> 6);
				out[k++] = (char)(0x80 | (raw[i] & 0x3f));
			}
		}
	} else {
		out[k++] = '?';
	}
	out[k] = 0;
	return out;
}

static void ent_clear(struct code_ent *e)
{
	free(e->file);
	free(e->func);
	free(e->ltab);
	memset(e, 0, sizeof(*e));
}

/* The cache entry of code object `code` whose header is in r.hdr; -1 if unreadable. */
static int code_entry(uint64_t code, const char *hdr)
{
	uint64_t fn, name, qual, lt;
	int32_t first;
	memcpy(&fn, hdr + r.l.co_filename, 8);
	memcpy(&name, hdr + r.l.co_name, 8);
	memcpy(&qual, hdr + r.l.co_qualname, 8);
	memcpy(&lt, hdr + r.l.co_linetable, 8);
	memcpy(&first, hdr + r.l.co_firstlineno, 4);
	uint64_t nm = qual ? qual : name;
	size_t h = (size_t)cuptrace_hash64(code) & (CODE_CACHE - 1), slot = h;
	for (size_t i = 0; i < PROBE; i++) {
		struct code_ent *e = &r.cache[(h + i) & (CODE_CACHE - 1)];
		if (e->code == code && e->filename == fn && e->name == nm && e->linetable == lt &&
		    e->firstlineno == first)
			return (int)((h + i) & (CODE_CACHE - 1));
		if (!e->code) {
			slot = (h + i) & (CODE_CACHE - 1);
			break;
		}
	}
	struct code_ent *e = &r.cache[slot];
	ent_clear(e);
	e->file = read_str(fn);
	e->func = read_str(nm);
	if (!e->file || !e->func) {
		ent_clear(e);
		return -1;
	}
	uint64_t type, size;
	if (!peek_u64(lt + 8, &type) && type == r.bytes_type &&
	    !peek_u64(lt + r.l.bytes_size, &size) && size <= LTAB_MAX && size &&
	    (e->ltab = malloc(size))) {
		if (peek(lt + r.l.bytes_sval, e->ltab, size)) {
			free(e->ltab);
			e->ltab = NULL;
		} else {
			e->nltab = size;
		}
	}
	e->code = code;
	e->filename = fn;
	e->name = nm;
	e->linetable = lt;
	e->firstlineno = first;
	return (int)slot;
}

static unsigned varint(const uint8_t **p, const uint8_t *end)
{
	unsigned v = 0, shift = 0;
	uint8_t b;
	do {
		if (*p >= end || shift > 28)
			return 0;
		b = *(*p)++;
		v |= (unsigned)(b & 63) << shift;
		shift += 6;
	} while (b & 64);
	return v;
}

static int svarint(const uint8_t **p, const uint8_t *end)
{
	unsigned v = varint(p, end);
	return v & 1 ? -(int)(v >> 1) : (int)(v >> 1);
}

/* The line of instruction `index` (in code units) from a 3.11+ location table (the format of
 * Objects/locations.md in CPython's sources): entries of a first byte 1cccclll (code c, l + 1
 * code units), then per code: 15 no location; 14 a signed line delta and three more varints;
 * 13 a signed line delta; 10-12 a line delta of c - 10 and two column bytes; 0-9 one column
 * byte. 0 if not found. */
static uint32_t line_of(const struct code_ent *e, long index)
{
	if (!e->ltab || index < 0)
		return e->firstlineno > 0 ? (uint32_t)e->firstlineno : 0;
	const uint8_t *p = e->ltab, *end = e->ltab + e->nltab;
	long addr = 0;
	int line = e->firstlineno;
	while (p < end) {
		uint8_t b = *p++;
		if (!(b & 0x80))
			return 0; /* not at an entry's start: a table we misread */
		int code = (b >> 3) & 15, len = (b & 7) + 1, delta = 0;
		if (code == 14) {
			delta = svarint(&p, end);
			varint(&p, end);
			varint(&p, end);
			varint(&p, end);
		} else if (code == 13) {
			delta = svarint(&p, end);
		} else if (code >= 10 && code <= 12) {
			delta = code - 10;
			p += 2;
		} else if (code < 10) {
			p += 1;
		}
		line += delta;
		if (index < addr + len)
			return code == 15 || line <= 0 ? 0 : (uint32_t)line;
		addr += len;
	}
	return 0;
}

int cuptrace_pyread_stack(pid_t tid, struct cuptrace_pyread_frame *out, size_t max)
{
	if (!cuptrace_pyread_ready())
		return 0;
	if (!r.cache) {
		r.cache = calloc(CODE_CACHE, sizeof(*r.cache));
		r.hdr = malloc(r.l.co_adaptive + 8);
		if (!r.cache || !r.hdr)
			return -ENOMEM;
	}
	uint64_t ts, frame;
	int err = find_ts(tid, &ts);
	if (err || !ts)
		return err;
	if (top_frame(ts, &frame))
		return -EFAULT;
	size_t n = 0;
	uint8_t fr[256];
	for (int depth = 0; frame && n < max; depth++) {
		if (depth > 4096 || peek(frame, fr, r.l.fr_size))
			return -EFAULT;
		uint64_t code, prev, instr, type;
		memcpy(&code, fr + r.l.fr_code, 8);
		memcpy(&prev, fr + r.l.fr_previous, 8);
		memcpy(&instr, fr + r.l.fr_instr, 8);
		int owner = (int8_t)fr[r.l.fr_owner];
		frame = prev;
		if (r.l.minor >= 12 && owner == OWNED_BY_CSTACK)
			continue;
		if (peek(code, r.hdr, r.l.co_adaptive))
			return -EFAULT;
		memcpy(&type, r.hdr + 8, 8);
		if (type != r.code_type)
			return -EINVAL; /* a frame that is being torn down, or a misread */
		int ent = code_entry(code, r.hdr);
		if (ent < 0)
			return -EFAULT;
		uint64_t start = code + r.l.co_adaptive;
		long index = instr >= start ? (long)((instr - start) / 2) : -1;
		out[n].code = code;
		out[n].line = line_of(&r.cache[ent], index);
		out[n].ent = (uint32_t)ent;
		n++;
	}
	return (int)n;
}

void cuptrace_pyread_code(const struct cuptrace_pyread_frame *f, const char **file,
                          const char **function)
{
	const struct code_ent *e = r.cache && f->ent < CODE_CACHE ? &r.cache[f->ent] : NULL;
	int ok = e && e->code == f->code;
	*file = ok ? e->file : "?";
	*function = ok ? e->func : "?";
}

void cuptrace_pyread_reset(void)
{
	if (r.cache)
		for (size_t i = 0; i < CODE_CACHE; i++)
			ent_clear(&r.cache[i]);
	free(r.cache);
	free(r.hdr);
	r.cache = NULL;
	r.hdr = NULL;
}
