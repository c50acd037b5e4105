/* The command line's outputs and inputs: what every writing command checks before it opens
 * anything (an output that is an input is refused), the output written aside and renamed into
 * place (output/outfile.h), and '-' for standard input and output. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cmd.h"
#include "format/formats.h"
#include "output/outfile.h"

int cmd_out_begin(struct cuptrace_outfile *of, const char *cmd, const char *out,
                  const char *const *inputs, size_t nin)
{
	int i = cuptrace_output_is_input(out, inputs, nin);
	if (i >= 0) {
		if (strcmp(out, inputs[i]))
			fprintf(stderr,
			        "cuptrace %s: the output %s is the input %s (the same file): give "
			        "another output name; nothing was written\n",
			        cmd, out, inputs[i]);
		else
			fprintf(stderr,
			        "cuptrace %s: the output %s is also an input: give another output "
			        "name; nothing was written\n",
			        cmd, out);
		return EXIT_USAGE;
	}
	int r = cuptrace_outfile_begin(of, out);
	if (r) {
		fprintf(stderr, "cuptrace %s: cannot write %s: %s\n", cmd, out, strerror(-r));
		return EXIT_FAIL;
	}
	return 0;
}

int cmd_out_end(struct cuptrace_outfile *of, const char *cmd, int ok)
{
	if (!ok) {
		cuptrace_outfile_abort(of);
		return EXIT_FAIL;
	}
	int r = cuptrace_outfile_commit(of);
	if (r) {
		fprintf(stderr, "cuptrace %s: cannot put %s in place: %s; it is as it was\n", cmd,
		        of->target, strerror(-r));
		return EXIT_FAIL;
	}
	return 0;
}

struct cuptrace_sink *cmd_sink_open(struct cuptrace_outfile *of, const char *cmd, const char *out,
                                    const char *format, const char *compress, int level,
                                    const char *const *inputs, size_t nin, int *status)
{
	char why[512];
	if (!cuptrace_out_kind(out, format, CUPTRACE_OUT_PERFETTO | CUPTRACE_OUT_CHROME, why,
	                       sizeof(why))) {
		fprintf(stderr, "cuptrace %s: %s\n", cmd, why);
		*status = EXIT_USAGE;
		return NULL;
	}
	if ((*status = cmd_out_begin(of, cmd, out, inputs, nin)))
		return NULL;
	struct cuptrace_sink *sink = cuptrace_sink_open_as(out, of->tmp, format, compress, level);
	if (!sink) {
		int e = errno;
		fprintf(stderr, "cuptrace %s: cannot write %s: %s\n", cmd, out, strerror(e));
		cuptrace_outfile_abort(of);
		*status = e == EINVAL ? EXIT_USAGE : EXIT_FAIL;
	}
	return sink;
}

int cmd_input(const char *cmd, const char *path, const char *twice)
{
	if (!strcmp(path, "-")) {
		if (!twice)
			return 0;
		fprintf(stderr,
		        "cuptrace %s: '-' (standard input) cannot be used here: %s; save it to a "
		        "file first\n",
		        cmd, twice);
		return EXIT_USAGE;
	}
	if (access(path, R_OK)) {
		fprintf(stderr, "cuptrace %s: cannot read %s: %s\n", cmd, path, strerror(errno));
		return EXIT_FAIL;
	}
	return 0;
}

/* An interrupted command leaves no temporary file behind, then dies of its signal as it would
 * have. Only the command line installs this; the injected library never does. */
static void on_signal(int sig)
{
	cuptrace_outfile_abort_all();
	signal(sig, SIG_DFL);
	raise(sig);
}

void cmd_out_signals(void)
{
	static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
		struct sigaction sa, old;
		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = on_signal;
		sigemptyset(&sa.sa_mask);
		/* A signal the shell ignored (nohup, a background job) stays ignored. */
		if (!sigaction(sigs[i], NULL, &old) && old.sa_handler == SIG_IGN)
			continue;
		sigaction(sigs[i], &sa, NULL);
	}
}
