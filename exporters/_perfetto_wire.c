/* Perfetto TracePackets encoded per row in C (the wire encoder of exporters/perfetto/).
 *
 * The exporter streams rows from DuckDB in Perfetto's order (start nanosecond, longer
 * first, ...) as Arrow record batches. encode_chunk() turns one batch into the bytes of
 * its `Trace.packet` fields: a BEGIN, INSTANT or COUNTER packet per row, and the END
 * packets of the slices that close before each row (kept in a min-heap owned by the
 * caller, so an END goes before the BEGINs at its timestamp and slices that close
 * together close innermost first). The caller plans everything else (tracks, lanes,
 * interning, flows, event_args); this file only writes bytes, in exactly the field
 * order and encoding the official protobuf classes use (tests/exporters/test_perfetto_wire.py).
 *
 * Packet layout (field numbers of perfetto_trace.proto):
 *   Trace.packet(1) { timestamp(8) trusted_packet_sequence_id(10)
 *     track_event(11) { category_iids(3) debug_annotations(4)... type(9) name_iid(10)
 *                       track_uuid(11) name(23) double_counter_value(44) flow_ids(47)
 *                       terminating_flow_ids(48) }
 *     sequence_flags(13) }
 *   DebugAnnotation { name_iid(1) int_value(4) | double_value(5) | string_value(6)
 *                     | string_value_iid(17) }
 * Memory: the output of one batch and a scratch buffer for one packet.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { K_EVENT = 0, K_MARKER = 1, K_COUNTER = 2, K_BREAKDOWN = 3 };
enum { T_BEGIN = 1, T_END = 2, T_INSTANT = 3, T_COUNTER = 4 };
enum { SEQ_ID = 1, NEEDS_INCREMENTAL_STATE = 2 };
/* Stream columns, in the order the caller passes them (exporters/perfetto/encoding.py
 * STREAM_COLUMNS): six fixed ones, then the typed fields exported as debug annotations
 * (profiler/trace_fields.py; their number is the tuple's length less 7, step first), then value. */
enum { C_KIND, C_ID, C_TRACK, C_NAME, C_START, C_DUR, C_TYPED };
#define C_STEP C_TYPED   /* the first typed field: markers are named by it */
#define MAX_TYPED 16     /* keeps a row within MAX_ROW_BYTES */
#define MAX_COLS (C_TYPED + MAX_TYPED + 1)

static inline int vsize(uint64_t v) {
    int bits = 64 - __builtin_clzll(v | 1);
    return (bits + 6) / 7;
}

static inline uint8_t *wv(uint8_t *p, uint64_t v) {
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    return p;
}

static inline uint8_t *w64(uint8_t *p, uint64_t v) {
    for (int k = 0; k < 8; k++) p[k] = (uint8_t)(v >> (8 * k));
    return p + 8;
}

/* -- buffers ------------------------------------------------------------------------------ */

typedef struct {
    Py_buffer view;
    int held;
} Buf;

static void buf_release(Buf *b) {
    if (b->held) PyBuffer_Release(&b->view);
    b->held = 0;
}

/* A read-only (or writable) contiguous buffer holding at least `min_items` items of `itemsize`. */
static int buf_get(PyObject *obj, Buf *b, Py_ssize_t itemsize, Py_ssize_t min_items, int writable, const char *what) {
    if (PyObject_GetBuffer(obj, &b->view, PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0)) < 0) return -1;
    b->held = 1;
    if (b->view.len < itemsize * min_items) {
        PyErr_Format(PyExc_ValueError, "%s: buffer of %zd bytes, need %zd", what, b->view.len, itemsize * min_items);
        return -1;
    }
    return 0;
}

/* A column: 8-byte values (int64, uint64 or float64) and an optional Arrow validity bitmap. */
typedef struct {
    Buf data, valid;
    Py_ssize_t off;
    const int64_t *v;
    const uint8_t *bm;
} Col;

static int col_get(PyObject *triple, Col *c, Py_ssize_t n, const char *what) {
    PyObject *d, *bm;
    Py_ssize_t off;
    if (!PyArg_ParseTuple(triple, "OOn", &d, &bm, &off)) return -1;
    if (off < 0) {
        PyErr_Format(PyExc_ValueError, "%s: negative offset", what);
        return -1;
    }
    c->off = off;
    if (buf_get(d, &c->data, 8, off + n, 0, what) < 0) return -1;
    c->v = (const int64_t *)c->data.view.buf + off;
    c->bm = NULL;
    if (bm != Py_None) {
        if (buf_get(bm, &c->valid, 1, (off + n + 7) / 8, 0, what) < 0) return -1;
        c->bm = (const uint8_t *)c->valid.view.buf;
    }
    return 0;
}

static inline int col_valid(const Col *c, Py_ssize_t i) {
    if (!c->bm) return 1;
    Py_ssize_t j = c->off + i;
    return (c->bm[j >> 3] >> (j & 7)) & 1;
}

/* Output: a caller-owned buffer (`fixed`, sized with MAX_ROW_BYTES / MAX_END_BYTES) or a growing one. */
typedef struct {
    uint8_t *p;
    size_t len, cap;
    int fixed;
    int nomem; /* set with a failed out_reserve: out of memory, else the fixed buffer was too small */
} Out;

/* out_reserve's failure as a Python exception (it runs without the GIL, so cannot raise it itself). */
static void out_raise(const Out *o) {
    if (o->nomem) PyErr_NoMemory();
    else PyErr_SetString(PyExc_ValueError, "output buffer too small");
}

static int out_reserve(Out *o, size_t more) {
    if (o->len + more <= o->cap) return 0;
    if (o->fixed) return -1;
    size_t cap = o->cap ? o->cap : 1 << 16;
    while (cap < o->len + more) cap *= 2;
    uint8_t *p = realloc(o->p, cap);
    if (!p) {
        o->nomem = 1;
        return -1;
    }
    o->p = p;
    o->cap = cap;
    return 0;
}

/* Upper bounds: a row's packet without its event_args, and an END packet. */
#define MAX_ROW_BYTES 512
#define MAX_END_BYTES 40

/* -- pending ENDs: a binary min-heap on (end_ns, -seq) ------------------------------------- */

typedef struct {
    int64_t *e, *s;
    uint64_t *u;
    Py_ssize_t n, cap;
} Heap;

static inline int heap_less(const Heap *h, Py_ssize_t a, Py_ssize_t b) {
    return h->e[a] < h->e[b] || (h->e[a] == h->e[b] && h->s[a] > h->s[b]);
}

static inline void heap_swap(Heap *h, Py_ssize_t a, Py_ssize_t b) {
    int64_t t = h->e[a]; h->e[a] = h->e[b]; h->e[b] = t;
    t = h->s[a]; h->s[a] = h->s[b]; h->s[b] = t;
    uint64_t x = h->u[a]; h->u[a] = h->u[b]; h->u[b] = x;
}

static void heap_push(Heap *h, int64_t e, int64_t s, uint64_t u) {
    Py_ssize_t i = h->n++;
    h->e[i] = e; h->s[i] = s; h->u[i] = u;
    while (i > 0) {
        Py_ssize_t p = (i - 1) / 2;
        if (!heap_less(h, i, p)) break;
        heap_swap(h, i, p);
        i = p;
    }
}

static void heap_pop(Heap *h) {
    h->n--;
    if (h->n == 0) return;
    heap_swap(h, 0, h->n);
    Py_ssize_t i = 0;
    for (;;) {
        Py_ssize_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < h->n && heap_less(h, l, m)) m = l;
        if (r < h->n && heap_less(h, r, m)) m = r;
        if (m == i) break;
        heap_swap(h, i, m);
        i = m;
    }
}

/* One END packet: Trace.packet { timestamp, sequence id, track_event { type END, track_uuid } }. */
static int write_end(Out *o, int64_t ts, uint64_t uuid) {
    if (out_reserve(o, MAX_END_BYTES) < 0) return -1;
    int te = 2 + 1 + vsize(uuid);
    int pkt = 1 + vsize((uint64_t)ts) + 2 + 1 + vsize(te) + te;
    uint8_t *p = o->p + o->len;
    *p++ = 0x0A;
    p = wv(p, pkt);
    *p++ = 0x40;
    p = wv(p, (uint64_t)ts);
    *p++ = 0x50;
    *p++ = SEQ_ID;
    *p++ = 0x5A;
    p = wv(p, te);
    *p++ = 0x48;
    *p++ = T_END;
    *p++ = 0x58;
    p = wv(p, uuid);
    o->len = p - o->p;
    return 0;
}

static int heap_get(PyObject *heap, Heap *h, Buf bufs[3], Py_ssize_t need) {
    PyObject *e, *s, *u;
    Py_ssize_t n;
    if (!PyArg_ParseTuple(heap, "OOOn", &e, &s, &u, &n)) return -1;
    if (buf_get(e, &bufs[0], 8, 0, 1, "heap") < 0 || buf_get(s, &bufs[1], 8, 0, 1, "heap") < 0
        || buf_get(u, &bufs[2], 8, 0, 1, "heap") < 0)
        return -1;
    h->cap = bufs[0].view.len / 8;
    if (bufs[1].view.len / 8 < h->cap) h->cap = bufs[1].view.len / 8;
    if (bufs[2].view.len / 8 < h->cap) h->cap = bufs[2].view.len / 8;
    if (n < 0 || n + need > h->cap) {
        PyErr_Format(PyExc_ValueError, "heap: %zd pending + %zd rows exceed its capacity %zd", n, need, h->cap);
        return -1;
    }
    h->e = bufs[0].view.buf;
    h->s = bufs[1].view.buf;
    h->u = bufs[2].view.buf;
    h->n = n;
    return 0;
}

/* First index of the sorted a[0..n) whose value is >= key (`strict`: > key); branch-free halving. */
static inline Py_ssize_t bound(const int64_t *a, Py_ssize_t n, int64_t key, int strict) {
    if (n == 0) return 0;
    const int64_t *base = a;
    while (n > 1) {
        Py_ssize_t half = n / 2;
        base = (strict ? base[half - 1] <= key : base[half - 1] < key) ? base + half : base;
        n -= half;
    }
    return (base - a) + (strict ? *base <= key : *base < key);
}

/* Index range [lo, hi) of `key` in the sorted a[0..n). */
static inline void equal_range(const int64_t *a, Py_ssize_t n, int64_t key, Py_ssize_t *lo, Py_ssize_t *hi) {
    *lo = bound(a, n, key, 0);
    *hi = (*lo < n && a[*lo] == key) ? bound(a, n, key, 1) : *lo;
}

/* Whether bit (key - lo) of the bitmap is set (0 outside it). */
static inline int bit_set(const uint8_t *bm, Py_ssize_t nbytes, int64_t lo, int64_t key) {
    if (key < lo) return 0;
    uint64_t j = (uint64_t)(key - lo);
    return j / 8 < (uint64_t)nbytes && ((bm[j / 8] >> (j % 8)) & 1);
}

/* -- encode_chunk ------------------------------------------------------------------------- */

typedef struct {
    Buf b;
    Py_ssize_t n;
} Table;

static int table_get(PyObject *obj, Table *t, Py_ssize_t itemsize, const char *what) {
    if (buf_get(obj, &t->b, itemsize, 0, 0, what) < 0) return -1;
    t->n = t->b.view.len / itemsize;
    return 0;
}

static inline uint8_t *ann_int(uint8_t *p, uint64_t iid, uint64_t value) {
    *p++ = 0x22;
    *p++ = (uint8_t)(1 + vsize(iid) + 1 + vsize(value)); /* < 128: one length byte */
    *p++ = 0x08;
    p = wv(p, iid);
    *p++ = 0x20;
    return wv(p, value);
}

#define N_TABLES 12
enum { T_CAT, T_NAME, T_TABLEIID, T_ANN, T_FSRC, T_FSRCID, T_FDST, T_FDSTID, T_FBITS, T_AEID, T_AOFFS, T_ABLOB };
static const Py_ssize_t table_size[N_TABLES] = {8, 8, 8, 8, 8, 8, 8, 8, 1, 8, 8, 1};

static PyObject *encode_chunk(PyObject *self, PyObject *args) {
    PyObject *cols_obj, *uuid_obj, *tables_obj, *heap_obj, *out_obj;
    unsigned long long default_uuid;
    long long seq0, flow_lo;
    unsigned long long step_cat, bd_cat, string_mask;
    if (!PyArg_ParseTuple(args, "O!OO!LKKKKO!LO", &PyTuple_Type, &cols_obj, &uuid_obj, &PyTuple_Type, &tables_obj,
                          &flow_lo, &default_uuid, &step_cat, &bd_cat, &string_mask, &PyTuple_Type, &heap_obj, &seq0,
                          &out_obj))
        return NULL;
    PyObject *result = NULL;
    Col cols[MAX_COLS];
    Table tab[N_TABLES];
    Buf uuid_b = {0}, out_b = {0}, heap_b[3];
    memset(heap_b, 0, sizeof heap_b);
    Heap h;
    Out o = {0};
    uint8_t *scratch = NULL;
    memset(cols, 0, sizeof cols);
    memset(tab, 0, sizeof tab);
    const Py_ssize_t n_cols = PyTuple_GET_SIZE(cols_obj);
    const int n_typed = (int)(n_cols - C_TYPED - 1), n_ann = n_typed + 3; /* + start_ps, dur_ps, ts_ps */
    const int c_value = (int)n_cols - 1;
    if (n_typed < 1 || n_typed > MAX_TYPED || PyTuple_GET_SIZE(tables_obj) != N_TABLES) {
        PyErr_SetString(PyExc_ValueError, "encode_chunk: wrong number of columns or tables");
        return NULL;
    }
    if (buf_get(uuid_obj, &uuid_b, 8, 0, 0, "uuid") < 0) goto done;
    Py_ssize_t n = uuid_b.view.len / 8;
    const uint64_t *uuid = uuid_b.view.buf;
    for (int c = 0; c < n_cols; c++)
        if (col_get(PyTuple_GET_ITEM(cols_obj, c), &cols[c], n, "column") < 0) goto done;
    for (int t = 0; t < N_TABLES; t++)
        if (table_get(PyTuple_GET_ITEM(tables_obj, t), &tab[t], table_size[t], "table") < 0) goto done;
    if (tab[T_ANN].n < n_ann || tab[T_FSRCID].n < tab[T_FSRC].n || tab[T_FDSTID].n < tab[T_FDST].n
        || tab[T_AOFFS].n < tab[T_AEID].n + 1) {
        PyErr_SetString(PyExc_ValueError, "encode_chunk: inconsistent tables");
        goto done;
    }
    if (heap_get(heap_obj, &h, heap_b, n) < 0) goto done;
    const uint64_t *cat_of = tab[T_CAT].b.view.buf, *name_iid = tab[T_NAME].b.view.buf,
                   *table_iid = tab[T_TABLEIID].b.view.buf, *ann_iid = tab[T_ANN].b.view.buf,
                   *fsrc_id = tab[T_FSRCID].b.view.buf, *fdst_id = tab[T_FDSTID].b.view.buf;
    const int64_t *fsrc = tab[T_FSRC].b.view.buf, *fdst = tab[T_FDST].b.view.buf, *aeid = tab[T_AEID].b.view.buf,
                  *aoffs = tab[T_AOFFS].b.view.buf;
    const uint8_t *ablob = tab[T_ABLOB].b.view.buf, *fbits = tab[T_FBITS].b.view.buf;
    if (buf_get(out_obj, &out_b, 1, 0, 1, "out") < 0) goto done;
    o.p = out_b.view.buf;
    o.cap = (size_t)out_b.view.len;
    o.fixed = 1;
    for (int k = 0; k < n_ann; k++)
        if (ann_iid[k] == 0 || ann_iid[k] >= (1 << 14)) {
            PyErr_SetString(PyExc_ValueError, "encode_chunk: annotation iids must be in 1..16383");
            goto done;
        }
    size_t scratch_cap = 1024;
    scratch = malloc(scratch_cap);
    if (!scratch) {
        PyErr_NoMemory();
        goto done;
    }
    /* The rows are encoded without the GIL (the reader thread gathers the next window meanwhile):
     * only the buffers held above are touched; an error is recorded in err and raised after. */
    char err[200] = "";
    int err_nomem = 0;
#define FAIL(...)                                  \
    do {                                           \
        snprintf(err, sizeof err, __VA_ARGS__);    \
        goto rows_done;                            \
    } while (0)
#define FAIL_OUT()                                                       \
    do {                                                                 \
        if (o.nomem) err_nomem = 1;                                      \
        else snprintf(err, sizeof err, "output buffer too small");       \
        goto rows_done;                                                  \
    } while (0)
    Py_BEGIN_ALLOW_THREADS
    int64_t prev_s = INT64_MIN;
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t kind = cols[C_KIND].v[i], s_ps = cols[C_START].v[i], d_ps = cols[C_DUR].v[i];
        if (s_ps < 0 || d_ps < 0 || s_ps > INT64_MAX - d_ps) {
            FAIL("row %zd: start_ps %lld, dur_ps %lld out of range", i, (long long)s_ps, (long long)d_ps);
        }
        int64_t s_ns = s_ps / 1000, e_ns = (s_ps + d_ps) / 1000;
        if (s_ns < prev_s) {
            FAIL("row %zd: rows are not in start order", i);
        }
        prev_s = s_ns;
        while (h.n && h.e[0] <= s_ns) { /* ENDs due by this start go first */
            if (write_end(&o, h.e[0], h.u[0]) < 0) FAIL_OUT();
            heap_pop(&h);
        }
        int is_ev = kind == K_EVENT, is_mk = kind == K_MARKER, is_ct = kind == K_COUNTER, is_bd = kind == K_BREAKDOWN;
        if (!(is_ev || is_mk || is_ct || is_bd)) {
            FAIL("row %zd: unknown row kind %lld", i, (long long)kind);
        }
        int is_slice = !is_ct, has_end = is_slice && e_ns > s_ns;
        int64_t rid = cols[C_ID].v[i];
        Py_ssize_t a_lo = 0, a_hi = 0;
        if (is_ev && tab[T_AEID].n) equal_range(aeid, tab[T_AEID].n, rid, &a_lo, &a_hi);
        size_t args_len = (size_t)(aoffs[a_hi] - aoffs[a_lo]);
        if (args_len + MAX_ROW_BYTES > scratch_cap) {
            while (args_len + MAX_ROW_BYTES > scratch_cap) scratch_cap *= 2;
            uint8_t *p2 = realloc(scratch, scratch_cap);
            if (!p2) {
                err_nomem = 1;
                goto rows_done;
            }
            scratch = p2;
        }
        /* the TrackEvent, into scratch */
        uint8_t *p = scratch;
        if (is_slice) {
            uint64_t cat;
            if (is_mk) cat = step_cat;
            else if (is_bd) cat = bd_cat;
            else {
                int64_t t = cols[C_TRACK].v[i];
                if (t < 0 || t >= tab[T_CAT].n) {
                    FAIL("row %zd: track %lld has no category", i, (long long)t);
                }
                cat = cat_of[t];
            }
            *p++ = 0x18;
            p = wv(p, cat);
            for (int k = 0; k < n_typed; k++) {
                const Col *c = &cols[C_TYPED + k];
                if (!col_valid(c, i)) continue;
                uint64_t v = (uint64_t)c->v[i];
                if (string_mask >> k & 1) { /* a string id: its interned iid */
                    if ((int64_t)v < 0 || (Py_ssize_t)v >= tab[T_TABLEIID].n) {
                        FAIL("row %zd: string %lld is not interned", i, (long long)v);
                    }
                    v = table_iid[v];
                    *p++ = 0x22;
                    *p++ = (uint8_t)(1 + vsize(ann_iid[k]) + 2 + vsize(v));
                    *p++ = 0x08;
                    p = wv(p, ann_iid[k]);
                    *p++ = 0x88;
                    *p++ = 0x01;
                    p = wv(p, v);
                } else {
                    p = ann_int(p, ann_iid[k], v);
                }
            }
        }
        int off_start = s_ps % 1000 != 0;
        int exact_ts = is_ct && off_start;
        if (is_slice && off_start) p = ann_int(p, ann_iid[n_typed], (uint64_t)s_ps);
        if (is_slice && (off_start || d_ps % 1000 != 0)) p = ann_int(p, ann_iid[n_typed + 1], (uint64_t)d_ps);
        if (exact_ts) p = ann_int(p, ann_iid[n_typed + 2], (uint64_t)s_ps);
        if (args_len) {
            memcpy(p, ablob + aoffs[a_lo], args_len);
            p += args_len;
        }
        *p++ = 0x48;
        *p++ = (uint8_t)(is_ct ? T_COUNTER : has_end ? T_BEGIN : T_INSTANT);
        if (is_ev || is_bd) {
            uint64_t nm;
            int64_t id = cols[C_NAME].v[i];
            if (is_bd) nm = (uint64_t)id;
            else if (id < 0 || id >= tab[T_NAME].n) {
                FAIL("row %zd: name %lld is not interned", i, (long long)id);
            } else nm = name_iid[id];
            *p++ = 0x50;
            p = wv(p, nm);
        }
        if (uuid[i] != default_uuid) {
            *p++ = 0x58;
            p = wv(p, uuid[i]);
        }
        if (is_mk) {
            char name[32];
            int len = snprintf(name, sizeof name, "Step %lld", (long long)cols[C_STEP].v[i]);
            *p++ = 0xBA;
            *p++ = 0x01;
            *p++ = (uint8_t)len;
            memcpy(p, name, len);
            p += len;
        }
        if (is_ct) {
            *p++ = 0xE1;
            *p++ = 0x02;
            p = w64(p, (uint64_t)cols[c_value].v[i]);
        }
        if (is_ev && bit_set(fbits, tab[T_FBITS].n, flow_lo, rid)) { /* a flow starts or ends here */
            Py_ssize_t lo, hi;
            equal_range(fsrc, tab[T_FSRC].n, rid, &lo, &hi);
            if (hi > lo) {
                *p++ = 0xF9;
                *p++ = 0x02;
                p = w64(p, fsrc_id[lo]);
            }
        }
        if (is_ev && bit_set(fbits, tab[T_FBITS].n, flow_lo, rid)) {
            Py_ssize_t lo, hi;
            equal_range(fdst, tab[T_FDST].n, rid, &lo, &hi);
            if (hi > lo) {
                *p++ = 0x81;
                *p++ = 0x03;
                p = w64(p, fdst_id[lo]);
            }
        }
        uint64_t te = (uint64_t)(p - scratch);
        int flags = is_slice || exact_ts;
        uint64_t pkt = 1 + vsize((uint64_t)s_ns) + 2 + 1 + vsize(te) + te + (flags ? 2 : 0);
        if (out_reserve(&o, pkt + 12) < 0) FAIL_OUT();
        uint8_t *q = o.p + o.len;
        *q++ = 0x0A;
        q = wv(q, pkt);
        *q++ = 0x40;
        q = wv(q, (uint64_t)s_ns);
        *q++ = 0x50;
        *q++ = SEQ_ID;
        *q++ = 0x5A;
        q = wv(q, te);
        memcpy(q, scratch, te);
        q += te;
        if (flags) {
            *q++ = 0x68;
            *q++ = NEEDS_INCREMENTAL_STATE;
        }
        o.len = q - o.p;
        if (has_end) heap_push(&h, e_ns, seq0 + i, uuid[i]);
    }
rows_done:
    Py_END_ALLOW_THREADS
#undef FAIL
#undef FAIL_OUT
    if (err_nomem) PyErr_NoMemory();
    else if (err[0]) PyErr_SetString(PyExc_ValueError, err);
    else result = Py_BuildValue("nn", (Py_ssize_t)o.len, h.n);
done:
    free(scratch);
    buf_release(&out_b);
    buf_release(&uuid_b);
    for (int c = 0; c < MAX_COLS; c++) {
        buf_release(&cols[c].data);
        buf_release(&cols[c].valid);
    }
    for (int t = 0; t < N_TABLES; t++) buf_release(&tab[t].b);
    for (int k = 0; k < 3; k++) buf_release(&heap_b[k]);
    return result;
}

/* -- encode_ends: every pending END, in order ---------------------------------------------- */

static PyObject *encode_ends(PyObject *self, PyObject *args) {
    PyObject *heap_obj;
    if (!PyArg_ParseTuple(args, "O!", &PyTuple_Type, &heap_obj)) return NULL;
    Buf heap_b[3];
    memset(heap_b, 0, sizeof heap_b);
    Heap h;
    Out o = {0};
    PyObject *result = NULL;
    if (heap_get(heap_obj, &h, heap_b, 0) < 0) goto done;
    while (h.n) {
        if (write_end(&o, h.e[0], h.u[0]) < 0) {
            out_raise(&o);
            goto done;
        }
        heap_pop(&h);
    }
    result = PyBytes_FromStringAndSize((const char *)(o.p ? o.p : (uint8_t *)""), (Py_ssize_t)o.len);
done:
    free(o.p);
    for (int k = 0; k < 3; k++) buf_release(&heap_b[k]);
    return result;
}

/* -- encode_args: event_args rows as DebugAnnotation fields ---------------------------------- */

static PyObject *encode_args(PyObject *self, PyObject *args) {
    PyObject *key_o, *kind_o, *int_o, *dbl_o, *soff_o, *sdata_o;
    if (!PyArg_ParseTuple(args, "OOOOOO", &key_o, &kind_o, &int_o, &dbl_o, &soff_o, &sdata_o)) return NULL;
    Buf key = {0}, kind = {0}, iv = {0}, dv = {0}, soff = {0}, sdata = {0};
    Out o = {0};
    PyObject *result = NULL, *offs = NULL;
    if (buf_get(key_o, &key, 8, 0, 0, "key_iid") < 0) goto done;
    Py_ssize_t k = key.view.len / 8;
    if (buf_get(kind_o, &kind, 1, k, 0, "kind") < 0 || buf_get(int_o, &iv, 8, k, 0, "int_value") < 0
        || buf_get(dbl_o, &dv, 8, k, 0, "double_value") < 0 || buf_get(soff_o, &soff, 8, k + 1, 0, "offsets") < 0
        || buf_get(sdata_o, &sdata, 1, 0, 0, "strings") < 0)
        goto done;
    offs = PyBytes_FromStringAndSize(NULL, (k + 1) * 8);
    if (!offs) goto done;
    int64_t *ao = (int64_t *)PyBytes_AS_STRING(offs);
    const uint64_t *kv = key.view.buf;
    const uint8_t *kd = kind.view.buf;
    const uint64_t *ivv = iv.view.buf, *dvv = dv.view.buf;
    const int64_t *so = soff.view.buf;
    const uint8_t *sd = sdata.view.buf;
    ao[0] = 0;
    for (Py_ssize_t r = 0; r < k; r++) {
        uint64_t body = 1 + vsize(kv[r]);
        uint64_t slen = 0;
        if (kd[r] == 1) body += 1 + vsize(ivv[r]);
        else if (kd[r] == 2) body += 1 + 8;
        else if (kd[r] == 3) {
            if (so[r] < 0 || so[r + 1] < so[r] || so[r + 1] > sdata.view.len) {
                PyErr_SetString(PyExc_ValueError, "encode_args: bad string offsets");
                goto done;
            }
            slen = (uint64_t)(so[r + 1] - so[r]);
            body += 1 + vsize(slen) + slen;
        }
        if (out_reserve(&o, body + 12) < 0) {
            out_raise(&o);
            goto done;
        }
        uint8_t *p = o.p + o.len;
        *p++ = 0x22;
        p = wv(p, body);
        *p++ = 0x08;
        p = wv(p, kv[r]);
        if (kd[r] == 1) {
            *p++ = 0x20;
            p = wv(p, ivv[r]);
        } else if (kd[r] == 2) {
            *p++ = 0x29;
            p = w64(p, dvv[r]);
        } else if (kd[r] == 3) {
            *p++ = 0x32;
            p = wv(p, slen);
            memcpy(p, sd + so[r], slen);
            p += slen;
        }
        o.len = p - o.p;
        ao[r + 1] = (int64_t)o.len;
    }
    result = Py_BuildValue("y#O", (const char *)(o.p ? o.p : (uint8_t *)""), (Py_ssize_t)o.len, offs);
done:
    Py_XDECREF(offs);
    free(o.p);
    buf_release(&key);
    buf_release(&kind);
    buf_release(&iv);
    buf_release(&dv);
    buf_release(&soff);
    buf_release(&sdata);
    return result;
}

static PyMethodDef methods[] = {
    {"encode_chunk", encode_chunk, METH_VARARGS,
     "encode_chunk(columns, uuid, tables, flow_lo, default_uuid, step_cat, breakdown_cat, string_mask, heap, seq0,\n"
     "out) -> (length, pending): one stream batch as Trace.packet fields, with the ENDs due before each row,\n"
     "written to the start of the writable buffer `out`."},
    {"encode_ends", encode_ends, METH_VARARGS, "encode_ends(heap) -> bytes: every pending END, in order."},
    {"encode_args", encode_args, METH_VARARGS,
     "encode_args(key_iid, kind, int_value, double_value, str_offsets, str_data) -> (bytes, offsets)\n"
     "event_args rows as TrackEvent.debug_annotations fields (kind 0 none, 1 int, 2 double, 3 string)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_perfetto_wire",
                                    "Perfetto TracePackets encoded per row (exporters/perfetto/).", -1, methods};

PyMODINIT_FUNC PyInit__perfetto_wire(void) {
    PyObject *m = PyModule_Create(&module);
    if (m && (PyModule_AddIntConstant(m, "MAX_ROW_BYTES", MAX_ROW_BYTES) < 0
              || PyModule_AddIntConstant(m, "MAX_END_BYTES", MAX_END_BYTES) < 0)) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
