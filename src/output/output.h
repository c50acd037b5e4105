/* Byte sinks for finished trace records: plain, whole-file gzip, or Perfetto compressed_packets
 * chunks (each chunk is one zlib stream inside an uncompressed outer TracePacket, so a file cut
 * anywhere loads up to its last complete chunk).
 *
 * A record is one unit the format layer hands over (a framed TracePacket, one JSON event); chunks
 * are cut only between records. Data reaches the file when a chunk fills, when flush_ms has
 * passed since the last write to the file (checked on every write and on tick), on flush and on
 * close. Threading: one thread at a time per output. */
#ifndef CUPTRACE_OUTPUT_OUTPUT_H
#define CUPTRACE_OUTPUT_OUTPUT_H

#include <stddef.h>
#include <stdint.h>

enum cuptrace_compress {
	CUPTRACE_COMPRESS_NONE = 0,
	CUPTRACE_COMPRESS_GZIP,   /* whole-file gzip: smallest, but a cut file does not load */
	CUPTRACE_COMPRESS_CHUNKS, /* Perfetto compressed_packets chunks (records must be framed
	                           * TracePackets: 0x0A varint(len) bytes) */
};

struct cuptrace_output_opts {
	size_t sz; /* sizeof(struct cuptrace_output_opts) */
	size_t
	    chunk_bytes; /* CHUNKS: uncompressed bytes per chunk (default 128 KiB, max 480 KiB) */
	int flush_ms;    /* at most this long between writes to the file (default 1000; <0 off) */
	int level;       /* 1 to 12 (default 5); zlib's stop at 9, above is libdeflate's */
	int workers;     /* CHUNKS: compressor threads (default 2, max 4; -1: none, inline) */
	/* CHUNKS with compressor threads: the last chunk of a trace that has others is cut
	 * between records into a piece per thread, compressed at once (the recorder's: its close
	 * is on the traced program's exit path; a few hundred bytes more per trace) */
	int split_last;
};

struct cuptrace_output;

/* Opens (creates or truncates) path; "-" is standard output. Returns NULL and sets errno on
 * failure. opts may be NULL. */
struct cuptrace_output *cuptrace_output_open(const char *path, enum cuptrace_compress mode,
                                             const struct cuptrace_output_opts *opts);
/* Appends one record. Returns 0 or a negative errno; the first error sticks. */
int cuptrace_output_write(struct cuptrace_output *out, const void *data, size_t len);
/* Writes to the file if flush_ms has passed since the last time it did. */
int cuptrace_output_tick(struct cuptrace_output *out);
/* Writes everything buffered (a partial chunk becomes a chunk). */
int cuptrace_output_flush(struct cuptrace_output *out);
/* Flushes, ends the stream (gzip trailer), closes and frees. NULL is fine. Returns the first
 * error seen over the output's life. */
int cuptrace_output_close(struct cuptrace_output *out);
/* Bytes written to the file so far. */
uint64_t cuptrace_output_bytes(const struct cuptrace_output *out);
/* CPU time (ns) the compressor threads of every output of the process have used so far, up to
 * their last chunk. Any thread. */
uint64_t cuptrace_output_workers_cpu_ns(void);
/* Which codecs have compressed chunks so far (any output of the process): bit 1 libdeflate
 * (libdeflate.so.0 loaded), bit 2 zlib (it was not found). Any thread. */
#define CUPTRACE_CODEC_LIBDEFLATE 1u
#define CUPTRACE_CODEC_ZLIB       2u
unsigned cuptrace_output_codecs(void);
/* Parses "none", "gzip", "chunks"/"zlib"; -1 if unknown. */
int cuptrace_compress_parse(const char *s);

#endif
