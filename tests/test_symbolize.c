/* The libdw symbolizer (symbolize/symbolize.h) on programs this test compiles with cc -O0 -g: a
 * PIE executable, a shared library, stripped copies whose DWARF is in a separate file found by
 * build id and by .gnu_debuglink, and a build-id mismatch. The expected function, file and line
 * come from binutils (nm, addr2line, readelf), not from libdw. Skips without cc or libdw. */
#include "check.h"

#include "symbolize/symbolize.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[512];

static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int sh(const char *fmt, ...)
{
	char cmd[2048];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	return system(cmd);
}

/* The first line of a command's output, trimmed. */
static int out1(char *buf, size_t n, const char *cmd)
{
	FILE *p = popen(cmd, "r");
	if (!p)
		return -1;
	char *ok = fgets(buf, (int)n, p);
	pclose(p);
	if (!ok)
		return -1;
	buf[strcspn(buf, "\r\n")] = 0;
	return 0;
}

static const char src[] = "int helper(int x)\n"    /* 1 */
                          "{\n"                    /* 2 */
                          "\tint y = x * 3;\n"     /* 3 */
                          "\treturn y + 1;\n"      /* 4 */
                          "}\n"                    /* 5 */
                          "int target_fn(int x)\n" /* 6 */
                          "{\n"                    /* 7 */
                          "\tint z = helper(x);\n" /* 8 */
                          "\treturn z * 2;\n"      /* 9 */
                          "}\n";                   /* 10 */

/* Where binutils says fn is: its ELF address (nm), a return address inside it (an address in
 * it + 1, as an unwinder gives), and the file:line addr2line gives for the call. */
static int expect(const char *elf, const char *fn, uint64_t *rel_pc, char *file, unsigned *line)
{
	char cmd[1024], buf[1024];
	snprintf(cmd, sizeof(cmd), "nm %s | awk '$3 == \"%s\" {print $1}'", elf, fn);
	if (out1(buf, sizeof(buf), cmd))
		return -1;
	uint64_t a = strtoull(buf, NULL, 16) + 8; /* inside the body: past the prologue */
	*rel_pc = a + 1;
	snprintf(cmd, sizeof(cmd), "addr2line -e %s 0x%llx", elf, (unsigned long long)a);
	if (out1(buf, sizeof(buf), cmd))
		return -1;
	char *c = strrchr(buf, ':');
	if (!c)
		return -1;
	*c = 0;
	*line = (unsigned)strtoul(c + 1, NULL, 10);
	buf[511] = 0;
	memcpy(file, buf, strlen(buf) + 1);
	return *line ? 0 : -1;
}

static int build_id(const char *elf, char *out)
{
	char cmd[1024];
	snprintf(cmd, sizeof(cmd), "readelf -n %s | awk '/Build ID/ {print $3}'", elf);
	return out1(out, 128, cmd) || !*out ? -1 : 0;
}

static void check_one(struct cuptrace_symbolizer *s, const char *module, const char *bid,
                      const char *elf, const char *fn)
{
	uint64_t pc = 0;
	char file[512] = "";
	unsigned line = 0;
	CHECK_EQ_INT(expect(elf, fn, &pc, file, &line), 0);
	struct cuptrace_symbol y;
	CHECK_EQ_INT(cuptrace_symbolize(s, module, bid, pc, &y), 0);
	CHECK_EQ_STR(y.function, fn);
	CHECK_EQ_STR(y.file, file);
	CHECK_EQ_INT(y.line, line);
	CHECK(line >= 3 && line <= 9);
}

static void test_symbolize(void)
{
	if (!cuptrace_symbolizer_available() || sh("command -v cc nm addr2line readelf objcopy "
	                                           "strip >/dev/null 2>&1")) {
		printf("skipped: no libdw in this build, or no cc/binutils\n");
		return;
	}
	snprintf(dir, sizeof(dir), "%s/symtest",
	         getenv("CUPTRACE_TMP") ? getenv("CUPTRACE_TMP") : "/tmp");
	char path[1024], bid[128], lbid[128];
	CHECK_EQ_INT(sh("rm -rf %s && mkdir -p %s/dbg %s/link", dir, dir, dir), 0);
	snprintf(path, sizeof(path), "%s/t.c", dir);
	FILE *f = fopen(path, "w");
	CHECK(f != NULL);
	if (!f)
		return;
	fputs(src, f);
	fprintf(f, "int main(int c, char **v) { return target_fn(c); }\n");
	fclose(f);
	snprintf(path, sizeof(path), "%s/lib.c", dir);
	f = fopen(path, "w");
	fputs(src, f);
	fclose(f);
	CHECK_EQ_INT(sh("cd %s && cc -O0 -g -fPIE -pie -Wl,--build-id t.c -o prog && "
	                "cc -O0 -g -fPIC -shared -Wl,--build-id lib.c -o libt.so",
	                dir),
	             0);
	char prog[600], lib[600];
	snprintf(prog, sizeof(prog), "%s/prog", dir);
	snprintf(lib, sizeof(lib), "%s/libt.so", dir);
	CHECK_EQ_INT(build_id(prog, bid), 0);
	CHECK_EQ_INT(build_id(lib, lbid), 0);

	struct cuptrace_symbolizer *s = cuptrace_symbolizer_new(NULL, 0);
	CHECK(s != NULL);
	check_one(s, prog, bid, prog, "target_fn");
	check_one(s, prog, bid, prog, "helper");
	check_one(s, lib, lbid, lib, "target_fn");
	check_one(s, lib, NULL, lib, "helper");
	/* A build id that is not the file's: nothing, said once. */
	struct cuptrace_symbol y;
	CHECK_EQ_INT(cuptrace_symbolize(s, prog, "deadbeef", 0x1000, &y), -ENOENT);
	CHECK(!y.function && !y.file);
	cuptrace_symbolizer_free(s);

	/* Stripped, the DWARF and symbols in a separate file under DIR/.build-id/xx/rest.debug. */
	CHECK_EQ_INT(sh("cd %s && objcopy --only-keep-debug prog prog.debug && strip --strip-all "
	                "prog -o prog.stripped && mkdir -p dbg/.build-id/%.2s && "
	                "cp prog.debug dbg/.build-id/%.2s/%s.debug",
	                dir, bid, bid, bid + 2),
	             0);
	char stripped[600], dbg[600];
	snprintf(stripped, sizeof(stripped), "%s/prog.stripped", dir);
	snprintf(dbg, sizeof(dbg), "%s/dbg", dir);
	const char *dirs[] = {dbg};
	s = cuptrace_symbolizer_new(dirs, 1);
	check_one(s, stripped, bid, prog, "target_fn");
	cuptrace_symbolizer_free(s);

	/* Stripped, with a .gnu_debuglink to a file in a symbol directory. */
	CHECK_EQ_INT(sh("cd %s && objcopy --add-gnu-debuglink=prog.debug prog.stripped "
	                "link/prog2 && mv prog.debug link/ && rm -rf dbg",
	                dir),
	             0);
	char linked[600], ldir[600];
	snprintf(linked, sizeof(linked), "%s/link/prog2", dir);
	snprintf(ldir, sizeof(ldir), "%s/link", dir);
	/* Its build id is the original's: the debug file is found by the link's name only. */
	const char *dirs2[] = {ldir};
	s = cuptrace_symbolizer_new(dirs2, 1);
	check_one(s, linked, bid, prog, "helper");
	cuptrace_symbolizer_free(s);

	/* The recorded file moved: found under its name in a symbol directory. */
	s = cuptrace_symbolizer_new(dirs2, 1);
	char gone[700];
	snprintf(gone, sizeof(gone), "/nonexistent/prog2");
	check_one(s, gone, bid, prog, "target_fn");
	cuptrace_symbolizer_free(s);
	sh("rm -rf %s", dir);
}

TEST_MAIN({"symbolize", test_symbolize})
