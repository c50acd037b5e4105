/* Packs a batch of spans into an OTLP ExportTraceServiceRequest with protobuf-c (otlp.h). The
 * message tree borrows every string and id; its nodes live in a few arrays made per batch. */
#include <stdlib.h>
#include <string.h>

#include "opentelemetry/proto/collector/trace/v1/trace_service.pb-c.h"
#include "format/otlp.h"

#ifndef CUPTRACE_VERSION
#define CUPTRACE_VERSION "0.1.0"
#endif

typedef Opentelemetry__Proto__Common__V1__KeyValue KeyValue;
typedef Opentelemetry__Proto__Common__V1__AnyValue AnyValue;
typedef Opentelemetry__Proto__Trace__V1__Span Span;
typedef Opentelemetry__Proto__Trace__V1__Span__Link Link;
typedef Opentelemetry__Proto__Trace__V1__ScopeSpans ScopeSpans;
typedef Opentelemetry__Proto__Trace__V1__ResourceSpans ResourceSpans;
typedef Opentelemetry__Proto__Resource__V1__Resource Resource;
typedef Opentelemetry__Proto__Collector__Trace__V1__ExportTraceServiceRequest Request;

/* Everything one batch's message tree is made of, in one allocation (layout()). */
struct arena {
	char *block;
	Span *spans;
	Span **span_ptrs;
	Link *links;
	Link **link_ptrs;
	KeyValue *kvs;
	KeyValue **kv_ptrs;
	AnyValue *vals;
	uint8_t (*ids)[3][8]; /* per span: span id, parent id, link's span id (big-endian) */
	ResourceSpans *rs;
	ResourceSpans **rs_ptrs;
	ScopeSpans *ss;
	ScopeSpans **ss_ptrs;
	Resource *res;
	size_t nkv;
};

/* Places the arrays for n spans, nk attributes and ng processes in a->block, or, while block
 * is NULL, only adds up the bytes they need. Returns that size. */
static size_t layout(struct arena *a, size_t n, size_t nk, size_t ng)
{
	size_t off = 0;
#define TAKE(field, count)                                                                         \
	do {                                                                                       \
		if (a->block)                                                                      \
			a->field = (void *)(a->block + off);                                       \
		off += ((count) * sizeof(*a->field) + 15) & ~(size_t)15;                           \
	} while (0)
	TAKE(spans, n);
	TAKE(span_ptrs, n);
	TAKE(links, n);
	TAKE(link_ptrs, n);
	TAKE(ids, n);
	TAKE(kvs, nk);
	TAKE(kv_ptrs, nk);
	TAKE(vals, nk);
	TAKE(rs, ng);
	TAKE(rs_ptrs, ng);
	TAKE(ss, ng);
	TAKE(ss_ptrs, ng);
	TAKE(res, ng);
#undef TAKE
	return off;
}

static void put_be64(uint8_t *p, uint64_t v)
{
	for (int i = 7; i >= 0; i--, v >>= 8)
		p[i] = (uint8_t)v;
}

/* Fills kvs from attrs; returns the KeyValue* array (a slice of the arena's). */
static KeyValue **fill_attrs(struct arena *a, const struct otlp_attr *attrs, size_t n)
{
	KeyValue **ptrs = a->kv_ptrs + a->nkv;
	for (size_t i = 0; i < n; i++) {
		size_t k = a->nkv++;
		AnyValue *v = &a->vals[k];
		KeyValue *kv = &a->kvs[k];
		*v = (AnyValue)OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__INIT;
		*kv = (KeyValue)OPENTELEMETRY__PROTO__COMMON__V1__KEY_VALUE__INIT;
		switch (attrs[i].type) {
		case OA_STR:
			v->value_case =
			    OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE;
			v->string_value = (char *)attrs[i].v.s;
			break;
		case OA_INT:
			v->value_case =
			    OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE;
			v->int_value = attrs[i].v.i;
			break;
		case OA_DOUBLE:
			v->value_case =
			    OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_DOUBLE_VALUE;
			v->double_value = attrs[i].v.d;
			break;
		case OA_BOOL:
			v->value_case =
			    OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_BOOL_VALUE;
			v->bool_value = attrs[i].v.b ? 1 : 0;
			break;
		}
		kv->key = (char *)attrs[i].key;
		kv->value = v;
		ptrs[i] = kv;
	}
	return ptrs;
}

uint8_t *cuptrace_otlp_pack(const struct otlp_span *spans, size_t n,
                            const struct otlp_resource *resources, size_t nres, size_t *len)
{
	size_t nkv = 0, ngroups = 0;
	for (size_t i = 0; i < n; i++) {
		nkv += spans[i].nattrs;
		if (!i || spans[i].pid != spans[i - 1].pid)
			ngroups++;
	}
	for (size_t r = 0; r < nres; r++)
		nkv += resources[r].nattrs;
	struct arena a = {0};
	uint8_t *out = NULL;
	a.block = malloc(layout(&a, n, nkv, ngroups) + 16);
	if (!a.block)
		return NULL;
	layout(&a, n, nkv, ngroups);

	Opentelemetry__Proto__Common__V1__InstrumentationScope scope =
	    OPENTELEMETRY__PROTO__COMMON__V1__INSTRUMENTATION_SCOPE__INIT;
	scope.name = "cuptrace";
	scope.version = CUPTRACE_VERSION;
	size_t g = 0;
	for (size_t i = 0; i < n; i++) {
		const struct otlp_span *s = &spans[i];
		if (!i || s->pid != spans[i - 1].pid) {
			/* A new process: its ResourceSpans, one ScopeSpans. */
			Resource *res = &a.res[g];
			*res = (Resource)OPENTELEMETRY__PROTO__RESOURCE__V1__RESOURCE__INIT;
			for (size_t r = 0; r < nres; r++)
				if (resources[r].pid == s->pid) {
					res->attributes =
					    fill_attrs(&a, resources[r].attrs, resources[r].nattrs);
					res->n_attributes = resources[r].nattrs;
					break;
				}
			ScopeSpans *ss = &a.ss[g];
			*ss = (ScopeSpans)OPENTELEMETRY__PROTO__TRACE__V1__SCOPE_SPANS__INIT;
			ss->scope = &scope;
			ss->spans = &a.span_ptrs[i];
			a.ss_ptrs[g] = ss;
			ResourceSpans *rs = &a.rs[g];
			*rs = (ResourceSpans)OPENTELEMETRY__PROTO__TRACE__V1__RESOURCE_SPANS__INIT;
			rs->resource = res;
			rs->n_scope_spans = 1;
			rs->scope_spans = &a.ss_ptrs[g];
			a.rs_ptrs[g] = rs;
			g++;
		}
		a.ss[g - 1].n_spans++;
		Span *sp = &a.spans[i];
		*sp = (Span)OPENTELEMETRY__PROTO__TRACE__V1__SPAN__INIT;
		put_be64(a.ids[i][0], s->span_id);
		sp->trace_id = (ProtobufCBinaryData){16, (uint8_t *)s->trace_id};
		sp->span_id = (ProtobufCBinaryData){8, a.ids[i][0]};
		if (s->parent_id) {
			put_be64(a.ids[i][1], s->parent_id);
			sp->parent_span_id = (ProtobufCBinaryData){8, a.ids[i][1]};
		}
		sp->flags = 0x01; /* W3C sampled */
		sp->name = (char *)(s->name && *s->name ? s->name : "(unnamed)");
		sp->kind = OPENTELEMETRY__PROTO__TRACE__V1__SPAN__SPAN_KIND__SPAN_KIND_INTERNAL;
		sp->start_time_unix_nano = (uint64_t)s->start_unix;
		sp->end_time_unix_nano = (uint64_t)s->end_unix;
		sp->attributes = fill_attrs(&a, s->attrs, s->nattrs);
		sp->n_attributes = s->nattrs;
		if (s->link_span) {
			Link *l = &a.links[i];
			*l = (Link)OPENTELEMETRY__PROTO__TRACE__V1__SPAN__LINK__INIT;
			put_be64(a.ids[i][2], s->link_span);
			l->trace_id = (ProtobufCBinaryData){16, (uint8_t *)s->link_trace};
			l->span_id = (ProtobufCBinaryData){8, a.ids[i][2]};
			l->flags = 0x01;
			a.link_ptrs[i] = l;
			sp->links = &a.link_ptrs[i];
			sp->n_links = 1;
		}
		a.span_ptrs[i] = sp;
	}
	Request req =
	    OPENTELEMETRY__PROTO__COLLECTOR__TRACE__V1__EXPORT_TRACE_SERVICE_REQUEST__INIT;
	req.n_resource_spans = g;
	req.resource_spans = a.rs_ptrs;
	size_t sz =
	    opentelemetry__proto__collector__trace__v1__export_trace_service_request__get_packed_size(
	        &req);
	out = malloc(sz ? sz : 1);
	if (out)
		*len =
		    opentelemetry__proto__collector__trace__v1__export_trace_service_request__pack(
		        &req, out);
	free(a.block);
	return out;
}
