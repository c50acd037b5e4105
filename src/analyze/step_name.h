/* Step names as torch.profiler writes them: "ProfilerStep#551", the number after '#'. Used by
 * diff --per and share --window so that a family name matches its numbered ranges and a full
 * numbered name matches itself. Private to src/analyze and tools. */
#ifndef CUPTRACE_ANALYZE_STEP_NAME_H
#define CUPTRACE_ANALYZE_STEP_NAME_H

/* 1 if name is want, or want followed by '#' and one or more digits ("ProfilerStep" matches
 * "ProfilerStep#7"; "ProfilerStep#7" only itself). */
int cuptrace_step_name_matches(const char *name, const char *want);

#endif
