/* Taking and interning call stacks (see stacks.h).
 *
 * A stack's key is a run of 64-bit words: a header (Python frames << 32 | native frames), then
 * (code object, line) per Python frame and the return address per native frame. Equal keys get
 * one id, so a training loop's launches, which repeat a few hundred stacks, cost a walk, a hash
 * and a probe each; only a new stack is described (names read, modules found) and queued. */
#include "inject/stacks.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "inject/nstack.h"
#include "inject/pystack.h"
#include "common/options.h"
#include "common/util.h"
#include "convert/stackrec.h"
#include "format/event.h"

#define PY_MAX  128
#define NAT_MAX 64

struct ent {
	uint64_t hash;
	uint32_t id; /* 0: empty */
	uint32_t len;
	size_t off; /* key words in st.words */
};

static struct {
	pthread_mutex_t lock;
	int mode;
	struct ent *slots; /* 2 * STACKS_MAX */
	uint64_t *words;
	size_t nwords;
	uint32_t n;
	uint64_t missed;
	uint8_t *recs; /* queued STACK records */
	size_t len, cap;
	uint64_t *pairs; /* queued (corr, id) */
	size_t npairs, pcap;
	struct cuptrace_frame *frames; /* scratch for a new stack */
} st = {.lock = PTHREAD_MUTEX_INITIALIZER};

int cuptrace_stacks_init(int mode)
{
	pthread_mutex_lock(&st.lock);
	st.mode = mode;
	int ret = 0;
	if (mode && !st.slots) {
		st.slots = calloc(2 * STACKS_MAX, sizeof(*st.slots));
		st.words = malloc(STACKS_MAX_WORDS * sizeof(*st.words));
		st.frames = malloc((PY_MAX + NAT_MAX) * sizeof(*st.frames));
		if (!st.slots || !st.words || !st.frames) {
			free(st.slots);
			free(st.words);
			free(st.frames);
			st.slots = NULL;
			st.words = NULL;
			st.frames = NULL;
			st.mode = 0;
			ret = -ENOMEM;
		}
	}
	pthread_mutex_unlock(&st.lock);
	if (mode & CUPTRACE_STACKS_PYTHON)
		cuptrace_pystack_init();
	return ret;
}

/* Innermost native frames that are cuptrace's, CUPTI's or the driver's are left out; with
 * Python frames, so are the interpreter's and all outside it (the Python frames say more). */
static size_t native_keep(const uint64_t *pcs, size_t n, size_t *first, int with_py)
{
	size_t i = 0;
	while (i < n) {
		const struct cuptrace_module *m = cuptrace_nstack_module(pcs[i]);
		if (!m || !m->ours)
			break;
		i++;
	}
	*first = i;
	if (!with_py)
		return n - i;
	uint64_t anchor = cuptrace_pystack_anchor();
	const struct cuptrace_module *pm = anchor ? cuptrace_nstack_module(anchor) : NULL;
	uint64_t lo = pm ? pm->lo : 0, hi = pm ? pm->hi : 0;
	size_t j = i;
	while (j < n && !(pcs[j] >= lo && pcs[j] < hi))
		j++;
	return j - i;
}

/* Describes a new stack (outermost frame first) and queues its STACK record. Under the lock.
 * -1 if a name could not be read (the stack is not interned then). */
static int describe(uint64_t id, const struct cuptrace_pyframe *py, size_t npy, const uint64_t *pcs,
                    size_t nnat)
{
	size_t k = 0;
	for (size_t i = npy; i-- > 0;) {
		struct cuptrace_frame *f = &st.frames[k++];
		memset(f, 0, sizeof(*f));
		f->kind = CUPTRACE_FRAME_PYTHON;
		f->line = py[i].line;
		if (cuptrace_pystack_code(py[i].code, &f->file, &f->function))
			return -1;
	}
	for (size_t i = nnat; i-- > 0;) {
		struct cuptrace_frame *f = &st.frames[k++];
		memset(f, 0, sizeof(*f));
		f->kind = CUPTRACE_FRAME_NATIVE;
		/* A return address points after its call: one byte back lies in the call, so the
		 * symbolizer finds the calling line (and the right function after a noreturn
		 * call at a function's end). */
		uint64_t pc = pcs[i] - 1;
		const struct cuptrace_module *m = cuptrace_nstack_module(pc);
		f->module = m ? m->path : NULL;
		f->build_id = m ? m->build_id : NULL;
		f->rel_pc = m ? pc - m->bias : pc;
	}
	struct cuptrace_stack s = {.id = id, .frames = st.frames, .nframes = k};
	size_t size = cuptrace_stackrec_size(&s);
	if (!size || CUPTRACE_GROW(st.recs, st.cap, st.len + size))
		return -1;
	cuptrace_stackrec_encode(&s, st.recs + st.len);
	st.len += size;
	return 0;
}

uint64_t cuptrace_stacks_take(void)
{
	int mode = st.mode;
	if (!mode)
		return 0;
	struct cuptrace_pyframe py[PY_MAX];
	uint64_t pcs[NAT_MAX + 16];
	size_t npy = 0, nall = 0;
	int took_gil = 0;
	if (mode & CUPTRACE_STACKS_PYTHON)
		npy = cuptrace_pystack_init()
		          ? cuptrace_pystack_walk(py, PY_MAX, !(mode & CUPTRACE_STACKS_HELD_ONLY),
		                                  &took_gil)
		          : 0;
	if (mode & CUPTRACE_STACKS_NATIVE)
		nall = cuptrace_nstack_walk(pcs, NAT_MAX + 16);
	if (!npy && !nall) {
		cuptrace_pystack_release(took_gil);
		return 0;
	}
	pthread_mutex_lock(&st.lock);
	cuptrace_nstack_lock(); /* the modules, shared with the sampler (after st.lock) */
	size_t first = 0, nnat = nall ? native_keep(pcs, nall, &first, npy > 0) : 0;
	if (nnat > NAT_MAX)
		nnat = NAT_MAX;
	const uint64_t *nat = pcs + first;
	uint64_t id = 0;
	size_t len = 1 + 2 * npy + nnat;
	if (!st.slots || (!npy && !nnat))
		goto out;
	/* The key, written where it would be stored (kept only if new). */
	if (st.nwords + len > STACKS_MAX_WORDS) {
		st.missed++;
		goto out;
	}
	uint64_t *key = st.words + st.nwords;
	key[0] = (uint64_t)npy << 32 | nnat;
	for (size_t i = 0; i < npy; i++) {
		key[1 + 2 * i] = py[i].code;
		key[2 + 2 * i] = py[i].line;
	}
	memcpy(key + 1 + 2 * npy, nat, nnat * sizeof(*nat));
	uint64_t h = cuptrace_hash_bytes(key, len * sizeof(*key));
	size_t mask = 2 * STACKS_MAX - 1, i = (size_t)h & mask;
	for (; st.slots[i].id; i = (i + 1) & mask) {
		const struct ent *e = &st.slots[i];
		if (e->hash == h && e->len == len &&
		    !memcmp(st.words + e->off, key, len * sizeof(*key))) {
			id = e->id;
			goto out;
		}
	}
	if (st.n >= STACKS_MAX || describe(st.n + 1, py, npy, nat, nnat)) {
		st.missed++;
		goto out;
	}
	id = ++st.n;
	st.slots[i] =
	    (struct ent){.hash = h, .id = (uint32_t)id, .len = (uint32_t)len, .off = st.nwords};
	st.nwords += len;
out:
	cuptrace_nstack_unlock();
	pthread_mutex_unlock(&st.lock);
	cuptrace_pystack_release(took_gil); /* after describe(), which reads code objects */
	return id;
}

void cuptrace_stacks_note(uint32_t corr, uint64_t stack)
{
	pthread_mutex_lock(&st.lock);
	if (CUPTRACE_GROW(st.pairs, st.pcap, 2 * st.npairs + 2) == 0) {
		st.pairs[2 * st.npairs] = corr;
		st.pairs[2 * st.npairs + 1] = stack;
		st.npairs++;
	} else {
		st.missed++;
	}
	pthread_mutex_unlock(&st.lock);
}

int cuptrace_stacks_drain(uint8_t **recs, size_t *len, uint64_t **pairs, size_t *npairs)
{
	pthread_mutex_lock(&st.lock);
	*recs = st.recs;
	*len = st.len;
	*pairs = st.pairs;
	*npairs = st.npairs;
	st.recs = NULL;
	st.len = st.cap = 0;
	st.pairs = NULL;
	st.npairs = st.pcap = 0;
	pthread_mutex_unlock(&st.lock);
	return 0;
}

uint64_t cuptrace_stacks_count(void)
{
	return st.n;
}

uint64_t cuptrace_stacks_missed(void)
{
	return st.missed;
}

void cuptrace_stacks_reset(void)
{
	pthread_mutex_lock(&st.lock);
	if (st.slots)
		memset(st.slots, 0, 2 * STACKS_MAX * sizeof(*st.slots));
	st.nwords = 0;
	st.n = 0;
	st.missed = 0;
	free(st.recs);
	free(st.pairs);
	st.recs = NULL;
	st.pairs = NULL;
	st.len = st.cap = st.npairs = st.pcap = 0;
	pthread_mutex_unlock(&st.lock);
}
