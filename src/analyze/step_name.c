/* Step names with torch.profiler's "#N" suffix (see step_name.h). */
#include "analyze/step_name.h"

#include <string.h>

int cuptrace_step_name_matches(const char *name, const char *want)
{
	size_t n;
	if (!name || !want)
		return 0;
	n = strlen(want);
	if (strncmp(name, want, n))
		return 0;
	if (!name[n])
		return 1;
	return name[n] == '#' && name[n + 1] &&
	       strspn(name + n + 1, "0123456789") == strlen(name + n + 1);
}
