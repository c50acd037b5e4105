/* Chooses a sink and its output from a path and the user's options (see formats.h). */
#include <errno.h>
#include <string.h>

#include "common/log.h"
#include "common/util.h"
#include "format/formats.h"

/* What each output format is called and which names ask for it: the one table behind -f, the
 * extensions, the commands' help and their errors. */
static const struct {
	unsigned kind;
	const char *name, *alias;
	const char *ext[4];
} kinds[] = {
    {CUPTRACE_OUT_PERFETTO,
     "perfetto",
     NULL,
     {".pftrace", ".pftrace.gz", ".perfetto-trace", ".perfetto-trace.gz"}},
    {CUPTRACE_OUT_CHROME, "chrome", "json", {".json", ".json.gz"}},
    {CUPTRACE_OUT_CAPTURE, "capture", NULL, {".cupti"}},
    {CUPTRACE_OUT_TAR, "tar", NULL, {".tar"}},
};
#define NKINDS (sizeof(kinds) / sizeof(kinds[0]))

static unsigned kind_of_name(const char *path)
{
	for (size_t i = 0; i < NKINDS; i++)
		for (size_t e = 0; e < 4 && kinds[i].ext[e]; e++)
			if (cuptrace_ends_with(path, kinds[i].ext[e]) &&
			    strlen(path) > strlen(kinds[i].ext[e]))
				return kinds[i].kind;
	return 0;
}

void cuptrace_out_kinds_text(unsigned allowed, char *buf, size_t n)
{
	size_t k = 0;
	buf[0] = 0;
	for (size_t i = 0; i < NKINDS && k < n; i++) {
		if (!(kinds[i].kind & allowed))
			continue;
		k += (size_t)snprintf(buf + k, n - k, "%s%s (", k ? ", " : "", kinds[i].name);
		for (size_t e = 0; e < 4 && kinds[i].ext[e] && k < n; e++)
			k +=
			    (size_t)snprintf(buf + k, n - k, "%s%s", e ? " " : "", kinds[i].ext[e]);
		if (k < n)
			k += (size_t)snprintf(buf + k, n - k, ")");
	}
}

unsigned cuptrace_out_kind(const char *path, const char *format, unsigned allowed, char *err,
                           size_t n)
{
	char list[256];
	cuptrace_out_kinds_text(allowed, list, sizeof(list));
	unsigned named = strcmp(path, "-") ? kind_of_name(path) : 0;
	if (format && *format) {
		unsigned k = 0;
		for (size_t i = 0; i < NKINDS; i++)
			if (!strcmp(format, kinds[i].name) ||
			    (kinds[i].alias && !strcmp(format, kinds[i].alias)))
				k = kinds[i].kind;
		if (!(k & allowed)) {
			snprintf(err, n, "%s format '%s': this command writes %s",
			         k ? "cannot write the" : "unknown", format, list);
			return 0;
		}
		/* A name that says another format would mislead whoever opens the file. */
		if (named && named != k) {
			snprintf(err, n, "%s is named like another format than -f %s: rename it",
			         path, format);
			return 0;
		}
		return k;
	}
	if (!strcmp(path, "-")) {
		if (allowed & CUPTRACE_OUT_PERFETTO)
			return CUPTRACE_OUT_PERFETTO;
		snprintf(err, n, "'-' (standard output) needs -f: this command writes %s", list);
		return 0;
	}
	if (!(named & allowed)) {
		snprintf(err, n, "%s: %s; this command writes %s (or give -f)", path,
		         named ? "cannot write that format here" : "unknown extension", list);
		return 0;
	}
	return named;
}

static struct cuptrace_sink *sink_open(const char *path, const char *wpath, const char *format,
                                       const char *compress, int level, int split_last)
{
	char why[512];
	unsigned kind = cuptrace_out_kind(path, format, CUPTRACE_OUT_PERFETTO | CUPTRACE_OUT_CHROME,
	                                  why, sizeof(why));
	/* The recorder (split_last) keeps any name its program or the C API gave: Perfetto
	 * unless the name says Chrome. `cuptrace record` checks the names users type. */
	if (!kind && split_last && !(format && *format))
		kind = CUPTRACE_OUT_PERFETTO;
	if (!kind) {
		cuptrace_err("%s", why);
		errno = EINVAL;
		return NULL;
	}
	int chrome = kind == CUPTRACE_OUT_CHROME;
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
	struct cuptrace_output *out =
	    cuptrace_output_open(wpath, (enum cuptrace_compress)mode, &oo);
	if (!out)
		return NULL;
	/* The sink owns out from here on, also when it fails to start (it closes it). */
	return chrome ? cuptrace_chrome_sink_new(out) : cuptrace_perfetto_sink_new(out);
}

struct cuptrace_sink *cuptrace_sink_open_level(const char *path, const char *format,
                                               const char *compress, int level)
{
	return sink_open(path, path, format, compress, level, 0);
}

struct cuptrace_sink *cuptrace_sink_open_as(const char *name, const char *write_path,
                                            const char *format, const char *compress, int level)
{
	return sink_open(name, write_path, format, compress, level, 0);
}

struct cuptrace_sink *cuptrace_sink_open_recorder(const char *path, const char *write_path,
                                                  const char *format, const char *compress,
                                                  int level)
{
	return sink_open(path, write_path, format, compress, level, 1);
}

struct cuptrace_sink *cuptrace_sink_open(const char *path, const char *format, const char *compress)
{
	return sink_open(path, path, format, compress, 0, 0);
}
