/* Symbolization of native frames after the run, never in the traced process: a frame's module
 * and rel_pc (an ELF virtual address, format/event.h) -> function, source file and line, through
 * libdw (elfutils). Also a filter sink that fills in the native frames of every stack it passes
 * on (`cuptrace symbolize`, `convert`, and --group-by line).
 *
 * Where a module's file is looked for, first found wins: the recorded path if its build id
 * matches the recorded one (or either has none); then, in each symbol directory (--symbol-dir,
 * then CUPTRACE_SYMBOL_PATH's colon-separated list, then /usr/lib/debug), DIR/.build-id/xx/rest,
 * DIR/.build-id/xx/rest.debug and DIR/<base name of the module> with a matching build id. A
 * stripped file's DWARF comes from a separate debug file: by build id (the same directories),
 * by .gnu_debuglink (next to the file, in its .debug/, in /usr/lib/debug/<its dir>, and in each
 * symbol directory). Frames' rel_pc are return addresses: the call is looked up at rel_pc - 1.
 *
 * Built without libdw's headers, or where libdw.so.1 does not load at run time (it is loaded with
 * dlopen on first use, never linked), a symbolizer knows nothing and says so once. Not thread-safe:
 * one owner. Every string it returns lives until cuptrace_symbolizer_free. */
#ifndef CUPTRACE_SYMBOLIZE_SYMBOLIZE_H
#define CUPTRACE_SYMBOLIZE_SYMBOLIZE_H

#include "format/event.h"

#include <stddef.h>
#include <stdint.h>

struct cuptrace_symbolizer;

/* dirs: the --symbol-dir list (copied); CUPTRACE_SYMBOL_PATH is read here. NULL on ENOMEM. */
struct cuptrace_symbolizer *cuptrace_symbolizer_new(const char *const *dirs, size_t ndirs);
void cuptrace_symbolizer_free(struct cuptrace_symbolizer *s);
/* 1 if the build has libdw's headers and libdw.so.1 loads (the first call tries). */
int cuptrace_symbolizer_available(void);

struct cuptrace_symbol {
	const char *function; /* demangled where it was a C++ name; NULL if unknown */
	const char *file;     /* NULL if unknown */
	uint32_t line;        /* 0 if unknown */
};

/* Looks rel_pc up in the module (path, build id as lowercase hex or NULL). 0 if it found
 * anything, -ENOENT if not (the module's file not found, or a build-id mismatch: reported once
 * per module on stderr). */
int cuptrace_symbolize(struct cuptrace_symbolizer *s, const char *module, const char *build_id,
                       uint64_t rel_pc, struct cuptrace_symbol *out);

/* A sink that passes everything on to inner (owned; destroyed with it), with each stack's native
 * frames that lack a function or a file filled in by s (borrowed: it must outlive the sink). */
struct cuptrace_sink *cuptrace_symbolize_sink_new(struct cuptrace_symbolizer *s,
                                                  struct cuptrace_sink *inner);

#endif
