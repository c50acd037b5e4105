/* Chooses a sink and its output from a path and the user's options (see formats.h). */
#include <errno.h>
#include <string.h>

#include "common/log.h"
#include "common/util.h"
#include "format/formats.h"

static struct cuptrace_sink *sink_open(const char *path, const char *format, const char *compress,
                                       int level, int split_last)
{
	int chrome;
	if (!format || !*format)
		chrome = cuptrace_ends_with(path, ".json") || cuptrace_ends_with(path, ".json.gz");
	else if (!strcmp(format, "chrome") || !strcmp(format, "json"))
		chrome = 1;
	else if (!strcmp(format, "perfetto"))
		chrome = 0;
	else {
		cuptrace_err("unknown format '%s' (expected perfetto or chrome)", format);
		errno = EINVAL;
		return NULL;
	}
	int mode;
	if (compress && *compress) {
		mode = cuptrace_compress_parse(compress);
		if (mode < 0 || (chrome && mode == CUPTRACE_COMPRESS_CHUNKS)) {
			cuptrace_err("unknown compression '%s' for %s output (expected %s)",
			             compress, chrome ? "chrome" : "perfetto",
			             chrome ? "none or gzip" : "chunks, gzip or none");
			errno = EINVAL;
			return NULL;
		}
	} else if (cuptrace_ends_with(path, ".gz")) {
		mode = CUPTRACE_COMPRESS_GZIP;
	} else {
		/* Perfetto: zlib chunks by default (a cut file still loads); JSON: plain, because
		 * an array without its closing bracket loads but a cut gzip stream does not. */
		mode = chrome ? CUPTRACE_COMPRESS_NONE : CUPTRACE_COMPRESS_CHUNKS;
	}
	struct cuptrace_output_opts oo = {
	    .sz = sizeof(oo), .level = level, .split_last = split_last};
	struct cuptrace_output *out = cuptrace_output_open(path, (enum cuptrace_compress)mode, &oo);
	if (!out)
		return NULL;
	/* The sink owns out from here on, also when it fails to start (it closes it). */
	return chrome ? cuptrace_chrome_sink_new(out) : cuptrace_perfetto_sink_new(out);
}

struct cuptrace_sink *cuptrace_sink_open_level(const char *path, const char *format,
                                               const char *compress, int level)
{
	return sink_open(path, format, compress, level, 0);
}

struct cuptrace_sink *cuptrace_sink_open_recorder(const char *path, const char *format,
                                                  const char *compress, int level)
{
	return sink_open(path, format, compress, level, 1);
}

struct cuptrace_sink *cuptrace_sink_open(const char *path, const char *format, const char *compress)
{
	return sink_open(path, format, compress, 0, 0);
}
