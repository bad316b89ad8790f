#include "sfl/wire/msg.h"

#include <assert.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <protobuf-c/protobuf-c.h>
#include <sodium.h>

#include "sfl/core/alloc.h"
#include "sfl/v1/admin.pb-c.h"
#include "sfl/v1/common.pb-c.h"
#include "sfl/v1/coordinator.pb-c.h"

/* The only file that knows protobuf-c's generated names (STYLE rule 1).
 *
 * Every message goes through the same three steps. Packing: check the sfl
 * struct (check_*), point a stack-built generated struct at its fields
 * (borrowing, no copies except encoded vectors), pack once into an exact
 * buffer. Unpacking: size check, protobuf-c unpack through the sfl allocator,
 * copy into the sfl struct with wire-only checks (byte lengths, string
 * lengths, counts), then the same check_* as packing, with the codes a peer
 * deserves (SFL_EPARSE / SFL_EUNSUP instead of SFL_EINVAL). One set of
 * checks for both directions keeps "what we send" and "what we accept"
 * identical. Those steps exist once, in pack_msg and unpack_msg; each
 * message only supplies a msg_type_t: its check, put (sfl -> generated
 * struct) and get (generated struct -> sfl, with the checks).
 *
 * Unknown fields are ignored, never an error: that is what lets a newer peer
 * add fields (docs/protocol.md, versioning). */

/* ---- allocator (STYLE rule 7) ------------------------------------------ */

/* protobuf-c returns NULL both for malformed input and for a failed
 * allocation; the flag tells them apart so callers get SFL_ENOMEM. */
typedef struct pbctx {
    int failed;
} pbctx_t;

static void *pb_alloc(void *data, size_t size)
{
    void *p = sfl__malloc(size);

    if (p == NULL && data != NULL)
        ((pbctx_t *)data)->failed = 1;
    return p;
}

static void pb_free(void *data, void *p)
{
    (void)data;
    sfl__free(p);
}

/* Freeing never allocates, so one shared allocator without context is safe
 * across threads. */
static ProtobufCAllocator free_alloc = {pb_alloc, pb_free, NULL};

static void free_pb(void *m)
{
    if (m != NULL)
        protobuf_c_message_free_unpacked((ProtobufCMessage *)m, &free_alloc);
}

/* ---- errors -------------------------------------------------------------- */

/* Which message is being handled and how its structural errors are coded:
 * SFL_EPARSE for bytes from a peer, SFL_EINVAL for a struct from our own
 * program. Unpacking also carries what the checks compare against. */
typedef struct chk {
    const char *msg;
    int bad;
    const sfl_msg_limits_t *lim; /* unpack: the limits in force */
    uint32_t dim;                /* unpack of a payload: the task model's dimension */
} chk_t;

#define ENUM_CODE(c) ((c)->bad == SFL_EPARSE ? SFL_EUNSUP : SFL_EINVAL)

static int fail(const chk_t *c, int code, const char *fmt, ...) SFL_PRINTF(3, 4);

static int fail(const chk_t *c, int code, const char *fmt, ...)
{
    char what[400];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    return sfl__fail(code, "%s: %s", c->msg, what);
}

/* Prefixes the detail a lower layer (spcodec, vec) left. The detail lives in
 * the buffer sfl__fail writes to, hence the copy. */
static int wrap(const chk_t *c, int rc, const char *field)
{
    char inner[400];

    snprintf(inner, sizeof(inner), "%s", sfl_last_error());
    return sfl__fail(rc, "%s: %s: %s", c->msg, field, inner);
}

/* ---- limits, buffers ------------------------------------------------------ */

void sfl_msg_limits_default(sfl_msg_limits_t *lim)
{
    lim->max_message = (size_t)64 << 20;
    lim->max_dim = 1u << 26;
    lim->max_nnz = 1u << 23;
    lim->max_items = 10000;
}

void sfl_msg_buf_free(uint8_t *buf)
{
    sfl__free(buf);
}

static const sfl_msg_limits_t *limits(const sfl_msg_limits_t *lim, sfl_msg_limits_t *tmp)
{
    if (lim != NULL)
        return lim;
    sfl_msg_limits_default(tmp);
    return tmp;
}

static size_t control_max(const sfl_msg_limits_t *lim)
{
    return lim->max_message < SFL_MSG_CONTROL_MAX ? lim->max_message : SFL_MSG_CONTROL_MAX;
}

/* ---- pack / unpack ----------------------------------------------------- */

/* Packs m into one exact, owned buffer. */
static int pack(const ProtobufCMessage *m, const chk_t *c, uint8_t **out, size_t *len)
{
    size_t n = protobuf_c_message_get_packed_size(m);
    uint8_t *b = sfl__malloc(n);

    if (b == NULL)
        return fail(c, SFL_ENOMEM, "no memory for %zu packed bytes", n);
    size_t w = protobuf_c_message_pack(m, b);

    assert(w == n);
    (void)w;
    *out = b;
    *len = n;
    return 0;
}

static void clear_out(uint8_t **out, size_t *len)
{
    assert(out != NULL && len != NULL);
    *out = NULL;
    *len = 0;
}

static int scan_varint(const uint8_t *b, size_t len, size_t *o, uint64_t *v);

/* protobuf-c gives a string as a C string, so a NUL inside one would
 * silently cut it ("job\0evil" -> "job"): refuse the message instead. Walks
 * the wire with the descriptor, into nested messages; framing errors are
 * left to protobuf-c. */
static int strings_whole(const chk_t *c, const ProtobufCMessageDescriptor *d, const uint8_t *b,
                         size_t len, int depth)
{
    size_t o = 0;

    while (o < len && depth < 16) {
        uint64_t key, n;
        const ProtobufCFieldDescriptor *f;

        scan_varint(b, len, &o, &key);
        switch (key & 7) {
        case 0:
            scan_varint(b, len, &o, &n);
            continue;
        case 1:
            o += 8;
            continue;
        case 5:
            o += 4;
            continue;
        case 2:
            break;
        default:
            return 0;
        }
        scan_varint(b, len, &o, &n);
        if (n > len - o || key >> 3 > INT32_MAX)
            return 0;
        f = protobuf_c_message_descriptor_get_field(d, (unsigned)(key >> 3));
        if (f != NULL && f->type == PROTOBUF_C_TYPE_STRING && memchr(b + o, 0, n) != NULL)
            return fail(c, c->bad, "%s.%s has a NUL byte", d->short_name, f->name);
        if (f != NULL && f->type == PROTOBUF_C_TYPE_MESSAGE) {
            int rc = strings_whole(c, f->descriptor, b + o, n, depth + 1);

            if (rc < 0)
                return rc;
        }
        o += n;
    }
    return 0;
}

/* The size check comes first: protobuf-c allocates in proportion to the
 * input, so nothing bigger than the caller's limit may reach it. Returns the
 * unpacked message (free with free_pb) or NULL with *rc set. */
static void *unpack(const ProtobufCMessageDescriptor *d, const chk_t *c, const uint8_t *buf,
                    size_t len, size_t max, int *rc)
{
    static const uint8_t empty[1];
    pbctx_t ctx = {0};
    ProtobufCAllocator a = {pb_alloc, pb_free, &ctx};
    ProtobufCMessage *m;

    *rc = 0;
    if (buf == NULL && len > 0) {
        *rc = fail(c, SFL_EINVAL, "NULL buffer");
        return NULL;
    }
    if (len > max) {
        *rc = fail(c, SFL_ELIMIT, "message of %zu bytes exceeds the limit of %zu", len, max);
        return NULL;
    }
    if (len > 0 && (*rc = strings_whole(c, d, buf, len, 0)) < 0)
        return NULL;
    m = protobuf_c_message_unpack(d, &a, len, buf != NULL ? buf : empty);
    if (m == NULL) {
        if (ctx.failed)
            *rc = fail(c, SFL_ENOMEM, "no memory to unpack %zu bytes", len);
        else
            *rc = fail(c, SFL_EPARSE, "%zu bytes are not a valid %s", len, d->name);
    }
    return m;
}

/* Counts the top-level occurrences of field `num` without allocating, so a
 * list reply of millions of tiny entries is refused before protobuf-c
 * allocates a struct for each. Malformed framing is SFL_EPARSE. */
static int scan_varint(const uint8_t *b, size_t len, size_t *o, uint64_t *v)
{
    *v = 0;
    for (unsigned s = 0; s < 64 && *o < len; s += 7) {
        uint8_t x = b[(*o)++];

        *v |= (uint64_t)(x & 0x7f) << s;
        if (!(x & 0x80))
            return 0;
    }
    return -1;
}

static int count_field(const chk_t *c, const uint8_t *b, size_t len, uint32_t num,
                       size_t *count)
{
    size_t o = 0;
    uint64_t key, n;

    *count = 0;
    while (o < len) {
        size_t at = o;

        if (scan_varint(b, len, &o, &key) < 0)
            return fail(c, SFL_EPARSE, "bad field key at byte %zu", at);
        if ((key >> 3) == num)
            (*count)++;
        switch (key & 7) {
        case 0: /* varint */
            if (scan_varint(b, len, &o, &n) < 0)
                return fail(c, SFL_EPARSE, "bad varint at byte %zu", at);
            n = 0;
            break;
        case 1: /* fixed64 */
            n = 8;
            break;
        case 2: /* length-delimited */
            if (scan_varint(b, len, &o, &n) < 0)
                return fail(c, SFL_EPARSE, "bad length at byte %zu", at);
            break;
        case 5: /* fixed32 */
            n = 4;
            break;
        default:
            return fail(c, SFL_EPARSE, "unsupported wire type %u at byte %zu",
                        (unsigned)(key & 7), at);
        }
        if (n > len - o)
            return fail(c, SFL_EPARSE, "field at byte %zu runs past the end", at);
        o += (size_t)n;
    }
    return 0;
}

/* ---- field helpers: wire -> sfl ------------------------------------------ */

static int get_fixed(const chk_t *c, const char *field, const ProtobufCBinaryData *b,
                     uint8_t *dst, size_t n)
{
    if (b->len != n)
        return fail(c, c->bad, "%s is %zu bytes, want %zu", field, b->len, n);
    memcpy(dst, b->data, n);
    return 0;
}

static int get_str(const chk_t *c, const char *field, const char *src, char *dst, size_t cap)
{
    size_t n = src != NULL ? strlen(src) : 0;

    if (n >= cap)
        return fail(c, c->bad, "%s is %zu characters, at most %zu", field, n, cap - 1);
    if (n > 0)
        memcpy(dst, src, n);
    dst[n] = '\0';
    return 0;
}

static int get_tags(const chk_t *c, const char *field, char *const *src, size_t n,
                    sfl_tags_t *t)
{
    if (n > SFL_MSG_MAX_TAGS)
        return fail(c, SFL_ELIMIT, "%s has %zu tags, at most %d", field, n, SFL_MSG_MAX_TAGS);
    t->n = (uint32_t)n;
    for (size_t i = 0; i < n; i++) {
        int rc = get_str(c, field, src[i], t->tag[i], SFL_MSG_TAG_LEN);

        if (rc < 0)
            return rc;
    }
    return 0;
}

static int get_labels(const chk_t *c, const char *field, const double *src, size_t n,
                      uint32_t *nl, double *dst)
{
    if (n > SFL_MSG_MAX_LABELS)
        return fail(c, SFL_ELIMIT, "%s has %zu labels, at most %d", field, n,
                    SFL_MSG_MAX_LABELS);
    *nl = (uint32_t)n;
    if (n > 0)
        memcpy(dst, src, n * sizeof(*dst));
    return 0;
}

/* ValueEncoding numbers are spcodec's plus one (0 is UNSPECIFIED). */
static int get_enc(const chk_t *c, const char *field, int v, sfl_enc_t *out)
{
    if (v == SFL__V1__VALUE_ENCODING__VALUE_ENCODING_UNSPECIFIED)
        return fail(c, c->bad, "%s missing", field);
    if (v < 1 || v > 3)
        return fail(c, ENUM_CODE(c), "unknown %s %d", field, v);
    *out = (sfl_enc_t)(v - 1);
    return 0;
}

/* Names well formed and distinct, values finite, at most SFL_PARAMS_MAX;
 * whether the algorithm has them is sfl_algo_params_from_list's check. */
static int check_params(const chk_t *c, const sfl_param_list_t *p)
{
    if (p->n > SFL_PARAMS_MAX)
        return fail(c, SFL_ELIMIT, "params has %u values, at most %d", p->n, SFL_PARAMS_MAX);
    for (uint32_t i = 0; i < p->n; i++) {
        if (!sfl_param_name_ok(p->v[i].name))
            return fail(c, c->bad, "params: name %u is not 1-31 of [a-z0-9_] starting with "
                        "a letter", i + 1);
        for (uint32_t k = 0; k < i; k++)
            if (strcmp(p->v[k].name, p->v[i].name) == 0)
                return fail(c, c->bad, "params: '%s' given twice", p->v[i].name);
        if (!isfinite(p->v[i].value))
            return fail(c, SFL_ENUMERIC, "params.%s is not finite", p->v[i].name);
    }
    return 0;
}

static int get_params(const chk_t *c, const Sfl__V1__AlgorithmParams *p, sfl_param_list_t *o)
{
    int rc;

    if (p == NULL)
        return fail(c, c->bad, "params missing");
    if (p->lr != 0 || p->tau != 0 || p->local_steps != 0 || p->batch != 0 || p->lambda != 0 ||
        p->mu != 0 || p->server_lr != 0 || p->l2_ball != 0 || p->inexact_steps != 0)
        return fail(c, SFL_EUNSUP, "params: fields 1-9 are retired (a job spec from an "
                    "older sfl); recreate the job");
    if (p->n_values > SFL_PARAMS_MAX)
        return fail(c, SFL_ELIMIT, "params has %zu values, at most %d", p->n_values,
                    SFL_PARAMS_MAX);
    memset(o, 0, sizeof(*o));
    o->n = (uint32_t)p->n_values;
    for (uint32_t i = 0; i < o->n; i++) {
        const Sfl__V1__Param *v = p->values[i];

        if ((rc = get_str(c, "params.name", v->name, o->v[i].name, SFL_PARAM_NAME_LEN)) < 0)
            return rc;
        o->v[i].value = v->value;
    }
    return check_params(c, o);
}

static int get_summary(const chk_t *c, const Sfl__V1__DatasetSummary *p,
                       sfl_dataset_summary_t *o)
{
    if (p == NULL)
        return fail(c, c->bad, "dataset missing");
    o->samples = p->samples;
    o->dimension = p->dimension;
    o->first_column = p->first_column;
    if (p->sample_ids_hash.len != 0) {
        int rc = get_fixed(c, "dataset.sample_ids_hash", &p->sample_ids_hash, o->ids_hash,
                           SFL_MSG_HASH_BYTES);

        if (rc < 0)
            return rc;
        o->has_ids = 1;
    }
    return get_labels(c, "dataset.labels", p->labels, p->n_labels, &o->nlabels, o->labels);
}

/* Codec bytes -> vector. The SparseVector's dim must agree with the dim
 * inside data; enc (optional) is the codec byte, which sits right after the
 * two minimal varints, and hash (optional) gets BLAKE2b-256 of data. */
static size_t varint_len(uint32_t v)
{
    size_t n = 1;

    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static int get_sparse(const chk_t *c, const char *field, const Sfl__V1__SparseVector *sv,
                      uint32_t max_dim, uint32_t max_nnz, sfl_spvec_t **out, sfl_enc_t *enc,
                      uint8_t *hash)
{
    sfl_spvec_t *v = NULL;
    int rc;

    *out = NULL;
    if (sv == NULL)
        return fail(c, c->bad, "%s missing", field);
    if (sv->dim > max_dim)
        return fail(c, SFL_ELIMIT, "%s.dim %u exceeds the limit of %u", field, sv->dim, max_dim);
    if (sv->data.len == 0)
        return fail(c, c->bad, "%s.data is empty", field);
    rc = sfl_spcodec_decode(sv->data.data, sv->data.len, max_dim, max_nnz, &v);
    if (rc < 0)
        return wrap(c, rc, field);
    if (v->dim != sv->dim) {
        rc = fail(c, SFL_EDIM, "%s.dim is %u but its data has dimension %u", field, sv->dim,
                  v->dim);
        sfl_spvec_free(v);
        return rc;
    }
    if (enc != NULL)
        *enc = (sfl_enc_t)sv->data.data[varint_len(v->dim) + varint_len(v->nnz)];
    if (hash != NULL)
        crypto_generichash(hash, SFL_MSG_HASH_BYTES, sv->data.data, sv->data.len, NULL, 0);
    *out = v;
    return 0;
}

/* ---- field helpers: sfl -> wire ------------------------------------------ */

/* protobuf-c's structs are not const-correct; packing only reads them. */
static ProtobufCBinaryData bin(const uint8_t *p, size_t n)
{
    ProtobufCBinaryData b = {n, (uint8_t *)(uintptr_t)p};

    return b;
}

static char *str(const char *s)
{
    return (char *)(uintptr_t)s;
}

static void put_tags(const sfl_tags_t *t, char **ptrs, size_t *n, char ***field)
{
    for (uint32_t i = 0; i < t->n; i++)
        ptrs[i] = str(t->tag[i]);
    *n = t->n;
    *field = ptrs;
}

static void put_summary(const sfl_dataset_summary_t *s, Sfl__V1__DatasetSummary *o)
{
    o->samples = s->samples;
    o->dimension = s->dimension;
    o->n_labels = s->nlabels;
    o->labels = (double *)(uintptr_t)s->labels;
    o->first_column = s->first_column;
    if (s->has_ids)
        o->sample_ids_hash = bin(s->ids_hash, SFL_MSG_HASH_BYTES);
}

/* Encodes v into sv; *data is owned by the caller (sfl__free). */
static int put_sparse(const chk_t *c, const char *field, const sfl_spvec_t *v, sfl_enc_t enc,
                      Sfl__V1__SparseVector *sv, uint8_t **data)
{
    size_t n, len;
    int rc;

    *data = NULL;
    if (v == NULL)
        return fail(c, c->bad, "%s missing", field);
    rc = sfl_spvec_validate(v);
    if (rc < 0)
        return wrap(c, rc, field);
    if (enc != SFL_ENC_F64 && enc != SFL_ENC_F32 && enc != SFL_ENC_Q8)
        return fail(c, SFL_EINVAL, "unknown %s encoding %d", field, (int)enc);
    n = sfl_spcodec_size(v, enc);
    *data = sfl__malloc(n);
    if (*data == NULL)
        return fail(c, SFL_ENOMEM, "no memory for %zu bytes of %s", n, field);
    rc = sfl_spcodec_encode(v, enc, *data, n, &len);
    if (rc < 0)
        return wrap(c, rc, field);
    sv->dim = v->dim;
    sv->data = bin(*data, len);
    return 0;
}

/* ---- checks shared by pack and unpack ----------------------------------- */

/* Printable ASCII only: text ends up in key=value logs and terminals, and
 * proto3 strings must be valid UTF-8 for other implementations. */
static int check_str(const chk_t *c, const char *field, const char *s, size_t cap,
                     int required)
{
    const char *end = memchr(s, '\0', cap);

    if (end == NULL)
        return fail(c, c->bad, "%s is not terminated within %zu bytes", field, cap);
    if (required && end == s)
        return fail(c, c->bad, "%s missing", field);
    for (const char *p = s; p < end; p++)
        if (*p < 0x20 || *p > 0x7e)
            return fail(c, c->bad, "%s has a non-printable byte 0x%02x at %td", field,
                        (unsigned char)*p, p - s);
    return 0;
}

static int tag_ok(const char *s, size_t cap)
{
    const char *end = memchr(s, '\0', cap);

    if (end == NULL || end == s)
        return 0;
    for (const char *p = s; p < end; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_' || *p == '.' ||
              *p == ':' || *p == '-'))
            return 0;
    return 1;
}

static int check_tags(const chk_t *c, const char *field, const sfl_tags_t *t)
{
    if (t->n > SFL_MSG_MAX_TAGS)
        return fail(c, c->bad, "%s has %u tags, at most %d", field, t->n, SFL_MSG_MAX_TAGS);
    for (uint32_t i = 0; i < t->n; i++) {
        if (!tag_ok(t->tag[i], SFL_MSG_TAG_LEN))
            return fail(c, c->bad, "%s[%u] '%.*s' is not a tag of 1-%d characters [a-z0-9_.:-]",
                        field, i, SFL_MSG_TAG_LEN - 1, t->tag[i], SFL_MSG_TAG_LEN - 1);
        for (uint32_t j = 0; j < i; j++)
            if (strcmp(t->tag[i], t->tag[j]) == 0)
                return fail(c, c->bad, "%s lists '%s' twice", field, t->tag[i]);
    }
    return 0;
}

static int check_labels(const chk_t *c, const char *field, uint32_t n, const double *l)
{
    if (n > SFL_MSG_MAX_LABELS)
        return fail(c, c->bad, "%s has %u labels, at most %d", field, n, SFL_MSG_MAX_LABELS);
    for (uint32_t i = 0; i < n; i++) {
        if (!isfinite(l[i]))
            return fail(c, SFL_ENUMERIC, "%s[%u] is not finite", field, i);
        if (i > 0 && !(l[i - 1] < l[i]))
            return fail(c, c->bad, "%s not strictly ascending at %u (%g after %g)", field, i,
                        l[i], l[i - 1]);
    }
    return 0;
}

static int check_finite(const chk_t *c, const char *field, double v)
{
    if (!isfinite(v))
        return fail(c, SFL_ENUMERIC, "%s is not finite", field);
    return 0;
}

/* An enum that must hold one of [lo, hi]; 0 is "missing". */
static int check_enum(const chk_t *c, const char *field, int v, int lo, int hi)
{
    if (v == 0 && lo > 0)
        return fail(c, c->bad, "%s missing", field);
    if (v < lo || v > hi)
        return fail(c, ENUM_CODE(c), "unknown %s %d", field, v);
    return 0;
}

static int check_enc(const chk_t *c, const char *field, sfl_enc_t e)
{
    if (e != SFL_ENC_F64 && e != SFL_ENC_F32 && e != SFL_ENC_Q8)
        return fail(c, ENUM_CODE(c), "unknown %s %d", field, (int)e);
    return 0;
}

static int check_id(const chk_t *c, const char *field, uint64_t v)
{
    if (v == 0)
        return fail(c, c->bad, "%s missing (0)", field);
    return 0;
}

static int check_bool(const chk_t *c, const char *field, int v)
{
    if (v != 0 && v != 1)
        return fail(c, c->bad, "%s is %d, want 0 or 1", field, v);
    return 0;
}

static int check_summary(const chk_t *c, const sfl_dataset_summary_t *s)
{
    if (s->first_column != 0 && (uint64_t)s->first_column + s->dimension - 1 > UINT32_MAX)
        return fail(c, c->bad, "dataset block [%u, %u + %u) passes column 2^32",
                    s->first_column, s->first_column, s->dimension);
    if (check_bool(c, "dataset.has_ids", s->has_ids) < 0)
        return c->bad;
    return check_labels(c, "dataset.labels", s->nlabels, s->labels);
}

/* ---- names, tags ------------------------------------------------------------- */

const char *sfl_msg_ack_name(sfl_ack_status_t s)
{
    switch (s) {
    case SFL_ACK_ACCEPTED:
        return "accepted";
    case SFL_ACK_LATE:
        return "late";
    case SFL_ACK_DUPLICATE:
        return "duplicate";
    case SFL_ACK_WRONG_ROUND:
        return "wrong_round";
    case SFL_ACK_REJECTED:
        return "rejected";
    }
    return "unknown";
}

const char *sfl_msg_phase_name(sfl_agent_phase_t p)
{
    switch (p) {
    case SFL_PHASE_IDLE:
        return "idle";
    case SFL_PHASE_TRAINING:
        return "training";
    case SFL_PHASE_UPLOADING:
        return "uploading";
    }
    return "unknown";
}

const char *sfl_msg_job_state_name(sfl_job_state_t s)
{
    switch (s) {
    case SFL_JOB_PENDING:
        return "pending";
    case SFL_JOB_RUNNING:
        return "running";
    case SFL_JOB_PAUSED:
        return "paused";
    case SFL_JOB_CANCELLED:
        return "cancelled";
    case SFL_JOB_FINISHED:
        return "finished";
    case SFL_JOB_FAILED:
        return "failed";
    }
    return "unknown";
}

const char *sfl_msg_round_state_name(sfl_round_state_t s)
{
    switch (s) {
    case SFL_ROUND_NONE:
        return "none";
    case SFL_ROUND_SELECTING:
        return "selecting";
    case SFL_ROUND_TRAINING:
        return "training";
    case SFL_ROUND_AGGREGATING:
        return "aggregating";
    case SFL_ROUND_COMMITTED:
        return "committed";
    }
    return "unknown";
}

int sfl_msg_tags_add(sfl_tags_t *t, const char *tag)
{
    size_t n = strnlen(tag, SFL_MSG_TAG_LEN);

    if (!tag_ok(tag, SFL_MSG_TAG_LEN))
        return sfl__fail(SFL_EINVAL, "tag '%.*s' is not 1-%d characters of [a-z0-9_.:-]",
                         SFL_MSG_TAG_LEN, tag, SFL_MSG_TAG_LEN - 1);
    if (sfl_msg_tags_has(t, tag))
        return 0;
    if (t->n >= SFL_MSG_MAX_TAGS)
        return sfl__fail(SFL_ELIMIT, "tag '%s': already %d tags", tag, SFL_MSG_MAX_TAGS);
    memcpy(t->tag[t->n], tag, n + 1);
    t->n++;
    return 0;
}

int sfl_msg_tags_has(const sfl_tags_t *t, const char *tag)
{
    for (uint32_t i = 0; i < t->n && i < SFL_MSG_MAX_TAGS; i++)
        if (strncmp(t->tag[i], tag, SFL_MSG_TAG_LEN) == 0)
            return 1;
    return 0;
}

/* ---- message types: the shared steps ------------------------------------------ */

/* Stack scratch for packing one message. The generated structs borrow the
 * sfl struct's fields or point at these; data, blk and ptrs are owned and
 * freed once the bytes are out. */
typedef struct wire {
    union {
        ProtobufCMessage base;
        Sfl__V1__JoinRequest join_req;
        Sfl__V1__JoinReply join_reply;
        Sfl__V1__SubscribeRequest subscribe_req;
        Sfl__V1__Task task;
        Sfl__V1__TaskOrWait task_or_wait;
        Sfl__V1__Update update;
        Sfl__V1__UpdatePayload payload;
        Sfl__V1__UpdateAck ack;
        Sfl__V1__HeartbeatRequest heartbeat_req;
        Sfl__V1__HeartbeatReply heartbeat_reply;
        Sfl__V1__CreateJobRequest create_job;
        Sfl__V1__JobRequest job_req;
        Sfl__V1__JobReply job_reply;
        Sfl__V1__StatusReply status;
        Sfl__V1__ListJobsReply job_list;
        Sfl__V1__ListAgentsRequest list_agents_req;
        Sfl__V1__ListAgentsReply agent_list;
        Sfl__V1__ExportModelRequest export_req;
        Sfl__V1__ExportModelReply export;
        Sfl__V1__JobHistoryRequest history_req;
        Sfl__V1__JobHistoryReply history;
        Sfl__V1__RevokeRequest revoke_req;
        Sfl__V1__RevokeReply revoke_reply;
        Sfl__V1__ReleaseRequest release_req;
        Sfl__V1__ReleaseReply release_reply;
        Sfl__V1__StepAnswer step_answer;
        Sfl__V1__SecAggAnswer sa_answer;
    } pb; /* the message itself, initialised from its type's descriptor */
    Sfl__V1__DatasetSummary ds;
    Sfl__V1__AlgorithmParams pp;
    Sfl__V1__Param param[SFL_PARAMS_MAX];
    Sfl__V1__Param *params[SFL_PARAMS_MAX];
    Sfl__V1__SparseVector sv;
    Sfl__V1__JobSpec spec;
    Sfl__V1__JobStatus job;
    Sfl__V1__SignedTask signed_task;
    Sfl__V1__Wait wait;
    Sfl__V1__VerticalStep vstep;
    char *tags[2][SFL_MSG_MAX_TAGS];
    uint8_t hash[SFL_MSG_HASH_BYTES]; /* BLAKE2b-256 of data, where put needs it */
    uint8_t *data;                    /* owned: the encoded vector */
    void *blk, *ptrs;                 /* owned: list entries, pointers to them */
    void *more[10];                   /* owned: further lists (secure aggregation) */
    Sfl__V1__SecAggRound sa_round;
    Sfl__V1__SecAggStage sa_stage;
    Sfl__V1__SecAggKeys sa_keys;
} wire_t;

/* One message as pack_msg and unpack_msg drive it. */
typedef struct msg_type {
    const char *name; /* starts every detail, e.g. "join request" */
    const ProtobufCMessageDescriptor *desc;
    /* Pack: check the sfl struct, then point w->pb at it. NULL check: put
     * checks (or there is nothing to check); NULL put: an empty message. */
    int (*check)(const chk_t *c, const void *m);
    int (*put)(const chk_t *c, const void *m, wire_t *w);
    /* Unpack: copy pb into m with every check; NULL for an empty message. */
    int (*get)(const chk_t *c, void *pb, void *m);
    size_t size; /* of the sfl struct */
    /* Set when unpack returns the struct owned; NULL when it fills the
     * caller's struct in place. Owned structs carry a vector or a list, so
     * their bytes may reach max_message; the others stop at control_max. */
    void (*free)(void *m);
    uint32_t items; /* field counted against max_items before unpacking; 0 none */
    /* Set for a message that is private (the plaintext update): the copies
     * the codec makes on the way, protobuf-c's and the encoded vector,
     * are wiped before they are freed. */
    void (*wipe)(void *pb);
} msg_type_t;

/* hash (optional) receives w->hash: sfl_msg_task_sign_bytes's model_hash. */
static int pack_msg(const msg_type_t *t, const void *m, uint8_t *hash, uint8_t **out,
                    size_t *len)
{
    static const wire_t init = {
        .ds = SFL__V1__DATASET_SUMMARY__INIT,
        .pp = SFL__V1__ALGORITHM_PARAMS__INIT,
        .sv = SFL__V1__SPARSE_VECTOR__INIT,
        .spec = SFL__V1__JOB_SPEC__INIT,
        .job = SFL__V1__JOB_STATUS__INIT,
        .signed_task = SFL__V1__SIGNED_TASK__INIT,
        .wait = SFL__V1__WAIT__INIT,
        .vstep = SFL__V1__VERTICAL_STEP__INIT,
        .sa_round = SFL__V1__SEC_AGG_ROUND__INIT,
        .sa_stage = SFL__V1__SEC_AGG_STAGE__INIT,
        .sa_keys = SFL__V1__SEC_AGG_KEYS__INIT,
    };
    const chk_t c = {t->name, SFL_EINVAL, NULL, 0};
    wire_t w = init;
    int rc = 0;

    clear_out(out, len);
    protobuf_c_message_init(t->desc, &w.pb);
    if ((t->check != NULL && (rc = t->check(&c, m)) < 0) ||
        (t->put != NULL && (rc = t->put(&c, m, &w)) < 0))
        goto out;
    if (hash != NULL)
        memcpy(hash, w.hash, SFL_MSG_HASH_BYTES);
    rc = pack(&w.pb.base, &c, out, len);
out:
    for (size_t i = 0; i < sizeof(w.more) / sizeof(w.more[0]); i++)
        sfl__free(w.more[i]);
    sfl__free(w.ptrs);
    sfl__free(w.blk);
    if (t->wipe != NULL && w.data != NULL)
        sodium_memzero(w.data, w.sv.data.len);
    sfl__free(w.data);
    return rc;
}

/* Refuses more than max_items entries of field `num` before unpacking. */
static int check_items(const chk_t *c, const uint8_t *buf, size_t len, uint32_t num)
{
    size_t n;
    int rc;

    if (buf == NULL || len > c->lim->max_message)
        return 0; /* unpack() reports these */
    rc = count_field(c, buf, len, num, &n);
    if (rc < 0)
        return rc;
    if (n > c->lim->max_items)
        return fail(c, SFL_ELIMIT, "%zu entries exceed the limit of %u", n, c->lim->max_items);
    return 0;
}

/* Fills m in place (zeroed first) or, for owned types, returns a new struct
 * (NULL on failure); *rc is the result either way. */
static void *unpack_msg(const msg_type_t *t, const uint8_t *buf, size_t len,
                        const sfl_msg_limits_t *lim, uint32_t dim, void *m, int *rc)
{
    sfl_msg_limits_t tmp;
    const chk_t c = {t->name, SFL_EPARSE, limits(lim, &tmp), dim};
    const int owned = t->free != NULL;
    void *pb = NULL;

    *rc = 0;
    if (!owned && t->size > 0)
        memset(m, 0, t->size);
    if (t->items != 0 && (*rc = check_items(&c, buf, len, t->items)) < 0)
        goto out;
    pb = unpack(t->desc, &c, buf, len, owned ? c.lim->max_message : control_max(c.lim), rc);
    if (pb == NULL || t->get == NULL)
        goto out;
    if (owned && (m = sfl__calloc(1, t->size)) == NULL) {
        *rc = fail(&c, SFL_ENOMEM, "no memory");
        goto out;
    }
    *rc = t->get(&c, pb, m);
out:
    if (t->wipe != NULL && pb != NULL)
        t->wipe(pb);
    free_pb(pb);
    if (owned && *rc < 0) {
        t->free(m);
        m = NULL;
    }
    return m;
}

static int unpack_in(const msg_type_t *t, const uint8_t *buf, size_t len,
                     const sfl_msg_limits_t *lim, void *m)
{
    int rc;

    (void)unpack_msg(t, buf, len, lim, 0, m, &rc);
    return rc;
}

/* Lists: the sfl array is checked entry by entry before anything is
 * allocated; the generated side is one block of entries and one of
 * pointers to them (w->blk, w->ptrs). */
static int check_list(const chk_t *c, const char *what, const void *a, uint32_t n, size_t size,
                      int (*check)(const chk_t *, const void *))
{
    if (n > 0 && a == NULL)
        return fail(c, SFL_EINVAL, "%u %s but no array", n, what);
    for (uint32_t i = 0; i < n; i++) {
        int rc = check(c, (const char *)a + i * size);

        if (rc < 0)
            return rc;
    }
    return 0;
}

static int alloc_list(const chk_t *c, const char *what, uint32_t n, size_t size, wire_t *w)
{
    if (n == 0)
        return 0;
    w->blk = sfl__mallocarray(n, size);
    w->ptrs = sfl__mallocarray(n, sizeof(void *));
    if (w->blk == NULL || w->ptrs == NULL)
        return fail(c, SFL_ENOMEM, "no memory for %u %s", n, what);
    return 0;
}

/* An owned array of n entries of size bytes, entry i got from src by get;
 * NULL for none and on failure (*rc). */
static void *get_list(const chk_t *c, const char *what, const void *src, size_t n, size_t size,
                      int (*get)(const chk_t *, const void *, size_t, void *), int *rc)
{
    char *a;

    *rc = 0;
    if (n == 0)
        return NULL;
    a = sfl__mallocarray(n, size);
    if (a == NULL) {
        *rc = fail(c, SFL_ENOMEM, "no memory for %zu %s", n, what);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        if ((*rc = get(c, src, i, a + i * size)) < 0) {
            sfl__free(a);
            return NULL;
        }
    }
    return a;
}

/* ---- Join ------------------------------------------------------------------ */

static int check_join_req(const chk_t *c, const void *p)
{
    const sfl_join_req_t *m = p;
    int rc;

    if ((rc = check_tags(c, "capabilities", &m->capabilities)) < 0 ||
        (rc = check_tags(c, "conditions", &m->conditions)) < 0 ||
        (rc = check_summary(c, &m->dataset)) < 0 ||
        (rc = check_str(c, "agent_version", m->agent_version, SFL_MSG_NAME_LEN, 0)) < 0)
        return rc;
    if (m->protocol_version == 0)
        return fail(c, c->bad, "protocol_version missing");
    return 0;
}

static int put_join_req(const chk_t *c, const void *p, wire_t *w)
{
    const sfl_join_req_t *m = p;
    Sfl__V1__JoinRequest *pb = &w->pb.join_req;

    (void)c;
    pb->identity_key = bin(m->identity_key, SFL_MSG_KEY_BYTES);
    put_tags(&m->capabilities, w->tags[0], &pb->n_capabilities, &pb->capabilities);
    put_tags(&m->conditions, w->tags[1], &pb->n_conditions, &pb->conditions);
    put_summary(&m->dataset, &w->ds);
    pb->dataset = &w->ds;
    pb->protocol_version = m->protocol_version;
    pb->agent_version = str(m->agent_version);
    if (m->has_proof)
        pb->join_proof = bin(m->proof, SFL_MSG_SIG_BYTES);
    return 0;
}

static int get_join_req(const chk_t *c, void *p, void *out)
{
    const Sfl__V1__JoinRequest *pb = p;
    sfl_join_req_t *m = out;
    int rc;

    if ((rc = get_fixed(c, "identity_key", &pb->identity_key, m->identity_key,
                        SFL_MSG_KEY_BYTES)) < 0 ||
        (rc = get_tags(c, "capabilities", pb->capabilities, pb->n_capabilities,
                       &m->capabilities)) < 0 ||
        (rc = get_tags(c, "conditions", pb->conditions, pb->n_conditions, &m->conditions)) < 0 ||
        (rc = get_summary(c, pb->dataset, &m->dataset)) < 0 ||
        (rc = get_str(c, "agent_version", pb->agent_version, m->agent_version,
                      SFL_MSG_NAME_LEN)) < 0)
        return rc;
    m->protocol_version = pb->protocol_version;
    /* Absent is decoded (the coordinator refuses it with a clear status);
     * present must be a whole signature. */
    if (pb->join_proof.len > 0) {
        if ((rc = get_fixed(c, "join_proof", &pb->join_proof, m->proof, SFL_MSG_SIG_BYTES)) < 0)
            return rc;
        m->has_proof = 1;
    }
    return check_join_req(c, m);
}

static const msg_type_t join_req_type = {"join request", &sfl__v1__join_request__descriptor,
    check_join_req, put_join_req, get_join_req, sizeof(sfl_join_req_t), NULL, 0, NULL};

int sfl_msg_join_req_pack(const sfl_join_req_t *m, uint8_t **out, size_t *len)
{
    return pack_msg(&join_req_type, m, NULL, out, len);
}

int sfl_msg_join_req_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim,
                            sfl_join_req_t *m)
{
    return unpack_in(&join_req_type, buf, len, lim, m);
}

static int check_join_reply(const chk_t *c, const void *p)
{
    const sfl_join_reply_t *m = p;
    int rc = check_id(c, "agent_id", m->agent_id);

    if (rc < 0)
        return rc;
    if (m->heartbeat_interval_ms == 0)
        return fail(c, c->bad, "heartbeat_interval_ms missing (0)");
    if (m->protocol_version == 0)
        return fail(c, c->bad, "protocol_version missing");
    return 0;
}

static int put_join_reply(const chk_t *c, const void *p, wire_t *w)
{
    const sfl_join_reply_t *m = p;
    Sfl__V1__JoinReply *pb = &w->pb.join_reply;

    (void)c;
    pb->agent_id = m->agent_id;
    pb->coordinator_key = bin(m->coordinator_key, SFL_MSG_KEY_BYTES);
    pb->retry_after_ms = m->retry_after_ms;
    pb->heartbeat_interval_ms = m->heartbeat_interval_ms;
    pb->protocol_version = m->protocol_version;
    return 0;
}

static int get_join_reply(const chk_t *c, void *p, void *out)
{
    const Sfl__V1__JoinReply *pb = p;
    sfl_join_reply_t *m = out;
    int rc;

    rc = get_fixed(c, "coordinator_key", &pb->coordinator_key, m->coordinator_key,
                   SFL_MSG_KEY_BYTES);
    if (rc < 0)
        return rc;
    m->agent_id = pb->agent_id;
    m->retry_after_ms = pb->retry_after_ms;
    m->heartbeat_interval_ms = pb->heartbeat_interval_ms;
    m->protocol_version = pb->protocol_version;
    return check_join_reply(c, m);
}

static const msg_type_t join_reply_type = {"join reply", &sfl__v1__join_reply__descriptor,
    check_join_reply, put_join_reply, get_join_reply, sizeof(sfl_join_reply_t), NULL, 0, NULL};

int sfl_msg_join_reply_pack(const sfl_join_reply_t *m, uint8_t **out, size_t *len)
{
    return pack_msg(&join_reply_type, m, NULL, out, len);
}

int sfl_msg_join_reply_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim,
                              sfl_join_reply_t *m)
{
    return unpack_in(&join_reply_type, buf, len, lim, m);
}

/* ---- Subscribe ------------------------------------------------------------- */

static int check_subscribe_req(const chk_t *c, const void *p)
{
    const sfl_subscribe_req_t *m = p;
    int rc = check_id(c, "agent_id", m->agent_id);

    return rc < 0 ? rc : check_tags(c, "conditions", &m->conditions);
}

static int put_subscribe_req(const chk_t *c, const void *p, wire_t *w)
{
    const sfl_subscribe_req_t *m = p;
    Sfl__V1__SubscribeRequest *pb = &w->pb.subscribe_req;

    (void)c;
    pb->agent_id = m->agent_id;
    put_tags(&m->conditions, w->tags[0], &pb->n_conditions, &pb->conditions);
    return 0;
}

static int get_subscribe_req(const chk_t *c, void *p, void *out)
{
    const Sfl__V1__SubscribeRequest *pb = p;
    sfl_subscribe_req_t *m = out;
    int rc;

    rc = get_tags(c, "conditions", pb->conditions, pb->n_conditions, &m->conditions);
    if (rc < 0)
        return rc;
    m->agent_id = pb->agent_id;
    return check_subscribe_req(c, m);
}

static const msg_type_t subscribe_req_type = {"subscribe request",
    &sfl__v1__subscribe_request__descriptor, check_subscribe_req, put_subscribe_req,
    get_subscribe_req, sizeof(sfl_subscribe_req_t), NULL, 0, NULL};

int sfl_msg_subscribe_req_pack(const sfl_subscribe_req_t *m, uint8_t **out, size_t *len)
{
    return pack_msg(&subscribe_req_type, m, NULL, out, len);
}

int sfl_msg_subscribe_req_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim,
                                 sfl_subscribe_req_t *m)
{
    return unpack_in(&subscribe_req_type, buf, len, lim, m);
}

/* ---- secure aggregation (update mode 2) ----------------------------------------- */

/* Entries a repeated field may hold: the cohort's bound on pack, the
 * receiver's max_items on unpack. */
static size_t sa_cap(const chk_t *c)
{
    return c->lim != NULL ? c->lim->max_items : 65535;
}

static int check_sa_ids(const chk_t *c, uint64_t job, uint64_t round)
{
    /* round 0: a standardize job's statistics round (docs/protocol.md) */
    (void)round;
    return check_id(c, "job_id", job);
}

static int check_sa_count(const chk_t *c, const char *what, size_t n, const void *a)
{
    if (n > sa_cap(c))
        return fail(c, SFL_ELIMIT, "%zu %s exceed the limit of %zu", n, what, sa_cap(c));
    if (n > 0 && a == NULL)
        return fail(c, SFL_EINVAL, "%zu %s but no array", n, what);
    return 0;
}

static int check_sa_round(const chk_t *c, const sfl_msg_sa_round_t *r)
{
    int rc;

    if ((rc = check_sa_count(c, "secagg.members", r->nmembers, r->members)) < 0)
        return rc;
    if (r->nmembers == 0 || r->threshold > r->nmembers || 2 * (uint64_t)r->threshold <= r->nmembers)
        return fail(c, c->bad, "secagg: threshold %u of %u members (need members / 2 < "
                    "threshold <= members)", r->threshold, r->nmembers);
    for (uint32_t i = 0; i < r->nmembers; i++)
        if (r->members[i].agent_id == 0 ||
            (i > 0 && r->members[i].agent_id <= r->members[i - 1].agent_id))
            return fail(c, c->bad, "secagg.members: ids not strictly ascending and > 0 "
                        "(entry %u)", i);
    if (r->support_size == 0 || r->top_k == 0)
        return fail(c, c->bad, "secagg: support_size and top_k must be >= 1");
    if ((rc = check_finite(c, "secagg.clip", r->clip)) < 0 ||
        (rc = check_finite(c, "secagg.max_weight", r->max_weight)) < 0)
        return rc;
    if (!(r->clip > 0) || !(r->max_weight > 0))
        return fail(c, c->bad, "secagg: clip and max_weight must be > 0");
    if (r->degree % 2 != 0)
        return fail(c, c->bad, "secagg: degree %u (need 0 or even)", r->degree);
    for (uint32_t i = 0; i < r->nmembers; i++)
        if (!(isfinite(r->members[i].weight) && r->members[i].weight > 0 &&
              r->members[i].weight <= r->max_weight))
            return fail(c, c->bad, "secagg.members: entry %u's weight %g not in (0, "
                        "max_weight %g]", i, r->members[i].weight, r->max_weight);
    return 0;
}

/* Protobuf list entries and pointers to them, owned by w (freed by
 * pack_msg): slot picks w->more[slot], w->more[slot + 1]. */
static void *sa_list(const chk_t *c, wire_t *w, int slot, size_t n, size_t size, void ***ptrs)
{
    char *blk;

    *ptrs = NULL;
    if (n == 0)
        return NULL;
    blk = sfl__mallocarray(n, size);
    *ptrs = sfl__mallocarray(n, sizeof(void *));
    w->more[slot] = blk;
    w->more[slot + 1] = *ptrs;
    if (blk == NULL || *ptrs == NULL) {
        (void)fail(c, SFL_ENOMEM, "no memory for %zu entries", n);
        return NULL;
    }
    for (size_t i = 0; i < n; i++)
        (*ptrs)[i] = blk + i * size;
    return blk;
}

static void put_sa_keys(const sfl_msg_sa_keys_t *k, Sfl__V1__SecAggKeys *o)
{
    sfl__v1__sec_agg_keys__init(o);
    o->agent_id = k->agent_id;
    o->c_pk = bin(k->c_pk, SFL_MSG_KEY_BYTES);
    o->s_pk = bin(k->s_pk, SFL_MSG_KEY_BYTES);
    o->signature = bin(k->sig, SFL_MSG_SIG_BYTES);
}

static int get_sa_keys(const chk_t *c, const Sfl__V1__SecAggKeys *p, sfl_msg_sa_keys_t *k)
{
    int rc;

    if (p == NULL)
        return fail(c, c->bad, "secagg keys missing");
    k->agent_id = p->agent_id;
    if ((rc = get_fixed(c, "keys.c_pk", &p->c_pk, k->c_pk, SFL_MSG_KEY_BYTES)) < 0 ||
        (rc = get_fixed(c, "keys.s_pk", &p->s_pk, k->s_pk, SFL_MSG_KEY_BYTES)) < 0 ||
        (rc = get_fixed(c, "keys.signature", &p->signature, k->sig, SFL_MSG_SIG_BYTES)) < 0)
        return rc;
    return check_id(c, "keys.agent_id", k->agent_id);
}

static int put_sa_boxes(const chk_t *c, wire_t *w, int slot, const sfl_msg_sa_box_t *b,
                        uint32_t n, size_t *count, Sfl__V1__SecAggBox ***field)
{
    void **ptrs;
    Sfl__V1__SecAggBox *e = sa_list(c, w, slot, n, sizeof(*e), &ptrs);

    if (n > 0 && e == NULL)
        return SFL_ENOMEM;
    for (uint32_t i = 0; i < n; i++) {
        sfl__v1__sec_agg_box__init(&e[i]);
        e[i].from = b[i].from;
        e[i].to = b[i].to;
        e[i].nonce = bin(b[i].nonce, SFL_MSG_SA_NONCE);
        e[i].ciphertext = bin(b[i].ct, SFL_MSG_SA_CT);
    }
    *count = n;
    *field = (Sfl__V1__SecAggBox **)ptrs;
    return 0;
}

static int check_sa_boxes(const chk_t *c, const sfl_msg_sa_box_t *b, uint32_t n)
{
    int rc = check_sa_count(c, "boxes", n, b);

    for (uint32_t i = 0; rc == 0 && i < n; i++)
        if (b[i].from == 0 || b[i].to == 0 || b[i].from == b[i].to)
            rc = fail(c, c->bad, "box %u: from %llu to %llu", i, (unsigned long long)b[i].from,
                      (unsigned long long)b[i].to);
    return rc;
}

static sfl_msg_sa_box_t *get_sa_boxes(const chk_t *c, Sfl__V1__SecAggBox **p, size_t n,
                                      int *rc)
{
    sfl_msg_sa_box_t *b;

    *rc = 0;
    if (n == 0)
        return NULL;
    if (n > sa_cap(c)) {
        *rc = fail(c, SFL_ELIMIT, "%zu boxes exceed the limit of %zu", n, sa_cap(c));
        return NULL;
    }
    if ((b = sfl__calloc(n, sizeof(*b))) == NULL) {
        *rc = fail(c, SFL_ENOMEM, "no memory for %zu boxes", n);
        return NULL;
    }
    for (size_t i = 0; i < n && *rc == 0; i++) {
        b[i].from = p[i]->from;
        b[i].to = p[i]->to;
        if ((*rc = get_fixed(c, "box.nonce", &p[i]->nonce, b[i].nonce, SFL_MSG_SA_NONCE)) == 0)
            *rc = get_fixed(c, "box.ciphertext", &p[i]->ciphertext, b[i].ct, SFL_MSG_SA_CT);
    }
    if (*rc < 0) {
        sfl__free(b);
        return NULL;
    }
    return b;
}

/* Task.secagg into w->sa_round (lists in w->more[8], [9]). */
static int put_sa_round(const chk_t *c, const sfl_msg_sa_round_t *r, wire_t *w)
{
    Sfl__V1__SecAggRound *o = &w->sa_round;
    void **ptrs;
    Sfl__V1__SecAggMember *e = sa_list(c, w, 8, r->nmembers, sizeof(*e), &ptrs);

    if (r->nmembers > 0 && e == NULL)
        return SFL_ENOMEM;
    for (uint32_t i = 0; i < r->nmembers; i++) {
        sfl__v1__sec_agg_member__init(&e[i]);
        e[i].agent_id = r->members[i].agent_id;
        e[i].identity_key = bin(r->members[i].pk, SFL_MSG_KEY_BYTES);
        e[i].weight = r->members[i].weight;
    }
    o->threshold = r->threshold;
    o->n_members = r->nmembers;
    o->members = (Sfl__V1__SecAggMember **)ptrs;
    o->support_size = r->support_size;
    o->top_k = r->top_k;
    o->clip = r->clip;
    o->max_weight = r->max_weight;
    o->degree = r->degree;
    return 0;
}

static void sa_round_free(sfl_msg_sa_round_t *r)
{
    if (r == NULL)
        return;
    sfl__free(r->members);
    sfl__free(r);
}

static int get_sa_round(const chk_t *c, const Sfl__V1__SecAggRound *p, sfl_msg_sa_round_t **out)
{
    sfl_msg_sa_round_t *r;
    int rc = 0;

    *out = NULL;
    if (p->n_members > sa_cap(c))
        return fail(c, SFL_ELIMIT, "%zu secagg members exceed the limit of %zu", p->n_members,
                    sa_cap(c));
    if ((r = sfl__calloc(1, sizeof(*r))) == NULL ||
        (p->n_members > 0 && (r->members = sfl__calloc(p->n_members, sizeof(*r->members))) == NULL)) {
        sa_round_free(r);
        return fail(c, SFL_ENOMEM, "no memory for the secagg round");
    }
    r->threshold = p->threshold;
    r->nmembers = (uint32_t)p->n_members;
    r->support_size = p->support_size;
    r->top_k = p->top_k;
    r->clip = p->clip;
    r->max_weight = p->max_weight;
    r->degree = p->degree;
    for (size_t i = 0; i < p->n_members && rc == 0; i++) {
        r->members[i].agent_id = p->members[i]->agent_id;
        r->members[i].weight = p->members[i]->weight;
        rc = get_fixed(c, "secagg.members.identity_key", &p->members[i]->identity_key,
                       r->members[i].pk, SFL_MSG_KEY_BYTES);
    }
    if (rc == 0)
        rc = check_sa_round(c, r);
    if (rc < 0) {
        sa_round_free(r);
        return rc;
    }
    *out = r;
    return 0;
}

/* TaskOrWait.secagg */
static int check_sa_stage(const chk_t *c, const void *p)
{
    const sfl_msg_sa_stage_t *m = p;
    uint32_t want[4] = {0}; /* keys, clients, boxes allowed, sigs */
    int rc;

    if ((rc = check_sa_ids(c, m->job_id, m->round)) < 0 ||
        (rc = check_sa_count(c, "keys", m->nkeys, m->keys)) < 0 ||
        (rc = check_sa_count(c, "clients", m->nclients, m->clients)) < 0 ||
        (rc = check_sa_boxes(c, m->boxes, m->nboxes)) < 0 ||
        (rc = check_sa_count(c, "signatures", m->nsigs, m->sigs)) < 0)
        return rc;
    switch (m->stage) {
    case 2: want[0] = 1; break;
    case 3: want[1] = want[2] = 1; break;
    case 4: want[1] = 1; break;
    case 5: want[3] = 1; break;
    default:
        return fail(c, c->bad, "secagg stage %u (2 to 5)", m->stage);
    }
    if ((m->nkeys > 0) != want[0] || (m->nclients > 0) != want[1] ||
        (m->nboxes > 0 && !want[2]) || (m->nsigs > 0) != want[3])
        return fail(c, c->bad, "secagg stage %u with the fields of another stage", m->stage);
    for (uint32_t i = 0; i < m->nkeys; i++)
        if ((rc = check_id(c, "keys.agent_id", m->keys[i].agent_id)) < 0)
            return rc;
    for (uint32_t i = 0; i < m->nclients; i++)
        if (m->clients[i] == 0 || (i > 0 && m->clients[i] <= m->clients[i - 1]))
            return fail(c, c->bad, "secagg clients not strictly ascending and > 0 (entry %u)", i);
    for (uint32_t i = 0; i < m->nsigs; i++)
        if ((rc = check_id(c, "signatures.agent_id", m->sigs[i].agent_id)) < 0)
            return rc;
    return 0;
}

static int put_sa_stage(const chk_t *c, const void *p, wire_t *w)
{
    const sfl_msg_sa_stage_t *m = p;
    Sfl__V1__SecAggStage *o = &w->sa_stage;
    void **kp, **sp;
    Sfl__V1__SecAggKeys *ke = sa_list(c, w, 0, m->nkeys, sizeof(*ke), &kp);
    Sfl__V1__SecAggSignature *se = sa_list(c, w, 4, m->nsigs, sizeof(*se), &sp);
    int rc;

    if ((m->nkeys > 0 && ke == NULL) || (m->nsigs > 0 && se == NULL))
        return SFL_ENOMEM;
    for (uint32_t i = 0; i < m->nkeys; i++)
        put_sa_keys(&m->keys[i], &ke[i]);
    for (uint32_t i = 0; i < m->nsigs; i++) {
        sfl__v1__sec_agg_signature__init(&se[i]);
        se[i].agent_id = m->sigs[i].agent_id;
        se[i].signature = bin(m->sigs[i].sig, SFL_MSG_SIG_BYTES);
    }
    if ((rc = put_sa_boxes(c, w, 2, m->boxes, m->nboxes, &o->n_boxes, &o->boxes)) < 0)
        return rc;
    o->job_id = m->job_id;
    o->round = m->round;
    o->attempt = m->attempt;
    o->stage = m->stage;
    o->n_keys = m->nkeys;
    o->keys = (Sfl__V1__SecAggKeys **)kp;
    o->n_clients = m->nclients;
    o->clients = (uint64_t *)(uintptr_t)m->clients;
    o->n_signatures = m->nsigs;
    o->signatures = (Sfl__V1__SecAggSignature **)sp;
    w->pb.task_or_wait.kind_case = SFL__V1__TASK_OR_WAIT__KIND_SECAGG;
    w->pb.task_or_wait.secagg = o;
    return 0;
}

static const msg_type_t sa_stage_type = {"secagg stage", &sfl__v1__task_or_wait__descriptor,
    check_sa_stage, put_sa_stage, NULL, 0, NULL, 0, NULL};

int sfl_msg_sa_stage_pack(const sfl_msg_sa_stage_t *m, uint8_t **out, size_t *len)
{
    return pack_msg(&sa_stage_type, m, NULL, out, len);
}

void sfl_msg_sa_stage_clear(sfl_msg_sa_stage_t *m)
{
    if (m == NULL)
        return;
    sfl__free(m->keys);
    sfl__free(m->clients);
    sfl__free(m->boxes);
    sfl__free(m->sigs);
    memset(m, 0, sizeof(*m));
}

static int get_sa_stage(const chk_t *c, const Sfl__V1__SecAggStage *p, sfl_msg_sa_stage_t *m)
{
    int rc = 0;

    memset(m, 0, sizeof(*m));
    m->job_id = p->job_id;
    m->round = p->round;
    m->attempt = p->attempt;
    m->stage = p->stage;
    if (p->n_keys > sa_cap(c) || p->n_clients > sa_cap(c) || p->n_signatures > sa_cap(c))
        return fail(c, SFL_ELIMIT, "a secagg list exceeds the limit of %zu", sa_cap(c));
    if ((p->n_keys > 0 && (m->keys = sfl__calloc(p->n_keys, sizeof(*m->keys))) == NULL) ||
        (p->n_clients > 0 &&
         (m->clients = sfl__calloc(p->n_clients, sizeof(*m->clients))) == NULL) ||
        (p->n_signatures > 0 &&
         (m->sigs = sfl__calloc(p->n_signatures, sizeof(*m->sigs))) == NULL))
        rc = fail(c, SFL_ENOMEM, "no memory for the secagg stage");
    for (size_t i = 0; rc == 0 && i < p->n_keys; i++)
        rc = get_sa_keys(c, p->keys[i], &m->keys[i]);
    m->nkeys = (uint32_t)p->n_keys;
    if (rc == 0 && p->n_clients > 0)
        memcpy(m->clients, p->clients, p->n_clients * sizeof(*m->clients));
    m->nclients = (uint32_t)p->n_clients;
    for (size_t i = 0; rc == 0 && i < p->n_signatures; i++) {
        m->sigs[i].agent_id = p->signatures[i]->agent_id;
        rc = get_fixed(c, "signatures.signature", &p->signatures[i]->signature, m->sigs[i].sig,
                       SFL_MSG_SIG_BYTES);
    }
    m->nsigs = (uint32_t)p->n_signatures;
    if (rc == 0) {
        m->boxes = get_sa_boxes(c, p->boxes, p->n_boxes, &rc);
        m->nboxes = rc == 0 ? (uint32_t)p->n_boxes : 0;
    }
    if (rc == 0)
        rc = check_sa_stage(c, m);
    if (rc < 0)
        sfl_msg_sa_stage_clear(m);
    return rc;
}

/* SubmitSecAgg's request */
static int check_sa_answer(const chk_t *c, const void *p)
{
    const sfl_msg_sa_answer_t *m = p;
    int rc;

    if ((rc = check_sa_ids(c, m->job_id, m->round)) < 0 ||
        (rc = check_id(c, "agent_id", m->agent_id)) < 0 ||
        (rc = check_sa_boxes(c, m->boxes, m->nboxes)) < 0 ||
        (rc = check_sa_count(c, "reveals", m->nreveals, m->reveals)) < 0)
        return rc;
    if (m->stage < 1 || m->stage > 5)
        return fail(c, c->bad, "secagg stage %u (1 to 5)", m->stage);
    if ((m->nboxes > 0 && m->stage != 2) || ((m->nmasked > 0) != (m->stage == 3)) ||
        ((m->nreveals > 0) != (m->stage == 5)))
        return fail(c, c->bad, "secagg answer to stage %u with the fields of another stage",
                    m->stage);
    if (m->stage == 1 && m->keys.agent_id != m->agent_id)
        return fail(c, c->bad, "secagg keys of %llu sent by %llu",
                    (unsigned long long)m->keys.agent_id, (unsigned long long)m->agent_id);
    if (m->stage == 3 && (m->masked == NULL || m->nmasked < 2))
        return fail(c, c->bad, "secagg masked input of %u words", m->nmasked);
    if ((m->ncommits > 0) != (m->stage == 2) || m->ncommits % 2 != 0 ||
        (m->ncommits > 0 && m->commits == NULL))
        return fail(c, c->bad, "secagg answer to stage %u with %u commitments (stage 2: an "
                    "even number, at least 2)", m->stage, m->ncommits);
    if (m->ncommits > 2 * sa_cap(c))
        return fail(c, SFL_ELIMIT, "%u commitments exceed the limit of %zu", m->ncommits,
                    2 * sa_cap(c));
    for (uint32_t i = 0; i < m->nreveals; i++)
        if (m->reveals[i].of == 0 || m->reveals[i].x == 0 || (m->reveals[i].self_mask & ~1))
            return fail(c, c->bad, "secagg reveal %u: of %llu, x %u", i,
                        (unsigned long long)m->reveals[i].of, m->reveals[i].x);
    return 0;
}

static int put_sa_answer(const chk_t *c, const void *p, wire_t *w)
{
    const sfl_msg_sa_answer_t *m = p;
    Sfl__V1__SecAggAnswer *o = &w->pb.sa_answer;
    void **rp;
    Sfl__V1__SecAggReveal *re = sa_list(c, w, 4, m->nreveals, sizeof(*re), &rp);
    int rc;

    if (m->nreveals > 0 && re == NULL)
        return SFL_ENOMEM;
    o->job_id = m->job_id;
    o->round = m->round;
    o->attempt = m->attempt;
    o->agent_id = m->agent_id;
    o->stage = m->stage;
    if (m->stage == 1) {
        put_sa_keys(&m->keys, &w->sa_keys);
        o->keys = &w->sa_keys;
    }
    if (m->stage == 2)
        o->commitments = bin((const uint8_t *)m->commits, (size_t)m->ncommits * SFL_MSG_SA_POINT);
    if (m->stage >= 2 && m->stage <= 4)
        o->signature = bin(m->sig, SFL_MSG_SIG_BYTES);
    if ((rc = put_sa_boxes(c, w, 0, m->boxes, m->nboxes, &o->n_boxes, &o->boxes)) < 0)
        return rc;
    if (m->nmasked > 0) {
        if ((w->data = sfl__mallocarray(m->nmasked, 4)) == NULL)
            return fail(c, SFL_ENOMEM, "no memory for the masked input");
        for (uint32_t i = 0; i < m->nmasked; i++)
            for (int b = 0; b < 4; b++)
                w->data[4 * (size_t)i + b] = (uint8_t)(m->masked[i] >> (8 * b));
        o->masked = bin(w->data, 4 * (size_t)m->nmasked);
    }
    for (uint32_t i = 0; i < m->nreveals; i++) {
        sfl__v1__sec_agg_reveal__init(&re[i]);
        re[i].of = m->reveals[i].of;
        re[i].self_mask = m->reveals[i].self_mask;
        re[i].x = m->reveals[i].x;
        re[i].y = bin(m->reveals[i].y, SFL_MSG_SA_SHARE);
        re[i].dealer_signature = bin(m->reveals[i].sig, SFL_MSG_SIG_BYTES);
    }
    o->n_reveals = m->nreveals;
    o->reveals = (Sfl__V1__SecAggReveal **)rp;
    return 0;
}

void sfl_msg_sa_answer_free(sfl_msg_sa_answer_t *m)
{
    if (m == NULL)
        return;
    sfl__free(m->boxes);
    sfl__free(m->commits);
    sfl__free(m->masked);
    sfl__free(m->reveals);
    sfl__free(m);
}

static void free_sa_answer(void *m)
{
    sfl_msg_sa_answer_free(m);
}

/* A field of the answer that this stage has or must not have. */
static int get_sa_bytes(const chk_t *c, const char *field, const ProtobufCBinaryData *b,
                        int want, uint8_t *dst, size_t n)
{
    if (!want) {
        if (b->len != 0)
            return fail(c, c->bad, "%s is not part of this stage", field);
        return 0;
    }
    return get_fixed(c, field, b, dst, n);
}

static int get_sa_answer(const chk_t *c, void *pv, void *out)
{
    const Sfl__V1__SecAggAnswer *p = pv;
    sfl_msg_sa_answer_t *m = out;
    uint32_t st = p->stage;
    int rc;

    m->job_id = p->job_id;
    m->round = p->round;
    m->attempt = p->attempt;
    m->agent_id = p->agent_id;
    m->stage = st;
    if ((st == 1) != (p->keys != NULL))
        return fail(c, c->bad, "secagg keys %s stage %u", st == 1 ? "missing at" : "at", st);
    if (st == 1 && (rc = get_sa_keys(c, p->keys, &m->keys)) < 0)
        return rc;
    if ((rc = get_sa_bytes(c, "signature", &p->signature, st >= 2 && st <= 4, m->sig,
                           SFL_MSG_SIG_BYTES)) < 0)
        return rc;
    if (p->commitments.len > 0) {
        size_t n = p->commitments.len / SFL_MSG_SA_POINT;

        /* sized before anything is allocated: whole points, within the cap */
        if (p->commitments.len % SFL_MSG_SA_POINT != 0 || n > 2 * sa_cap(c))
            return fail(c, p->commitments.len % SFL_MSG_SA_POINT ? c->bad : SFL_ELIMIT,
                        "commitments of %zu bytes (whole %d-byte points, at most %zu)",
                        p->commitments.len, SFL_MSG_SA_POINT, 2 * sa_cap(c));
        if ((m->commits = sfl__calloc(n, SFL_MSG_SA_POINT)) == NULL)
            return fail(c, SFL_ENOMEM, "no memory for the commitments");
        memcpy(m->commits, p->commitments.data, p->commitments.len);
        m->ncommits = (uint32_t)n;
    }
    m->boxes = get_sa_boxes(c, p->boxes, p->n_boxes, &rc);
    if (rc < 0)
        return rc;
    m->nboxes = (uint32_t)p->n_boxes;
    if (p->masked.len > 0) {
        size_t n = p->masked.len / 4;

        if (p->masked.len % 4 != 0 || n > (size_t)c->lim->max_dim + SFL_MSG_SA_EXTRA)
            return fail(c, p->masked.len % 4 ? c->bad : SFL_ELIMIT,
                        "masked input of %zu bytes (whole uint32 words, at most %u + %d)",
                        p->masked.len, c->lim->max_dim, SFL_MSG_SA_EXTRA);
        if ((m->masked = sfl__mallocarray(n, sizeof(uint32_t))) == NULL)
            return fail(c, SFL_ENOMEM, "no memory for the masked input");
        for (size_t i = 0; i < n; i++)
            m->masked[i] = (uint32_t)p->masked.data[4 * i] |
                           (uint32_t)p->masked.data[4 * i + 1] << 8 |
                           (uint32_t)p->masked.data[4 * i + 2] << 16 |
                           (uint32_t)p->masked.data[4 * i + 3] << 24;
        m->nmasked = (uint32_t)n;
    }
    if (p->n_reveals > sa_cap(c))
        return fail(c, SFL_ELIMIT, "%zu reveals exceed the limit of %zu", p->n_reveals,
                    sa_cap(c));
    if (p->n_reveals > 0 &&
        (m->reveals = sfl__calloc(p->n_reveals, sizeof(*m->reveals))) == NULL)
        return fail(c, SFL_ENOMEM, "no memory for the reveals");
    for (size_t i = 0; i < p->n_reveals; i++) {
        const Sfl__V1__SecAggReveal *r = p->reveals[i];

        if (r->x > UINT16_MAX)
            return fail(c, c->bad, "reveal %zu: x %u above 65535", i, r->x);
        m->reveals[i].of = r->of;
        m->reveals[i].self_mask = r->self_mask ? 1 : 0;
        m->reveals[i].x = (uint16_t)r->x;
        if ((rc = get_fixed(c, "reveal.y", &r->y, m->reveals[i].y, SFL_MSG_SA_SHARE)) < 0 ||
            (rc = get_fixed(c, "reveal.dealer_signature", &r->dealer_signature,
                            m->reveals[i].sig, SFL_MSG_SIG_BYTES)) < 0)
            return rc;
    }
    m->nreveals = (uint32_t)p->n_reveals;
    return check_sa_answer(c, m);
}

static const msg_type_t sa_answer_type = {"secagg answer", &sfl__v1__sec_agg_answer__descriptor,
    check_sa_answer, put_sa_answer, get_sa_answer, sizeof(sfl_msg_sa_answer_t),
    free_sa_answer, 0, NULL};

int sfl_msg_sa_answer_pack(const sfl_msg_sa_answer_t *m, uint8_t **out, size_t *len)
{
    return pack_msg(&sa_answer_type, m, NULL, out, len);
}

int sfl_msg_sa_answer_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim,
                             sfl_msg_sa_answer_t **out)
{
    int rc;

    *out = unpack_msg(&sa_answer_type, buf, len, lim, 0, NULL, &rc);
    return rc;
}

/* ---- Task, Wait ---------------------------------------------------------------- */

/* Everything but the model, which pack encodes and unpack decodes. */
static int check_task(const chk_t *c, const void *p)
{
    const sfl_task_t *t = p;
    int rc;

    if ((rc = check_id(c, "job_id", t->job_id)) < 0 ||
        (!t->statistics && (rc = check_id(c, "round", t->round)) < 0) ||
        (rc = check_bool(c, "statistics", t->statistics)) < 0 ||
        (rc = check_bool(c, "has_moments", t->has_moments)) < 0 ||
        (rc = check_str(c, "algorithm", t->algorithm, SFL_MSG_NAME_LEN, 1)) < 0 ||
        (rc = check_params(c, &t->params)) < 0 ||
        (rc = check_str(c, "loss", t->loss, SFL_MSG_NAME_LEN, 1)) < 0 ||
        (rc = check_labels(c, "labels", t->nlabels, t->labels)) < 0 ||
        (rc = check_str(c, "dictionary", t->dictionary, SFL_MSG_NAME_LEN, 0)) < 0 ||
        (rc = check_enc(c, "value_encoding", t->value_encoding)) < 0 ||
        (rc = check_enum(c, "update_mode", (int)t->update_mode, 1, 2)) < 0)
        return rc;
    if (t->dimension == 0)
        return fail(c, c->bad, "dimension missing (0)");
    if (t->model != NULL && t->max_update_nnz > t->model->dim)
        return fail(c, c->bad, "max_update_nnz %u exceeds the model dimension %u",
                    t->max_update_nnz, t->model->dim);
    if ((t->secagg != NULL) != (t->update_mode == SFL_UPDATE_MODE_SECURE_AGG))
        return fail(c, c->bad, "secagg parameters %s update mode %d",
                    t->secagg ? "with" : "missing for", (int)t->update_mode);
    if (t->secagg != NULL && (rc = check_sa_round(c, t->secagg)) < 0)
        return rc;
    if ((t->rows | t->clients | t->iterations | t->first_iteration | t->round_iterations) != 0 &&
        (t->rows == 0 || t->clients == 0 || t->round_iterations == 0 ||
         t->first_iteration > t->iterations ||
         t->round_iterations > t->iterations - t->first_iteration))
        return fail(c, c->bad, "vertical round: rows %u, clients %u, iterations %llu + %u of "
                    "%llu", t->rows, t->clients, (unsigned long long)t->first_iteration,
                    t->round_iterations, (unsigned long long)t->iterations);
    /* The statistics round is round 0 of a horizontal job, sealed or
     * secure aggregation, and carries no statistics of its own. */
    if (t->statistics && (t->round != 0 ||
                          (t->update_mode != SFL_UPDATE_MODE_SEALED &&
                           t->update_mode != SFL_UPDATE_MODE_SECURE_AGG) ||
                          t->rows != 0 || t->has_moments))
        return fail(c, c->bad, "statistics task: round %llu (want 0), update mode %d (want "
                    "sealed or secure aggregation), %s, %s", (unsigned long long)t->round, (int)t->update_mode,
                    t->rows ? "vertical" : "horizontal",
                    t->has_moments ? "moments_hash set" : "no moments_hash");
    if (t->has_moments != (t->standardize_eps != 0) ||
        (t->has_moments && !(isfinite(t->standardize_eps) && t->standardize_eps > 0)))
        return fail(c, c->bad, "moments_hash %s with standardize_eps %g (want both or neither, "
                    "eps > 0 and finite)", t->has_moments ? "present" : "absent",
                    t->standardize_eps);
    return 0;
}

static void put_params(const sfl_param_list_t *p, wire_t *w)
{
    for (uint32_t i = 0; i < p->n; i++) {
        sfl__v1__param__init(&w->param[i]);
        w->param[i].name = str(p->v[i].name);
        w->param[i].value = p->v[i].value;
        w->params[i] = &w->param[i];
    }
    w->pp.n_values = p->n;
    w->pp.values = w->params;
}

/* model_hash goes out as the hash of the model as encoded, never the
 * struct's field (sfl_msg_task_sign_bytes copies it back). */
static int put_task(const chk_t *c, const void *p, wire_t *w)
{
    const sfl_task_t *t = p;
    Sfl__V1__Task *pb = &w->pb.task;
    int rc;

    rc = put_sparse(c, "model", t->model, t->model_encoding, &w->sv, &w->data);
    if (rc < 0)
        return rc;
    crypto_generichash(w->hash, SFL_MSG_HASH_BYTES, w->sv.data.data, w->sv.data.len, NULL, 0);
    put_params(&t->params, w);
    pb->job_id = t->job_id;
    pb->round = t->round;
    pb->attempt = t->attempt;
    pb->algorithm = str(t->algorithm);
    pb->params = &w->pp;
    pb->loss = str(t->loss);
    pb->dimension = t->dimension;
    pb->n_labels = t->nlabels;
    pb->labels = (double *)(uintptr_t)t->labels;
    pb->dictionary = str(t->dictionary);
    pb->seed = t->seed;
    pb->value_encoding = (Sfl__V1__ValueEncoding)(t->value_encoding + 1);
    pb->update_mode = (Sfl__V1__UpdateMode)t->update_mode;
    pb->model = &w->sv;
    pb->model_hash = bin(w->hash, SFL_MSG_HASH_BYTES);
    pb->deadline_ms = t->deadline_ms;
    pb->round_nonce = bin(t->round_nonce, SFL_MSG_NONCE_BYTES);
    pb->round_key = bin(t->round_key, SFL_MSG_KEY_BYTES);
    pb->max_update_nnz = t->max_update_nnz;
    pb->rows = t->rows;
    pb->clients = t->clients;
    pb->iterations = t->iterations;
    pb->first_iteration = t->first_iteration;
    pb->round_iterations = t->round_iterations;
    pb->statistics = t->statistics;
    if (t->has_moments)
        pb->moments_hash = bin(t->moments_hash, SFL_MSG_HASH_BYTES);
    pb->standardize_eps = t->standardize_eps;
    if (t->secagg != NULL) {
        if ((rc = put_sa_round(c, t->secagg, w)) < 0)
            return rc;
        pb->secagg = &w->sa_round;
    }
    return 0;
}

/* Unpacked by sfl_msg_task_or_wait_unpack, from inside a SignedTask. */
static const msg_type_t task_type = {"task", &sfl__v1__task__descriptor, check_task, put_task, NULL,
    0, NULL, 0, NULL};

int sfl_msg_task_sign_bytes(sfl_task_t *t, uint8_t **out, size_t *len)
{
    return pack_msg(&task_type, t, t->model_hash, out, len);
}

/* The arguments of sfl_msg_task_pack. */
typedef struct signed_task {
    const uint8_t *task;
    size_t len;
    const uint8_t *signature;
    const double *moments;
    size_t nmoments;
} signed_task_t;

static int put_signed_task(const chk_t *c, const void *p, wire_t *w)
{
    const signed_task_t *m = p;

    if (m->task == NULL || m->len == 0)
        return fail(c, SFL_EINVAL, "no task bytes (use sfl_msg_task_sign_bytes)");
    w->signed_task.task = bin(m->task, m->len);
    w->signed_task.signature = bin(m->signature, SFL_MSG_SIG_BYTES);
    if (m->nmoments > 0) {
        if (m->nmoments > SIZE_MAX / 8 || (w->data = sfl__malloc(m->nmoments * 8)) == NULL)
            return fail(c, SFL_ENOMEM, "no memory for %zu moments", m->nmoments);
        if (sfl_msg_values_encode(m->moments, m->nmoments, 0, w->data) < 0)
            return fail(c, SFL_EINVAL, "moments: %s", sfl_last_error());
        w->signed_task.moments = bin(w->data, m->nmoments * 8);
    }
    w->pb.task_or_wait.kind_case = SFL__V1__TASK_OR_WAIT__KIND_TASK;
    w->pb.task_or_wait.task = &w->signed_task;
    return 0;
}

static const msg_type_t signed_task_type = {"task", &sfl__v1__task_or_wait__descriptor, NULL,
    put_signed_task, NULL, 0, NULL, 0, NULL};

int sfl_msg_task_pack(const uint8_t *task, size_t task_len,
                      const uint8_t signature[SFL_MSG_SIG_BYTES], uint8_t **out, size_t *len)
{
    const signed_task_t m = {task, task_len, signature, NULL, 0};

    return pack_msg(&signed_task_type, &m, NULL, out, len);
}

int sfl_msg_task_pack_moments(const uint8_t *task, size_t task_len,
                              const uint8_t signature[SFL_MSG_SIG_BYTES],
                              const double *moments, size_t n, uint8_t **out, size_t *len)
{
    const signed_task_t m = {task, task_len, signature, moments, n};

    if (n > 0 && moments == NULL) {
        clear_out(out, len);
        return sfl__fail(SFL_EINVAL, "task: NULL moments");
    }
    return pack_msg(&signed_task_type, &m, NULL, out, len);
}

void sfl_msg_moments_hash(const double *moments, size_t n, uint8_t hash[SFL_MSG_HASH_BYTES])
{
    crypto_generichash_state st;

    /* the wire bytes, hashed a value at a time: no copy of the vector */
    crypto_generichash_init(&st, NULL, 0, SFL_MSG_HASH_BYTES);
    for (size_t i = 0; i < n; i++) {
        uint8_t b[8];
        uint64_t u;

        memcpy(&u, &moments[i], 8);
        for (int k = 0; k < 8; k++)
            b[k] = (uint8_t)(u >> (8 * k));
        crypto_generichash_update(&st, b, sizeof(b));
    }
    crypto_generichash_final(&st, hash, SFL_MSG_HASH_BYTES);
}

static int check_wait(const chk_t *c, const void *p)
{
    const sfl_wait_t *w = p;

    if (w->retry_after_ms == 0)
        return fail(c, c->bad, "retry_after_ms missing (0)");
    return check_str(c, "reason", w->reason, SFL_MSG_TEXT_LEN, 0);
}

static int put_wait(const chk_t *c, const void *p, wire_t *w)
{
    const sfl_wait_t *m = p;

    (void)c;
    w->wait.retry_after_ms = m->retry_after_ms;
    w->wait.reason = str(m->reason);
    w->pb.task_or_wait.kind_case = SFL__V1__TASK_OR_WAIT__KIND_WAIT;
    w->pb.task_or_wait.wait = &w->wait;
    return 0;
}

static const msg_type_t wait_type = {"wait", &sfl__v1__task_or_wait__descriptor, check_wait,
    put_wait, NULL, 0, NULL, 0, NULL};

int sfl_msg_wait_pack(const sfl_wait_t *w, uint8_t **out, size_t *len)
{
    return pack_msg(&wait_type, w, NULL, out, len);
}

/* ---- vertical steps and answers ---------------------------------------------- */

size_t sfl_msg_values_bytes(size_t n, size_t nints)
{
    return nints > n ? 0 : 4 * nints + 8 * (n - nints);
}

int sfl_msg_values_encode(const double *v, size_t n, size_t nints, uint8_t *out)
{
    if (nints > n)
        return sfl__fail(SFL_EINVAL, "%zu integers in a message of %zu values", nints, n);
    for (size_t i = 0; i < n; i++) {
        if (i < nints) {
            uint32_t u;

            if (!(v[i] >= INT32_MIN && v[i] <= INT32_MAX) || v[i] != (double)(int32_t)v[i])
                return sfl__fail(SFL_EINVAL, "message value %zu (%.17g) is not an int32", i,
                                 v[i]);
            u = (uint32_t)(int32_t)v[i];
            for (int b = 0; b < 4; b++)
                *out++ = (uint8_t)(u >> (8 * b));
        } else {
            uint64_t u;

            if (!isfinite(v[i]))
                return sfl__fail(SFL_EINVAL, "message value %zu is not finite", i);
            memcpy(&u, &v[i], 8);
            for (int b = 0; b < 8; b++)
                *out++ = (uint8_t)(u >> (8 * b));
        }
    }
    return 0;
}

int sfl_msg_values_decode(const uint8_t *buf, size_t len, size_t n, size_t nints, double *v)
{
    if (nints > n || len != sfl_msg_values_bytes(n, nints))
        return sfl__fail(SFL_EPARSE, "message of %zu bytes, expected %zu (%zu values, %zu of "
                         "them int32)", len, sfl_msg_values_bytes(n, nints), n, nints);
    for (size_t i = 0; i < n; i++) {
        if (i < nints) {
            uint32_t u = 0;

            for (int b = 0; b < 4; b++)
                u |= (uint32_t)*buf++ << (8 * b);
            v[i] = (double)(int32_t)u;
        } else {
            uint64_t u = 0;

            for (int b = 0; b < 8; b++)
                u |= (uint64_t)*buf++ << (8 * b);
            memcpy(&v[i], &u, 8);
            if (!isfinite(v[i]))
                return sfl__fail(SFL_EPARSE, "message value %zu is not finite", i);
        }
    }
    return 0;
}

static int check_vstep(const chk_t *c, const void *p)
{
    const sfl_vstep_t *m = p;
    int rc;

    if ((rc = check_id(c, "job_id", m->job_id)) < 0 || (rc = check_id(c, "round", m->round)) < 0)
        return rc;
    if (m->nbcast == 0 || m->bcast == NULL)
        return fail(c, c->bad, "broadcast missing");
    for (uint32_t i = 0; i < m->nbcast; i++)
        if (!isfinite(m->bcast[i]))
            return fail(c, c->bad, "broadcast value %u is not finite", i);
    return 0;
}

static int put_vstep(const chk_t *c, const void *p, wire_t *w)
{
    const sfl_vstep_t *m = p;
    size_t n = sfl_msg_values_bytes(m->nbcast, 0);

    if ((w->data = sfl__malloc(n)) == NULL)
        return fail(c, SFL_ENOMEM, "no memory for the broadcast");
    if (sfl_msg_values_encode(m->bcast, m->nbcast, 0, w->data) < 0)
        return fail(c, SFL_EINVAL, "%s", sfl_last_error());
    w->vstep.job_id = m->job_id;
    w->vstep.round = m->round;
    w->vstep.attempt = m->attempt;
    w->vstep.iteration = m->iteration;
    w->vstep.broadcast = bin(w->data, n);
    w->pb.task_or_wait.kind_case = SFL__V1__TASK_OR_WAIT__KIND_STEP;
    w->pb.task_or_wait.step = &w->vstep;
    return 0;
}

static const msg_type_t vstep_type = {"step", &sfl__v1__task_or_wait__descriptor, check_vstep,
    put_vstep, NULL, 0, NULL, 0, NULL};

int sfl_msg_vstep_pack(const sfl_vstep_t *st, uint8_t **out, size_t *len)
{
    return pack_msg(&vstep_type, st, NULL, out, len);
}

void sfl_msg_vstep_clear(sfl_vstep_t *st)
{
    if (st == NULL)
        return;
    sfl__free(st->bcast);
    memset(st, 0, sizeof(*st));
}

static int get_vstep(const chk_t *c, const Sfl__V1__VerticalStep *pb, sfl_vstep_t *st)
{
    size_t n;
    int rc;

    memset(st, 0, sizeof(*st));
    st->job_id = pb->job_id;
    st->round = pb->round;
    st->attempt = pb->attempt;
    st->iteration = pb->iteration;
    n = pb->broadcast.len / 8;
    if (pb->broadcast.len % 8 != 0 || n == 0)
        return fail(c, c->bad, "broadcast of %zu bytes is not a whole number of float64s",
                    pb->broadcast.len);
    if (n > c->lim->max_dim)
        return fail(c, SFL_ELIMIT, "broadcast of %zu values exceeds the limit of %u", n,
                    c->lim->max_dim);
    if ((st->bcast = sfl__mallocarray(n, sizeof(double))) == NULL)
        return fail(c, SFL_ENOMEM, "no memory for the broadcast");
    st->nbcast = (uint32_t)n;
    if (sfl_msg_values_decode(pb->broadcast.data, pb->broadcast.len, n, 0, st->bcast) < 0)
        rc = fail(c, c->bad, "broadcast: %s", sfl_last_error());
    else
        rc = check_vstep(c, st);
    if (rc < 0)
        sfl_msg_vstep_clear(st);
    return rc;
}

static int check_step_answer(const chk_t *c, const void *p)
{
    const sfl_step_answer_t *m = p;
    int rc;

    if ((rc = check_id(c, "job_id", m->job_id)) < 0 ||
        (rc = check_id(c, "round", m->round)) < 0 ||
        (rc = check_id(c, "agent_id", m->agent_id)) < 0)
        return rc;
    if (m->msg_len == 0 || m->msg == NULL)
        return fail(c, c->bad, "message missing");
    if (!isfinite(m->objective) || (m->objective_rows == 0 && m->objective != 0))
        return fail(c, c->bad, "objective %g over %llu rows", m->objective,
                    (unsigned long long)m->objective_rows);
    return 0;
}

static int put_step_answer(const chk_t *c, const void *p, wire_t *w)
{
    const sfl_step_answer_t *m = p;
    Sfl__V1__StepAnswer *pb = &w->pb.step_answer;

    (void)c;
    pb->job_id = m->job_id;
    pb->round = m->round;
    pb->attempt = m->attempt;
    pb->agent_id = m->agent_id;
    pb->iteration = m->iteration;
    pb->message = bin(m->msg, m->msg_len);
    pb->objective = m->objective;
    pb->objective_rows = m->objective_rows;
    return 0;
}

static int get_step_answer(const chk_t *c, void *p, void *out)
{
    Sfl__V1__StepAnswer *pb = p;
    sfl_step_answer_t *m = out;

    m->job_id = pb->job_id;
    m->round = pb->round;
    m->attempt = pb->attempt;
    m->agent_id = pb->agent_id;
    m->iteration = pb->iteration;
    /* taken over, as get_update does */
    m->msg = pb->message.data;
    m->msg_len = pb->message.len;
    pb->message.data = NULL;
    pb->message.len = 0;
    m->objective = pb->objective;
    m->objective_rows = pb->objective_rows;
    return check_step_answer(c, m);
}

void sfl_msg_step_answer_free(sfl_step_answer_t *m)
{
    if (m != NULL)
        sfl__free(m->msg);
    sfl__free(m);
}

static void free_step_answer(void *m)
{
    sfl_msg_step_answer_free(m);
}

static const msg_type_t step_answer_type = {"step answer", &sfl__v1__step_answer__descriptor,
    check_step_answer, put_step_answer, get_step_answer, sizeof(sfl_step_answer_t),
    free_step_answer, 0, NULL};

int sfl_msg_step_answer_pack(const sfl_step_answer_t *m, uint8_t **out, size_t *len)
{
    return pack_msg(&step_answer_type, m, NULL, out, len);
}

int sfl_msg_step_answer_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim,
                               sfl_step_answer_t **out)
{
    int rc;

    *out = unpack_msg(&step_answer_type, buf, len, lim, 0, NULL, &rc);
    return rc;
}

void sfl_msg_task_free(sfl_task_t *t)
{
    if (t == NULL)
        return;
    sfl_spvec_free(t->model);
    sa_round_free(t->secagg);
    sfl__free(t->signed_bytes);
    sfl__free(t->moments);
    sfl__free(t);
}

/* The inner Task of a SignedTask whose bytes are already in t->signed_bytes.
 * Not through unpack_msg: the bytes are the envelope's, the struct is
 * already allocated, and the model is decoded after the envelope is gone. */
static int get_task(const chk_t *c, const sfl_msg_limits_t *lim, sfl_task_t *t)
{
    Sfl__V1__Task *pb = NULL;
    uint8_t hash[SFL_MSG_HASH_BYTES];
    int v, rc;

    pb = unpack(task_type.desc, c, t->signed_bytes, t->signed_len, lim->max_message, &rc);
    if (pb == NULL)
        goto out;
    t->job_id = pb->job_id;
    t->round = pb->round;
    t->attempt = pb->attempt;
    t->dimension = pb->dimension;
    t->seed = pb->seed;
    t->deadline_ms = pb->deadline_ms;
    t->max_update_nnz = pb->max_update_nnz;
    t->rows = pb->rows;
    t->clients = pb->clients;
    t->iterations = pb->iterations;
    t->first_iteration = pb->first_iteration;
    t->round_iterations = pb->round_iterations;
    t->statistics = pb->statistics ? 1 : 0;
    t->standardize_eps = pb->standardize_eps;
    if (pb->moments_hash.len > 0) {
        t->has_moments = 1;
        if ((rc = get_fixed(c, "moments_hash", &pb->moments_hash, t->moments_hash,
                            SFL_MSG_HASH_BYTES)) < 0)
            goto out;
    }
    v = (int)pb->update_mode;
    if ((rc = get_str(c, "algorithm", pb->algorithm, t->algorithm, SFL_MSG_NAME_LEN)) < 0 ||
        (rc = get_params(c, pb->params, &t->params)) < 0 ||
        (rc = get_str(c, "loss", pb->loss, t->loss, SFL_MSG_NAME_LEN)) < 0 ||
        (rc = get_labels(c, "labels", pb->labels, pb->n_labels, &t->nlabels, t->labels)) < 0 ||
        (rc = get_str(c, "dictionary", pb->dictionary, t->dictionary, SFL_MSG_NAME_LEN)) < 0 ||
        (rc = get_enc(c, "value_encoding", (int)pb->value_encoding, &t->value_encoding)) < 0 ||
        (rc = check_enum(c, "update_mode", v, 1, 2)) < 0 ||
        (rc = get_fixed(c, "model_hash", &pb->model_hash, t->model_hash,
                        SFL_MSG_HASH_BYTES)) < 0 ||
        (rc = get_fixed(c, "round_nonce", &pb->round_nonce, t->round_nonce,
                        SFL_MSG_NONCE_BYTES)) < 0 ||
        (rc = get_fixed(c, "round_key", &pb->round_key, t->round_key, SFL_MSG_KEY_BYTES)) < 0)
        goto out;
    t->update_mode = (sfl_update_mode_t)v;
    if (pb->secagg != NULL && (rc = get_sa_round(c, pb->secagg, &t->secagg)) < 0)
        goto out;
    rc = get_sparse(c, "model", pb->model, lim->max_dim, lim->max_nnz, &t->model,
                    &t->model_encoding, hash);
    if (rc < 0)
        goto out;
    /* The signature covers both, so a mismatch means a broken coordinator;
     * checking here lets agents sign model_hash as "the model I trained
     * from" without hashing it themselves. */
    if (memcmp(hash, t->model_hash, SFL_MSG_HASH_BYTES) != 0) {
        rc = fail(c, c->bad, "model_hash does not match the model");
        goto out;
    }
    rc = check_task(c, t);
out:
    free_pb(pb);
    return rc;
}

/* SignedTask.moments of a checked task t: exactly SFL_MOMENTS_LEN(dimension)
 * finite float64s whose hash is the signed moments_hash (they travel
 * outside the signature), into t->moments. */
static int get_moments(const chk_t *c, sfl_task_t *t, const uint8_t *b, size_t len)
{
    size_t n = 1 + 2 * (size_t)t->dimension;
    uint8_t h[SFL_MSG_HASH_BYTES];

    if (!t->has_moments)
        return fail(c, c->bad, "moments without a moments_hash");
    if (len != 8 * n)
        return fail(c, c->bad, "moments are %zu bytes, want %zu (1 + 2 x %u float64s)", len,
                    8 * n, t->dimension);
    crypto_generichash(h, sizeof(h), b, len, NULL, 0);
    if (sodium_memcmp(h, t->moments_hash, sizeof(h)) != 0)
        return fail(c, c->bad, "moments do not match the signed moments_hash");
    if ((t->moments = sfl__mallocarray(n, sizeof(double))) == NULL)
        return fail(c, SFL_ENOMEM, "no memory for the moments");
    if (sfl_msg_values_decode(b, len, n, 0, t->moments) < 0)
        return fail(c, c->bad, "moments: %s", sfl_last_error());
    return 0;
}

/* Not through unpack_msg either: one envelope, two outcomes (an owned task
 * or a wait in place), each with its own detail prefix. */
int sfl_msg_task_or_wait_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim,
                                sfl_task_t **task, sfl_wait_t *wait)
{
    int kind;

    return sfl_msg_sub_unpack(buf, len, lim, task, wait, NULL, NULL, &kind);
}

int sfl_msg_sub_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim,
                       sfl_task_t **task, sfl_wait_t *wait, sfl_vstep_t *step,
                       sfl_msg_sa_stage_t *sa, int *kind)
{
    sfl_msg_limits_t tmp;
    const chk_t cs = {"subscribe message", SFL_EPARSE, limits(lim, &tmp), 0};
    const chk_t ct = {"task", SFL_EPARSE, cs.lim, 0};
    const chk_t cw = {"wait", SFL_EPARSE, cs.lim, 0};
    const chk_t cv = {"step", SFL_EPARSE, cs.lim, 0};
    Sfl__V1__TaskOrWait *pb = NULL;
    sfl_task_t *t = NULL;
    uint8_t *mb = NULL;
    size_t mlen = 0;
    int rc;

    assert(task != NULL && wait != NULL && kind != NULL);
    *task = NULL;
    *kind = 0;
    lim = cs.lim;
    pb = unpack(&sfl__v1__task_or_wait__descriptor, &cs, buf, len, lim->max_message, &rc);
    if (pb == NULL)
        goto out;
    if (pb->kind_case == SFL__V1__TASK_OR_WAIT__KIND_STEP && pb->step != NULL) {
        if (step == NULL)
            rc = fail(&cs, SFL_EPARSE, "a vertical step where none is expected");
        else if ((rc = get_vstep(&cv, pb->step, step)) == 0)
            *kind = 's';
        goto out;
    }
    if (pb->kind_case == SFL__V1__TASK_OR_WAIT__KIND_SECAGG && pb->secagg != NULL) {
        const chk_t ca = {"secagg stage", SFL_EPARSE, cs.lim, 0};

        if (sa == NULL)
            rc = fail(&cs, SFL_EPARSE, "a secure aggregation stage where none is expected");
        else if ((rc = get_sa_stage(&ca, pb->secagg, sa)) == 0)
            *kind = 'a';
        goto out;
    }
    if (pb->kind_case == SFL__V1__TASK_OR_WAIT__KIND_WAIT && pb->wait != NULL) {
        sfl_wait_t w;

        memset(&w, 0, sizeof(w));
        w.retry_after_ms = pb->wait->retry_after_ms;
        if ((rc = get_str(&cw, "reason", pb->wait->reason, w.reason, SFL_MSG_TEXT_LEN)) < 0 ||
            (rc = check_wait(&cw, &w)) < 0)
            goto out;
        *wait = w;
        *kind = 'w';
        goto out;
    }
    if (pb->kind_case != SFL__V1__TASK_OR_WAIT__KIND_TASK || pb->task == NULL) {
        rc = fail(&cs, SFL_EPARSE, "neither task, wait, step nor secagg stage");
        goto out;
    }
    t = sfl__calloc(1, sizeof(*t));
    if (t == NULL) {
        rc = fail(&ct, SFL_ENOMEM, "no memory");
        goto out;
    }
    rc = get_fixed(&ct, "signature", &pb->task->signature, t->signature, SFL_MSG_SIG_BYTES);
    if (rc < 0)
        goto out;
    if (pb->task->task.len == 0) {
        rc = fail(&ct, SFL_EPARSE, "signed task is empty");
        goto out;
    }
    /* Keep the signed bytes exactly as received: the agent verifies these,
     * never a re-encoding (see SignedTask in coordinator.proto). protobuf-c
     * allocated them with our allocator as a block of their own (freed field
     * by field in free_unpacked), so they are taken over, not copied. */
    t->signed_bytes = pb->task->task.data;
    t->signed_len = pb->task->task.len;
    pb->task->task.data = NULL;
    pb->task->task.len = 0;
    mb = pb->task->moments.data;
    mlen = pb->task->moments.len;
    pb->task->moments.data = NULL;
    pb->task->moments.len = 0;
    /* The envelope goes before the model is decoded, so peak memory is the
     * task bytes plus one copy of the model. */
    free_pb(pb);
    pb = NULL;
    rc = get_task(&ct, lim, t);
    if (rc < 0)
        goto out;
    if (mlen > 0 && (rc = get_moments(&ct, t, mb, mlen)) < 0)
        goto out;
    *task = t;
    *kind = 't';
    t = NULL;
out:
    sfl__free(mb);
    sfl_msg_task_free(t);
    free_pb(pb);
    return rc;
}

/* ---- Update, payload, ack --------------------------------------------------------- */

static int check_update(const chk_t *c, const void *p)
{
    const sfl_update_t *m = p;
    int rc;

    /* round 0: a statistics round's update */
    if ((rc = check_id(c, "job_id", m->job_id)) < 0 ||
        (rc = check_id(c, "agent_id", m->agent_id)) < 0 ||
        (rc = check_enum(c, "mode", (int)m->mode, 1, 2)) < 0)
        return rc;
    if (m->sealed_len == 0 || m->sealed == NULL)
        return fail(c, c->bad, "sealed payload missing");
    return 0;
}

static int put_update(const chk_t *c, const void *p, wire_t *w)
{
    const sfl_update_t *m = p;
    Sfl__V1__Update *pb = &w->pb.update;

    (void)c;
    pb->job_id = m->job_id;
    pb->round = m->round;
    pb->attempt = m->attempt;
    pb->agent_id = m->agent_id;
    pb->mode = (Sfl__V1__UpdateMode)m->mode;
    pb->sealed = bin(m->sealed, m->sealed_len);
    return 0;
}

static int get_update(const chk_t *c, void *p, void *out)
{
    Sfl__V1__Update *pb = p;
    sfl_update_t *m = out;

    m->job_id = pb->job_id;
    m->round = pb->round;
    m->attempt = pb->attempt;
    m->agent_id = pb->agent_id;
    m->mode = (sfl_update_mode_t)pb->mode;
    /* protobuf-c allocated the bytes with our allocator as their own block
     * (freed field by field in free_unpacked), so they can be taken over
     * instead of copied: the sealed update is the one big field here. */
    m->sealed = pb->sealed.data;
    m->sealed_len = pb->sealed.len;
    pb->sealed.data = NULL;
    pb->sealed.len = 0;
    return check_update(c, m);
}

void sfl_msg_update_free(sfl_update_t *m)
{
    if (m != NULL)
        sfl__free(m->sealed);
    sfl__free(m);
}

static void free_update(void *m)
{
    sfl_msg_update_free(m);
}

static const msg_type_t update_type = {"update", &sfl__v1__update__descriptor, check_update,
    put_update, get_update, sizeof(sfl_update_t), free_update, 0, NULL};

int sfl_msg_update_pack(const sfl_update_t *m, uint8_t **out, size_t *len)
{
    return pack_msg(&update_type, m, NULL, out, len);
}

int sfl_msg_update_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim,
                          sfl_update_t **out)
{
    int rc;

    *out = unpack_msg(&update_type, buf, len, lim, 0, NULL, &rc);
    return rc;
}

static int check_payload(const chk_t *c, const void *p)
{
    const sfl_payload_t *m = p;

    int rc;

    if (m->samples == 0)
        return fail(c, c->bad, "samples missing (0)");
    if ((rc = check_finite(c, "train_loss", m->train_loss)) < 0 ||
        (rc = check_finite(c, "eval_accuracy", m->eval_accuracy)) < 0 ||
        (rc = check_finite(c, "eval_mse", m->eval_mse)) < 0 ||
        (rc = check_finite(c, "personal_accuracy", m->personal_accuracy)) < 0)
        return rc;
    if (m->eval_accuracy < 0 || m->eval_accuracy > 1)
        return fail(c, c->bad, "eval_accuracy %g is not in [0, 1]", m->eval_accuracy);
    if (m->personal_accuracy < 0 || m->personal_accuracy > 1)
        return fail(c, c->bad, "personal_accuracy %g is not in [0, 1]", m->personal_accuracy);
    if (m->eval_mse < 0)
        return fail(c, c->bad, "eval_mse %g is negative", m->eval_mse);
    if (m->eval_samples == 0 &&
        (m->eval_accuracy != 0 || m->eval_mse != 0 || m->personal_accuracy != 0))
        return fail(c, c->bad, "eval metrics without eval_samples");
    return 0;
}

static int put_payload(const chk_t *c, const void *p, wire_t *w)
{
    const sfl_payload_t *m = p;
    Sfl__V1__UpdatePayload *pb = &w->pb.payload;

    pb->update = &w->sv;
    pb->samples = m->samples;
    pb->train_loss = m->train_loss;
    pb->eval_samples = m->eval_samples;
    pb->eval_accuracy = m->eval_accuracy;
    pb->eval_mse = m->eval_mse;
    pb->personal_accuracy = m->personal_accuracy;
    return put_sparse(c, "update", m->update, m->encoding, &w->sv, &w->data);
}

static int get_payload(const chk_t *c, void *p, void *out)
{
    const Sfl__V1__UpdatePayload *pb = p;
    sfl_payload_t *m = out;
    int rc;

    m->samples = pb->samples;
    m->train_loss = pb->train_loss;
    m->eval_samples = pb->eval_samples;
    m->eval_accuracy = pb->eval_accuracy;
    m->eval_mse = pb->eval_mse;
    m->personal_accuracy = pb->personal_accuracy;
    if ((rc = check_payload(c, m)) < 0)
        return rc;
    /* Checked before decoding so a wrong-sized vector is never allocated. */
    if (pb->update != NULL && pb->update->dim != c->dim)
        return fail(c, SFL_EDIM, "update.dim is %u, the task's model has %u", pb->update->dim,
                    c->dim);
    return get_sparse(c, "update", pb->update, c->dim, c->lim->max_nnz, &m->update,
                      &m->encoding, NULL);
}

/* The plaintext update is private to its agent: wiped before it is freed. */
void sfl_msg_payload_free(sfl_payload_t *m)
{
    if (m != NULL && m->update != NULL) {
        if (m->update->val != NULL)
            sodium_memzero(m->update->val, m->update->cap * sizeof(double));
        if (m->update->idx != NULL)
            sodium_memzero(m->update->idx, m->update->cap * sizeof(uint32_t));
    }
    if (m != NULL)
        sfl_spvec_free(m->update);
    sfl__free(m);
}

static void wipe_payload_pb(void *p)
{
    Sfl__V1__UpdatePayload *pb = p;

    if (pb->update != NULL && pb->update->data.data != NULL)
        sodium_memzero(pb->update->data.data, pb->update->data.len);
}

static void free_payload(void *m)
{
    sfl_msg_payload_free(m);
}

static const msg_type_t payload_type = {"update payload", &sfl__v1__update_payload__descriptor,
    check_payload, put_payload, get_payload, sizeof(sfl_payload_t), free_payload, 0,
    wipe_payload_pb};

int sfl_msg_payload_pack(const sfl_payload_t *m, uint8_t **out, size_t *len)
{
    return pack_msg(&payload_type, m, NULL, out, len);
}

int sfl_msg_payload_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim,
                           uint32_t dim, sfl_payload_t **out)
{
    int rc;

    *out = unpack_msg(&payload_type, buf, len, lim, dim, NULL, &rc);
    return rc;
}

static int check_ack(const chk_t *c, const void *p)
{
    const sfl_ack_t *m = p;
    int rc = check_enum(c, "status", (int)m->status, 1, 5);

    return rc < 0 ? rc : check_str(c, "reason", m->reason, SFL_MSG_TEXT_LEN, 0);
}

static int put_ack(const chk_t *c, const void *p, wire_t *w)
{
    const sfl_ack_t *m = p;
    Sfl__V1__UpdateAck *pb = &w->pb.ack;

    (void)c;
    pb->status = (Sfl__V1__AckStatus)m->status;
    pb->reason = str(m->reason);
    pb->job_id = m->job_id;
    pb->round = m->round;
    pb->attempt = m->attempt;
    return 0;
}

static int get_ack(const chk_t *c, void *p, void *out)
{
    const Sfl__V1__UpdateAck *pb = p;
    sfl_ack_t *m = out;
    int rc;

    m->status = (sfl_ack_status_t)pb->status;
    m->job_id = pb->job_id;
    m->round = pb->round;
    m->attempt = pb->attempt;
    if ((rc = get_str(c, "reason", pb->reason, m->reason, SFL_MSG_TEXT_LEN)) < 0)
        return rc;
    return check_ack(c, m);
}

static const msg_type_t ack_type = {"update ack", &sfl__v1__update_ack__descriptor, check_ack,
    put_ack, get_ack, sizeof(sfl_ack_t), NULL, 0, NULL};

int sfl_msg_ack_pack(const sfl_ack_t *m, uint8_t **out, size_t *len)
{
    return pack_msg(&ack_type, m, NULL, out, len);
}

int sfl_msg_ack_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim, sfl_ack_t *m)
{
    return unpack_in(&ack_type, buf, len, lim, m);
}

/* ---- Heartbeat ----------------------------------------------------------------- */

static int check_heartbeat_req(const chk_t *c, const void *p)
{
    const sfl_heartbeat_req_t *m = p;
    int rc;

    if ((rc = check_id(c, "agent_id", m->agent_id)) < 0 ||
        (rc = check_enum(c, "phase", (int)m->phase, 1, 3)) < 0 ||
        (rc = check_tags(c, "conditions", &m->conditions)) < 0)
        return rc;
    if (m->progress_permille > 1000)
        return fail(c, c->bad, "progress_permille %u exceeds 1000", m->progress_permille);
    return 0;
}

static int put_heartbeat_req(const chk_t *c, const void *p, wire_t *w)
{
    const sfl_heartbeat_req_t *m = p;
    Sfl__V1__HeartbeatRequest *pb = &w->pb.heartbeat_req;

    (void)c;
    pb->agent_id = m->agent_id;
    pb->phase = (Sfl__V1__AgentPhase)m->phase;
    pb->job_id = m->job_id;
    pb->round = m->round;
    pb->attempt = m->attempt;
    pb->progress_permille = m->progress_permille;
    put_tags(&m->conditions, w->tags[0], &pb->n_conditions, &pb->conditions);
    return 0;
}

static int get_heartbeat_req(const chk_t *c, void *p, void *out)
{
    const Sfl__V1__HeartbeatRequest *pb = p;
    sfl_heartbeat_req_t *m = out;
    int rc;

    m->agent_id = pb->agent_id;
    m->phase = (sfl_agent_phase_t)pb->phase;
    m->job_id = pb->job_id;
    m->round = pb->round;
    m->attempt = pb->attempt;
    m->progress_permille = pb->progress_permille;
    if ((rc = get_tags(c, "conditions", pb->conditions, pb->n_conditions, &m->conditions)) < 0)
        return rc;
    return check_heartbeat_req(c, m);
}

static const msg_type_t heartbeat_req_type = {"heartbeat", &sfl__v1__heartbeat_request__descriptor,
    check_heartbeat_req, put_heartbeat_req, get_heartbeat_req, sizeof(sfl_heartbeat_req_t), NULL,
    0, NULL};

int sfl_msg_heartbeat_req_pack(const sfl_heartbeat_req_t *m, uint8_t **out, size_t *len)
{
    return pack_msg(&heartbeat_req_type, m, NULL, out, len);
}

int sfl_msg_heartbeat_req_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim,
                                 sfl_heartbeat_req_t *m)
{
    return unpack_in(&heartbeat_req_type, buf, len, lim, m);
}

static int check_heartbeat_reply(const chk_t *c, const void *p)
{
    const sfl_heartbeat_reply_t *m = p;

    if (m->interval_ms == 0)
        return fail(c, c->bad, "interval_ms missing (0)");
    return check_bool(c, "abort", m->abort);
}

static int put_heartbeat_reply(const chk_t *c, const void *p, wire_t *w)
{
    const sfl_heartbeat_reply_t *m = p;
    Sfl__V1__HeartbeatReply *pb = &w->pb.heartbeat_reply;

    (void)c;
    pb->interval_ms = m->interval_ms;
    pb->abort = m->abort;
    pb->deadline_ms = m->deadline_ms;
    return 0;
}

static int get_heartbeat_reply(const chk_t *c, void *p, void *out)
{
    const Sfl__V1__HeartbeatReply *pb = p;
    sfl_heartbeat_reply_t *m = out;

    m->interval_ms = pb->interval_ms;
    m->abort = pb->abort ? 1 : 0;
    m->deadline_ms = pb->deadline_ms;
    return check_heartbeat_reply(c, m);
}

static const msg_type_t heartbeat_reply_type = {"heartbeat reply",
    &sfl__v1__heartbeat_reply__descriptor, check_heartbeat_reply, put_heartbeat_reply,
    get_heartbeat_reply, sizeof(sfl_heartbeat_reply_t), NULL, 0, NULL};

int sfl_msg_heartbeat_reply_pack(const sfl_heartbeat_reply_t *m, uint8_t **out, size_t *len)
{
    return pack_msg(&heartbeat_reply_type, m, NULL, out, len);
}

int sfl_msg_heartbeat_reply_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim,
                                   sfl_heartbeat_reply_t *m)
{
    return unpack_in(&heartbeat_reply_type, buf, len, lim, m);
}

/* ---- Admin: jobs ------------------------------------------------------------ */

static int check_job_spec(const chk_t *c, const void *p)
{
    const sfl_job_spec_t *m = p;
    int rc;

    if ((rc = check_str(c, "name", m->name, SFL_MSG_NAME_LEN, 1)) < 0 ||
        (rc = check_str(c, "algorithm", m->algorithm, SFL_MSG_NAME_LEN, 1)) < 0 ||
        (rc = check_params(c, &m->params)) < 0 ||
        (rc = check_str(c, "loss", m->loss, SFL_MSG_NAME_LEN, 1)) < 0 ||
        (rc = check_labels(c, "labels", m->nlabels, m->labels)) < 0 ||
        (rc = check_finite(c, "over_selection", m->over_selection)) < 0 ||
        (rc = check_enc(c, "value_encoding", m->value_encoding)) < 0 ||
        (rc = check_tags(c, "required_conditions", &m->required_conditions)) < 0 ||
        (rc = check_str(c, "dictionary", m->dictionary, SFL_MSG_NAME_LEN, 0)) < 0 ||
        (rc = check_bool(c, "paused", m->paused)) < 0 ||
        (rc = check_bool(c, "ordered_aggregation", m->ordered_aggregation)) < 0 ||
        (rc = check_finite(c, "max_update_norm", m->max_update_norm)) < 0 ||
        (rc = check_finite(c, "max_samples", m->max_samples)) < 0 ||
        (rc = check_bool(c, "secure_aggregation", m->secagg)) < 0 ||
        (rc = check_finite(c, "secagg_clip", m->sa_clip)) < 0 ||
        (rc = check_finite(c, "secagg_max_weight", m->sa_max_weight)) < 0 ||
        (rc = check_bool(c, "standardize", m->standardize)) < 0 ||
        (rc = check_finite(c, "standardize_eps", m->standardize_eps)) < 0 ||
        (rc = check_finite(c, "standardize_bound", m->standardize_bound)) < 0)
        return rc;
    if (m->max_update_norm < 0 || m->max_samples < 0 || m->sa_clip < 0 || m->sa_max_weight < 0 ||
        m->standardize_eps < 0 || m->standardize_bound < 0)
        return fail(c, c->bad, "max_update_norm, max_samples, secagg_clip, "
                    "secagg_max_weight, standardize_eps and standardize_bound must be >= 0");
    if (m->sa_degree % 2 != 0)
        return fail(c, c->bad, "secagg_degree %u (need 0 or even)", m->sa_degree);
    if (m->dimension == 0)
        return fail(c, c->bad, "dimension missing (0)");
    if (m->rounds == 0)
        return fail(c, c->bad, "rounds missing (0)");
    if (m->cohort_size == 0)
        return fail(c, c->bad, "cohort_size missing (0)");
    if (m->min_quorum == 0 || m->min_quorum > m->cohort_size)
        return fail(c, c->bad, "min_quorum %u not in [1, cohort_size %u]", m->min_quorum,
                    m->cohort_size);
    if (m->over_selection < 0)
        return fail(c, c->bad, "over_selection %g is negative", m->over_selection);
    if (m->round_deadline_ms == 0)
        return fail(c, c->bad, "round_deadline_ms missing (0)");
    if (m->max_attempts == 0)
        return fail(c, c->bad, "max_attempts missing (0)");
    if (m->heartbeat_timeout_ms == 0)
        return fail(c, c->bad, "heartbeat_timeout_ms missing (0)");
    return 0;
}

static int put_job_spec(const chk_t *c, const void *p, wire_t *w)
{
    const sfl_job_spec_t *m = p;
    Sfl__V1__JobSpec *js = &w->spec;

    (void)c;
    put_params(&m->params, w);
    js->name = str(m->name);
    js->algorithm = str(m->algorithm);
    js->params = &w->pp;
    js->loss = str(m->loss);
    js->dimension = m->dimension;
    js->n_labels = m->nlabels;
    js->labels = (double *)(uintptr_t)m->labels;
    js->rounds = m->rounds;
    js->cohort_size = m->cohort_size;
    js->over_selection = m->over_selection;
    js->min_quorum = m->min_quorum;
    js->round_deadline_ms = m->round_deadline_ms;
    js->value_encoding = (Sfl__V1__ValueEncoding)(m->value_encoding + 1);
    js->seed = m->seed;
    put_tags(&m->required_conditions, w->tags[0], &js->n_required_conditions,
             &js->required_conditions);
    js->dictionary = str(m->dictionary);
    js->max_attempts = m->max_attempts;
    js->paused = m->paused;
    js->heartbeat_timeout_ms = m->heartbeat_timeout_ms;
    js->ordered_aggregation = m->ordered_aggregation;
    js->max_update_norm = m->max_update_norm;
    js->max_samples = m->max_samples;
    js->rows = m->rows;
    js->iterations_per_round = m->iterations_per_round;
    js->secure_aggregation = m->secagg;
    js->secagg_threshold = m->sa_threshold;
    js->secagg_support = m->sa_support;
    js->secagg_topk = m->sa_topk;
    js->secagg_clip = m->sa_clip;
    js->secagg_max_weight = m->sa_max_weight;
    js->secagg_degree = m->sa_degree;
    js->standardize = m->standardize;
    js->standardize_eps = m->standardize_eps;
    js->standardize_bound = m->standardize_bound;
    w->pb.create_job.spec = js;
    return 0;
}

static int get_job_spec(const chk_t *c, void *p, void *out)
{
    const Sfl__V1__JobSpec *js = ((const Sfl__V1__CreateJobRequest *)p)->spec;
    sfl_job_spec_t *m = out;
    int rc;

    if (js == NULL)
        return fail(c, SFL_EPARSE, "spec missing");
    if ((rc = get_str(c, "name", js->name, m->name, SFL_MSG_NAME_LEN)) < 0 ||
        (rc = get_str(c, "algorithm", js->algorithm, m->algorithm, SFL_MSG_NAME_LEN)) < 0 ||
        (rc = get_params(c, js->params, &m->params)) < 0 ||
        (rc = get_str(c, "loss", js->loss, m->loss, SFL_MSG_NAME_LEN)) < 0 ||
        (rc = get_labels(c, "labels", js->labels, js->n_labels, &m->nlabels, m->labels)) < 0 ||
        (rc = get_enc(c, "value_encoding", (int)js->value_encoding, &m->value_encoding)) < 0 ||
        (rc = get_tags(c, "required_conditions", js->required_conditions,
                       js->n_required_conditions, &m->required_conditions)) < 0 ||
        (rc = get_str(c, "dictionary", js->dictionary, m->dictionary, SFL_MSG_NAME_LEN)) < 0)
        return rc;
    m->dimension = js->dimension;
    m->rounds = js->rounds;
    m->cohort_size = js->cohort_size;
    m->over_selection = js->over_selection;
    m->min_quorum = js->min_quorum;
    m->round_deadline_ms = js->round_deadline_ms;
    m->seed = js->seed;
    m->max_attempts = js->max_attempts;
    m->paused = js->paused ? 1 : 0;
    m->heartbeat_timeout_ms = js->heartbeat_timeout_ms;
    m->ordered_aggregation = js->ordered_aggregation ? 1 : 0;
    m->max_update_norm = js->max_update_norm;
    m->max_samples = js->max_samples;
    m->rows = js->rows;
    m->iterations_per_round = js->iterations_per_round;
    m->secagg = js->secure_aggregation ? 1 : 0;
    m->sa_threshold = js->secagg_threshold;
    m->sa_support = js->secagg_support;
    m->sa_topk = js->secagg_topk;
    m->sa_clip = js->secagg_clip;
    m->sa_max_weight = js->secagg_max_weight;
    m->sa_degree = js->secagg_degree;
    m->standardize = js->standardize ? 1 : 0;
    m->standardize_eps = js->standardize_eps;
    m->standardize_bound = js->standardize_bound;
    return check_job_spec(c, m);
}

static const msg_type_t create_job_type = {"job spec", &sfl__v1__create_job_request__descriptor,
    check_job_spec, put_job_spec, get_job_spec, sizeof(sfl_job_spec_t), NULL, 0, NULL};

int sfl_msg_create_job_pack(const sfl_job_spec_t *m, uint8_t **out, size_t *len)
{
    return pack_msg(&create_job_type, m, NULL, out, len);
}

int sfl_msg_create_job_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim,
                              sfl_job_spec_t *m)
{
    return unpack_in(&create_job_type, buf, len, lim, m);
}

static int check_job_status(const chk_t *c, const void *p)
{
    const sfl_job_status_t *m = p;
    int rc;

    if ((rc = check_id(c, "job_id", m->job_id)) < 0 ||
        (rc = check_str(c, "name", m->name, SFL_MSG_NAME_LEN, 0)) < 0 ||
        (rc = check_str(c, "algorithm", m->algorithm, SFL_MSG_NAME_LEN, 0)) < 0 ||
        (rc = check_enum(c, "state", (int)m->state, 1, 6)) < 0 ||
        (rc = check_enum(c, "round_state", (int)m->round_state, 0, 4)) < 0 ||
        (rc = check_str(c, "error", m->error, SFL_MSG_TEXT_LEN, 0)) < 0 ||
        (rc = check_str(c, "loss", m->loss, SFL_MSG_NAME_LEN, 0)) < 0 ||
        (rc = check_finite(c, "last_train_loss", m->last_train_loss)) < 0 ||
        (rc = check_finite(c, "last_eval_accuracy", m->last_eval_accuracy)) < 0 ||
        (rc = check_finite(c, "last_eval_mse", m->last_eval_mse)) < 0 ||
        (rc = check_finite(c, "last_personal_accuracy", m->last_personal_accuracy)) < 0 ||
        (rc = check_finite(c, "privacy_epsilon", m->privacy_epsilon)) < 0 ||
        (rc = check_finite(c, "privacy_delta", m->privacy_delta)) < 0 ||
        (rc = check_finite(c, "privacy_spent", m->privacy_spent)) < 0 ||
        (rc = check_finite(c, "privacy_spent_rdp", m->privacy_spent_rdp)) < 0 ||
        (rc = check_str(c, "waiting", m->waiting, SFL_MSG_TEXT_LEN, 0)) < 0 ||
        (rc = check_str(c, "quarantine", m->quarantine, SFL_MSG_TEXT_LEN, 0)) < 0)
        return rc;
    if ((m->quarantined == 0) != (m->quarantine[0] == '\0'))
        return fail(c, c->bad, "quarantine text without quarantined agents, or the reverse");
    if (m->statistics > 2)
        return fail(c, c->bad, "statistics %u (want 0, 1 or 2)", m->statistics);
    if (m->privacy_epsilon < 0 || m->privacy_delta < 0 || m->privacy_spent < 0 ||
        m->privacy_spent_rdp < 0)
        return fail(c, c->bad, "privacy ledger values must be >= 0");
    return 0;
}

static void put_job_status(const sfl_job_status_t *m, Sfl__V1__JobStatus *o)
{
    o->job_id = m->job_id;
    o->name = str(m->name);
    o->algorithm = str(m->algorithm);
    o->state = (Sfl__V1__JobState)m->state;
    o->committed_round = m->committed_round;
    o->rounds = m->rounds;
    o->round_state = (Sfl__V1__RoundState)m->round_state;
    o->attempt = m->attempt;
    o->selected = m->selected;
    o->accepted = m->accepted;
    o->cohort_size = m->cohort_size;
    o->min_quorum = m->min_quorum;
    o->deadline_ms = m->deadline_ms;
    o->error = str(m->error);
    o->model_nnz = m->model_nnz;
    o->last_train_loss = m->last_train_loss;
    o->last_samples = m->last_samples;
    o->last_eval_samples = m->last_eval_samples;
    o->last_eval_accuracy = m->last_eval_accuracy;
    o->last_eval_mse = m->last_eval_mse;
    o->last_personal_accuracy = m->last_personal_accuracy;
    o->loss = str(m->loss);
    o->waiting = str(m->waiting);
    o->iteration = m->iteration;
    o->privacy_epsilon = m->privacy_epsilon;
    o->privacy_delta = m->privacy_delta;
    o->privacy_spent = m->privacy_spent;
    o->privacy_spent_rdp = m->privacy_spent_rdp;
    o->privacy_iterations = m->privacy_iterations;
    o->quarantined = m->quarantined;
    o->quarantine = str(m->quarantine);
    o->statistics = m->statistics;
    o->statistics_rows = m->statistics_rows;
    o->statistics_agents = m->statistics_agents;
}

static int get_job_status(const chk_t *c, const Sfl__V1__JobStatus *p, sfl_job_status_t *m)
{
    int rc;

    memset(m, 0, sizeof(*m));
    if (p == NULL)
        return fail(c, c->bad, "job missing");
    m->job_id = p->job_id;
    m->state = (sfl_job_state_t)p->state;
    m->committed_round = p->committed_round;
    m->rounds = p->rounds;
    m->round_state = (sfl_round_state_t)p->round_state;
    m->attempt = p->attempt;
    m->selected = p->selected;
    m->accepted = p->accepted;
    m->cohort_size = p->cohort_size;
    m->min_quorum = p->min_quorum;
    m->deadline_ms = p->deadline_ms;
    m->model_nnz = p->model_nnz;
    m->last_train_loss = p->last_train_loss;
    m->last_samples = p->last_samples;
    m->last_eval_samples = p->last_eval_samples;
    m->last_eval_accuracy = p->last_eval_accuracy;
    m->last_eval_mse = p->last_eval_mse;
    m->last_personal_accuracy = p->last_personal_accuracy;
    m->iteration = p->iteration;
    m->privacy_epsilon = p->privacy_epsilon;
    m->privacy_delta = p->privacy_delta;
    m->privacy_spent = p->privacy_spent;
    m->privacy_spent_rdp = p->privacy_spent_rdp;
    m->privacy_iterations = p->privacy_iterations;
    if ((rc = get_str(c, "name", p->name, m->name, SFL_MSG_NAME_LEN)) < 0 ||
        (rc = get_str(c, "algorithm", p->algorithm, m->algorithm, SFL_MSG_NAME_LEN)) < 0 ||
        (rc = get_str(c, "error", p->error, m->error, SFL_MSG_TEXT_LEN)) < 0 ||
        (rc = get_str(c, "loss", p->loss, m->loss, SFL_MSG_NAME_LEN)) < 0 ||
        (rc = get_str(c, "waiting", p->waiting, m->waiting, SFL_MSG_TEXT_LEN)) < 0 ||
        (rc = get_str(c, "quarantine", p->quarantine, m->quarantine, SFL_MSG_TEXT_LEN)) < 0)
        return rc;
    m->quarantined = p->quarantined;
    m->statistics = p->statistics;
    m->statistics_rows = p->statistics_rows;
    m->statistics_agents = p->statistics_agents;
    return check_job_status(c, m);
}

/* ---- RevokeRequest / RevokeReply ---------------------------------------- */

static int check_revoke_req(const chk_t *c, const void *p)
{
    const sfl_revoke_t *m = p;
    int rc = check_str(c, "agent", m->agent, SFL_MSG_NAME_LEN, 0);

    if (rc < 0)
        return rc;
    if ((m->agent[0] != '\0') == m->has_fingerprint)
        return fail(c, c->bad, "want exactly one of agent and fingerprint");
    return 0;
}

static int put_revoke_req(const chk_t *c, const void *p, wire_t *w)
{
    const sfl_revoke_t *m = p;

    (void)c;
    w->pb.revoke_req.agent = str(m->agent);
    if (m->has_fingerprint)
        w->pb.revoke_req.fingerprint = bin(m->fingerprint, SFL_MSG_HASH_BYTES);
    return 0;
}

static int get_revoke_req(const chk_t *c, void *p, void *out)
{
    const Sfl__V1__RevokeRequest *pb = p;
    sfl_revoke_t *m = out;
    int rc;

    memset(m, 0, sizeof(*m));
    if ((rc = get_str(c, "agent", pb->agent, m->agent, SFL_MSG_NAME_LEN)) < 0)
        return rc;
    if (pb->fingerprint.len > 0) {
        if ((rc = get_fixed(c, "fingerprint", &pb->fingerprint, m->fingerprint,
                            SFL_MSG_HASH_BYTES)) < 0)
            return rc;
        m->has_fingerprint = 1;
    }
    return check_revoke_req(c, m);
}

static const msg_type_t revoke_req_type = {"revoke request", &sfl__v1__revoke_request__descriptor,
    check_revoke_req, put_revoke_req, get_revoke_req, sizeof(sfl_revoke_t), NULL, 0, NULL};

static int check_revoke_reply(const chk_t *c, const void *p)
{
    const sfl_revoke_t *m = p;

    if (!m->has_fingerprint)
        return fail(c, c->bad, "fingerprint missing");
    return check_str(c, "agent", m->agent, SFL_MSG_NAME_LEN, 0);
}

static int put_revoke_reply(const chk_t *c, const void *p, wire_t *w)
{
    const sfl_revoke_t *m = p;

    (void)c;
    w->pb.revoke_reply.fingerprint = bin(m->fingerprint, SFL_MSG_HASH_BYTES);
    w->pb.revoke_reply.agent = str(m->agent);
    w->pb.revoke_reply.closed = m->closed;
    return 0;
}

static int get_revoke_reply(const chk_t *c, void *p, void *out)
{
    const Sfl__V1__RevokeReply *pb = p;
    sfl_revoke_t *m = out;
    int rc;

    memset(m, 0, sizeof(*m));
    if ((rc = get_fixed(c, "fingerprint", &pb->fingerprint, m->fingerprint,
                        SFL_MSG_HASH_BYTES)) < 0 ||
        (rc = get_str(c, "agent", pb->agent, m->agent, SFL_MSG_NAME_LEN)) < 0)
        return rc;
    m->has_fingerprint = 1;
    m->closed = pb->closed;
    return check_revoke_reply(c, m);
}

static const msg_type_t revoke_reply_type = {"revoke reply", &sfl__v1__revoke_reply__descriptor,
    check_revoke_reply, put_revoke_reply, get_revoke_reply, sizeof(sfl_revoke_t), NULL, 0, NULL};

int sfl_msg_revoke_req_pack(const sfl_revoke_t *m, uint8_t **out, size_t *len)
{
    return pack_msg(&revoke_req_type, m, NULL, out, len);
}

int sfl_msg_revoke_req_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim,
                              sfl_revoke_t *m)
{
    return unpack_in(&revoke_req_type, buf, len, lim, m);
}

int sfl_msg_revoke_reply_pack(const sfl_revoke_t *m, uint8_t **out, size_t *len)
{
    return pack_msg(&revoke_reply_type, m, NULL, out, len);
}

int sfl_msg_revoke_reply_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim,
                                sfl_revoke_t *m)
{
    return unpack_in(&revoke_reply_type, buf, len, lim, m);
}

/* ---- ReleaseRequest / ReleaseReply ---------------------------------------- */

static int check_release_req(const chk_t *c, const void *p)
{
    const sfl_release_t *m = p;
    int rc;

    if ((rc = check_id(c, "job_id", m->job_id)) < 0 ||
        (rc = check_id(c, "agent_id", m->agent_id)) < 0)
        return rc;
    return 0;
}

static int put_release_req(const chk_t *c, const void *p, wire_t *w)
{
    const sfl_release_t *m = p;

    (void)c;
    w->pb.release_req.job_id = m->job_id;
    w->pb.release_req.agent_id = m->agent_id;
    return 0;
}

static int get_release_req(const chk_t *c, void *p, void *out)
{
    const Sfl__V1__ReleaseRequest *pb = p;
    sfl_release_t *m = out;

    memset(m, 0, sizeof(*m));
    m->job_id = pb->job_id;
    m->agent_id = pb->agent_id;
    return check_release_req(c, m);
}

static const msg_type_t release_req_type = {"release request",
    &sfl__v1__release_request__descriptor, check_release_req, put_release_req,
    get_release_req, sizeof(sfl_release_t), NULL, 0, NULL};

static int check_release_reply(const chk_t *c, const void *p)
{
    const sfl_release_t *m = p;
    int rc;

    if ((rc = check_release_req(c, m)) < 0)
        return rc;
    return check_str(c, "reason", m->reason, SFL_MSG_TEXT_LEN, 0);
}

static int put_release_reply(const chk_t *c, const void *p, wire_t *w)
{
    const sfl_release_t *m = p;

    (void)c;
    w->pb.release_reply.job_id = m->job_id;
    w->pb.release_reply.agent_id = m->agent_id;
    w->pb.release_reply.reason = str(m->reason);
    return 0;
}

static int get_release_reply(const chk_t *c, void *p, void *out)
{
    const Sfl__V1__ReleaseReply *pb = p;
    sfl_release_t *m = out;
    int rc;

    memset(m, 0, sizeof(*m));
    m->job_id = pb->job_id;
    m->agent_id = pb->agent_id;
    if ((rc = get_str(c, "reason", pb->reason, m->reason, SFL_MSG_TEXT_LEN)) < 0)
        return rc;
    return check_release_reply(c, m);
}

static const msg_type_t release_reply_type = {"release reply",
    &sfl__v1__release_reply__descriptor, check_release_reply, put_release_reply,
    get_release_reply, sizeof(sfl_release_t), NULL, 0, NULL};

int sfl_msg_release_req_pack(const sfl_release_t *m, uint8_t **out, size_t *len)
{
    return pack_msg(&release_req_type, m, NULL, out, len);
}

int sfl_msg_release_req_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim,
                               sfl_release_t *m)
{
    return unpack_in(&release_req_type, buf, len, lim, m);
}

int sfl_msg_release_reply_pack(const sfl_release_t *m, uint8_t **out, size_t *len)
{
    return pack_msg(&release_reply_type, m, NULL, out, len);
}

int sfl_msg_release_reply_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim,
                                 sfl_release_t *m)
{
    return unpack_in(&release_reply_type, buf, len, lim, m);
}

/* JobRequest carries only the id, which put checks. */
static int put_job_req(const chk_t *c, const void *p, wire_t *w)
{
    const uint64_t *job_id = p;
    int rc = check_id(c, "job_id", *job_id);

    w->pb.job_req.job_id = *job_id;
    return rc;
}

static int get_job_req(const chk_t *c, void *p, void *out)
{
    const Sfl__V1__JobRequest *pb = p;
    int rc = check_id(c, "job_id", pb->job_id);

    if (rc == 0)
        *(uint64_t *)out = pb->job_id;
    return rc;
}

static const msg_type_t job_req_type = {"job request", &sfl__v1__job_request__descriptor, NULL,
    put_job_req, get_job_req, sizeof(uint64_t), NULL, 0, NULL};

int sfl_msg_job_req_pack(uint64_t job_id, uint8_t **out, size_t *len)
{
    return pack_msg(&job_req_type, &job_id, NULL, out, len);
}

int sfl_msg_job_req_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim,
                           uint64_t *job_id)
{
    return unpack_in(&job_req_type, buf, len, lim, job_id);
}

static int put_job_reply(const chk_t *c, const void *p, wire_t *w)
{
    (void)c;
    put_job_status(p, &w->job);
    w->pb.job_reply.job = &w->job;
    return 0;
}

static int get_job_reply(const chk_t *c, void *p, void *out)
{
    return get_job_status(c, ((const Sfl__V1__JobReply *)p)->job, out);
}

static const msg_type_t job_reply_type = {"job reply", &sfl__v1__job_reply__descriptor,
    check_job_status, put_job_reply, get_job_reply, sizeof(sfl_job_status_t), NULL, 0, NULL};

int sfl_msg_job_reply_pack(const sfl_job_status_t *m, uint8_t **out, size_t *len)
{
    return pack_msg(&job_reply_type, m, NULL, out, len);
}

int sfl_msg_job_reply_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim,
                             sfl_job_status_t *m)
{
    return unpack_in(&job_reply_type, buf, len, lim, m);
}

/* ---- Admin: empty requests, status, lists ---------------------------------------- */

/* Empty messages still go through protobuf-c, so a request that is not one
 * (garbage, a wrong wire type) is refused like any other. */
static const msg_type_t status_req_type = {"status request", &sfl__v1__status_request__descriptor,
    NULL, NULL, NULL, 0, NULL, 0, NULL};

static const msg_type_t list_jobs_req_type = {"list jobs request",
    &sfl__v1__list_jobs_request__descriptor, NULL, NULL, NULL, 0, NULL, 0, NULL};

int sfl_msg_status_req_pack(uint8_t **out, size_t *len)
{
    return pack_msg(&status_req_type, NULL, NULL, out, len);
}

int sfl_msg_status_req_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim)
{
    return unpack_in(&status_req_type, buf, len, lim, NULL);
}

int sfl_msg_list_jobs_req_pack(uint8_t **out, size_t *len)
{
    return pack_msg(&list_jobs_req_type, NULL, NULL, out, len);
}

int sfl_msg_list_jobs_req_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim)
{
    return unpack_in(&list_jobs_req_type, buf, len, lim, NULL);
}

/* Jobs as w->blk and w->ptrs; *field gets the pointers. */
static int put_jobs(const chk_t *c, const sfl_job_status_t *jobs, uint32_t n, wire_t *w,
                    Sfl__V1__JobStatus ***field)
{
    static const Sfl__V1__JobStatus init = SFL__V1__JOB_STATUS__INIT;
    Sfl__V1__JobStatus *blk, **ptrs;
    int rc = alloc_list(c, "jobs", n, sizeof(*blk), w);

    if (rc < 0)
        return rc;
    blk = w->blk;
    ptrs = w->ptrs;
    for (uint32_t i = 0; i < n; i++) {
        blk[i] = init;
        put_job_status(&jobs[i], &blk[i]);
        ptrs[i] = &blk[i];
    }
    *field = ptrs;
    return 0;
}

static int get_job_at(const chk_t *c, const void *src, size_t i, void *dst)
{
    Sfl__V1__JobStatus *const *jobs = src;

    return get_job_status(c, jobs[i], dst);
}

static int check_status(const chk_t *c, const void *p)
{
    const sfl_status_t *m = p;
    int rc = check_str(c, "version", m->version, SFL_MSG_NAME_LEN, 0);

    return rc < 0 ? rc
                  : check_list(c, "jobs", m->jobs, m->njobs, sizeof(*m->jobs), check_job_status);
}

static int put_status(const chk_t *c, const void *p, wire_t *w)
{
    const sfl_status_t *m = p;
    Sfl__V1__StatusReply *pb = &w->pb.status;

    pb->version = str(m->version);
    pb->started_ms = m->started_ms;
    pb->connected_agents = m->connected_agents;
    pb->known_agents = m->known_agents;
    pb->updates_accepted = m->updates_accepted;
    pb->updates_rejected = m->updates_rejected;
    pb->bytes_in = m->bytes_in;
    pb->bytes_out = m->bytes_out;
    pb->n_jobs = m->njobs;
    return put_jobs(c, m->jobs, m->njobs, w, &pb->jobs);
}

static int get_status(const chk_t *c, void *p, void *out)
{
    const Sfl__V1__StatusReply *pb = p;
    sfl_status_t *m = out;
    int rc;

    m->started_ms = pb->started_ms;
    m->connected_agents = pb->connected_agents;
    m->known_agents = pb->known_agents;
    m->updates_accepted = pb->updates_accepted;
    m->updates_rejected = pb->updates_rejected;
    m->bytes_in = pb->bytes_in;
    m->bytes_out = pb->bytes_out;
    m->njobs = (uint32_t)pb->n_jobs;
    if ((rc = get_str(c, "version", pb->version, m->version, SFL_MSG_NAME_LEN)) < 0 ||
        (rc = check_str(c, "version", m->version, SFL_MSG_NAME_LEN, 0)) < 0)
        return rc;
    m->jobs = get_list(c, "jobs", pb->jobs, pb->n_jobs, sizeof(*m->jobs), get_job_at, &rc);
    return rc;
}

void sfl_msg_status_free(sfl_status_t *m)
{
    if (m != NULL)
        sfl__free(m->jobs);
    sfl__free(m);
}

static void free_status(void *m)
{
    sfl_msg_status_free(m);
}

static const msg_type_t status_type = {"status", &sfl__v1__status_reply__descriptor, check_status,
    put_status, get_status, sizeof(sfl_status_t), free_status, 9, NULL};

int sfl_msg_status_pack(const sfl_status_t *m, uint8_t **out, size_t *len)
{
    return pack_msg(&status_type, m, NULL, out, len);
}

int sfl_msg_status_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim,
                          sfl_status_t **out)
{
    int rc;

    *out = unpack_msg(&status_type, buf, len, lim, 0, NULL, &rc);
    return rc;
}

static int check_job_list(const chk_t *c, const void *p)
{
    const sfl_job_list_t *m = p;

    return check_list(c, "jobs", m->jobs, m->n, sizeof(*m->jobs), check_job_status);
}

static int put_job_list(const chk_t *c, const void *p, wire_t *w)
{
    const sfl_job_list_t *m = p;

    w->pb.job_list.n_jobs = m->n;
    return put_jobs(c, m->jobs, m->n, w, &w->pb.job_list.jobs);
}

static int get_job_list(const chk_t *c, void *p, void *out)
{
    const Sfl__V1__ListJobsReply *pb = p;
    sfl_job_list_t *m = out;
    int rc;

    m->n = (uint32_t)pb->n_jobs;
    m->jobs = get_list(c, "jobs", pb->jobs, pb->n_jobs, sizeof(*m->jobs), get_job_at, &rc);
    return rc;
}

void sfl_msg_job_list_free(sfl_job_list_t *m)
{
    if (m != NULL)
        sfl__free(m->jobs);
    sfl__free(m);
}

static void free_job_list(void *m)
{
    sfl_msg_job_list_free(m);
}

static const msg_type_t job_list_type = {"job list", &sfl__v1__list_jobs_reply__descriptor,
    check_job_list, put_job_list, get_job_list, sizeof(sfl_job_list_t), free_job_list, 1, NULL};

int sfl_msg_job_list_pack(const sfl_job_list_t *m, uint8_t **out, size_t *len)
{
    return pack_msg(&job_list_type, m, NULL, out, len);
}

int sfl_msg_job_list_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim,
                            sfl_job_list_t **out)
{
    int rc;

    *out = unpack_msg(&job_list_type, buf, len, lim, 0, NULL, &rc);
    return rc;
}

/* ---- Admin: agents ------------------------------------------------------------- */

static int put_list_agents_req(const chk_t *c, const void *p, wire_t *w)
{
    const int *connected_only = p;
    int rc = check_bool(c, "connected_only", *connected_only);

    w->pb.list_agents_req.connected_only = *connected_only;
    return rc;
}

static int get_list_agents_req(const chk_t *c, void *p, void *out)
{
    (void)c;
    *(int *)out = ((const Sfl__V1__ListAgentsRequest *)p)->connected_only ? 1 : 0;
    return 0;
}

static const msg_type_t list_agents_req_type = {"list agents request",
    &sfl__v1__list_agents_request__descriptor, NULL, put_list_agents_req, get_list_agents_req,
    sizeof(int), NULL, 0, NULL};

int sfl_msg_list_agents_req_pack(int connected_only, uint8_t **out, size_t *len)
{
    return pack_msg(&list_agents_req_type, &connected_only, NULL, out, len);
}

int sfl_msg_list_agents_req_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim,
                                   int *connected_only)
{
    return unpack_in(&list_agents_req_type, buf, len, lim, connected_only);
}

static int check_agent(const chk_t *c, const void *p)
{
    const sfl_agent_info_t *a = p;
    int rc;

    if ((rc = check_id(c, "agent_id", a->agent_id)) < 0 ||
        (rc = check_str(c, "subject", a->subject, SFL_MSG_NAME_LEN, 0)) < 0 ||
        (rc = check_bool(c, "connected", a->connected)) < 0 ||
        (rc = check_tags(c, "capabilities", &a->capabilities)) < 0 ||
        (rc = check_tags(c, "conditions", &a->conditions)) < 0 ||
        (rc = check_summary(c, &a->dataset)) < 0 ||
        (rc = check_enum(c, "phase", (int)a->phase, 0, 3)) < 0 ||
        (rc = check_str(c, "agent_version", a->agent_version, SFL_MSG_NAME_LEN, 0)) < 0 ||
        (rc = check_str(c, "quarantine", a->quarantine, SFL_MSG_TEXT_LEN, 0)) < 0)
        return rc;
    if (a->progress_permille > 1000)
        return fail(c, c->bad, "progress_permille %u exceeds 1000", a->progress_permille);
    return 0;
}

/* Scratch for one AgentInfo on the wire. */
typedef struct agent_pb {
    Sfl__V1__AgentInfo ai;
    Sfl__V1__DatasetSummary ds;
    char *caps[SFL_MSG_MAX_TAGS];
    char *conds[SFL_MSG_MAX_TAGS];
} agent_pb_t;

static int check_agent_list(const chk_t *c, const void *p)
{
    const sfl_agent_list_t *m = p;

    return check_list(c, "agents", m->agents, m->n, sizeof(*m->agents), check_agent);
}

static int put_agent_list(const chk_t *c, const void *p, wire_t *w)
{
    static const Sfl__V1__AgentInfo ai_init = SFL__V1__AGENT_INFO__INIT;
    static const Sfl__V1__DatasetSummary ds_init = SFL__V1__DATASET_SUMMARY__INIT;
    const sfl_agent_list_t *m = p;
    agent_pb_t *blk;
    Sfl__V1__AgentInfo **ptrs;
    int rc = alloc_list(c, "agents", m->n, sizeof(*blk), w);

    if (rc < 0)
        return rc;
    blk = w->blk;
    ptrs = w->ptrs;
    for (uint32_t i = 0; i < m->n; i++) {
        const sfl_agent_info_t *a = &m->agents[i];
        agent_pb_t *q = &blk[i];

        q->ai = ai_init;
        q->ds = ds_init;
        q->ai.agent_id = a->agent_id;
        q->ai.subject = str(a->subject);
        q->ai.connected = a->connected;
        put_tags(&a->capabilities, q->caps, &q->ai.n_capabilities, &q->ai.capabilities);
        put_tags(&a->conditions, q->conds, &q->ai.n_conditions, &q->ai.conditions);
        put_summary(&a->dataset, &q->ds);
        q->ai.dataset = &q->ds;
        q->ai.last_seen_ms = a->last_seen_ms;
        q->ai.phase = (Sfl__V1__AgentPhase)a->phase;
        q->ai.job_id = a->job_id;
        q->ai.round = a->round;
        q->ai.progress_permille = a->progress_permille;
        q->ai.updates_accepted = a->updates_accepted;
        q->ai.agent_version = str(a->agent_version);
        q->ai.quarantine = str(a->quarantine);
        ptrs[i] = &q->ai;
    }
    w->pb.agent_list.n_agents = m->n;
    w->pb.agent_list.agents = ptrs;
    return 0;
}

static int get_agent_at(const chk_t *c, const void *src, size_t i, void *dst)
{
    const Sfl__V1__AgentInfo *p = ((Sfl__V1__AgentInfo *const *)src)[i];
    sfl_agent_info_t *a = dst;
    int rc;

    memset(a, 0, sizeof(*a));
    a->agent_id = p->agent_id;
    a->connected = p->connected ? 1 : 0;
    a->last_seen_ms = p->last_seen_ms;
    a->phase = (sfl_agent_phase_t)p->phase;
    a->job_id = p->job_id;
    a->round = p->round;
    a->progress_permille = p->progress_permille;
    a->updates_accepted = p->updates_accepted;
    if ((rc = get_str(c, "subject", p->subject, a->subject, SFL_MSG_NAME_LEN)) < 0 ||
        (rc = get_tags(c, "capabilities", p->capabilities, p->n_capabilities,
                       &a->capabilities)) < 0 ||
        (rc = get_tags(c, "conditions", p->conditions, p->n_conditions, &a->conditions)) < 0 ||
        (rc = get_str(c, "agent_version", p->agent_version, a->agent_version,
                      SFL_MSG_NAME_LEN)) < 0 ||
        (rc = get_str(c, "quarantine", p->quarantine, a->quarantine, SFL_MSG_TEXT_LEN)) < 0)
        return rc;
    /* The summary is optional in a listing (an agent known only by id). */
    if (p->dataset != NULL && (rc = get_summary(c, p->dataset, &a->dataset)) < 0)
        return rc;
    return check_agent(c, a);
}

static int get_agent_list(const chk_t *c, void *p, void *out)
{
    const Sfl__V1__ListAgentsReply *pb = p;
    sfl_agent_list_t *m = out;
    int rc;

    m->n = (uint32_t)pb->n_agents;
    m->agents = get_list(c, "agents", pb->agents, pb->n_agents, sizeof(*m->agents),
                         get_agent_at, &rc);
    return rc;
}

void sfl_msg_agent_list_free(sfl_agent_list_t *m)
{
    if (m != NULL)
        sfl__free(m->agents);
    sfl__free(m);
}

static void free_agent_list(void *m)
{
    sfl_msg_agent_list_free(m);
}

static const msg_type_t agent_list_type = {"agent list", &sfl__v1__list_agents_reply__descriptor,
    check_agent_list, put_agent_list, get_agent_list, sizeof(sfl_agent_list_t), free_agent_list, 1, NULL};

int sfl_msg_agent_list_pack(const sfl_agent_list_t *m, uint8_t **out, size_t *len)
{
    return pack_msg(&agent_list_type, m, NULL, out, len);
}

int sfl_msg_agent_list_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim,
                              sfl_agent_list_t **out)
{
    int rc;

    *out = unpack_msg(&agent_list_type, buf, len, lim, 0, NULL, &rc);
    return rc;
}

/* ---- Admin: export ----------------------------------------------------------- */

/* The arguments of sfl_msg_export_req_pack / _unpack. */
typedef struct export_req {
    uint64_t job_id;
    uint64_t round;
} export_req_t;

static int put_export_req(const chk_t *c, const void *p, wire_t *w)
{
    const export_req_t *m = p;
    int rc = check_id(c, "job_id", m->job_id);

    w->pb.export_req.job_id = m->job_id;
    w->pb.export_req.round = m->round;
    return rc;
}

static int get_export_req(const chk_t *c, void *p, void *out)
{
    const Sfl__V1__ExportModelRequest *pb = p;
    export_req_t *m = out;
    int rc = check_id(c, "job_id", pb->job_id);

    if (rc == 0) {
        m->job_id = pb->job_id;
        m->round = pb->round;
    }
    return rc;
}

static const msg_type_t export_req_type = {"export request",
    &sfl__v1__export_model_request__descriptor, NULL, put_export_req, get_export_req,
    sizeof(export_req_t), NULL, 0, NULL};

int sfl_msg_export_req_pack(uint64_t job_id, uint64_t round, uint8_t **out, size_t *len)
{
    const export_req_t m = {job_id, round};

    return pack_msg(&export_req_type, &m, NULL, out, len);
}

int sfl_msg_export_req_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim,
                              uint64_t *job_id, uint64_t *round)
{
    export_req_t m;
    int rc = unpack_in(&export_req_type, buf, len, lim, &m);

    *job_id = m.job_id;
    *round = m.round;
    return rc;
}

static int check_export(const chk_t *c, const void *p)
{
    const sfl_export_t *m = p;
    int rc;

    if ((rc = check_id(c, "job_id", m->job_id)) < 0 ||
        (rc = check_id(c, "round", m->round)) < 0 ||
        (rc = check_str(c, "algorithm", m->algorithm, SFL_MSG_NAME_LEN, 0)) < 0 ||
        (rc = check_str(c, "loss", m->loss, SFL_MSG_NAME_LEN, 0)) < 0 ||
        (rc = check_labels(c, "labels", m->nlabels, m->labels)) < 0)
        return rc;
    return 0;
}

static int put_export(const chk_t *c, const void *p, wire_t *w)
{
    const sfl_export_t *m = p;
    Sfl__V1__ExportModelReply *pb = &w->pb.export;
    int rc = put_sparse(c, "model", m->model, SFL_ENC_F64, &w->sv, &w->data);

    if (rc < 0)
        return rc;
    crypto_generichash(w->hash, SFL_MSG_HASH_BYTES, w->sv.data.data, w->sv.data.len, NULL, 0);
    pb->job_id = m->job_id;
    pb->round = m->round;
    pb->algorithm = str(m->algorithm);
    pb->loss = str(m->loss);
    pb->dimension = m->dimension;
    pb->n_labels = m->nlabels;
    pb->labels = (double *)(uintptr_t)m->labels;
    pb->model = &w->sv;
    pb->model_hash = bin(w->hash, SFL_MSG_HASH_BYTES);
    if (m->moments != NULL) {
        size_t n = 1 + 2 * (size_t)m->dimension;

        if (!(m->standardize_eps > 0) || !isfinite(m->standardize_eps))
            return fail(c, c->bad, "standardize_eps %g (want > 0, finite)", m->standardize_eps);
        if ((w->more[9] = sfl__mallocarray(n, 8)) == NULL)
            return fail(c, SFL_ENOMEM, "no memory for the moments");
        if (sfl_msg_values_encode(m->moments, n, 0, w->more[9]) < 0)
            return fail(c, c->bad, "moments: %s", sfl_last_error());
        pb->moments = bin(w->more[9], n * 8);
        pb->standardize_eps = m->standardize_eps;
    }
    return 0;
}

static int get_export(const chk_t *c, void *p, void *out)
{
    const Sfl__V1__ExportModelReply *pb = p;
    sfl_export_t *m = out;
    uint8_t hash[SFL_MSG_HASH_BYTES];
    int rc;

    m->job_id = pb->job_id;
    m->round = pb->round;
    m->dimension = pb->dimension;
    if ((rc = get_str(c, "algorithm", pb->algorithm, m->algorithm, SFL_MSG_NAME_LEN)) < 0 ||
        (rc = get_str(c, "loss", pb->loss, m->loss, SFL_MSG_NAME_LEN)) < 0 ||
        (rc = get_labels(c, "labels", pb->labels, pb->n_labels, &m->nlabels, m->labels)) < 0 ||
        (rc = get_fixed(c, "model_hash", &pb->model_hash, m->model_hash,
                        SFL_MSG_HASH_BYTES)) < 0 ||
        (rc = check_export(c, m)) < 0 ||
        (rc = get_sparse(c, "model", pb->model, c->lim->max_dim, c->lim->max_nnz, &m->model,
                         NULL, hash)) < 0)
        return rc;
    if (memcmp(hash, m->model_hash, SFL_MSG_HASH_BYTES) != 0)
        return fail(c, SFL_EPARSE, "model_hash does not match the model");
    if (pb->moments.len > 0 || pb->standardize_eps != 0) {
        size_t n = 1 + 2 * (size_t)m->dimension;

        if (pb->moments.len != 8 * n || !(pb->standardize_eps > 0) ||
            !isfinite(pb->standardize_eps))
            return fail(c, SFL_EPARSE, "moments of %zu bytes with standardize_eps %g (want %zu "
                        "bytes, eps > 0)", pb->moments.len, pb->standardize_eps, 8 * n);
        if ((m->moments = sfl__mallocarray(n, sizeof(double))) == NULL)
            return fail(c, SFL_ENOMEM, "no memory for the moments");
        if (sfl_msg_values_decode(pb->moments.data, pb->moments.len, n, 0, m->moments) < 0)
            return fail(c, SFL_EPARSE, "moments: %s", sfl_last_error());
        m->standardize_eps = pb->standardize_eps;
    }
    return 0;
}

void sfl_msg_export_free(sfl_export_t *m)
{
    if (m != NULL) {
        sfl_spvec_free(m->model);
        sfl__free(m->moments);
    }
    sfl__free(m);
}

static void free_export(void *m)
{
    sfl_msg_export_free(m);
}

static const msg_type_t export_type = {"export", &sfl__v1__export_model_reply__descriptor,
    check_export, put_export, get_export, sizeof(sfl_export_t), free_export, 0, NULL};

int sfl_msg_export_pack(const sfl_export_t *m, uint8_t **out, size_t *len)
{
    return pack_msg(&export_type, m, NULL, out, len);
}

int sfl_msg_export_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim,
                          sfl_export_t **out)
{
    int rc;

    *out = unpack_msg(&export_type, buf, len, lim, 0, NULL, &rc);
    return rc;
}

/* ---- Admin: job history ------------------------------------------------------- */

static int put_history_req(const chk_t *c, const void *p, wire_t *w)
{
    const uint64_t *a = p; /* job_id, after_round */

    w->pb.history_req.job_id = a[0];
    w->pb.history_req.after_round = a[1];
    return check_id(c, "job_id", a[0]);
}

static int get_history_req(const chk_t *c, void *p, void *out)
{
    const Sfl__V1__JobHistoryRequest *pb = p;
    uint64_t *a = out;

    a[0] = pb->job_id;
    a[1] = pb->after_round;
    return check_id(c, "job_id", pb->job_id);
}

static const msg_type_t history_req_type = {"job history request",
    &sfl__v1__job_history_request__descriptor, NULL, put_history_req, get_history_req,
    2 * sizeof(uint64_t), NULL, 0, NULL};

int sfl_msg_history_req_pack(uint64_t job_id, uint64_t after_round, uint8_t **out, size_t *len)
{
    const uint64_t a[2] = {job_id, after_round};

    return pack_msg(&history_req_type, a, NULL, out, len);
}

int sfl_msg_history_req_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim,
                               uint64_t *job_id, uint64_t *after_round)
{
    uint64_t a[2];
    int rc = unpack_in(&history_req_type, buf, len, lim, a);

    *job_id = rc < 0 ? 0 : a[0];
    *after_round = rc < 0 ? 0 : a[1];
    return rc;
}

static int check_round_summary(const chk_t *c, const void *p)
{
    const sfl_round_summary_t *r = p;
    int rc;

    if ((rc = check_id(c, "rounds.round", r->round)) < 0 ||
        (rc = check_finite(c, "rounds.train_loss", r->train_loss)) < 0 ||
        (rc = check_finite(c, "rounds.eval_accuracy", r->eval_accuracy)) < 0 ||
        (rc = check_finite(c, "rounds.eval_mse", r->eval_mse)) < 0 ||
        (rc = check_finite(c, "rounds.personal_accuracy", r->personal_accuracy)) < 0 ||
        (rc = check_finite(c, "rounds.privacy_spent", r->privacy_spent)) < 0 ||
        (rc = check_finite(c, "rounds.privacy_spent_rdp", r->privacy_spent_rdp)) < 0)
        return rc;
    if (r->privacy_spent < 0 || r->privacy_spent_rdp < 0)
        return fail(c, c->bad, "rounds.privacy_spent must be >= 0");
    return 0;
}

static int check_history(const chk_t *c, const void *p)
{
    const sfl_job_history_t *m = p;
    int rc;

    if ((rc = check_id(c, "job_id", m->job_id)) < 0 ||
        (rc = check_str(c, "loss", m->loss, SFL_MSG_NAME_LEN, 0)) < 0 ||
        (rc = check_str(c, "algorithm", m->algorithm, SFL_MSG_NAME_LEN, 0)) < 0 ||
        (rc = check_bool(c, "more", m->more)) < 0 ||
        (rc = check_list(c, "rounds", m->rounds, m->n, sizeof(*m->rounds),
                         check_round_summary)) < 0)
        return rc;
    for (uint32_t i = 1; i < m->n; i++)
        if (m->rounds[i].round <= m->rounds[i - 1].round)
            return fail(c, c->bad, "rounds are not strictly ascending at entry %u", i);
    return 0;
}

static int put_history(const chk_t *c, const void *p, wire_t *w)
{
    static const Sfl__V1__RoundSummary init = SFL__V1__ROUND_SUMMARY__INIT;
    const sfl_job_history_t *m = p;
    Sfl__V1__JobHistoryReply *pb = &w->pb.history;
    Sfl__V1__RoundSummary *blk, **ptrs;
    int rc = alloc_list(c, "rounds", m->n, sizeof(*blk), w);

    if (rc < 0)
        return rc;
    pb->job_id = m->job_id;
    pb->loss = str(m->loss);
    pb->algorithm = str(m->algorithm);
    pb->more = m->more != 0;
    pb->n_rounds = m->n;
    blk = w->blk;
    ptrs = w->ptrs;
    for (uint32_t i = 0; i < m->n; i++) {
        const sfl_round_summary_t *r = &m->rounds[i];

        blk[i] = init;
        blk[i].round = r->round;
        blk[i].attempt = r->attempt;
        blk[i].opened_ms = r->opened_ms;
        blk[i].committed_ms = r->committed_ms;
        blk[i].selected = r->selected;
        blk[i].accepted = r->accepted;
        blk[i].samples = r->samples;
        blk[i].train_loss = r->train_loss;
        blk[i].eval_samples = r->eval_samples;
        blk[i].eval_accuracy = r->eval_accuracy;
        blk[i].eval_mse = r->eval_mse;
        blk[i].model_nnz = r->model_nnz;
        blk[i].bytes_up = r->bytes_up;
        blk[i].bytes_down = r->bytes_down;
        blk[i].personal_accuracy = r->personal_accuracy;
        blk[i].privacy_iterations = r->privacy_iterations;
        blk[i].privacy_spent = r->privacy_spent;
        blk[i].privacy_spent_rdp = r->privacy_spent_rdp;
        ptrs[i] = &blk[i];
    }
    pb->rounds = ptrs;
    return 0;
}

static int get_round_at(const chk_t *c, const void *src, size_t i, void *dst)
{
    const Sfl__V1__RoundSummary *p = ((Sfl__V1__RoundSummary *const *)src)[i];
    sfl_round_summary_t *r = dst;

    memset(r, 0, sizeof(*r));
    if (p == NULL)
        return fail(c, c->bad, "round missing");
    r->round = p->round;
    r->attempt = p->attempt;
    r->opened_ms = p->opened_ms;
    r->committed_ms = p->committed_ms;
    r->selected = p->selected;
    r->accepted = p->accepted;
    r->samples = p->samples;
    r->train_loss = p->train_loss;
    r->eval_samples = p->eval_samples;
    r->eval_accuracy = p->eval_accuracy;
    r->eval_mse = p->eval_mse;
    r->model_nnz = p->model_nnz;
    r->bytes_up = p->bytes_up;
    r->bytes_down = p->bytes_down;
    r->personal_accuracy = p->personal_accuracy;
    r->privacy_iterations = p->privacy_iterations;
    r->privacy_spent = p->privacy_spent;
    r->privacy_spent_rdp = p->privacy_spent_rdp;
    return check_round_summary(c, r);
}

static int get_history(const chk_t *c, void *p, void *out)
{
    const Sfl__V1__JobHistoryReply *pb = p;
    sfl_job_history_t *m = out;
    int rc;

    m->job_id = pb->job_id;
    m->more = pb->more != 0;
    m->n = (uint32_t)pb->n_rounds;
    if ((rc = get_str(c, "loss", pb->loss, m->loss, SFL_MSG_NAME_LEN)) < 0 ||
        (rc = get_str(c, "algorithm", pb->algorithm, m->algorithm, SFL_MSG_NAME_LEN)) < 0)
        return rc;
    m->rounds = get_list(c, "rounds", pb->rounds, pb->n_rounds, sizeof(*m->rounds), get_round_at,
                         &rc);
    if (rc < 0)
        return rc;
    return check_history(c, m);
}

void sfl_msg_history_free(sfl_job_history_t *m)
{
    if (m != NULL)
        sfl__free(m->rounds);
    sfl__free(m);
}

static void free_history(void *m)
{
    sfl_msg_history_free(m);
}

static const msg_type_t history_type = {"job history", &sfl__v1__job_history_reply__descriptor,
    check_history, put_history, get_history, sizeof(sfl_job_history_t), free_history, 3, NULL};

int sfl_msg_history_pack(const sfl_job_history_t *m, uint8_t **out, size_t *len)
{
    return pack_msg(&history_type, m, NULL, out, len);
}

int sfl_msg_history_unpack(const uint8_t *buf, size_t len, const sfl_msg_limits_t *lim,
                           sfl_job_history_t **out)
{
    int rc;

    *out = unpack_msg(&history_type, buf, len, lim, 0, NULL, &rc);
    return rc;
}
