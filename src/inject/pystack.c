/* Python frames of the calling thread through CPython's C API, found with dlsym (see pystack.h).
 * Functions used, all in the stable ABI since 3.9 unless said: PyGILState_Check,
 * Py_IsInitialized, PyThreadState_GetUnchecked (3.13; _PyThreadState_UncheckedGet before it),
 * PyThreadState_GetFrame, PyFrame_GetBack, PyFrame_GetCode, PyFrame_GetLineNumber (each of the
 * three returns a new reference), Py_IncRef, Py_DecRef, PyObject_GetAttrString,
 * PyUnicode_AsUTF8, PyErr_Fetch/PyErr_Restore/PyErr_Clear; PyGILState_GetThisThreadState,
 * PyGILState_Ensure/Release, Py_IsFinalizing (3.13; _Py_IsFinalizing before it); and
 * PyFrame_GetLasti (3.11+, not in the stable ABI) where present, for the line cache. */
#define _GNU_SOURCE
#include "inject/pystack.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

static struct {
	int tried, ok;
	int can_take_gil; /* the four functions below were found */
	int (*gil_check)(void);
	int (*is_init)(void);
	void *(*ts_unchecked)(void);
	void *(*get_frame)(void *ts);
	void *(*frame_back)(void *f);
	void *(*frame_code)(void *f);
	int (*frame_line)(void *f);
	int (*frame_lasti)(void *f); /* PyFrame_GetLasti, 3.11+: the line cache's key */
	void (*incref)(void *o);
	void (*decref)(void *o);
	void *(*getattr)(void *o, const char *name);
	const char *(*utf8)(void *o);
	void (*err_fetch)(void **t, void **v, void **tb);
	void (*err_restore)(void *t, void *v, void *tb);
	void (*err_clear)(void);
	/* Taking the GIL for a thread that released it (see cuptrace_pystack_walk). */
	void *(*this_ts)(void);
	int (*ensure)(void);
	void (*release)(int);
	int (*finalizing)(void);
} py;

/* PyGILState_Ensure's answer, per thread, for the release that follows. */
static __thread int gil_state;

#define SYM(field, name) (*(void **)&py.field = dlsym(RTLD_DEFAULT, name))

int cuptrace_pystack_init(void)
{
	if (py.ok)
		return 1;
	/* Not (yet) found: look again now and then, not at every launch of a program without
	 * Python (a dozen dlsym calls). Racy on purpose: a missed or extra look is harmless. */
	if (py.tried++ % 4096)
		return 0;
	SYM(gil_check, "PyGILState_Check");
	SYM(is_init, "Py_IsInitialized");
	if (!SYM(ts_unchecked, "PyThreadState_GetUnchecked"))
		SYM(ts_unchecked, "_PyThreadState_UncheckedGet");
	SYM(get_frame, "PyThreadState_GetFrame");
	SYM(frame_back, "PyFrame_GetBack");
	SYM(frame_code, "PyFrame_GetCode");
	SYM(frame_line, "PyFrame_GetLineNumber");
	SYM(frame_lasti, "PyFrame_GetLasti");
	SYM(incref, "Py_IncRef");
	SYM(decref, "Py_DecRef");
	SYM(getattr, "PyObject_GetAttrString");
	SYM(utf8, "PyUnicode_AsUTF8");
	SYM(err_fetch, "PyErr_Fetch");
	SYM(err_restore, "PyErr_Restore");
	SYM(err_clear, "PyErr_Clear");
	SYM(this_ts, "PyGILState_GetThisThreadState");
	SYM(ensure, "PyGILState_Ensure");
	SYM(release, "PyGILState_Release");
	if (!SYM(finalizing, "Py_IsFinalizing")) /* 3.13; the underscored one before */
		SYM(finalizing, "_Py_IsFinalizing");
	py.can_take_gil = py.this_ts && py.ensure && py.release && py.finalizing;
	py.ok = py.gil_check && py.is_init && py.ts_unchecked && py.get_frame && py.frame_back &&
	        py.frame_code && py.frame_line && py.incref && py.decref && py.getattr && py.utf8 &&
	        py.err_fetch && py.err_restore && py.err_clear;
	return py.ok;
}

/* ---- (code object, instruction offset) -> line, cached ----
 * PyFrame_GetLineNumber decodes the code's line table from its start at every call: most of a
 * walk's time on deep stacks. A frame's line is a function of its code and its instruction
 * offset (PyFrame_GetLasti, 3.11+), so each pair is looked up once. The table keeps a reference
 * to each code object it holds (never released, as the code cache below does): an address in
 * it stays that code's. Walks run with the GIL held, but a free-threaded Python has none: the
 * lock is taken once a walk. */
#define LINE_MAX_ENTRIES (1u << 16)

struct line_ent {
	uint64_t code;
	int32_t lasti, line;
};

static struct {
	pthread_mutex_t lock;
	struct line_ent *slots; /* 2 * LINE_MAX_ENTRIES, open addressing */
	size_t n;
} lc = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* Caller holds lc.lock. */
static int frame_line(void *f, void *code)
{
	if (!py.frame_lasti)
		return py.frame_line(f);
	int lasti = py.frame_lasti(f);
	if (!lc.slots && !(lc.slots = calloc(2 * LINE_MAX_ENTRIES, sizeof(*lc.slots))))
		return py.frame_line(f);
	uint64_t c = (uint64_t)(uintptr_t)code;
	size_t mask = 2 * LINE_MAX_ENTRIES - 1;
	size_t i =
	    (size_t)cuptrace_hash64(c ^ (uint64_t)(uint32_t)lasti * 0x9e3779b97f4a7c15ull) & mask;
	for (; lc.slots[i].code; i = (i + 1) & mask)
		if (lc.slots[i].code == c && lc.slots[i].lasti == lasti)
			return lc.slots[i].line;
	int line = py.frame_line(f);
	if (lc.n < LINE_MAX_ENTRIES) {
		py.incref(code);
		lc.slots[i] = (struct line_ent){c, lasti, line};
		lc.n++;
	}
	return line;
}

size_t cuptrace_pystack_walk(struct cuptrace_pyframe *out, size_t max, int may_take_gil,
                             int *took_gil)
{
	*took_gil = 0;
	if (!py.ok || !py.is_init())
		return 0;
	/* Whether this thread holds the GIL: PyGILState_Check compares the thread's own state
	 * with the running one (alone it answers 1 before Python runs, hence is_init). The
	 * running state (PyThreadState_GetUnchecked) is per thread from 3.12 on, but before that
	 * it is the process's: another thread's while that one holds the GIL. */
	void *ts = NULL;
	if (py.gil_check() == 1) {
		ts = py.ts_unchecked();
	} else {
		/* A thread that released the GIL around its native call (PyTorch does so for every
		 * op) still has its state and its frames, frozen while it is in here. Take the GIL
		 * back for the walk, as a C++ callback into Python does (pybind11's
		 * gil_scoped_acquire): only for a thread that has a Python state, and never while
		 * the interpreter shuts down (a thread asking for the GIL then never gets it). A
		 * thread whose own state runs though PyGILState_Check says no (a sub-interpreter's)
		 * is left alone. */
		void *mine = may_take_gil && py.can_take_gil ? py.this_ts() : NULL;
		if (!mine || py.ts_unchecked() == mine || py.finalizing())
			return 0;
		gil_state = py.ensure();
		*took_gil = 1;
		ts = py.ts_unchecked();
	}
	if (!ts)
		return 0; /* the caller releases */
	size_t n = 0;
	void *f = py.get_frame(ts);
	pthread_mutex_lock(&lc.lock);
	while (f && n < max) {
		void *code = py.frame_code(f);
		int line = frame_line(f, code);
		/* The frame runs, so its code object lives on after this reference goes. */
		out[n].code = (uint64_t)(uintptr_t)code;
		out[n].line = line > 0 ? (uint32_t)line : 0;
		n++;
		py.decref(code);
		void *back = py.frame_back(f);
		py.decref(f);
		f = back;
	}
	pthread_mutex_unlock(&lc.lock);
	if (f)
		py.decref(f);
	return n;
}

/* ---- code object -> (file, function), cached; a reference kept per code object ---- */

#define CODE_MAX (1u << 16)

struct code_ent {
	uint64_t code;
	uint32_t file, func; /* ids in names */
};

static struct {
	struct code_ent *slots; /* 2 * CODE_MAX, open addressing */
	size_t n;
	struct cuptrace_strtab names;
} cc;

static char *attr_text(void *o, const char *name)
{
	void *v = py.getattr(o, name);
	const char *s = v ? py.utf8(v) : NULL;
	char *copy = s ? strdup(s) : NULL;
	if (v)
		py.decref(v);
	py.err_clear();
	return copy;
}

int cuptrace_pystack_code(uint64_t code, const char **file, const char **function)
{
	if (!py.ok || !code)
		return -1;
	if (!cc.slots) {
		if (!(cc.slots = calloc(2 * CODE_MAX, sizeof(*cc.slots))))
			return -1;
		cuptrace_strtab_init(&cc.names);
	}
	size_t mask = 2 * CODE_MAX - 1, i = (size_t)cuptrace_hash64(code) & mask;
	for (; cc.slots[i].code; i = (i + 1) & mask) {
		if (cc.slots[i].code == code) {
			*file = cuptrace_strtab_str(&cc.names, cc.slots[i].file);
			*function = cuptrace_strtab_str(&cc.names, cc.slots[i].func);
			return 0;
		}
	}
	if (cc.n >= CODE_MAX)
		return -1;
	void *o = (void *)(uintptr_t)code, *et, *ev, *etb;
	py.err_fetch(&et, &ev, &etb); /* the program's pending error, if any, waits */
	char *fn = attr_text(o, "co_filename");
	char *qn = attr_text(o, "co_qualname"); /* 3.11+ */
	if (!qn)
		qn = attr_text(o, "co_name");
	py.err_restore(et, ev, etb);
	uint32_t a = fn ? cuptrace_strtab_intern(&cc.names, fn, strlen(fn)) : 0;
	uint32_t b = qn ? cuptrace_strtab_intern(&cc.names, qn, strlen(qn)) : 0;
	free(fn);
	free(qn);
	if (!a || !b)
		return -1;
	py.incref(o); /* never released: the address stays this code object's */
	cc.slots[i] = (struct code_ent){code, a, b};
	cc.n++;
	*file = cuptrace_strtab_str(&cc.names, a);
	*function = cuptrace_strtab_str(&cc.names, b);
	return 0;
}

void cuptrace_pystack_release(int took_gil)
{
	if (took_gil)
		py.release(gil_state);
}

uint64_t cuptrace_pystack_anchor(void)
{
	return py.ok ? (uint64_t)(uintptr_t)py.get_frame : 0;
}
