/* cuptrace top's screen (top_screen.c): one refresh as text lines, fitted to a width and a
 * height. Threading: the caller's one thread. */
#ifndef CUPTRACE_TOP_SCREEN_H
#define CUPTRACE_TOP_SCREEN_H

#include <stdio.h>

#include "top/top.h"

enum top_view_kind {
	TOP_VIEW_KERNELS,
	TOP_VIEW_API,
	TOP_VIEW_STREAMS,
	TOP_VIEW_RANKS,
	TOP_VIEW_NCCL,
	TOP_NVIEWS
};

struct top_view {
	int width, height; /* the terminal's; 80x24 when not known */
	enum top_view_kind view;
	enum top_sort sort;
	int ansi; /* bold and reverse video; else plain text */
	int paused;
	int keys;           /* show the keys line (interactive) */
	double t_s;         /* seconds since top started (or of the replay) */
	const char *source; /* what is watched: "replay X", "pid N CMD" */
	const char *status; /* a line of news ("trace written to ..."), or NULL */
};

/* Writes at most height lines (each ends with '\n', none wider than width columns); with keys
 * on, exactly height, the keys on the last. */
void cuptrace_top_render(const struct cuptrace_top *t, const struct top_view *v, FILE *f);

#endif
