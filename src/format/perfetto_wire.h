/* Numbers of the Perfetto trace format that the writer (src/format) and the reader (src/read)
 * both use: builtin clock ids, sequence flags, TrackEvent types and the interning tables we use.
 * Values only, no code: neither side includes the other's header
 * (shared/reference/perfetto-format.md gives the sources). */
#ifndef CUPTRACE_FORMAT_PERFETTO_WIRE_H
#define CUPTRACE_FORMAT_PERFETTO_WIRE_H

/* BuiltinClock ids. */
#define CLOCK_REALTIME_ID 1
#define CLOCK_BOOTTIME_ID 6

/* TracePacket.SequenceFlags. */
#define SEQ_CLEARED 1 /* SEQ_INCREMENTAL_STATE_CLEARED */
#define SEQ_NEEDS   2 /* SEQ_NEEDS_INCREMENTAL_STATE */

/* TrackEvent.Type. */
enum { TE_BEGIN = 1, TE_END = 2, TE_INSTANT = 3, TE_COUNTER = 4 };

/* The InternedData tables cuptrace writes, per sequence: event categories, event names, debug
 * annotation names and debug annotation string values. */
enum { IT_NAME, IT_CAT, IT_KEY, IT_VAL, IT_N };

#endif
