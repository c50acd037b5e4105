/* The frame of the JSON reports of stats, diff and lines (see report.h). */
#include "stats/report.h"
#include "common/util.h"
#include "format/json_writer.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

struct cuptrace_json *report_json_begin(const char *schema)
{
	struct cuptrace_json *w = cuptrace_json_new(NULL);
	if (w) {
		cuptrace_json_start_object(w);
		cuptrace_json_string_field(w, "schema", schema);
	}
	return w;
}

int report_json_end(struct cuptrace_json *w, FILE *f, int err)
{
	size_t len;

	cuptrace_json_end_object(w);
	if (!err)
		err = cuptrace_json_error(w);
	const char *buf = err ? NULL : cuptrace_json_buffer(w, &len);
	if (buf && fwrite(buf, 1, len, f) != len)
		err = -EIO;
	cuptrace_json_free(w);
	return err;
}
