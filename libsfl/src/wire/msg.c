/* The message codec's shared steps: allocator, errors, pack / unpack, field
 * helpers, names, limits and the steps every message goes through
 * (msg_int.h says how the files divide the work). */
#include "msg_int.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <sodium.h>


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

void sfl__msg_free_pb(void *m)
{
    if (m != NULL)
        protobuf_c_message_free_unpacked((ProtobufCMessage *)m, &free_alloc);
}



int sfl__msg_fail(const chk_t *c, int code, const char *fmt, ...)
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
        return sfl__msg_fail(c, SFL_ENOMEM, "no memory for %zu packed bytes", n);
    size_t w = protobuf_c_message_pack(m, b);

    assert(w == n);
    (void)w;
    *out = b;
    *len = n;
    return 0;
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
            return sfl__msg_fail(c, c->bad, "%s.%s has a NUL byte", d->short_name, f->name);
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
 * unpacked message (free with sfl__msg_free_pb) or NULL with *rc set. */
void *sfl__msg_unpack(const ProtobufCMessageDescriptor *d, const chk_t *c, const uint8_t *buf,
                      size_t len, size_t max, int *rc)
{
    static const uint8_t empty[1];
    pbctx_t ctx = {0};
    ProtobufCAllocator a = {pb_alloc, pb_free, &ctx};
    ProtobufCMessage *m;

    *rc = 0;
    if (buf == NULL && len > 0) {
        *rc = sfl__msg_fail(c, SFL_EINVAL, "NULL buffer");
        return NULL;
    }
    if (len > max) {
        *rc =
            sfl__msg_fail(c, SFL_ELIMIT, "message of %zu bytes exceeds the limit of %zu", len, max);
        return NULL;
    }
    if (len > 0 && (*rc = strings_whole(c, d, buf, len, 0)) < 0)
        return NULL;
    m = protobuf_c_message_unpack(d, &a, len, buf != NULL ? buf : empty);
    if (m == NULL) {
        if (ctx.failed)
            *rc = sfl__msg_fail(c, SFL_ENOMEM, "no memory to unpack %zu bytes", len);
        else
            *rc = sfl__msg_fail(c, SFL_EPARSE, "%zu bytes are not a valid %s", len, d->name);
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
            return sfl__msg_fail(c, SFL_EPARSE, "bad field key at byte %zu", at);
        if ((key >> 3) == num)
            (*count)++;
        switch (key & 7) {
        case 0: /* varint */
            if (scan_varint(b, len, &o, &n) < 0)
                return sfl__msg_fail(c, SFL_EPARSE, "bad varint at byte %zu", at);
            n = 0;
            break;
        case 1: /* fixed64 */
            n = 8;
            break;
        case 2: /* length-delimited */
            if (scan_varint(b, len, &o, &n) < 0)
                return sfl__msg_fail(c, SFL_EPARSE, "bad length at byte %zu", at);
            break;
        case 5: /* fixed32 */
            n = 4;
            break;
        default:
            return sfl__msg_fail(c, SFL_EPARSE, "unsupported wire type %u at byte %zu",
                                 (unsigned)(key & 7), at);
        }
        if (n > len - o)
            return sfl__msg_fail(c, SFL_EPARSE, "field at byte %zu runs past the end", at);
        o += (size_t)n;
    }
    return 0;
}

/* ---- field helpers: wire -> sfl ------------------------------------------ */

int sfl__msg_get_fixed(const chk_t *c, const char *field, const ProtobufCBinaryData *b,
                       uint8_t *dst, size_t n)
{
    if (b->len != n)
        return sfl__msg_fail(c, c->bad, "%s is %zu bytes, want %zu", field, b->len, n);
    memcpy(dst, b->data, n);
    return 0;
}

int sfl__msg_get_str(const chk_t *c, const char *field, const char *src, char *dst, size_t cap)
{
    size_t n = src != NULL ? strlen(src) : 0;

    if (n >= cap)
        return sfl__msg_fail(c, c->bad, "%s is %zu characters, at most %zu", field, n, cap - 1);
    if (n > 0)
        memcpy(dst, src, n);
    dst[n] = '\0';
    return 0;
}

int sfl__msg_get_tags(const chk_t *c, const char *field, char *const *src, size_t n,
                      sfl_tags_t *t)
{
    if (n > SFL_MSG_MAX_TAGS)
        return sfl__msg_fail(c, SFL_ELIMIT, "%s has %zu tags, at most %d", field, n,
                             SFL_MSG_MAX_TAGS);
    t->n = (uint32_t)n;
    for (size_t i = 0; i < n; i++) {
        int rc = sfl__msg_get_str(c, field, src[i], t->tag[i], SFL_MSG_TAG_LEN);

        if (rc < 0)
            return rc;
    }
    return 0;
}

int sfl__msg_get_labels(const chk_t *c, const char *field, const double *src, size_t n,
                        uint32_t *nl, double *dst)
{
    if (n > SFL_MSG_MAX_LABELS)
        return sfl__msg_fail(c, SFL_ELIMIT, "%s has %zu labels, at most %d", field, n,
                             SFL_MSG_MAX_LABELS);
    *nl = (uint32_t)n;
    if (n > 0)
        memcpy(dst, src, n * sizeof(*dst));
    return 0;
}

/* ValueEncoding numbers are spcodec's plus one (0 is UNSPECIFIED). */
int sfl__msg_get_enc(const chk_t *c, const char *field, int v, sfl_enc_t *out)
{
    if (v == SFL__V1__VALUE_ENCODING__VALUE_ENCODING_UNSPECIFIED)
        return sfl__msg_fail(c, c->bad, "%s missing", field);
    if (v < 1 || v > 3)
        return sfl__msg_fail(c, ENUM_CODE(c), "unknown %s %d", field, v);
    *out = (sfl_enc_t)(v - 1);
    return 0;
}

/* Names well formed and distinct, values finite, at most SFL_PARAMS_MAX;
 * whether the algorithm has them is sfl_algo_params_from_list's check. */
int sfl__msg_check_params(const chk_t *c, const sfl_param_list_t *p)
{
    if (p->n > SFL_PARAMS_MAX)
        return sfl__msg_fail(c, SFL_ELIMIT, "params has %u values, at most %d", p->n,
                             SFL_PARAMS_MAX);
    for (uint32_t i = 0; i < p->n; i++) {
        if (!sfl_param_name_ok(p->v[i].name))
            return sfl__msg_fail(c, c->bad,
                                 "params: name %u is not 1-31 of [a-z0-9_] starting with "
                                 "a letter",
                                 i + 1);
        for (uint32_t k = 0; k < i; k++)
            if (strcmp(p->v[k].name, p->v[i].name) == 0)
                return sfl__msg_fail(c, c->bad, "params: '%s' given twice", p->v[i].name);
        if (!isfinite(p->v[i].value))
            return sfl__msg_fail(c, SFL_ENUMERIC, "params.%s is not finite", p->v[i].name);
    }
    return 0;
}

int sfl__msg_get_params(const chk_t *c, const Sfl__V1__AlgorithmParams *p, sfl_param_list_t *o)
{
    int rc;

    if (p == NULL)
        return sfl__msg_fail(c, c->bad, "params missing");
    if (p->lr != 0 || p->tau != 0 || p->local_steps != 0 || p->batch != 0 || p->lambda != 0 ||
        p->mu != 0 || p->server_lr != 0 || p->l2_ball != 0 || p->inexact_steps != 0)
        return sfl__msg_fail(c, SFL_EUNSUP, "params: fields 1-9 are retired (a job spec from an "
                             "older sfl); recreate the job");
    if (p->n_values > SFL_PARAMS_MAX)
        return sfl__msg_fail(c, SFL_ELIMIT, "params has %zu values, at most %d", p->n_values,
                             SFL_PARAMS_MAX);
    memset(o, 0, sizeof(*o));
    o->n = (uint32_t)p->n_values;
    for (uint32_t i = 0; i < o->n; i++) {
        const Sfl__V1__Param *v = p->values[i];

        if ((rc = sfl__msg_get_str(c, "params.name", v->name, o->v[i].name, SFL_PARAM_NAME_LEN)) <
            0)
            return rc;
        o->v[i].value = v->value;
    }
    return sfl__msg_check_params(c, o);
}

int sfl__msg_get_summary(const chk_t *c, const Sfl__V1__DatasetSummary *p,
                         sfl_dataset_summary_t *o)
{
    if (p == NULL)
        return sfl__msg_fail(c, c->bad, "dataset missing");
    o->samples = p->samples;
    o->dimension = p->dimension;
    o->first_column = p->first_column;
    if (p->sample_ids_hash.len != 0) {
        int rc = sfl__msg_get_fixed(c, "dataset.sample_ids_hash", &p->sample_ids_hash, o->ids_hash,
                                    SFL_MSG_HASH_BYTES);

        if (rc < 0)
            return rc;
        o->has_ids = 1;
    }
    return sfl__msg_get_labels(c, "dataset.labels", p->labels, p->n_labels, &o->nlabels, o->labels);
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

int sfl__msg_get_sparse(const chk_t *c, const char *field, const Sfl__V1__SparseVector *sv,
                        uint32_t max_dim, uint32_t max_nnz, sfl_spvec_t **out, sfl_enc_t *enc,
                        uint8_t *hash)
{
    sfl_spvec_t *v = NULL;
    int rc;

    *out = NULL;
    if (sv == NULL)
        return sfl__msg_fail(c, c->bad, "%s missing", field);
    if (sv->dim > max_dim)
        return sfl__msg_fail(c, SFL_ELIMIT, "%s.dim %u exceeds the limit of %u", field, sv->dim,
                             max_dim);
    if (sv->data.len == 0)
        return sfl__msg_fail(c, c->bad, "%s.data is empty", field);
    rc = sfl_spcodec_decode(sv->data.data, sv->data.len, max_dim, max_nnz, &v);
    if (rc < 0)
        return wrap(c, rc, field);
    if (v->dim != sv->dim) {
        rc = sfl__msg_fail(c, SFL_EDIM, "%s.dim is %u but its data has dimension %u", field,
                           sv->dim, v->dim);
        sfl_spvec_free(v);
        return rc;
    }
    if (enc != NULL)
        *enc = (sfl_enc_t)(sv->data.data[varint_len(v->dim) + varint_len(v->nnz)] &
                           SFL_SPCODEC_ENC_MASK);
    if (hash != NULL)
        crypto_generichash(hash, SFL_MSG_HASH_BYTES, sv->data.data, sv->data.len, NULL, 0);
    *out = v;
    return 0;
}

/* ---- field helpers: sfl -> wire ------------------------------------------ */

void sfl__msg_put_tags(const sfl_tags_t *t, char **ptrs, size_t *n, char ***field)
{
    for (uint32_t i = 0; i < t->n; i++)
        ptrs[i] = str(t->tag[i]);
    *n = t->n;
    *field = ptrs;
}

void sfl__msg_put_summary(const sfl_dataset_summary_t *s, Sfl__V1__DatasetSummary *o)
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
int sfl__msg_put_sparse(const chk_t *c, const char *field, const sfl_spvec_t *v, sfl_enc_t enc,
                        Sfl__V1__SparseVector *sv, uint8_t **data)
{
    size_t n, len;
    int rc;

    *data = NULL;
    if (v == NULL)
        return sfl__msg_fail(c, c->bad, "%s missing", field);
    rc = sfl_spvec_validate(v);
    if (rc < 0)
        return wrap(c, rc, field);
    if (enc != SFL_ENC_F64 && enc != SFL_ENC_F32 && enc != SFL_ENC_Q8)
        return sfl__msg_fail(c, SFL_EINVAL, "unknown %s encoding %d", field, (int)enc);
    n = sfl_spcodec_size(v, enc);
    *data = sfl__malloc(n);
    if (*data == NULL)
        return sfl__msg_fail(c, SFL_ENOMEM, "no memory for %zu bytes of %s", n, field);
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
int sfl__msg_check_str(const chk_t *c, const char *field, const char *s, size_t cap,
                       int required)
{
    const char *end = memchr(s, '\0', cap);

    if (end == NULL)
        return sfl__msg_fail(c, c->bad, "%s is not terminated within %zu bytes", field, cap);
    if (required && end == s)
        return sfl__msg_fail(c, c->bad, "%s missing", field);
    for (const char *p = s; p < end; p++)
        if (*p < 0x20 || *p > 0x7e)
            return sfl__msg_fail(c, c->bad, "%s has a non-printable byte 0x%02x at %td", field,
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

int sfl__msg_check_tags(const chk_t *c, const char *field, const sfl_tags_t *t)
{
    if (t->n > SFL_MSG_MAX_TAGS)
        return sfl__msg_fail(c, c->bad, "%s has %u tags, at most %d", field, t->n,
                             SFL_MSG_MAX_TAGS);
    for (uint32_t i = 0; i < t->n; i++) {
        if (!tag_ok(t->tag[i], SFL_MSG_TAG_LEN))
            return sfl__msg_fail(c, c->bad,
                                 "%s[%u] '%.*s' is not a tag of 1-%d characters [a-z0-9_.:-]",
                                 field, i, SFL_MSG_TAG_LEN - 1, t->tag[i], SFL_MSG_TAG_LEN - 1);
        for (uint32_t j = 0; j < i; j++)
            if (strcmp(t->tag[i], t->tag[j]) == 0)
                return sfl__msg_fail(c, c->bad, "%s lists '%s' twice", field, t->tag[i]);
    }
    return 0;
}

int sfl__msg_check_labels(const chk_t *c, const char *field, uint32_t n, const double *l)
{
    if (n > SFL_MSG_MAX_LABELS)
        return sfl__msg_fail(c, c->bad, "%s has %u labels, at most %d", field, n,
                             SFL_MSG_MAX_LABELS);
    for (uint32_t i = 0; i < n; i++) {
        if (!isfinite(l[i]))
            return sfl__msg_fail(c, SFL_ENUMERIC, "%s[%u] is not finite", field, i);
        if (i > 0 && !(l[i - 1] < l[i]))
            return sfl__msg_fail(c, c->bad, "%s not strictly ascending at %u (%g after %g)", field,
                                 i, l[i], l[i - 1]);
    }
    return 0;
}

int sfl__msg_check_finite(const chk_t *c, const char *field, double v)
{
    if (!isfinite(v))
        return sfl__msg_fail(c, SFL_ENUMERIC, "%s is not finite", field);
    return 0;
}

/* An enum that must hold one of [lo, hi]; 0 is "missing". */
int sfl__msg_check_enum(const chk_t *c, const char *field, int v, int lo, int hi)
{
    if (v == 0 && lo > 0)
        return sfl__msg_fail(c, c->bad, "%s missing", field);
    if (v < lo || v > hi)
        return sfl__msg_fail(c, ENUM_CODE(c), "unknown %s %d", field, v);
    return 0;
}

int sfl__msg_check_enc(const chk_t *c, const char *field, sfl_enc_t e)
{
    if (e != SFL_ENC_F64 && e != SFL_ENC_F32 && e != SFL_ENC_Q8)
        return sfl__msg_fail(c, ENUM_CODE(c), "unknown %s %d", field, (int)e);
    return 0;
}

int sfl__msg_check_id(const chk_t *c, const char *field, uint64_t v)
{
    if (v == 0)
        return sfl__msg_fail(c, c->bad, "%s missing (0)", field);
    return 0;
}

int sfl__msg_check_bool(const chk_t *c, const char *field, int v)
{
    if (v != 0 && v != 1)
        return sfl__msg_fail(c, c->bad, "%s is %d, want 0 or 1", field, v);
    return 0;
}

int sfl__msg_check_summary(const chk_t *c, const sfl_dataset_summary_t *s)
{
    if (s->first_column != 0 && (uint64_t)s->first_column + s->dimension - 1 > UINT32_MAX)
        return sfl__msg_fail(c, c->bad, "dataset block [%u, %u + %u) passes column 2^32",
                             s->first_column, s->first_column, s->dimension);
    if (sfl__msg_check_bool(c, "dataset.has_ids", s->has_ids) < 0)
        return c->bad;
    return sfl__msg_check_labels(c, "dataset.labels", s->nlabels, s->labels);
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

/* hash (optional) receives w->hash: sfl_msg_task_sign_bytes's model_hash. */
int sfl__msg_pack_msg(const msg_type_t *t, const void *m, uint8_t *hash, uint8_t **out,
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
        return 0; /* sfl__msg_unpack() reports these */
    rc = count_field(c, buf, len, num, &n);
    if (rc < 0)
        return rc;
    if (n > c->lim->max_items)
        return sfl__msg_fail(c, SFL_ELIMIT, "%zu entries exceed the limit of %u", n,
                             c->lim->max_items);
    return 0;
}

/* Fills m in place (zeroed first) or, for owned types, returns a new struct
 * (NULL on failure); *rc is the result either way. */
void *sfl__msg_unpack_msg(const msg_type_t *t, const uint8_t *buf, size_t len,
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
    pb =
        sfl__msg_unpack(t->desc, &c, buf, len, owned ? c.lim->max_message : control_max(c.lim), rc);
    if (pb == NULL || t->get == NULL)
        goto out;
    if (owned && (m = sfl__calloc(1, t->size)) == NULL) {
        *rc = sfl__msg_fail(&c, SFL_ENOMEM, "no memory");
        goto out;
    }
    *rc = t->get(&c, pb, m);
out:
    if (t->wipe != NULL && pb != NULL)
        t->wipe(pb);
    sfl__msg_free_pb(pb);
    if (owned && *rc < 0) {
        t->free(m);
        m = NULL;
    }
    return m;
}

int sfl__msg_unpack_in(const msg_type_t *t, const uint8_t *buf, size_t len,
                       const sfl_msg_limits_t *lim, void *m)
{
    int rc;

    (void)sfl__msg_unpack_msg(t, buf, len, lim, 0, m, &rc);
    return rc;
}

/* Lists: the sfl array is checked entry by entry before anything is
 * allocated; the generated side is one block of entries and one of
 * pointers to them (w->blk, w->ptrs). */
int sfl__msg_check_list(const chk_t *c, const char *what, const void *a, uint32_t n, size_t size,
                        int (*check)(const chk_t *, const void *))
{
    if (n > 0 && a == NULL)
        return sfl__msg_fail(c, SFL_EINVAL, "%u %s but no array", n, what);
    for (uint32_t i = 0; i < n; i++) {
        int rc = check(c, (const char *)a + i * size);

        if (rc < 0)
            return rc;
    }
    return 0;
}

int sfl__msg_alloc_list(const chk_t *c, const char *what, uint32_t n, size_t size, wire_t *w)
{
    if (n == 0)
        return 0;
    w->blk = sfl__mallocarray(n, size);
    w->ptrs = sfl__mallocarray(n, sizeof(void *));
    if (w->blk == NULL || w->ptrs == NULL)
        return sfl__msg_fail(c, SFL_ENOMEM, "no memory for %u %s", n, what);
    return 0;
}

/* An owned array of n entries of size bytes, entry i got from src by get;
 * NULL for none and on failure (*rc). */
void *sfl__msg_get_list(const chk_t *c, const char *what, const void *src, size_t n, size_t size,
                        int (*get)(const chk_t *, const void *, size_t, void *), int *rc)
{
    char *a;

    *rc = 0;
    if (n == 0)
        return NULL;
    a = sfl__mallocarray(n, size);
    if (a == NULL) {
        *rc = sfl__msg_fail(c, SFL_ENOMEM, "no memory for %zu %s", n, what);
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
