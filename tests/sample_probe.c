/* A test library for the host-stack sampler without a GPU (tests/sample_reader.py): Python loads
 * it with ctypes and reads its own threads' stacks through the GIL-free reader
 * (inject/pyread.c), or runs the sampler thread (inject/sampler.c) over them and reads back what
 * it queued, decoded from the STACK and SAMPLES records as the converter decodes them. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "inject/pyread.h"
#include "inject/sampler.h"
#include "convert/stackrec.h"

int probe_validate(void)
{
	return cuptrace_pyread_validate();
}

/* Thread tid's frames, innermost first, one a line: function|file|line. The count, or a
 * negative errno. */
int probe_stack(int tid, char *out, size_t n)
{
	struct cuptrace_pyread_frame fr[128];
	int got = cuptrace_pyread_stack(tid, fr, 128);
	size_t k = 0;
	out[0] = 0;
	for (int i = 0; i < got && k < n; i++) {
		const char *file, *func;
		cuptrace_pyread_code(&fr[i], &file, &func);
		int w = snprintf(out + k, n - k, "%s|%s|%u\n", func, file, fr[i].line);
		k += w > 0 ? (size_t)w : 0;
	}
	return got;
}

int probe_start(unsigned hz, int all)
{
	cuptrace_sampler_reset();
	return cuptrace_sampler_start(hz, all);
}

void probe_note(void)
{
	cuptrace_sampler_note_thread();
}

/* Stops the sampler and writes each sample, one a line: time (ns)|tid|innermost frame's
 * function|its line|the stack's functions outermost first, joined by ';'. Then a last line:
 * #|samples|dropped|no_python|stacks. The count of samples, or -1. */
int probe_stop(char *out, size_t n)
{
	cuptrace_sampler_stop();
	uint8_t *b;
	size_t len;
	if (cuptrace_sampler_drain(&b, &len))
		return -1;
	/* Stacks by id - base. */
	size_t nst = 0;
	struct cuptrace_stack *st = NULL;
	struct cuptrace_frame **frs = NULL;
	int count = 0;
	size_t k = 0;
	out[0] = 0;
	for (size_t off = 0; off < len;) {
		size_t sz = cuptrace_stackrec_bytes(b + off);
		uint32_t kind;
		memcpy(&kind, b + off, 4);
		if (!sz)
			break;
		if (kind == CUPTRACE_REC_STACK) {
			struct cuptrace_stack *st2 = realloc(st, (nst + 1) * sizeof(*st));
			if (st2)
				st = st2;
			struct cuptrace_frame **frs2 = realloc(frs, (nst + 1) * sizeof(*frs));
			if (frs2)
				frs = frs2;
			if (!st2 || !frs2)
				return -1;
			frs[nst] = NULL;
			size_t cap = 0;
			if (cuptrace_stackrec_decode(b + off, sz, &st[nst], &frs[nst], &cap))
				return -1;
			nst++;
		} else if (kind == CUPTRACE_REC_SAMPLES) {
			const struct cuptrace_stackrec_sample *sm;
			size_t ns;
			if (cuptrace_stackrec_samples(b + off, sz, &sm, &ns))
				return -1;
			for (size_t i = 0; i < ns; i++) {
				size_t j = 0;
				while (j < nst && st[j].id != sm[i].stack)
					j++;
				if (j == nst || !st[j].nframes)
					return -1;
				const struct cuptrace_frame *in = &st[j].frames[st[j].nframes - 1];
				int w = snprintf(out + k, n - k, "%llu|%u|%s|%u|",
				                 (unsigned long long)sm[i].ts, sm[i].tid,
				                 in->function, in->line);
				k += w > 0 && (size_t)w < n - k ? (size_t)w : 0;
				for (size_t f = 0; f < st[j].nframes; f++) {
					w = snprintf(out + k, n - k, "%s%s", f ? ";" : "",
					             st[j].frames[f].function);
					k += w > 0 && (size_t)w < n - k ? (size_t)w : 0;
				}
				w = snprintf(out + k, n - k, "\n");
				k += w > 0 && (size_t)w < n - k ? (size_t)w : 0;
				count++;
			}
		}
		off += sz;
	}
	struct cuptrace_sampler_stats ss;
	cuptrace_sampler_stats(&ss);
	snprintf(out + k, n - k, "#|%llu|%llu|%llu|%llu\n", (unsigned long long)ss.samples,
	         (unsigned long long)ss.dropped, (unsigned long long)ss.no_python,
	         (unsigned long long)ss.stacks);
	for (size_t i = 0; i < nst; i++)
		free(frs[i]);
	free(frs);
	free(st);
	free(b);
	return count;
}
