/* The NVTX range watcher (src/inject/nvtx_watch.c) against a fake NVTX (function tables like
 * the ones NVTX hands InitializeInjectionNvtx2) and a fake CUPTI (an NVTX init that fills the
 * tables it is given). Asserts that CUPTI is given NVTX only when it is attached, that its
 * range handlers then sit behind the watcher's (arguments and return values passed through) and
 * its other handlers land in NVTX's live table, and what the window code learns: which ranges
 * begin and end, under which keys, and which pops end a step. The window code is stubbed here:
 * it records the calls. */
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <nvtx3/nvToolsExt.h>

#include "check.h"
#include "inject/collect.h"
#include "inject/collect_state.h"

/* ---- the window code, stubbed: ranges named "win" are followed, "iter" ends a step ---- */

static struct {
	char name[32];
	uint64_t key;
	int64_t tid;
	int end; /* 0: a begin, 1: an end */
} ev[64];
static int nev, nsteps;
static int nbegins, nends; /* all of them, past ev[]'s room too */
/* Calls that were handed another session than the process's (the handlers are trampolines). */
static int wrong_session;

int collect_window_range_wanted(struct collect_session *s, const char *name)
{
	wrong_session += s != collect_process_session;
	return !strcmp(name, "win");
}

int collect_window_is_step_range(struct collect_session *s, const char *name)
{
	wrong_session += s != collect_process_session;
	return !strcmp(name, "iter");
}

int collect_window_nvtx_wanted(void)
{
	return 1;
}

void collect_window_range_begin(struct collect_session *s, const char *name, uint64_t key,
                                int64_t tid)
{
	wrong_session += s != collect_process_session;
	nbegins++;
	if (nev < 64) {
		snprintf(ev[nev].name, sizeof(ev[nev].name), "%s", name);
		ev[nev].key = key;
		ev[nev].tid = tid;
		ev[nev++].end = 0;
	}
}

void collect_window_range_end(struct collect_session *s, uint64_t key)
{
	wrong_session += s != collect_process_session;
	nends++;
	if (nev < 64) {
		ev[nev].name[0] = 0;
		ev[nev].key = key;
		ev[nev++].end = 1;
	}
}

void collect_window_step(struct collect_session *s)
{
	wrong_session += s != collect_process_session;
	nsteps++;
}

/* The handlers wait for a window's CUPTI after every range call that can open one (all but the
 * wide push): the events the window code had by then, at each wait. */
static int nwaits, waits_begins[64], waits_steps[64];

void collect_window_cupti_wait(struct collect_session *s)
{
	wrong_session += s != collect_process_session;
	if (nwaits < 64) {
		waits_begins[nwaits] = nbegins;
		waits_steps[nwaits] = nsteps;
	}
	nwaits++;
}

/* ---- a fake NVTX with fake CUPTI handlers in its table ---- */

static int cupti_pushes, cupti_pops, cupti_ends, cupti_dpushes;
static nvtxRangeId_t cupti_next_id; /* what "CUPTI" returns from a start (0: no id) */
static nvtxRangeId_t cupti_last_end;
static const char *cupti_last_msg;

static int NVTX_API f_push_a(const char *m)
{
	cupti_last_msg = m;
	return ++cupti_pushes; /* CUPTI returns the depth: a value we can tell apart */
}

static int NVTX_API f_pop(void)
{
	cupti_pops++;
	return 100 + cupti_pops;
}

static nvtxRangeId_t NVTX_API f_start_a(const char *m)
{
	cupti_last_msg = m;
	return cupti_next_id;
}

static void NVTX_API f_end(nvtxRangeId_t id)
{
	cupti_ends++;
	cupti_last_end = id;
}

static int cupti_last_type;
static int NVTX_API f_dpush(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a)
{
	(void)d;
	cupti_last_type = a ? a->messageType : -1;
	cupti_last_msg = a && a->messageType == NVTX_MESSAGE_TYPE_ASCII ? a->message.ascii : NULL;
	return ++cupti_dpushes;
}

static nvtxStringHandle_t NVTX_API f_register(nvtxDomainHandle_t d, const char *s)
{
	(void)d;
	(void)s;
	static int token[4];
	static int used;
	return (nvtxStringHandle_t)&token[used++ % 4];
}

static int marks;
static void NVTX_API f_mark_a(const char *m)
{
	(void)m;
	marks++;
}

/* The fake CUPTI's NVTX init: fills the tables of the export table it is handed, as libcupti's
 * InitializeInjectionNvtx2 does. RangePushEx and DomainRangePop are left empty. */
static int cupti_inits;
static int fake_cupti_init(const void *(*get)(uint32_t))
{
	cupti_inits++;
	const NvtxExportTableCallbacks *cb = get(NVTX_ETID_CALLBACKS);
	NvtxFunctionTable t1, t2;
	unsigned n1, n2;
	if (!cb || !cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &t1, &n1) ||
	    !cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &t2, &n2))
		return 0;
	*t1[NVTX_CBID_CORE_RangePushA] = (NvtxFunctionPointer)f_push_a;
	*t1[NVTX_CBID_CORE_RangePop] = (NvtxFunctionPointer)f_pop;
	*t1[NVTX_CBID_CORE_RangeStartA] = (NvtxFunctionPointer)f_start_a;
	*t1[NVTX_CBID_CORE_RangeEnd] = (NvtxFunctionPointer)f_end;
	*t1[NVTX_CBID_CORE_MarkA] = (NvtxFunctionPointer)f_mark_a;
	*t2[NVTX_CBID_CORE2_DomainRangePushEx] = (NvtxFunctionPointer)f_dpush;
	*t2[NVTX_CBID_CORE2_DomainRegisterStringA] = (NvtxFunctionPointer)f_register;
	return 1;
}

static NvtxFunctionPointer core_slot[NVTX_CBID_CORE_SIZE], core2_slot[NVTX_CBID_CORE2_SIZE];
static NvtxFunctionPointer *core_tab[NVTX_CBID_CORE_SIZE], *core2_tab[NVTX_CBID_CORE2_SIZE];

static int NVTX_API get_module(NvtxCallbackModule m, NvtxFunctionTable *out, unsigned int *size)
{
	if (m == NVTX_CB_MODULE_CORE) {
		*out = core_tab;
		*size = NVTX_CBID_CORE_SIZE;
		return 1;
	}
	if (m == NVTX_CB_MODULE_CORE2) {
		*out = core2_tab;
		*size = NVTX_CBID_CORE2_SIZE;
		return 1;
	}
	return 0;
}

static const NvtxExportTableCallbacks callbacks = {sizeof(NvtxExportTableCallbacks), get_module};

static const void *NVTX_API get_table(uint32_t id)
{
	return id == NVTX_ETID_CALLBACKS ? &callbacks : NULL;
}

/* The slots as NVTX's own functions would call them. */
#define SLOT(tab, id, type) ((type)(*tab[id]))

static int push(const char *m)
{
	return SLOT(core_tab, NVTX_CBID_CORE_RangePushA, nvtxRangePushA_impl_fntype)(m);
}

static int pop(void)
{
	return SLOT(core_tab, NVTX_CBID_CORE_RangePop, nvtxRangePop_impl_fntype)();
}

static int push_ex(const nvtxEventAttributes_t *a)
{
	return SLOT(core_tab, NVTX_CBID_CORE_RangePushEx, nvtxRangePushEx_impl_fntype)(a);
}

static nvtxRangeId_t start(const char *m)
{
	return SLOT(core_tab, NVTX_CBID_CORE_RangeStartA, nvtxRangeStartA_impl_fntype)(m);
}

static void end(nvtxRangeId_t id)
{
	SLOT(core_tab, NVTX_CBID_CORE_RangeEnd, nvtxRangeEnd_impl_fntype)(id);
}

static int dpush(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a)
{
	return SLOT(core2_tab, NVTX_CBID_CORE2_DomainRangePushEx,
	            nvtxDomainRangePushEx_impl_fntype)(d, a);
}

static int dpop(nvtxDomainHandle_t d)
{
	return SLOT(core2_tab, NVTX_CBID_CORE2_DomainRangePop, nvtxDomainRangePop_impl_fntype)(d);
}

static nvtxStringHandle_t reg(nvtxDomainHandle_t d, const char *text)
{
	return SLOT(core2_tab, NVTX_CBID_CORE2_DomainRegisterStringA,
	            nvtxDomainRegisterStringA_impl_fntype)(d, text);
}

static int64_t my_tid(void)
{
	return (int64_t)syscall(SYS_gettid);
}

static void setup(void)
{
	for (int i = 0; i < NVTX_CBID_CORE_SIZE; i++)
		core_tab[i] = &core_slot[i];
	for (int i = 0; i < NVTX_CBID_CORE2_SIZE; i++)
		core2_tab[i] = &core2_slot[i];
	collect_nvtx_set_cupti_init(fake_cupti_init);
	atomic_store(&collect_process_session->cupti_attached,
	             0); /* a session waiting for its window */
	CHECK_EQ_INT(cuptrace_nvtx_inject((const void *)get_table), 1);
	CHECK_EQ_INT(collect_nvtx_watching(), 1);
	CHECK_EQ_INT(cupti_inits, 0); /* CUPTI is not given NVTX before it is attached */
	CHECK(core_slot[NVTX_CBID_CORE_MarkA] == NULL);
	CHECK(core_slot[NVTX_CBID_CORE_RangePushA] != NULL); /* the watcher's */
}

/* Push/pop ranges: keys are (thread << 16 | depth); only "win" ranges reach the window code,
 * the pop of an "iter" range ends a step, CUPTI's handlers see every call. */
static void test_push_pop(void)
{
	CHECK(core_slot[NVTX_CBID_CORE_RangePushA] != (NvtxFunctionPointer)f_push_a); /* ours */
	nev = nsteps = 0;
	int p0 = cupti_pushes, q0 = cupti_pops, b0 = nbegins;
	CHECK_EQ_INT(push("outer"), p0 + 1); /* depth 1 */
	nwaits = 0;
	CHECK_EQ_INT(push("win"), p0 + 2);   /* depth 2: followed */
	CHECK_EQ_STR(cupti_last_msg, "win"); /* the argument passed through */
	/* The wait comes after the window code heard of the range, before the call returns. */
	CHECK_EQ_INT(nwaits, 1);
	CHECK_EQ_INT(waits_begins[0], b0 + 1);
	CHECK_EQ_INT(push("iter"), p0 + 3); /* depth 3: a step */
	CHECK_EQ_INT(pop(), 100 + q0 + 1);  /* iter ends: a step */
	CHECK_EQ_INT(nsteps, 1);
	CHECK_EQ_INT(nwaits, 3);
	CHECK_EQ_INT(waits_steps[1], 0);
	CHECK_EQ_INT(waits_steps[2], 1);   /* after the step the pop ended */
	CHECK_EQ_INT(pop(), 100 + q0 + 2); /* win ends */
	CHECK_EQ_INT(pop(), 100 + q0 + 3); /* outer: nothing */
	CHECK_EQ_INT(pop(), 100 + q0 + 4); /* a pop of a push before us: ignored */
	CHECK_EQ_INT(cupti_pops - q0, 4);
	uint64_t key = (uint64_t)my_tid() << 16 | 2;
	CHECK_EQ_INT(nev, 2);
	CHECK_EQ_STR(ev[0].name, "win");
	CHECK_EQ_INT(ev[0].end, 0);
	CHECK(ev[0].key == key);
	CHECK_EQ_INT(ev[0].tid, my_tid());
	CHECK_EQ_INT(ev[1].end, 1);
	CHECK(ev[1].key == key);
	CHECK_EQ_INT(nsteps, 1);
}

/* A range reused at the same depth after a followed one: not followed (the flag is cleared). */
static void test_depth_reuse(void)
{
	nev = nsteps = 0;
	push("win");
	pop();
	push("other");
	pop();
	CHECK_EQ_INT(nev, 2); /* the begin and end of "win" only */
	CHECK_EQ_INT(nsteps, 0);
}

/* Start/end: the id CUPTI returns is the key and goes back to CUPTI's end; where CUPTI gives
 * none, the watcher numbers the range itself and keeps that id from CUPTI's end. */
static void test_start_end(void)
{
	nev = 0;
	cupti_next_id = 42;
	nvtxRangeId_t a = start("win");
	CHECK(a == 42);
	int e0 = cupti_ends;
	end(a);
	CHECK_EQ_INT(cupti_ends, e0 + 1);
	CHECK(cupti_last_end == 42);
	CHECK_EQ_INT(nev, 2);
	CHECK(ev[0].key == ((uint64_t)1 << 63 | 42));
	CHECK(ev[1].key == ev[0].key && ev[1].end == 1);

	/* "CUPTI" gives no id (not recording): two ranges get distinct ids of ours. */
	nev = 0;
	cupti_next_id = 0;
	nvtxRangeId_t b = start("win"), c = start("other");
	CHECK(b != 0 && c != 0 && b != c);
	end(c);
	end(b);
	CHECK_EQ_INT(cupti_ends, e0 + 1); /* ids of ours never reach CUPTI */
	CHECK_EQ_INT(nev, 2);             /* "other" is not followed: its end is not passed on */
	CHECK(ev[0].key == ((uint64_t)1 << 63 | b));
	CHECK(ev[1].key == ev[0].key && ev[1].end == 1);
}

/* Domain ranges with attributes: ASCII names and registered strings are matched; a slot CUPTI
 * left empty (DomainRangePop here) still counts the depth and returns NVTX's "no tracking". */
static void test_domain_registered(void)
{
	CHECK(core2_slot[NVTX_CBID_CORE2_DomainRangePop] != NULL); /* ours, CUPTI has none */
	nvtxStringHandle_t h_win = reg(NULL, "win"), h_x = reg(NULL, "x");
	CHECK(h_win && h_x && h_win != h_x);
	nvtxEventAttributes_t a;
	memset(&a, 0, sizeof(a));
	a.version = NVTX_VERSION;
	a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
	a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
	nev = 0;
	int d0 = cupti_dpushes;
	a.message.registered = h_x;
	dpush(NULL, &a);
	a.message.registered = h_win;
	dpush(NULL, &a);
	CHECK_EQ_INT(cupti_dpushes, d0 + 2);
	CHECK_EQ_INT(dpop(NULL), -2);
	CHECK_EQ_INT(dpop(NULL), -2);
	CHECK_EQ_INT(nev, 2);
	CHECK_EQ_STR(ev[0].name, "win");
	CHECK(ev[0].key == ((uint64_t)my_tid() << 16 | 2));
	CHECK(ev[1].end == 1 && ev[1].key == ev[0].key);

	/* ASCII through the Ex form, whose slot CUPTI also left empty. */
	a.messageType = NVTX_MESSAGE_TYPE_ASCII;
	a.message.ascii = "win";
	nev = 0;
	CHECK_EQ_INT(push_ex(&a), -2);
	pop();
	CHECK_EQ_INT(nev, 2);
	CHECK(ev[0].key == ((uint64_t)my_tid() << 16 | 1));
}

/* Another thread has its own depth: its first push is depth 1 under its own thread id. */
static void *other_thread(void *arg)
{
	(void)arg;
	push("win");
	pop();
	static int64_t tid;
	tid = my_tid();
	return &tid;
}

static void test_threads(void)
{
	push("outer"); /* this thread at depth 1 */
	nev = 0;
	pthread_t t;
	void *ret = NULL;
	CHECK_EQ_INT(pthread_create(&t, NULL, other_thread, NULL), 0);
	pthread_join(t, &ret);
	pop();
	int64_t tid = *(int64_t *)ret;
	CHECK(tid != my_tid());
	CHECK_EQ_INT(nev, 2);
	CHECK(ev[0].key == ((uint64_t)tid << 16 | 1));
	CHECK_EQ_INT(ev[0].tid, tid);
}

/* Before CUPTI is attached its handlers are left out (nothing to record, and they cost); a
 * range pushed then and popped after the attach keeps its pop from CUPTI, whose stack never
 * held it. The window code hears of every range all the same. */
static void test_unattached(void)
{
	nvtxStringHandle_t early = reg(NULL, "early"); /* a handle of the watcher's own */
	CHECK(early != NULL);
	nev = 0;
	int p0 = cupti_pushes, q0 = cupti_pops, e0 = cupti_ends;
	CHECK_EQ_INT(push("win"), -2); /* depth 1, unseen by CUPTI */
	cupti_next_id = 77;
	nvtxRangeId_t id = start("win");
	CHECK(id != 77 && id != 0); /* CUPTI was not asked */
	/* The window opened: CUPTI attached (collect.c's order), given NVTX once. */
	collect_nvtx_cupti_attach();
	atomic_store(&collect_process_session->cupti_attached, 1);
	collect_nvtx_cupti_attach(); /* a second attach (a new session) does not init again */
	CHECK_EQ_INT(cupti_inits, 1);
	CHECK(core_slot[NVTX_CBID_CORE_MarkA] == (NvtxFunctionPointer)f_mark_a);      /* live */
	CHECK(core_slot[NVTX_CBID_CORE_RangePushA] != (NvtxFunctionPointer)f_push_a); /* behind */
	CHECK_EQ_INT(push("x"), p0 + 1);   /* depth 2, seen */
	CHECK_EQ_INT(pop(), 100 + q0 + 1); /* depth 2's pop reaches CUPTI */
	CHECK_EQ_INT(pop(), -2);           /* depth 1's does not */
	end(id);
	CHECK_EQ_INT(cupti_pushes, p0 + 1);
	CHECK_EQ_INT(cupti_pops, q0 + 1);
	CHECK_EQ_INT(cupti_ends, e0); /* an id of ours */
	CHECK_EQ_INT(nev, 4);         /* push win, start win, its end, pop win */
	CHECK_EQ_INT(cupti_inits, 1);

	/* The string registered before CUPTI had NVTX reaches CUPTI as its text. */
	nvtxEventAttributes_t a;
	memset(&a, 0, sizeof(a));
	a.version = NVTX_VERSION;
	a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
	a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
	a.message.registered = early;
	dpush(NULL, &a);
	CHECK_EQ_INT(cupti_last_type, NVTX_MESSAGE_TYPE_ASCII);
	CHECK_EQ_STR(cupti_last_msg, "early");
	dpop(NULL);
	CHECK_EQ_INT(ev[0].end + ev[1].end, 0);
	CHECK_EQ_INT(ev[2].end + ev[3].end, 2);
}

/* More followed start/end ranges at once than the watcher keeps ids of: every end still
 * reaches the window code. Last: the watcher passes every end on from then on. */
static void test_startend_many(void)
{
	nvtxRangeId_t ids[70];
	nbegins = nends = 0;
	for (int i = 0; i < 70; i++) {
		cupti_next_id = 1000 + (nvtxRangeId_t)i;
		ids[i] = start("win");
	}
	for (int i = 0; i < 70; i++)
		end(ids[i]);
	CHECK_EQ_INT(nbegins, 70);
	CHECK_EQ_INT(nends, 70);
}

/* Every window call the handlers made was handed the process's session. */
static void test_process_session(void)
{
	CHECK(nbegins > 0);
	CHECK_EQ_INT(wrong_session, 0);
}

int main(void)
{
	setup();
	static const struct check_test tests[] = {
	    {"unattached", test_unattached}, /* first: CUPTI attaches in it */
	    {"push_pop", test_push_pop},
	    {"depth_reuse", test_depth_reuse},
	    {"start_end", test_start_end},
	    {"domain_registered", test_domain_registered},
	    {"threads", test_threads},
	    {"startend_many", test_startend_many}, /* last: see there */
	    {"process_session", test_process_session},
	};
	return check_run(tests, sizeof(tests) / sizeof(tests[0]));
}
