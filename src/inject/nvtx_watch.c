/* NVTX ranges followed for capture windows (--capture-range range:NAME) and steps
 * (--step-range) without CUPTI. `cuptrace record` points NVTX_INJECTION64_PATH at this library,
 * so NVTX hands its function tables to InitializeInjectionNvtx2 (injection.c), which calls
 * cuptrace_nvtx_inject. Where CUPTI is attached already and no window follows ranges, CUPTI
 * takes NVTX as it is. Otherwise the handlers here take NVTX's range slots (push/pop,
 * start/end, their domain forms, string registration): they count the ranges, tell the window
 * code of those it follows, and call CUPTI's handler behind them once CUPTI is attached. CUPTI
 * itself is given NVTX only then (see "CUPTI's NVTX side" below: its NVTX setup alone costs an
 * unsubscribed CUPTI), so a process waiting for its range leaves CUPTI untouched (collect.c
 * defers the attach) and pays one call per NVTX range call. A push CUPTI did not see keeps its
 * pop from CUPTI too, so CUPTI never sees an unmatched end.
 *
 * Where NVTX_INJECTION64_PATH names another library (the program chose libcupti itself), the
 * session falls back to CUPTI's NVTX callbacks (collect_callbacks.c), through the same
 * collect_nvtx_* functions below.
 *
 * Threads: range calls arrive on application threads; push/pop depth is per thread. NVTX's
 * tables and the slots taken are set once, in InitializeInjectionNvtx2; CUPTI's handlers are
 * filled in once, under inject_lock, before s->cupti_attached (which the handlers read with
 * acquire) says CUPTI is attached. A range that opens a window while CUPTI waits to be
 * attached has the flush thread attach it (collect.c owns CUPTI, and hands NVTX to it through
 * collect_nvtx_cupti_attach below): the handler waits for that (collect_window_cupti_wait), so
 * its thread's next launch is recorded. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <nvtx3/nvToolsExt.h>

#include "inject/collect.h"
#include "inject/collect_state.h"
#include "common/log.h"

/* ---- the window side, shared with CUPTI's callback path ---- */

/* Push/pop ranges are known by thread and depth: a pop names no range. The depth counts every
 * range of the thread; the flags say which depths hold a range the window code follows, and
 * which hold a --step-range range. */
static __thread int nvtx_depth;
/* bit d: the range at depth d is followed, ends a step, was not handed to CUPTI */
static __thread uint64_t watched_depths, step_depths, unseen_depths;
static __thread int64_t my_tid;

static int64_t thread_id(void)
{
	if (!my_tid)
		my_tid = (int64_t)syscall(SYS_gettid);
	return my_tid;
}

#define PUSH_KEY(tid, d) ((uint64_t)(tid) << 16 | (uint64_t)((d)&0xffff))
#define STARTEND_KEY(id) ((uint64_t)1 << 63 | (uint64_t)(id))

void collect_nvtx_pushed(struct collect_session *s, const char *name)
{
	int d = ++nvtx_depth;
	if (d <= 0 || d >= 64)
		return; /* deeper than followed: counted, so the pops still match */
	uint64_t bit = 1ull << d;
	watched_depths &= ~bit;
	step_depths &= ~bit;
	if (!name)
		return;
	if (collect_window_is_step_range(s, name))
		step_depths |= bit;
	if (collect_window_range_wanted(s, name)) {
		watched_depths |= bit;
		int64_t tid = thread_id();
		collect_window_range_begin(s, name, PUSH_KEY(tid, d), tid);
	}
}

void collect_nvtx_popped(struct collect_session *s)
{
	int d = nvtx_depth;
	if (d <= 0)
		return; /* a pop without a push we saw (pushed before tracing began) */
	nvtx_depth--;
	if (d >= 64)
		return;
	uint64_t bit = 1ull << d;
	if (watched_depths & bit) {
		watched_depths &= ~bit;
		collect_window_range_end(s, PUSH_KEY(thread_id(), d));
	}
	if (step_depths & bit) {
		step_depths &= ~bit;
		collect_window_step(s);
	}
}

/* Start/end ranges may end on another thread: the ids of the followed ones (ranges of the
 * window's name, few) are kept here; an end of any other range costs one atomic load. Past 64
 * at once, every end goes to the window code (which knows its own ranges' keys). */
static struct {
	pthread_mutex_t lock;
	uint64_t ids[64];
	_Atomic int n;
	_Atomic int overflow;
} startend_watched = {.lock = PTHREAD_MUTEX_INITIALIZER};

void collect_nvtx_started(struct collect_session *s, const char *name, uint64_t id)
{
	if (!id || !name || !collect_window_range_wanted(s, name))
		return;
	pthread_mutex_lock(&startend_watched.lock);
	int n = atomic_load(&startend_watched.n);
	if (n < 64) {
		startend_watched.ids[n] = id;
		atomic_store(&startend_watched.n, n + 1);
	} else {
		atomic_store(&startend_watched.overflow, 1);
	}
	pthread_mutex_unlock(&startend_watched.lock);
	collect_window_range_begin(s, name, STARTEND_KEY(id), thread_id());
}

void collect_nvtx_ended(struct collect_session *s, uint64_t id)
{
	int overflow = atomic_load_explicit(&startend_watched.overflow, memory_order_relaxed);
	if (!overflow && !atomic_load_explicit(&startend_watched.n, memory_order_relaxed))
		return;
	int found = 0;
	pthread_mutex_lock(&startend_watched.lock);
	int n = atomic_load(&startend_watched.n);
	for (int i = 0; i < n; i++)
		if (startend_watched.ids[i] == id) {
			startend_watched.ids[i] = startend_watched.ids[n - 1];
			atomic_store(&startend_watched.n, n - 1);
			found = 1;
			break;
		}
	pthread_mutex_unlock(&startend_watched.lock);
	if (found || overflow)
		collect_window_range_end(s, STARTEND_KEY(id));
}

/* ---- registered strings (nvtxDomainRegisterStringA: nvtx3.hpp's registered_string) ---- */

/* Handles of registered strings and copies of their text, appended under the lock and read
 * without it up to the published count. Registration is rare (once per name); the cap keeps a
 * program registering strings in a loop from growing this without bound. */
#define NREG 4096
static struct {
	pthread_mutex_t lock;
	const void *handle[NREG];
	char *text[NREG];
	unsigned char own[NREG]; /* the handle is ours (the copy), not CUPTI's */
	_Atomic int n;
} reg = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* Records a registered string; handle NULL: the copy is the handle (made before CUPTI had
 * NVTX). Returns the handle, NULL if out of room or memory. */
static const void *reg_add(const void *handle, const char *text)
{
	if (!text)
		return handle;
	pthread_mutex_lock(&reg.lock);
	int n = atomic_load(&reg.n);
	char *copy = n < NREG ? strdup(text) : NULL;
	if (copy) {
		reg.handle[n] = handle ? handle : copy;
		reg.text[n] = copy;
		reg.own[n] = !handle;
		atomic_store_explicit(&reg.n, n + 1, memory_order_release);
	}
	pthread_mutex_unlock(&reg.lock);
	return handle ? handle : copy;
}

static int reg_index(const void *handle)
{
	int n = atomic_load_explicit(&reg.n, memory_order_acquire);
	for (int i = 0; i < n; i++)
		if (reg.handle[i] == handle)
			return i;
	return -1;
}

static const char *reg_find(const void *handle)
{
	int i = reg_index(handle);
	return i < 0 ? NULL : reg.text[i];
}

/* The attributes CUPTI may see: a string registered before CUPTI had NVTX has a handle of
 * ours, which CUPTI does not know; it gets the text instead (in *tmp). */
static const nvtxEventAttributes_t *for_cupti(const nvtxEventAttributes_t *a,
                                              nvtxEventAttributes_t *tmp)
{
	if (!a || a->messageType != NVTX_MESSAGE_TYPE_REGISTERED)
		return a;
	int i = reg_index(a->message.registered);
	if (i < 0 || !reg.own[i])
		return a;
	*tmp = *a;
	tmp->messageType = NVTX_MESSAGE_TYPE_ASCII;
	tmp->message.ascii = reg.text[i];
	return tmp;
}

static const char *attr_name(const nvtxEventAttributes_t *a)
{
	if (!a)
		return NULL;
	if (a->messageType == NVTX_MESSAGE_TYPE_ASCII)
		return a->message.ascii;
	if (a->messageType == NVTX_MESSAGE_TYPE_REGISTERED)
		return reg_find(a->message.registered);
	return NULL;
}

/* ---- the handlers put in front of CUPTI's ---- */

/* CUPTI's handlers of the slots the handlers here took (NULL until CUPTI is given NVTX, or
 * where it installed none), by NVTX module and callback id. */
#define MAXSLOT 64
static NvtxFunctionPointer behind[NVTX_CB_MODULE_SIZE][MAXSLOT];

/* What NVTX returns for a push or pop when no tool handles it. */
#define NO_TRACKING (-2)

/* CUPTI's handler for a call, or NULL while CUPTI is not attached (nothing to record yet). */
#define CUPTI_FN(module, id, type)                                                                 \
	(atomic_load_explicit(&s->cupti_attached, memory_order_acquire)                            \
	     ? (type)behind[NVTX_CB_MODULE_##module][id]                                           \
	     : NULL)

/* A push: CUPTI's handler if it is attached; otherwise the depth it would have is marked
 * unseen (after collect_nvtx_pushed has counted it). */
static int push_result(int handled, int r)
{
	int d = nvtx_depth;
	if (d > 0 && d < 64) {
		if (handled)
			unseen_depths &= ~(1ull << d);
		else
			unseen_depths |= 1ull << d;
	}
	return handled ? r : NO_TRACKING;
}

/* A pop goes to CUPTI only if CUPTI saw its push (read before collect_nvtx_popped). */
static int pop_seen(void)
{
	int d = nvtx_depth;
	return d <= 0 || d >= 64 || !(unseen_depths & (1ull << d));
}

/* A start/end range CUPTI did not number (started before CUPTI was attached, or CUPTI gave 0):
 * numbered here, in a space CUPTI's counters do not reach, and never passed to CUPTI's end. */
static _Atomic uint64_t own_ids;
#define OWN_ID_BIT ((uint64_t)1 << 62)

static nvtxRangeId_t own_id(nvtxRangeId_t cupti_id)
{
	return cupti_id ? cupti_id : (atomic_fetch_add(&own_ids, 1) + 1) | OWN_ID_BIT;
}

static int w_push_a(const char *message)
{
	struct collect_session *s = collect_process_session; /* trampoline: NVTX handler */
	nvtxRangePushA_impl_fntype f =
	    CUPTI_FN(CORE, NVTX_CBID_CORE_RangePushA, nvtxRangePushA_impl_fntype);
	int r = f ? f(message) : NO_TRACKING;
	collect_nvtx_pushed(s, message);
	collect_window_cupti_wait(s);
	return push_result(f != NULL, r);
}

static int w_push_w(const wchar_t *message)
{
	struct collect_session *s = collect_process_session; /* trampoline: NVTX handler */
	nvtxRangePushW_impl_fntype f =
	    CUPTI_FN(CORE, NVTX_CBID_CORE_RangePushW, nvtxRangePushW_impl_fntype);
	int r = f ? f(message) : NO_TRACKING;
	collect_nvtx_pushed(s, NULL); /* wide names are not matched */
	return push_result(f != NULL, r);
}

static int w_push_ex(const nvtxEventAttributes_t *a)
{
	struct collect_session *s = collect_process_session; /* trampoline: NVTX handler */
	nvtxRangePushEx_impl_fntype f =
	    CUPTI_FN(CORE, NVTX_CBID_CORE_RangePushEx, nvtxRangePushEx_impl_fntype);
	nvtxEventAttributes_t tmp;
	int r = f ? f(for_cupti(a, &tmp)) : NO_TRACKING;
	collect_nvtx_pushed(s, attr_name(a));
	collect_window_cupti_wait(s);
	return push_result(f != NULL, r);
}

static int w_pop(void)
{
	struct collect_session *s = collect_process_session; /* trampoline: NVTX handler */
	nvtxRangePop_impl_fntype f =
	    pop_seen() ? CUPTI_FN(CORE, NVTX_CBID_CORE_RangePop, nvtxRangePop_impl_fntype) : NULL;
	int r = f ? f() : NO_TRACKING;
	collect_nvtx_popped(s);
	collect_window_cupti_wait(s);
	return r;
}

static nvtxRangeId_t w_start_a(const char *message)
{
	struct collect_session *s = collect_process_session; /* trampoline: NVTX handler */
	nvtxRangeStartA_impl_fntype f =
	    CUPTI_FN(CORE, NVTX_CBID_CORE_RangeStartA, nvtxRangeStartA_impl_fntype);
	nvtxRangeId_t id = own_id(f ? f(message) : 0);
	collect_nvtx_started(s, message, id);
	collect_window_cupti_wait(s);
	return id;
}

static nvtxRangeId_t w_start_w(const wchar_t *message)
{
	struct collect_session *s = collect_process_session; /* trampoline: NVTX handler */
	nvtxRangeStartW_impl_fntype f =
	    CUPTI_FN(CORE, NVTX_CBID_CORE_RangeStartW, nvtxRangeStartW_impl_fntype);
	return own_id(f ? f(message) : 0);
}

static nvtxRangeId_t w_start_ex(const nvtxEventAttributes_t *a)
{
	struct collect_session *s = collect_process_session; /* trampoline: NVTX handler */
	nvtxRangeStartEx_impl_fntype f =
	    CUPTI_FN(CORE, NVTX_CBID_CORE_RangeStartEx, nvtxRangeStartEx_impl_fntype);
	nvtxEventAttributes_t tmp;
	nvtxRangeId_t id = own_id(f ? f(for_cupti(a, &tmp)) : 0);
	collect_nvtx_started(s, attr_name(a), id);
	collect_window_cupti_wait(s);
	return id;
}

static void w_end(nvtxRangeId_t id)
{
	struct collect_session *s = collect_process_session; /* trampoline: NVTX handler */
	nvtxRangeEnd_impl_fntype f =
	    CUPTI_FN(CORE, NVTX_CBID_CORE_RangeEnd, nvtxRangeEnd_impl_fntype);
	if (f && !(id & OWN_ID_BIT))
		f(id);
	collect_nvtx_ended(s, id);
	collect_window_cupti_wait(s);
}

static int w_dpush(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a)
{
	struct collect_session *s = collect_process_session; /* trampoline: NVTX handler */
	nvtxDomainRangePushEx_impl_fntype f =
	    CUPTI_FN(CORE2, NVTX_CBID_CORE2_DomainRangePushEx, nvtxDomainRangePushEx_impl_fntype);
	nvtxEventAttributes_t tmp;
	int r = f ? f(d, for_cupti(a, &tmp)) : NO_TRACKING;
	collect_nvtx_pushed(s, attr_name(a));
	collect_window_cupti_wait(s);
	return push_result(f != NULL, r);
}

static int w_dpop(nvtxDomainHandle_t d)
{
	struct collect_session *s = collect_process_session; /* trampoline: NVTX handler */
	nvtxDomainRangePop_impl_fntype f =
	    pop_seen()
	        ? CUPTI_FN(CORE2, NVTX_CBID_CORE2_DomainRangePop, nvtxDomainRangePop_impl_fntype)
	        : NULL;
	int r = f ? f(d) : NO_TRACKING;
	collect_nvtx_popped(s);
	collect_window_cupti_wait(s);
	return r;
}

static nvtxRangeId_t w_dstart(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a)
{
	struct collect_session *s = collect_process_session; /* trampoline: NVTX handler */
	nvtxDomainRangeStartEx_impl_fntype f =
	    CUPTI_FN(CORE2, NVTX_CBID_CORE2_DomainRangeStartEx, nvtxDomainRangeStartEx_impl_fntype);
	nvtxEventAttributes_t tmp;
	nvtxRangeId_t id = own_id(f ? f(d, for_cupti(a, &tmp)) : 0);
	collect_nvtx_started(s, attr_name(a), id);
	collect_window_cupti_wait(s);
	return id;
}

static void w_dend(nvtxDomainHandle_t d, nvtxRangeId_t id)
{
	struct collect_session *s = collect_process_session; /* trampoline: NVTX handler */
	nvtxDomainRangeEnd_impl_fntype f =
	    CUPTI_FN(CORE2, NVTX_CBID_CORE2_DomainRangeEnd, nvtxDomainRangeEnd_impl_fntype);
	if (f && !(id & OWN_ID_BIT))
		f(d, id);
	collect_nvtx_ended(s, id);
	collect_window_cupti_wait(s);
}

static nvtxStringHandle_t w_dregister(nvtxDomainHandle_t d, const char *str)
{
	nvtxDomainRegisterStringA_impl_fntype f = (nvtxDomainRegisterStringA_impl_fntype)
	    behind[NVTX_CB_MODULE_CORE2][NVTX_CBID_CORE2_DomainRegisterStringA];
	return (nvtxStringHandle_t)reg_add(f ? f(d, str) : NULL, str);
}

static atomic_int installed;

int collect_nvtx_watching(void)
{
	return atomic_load(&installed);
}

/* ---- CUPTI's NVTX side, brought in when CUPTI is attached ---- */

/* CUPTI's InitializeInjectionNvtx2 alone makes an unsubscribed CUPTI cost: on an H100 a graph
 * replay with one NVTX range around it took 1.3 us longer (2.6%) once CUPTI had taken NVTX,
 * whether or not its handlers ran. So until CUPTI is attached it is not given NVTX at all: the
 * handlers here count the ranges; when CUPTI attaches (collect.c), its NVTX init runs against
 * private copies of NVTX's tables, its range handlers go behind ours, and its other handlers
 * (marks, domains, names) into NVTX's live tables. */
static NvtxGetExportTableFunc_t real_get;
static NvtxFunctionTable live[NVTX_CB_MODULE_SIZE];
static unsigned live_n[NVTX_CB_MODULE_SIZE];
static unsigned char wrapped[NVTX_CB_MODULE_SIZE][MAXSLOT];
static NvtxFunctionPointer priv_slot[NVTX_CB_MODULE_SIZE][MAXSLOT];
static NvtxFunctionPointer *priv_tab[NVTX_CB_MODULE_SIZE][MAXSLOT];
static pthread_mutex_t inject_lock = PTHREAD_MUTEX_INITIALIZER;
static int cupti_nvtx_state; /* 0: not given NVTX yet, 1: given, -1: failed (said once) */

typedef int (*nvtx_init_fn)(NvtxGetExportTableFunc_t);
static nvtx_init_fn cupti_init_override; /* tests: a fake CUPTI */

void collect_nvtx_set_cupti_init(int (*fn)(NvtxGetExportTableFunc_t))
{
	cupti_init_override = fn;
}

static nvtx_init_fn cupti_nvtx_init(void)
{
	if (cupti_init_override)
		return cupti_init_override;
	nvtx_init_fn f = (nvtx_init_fn)dlsym(RTLD_NEXT, "InitializeInjectionNvtx2");
	if (f)
		return f;
	void *h = dlopen("libcupti.so.13", RTLD_NOW | RTLD_NOLOAD);
	if (!h)
		h = dlopen("libcupti.so", RTLD_NOW | RTLD_NOLOAD);
	return h ? (nvtx_init_fn)dlsym(h, "InitializeInjectionNvtx2") : NULL;
}

static int NVTX_API priv_module(NvtxCallbackModule m, NvtxFunctionTable *out, unsigned int *size)
{
	if (m <= NVTX_CB_MODULE_INVALID || m >= NVTX_CB_MODULE_SIZE || !live[m])
		return 0;
	*out = priv_tab[m];
	*size = live_n[m] < MAXSLOT ? live_n[m] : MAXSLOT;
	return 1;
}

static const NvtxExportTableCallbacks priv_callbacks = {sizeof(NvtxExportTableCallbacks),
                                                        priv_module};

static const void *NVTX_API priv_get(uint32_t id)
{
	return id == NVTX_ETID_CALLBACKS ? (const void *)&priv_callbacks : real_get(id);
}

/* Caller holds inject_lock. */
static void give_cupti_nvtx(void)
{
	if (cupti_nvtx_state)
		return;
	for (int m = 0; m < NVTX_CB_MODULE_SIZE; m++)
		for (int i = 0; i < MAXSLOT; i++) {
			priv_slot[m][i] = NULL;
			priv_tab[m][i] = &priv_slot[m][i];
		}
	nvtx_init_fn f = cupti_nvtx_init();
	if (!f || !f(priv_get)) {
		cupti_nvtx_state = -1;
		cuptrace_warn("libcupti did not take NVTX: NVTX ranges are not recorded");
		return;
	}
	for (int m = 1; m < NVTX_CB_MODULE_SIZE; m++) {
		unsigned n = live_n[m] < MAXSLOT ? live_n[m] : MAXSLOT;
		for (unsigned i = 0; live[m] && i < n; i++) {
			NvtxFunctionPointer fn = priv_slot[m][i];
			if (!fn || !live[m][i])
				continue;
			if (wrapped[m][i])
				behind[m][i] = fn;
			else
				*live[m][i] = fn;
		}
	}
	cupti_nvtx_state = 1;
}

void collect_nvtx_cupti_attach(void)
{
	pthread_mutex_lock(&inject_lock);
	if (atomic_load(&installed))
		give_cupti_nvtx();
	pthread_mutex_unlock(&inject_lock);
}

/* Puts fn in a live slot (CUPTI's handler, when it comes, goes behind it). */
static void wrap(int m, unsigned id, NvtxFunctionPointer fn)
{
	if (!live[m] || id >= live_n[m] || id >= MAXSLOT || !live[m][id])
		return;
	wrapped[m][id] = 1;
	*live[m][id] = fn;
}

int cuptrace_nvtx_inject(const void *get_export_table)
{
	struct collect_session *s = collect_process_session; /* trampoline: NVTX injection */
	NvtxGetExportTableFunc_t get = (NvtxGetExportTableFunc_t)get_export_table;
	const NvtxExportTableCallbacks *cb =
	    get ? (const NvtxExportTableCallbacks *)get(NVTX_ETID_CALLBACKS) : NULL;
	pthread_mutex_lock(&inject_lock);
	real_get = get;
	int tables = cb && cb->GetModuleFunctionTable;
	for (int m = 1; tables && m < NVTX_CB_MODULE_SIZE; m++)
		if (!cb->GetModuleFunctionTable((NvtxCallbackModule)m, &live[m], &live_n[m]))
			live[m] = NULL;
	tables = tables && live[NVTX_CB_MODULE_CORE] && live[NVTX_CB_MODULE_CORE2];
	int watch = collect_window_nvtx_wanted();
	if (!tables || (atomic_load(&s->cupti_attached) && !watch)) {
		/* CUPTI is on and no window follows ranges: CUPTI takes NVTX as it is. */
		pthread_mutex_unlock(&inject_lock);
		nvtx_init_fn f = cupti_nvtx_init();
		int r = f && get && f(get);
		if (!r)
			cuptrace_warn(
			    "libcupti has no NVTX entry point: NVTX ranges are not recorded");
		if (!tables && watch)
			cuptrace_warn("NVTX gave no function table: capture windows by NVTX range "
			              "and --step-range do not open");
		return r;
	}
	wrap(NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_RangePushA, (NvtxFunctionPointer)w_push_a);
	wrap(NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_RangePushW, (NvtxFunctionPointer)w_push_w);
	wrap(NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_RangePushEx, (NvtxFunctionPointer)w_push_ex);
	wrap(NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_RangePop, (NvtxFunctionPointer)w_pop);
	wrap(NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_RangeStartA, (NvtxFunctionPointer)w_start_a);
	wrap(NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_RangeStartW, (NvtxFunctionPointer)w_start_w);
	wrap(NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_RangeStartEx, (NvtxFunctionPointer)w_start_ex);
	wrap(NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_RangeEnd, (NvtxFunctionPointer)w_end);
	wrap(NVTX_CB_MODULE_CORE2, NVTX_CBID_CORE2_DomainRangePushEx, (NvtxFunctionPointer)w_dpush);
	wrap(NVTX_CB_MODULE_CORE2, NVTX_CBID_CORE2_DomainRangePop, (NvtxFunctionPointer)w_dpop);
	wrap(NVTX_CB_MODULE_CORE2, NVTX_CBID_CORE2_DomainRangeStartEx,
	     (NvtxFunctionPointer)w_dstart);
	wrap(NVTX_CB_MODULE_CORE2, NVTX_CBID_CORE2_DomainRangeEnd, (NvtxFunctionPointer)w_dend);
	wrap(NVTX_CB_MODULE_CORE2, NVTX_CBID_CORE2_DomainRegisterStringA,
	     (NvtxFunctionPointer)w_dregister);
	atomic_store(&installed, 1);
	if (atomic_load(&s->cupti_attached))
		give_cupti_nvtx();
	pthread_mutex_unlock(&inject_lock);
	return 1;
}

/* Whether NVTX_INJECTION64_PATH names this library (the same file), so that NVTX will hand
 * its ranges to cuptrace_nvtx_inject. */
int collect_nvtx_ours(void)
{
	if (atomic_load(&installed))
		return 1;
	const char *p = getenv("NVTX_INJECTION64_PATH");
	Dl_info me;
	struct stat a, b;
	if (!p || !*p || !dladdr((void *)cuptrace_nvtx_inject, &me) || !me.dli_fname)
		return 0;
	return stat(p, &a) == 0 && stat(me.dli_fname, &b) == 0 && a.st_dev == b.st_dev &&
	       a.st_ino == b.st_ino;
}
