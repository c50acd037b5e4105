/* The --otlp options of record and convert (otlp_cli.h). */
#include "otlp_cli.h"

#include <stdio.h>
#include <stdlib.h>

#include "common/options.h"
#include "format/otlp.h"
#include "output/otlp_http.h"

int otlp_cli_check(enum cli_cmd cmd, const char *const *given)
{
	const char *url = given[CUPTRACE_SET_OTLP_URL];
	for (int i = CUPTRACE_SET_OTLP_SERVICE; i <= CUPTRACE_SET_OTLP_TIMEOUT; i++) {
		if (given[i] && !url) {
			fprintf(stderr, "cuptrace %s: --%s needs --otlp URL\n",
			        cli_commands[cmd].name,
			        cuptrace_setting_get((enum cuptrace_setting_id)i)->option);
			return -1;
		}
	}
	char *full = url ? cuptrace_otlp_http_full_url(url) : NULL;
	free(full);
	if (url && !full) {
		fprintf(stderr,
		        "cuptrace %s: bad --otlp URL '%s' (expected http://HOST:PORT or "
		        "https://HOST:PORT, optionally with a path)\n",
		        cli_commands[cmd].name, url);
		return -1;
	}
	return 0;
}

void otlp_cli_opts(const char *const *given, struct cuptrace_otlp_opts *o)
{
	for (int i = CUPTRACE_SET_OTLP_URL; i <= CUPTRACE_SET_OTLP_TIMEOUT; i++) {
		enum cuptrace_setting_id id = (enum cuptrace_setting_id)i;
		struct cuptrace_setting_value v;
		char err[8];
		if (given[i] && !cuptrace_setting_parse(cuptrace_setting_get(id), given[i],
		                                        CUPTRACE_FROM_OPTION, &v, err, sizeof(err)))
			cuptrace_otlp_opts_set(o, id, &v);
	}
}
