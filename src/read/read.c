/* cuptrace_read_trace: tells a trace file's format from its bytes and replays it into a sink
 * through the reader of that format; a raw capture goes through the converter. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "convert/capture.h"
#include "convert/capture_conv.h"
#include "convert/convert.h"
#include "read/read.h"
#include "read/read_file.h"

int cuptrace_is_capture_file(const char *path)
{
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return -1;
	char magic[8] = {0};
	ssize_t n = read(fd, magic, sizeof(magic));
	close(fd);
	return n == 8 && !memcmp(magic, "CUPTCAP", 8);
}

/* A damaged file read up to its damage: one warning naming it, and the same words in the
 * output's metadata (CUPTRACE_META_READ_DAMAGE), so that stats, the JSON outputs and a
 * converted trace carry them. Returns 0, or the sink's error. */
static int damage(const char *name, struct cuptrace_sink *sink, const char *what)
{
	char v[768];
	snprintf(v, sizeof(v), "%s: %s", name, what);
	cuptrace_warn("%s", v);
	if (!sink)
		return 0;
	struct cuptrace_meta m = {.key = CUPTRACE_META_READ_DAMAGE, .s = v};
	return sink->ops->meta(sink, &m, 1);
}

static int read_capture(const char *path, const char *name, struct cuptrace_sink *sink, int flags)
{
	/* META items build the trace info, then records go to the converter (capture_conv.h). */
	struct cuptrace_capture_conv c = {
	    .sink = sink,
	    .opts = {.driver_all = !!(flags & CUPTRACE_READ_DRIVER_ALL),
	             .runtime_all = !!(flags & CUPTRACE_READ_RUNTIME_ALL),
	             .overhead_per_thread = !!(flags & CUPTRACE_READ_OVERHEAD_THREADS)}};
	c.reader = cuptrace_capture_reader_open(path);
	if (!c.reader)
		return -(errno ? errno : EINVAL);
	struct cuptrace_capture_ops ops;
	cuptrace_capture_conv_ops(&c, &ops);
	uint64_t cut_at = 0;
	const char *bad = NULL;
	int r = cuptrace_capture_replay(c.reader, &ops, &cut_at, &bad);
	if (!r)
		r = cuptrace_capture_conv_start(&c);
	if (cut_at && cut_at <= 16 && !r) {
		/* Not one item whole past the header: nothing to convert. */
		cuptrace_err("%s: nothing could be read: %s capture at byte %llu of %llu%s%s", name,
		             bad ? "corrupt" : "cut", (unsigned long long)cut_at,
		             (unsigned long long)cuptrace_capture_size(c.reader), bad ? ": " : "",
		             bad ? bad : "");
		r = -EINVAL;
	} else if (cut_at && !r) {
		char why[512];
		unsigned long long size = cuptrace_capture_size(c.reader);
		if (bad)
			snprintf(why, sizeof(why),
			         "corrupt capture at byte %llu of %llu (%s): converted the records "
			         "before it, not the %llu bytes from there",
			         (unsigned long long)cut_at, size, bad, size - cut_at);
		else
			snprintf(
			    why, sizeof(why),
			    "the capture ends early at byte %llu of %llu (the traced process "
			    "was killed, or the file was cut): converted the records before it",
			    (unsigned long long)cut_at, size);
		r = damage(name, sink, why);
	}
	if (c.conv) {
		int f = cuptrace_converter_finish(c.conv);
		r = r ? r : f;
	}
	cuptrace_capture_conv_free(&c);
	cuptrace_capture_reader_close(c.reader);
	return r;
}

/* Whitespace, then '{' or '[' and whitespace, then what may follow in a JSON document: a
 * Perfetto trace starts with 0x0a (a newline) too, but a packet never with '{' or '[' (field
 * 15 and 11 of wire type 3, which protobuf no longer has). */
static int looks_like_json(const uint8_t *p, size_t n)
{
	size_t i = 0;
	if (n >= 3 && !memcmp(p, "\xEF\xBB\xBF", 3))
		i = 3;
	while (i < n && (p[i] == ' ' || p[i] == '\n' || p[i] == '\r' || p[i] == '\t'))
		i++;
	if (i == n || (p[i] != '{' && p[i] != '['))
		return 0;
	for (i++; i < n && (p[i] == ' ' || p[i] == '\n' || p[i] == '\r' || p[i] == '\t'); i++)
		;
	return i == n || strchr("\"{[]}-0123456789tfn", p[i]);
}

enum cuptrace_trace_format cuptrace_sniff(const void *data, size_t len)
{
	const uint8_t *b = data;

	if (!len)
		return CUPTRACE_FORMAT_PERFETTO; /* an empty trace */
	if (len >= 8 && !memcmp(b, "CUPTCAP", 8))
		return CUPTRACE_FORMAT_CAPTURE;
	if (len >= 2 && b[0] == 0x1f && b[1] == 0x8b) {
		/* Look at what it inflates to: a few KiB say enough. */
		uint8_t *head;
		size_t n;
		enum cuptrace_gz_end end;
		if (cuptrace_gunzip(b, len, 4096, &head, &n, &end))
			return CUPTRACE_FORMAT_UNKNOWN;
		int json = looks_like_json(head, n);
		free(head);
		return json ? CUPTRACE_FORMAT_JSON : CUPTRACE_FORMAT_PERFETTO;
	}
	if (looks_like_json(b, len))
		return CUPTRACE_FORMAT_JSON;
	if (b[0] == 0x0A || (len >= 4 && !memcmp(b, "\x28\xb5\x2f\xfd", 4)))
		return CUPTRACE_FORMAT_PERFETTO; /* zstd: the Perfetto reader says it cannot */
	return CUPTRACE_FORMAT_UNKNOWN;
}

/* A trace in memory (not a capture), named name in messages. */
static int read_mem(const char *name, const uint8_t *buf, size_t len, struct cuptrace_sink *sink)
{
	char why[512];
	int err;
	if (!len) {
		/* No format to take it for: refused, whatever its name says (a crashed writer, a
		 * failed copy). */
		cuptrace_err("%s: the file is empty: not a Perfetto, JSON (Chrome, torch.profiler) "
		             "or capture trace",
		             name);
		return -EINVAL;
	}
	switch (cuptrace_sniff(buf, len)) {
	case CUPTRACE_FORMAT_JSON: {
		struct cuptrace_json_check jc = {0};
		err = cuptrace_json_read_mem(buf, len, name, sink, &jc);
		if (!err && jc.truncated) {
			snprintf(
			    why, sizeof(why),
			    "%scut at byte %llu of %llu%s: the JSON events end inside an event; "
			    "its %llu whole events before it were read",
			    jc.gz_damaged == 1   ? "the gzip stream ends early: "
			    : jc.gz_damaged == 2 ? "the gzip stream is corrupt: "
			                         : "",
			    (unsigned long long)jc.truncated_at, (unsigned long long)jc.bytes,
			    jc.gz_damaged ? " of the inflated JSON" : "",
			    (unsigned long long)jc.events);
			err = damage(name, sink, why);
		} else if (!err && jc.gz_damaged) {
			snprintf(
			    why, sizeof(why),
			    "the gzip stream %s after %llu bytes of JSON, which were whole: all "
			    "%llu events read",
			    jc.gz_damaged == 1 ? "ends early" : "is corrupt",
			    (unsigned long long)jc.bytes, (unsigned long long)jc.events);
			err = damage(name, sink, why);
		}
		break;
	}
	case CUPTRACE_FORMAT_PERFETTO: {
		struct cuptrace_pf_check chk = {0};
		err = cuptrace_perfetto_read_mem(buf, len, sink, &chk);
		if (err == -EINVAL) {
			cuptrace_err(
			    "%s: cannot read this file as a Perfetto trace (the format its "
			    "first bytes say; not JSON or a capture either)",
			    name);
		} else if (!err && cuptrace_pf_damage_text(&chk, why, sizeof(why))) {
			if (!chk.packets) {
				/* Nothing whole before the damage: not a trace anyone can use. */
				cuptrace_err(
				    "%s: nothing could be read: %s; tried it as a Perfetto "
				    "trace (its first bytes say so), not JSON or a capture",
				    name, why);
				err = -EINVAL;
			} else {
				err = damage(name, sink, why);
			}
		}
		break;
	}
	default:
		cuptrace_err(
		    "%s: not a trace cuptrace can read: it starts with bytes %02x %02x %02x "
		    "%02x; expected a Perfetto trace (.pftrace), a Chrome or torch.profiler "
		    "JSON trace (.json, .json.gz) or a capture (.cupti)",
		    name, buf[0], len > 1 ? buf[1] : 0, len > 2 ? buf[2] : 0, len > 3 ? buf[3] : 0);
		err = -EINVAL;
		break;
	}
	return err;
}

/* "-": standard input, read whole. A capture goes through a temporary file, which the capture
 * reader needs (it reads the string table at the end first). */
static int read_stdin(struct cuptrace_sink *sink, int flags)
{
	static const char name[] = "standard input";
	uint8_t *buf;
	size_t len;
	int err = cuptrace_read_file_all("-", &buf, &len);
	if (err)
		return err;
	if (cuptrace_sniff(buf, len) != CUPTRACE_FORMAT_CAPTURE) {
		err = read_mem(name, buf, len, sink);
		free(buf);
		return err;
	}
	const char *dir = getenv("TMPDIR");
	char tmp[4096];
	snprintf(tmp, sizeof(tmp), "%s/cuptrace-stdin-XXXXXX", dir && *dir ? dir : "/tmp");
	int fd = mkstemp(tmp);
	err = fd < 0 ? -errno : 0;
	for (size_t off = 0; !err && off < len;) {
		ssize_t k = write(fd, buf + off, len - off);
		if (k < 0 && errno != EINTR)
			err = -errno;
		else if (k > 0)
			off += (size_t)k;
	}
	free(buf);
	if (fd >= 0)
		close(fd);
	if (!err)
		err = read_capture(tmp, name, sink, flags);
	else
		cuptrace_err("standard input: cannot keep the capture in %s: %s", tmp,
		             strerror(-err));
	if (fd >= 0)
		unlink(tmp);
	return err;
}

int cuptrace_read_trace(const char *path, struct cuptrace_sink *sink, int flags)
{
	if (!strcmp(path, "-"))
		return read_stdin(sink, flags);
	int cap = cuptrace_is_capture_file(path);
	if (cap < 0) {
		int err = -errno;
		cuptrace_err("cannot read %s: %s", path, strerror(errno));
		return err;
	}
	if (cap)
		return read_capture(path, path, sink, flags);

	uint8_t *buf;
	size_t len;
	int err = cuptrace_read_file_all(path, &buf, &len);
	if (err)
		return err;
	err = read_mem(path, buf, len, sink);
	free(buf);
	return err;
}
