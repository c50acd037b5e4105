/* What a trace may say about who made it, where: the metadata policy shared by `cuptrace share`
 * (src/rewrite/share.c) and private recording (CUPTRACE_PRIVATE=1, `record --private`,
 * src/inject/collect.c), and the command-line and path helpers both use. No state. */
#ifndef CUPTRACE_COMMON_PRIVACY_H
#define CUPTRACE_COMMON_PRIVACY_H

#include <stddef.h>

enum cuptrace_meta_policy {
	CUPTRACE_META_SCRUB = 0, /* any other key: absolute paths in it reduced to base names */
	CUPTRACE_META_DROP,      /* names the machine or its owner: hostname, boot_id, gpuN_uuid */
	CUPTRACE_META_PROGRAM,   /* a command line: only its program's base name stays */
	CUPTRACE_META_TIME,      /* wall-clock or boot time: share drops it unless --keep-time */
};

enum cuptrace_meta_policy cuptrace_meta_policy(const char *key);

/* What an identity key names, by rule rather than by list: the key (its base key) is split into
 * words at '_', '-', '.', ' ' and lower-to-upper case changes; a word "host", "hostname",
 * "machine", "nodename" names a host ("host_name", "hostName", "machine_id"), "user",
 * "username", "login", "owner", "email" a person ("user", "tw_user", "job_user"), "home",
 * "homedir", "cwd", "pwd" a place of the file system. CUPTRACE_META_DROP keys are these and
 * boot_id and gpuN_uuid. */
enum cuptrace_identity {
	CUPTRACE_ID_NONE = 0,
	CUPTRACE_ID_HOST,
	CUPTRACE_ID_USER,
	CUPTRACE_ID_PLACE,
};
enum cuptrace_identity cuptrace_meta_identity(const char *key);
/* The key a metadata entry has in the trace it came from: a merged trace keeps each input's as
 * "<label>: <key>" (merge/merge.h). NULL for NULL. */
const char *cuptrace_meta_base_key(const char *key);
/* 1 if key (its base key) is a GPU's UUID, "gpuN_uuid": a serial number of the machine. */
int cuptrace_meta_is_gpu_uuid(const char *key);

/* CUPTRACE_PRIVATE is set to anything but "" or "0". */
int cuptrace_private_env(void);

/* Private recording's metadata, in place: n entries of stride bytes, each with a NUL-terminated
 * key at key_off and value at val_off (val_cap bytes). Drops the CUPTRACE_META_DROP keys,
 * shortens command lines to their programs; keeps the rest (times too). Returns the entries
 * left, in their order. */
size_t cuptrace_private_filter(void *entries, size_t n, size_t stride, size_t key_off,
                               size_t val_off, size_t val_cap);

/* The base name of cmdline's first word (words split at blanks, as collect joins argv) into
 * buf (truncated to cap, cap >= 1). Returns the number of words after it: the arguments left
 * out. */
size_t cuptrace_cmdline_program(const char *cmdline, char *buf, size_t cap);

/* The last non-empty component of path[0..len) ('/' or '\\' separated); *n gets its length.
 * A path of separators only gives itself. */
const char *cuptrace_path_base(const char *path, size_t len, size_t *n);

#endif
