/* A hash table from flow id to a nonzero value, for the Perfetto reader's active flows: one
 * 16-byte slot per entry (id and value side by side: one cache miss per lookup, where
 * common/util.h's u64map takes three) and deletion by backward shift (no tombstones). A trace
 * of 1 M kernels keeps 1 M flows active. Private to src/read; one thread. */
#ifndef CUPTRACE_READ_FLOW_TABLE_H
#define CUPTRACE_READ_FLOW_TABLE_H

#include "common/util.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

struct flow_slot {
	uint64_t id, v; /* v == 0: empty */
};

struct flow_table {
	struct flow_slot *s;
	size_t cap, n; /* cap: 0 or a power of two */
};

static inline void flow_table_free(struct flow_table *t)
{
	free(t->s);
	t->s = NULL;
	t->cap = t->n = 0;
}

/* Home slot: ids in one aligned group of 8 go to consecutive slots from a hashed base. Flow ids
 * are mostly consecutive (cuptrace uses correlation ids), and a trace touches them in about
 * that order, so neighbouring lookups share cache lines; groups still spread over the table. */
static inline size_t flow_table_home(uint64_t id, size_t m)
{
	return (size_t)(cuptrace_hash64(id >> 3) + (id & 7)) & m;
}

static inline size_t flow_table_find(const struct flow_table *t, uint64_t id)
{
	size_t m = t->cap - 1, i = flow_table_home(id, m);
	while (t->s[i].v && t->s[i].id != id)
		i = (i + 1) & m;
	return i;
}

/* Kept at most half full. 0 or -ENOMEM. */
static inline int flow_table_grow(struct flow_table *t)
{
	size_t cap = t->cap ? t->cap * 2 : 1024;
	struct flow_table n = {calloc(cap, sizeof(struct flow_slot)), cap, t->n};
	if (!n.s)
		return -ENOMEM;
	for (size_t i = 0; i < t->cap; i++)
		if (t->s[i].v)
			n.s[flow_table_find(&n, t->s[i].id)] = t->s[i];
	free(t->s);
	*t = n;
	return 0;
}

/* The value of id; a new entry's is 0 and *created is 1: the caller sets it nonzero, or calls
 * flow_table_forget at once. NULL on allocation failure. */
static inline uint64_t *flow_table_put(struct flow_table *t, uint64_t id, int *created)
{
	if ((t->n + 1) * 2 > t->cap && flow_table_grow(t))
		return NULL;
	size_t i = flow_table_find(t, id);
	*created = !t->s[i].v;
	if (*created) {
		t->s[i].id = id;
		t->n++;
	}
	return &t->s[i].v;
}

/* Removes the entry whose value v points to: the entries after it in its probe run move back
 * where their home slot allows. */
static inline void flow_table_del(struct flow_table *t, uint64_t *v)
{
	size_t m = t->cap - 1, i = (size_t)((struct flow_slot *)(void *)v - t->s), j = i;
	for (;;) {
		j = (j + 1) & m;
		if (!t->s[j].v)
			break;
		size_t h = flow_table_home(t->s[j].id, m);
		/* the entry at j may move to i unless its home h lies cyclically in (i, j] */
		int stays = i <= j ? (i < h && h <= j) : (i < h || h <= j);
		if (!stays) {
			t->s[i] = t->s[j];
			i = j;
		}
	}
	t->s[i].v = 0;
	t->n--;
}

#endif
