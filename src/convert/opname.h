/* PyTorch's NVTX op names ("aten::add, seq = 12, op_id = 345, sizes = [[2, 3], []]", as its
 * NVTX mode writes them) split into a clean name and arguments. Every op's name is unique
 * through its op_id, so left as it is each would be a new interned string and a slice name no
 * one can group by. Pure functions; no state. */
#ifndef CUPTRACE_CONVERT_OPNAME_H
#define CUPTRACE_CONVERT_OPNAME_H

#include <stddef.h>
#include <stdint.h>

struct cuptrace_opname {
	size_t name_len; /* the clean name is the first name_len bytes of the input */
	int has_seq, has_op_id;
	int64_t seq, op_id;
	/* Bracketed values, pointing into the input (not NUL-terminated). */
	const char *sizes, *input_op_ids;
	size_t sizes_len, input_op_ids_len;
};

/* Returns 1 and fills out when s is a name followed by PyTorch's ", key = value" suffixes
 * (seq, op_id, sizes, input_op_ids), each well formed; 0 otherwise (s is then an ordinary
 * name, to be used as it is). */
int cuptrace_opname_parse(const char *s, struct cuptrace_opname *out);

#endif
