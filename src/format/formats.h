/* Constructors for the writer sinks of event.h (Perfetto, Chrome JSON). The readers that replay
 * a file into any sink are in read/read.h; the stats sink, which analyzes, in stats/stats.h. */
#ifndef CUPTRACE_FORMAT_FORMATS_H
#define CUPTRACE_FORMAT_FORMATS_H

#include "format/event.h"
#include "output/output.h"

#include <stdio.h>

/* Perfetto protobuf sink. Takes ownership of out (closed by finish or destroy, or at once if
 * the sink cannot be created: NULL and errno then). */
struct cuptrace_sink *cuptrace_perfetto_sink_new(struct cuptrace_output *out);

/* Chrome Trace Event Format (JSON array form) sink. Takes ownership of out, like the above. */
struct cuptrace_sink *cuptrace_chrome_sink_new(struct cuptrace_output *out);

/* The output formats, as a mask of what a command writes. */
#define CUPTRACE_OUT_PERFETTO 1u /* .pftrace, .perfetto-trace (and .gz) */
#define CUPTRACE_OUT_CHROME   2u /* .json, .json.gz (-f chrome or json) */
#define CUPTRACE_OUT_CAPTURE  4u /* .cupti: record's raw capture */
#define CUPTRACE_OUT_TAR      8u /* .tar: merge's members */
/* The format that path (its extension; "-" is standard output) and format (-f: NULL or empty if
 * not given) ask for, among allowed. Returns one CUPTRACE_OUT_*, or 0 with a one-line reason in
 * err: an unknown or unwritable format, an extension that is not one of allowed's, a name
 * that contradicts -f. */
unsigned cuptrace_out_kind(const char *path, const char *format, unsigned allowed, char *err,
                           size_t n);
/* "perfetto (.pftrace .pftrace.gz ...), chrome (.json .json.gz)" for a mask: help and errors. */
void cuptrace_out_kinds_text(unsigned allowed, char *buf, size_t n);

/* Picks the format and compression from the path and the options:
 *   format: "perfetto", "chrome" or NULL (from the name: .json / .json.gz -> chrome, else perfetto)
 *   compress: "none", "gzip", "chunks" or NULL (from the name: *.gz -> gzip; .pftrace -> chunks;
 *             .json -> none)
 * Returns NULL and sets errno (EINVAL for a bad option) on failure. */
struct cuptrace_sink *cuptrace_sink_open(const char *path, const char *format,
                                         const char *compress);
/* The same, compressing at level (1 fastest to 12 smallest; 0: the default, 5). Levels above 9
 * are libdeflate's: zlib (gzip outputs, or chunks where libdeflate is missing) stops at 9. */
struct cuptrace_sink *cuptrace_sink_open_level(const char *path, const char *format,
                                               const char *compress, int level);
/* The same, deciding from name but writing to write_path (an outfile's temporary file, see
 * output/outfile.h, or "-" for standard output). */
struct cuptrace_sink *cuptrace_sink_open_as(const char *name, const char *write_path,
                                            const char *format, const char *compress, int level);
/* The same for the recorder, whose sink is finished on the traced program's exit path: the
 * last chunk is compressed by all the compressor threads at once (output.h split_last). Writes
 * to write_path (its partial file, output/recfile.h). */
struct cuptrace_sink *cuptrace_sink_open_recorder(const char *path, const char *write_path,
                                                  const char *format, const char *compress,
                                                  int level);

#endif
