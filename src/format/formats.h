/* Constructors for the writer sinks of event.h (Perfetto, Chrome JSON). The readers that replay
 * a file into any sink are in read/read.h; the stats sink, which analyzes, in analyze/stats.h. */
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
/* The same for the recorder, whose sink is finished on the traced program's exit path: the
 * last chunk is compressed by all the compressor threads at once (output.h split_last). */
struct cuptrace_sink *cuptrace_sink_open_recorder(const char *path, const char *format,
                                                  const char *compress, int level);

#endif
