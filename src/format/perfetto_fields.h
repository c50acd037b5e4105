/* Field numbers and wire types of the Perfetto protos that cuptrace encodes or decodes by hand,
 * named once: the writer's hot-path encoder (perfetto_encode.c) builds its keys from them and the
 * reader (src/read/perfetto_*) matches decoded fields against them. Values only, no code.
 * Numbers are those of proto/perfetto_trace.proto and, for fields our subset leaves out (marked
 * "not in our proto"), of shared/reference/perfetto-format.md; test_perfetto checks the ones our
 * proto has against protobuf-c's descriptors. */
#ifndef CUPTRACE_FORMAT_PERFETTO_FIELDS_H
#define CUPTRACE_FORMAT_PERFETTO_FIELDS_H

/* Wire types: the low 3 bits of a field's key. */
enum { PF_WT_VARINT = 0, PF_WT_FIXED64 = 1, PF_WT_LEN = 2, PF_WT_FIXED32 = 5 };

/* A field's key, field << 3 | wire type, as varint bytes: PF_KEY0 is the first byte, PF_KEY1
 * the second (keys of fields 16 to 2047 take two bytes; below 16, PF_KEY0 is the whole key). */
#define PF_KEY(field, wt)  ((unsigned)(field) << 3 | (unsigned)(wt))
#define PF_KEY0(field, wt) ((PF_KEY(field, wt) & 0x7Fu) | (PF_KEY(field, wt) > 0x7Fu ? 0x80u : 0u))
#define PF_KEY1(field, wt) (PF_KEY(field, wt) >> 7)

/* Trace: a file is a run of these, each 0x0A varint(len) TracePacket. */
enum { PF_TRACE_PACKET = 1 };

/* TracePacket: header fields, then the payloads (one per packet, a oneof). */
enum {
	PF_PACKET_TIMESTAMP = 8,
	PF_PACKET_TIMESTAMP_CLOCK_ID = 58,
	PF_PACKET_SEQUENCE_ID = 10, /* trusted_packet_sequence_id */
	PF_PACKET_INTERNED_DATA = 12,
	PF_PACKET_SEQUENCE_FLAGS = 13,
	PF_PACKET_DEFAULTS = 59,                  /* trace_packet_defaults */
	PF_PACKET_INCREMENTAL_STATE_CLEARED = 41, /* deprecated; not in our proto */
	PF_PACKET_PREVIOUS_PACKET_DROPPED = 42,   /* not in our proto */
	PF_PACKET_CLOCK_SNAPSHOT = 6,
	PF_PACKET_TRACK_EVENT = 11,
	PF_PACKET_SYSTEM_INFO = 45,
	PF_PACKET_COMPRESSED_PACKETS = 50,
	PF_PACKET_TRACK_DESCRIPTOR = 60,
	PF_PACKET_TRACE_UUID = 89,
	PF_PACKET_TRACE_ATTRIBUTES = 126,
	PF_PACKET_PERF_SAMPLE = 66,   /* PerfSample (profile_packet.proto) */
	PF_PACKET_SERVICE_EVENT = 69, /* TracingServiceEvent */
};

/* TracePacketDefaults, and the TrackEventDefaults inside it. */
enum {
	PF_DEFAULTS_TIMESTAMP_CLOCK_ID = 58,
	PF_DEFAULTS_TRACK_EVENT_DEFAULTS = 11,
	PF_EVENT_DEFAULTS_TRACK_UUID = 11,
};

/* ClockSnapshot, and its Clock. */
enum {
	PF_SNAPSHOT_CLOCKS = 1,
	PF_SNAPSHOT_PRIMARY_TRACE_CLOCK = 2,
	PF_CLOCK_CLOCK_ID = 1,
	PF_CLOCK_TIMESTAMP = 2,
	PF_CLOCK_IS_INCREMENTAL = 3,
	PF_CLOCK_UNIT_MULTIPLIER_NS = 4,
};

/* SystemInfo, TraceUuid, TraceAttributes and its Attribute. */
enum {
	PF_SYSINFO_MACHINE_NAME = 17,
	PF_UUID_MSB = 1,
	PF_UUID_LSB = 2,
	PF_ATTRIBUTES_ATTRIBUTE = 1,
	PF_ATTRIBUTE_KEY = 1,
	PF_ATTRIBUTE_LONG_VALUE = 2,
	PF_ATTRIBUTE_STRING_VALUE = 3,
};

/* TrackDescriptor, and the process, thread and counter descriptors inside it. */
enum {
	PF_TRACK_UUID = 1,
	PF_TRACK_NAME = 2,
	PF_TRACK_PROCESS = 3,
	PF_TRACK_THREAD = 4,
	PF_TRACK_PARENT_UUID = 5,
	PF_TRACK_COUNTER = 8,
	PF_TRACK_STATIC_NAME = 10, /* not in our proto */
	PF_TRACK_CHILD_ORDERING = 11,
	PF_TRACK_SIBLING_ORDER_RANK = 12,
	PF_TRACK_ATRACE_NAME = 13, /* not in our proto */
	PF_TRACK_DESCRIPTION = 14,
	PF_PROCESS_PID = 1,
	PF_PROCESS_CMDLINE = 2,
	PF_PROCESS_PROCESS_NAME = 6,
	PF_PROCESS_LABELS = 8,      /* process_labels: not written (the UI's header) */
	PF_SERVICE_ALL_STARTED = 1, /* TracingServiceEvent.all_data_sources_started */
	PF_THREAD_PID = 1,
	PF_THREAD_TID = 2,
	PF_THREAD_THREAD_NAME = 5,
	PF_COUNTER_UNIT = 3,
};

/* TrackEvent. */
enum {
	PF_EVENT_CATEGORY_IIDS = 3,
	PF_EVENT_DEBUG_ANNOTATIONS = 4,
	PF_EVENT_TYPE = 9,
	PF_EVENT_NAME_IID = 10,
	PF_EVENT_TRACK_UUID = 11,
	PF_EVENT_CATEGORIES = 22,
	PF_EVENT_NAME = 23,
	PF_EVENT_COUNTER_VALUE = 30,
	PF_EVENT_FLOW_IDS_OLD = 36,             /* deprecated varints; not in our proto */
	PF_EVENT_TERMINATING_FLOW_IDS_OLD = 42, /* deprecated varints; not in our proto */
	PF_EVENT_DOUBLE_COUNTER_VALUE = 44,
	PF_EVENT_FLOW_IDS = 47,
	PF_EVENT_TERMINATING_FLOW_IDS = 48,
	PF_EVENT_CORRELATION_ID = 52,
	PF_EVENT_CALLSTACK = 55,     /* InlineCallstack */
	PF_EVENT_CALLSTACK_IID = 56, /* -> InternedData.callstacks */
};

/* InlineCallstack, and its Frame. */
enum {
	PF_INLINE_CALLSTACK_FRAMES = 1,
	PF_INLINE_FRAME_FUNCTION_NAME = 1,
	PF_INLINE_FRAME_SOURCE_FILE = 2,
	PF_INLINE_FRAME_LINE_NUMBER = 3,
};

/* DebugAnnotation. */
enum {
	PF_ANNOTATION_NAME_IID = 1,
	PF_ANNOTATION_BOOL_VALUE = 2,
	PF_ANNOTATION_UINT_VALUE = 3,
	PF_ANNOTATION_INT_VALUE = 4,
	PF_ANNOTATION_DOUBLE_VALUE = 5,
	PF_ANNOTATION_STRING_VALUE = 6,
	PF_ANNOTATION_POINTER_VALUE = 7,
	PF_ANNOTATION_LEGACY_JSON_VALUE = 9,
	PF_ANNOTATION_NAME = 10,
	PF_ANNOTATION_DICT_ENTRIES = 11,
	PF_ANNOTATION_ARRAY_VALUES = 12,
	PF_ANNOTATION_STRING_VALUE_IID = 17,
};

/* InternedData, and its entries (EventCategory, EventName, DebugAnnotationName: iid and name;
 * InternedString: iid and str, the same numbers). */
enum {
	PF_INTERNED_EVENT_CATEGORIES = 1,
	PF_INTERNED_EVENT_NAMES = 2,
	PF_INTERNED_DEBUG_ANNOTATION_NAMES = 3,
	PF_INTERNED_DEBUG_ANNOTATION_STRING_VALUES = 29,
	PF_INTERNED_FUNCTION_NAMES = 5,
	PF_INTERNED_FRAMES = 6,
	PF_INTERNED_CALLSTACKS = 7,
	PF_INTERNED_BUILD_IDS = 16,
	PF_INTERNED_MAPPING_PATHS = 17,
	PF_INTERNED_SOURCE_PATHS = 18,
	PF_INTERNED_MAPPINGS = 19,
	PF_ENTRY_IID = 1,
	PF_ENTRY_NAME = 2, /* name, or InternedString's str */
};

/* The interned Callstack, Frame and Mapping (profile_common.proto). */
enum {
	PF_CALLSTACK_IID = 1,
	PF_CALLSTACK_FRAME_IDS = 2, /* outermost first */
	PF_FRAME_IID = 1,
	PF_FRAME_FUNCTION_NAME_ID = 2,
	PF_FRAME_MAPPING_ID = 3,
	PF_FRAME_REL_PC = 4,
	PF_FRAME_SOURCE_PATH_IID = 5,
	PF_FRAME_LINE_NUMBER = 6,
	PF_MAPPING_IID = 1,
	PF_MAPPING_BUILD_ID = 2,
	PF_MAPPING_START_OFFSET = 3,
	PF_MAPPING_START = 4,
	PF_MAPPING_END = 5,
	PF_MAPPING_LOAD_BIAS = 6,
	PF_MAPPING_PATH_STRING_IDS = 7,
};

/* PerfSample (profile_packet.proto): a CPU sample with its interned callstack. */
enum {
	PF_PERF_SAMPLE_CPU = 1,
	PF_PERF_SAMPLE_PID = 2,
	PF_PERF_SAMPLE_TID = 3,
	PF_PERF_SAMPLE_CALLSTACK_IID = 4,
	PF_PERF_SAMPLE_CPU_MODE = 5, /* Profiling.CpuMode */
	PF_CPU_MODE_USER = 2,
};

#endif
