/* Step names: a family of numbered ranges ("ProfilerStep#551" as torch.profiler writes them,
 * "step 0", "iter 12", "Step#4") is one name with a number after it. Used by analyze (its step
 * sources), diff --per and share --window, so that a family name matches its numbered ranges and
 * a full numbered name matches itself. Used by src/why and src/compare. */
#ifndef CUPTRACE_NAMES_STEP_NAME_H
#define CUPTRACE_NAMES_STEP_NAME_H

#include <stddef.h>
#include <stdint.h>

/* 1 if name is want, or want followed by separators (' ', '#', '_', '-', ':', '=', '.') and one
 * or more digits, or by the digits straight away ("ProfilerStep" matches "ProfilerStep#7",
 * "step" matches "step 3" and "step3"; "ProfilerStep#7" only itself; "step" not "steps"). */
int cuptrace_step_name_matches(const char *name, const char *want);

/* Whether name is a numbered family member for analyze's automatic choice: a prefix holding a
 * letter, at least one separator, then only digits ("step 0", "ProfilerStep#3", "iter_12").
 * Digits glued to a word are not ("MmBackward0", "layer3": PyTorch's autograd nodes and module
 * names). On 1, *prefix_len is the prefix without its separators and *number the number (up to
 * 18 digits). */
int cuptrace_step_family(const char *name, size_t *prefix_len, int64_t *number);

#endif
