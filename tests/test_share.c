/* `cuptrace share` below the command line: SHA-256 and HMAC against published vectors, what
 * the text scrubber changes and leaves alone, the metadata policy and private recording's filter,
 * and the rewriting sink on a synthetic trace (nothing identifying reaches the next sink;
 * windows keep exact counts and no dangling flow; tokens are stable per salt). The Perfetto
 * writer's side of private recording: an empty host name writes no machine name. */
#define _GNU_SOURCE
#include <stddef.h>
#include <unistd.h>

#include "check.h"
#include "rec_sink.h"

#include "rewrite/share.h"
#include "rewrite/share_state.h"
#include "common/privacy.h"
#include "common/sha256.h"
#include "format/formats.h"
#include "read/read.h"

static void hex(const uint8_t *h, size_t n, char *out)
{
	for (size_t i = 0; i < n; i++)
		sprintf(out + 2 * i, "%02x", h[i]);
}

static void test_sha256(void)
{
	uint8_t h[32];
	char x[65];
	cuptrace_sha256("", 0, h);
	hex(h, 32, x);
	CHECK_EQ_STR(x, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
	cuptrace_sha256("abc", 3, h);
	hex(h, 32, x);
	CHECK_EQ_STR(x, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	const char *m = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
	cuptrace_sha256(m, strlen(m), h);
	hex(h, 32, x);
	CHECK_EQ_STR(x, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
	/* A million 'a' in uneven pieces: the buffering across blocks. */
	struct cuptrace_sha256 c;
	char a[997];
	memset(a, 'a', sizeof(a));
	cuptrace_sha256_init(&c);
	size_t left = 1000000;
	while (left) {
		size_t n = left < sizeof(a) ? left : sizeof(a);
		cuptrace_sha256_update(&c, a, n);
		left -= n;
	}
	cuptrace_sha256_final(&c, h);
	hex(h, 32, x);
	CHECK_EQ_STR(x, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
	/* RFC 4231, test cases 2 and 6 (a key longer than a block). */
	cuptrace_hmac_sha256("Jefe", 4, "what do ya want for nothing?", 28, h);
	hex(h, 32, x);
	CHECK_EQ_STR(x, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
	uint8_t key[131];
	memset(key, 0xaa, sizeof(key));
	const char *d = "Test Using Larger Than Block-Size Key - Hash Key First";
	cuptrace_hmac_sha256(key, sizeof(key), d, strlen(d), h);
	hex(h, 32, x);
	CHECK_EQ_STR(x, "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

static struct share_buf scrubbed;

static const char *scrub(const struct share_secrets *s, const char *in, int *flags)
{
	*flags = share_scrub_text(s, in, &scrubbed);
	return scrubbed.p;
}

static void test_scrub_text(void)
{
	struct share_secrets s = {0};
	int f;
	CHECK_EQ_INT(share_secret_host(&s, "gpu-node-17.corp.example"), 0);
	CHECK_EQ_INT(share_find_users(&s, "python /home/alice/x.py /Users/bob/y"), 0);
	CHECK_EQ_INT(share_find_users(&s, "C:\\Users\\carol\\run.exe"), 0);
	/* Too common or too short to be secrets. */
	share_secret_host(&s, "localhost");
	share_secret_add(&s, "root", 4, SHARE_SECRET_USER);
	share_secret_add(&s, "x", 1, SHARE_SECRET_USER);
	CHECK_EQ_INT(s.n, 5); /* the host, its first label, alice, bob, carol */

	CHECK_EQ_STR(scrub(&s, "/home/alice/proj/train.py", &f), "train.py");
	CHECK_EQ_INT(f, SHARE_PATH);
	CHECK_EQ_STR(scrub(&s, "python /opt/x/bin/tool --data=/data/set1/ -o ~/out.json", &f),
	             "python tool --data=set1 -o out.json");
	CHECK_EQ_STR(scrub(&s, "/home/alice/", &f), "~");
	CHECK_EQ_STR(scrub(&s, "cd /root && ls ~", &f), "cd ~ && ls ~");
	CHECK_EQ_STR(scrub(&s, "k.py(15): <module> /home/alice/k.py(15): f", &f),
	             "k.py(15): <module> k.py(15): f");
	CHECK_EQ_STR(scrub(&s, "PATH=/usr/bin:/home/alice/bin", &f), "PATH=bin:bin");
	CHECK_EQ_STR(scrub(&s, "C:\\Users\\carol\\proj\\run.exe x", &f), "run.exe x");
	CHECK_EQ_STR(scrub(&s, "see https://wiki.corp.example/a?token=s3cr3t now", &f),
	             "see [url] now");
	CHECK_EQ_INT(f, SHARE_URL);
	CHECK_EQ_STR(scrub(&s, "on GPU-NODE-17 and gpu-node-17.corp.example", &f),
	             "on [host] and [host]");
	CHECK_EQ_INT(f, SHARE_HOST);
	CHECK_EQ_STR(scrub(&s, "worker-alice bob_model Alice alicexyz", &f),
	             "worker-[user] [user]_model Alice alicexyz");
	CHECK_EQ_INT(f, SHARE_USER);
	/* What is not a path, URL or secret stays as it is. */
	static const char *const same[] = {
	    "void at::native::vectorized_elementwise_kernel<4, float>(int, float*)",
	    "a / b",
	    "1/2",
	    "fwd/bwd",
	    "Memcpy HtoD (Pinned -> Device)",
	    "(256, 1, 1)",
	    "[[64,256],[]]",
	    "relative/dir/file.txt",
	    "Stream 7",
	    "",
	    "/",
	    "x // y"};
	for (size_t i = 0; i < sizeof(same) / sizeof(same[0]); i++) {
		CHECK_EQ_STR(scrub(&s, same[i], &f), same[i]);
		CHECK_EQ_INT(f, 0);
	}
	share_secrets_free(&s);
	free(scrubbed.p);
	scrubbed = (struct share_buf){0};
}

static void test_tokens(void)
{
	char a[64], b[64], c[64];
	share_token("", "kernel", "gemm_kernel", a, sizeof(a));
	share_token("", "kernel", "gemm_kernel", b, sizeof(b));
	share_token("s1", "kernel", "gemm_kernel", c, sizeof(c));
	CHECK_EQ_STR(a, b);
	CHECK(strcmp(a, c));
	CHECK_EQ_INT(strlen(a), strlen("kernel_") + 12);
	CHECK(!strncmp(a, "kernel_", 7));
	/* The token is HMAC-SHA-256(salt, name), its first 6 bytes. */
	uint8_t h[32];
	char x[13];
	cuptrace_hmac_sha256("s1", 2, "gemm_kernel", 11, h);
	hex(h, 6, x);
	CHECK_EQ_STR(c + 7, x);
}

static void test_policy(void)
{
	CHECK_EQ_INT(cuptrace_meta_policy("hostname"), CUPTRACE_META_DROP);
	CHECK_EQ_INT(cuptrace_meta_policy("boot_id"), CUPTRACE_META_DROP);
	CHECK_EQ_INT(cuptrace_meta_policy("gpu0_uuid"), CUPTRACE_META_DROP);
	CHECK_EQ_INT(cuptrace_meta_policy("gpu12_uuid"), CUPTRACE_META_DROP);
	CHECK_EQ_INT(cuptrace_meta_policy("gpu0"), CUPTRACE_META_SCRUB);
	CHECK_EQ_INT(cuptrace_meta_policy("gpu0_pci_bus_id"), CUPTRACE_META_SCRUB);
	CHECK_EQ_INT(cuptrace_meta_policy("cmdline"), CUPTRACE_META_PROGRAM);
	CHECK_EQ_INT(cuptrace_meta_policy("record_cmdline"), CUPTRACE_META_PROGRAM);
	CHECK_EQ_INT(cuptrace_meta_policy("start_realtime_ns"), CUPTRACE_META_TIME);
	CHECK_EQ_INT(cuptrace_meta_policy("end_boottime_ns"), CUPTRACE_META_TIME);
	CHECK_EQ_INT(cuptrace_meta_policy("rank"), CUPTRACE_META_SCRUB);
	char p[64];
	CHECK_EQ_INT(cuptrace_cmdline_program("/home/a/venv/bin/python  x.py --k=v ", p, 64), 2);
	CHECK_EQ_STR(p, "python");
	CHECK_EQ_INT(cuptrace_cmdline_program("", p, 64), 0);
	CHECK_EQ_STR(p, "");
	CHECK_EQ_INT(cuptrace_cmdline_program("./a.out", p, 64), 0);
	CHECK_EQ_STR(p, "a.out");

	/* Private recording's filter, on entries shaped like collect.c's. */
	struct kv {
		char key[40];
		char val[64];
	} m[] = {{"pid", "12"},
	         {"hostname", "node7"},
	         {"cmdline", "/home/alice/bin/app --secret=1 x"},
	         {"boot_id", "0c6f"},
	         {"start_time", "2026-01-01T00:00:00Z"},
	         {"record_cmdline", "/home/alice/bin/app --secret=1 x"}};
	size_t n = cuptrace_private_filter(m, 6, sizeof(m[0]), offsetof(struct kv, key),
	                                   offsetof(struct kv, val), sizeof(m[0].val));
	CHECK_EQ_INT(n, 4);
	CHECK_EQ_STR(m[0].key, "pid");
	CHECK_EQ_STR(m[1].key, "cmdline");
	CHECK_EQ_STR(m[1].val, "app");
	CHECK_EQ_STR(m[2].key, "start_time");
	CHECK_EQ_STR(m[3].key, "record_cmdline");
	CHECK_EQ_STR(m[3].val, "app");
	unsetenv("CUPTRACE_PRIVATE");
	CHECK(!cuptrace_private_env());
	setenv("CUPTRACE_PRIVATE", "0", 1);
	CHECK(!cuptrace_private_env());
	setenv("CUPTRACE_PRIVATE", "1", 1);
	CHECK(cuptrace_private_env());
	unsetenv("CUPTRACE_PRIVATE");
}

/* ---- the sink, on a synthetic trace ---- */

enum { PROC = 1, THR, GPU, STREAM, NAMED, CTR, WORKER };

/* Ten launches (API call at 100 i, kernel at 100 i + 20, flow i + 1 between them), two NVTX
 * steps [0, 500] and [500, 1000], memory instants at 150 and 350, counter values at 50, 250,
 * 550 and 850; metadata with a host, home paths, a secret argument and a URL. */
static void replay(struct cuptrace_sink *s, const char *kernel)
{
	struct cuptrace_meta meta[] = {
	    {.key = "hostname", .s = "gpu-node-17.corp.example"},
	    {.key = "cmdline", .s = "/home/alice/venv/bin/python train.py --token=hunter2secret"},
	    {.key = "boot_id", .s = "0c6f1b6c-aaaa"},
	    {.key = "gpu0_uuid", .s = "GPU-deadbeef-1234"},
	    {.key = "gpu0", .s = "NVIDIA H200"},
	    {.key = "start_time", .s = "2026-11-21T05:44:45Z"},
	    {.key = "start_realtime_ns", .is_int = 1, .i = 1795239885526540752},
	    {.key = "data_dir", .s = "/home/alice/datasets/imagenet"},
	    {.key = "note", .s = "see https://wiki.corp.example/page?token=abc"},
	    {.key = "rank", .is_int = 1, .i = 3},
	};
	struct cuptrace_trace_info info = {.pid = 42,
	                                   .process_name = "train",
	                                   .hostname = "gpu-node-17.corp.example",
	                                   .start_realtime_ns = 1795239885526540752,
	                                   .start_boottime_ns = 35800485795,
	                                   .trace_uuid_hi = 1,
	                                   .trace_uuid_lo = 2,
	                                   .meta = meta,
	                                   .nmeta = sizeof(meta) / sizeof(meta[0])};
	s->ops->begin(s, &info);
	const char *argv[] = {"/home/alice/venv/bin/python", "/home/alice/proj/train.py",
	                      "--token=hunter2secret"};
	struct cuptrace_track t[] = {
	    {.uuid = PROC,
	     .kind = CUPTRACE_TRACK_PROCESS,
	     .pid = 42,
	     .name = "train",
	     .cmdline = argv,
	     .cmdline_len = 3},
	    {.uuid = THR,
	     .kind = CUPTRACE_TRACK_THREAD,
	     .parent_uuid = PROC,
	     .pid = 42,
	     .tid = 42,
	     .name = "train"},
	    {.uuid = WORKER,
	     .kind = CUPTRACE_TRACK_THREAD,
	     .parent_uuid = PROC,
	     .pid = 42,
	     .tid = 43,
	     .name = "loader-alice"},
	    {.uuid = GPU,
	     .kind = CUPTRACE_TRACK_GROUP,
	     .parent_uuid = PROC,
	     .pid = 42,
	     .name = "GPU 0: NVIDIA H200"},
	    {.uuid = STREAM,
	     .kind = CUPTRACE_TRACK_SLICES,
	     .parent_uuid = GPU,
	     .pid = 42,
	     .name = "Stream 7"},
	    {.uuid = NAMED,
	     .kind = CUPTRACE_TRACK_SLICES,
	     .parent_uuid = GPU,
	     .pid = 42,
	     .name = "attention (stream 13)",
	     .description = "from /home/alice/notes.txt"},
	    {.uuid = CTR,
	     .kind = CUPTRACE_TRACK_COUNTER,
	     .parent_uuid = GPU,
	     .pid = 42,
	     .name = "Device memory in use",
	     .unit = CUPTRACE_UNIT_BYTES},
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		s->ops->track(s, &t[i]);
	for (int64_t k = 0; k < 2; k++) {
		struct cuptrace_slice step = {.track_uuid = THR,
		                              .ts = 500 * k,
		                              .dur = 500,
		                              .name = "step",
		                              .category = "nvtx"};
		s->ops->slice(s, &step);
	}
	for (uint64_t i = 0; i < 10; i++) {
		uint64_t flow = i + 1;
		struct cuptrace_arg targ = {
		    .key = "file", .type = CUPTRACE_ARG_STRING, .v.s = "/home/alice/proj/model.py"};
		struct cuptrace_slice api = {.track_uuid = THR,
		                             .ts = 100 * (int64_t)i + 1,
		                             .dur = 10,
		                             .name = "cudaLaunchKernel",
		                             .category = "cuda_runtime",
		                             .args = &targ,
		                             .nargs = 1,
		                             .flows_out = &flow,
		                             .nflows_out = 1};
		s->ops->slice(s, &api);
		struct cuptrace_arg args[] = {
		    {.key = "grid", .type = CUPTRACE_ARG_STRING, .v.s = "(4, 1, 1)"},
		    {.key = "registers", .type = CUPTRACE_ARG_INT, .v.i = 32},
		    {.key = "origin", .type = CUPTRACE_ARG_STRING, .v.s = "fused by acme compiler"},
		};
		struct cuptrace_slice k = {.track_uuid = i % 2 ? NAMED : STREAM,
		                           .ts = 100 * (int64_t)i + 20,
		                           .dur = 30,
		                           .name = kernel,
		                           .category = "kernel",
		                           .args = args,
		                           .nargs = 3,
		                           .flows_in = &flow,
		                           .nflows_in = 1};
		s->ops->slice(s, &k);
	}
	struct cuptrace_slice w = {.track_uuid = WORKER,
	                           .ts = 5,
	                           .dur = 3,
	                           .name = "load batch",
	                           .category = "acme-domain"};
	s->ops->slice(s, &w);
	struct cuptrace_instant in[] = {
	    {.track_uuid = GPU, .ts = 150, .name = "alloc device", .category = "memory"},
	    {.track_uuid = GPU, .ts = 350, .name = "alloc device", .category = "memory"},
	};
	for (size_t i = 0; i < 2; i++)
		s->ops->instant(s, &in[i]);
	int64_t cts[] = {50, 250, 550, 850};
	for (size_t i = 0; i < 4; i++) {
		struct cuptrace_counter c = {.track_uuid = CTR, .ts = cts[i], .i = (int64_t)i + 1};
		s->ops->counter(s, &c);
	}
	struct cuptrace_meta late[] = {{.key = "records_dropped", .is_int = 1, .i = 0},
	                               {.key = "hostname", .s = "gpu-node-17"}};
	s->ops->meta(s, late, 2);
}

/* Every string the sink recorded, checked for the secrets of replay(). */
static int leaks(const struct rec_sink *r, int verbose)
{
	static const char *const secret[] = {"alice",    "hunter2",  "corp.example", "gpu-node",
	                                     "0c6f1b6c", "deadbeef", "2026-11",      "/home"};
	const char *strs[4096];
	size_t n = 0;
	strs[n++] = r->process_name;
	strs[n++] = r->hostname;
	for (size_t i = 0; i < r->ntracks; i++)
		strs[n++] = r->tracks[i].name;
	for (size_t i = 0; i < r->nslices && n < 4000; i++) {
		strs[n++] = r->slices[i].name;
		strs[n++] = r->slices[i].args;
		strs[n++] = r->slices[i].cat;
	}
	for (size_t i = 0; i < r->nmeta_text && n < 4090; i++) {
		strs[n++] = r->meta_text[i][0];
		strs[n++] = r->meta_text[i][1];
	}
	int bad = 0;
	for (size_t i = 0; i < n; i++)
		for (size_t k = 0; k < sizeof(secret) / sizeof(secret[0]); k++)
			if (strcasestr(strs[i], secret[k])) {
				if (verbose)
					fprintf(stderr, "leak: '%s' in '%s'\n", secret[k], strs[i]);
				bad = 1;
			}
	return bad;
}

/* scan + one rewrite of replay() into a recording sink. */
static struct rec_sink *share(const struct cuptrace_share_opts *o,
                              const struct cuptrace_share_window *w, const char *kernel,
                              struct cuptrace_share_kept *kept)
{
	struct cuptrace_share_scan *sc = cuptrace_share_scan_new(NULL, 0, 1);
	replay(cuptrace_share_scan_sink(sc), kernel);
	cuptrace_share_scan_sink(sc)->ops->finish(cuptrace_share_scan_sink(sc));
	struct cuptrace_share *sh = cuptrace_share_new(o, sc);
	struct rec_sink *rec = rec_sink_new();
	struct rec_sink *copy = calloc(1, sizeof(*copy));
	struct cuptrace_sink *s = cuptrace_share_sink_new(sh, &rec->base, w);
	replay(s, kernel);
	CHECK_EQ_INT(s->ops->finish(s), 0);
	*copy = *rec;
	rec->tracks = NULL;
	rec->slices = NULL;
	if (kept)
		*kept = cuptrace_share_kept(sh);
	char *rep = NULL;
	size_t nrep = 0;
	FILE *f = open_memstream(&rep, &nrep);
	cuptrace_share_report(sh, f, "");
	fclose(f);
	CHECK(strstr(rep, "hostname: removed\n"));
	CHECK(strstr(rep, "boot_id: removed\n"));
	CHECK(strstr(rep, "gpu0_uuid: removed\n"));
	CHECK(strstr(rep, "cmdline: 2 arguments removed (program \"python\" kept)\n"));
	CHECK(strstr(rep, "process command lines: 2 arguments removed\n"));
	CHECK(strstr(rep, "URLs: removed from 1 string\n"));
	free(rep);
	cuptrace_sink_destroy(s);
	cuptrace_share_free(sh);
	cuptrace_share_scan_free(sc);
	return copy;
}

static void free_rec(struct rec_sink *r)
{
	free(r->tracks);
	free(r->slices);
	free(r);
}

/* The name of a recorded track, or "(no track)". */
static const char *tname(const struct rec_sink *r, uint64_t uuid)
{
	for (size_t i = 0; i < r->ntracks; i++)
		if (r->tracks[i].t.uuid == uuid)
			return r->tracks[i].name;
	return "(no track)";
}

static void test_sink_scrubs(void)
{
	struct cuptrace_share_opts o = {.sz = sizeof(o)};
	struct cuptrace_share_kept k;
	struct rec_sink *r = share(&o, NULL, "void fused_attention_kernel<float>(float*)", &k);
	CHECK(!leaks(r, 1));
	/* Counts, timings and flows stay. */
	CHECK_EQ_INT(r->nslices, 23);
	CHECK_EQ_INT(r->ninstants, 2);
	CHECK_EQ_INT(r->ncounters, 4);
	CHECK_EQ_INT(r->ntracks, 7);
	CHECK_EQ_INT(k.slices, 23);
	CHECK_EQ_INT(k.flows, 10);
	CHECK_EQ_INT(r->track_before_use_violations, 0);
	int64_t sum = 0;
	size_t outs = 0, ins = 0;
	for (size_t i = 0; i < r->nslices; i++) {
		sum += r->slices[i].ts * 3 + r->slices[i].dur;
		outs += r->slices[i].nout;
		ins += r->slices[i].nin;
	}
	CHECK_EQ_INT(sum, 3 * (500 + 4500 + 10 + 4500 + 200 + 5) + 1000 + 100 + 300 + 3);
	CHECK_EQ_INT(outs, 10);
	CHECK_EQ_INT(ins, 10);
	/* Names stay without --redact-names; what is a path or a user's name does not. */
	CHECK_EQ_STR(r->slices[2].name, "cudaLaunchKernel");
	CHECK_EQ_STR(r->slices[2].args, "file=model.py;");
	CHECK_EQ_STR(r->slices[3].name, "void fused_attention_kernel<float>(float*)");
	CHECK_EQ_STR(tname(r, WORKER), "loader-[user]");
	CHECK_EQ_STR(tname(r, NAMED), "attention (stream 13)");
	CHECK_EQ_STR(r->hostname, "");
	CHECK_EQ_STR(r->process_name, "train");
	CHECK_EQ_INT(r->start_realtime_ns, 0);
	CHECK(r->uuid_hi != 1 || r->uuid_lo != 2);
	CHECK(!rec_meta(r, "hostname"));
	CHECK(!rec_meta(r, "boot_id"));
	CHECK(!rec_meta(r, "gpu0_uuid"));
	CHECK(!rec_meta(r, "start_time"));
	CHECK(!rec_meta(r, "start_realtime_ns"));
	CHECK_EQ_STR(rec_meta(r, "cmdline"), "python");
	CHECK_EQ_STR(rec_meta(r, "gpu0"), "NVIDIA H200");
	CHECK_EQ_STR(rec_meta(r, "data_dir"), "imagenet");
	CHECK_EQ_STR(rec_meta(r, "note"), "see [url]");
	CHECK_EQ_STR(rec_meta(r, "rank"), "3");
	CHECK_EQ_STR(rec_meta(r, "records_dropped"), "0");
	CHECK(rec_meta(r, "shared") && strstr(rec_meta(r, "shared"), "cuptrace share"));
	free_rec(r);

	/* --keep-time keeps the clocks and the time metadata. */
	o.keep_time = 1;
	r = share(&o, NULL, "k", NULL);
	CHECK_EQ_INT(r->start_realtime_ns, 1795239885526540752);
	CHECK_EQ_STR(rec_meta(r, "start_realtime_ns"), "1795239885526540752");
	free_rec(r);
}

static void test_sink_window(void)
{
	struct cuptrace_share_opts o = {.sz = sizeof(o)};
	struct cuptrace_share_window w = {1, 300, 605};
	struct cuptrace_share_kept k;
	struct rec_sink *r = share(&o, &w, "k", &k);
	/* Slices that overlap [300, 605]: API calls 3..6 ([100 i + 1, + 10]), kernels 3..5
	 * ([100 i + 20, + 30]), both steps; the instant at 350; the counter at 550 and the last
	 * one before the window (250). Flows whose both ends stay: 4, 5, 6 (the call at 601 has
	 * lost its kernel, at 620). Every track stays. */
	CHECK_EQ_INT(r->nslices, 9);
	CHECK_EQ_INT(r->ninstants, 1);
	CHECK_EQ_INT(r->ncounters, 2);
	CHECK_EQ_INT(r->counters[0], 2);
	CHECK_EQ_INT(r->counters[1], 3);
	CHECK_EQ_INT(r->ntracks, 7);
	CHECK_EQ_INT(k.slices, 9);
	CHECK_EQ_INT(k.slices_in, 23);
	CHECK_EQ_INT(k.flows, 3);
	CHECK_EQ_INT(k.flows_in, 10);
	size_t outs = 0, ins = 0;
	for (size_t i = 0; i < r->nslices; i++) {
		outs += r->slices[i].nout;
		ins += r->slices[i].nin;
		for (size_t f = 0; f < r->slices[i].nout; f++)
			CHECK(r->slices[i].out[f] >= 4 && r->slices[i].out[f] <= 6);
		if (r->slices[i].nin)
			CHECK(r->slices[i].in >= 4 && r->slices[i].in <= 6);
	}
	CHECK_EQ_INT(outs, 3);
	CHECK_EQ_INT(ins, 3);
	CHECK(!leaks(r, 1));
	free_rec(r);
}

static void test_sink_redacts(void)
{
	const char *kern = "void fused_attention_kernel<float>(float*)";
	struct cuptrace_share_opts o = {.sz = sizeof(o), .redact_names = 1, .salt = "s1"};
	struct rec_sink *a = share(&o, NULL, kern, NULL);
	struct rec_sink *b = share(&o, NULL, kern, NULL);
	o.salt = "s2";
	struct rec_sink *c = share(&o, NULL, kern, NULL);
	CHECK(!leaks(a, 1));
	char want[64];
	share_token("s1", "kernel", kern, want, sizeof(want));
	CHECK_EQ_STR(a->slices[3].name, want);
	CHECK_EQ_STR(b->slices[3].name, want);
	CHECK(strcmp(c->slices[3].name, want));
	CHECK(!strncmp(c->slices[3].name, "kernel_", 7));
	share_token("s1", "nvtx", "step", want, sizeof(want));
	CHECK_EQ_STR(a->slices[0].name, want);
	/* Public vocabulary and numbers stay; other string arguments become tokens. */
	CHECK_EQ_STR(a->slices[2].name, "cudaLaunchKernel");
	CHECK_EQ_STR(a->slices[2].cat, "cuda_runtime");
	CHECK(!strncmp(a->slices[3].args, "grid=(4, 1, 1);registers=32;origin=arg_", 39));
	CHECK_EQ_STR(a->slices[3].cat, "kernel");
	/* An NVTX domain's name is the user's too. */
	const struct rslice *dom = &a->slices[22];
	CHECK(!strncmp(dom->cat, "domain_", 7));
	CHECK(!strncmp(dom->name, "nvtx_", 5));
	/* Tracks: the fixed words stay, the user's names become tokens. */
	CHECK_EQ_STR(tname(a, PROC), "train");
	CHECK_EQ_STR(tname(a, THR), "train"); /* the process's own name */
	CHECK(!strncmp(tname(a, WORKER), "thread_", 7));
	CHECK_EQ_STR(tname(a, GPU), "GPU 0: NVIDIA H200");
	CHECK_EQ_STR(tname(a, STREAM), "Stream 7");
	share_token("s1", "stream", "attention", want, sizeof(want));
	strcat(want, " (stream 13)");
	CHECK_EQ_STR(tname(a, NAMED), want);
	CHECK_EQ_STR(tname(b, NAMED), want);
	CHECK(strcmp(tname(c, NAMED), want));
	CHECK_EQ_STR(tname(a, CTR), "Device memory in use");
	free_rec(a);
	free_rec(b);
	free_rec(c);
}

static int file_has(const char *path, const char *needle)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return -1;
	static char buf[1 << 20];
	size_t n = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	return memmem(buf, n, needle, strlen(needle)) != NULL;
}

/* Private recording hands the writer "" as the host: the Perfetto writer must then write no
 * machine name, not this machine's (which it takes for NULL, the control). Read back by our
 * reader (SystemInfo.machine_name is its host name), and, where the name is long enough not to
 * occur by chance, looked for in the file's bytes. */
static void test_writer_private_host(void)
{
	char host[256] = "";
	if (gethostname(host, sizeof(host) - 1) || !*host) {
		printf("SKIP (part): no host name\n");
		return;
	}
	const char *d = getenv("CUPTRACE_TMP");
	char path[512];
	for (int priv = 0; priv < 2; priv++) {
		snprintf(path, sizeof(path), "%s/test_share.%d.%d.pftrace", d && *d ? d : "/tmp",
		         (int)getpid(), priv);
		struct cuptrace_sink *s = cuptrace_sink_open(path, "perfetto", "none");
		CHECK(s != NULL);
		if (!s)
			return;
		struct cuptrace_trace_info info = {.pid = 1,
		                                   .process_name = "p",
		                                   .hostname = priv ? "" : NULL,
		                                   .start_boottime_ns = 1000};
		struct cuptrace_track t = {
		    .uuid = 1, .kind = CUPTRACE_TRACK_PROCESS, .pid = 1, .name = "p"};
		CHECK_EQ_INT(s->ops->begin(s, &info), 0);
		CHECK_EQ_INT(s->ops->track(s, &t), 0);
		CHECK_EQ_INT(s->ops->finish(s), 0);
		cuptrace_sink_destroy(s);
		struct rec_sink *r = rec_sink_new();
		CHECK_EQ_INT(cuptrace_read_trace(path, &r->base, 0), 0);
		CHECK_EQ_STR(r->hostname, priv ? "" : host);
		cuptrace_sink_destroy(&r->base);
		if (strlen(host) >= 4)
			CHECK_EQ_INT(file_has(path, host), !priv);
		unlink(path);
	}
}

/* leaks() finds the secrets where nothing removed them: its silence above means something. */
static void test_leaks_control(void)
{
	struct rec_sink *r = rec_sink_new();
	replay(&r->base, "k");
	CHECK(leaks(r, 0));
	cuptrace_sink_destroy(&r->base);
}

TEST_MAIN({"sha256", test_sha256}, {"scrub_text", test_scrub_text}, {"tokens", test_tokens},
          {"policy", test_policy}, {"sink_scrubs", test_sink_scrubs},
          {"sink_window", test_sink_window}, {"sink_redacts", test_sink_redacts},
          {"writer_private_host", test_writer_private_host}, {"leaks_control", test_leaks_control})
