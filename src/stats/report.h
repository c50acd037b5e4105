/* Reports (`cuptrace stats`, `cuptrace diff`): the frame of the JSON reports; the text parts
 * (tables, units, names) are common/text.h's, included here. Private to the analyses. */
#ifndef CUPTRACE_STATS_REPORT_H
#define CUPTRACE_STATS_REPORT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/text.h" /* tables, units, names, prose: shared with every command */

/* JSON reports: one object on one line, built in memory (format/json_writer.h escapes every
 * string). report_json_begin opens the object and writes its "schema" key; NULL on no memory.
 * report_json_end closes it and, unless err (an error the caller met while filling it) or the
 * writer failed, writes it to f; it frees w and returns 0 or a negative errno (-EIO: f). */
struct cuptrace_json *report_json_begin(const char *schema);
int report_json_end(struct cuptrace_json *w, FILE *f, int err);

#endif
