/* NCCL kernel names (nccl.h). The name is split at '_' into words; each word is then told by
 * what it is (an algorithm, a protocol, a reduction, a type) rather than by its position, which
 * differs between NCCL's two naming schemes. */
#include "common/nccl.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

static int in(const char *w, const char *const *set)
{
	for (; *set; set++)
		if (!strcmp(w, *set))
			return 1;
	return 0;
}

static const char *const algorithms[] = {"RING",           "TREE",          "NVLS", "NVLS_TREE",
                                         "COLLNET_DIRECT", "COLLNET_CHAIN", "PAT",  "COLLNET",
                                         "DIRECT",         "CHAIN",         NULL};
static const char *const protocols[] = {"LL", "LL128", "SIMPLE", NULL};
static const char *const reductions[] = {"Sum",       "Prod",       "Max",    "Min",
                                         "PreMulSum", "SumPostDiv", "MinMax", NULL};
static void put(char *dst, size_t cap, const char *src)
{
	size_t n = strlen(src);
	if (n >= cap)
		n = cap - 1;
	memcpy(dst, src, n);
	dst[n] = 0;
}

int cuptrace_nccl_parse(const char *name, struct cuptrace_nccl_kernel *k)
{
	memset(k, 0, sizeof(*k));
	if (!name)
		return 0;
	const char *p;
	if (!strncmp(name, "ncclDevKernel_", 14))
		p = name + 14;
	else if (!strncmp(name, "ncclKernel_", 11))
		p = name + 11;
	else
		return 0;
	/* The words up to the argument list (demangled names) or the end. */
	size_t len = strcspn(p, "(<");
	char buf[160];
	if (!len || len >= sizeof(buf))
		return 0;
	memcpy(buf, p, len);
	buf[len] = 0;
	char *save = NULL, *w = strtok_r(buf, "_", &save);
	if (!w)
		return 0;
	put(k->collective, sizeof(k->collective), w);
	/* After a reduction, the element type: every word up to the next algorithm or protocol
	 * ("f32"; "uint8_t" and "__nv_bfloat16" hold underscores of their own). */
	int in_type = 0;
	char prev[24] = "";
	while ((w = strtok_r(NULL, "_", &save))) {
		char two[48];
		snprintf(two, sizeof(two), "%s_%s", prev, w);
		if (*prev && in(two, algorithms) && !strcmp(k->algorithm, prev)) {
			/* two-word algorithms: NVLS_TREE, COLLNET_DIRECT, COLLNET_CHAIN */
			put(k->algorithm, sizeof(k->algorithm), two);
			in_type = 0;
		} else if (in(w, algorithms)) {
			put(k->algorithm, sizeof(k->algorithm), w);
			in_type = 0;
		} else if (in(w, protocols)) {
			put(k->protocol, sizeof(k->protocol), w);
			in_type = 0;
		} else if (!*k->reduction && in(w, reductions)) {
			put(k->reduction, sizeof(k->reduction), w);
			in_type = 1;
		} else if (in_type) {
			size_t n = strlen(k->dtype);
			snprintf(k->dtype + n, sizeof(k->dtype) - n, "%s%s", n ? "_" : "", w);
		}
		/* anything else (the generic kernel's variant number) is not kept */
		put(prev, sizeof(prev), w);
	}
	return 1;
}

int cuptrace_nccl_symmetric(const struct cuptrace_nccl_kernel *k)
{
	/* NCCL spells all-to-all "AllToAll" in some versions, "AlltoAll" in others */
	static const char *const sym[] = {"AllReduce", "AllGather", "ReduceScatter", "AllToAll",
	                                  NULL};
	for (const char *const *p = sym; *p; p++)
		if (!strcasecmp(k->collective, *p))
			return 1;
	return 0;
}
