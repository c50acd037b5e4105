/* Iterations found in a sequence of GPU work, for programs without step marks (analyze's last
 * step source, steps_find.c): the launches of one thread in launch order, each named by a token
 * (its work's name), repeat with a period. The finder is pure: arrays in, iterations out; it
 * knows nothing of traces (tests/test_steps_period.c feeds it sequences of known answer).
 *
 * How (README "Why is it slow", Steps): tokens that come back at a regular distance vote for
 * that distance as the period, weighted by their GPU time; each candidate period is tried by
 * cutting the sequence at one token that occurs once per iteration and asking, token by token,
 * whether an iteration holds the token as often as most iterations do (its mode): the GPU time
 * so explained is the candidate's score. Extra or missing work in an iteration only costs that
 * work. The best-scoring period wins, the shortest among those within 2% of the best (a token
 * every 100 iterations, logging say, does not make 100 iterations one), among the cuts whose
 * iterations are alike (half their items or more repeat) where one is: a cut at a token that
 * comes twice per step gives halves of unlike work, which can explain more GPU time (a long
 * warm-up item missing from the whole steps' first). Iterations before the first regular one
 * (start-up) and after the last are left out. The iterations are then cut where the host paused
 * longest before launching (the top of the loop), not mid-iteration.
 *
 * Cost: O(n log n) for the distances, then O(n) per candidate (at most 8).
 * Ownership: out->starts belongs to the caller (cuptrace_period_free). */
#ifndef CUPTRACE_WHY_STEPS_PERIOD_H
#define CUPTRACE_WHY_STEPS_PERIOD_H

#include <stddef.h>
#include <stdint.h>

struct cuptrace_period_in {
	const uint32_t *tok; /* n tokens, each < ntok */
	const int64_t *w;    /* each item's weight (GPU ns; > 0) */
	const int64_t *gap;  /* host time before each item (no launch in it); NULL: all 0 */
	/* Per token: 1 if it is compute (a kernel, a graph); NULL: all are. An iteration holds
	 * some compute: a loop of copies alone (parameters loaded one by one) is no step. */
	const uint8_t *compute;
	size_t n;
	uint32_t ntok;
};

struct cuptrace_period {
	/* Iteration k is items [starts[k], starts[k + 1]); the last [starts[nstarts - 1], end).
	 * nstarts 0: no period found. */
	size_t *starts;
	size_t nstarts, end;
	size_t period;     /* the median length of an iteration, in items */
	double coverage;   /* the share of the whole sequence's GPU time that the iterations hold
	                    * and repeat */
	double confidence; /* 0..1: the share of the iterations' GPU time that repeats, less for
	                    * fewer than 4 iterations and for iterations holding under a quarter
	                    * of the GPU time (a loop of start-up, not the program's); set even
	                    * when none is found (the best try) */
};

/* Below this confidence, or with fewer than 3 iterations, no period is reported. */
#define CUPTRACE_PERIOD_MIN_CONFIDENCE 0.5

/* 0 (out->nstarts 0: none found) or -ENOMEM. out is zeroed first. */
int cuptrace_period_find(const struct cuptrace_period_in *in, struct cuptrace_period *out);
void cuptrace_period_free(struct cuptrace_period *p);

#endif
