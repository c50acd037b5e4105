/* Output layer: the bytes that reach the file, for every mode and compressor pool size; chunk
 * order; oversized records; periodic flush; write errors. Also the helpers the library's
 * threads and driver lookups share (common/util.h). */
#define _GNU_SOURCE /* RTLD_NOLOAD */
#include "check.h"

#include <dlfcn.h>
#include <errno.h>
#include <gnu/libc-version.h>
#include <signal.h>
#include <unistd.h>
#include <zlib.h>

#include "common/util.h"
#include "output/output.h"

static const char *tmpdir(void)
{
	const char *d = getenv("CUPTRACE_TMP");
	return d ? d : "/tmp";
}

static uint8_t *slurp(const char *path, size_t *n)
{
	*n = 0;
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	long len = ftell(f);
	fseek(f, 0, SEEK_SET);
	uint8_t *b = malloc((size_t)len + 1);
	*n = fread(b, 1, (size_t)len, f);
	fclose(f);
	return b;
}

static uint64_t varint(const uint8_t *b, size_t n, size_t *i)
{
	uint64_t v = 0;
	for (int s = 0; *i < n && s < 64; s += 7) {
		uint8_t x = b[(*i)++];
		v |= (uint64_t)(x & 0x7f) << s;
		if (x < 0x80)
			break;
	}
	return v;
}

/* Records: framed TracePackets "0A len <len bytes of a counter pattern>". */
static size_t make_record(uint8_t *out, uint32_t k, size_t len)
{
	size_t n = 0;
	out[n++] = 0x0A;
	size_t l = len;
	do {
		out[n++] = (uint8_t)((l & 0x7f) | (l >= 0x80 ? 0x80 : 0));
		l >>= 7;
	} while (l);
	for (size_t i = 0; i < len; i++)
		out[n++] = (uint8_t)(k * 31 + i);
	return n;
}

/* Unpacks a CHUNKS file: every outer packet must be one compressed_packets field holding one
 * zlib stream; returns the concatenated inner bytes. */
static uint8_t *unchunk(const uint8_t *f, size_t n, size_t *out_len, int *chunks)
{
	size_t cap = 1 << 20, len = 0, i = 0;
	uint8_t *out = malloc(cap);
	*chunks = 0;
	while (i < n) {
		CHECK_EQ_INT(f[i], 0x0A);
		i++;
		size_t plen = (size_t)varint(f, n, &i), end = i + plen;
		CHECK(f[i] == 0x92 && f[i + 1] == 0x03);
		i += 2;
		size_t zlen = (size_t)varint(f, n, &i);
		CHECK_EQ_INT(i + zlen, end);
		uLongf room = 1 << 21;
		if (len + room > cap) {
			cap = (len + room) * 2;
			out = realloc(out, cap);
		}
		CHECK_EQ_INT(uncompress(out + len, &room, f + i, zlen), Z_OK);
		len += room;
		i = end;
		(*chunks)++;
	}
	*out_len = len;
	return out;
}

static void round_trip(enum cuptrace_compress mode, int workers)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/out_%d_%d.bin", tmpdir(), (int)mode, workers);
	struct cuptrace_output_opts o = {.sz = sizeof(o), .chunk_bytes = 4096, .workers = workers};
	struct cuptrace_output *out = cuptrace_output_open(path, mode, &o);
	CHECK(out != NULL);
	if (!out)
		return;
	size_t cap = 1 << 22, len = 0;
	uint8_t *want = malloc(cap), rec[20000];
	for (uint32_t k = 0; k < 3000; k++) {
		/* Mostly small records, some bigger than a chunk. */
		size_t rl = k % 97 == 0 ? 9000 + k : 10 + (k * 7919) % 300;
		size_t n = make_record(rec, k, rl);
		CHECK_EQ_INT(cuptrace_output_write(out, rec, n), 0);
		memcpy(want + len, rec, n);
		len += n;
		if (k == 1500)
			CHECK_EQ_INT(cuptrace_output_flush(out), 0);
	}
	CHECK_EQ_INT(cuptrace_output_close(out), 0);
	size_t fn;
	uint8_t *f = slurp(path, &fn);
	CHECK(f != NULL);
	uint8_t *got = NULL;
	size_t gl = 0;
	if (mode == CUPTRACE_COMPRESS_CHUNKS) {
		int chunks;
		got = unchunk(f, fn, &gl, &chunks);
		CHECK(chunks > 100); /* 4 KiB chunks */
	} else if (mode == CUPTRACE_COMPRESS_GZIP) {
		got = malloc(cap);
		z_stream z;
		memset(&z, 0, sizeof(z));
		inflateInit2(&z, 15 + 16);
		z.next_in = f;
		z.avail_in = (uInt)fn;
		z.next_out = got;
		z.avail_out = (uInt)cap;
		CHECK_EQ_INT(inflate(&z, Z_FINISH), Z_STREAM_END);
		gl = cap - z.avail_out;
		inflateEnd(&z);
	} else {
		got = f;
		f = NULL;
		gl = fn;
	}
	CHECK_EQ_INT(gl, len);
	CHECK(got && !memcmp(got, want, len));
	free(got);
	free(f);
	free(want);
	unlink(path);
}

/* cuptrace_grow: every element kept across moves, capacity doubling (a few reallocs for
 * thousands of appends, one per power of two), and an overflowing request refused before any
 * allocation, with the array and its capacity untouched. */
static void test_grow(void)
{
	struct pair {
		uint32_t k;
		double v;
	} *arr = NULL;
	size_t n = 0, cap = 0, moves = 0, last_cap = 0;

	for (uint32_t i = 0; i < 5000; i++) {
		CHECK_EQ_INT(CUPTRACE_GROW(arr, cap, n + 1), 0);
		if (cap != last_cap) {
			moves++;
			CHECK(cap >= n + 1 && (!last_cap || cap == 2 * last_cap));
			last_cap = cap;
		}
		arr[n++] = (struct pair){i, i * 0.5};
	}
	/* 16, 32, ..., 8192: 10 capacities for 5000 elements. */
	CHECK_EQ_INT(moves, 10);
	CHECK_EQ_INT(cap, 8192);
	size_t bad = 0;
	for (uint32_t i = 0; i < 5000; i++)
		bad += arr[i].k != i || arr[i].v != i * 0.5;
	CHECK_EQ_INT(bad, 0);

	/* Room already there, or nothing asked: no change. */
	struct pair *before = arr;
	CHECK_EQ_INT(CUPTRACE_GROW(arr, cap, 100), 0);
	CHECK(arr == before && cap == 8192);
	/* A jump of several doublings at once: the next power of two times the old capacity. */
	CHECK_EQ_INT(CUPTRACE_GROW(arr, cap, 40000), 0);
	CHECK_EQ_INT(cap, 65536);
	CHECK(arr[4999].k == 4999);

	/* n * size overflows size_t: refused, nothing moved or lost. */
	before = arr;
	CHECK_EQ_INT(CUPTRACE_GROW(arr, cap, SIZE_MAX / sizeof(*arr) + 1), -ENOMEM);
	CHECK(arr == before && cap == 65536 && arr[4999].k == 4999);
	CHECK(cuptrace_grow(arr, &cap, SIZE_MAX, 2) == NULL && cap == 65536);
	free(arr);

	/* Empty: asking for 0 leaves a NULL array NULL, and that is not a failure. */
	uint8_t *bytes = NULL;
	size_t bcap = 0;
	CHECK_EQ_INT(CUPTRACE_GROW(bytes, bcap, 0), 0);
	CHECK(bytes == NULL && bcap == 0);
	CHECK_EQ_INT(CUPTRACE_GROW(bytes, bcap, 1), 0);
	CHECK(bytes != NULL && bcap == 16);
	free(bytes);
}

static void test_round_trips(void)
{
	round_trip(CUPTRACE_COMPRESS_NONE, 0);
	round_trip(CUPTRACE_COMPRESS_GZIP, 0);
	round_trip(CUPTRACE_COMPRESS_CHUNKS, -1); /* inline */
	round_trip(CUPTRACE_COMPRESS_CHUNKS, 1);
	round_trip(CUPTRACE_COMPRESS_CHUNKS, 2);
	round_trip(CUPTRACE_COMPRESS_CHUNKS, 4);
}

/* The chunk at f[*i]: its zlib stream (*zlen bytes); *i moves to the next chunk. */
static const uint8_t *next_chunk(const uint8_t *f, size_t n, size_t *i, size_t *zlen)
{
	(*i)++; /* Trace.packet tag */
	size_t end = (size_t)varint(f, n, i);
	end += *i;
	*i += 2; /* compressed_packets tag */
	*zlen = (size_t)varint(f, n, i);
	const uint8_t *z = f + *i;
	*i = end;
	return z;
}

/* The FLEVEL bits of each chunk's zlib header (RFC 1950: 1 for levels 2 to 5, 3 for 7 and up,
 * zlib's and libdeflate's alike), in file order. */
static int chunk_levels(const char *path, int *lv, int max)
{
	size_t n, i = 0, zlen;
	uint8_t *f = slurp(path, &n);
	int k = 0;
	while (f && i < n && k < max)
		lv[k++] = next_chunk(f, n, &i, &zlen)[1] >> 6;
	free(f);
	return k;
}

/* A chunk under 64 KiB is compressed at level 10 where libdeflate does it (smaller, about 6 ms
 * per 64 KiB), except the last chunk of a trace that has others: that one is on the program's
 * exit path, and takes the trace's level like the full chunks before it. */
static void test_last_chunk_level(void)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/out_levels.bin", tmpdir());
	uint8_t rec[300];
	for (int big = 0; big < 2; big++) {
		/* The cases are laid out for 256 KiB chunks (the default is 128 KiB). */
		struct cuptrace_output_opts o = {.sz = sizeof(o), .chunk_bytes = 256u * 1024u};
		struct cuptrace_output *out =
		    cuptrace_output_open(path, CUPTRACE_COMPRESS_CHUNKS, &o);
		CHECK(out != NULL);
		if (!out)
			return;
		/* 256 KiB chunks: 300,000 bytes are a full chunk and a last one of
		 * about 38 KiB; 20,000 bytes are one small chunk. */
		size_t total = big ? 300000 : 20000, len = 0;
		for (uint32_t k = 0; len < total; k++) {
			size_t m = make_record(rec, k, 200);
			CHECK_EQ_INT(cuptrace_output_write(out, rec, m), 0);
			len += m;
		}
		CHECK_EQ_INT(cuptrace_output_close(out), 0);
		int lv[8], k = chunk_levels(path, lv, 8);
		if (big) {
			CHECK_EQ_INT(k, 2);
			CHECK_EQ_INT(lv[0], 1); /* level 5 */
			CHECK_EQ_INT(lv[1], 1); /* the last chunk too */
		} else {
			CHECK_EQ_INT(k, 1);
			/* libdeflate: level 10; zlib (no libdeflate here): level 5 */
			CHECK_EQ_INT(lv[0], (cuptrace_output_codecs() & 1u) ? 3 : 1);
		}
		unlink(path);
	}
	if (!(cuptrace_output_codecs() & 1u))
		printf("note: libdeflate.so.0 not found: small chunks checked at zlib's level 5\n");
}

/* Walks a CHUNKS file chunk by chunk: each zlib stream must hold whole records (framed
 * TracePackets, as make_record writes them). Returns the chunk count; *inner gets the chunks'
 * uncompressed sizes (up to max). */
static int whole_record_chunks(const char *path, size_t *inner, int max)
{
	size_t n, i = 0;
	uint8_t *f = slurp(path, &n);
	uint8_t *z = malloc(1 << 20);
	int k = 0;
	while (f && z && i < n) {
		size_t zlen;
		const uint8_t *c = next_chunk(f, n, &i, &zlen);
		uLongf room = 1 << 20;
		CHECK_EQ_INT(uncompress(z, &room, c, zlen), Z_OK);
		size_t j = 0;
		while (j < room) { /* records end exactly at the stream's end */
			CHECK_EQ_INT(z[j], 0x0A);
			j++;
			size_t rl = (size_t)varint(z, room, &j);
			j += rl;
		}
		CHECK_EQ_INT(j, room);
		if (k < max)
			inner[k] = room;
		k++;
	}
	free(z);
	free(f);
	return k;
}

/* The last chunk of a trace that has others is cut between records into one piece per
 * compressor (the workers and the caller), compressed at once on the program's exit path.
 * 256 KiB chunks, 203-byte records: 256 KiB and 192 KiB more make a full chunk and a last one
 * of about 192 KiB, cut in three (2 workers) or five (4) near equal parts; without a pool, with
 * no chunk before it, or not asked to (split_last 0: `cuptrace convert`), the last chunk stays
 * whole, and one under 64 KiB is cut in one piece per 32 KiB. The bytes read back are the bytes
 * written. */
static void test_last_chunk_pieces(void)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/out_pieces.bin", tmpdir());
	uint8_t rec[300];
	static const struct {
		int workers;
		size_t total;
		int chunks, split;
	} cases[] = {{2, 262144 + 196608, 4, 1},  {4, 262144 + 196608, 6, 1},
	             {-1, 262144 + 196608, 2, 1}, {2, 196608, 1, 1},
	             {2, 262144 + 40000, 2, 1},   {2, 262144 + 70000, 3, 1},
	             {2, 262144 + 196608, 2, 0}};
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		struct cuptrace_output_opts o = {.sz = sizeof(o),
		                                 .chunk_bytes = 256u * 1024u,
		                                 .workers = cases[c].workers,
		                                 .split_last = cases[c].split};
		struct cuptrace_output *out =
		    cuptrace_output_open(path, CUPTRACE_COMPRESS_CHUNKS, &o);
		CHECK(out != NULL);
		if (!out)
			return;
		size_t len = 0, rl = make_record(rec, 0, 200);
		for (uint32_t k = 0; len + rl <= cases[c].total; k++) {
			size_t m = make_record(rec, k, 200);
			CHECK_EQ_INT(cuptrace_output_write(out, rec, m), 0);
			len += m;
		}
		CHECK_EQ_INT(cuptrace_output_close(out), 0);
		size_t inner[8] = {0}, sum = 0;
		int k = whole_record_chunks(path, inner, 8);
		CHECK_EQ_INT(k, cases[c].chunks);
		for (int i = 0; i < k && i < 8; i++)
			sum += inner[i];
		CHECK_EQ_INT(sum, len);
		/* the pieces: about equal, a record and a 16 KiB mark apart at most */
		size_t last = len - (k > 1 ? inner[0] : 0),
		       share = last / (size_t)(k > 1 ? k - 1 : 1);
		for (int i = 1; i < k && k > 2 && i < 8; i++)
			CHECK(inner[i] + 16384 + rl >= share && inner[i] <= share + 16384 + rl);
		unlink(path);
	}
}

static void test_flush_reaches_file(void)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/out_flush.bin", tmpdir());
	struct cuptrace_output *out = cuptrace_output_open(path, CUPTRACE_COMPRESS_CHUNKS, NULL);
	uint8_t rec[64];
	size_t n = make_record(rec, 1, 40);
	CHECK_EQ_INT(cuptrace_output_write(out, rec, n), 0);
	CHECK_EQ_INT(cuptrace_output_bytes(out), 0); /* still buffered */
	CHECK_EQ_INT(cuptrace_output_flush(out), 0);
	size_t fn;
	uint8_t *f = slurp(path, &fn);
	CHECK(fn > 0 && fn == cuptrace_output_bytes(out));
	free(f);
	CHECK_EQ_INT(cuptrace_output_close(out), 0);
	unlink(path);
}

static void test_write_error_is_sticky(void)
{
	if (access("/dev/full", W_OK)) {
		printf("SKIP write error test: no /dev/full\n");
		return;
	}
	for (int mode = 0; mode < 3; mode++) {
		struct cuptrace_output *out =
		    cuptrace_output_open("/dev/full", (enum cuptrace_compress)mode, NULL);
		CHECK(out != NULL);
		uint8_t rec[600];
		size_t n = make_record(rec, 2, 500);
		int err = 0;
		for (int i = 0; i < 2000 && !err; i++)
			err = cuptrace_output_write(out, rec, n);
		int f = cuptrace_output_flush(out);
		int c = cuptrace_output_close(out);
		/* The error shows at the latest when the data has to reach the file. */
		CHECK(err == -ENOSPC || f == -ENOSPC || c == -ENOSPC);
		CHECK_EQ_INT(c, -ENOSPC);
	}
}

static void test_open_errors(void)
{
	errno = 0;
	CHECK(cuptrace_output_open("/nonexistent-dir/x.pftrace", CUPTRACE_COMPRESS_CHUNKS, NULL) ==
	      NULL);
	CHECK_EQ_INT(errno, ENOENT);
	CHECK_EQ_INT(cuptrace_compress_parse("gzip"), CUPTRACE_COMPRESS_GZIP);
	CHECK_EQ_INT(cuptrace_compress_parse("bogus"), -1);
	CHECK_EQ_INT(cuptrace_output_close(NULL), 0);
}

/* %r and %l from each launcher's variables, the first launcher found winning, the pid
 * without one; %p, %h, %% as before. */
static void test_path_ranks(void)
{
	static const char *const vars[] = {"RANK",
	                                   "LOCAL_RANK",
	                                   "WORLD_SIZE",
	                                   "OMPI_COMM_WORLD_RANK",
	                                   "OMPI_COMM_WORLD_LOCAL_RANK",
	                                   "OMPI_COMM_WORLD_SIZE",
	                                   "PMI_RANK",
	                                   "MPI_LOCALRANKID",
	                                   "PMI_SIZE",
	                                   "SLURM_PROCID",
	                                   "SLURM_LOCALID",
	                                   "SLURM_NTASKS"};
	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
		unsetenv(vars[i]);
	char *p = cuptrace_path_expand("job-%r-%l-%p-%%.pftrace", 4242);
	CHECK_EQ_STR(p, "job-4242-4242-4242-%.pftrace");
	free(p);
	struct cuptrace_rank rk = cuptrace_launcher_rank();
	CHECK(rk.rank == -1 && rk.local_rank == -1 && rk.world_size == -1 && !rk.launcher);

	setenv("SLURM_PROCID", "9", 1);
	setenv("SLURM_LOCALID", "1", 1);
	setenv("SLURM_NTASKS", "16", 1);
	rk = cuptrace_launcher_rank();
	CHECK(rk.rank == 9 && rk.local_rank == 1 && rk.world_size == 16);
	CHECK_EQ_STR(rk.launcher, "slurm");
	setenv("OMPI_COMM_WORLD_RANK", "5", 1); /* Open MPI comes before Slurm */
	p = cuptrace_path_expand("r%r-l%l", 1);
	CHECK_EQ_STR(p, "r5-l1"); /* no OMPI local rank: the pid, not Slurm's */
	free(p);
	setenv("RANK", "3", 1);
	setenv("LOCAL_RANK", "x", 1); /* not a number: not given */
	rk = cuptrace_launcher_rank();
	CHECK(rk.rank == 3 && rk.local_rank == -1 && rk.world_size == -1);
	CHECK_EQ_STR(rk.launcher, "torchrun");
	setenv("LOCAL_RANK", "0", 1);
	p = cuptrace_path_expand("/t/%h/job-%r.%l.pftrace", 7);
	char host[256] = "unknown", want[512];
	gethostname(host, sizeof(host) - 1);
	snprintf(want, sizeof(want), "/t/%s/job-3.0.pftrace", host);
	CHECK_EQ_STR(p, want);
	free(p);
	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
		unsetenv(vars[i]);
}

static void *read_mask(void *arg)
{
	pthread_sigmask(SIG_BLOCK, NULL, (sigset_t *)arg);
	return NULL;
}

/* Our threads take none of the program's asynchronous signals, but their faults reach the
 * program's handlers; the caller's own mask is left as it was. */
static void test_thread_signals(void)
{
	sigset_t mine, saved, seen, after;
	sigemptyset(&mine);
	sigaddset(&mine, SIGUSR2);
	pthread_sigmask(SIG_SETMASK, &mine, &saved);
	pthread_t t;
	sigemptyset(&seen);
	CHECK(cuptrace_thread_start(&t, read_mask, &seen) == 0);
	pthread_join(t, NULL);
	static const int blocked[] = {SIGINT,  SIGTERM, SIGHUP,  SIGQUIT, SIGCHLD, SIGALRM,
	                              SIGUSR1, SIGUSR2, SIGPROF, SIGPIPE, SIGWINCH};
	static const int open[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGSYS};
	for (size_t i = 0; i < sizeof(blocked) / sizeof(blocked[0]); i++)
		CHECK(sigismember(&seen, blocked[i]) == 1);
	for (size_t i = 0; i < sizeof(open) / sizeof(open[0]); i++)
		CHECK(sigismember(&seen, open[i]) == 0);
	pthread_sigmask(SIG_SETMASK, &saved, &after);
	CHECK(sigismember(&after, SIGUSR2) == 1 && sigismember(&after, SIGINT) == 0);
}

/* A function of an already loaded library, by soname or from the global scope; a library
 * that is not loaded is not loaded by asking. */
static void test_loaded_sym(void)
{
	const char *(*ver)(void) =
	    (const char *(*)(void))cuptrace_loaded_sym("libc.so.6", "gnu_get_libc_version");
	CHECK(ver != NULL);
	if (ver)
		CHECK_EQ_STR(ver(), gnu_get_libc_version());
	/* not loaded under that name: the global scope still has it */
	CHECK(cuptrace_loaded_sym("libcuptrace-none.so.1", "gnu_get_libc_version") != NULL);
	CHECK(cuptrace_loaded_sym("libcuptrace-none.so.1", "cuptrace_no_such_fn") == NULL);
	/* libresolv ships with glibc; this program does not load it */
	int was = dlopen("libresolv.so.2", RTLD_LAZY | RTLD_NOLOAD) != NULL;
	cuptrace_loaded_sym("libresolv.so.2", "ns_initparse");
	if (!was)
		CHECK(dlopen("libresolv.so.2", RTLD_LAZY | RTLD_NOLOAD) == NULL);
}

TEST_MAIN(T(test_grow), T(test_round_trips), T(test_last_chunk_level), T(test_last_chunk_pieces),
          T(test_flush_reaches_file), T(test_write_error_is_sticky), T(test_open_errors),
          T(test_path_ranks), T(test_thread_signals), T(test_loaded_sym))
