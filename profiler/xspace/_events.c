/* The XSpace import's native event decoder (profiler/xspace/decode_native.py drives it).
 *
 * decode(buf, starts, ends, row_mids, ranks) decodes the events buf[starts[i]:ends[i]] with
 * protobuf's rules (fields in any order, unknown fields skipped, the last of a repeated scalar
 * wins, the last member of a oneof set wins, a message split into concatenated parts merges)
 * into columns:
 *
 *   events   metadata_id, offset_ps, duration_ps, num_occurrences (int64 each);
 *   columns  stats of events whose stats all hold an integer, a ref or no value: one
 *            column per (stat metadata id, kind) with the events, values and ranks;
 *   rows     every stat of the other events (a double, a string or bytes, a metadata id in
 *            row_mids, or more distinct (id, kind) pairs than MAX_COLUMNS): one row each.
 *
 * An event's stats are all columns or all rows. Anything protobuf's rules do not cover
 * (a varint longer than 10 bytes, a field past the end of its message, a group or an invalid
 * wire type, field number 0) returns None, and the caller decodes the line with the numpy
 * decoders, which name the problem. One pass over the bytes, the GIL released, fills each
 * column in the calling thread's kept working arrays; the outputs, bytearrays the caller views
 * with numpy, are then copied out at their exact sizes.
 * The module also holds plane_lines (profiler/xspace/_planes.c).
 */
#include "_wire.h" /* Python.h first */

#include <math.h>
#include <pthread.h>

#define MAX_COLUMNS 256  /* distinct (metadata id, kind) stat columns per call; events needing more are rows */
#define TABLE_SLOTS 1024 /* open addressing, a power of two above 2 * MAX_COLUMNS */

typedef struct {
    uint64_t mid, ival;
    double dval;
    int64_t spos, slen;
    int kind;
} Stat;

typedef struct {
    uint64_t mid, off, dur, occ;
} Event;

typedef struct {
    Stat *s;
    Py_ssize_t n, cap;
} Stats;

/* Parse one XStat in [p, end) (positions relative to `base`). */
static int parse_stat(const uint8_t *base, const uint8_t *p, const uint8_t *end, Stat *st) {
    uint64_t mid = 0, ival = 0, bits = 0, key, v;
    if (end - p >= 3 && p[0] == ST_METADATA_ID << 3 && p[1] < 0x80) { /* the usual: a small id, an integer */
        int k = p[2] == ST_INT64 << 3 ? KIND_INT : p[2] == ST_UINT64 << 3 ? KIND_UINT : p[2] == ST_REF << 3 ? KIND_REF : 0;
        const uint8_t *q = p + 3;
        if (k && !varint(&q, end, &v) && q == end) {
            *st = (Stat){p[1], v, NAN, -1, 0, k};
            return OK;
        }
    }
    int64_t spos = -1, slen = 0;
    int kind = 0;
    while (p < end) {
        if (varint(&p, end, &key)) return BAD;
        uint64_t num = key >> 3;
        int wire = (int)(key & 7);
        if (num == 0) return BAD;
        if (wire == 0) {
            if (varint(&p, end, &v)) return BAD;
            if (num == ST_METADATA_ID) mid = v;
            else if (num == ST_INT64) kind = KIND_INT, ival = v;
            else if (num == ST_UINT64) kind = KIND_UINT, ival = v;
            else if (num == ST_REF) kind = KIND_REF, ival = v;
        } else if (wire == 1 && num == ST_DOUBLE) {
            if (end - p < 8) return BAD;
            memcpy(&bits, p, 8); /* little-endian hosts (x86-64, aarch64) */
            p += 8;
            kind = KIND_DOUBLE;
        } else if (wire == 2 && (num == ST_STR || num == ST_BYTES)) {
            if (varint(&p, end, &v) || v > (uint64_t)(end - p)) return BAD;
            kind = num == ST_STR ? KIND_STR : KIND_BYTES;
            spos = p - base;
            slen = (int64_t)v;
            p += v;
        } else if (skip(&p, end, wire)) {
            return BAD;
        }
    }
    st->mid = mid;
    st->kind = kind;
    st->ival = (kind == KIND_INT || kind == KIND_UINT || kind == KIND_REF) ? ival : 0;
    if (kind == KIND_DOUBLE) memcpy(&st->dval, &bits, 8);
    else st->dval = NAN;
    st->spos = (kind == KIND_STR || kind == KIND_BYTES) ? spos : -1;
    st->slen = (kind == KIND_STR || kind == KIND_BYTES) ? slen : 0;
    return OK;
}

/* Parse one XEvent in [p, end): its fields into *ev, its stats into *sv (reset first). */
static int parse_event(const uint8_t *base, const uint8_t *p, const uint8_t *end, Event *ev, Stats *sv) {
    uint64_t key, v;
    ev->mid = ev->off = ev->dur = ev->occ = 0;
    sv->n = 0;
    while (p < end) {
        if (varint(&p, end, &key)) return BAD;
        uint64_t num = key >> 3;
        int wire = (int)(key & 7);
        if (num == 0) return BAD;
        if (wire == 0) {
            if (varint(&p, end, &v)) return BAD;
            if (num == EV_METADATA_ID) ev->mid = v;
            else if (num == EV_DURATION_PS) ev->dur = v;
            else if (num == EV_OFFSET_PS) ev->off = v, ev->occ = 0; /* oneof: the last set wins */
            else if (num == EV_NUM_OCC) ev->occ = v, ev->off = 0;
        } else if (wire == 2 && num == EV_STATS) {
            if (varint(&p, end, &v) || v > (uint64_t)(end - p)) return BAD;
            if (sv->n == sv->cap) {
                Py_ssize_t cap = sv->cap ? 2 * sv->cap : 64;
                Stat *s = realloc(sv->s, (size_t)cap * sizeof(Stat));
                if (!s) return NOMEM;
                sv->s = s, sv->cap = cap;
            }
            if (parse_stat(base, p, p + v, &sv->s[sv->n])) return BAD;
            sv->n++;
            p += v;
        } else if (skip(&p, end, wire)) {
            return BAD;
        }
    }
    return OK;
}

typedef struct {
    uint64_t mid;
    int kind;
    int dense;        /* so far every event holds the stat once: its event indices are not kept */
    Py_ssize_t count; /* stats */
} Column;

typedef struct {
    int16_t slot[TABLE_SLOTS]; /* column index + 1, 0: empty */
    Column col[MAX_COLUMNS];
    int n;
} Table;

static inline size_t slot_of(uint64_t mid, int kind) {
    uint64_t h = (mid * 0x9E3779B97F4A7C15ULL) ^ ((uint64_t)kind << 32);
    return (size_t)((h ^ (h >> 29)) & (TABLE_SLOTS - 1));
}

/* The column of (mid, kind); created when `add` and there is room; -1 otherwise. */
static int column(Table *t, uint64_t mid, int kind, int add) {
    size_t i = slot_of(mid, kind);
    while (t->slot[i]) {
        Column *c = &t->col[t->slot[i] - 1];
        if (c->mid == mid && c->kind == kind) return t->slot[i] - 1;
        i = (i + 1) & (TABLE_SLOTS - 1);
    }
    if (!add || t->n == MAX_COLUMNS) return -1;
    t->col[t->n] = (Column){mid, kind, 1, 0};
    t->slot[i] = (int16_t)(++t->n);
    return t->n - 1;
}

static int in_sorted(const int64_t *a, Py_ssize_t n, int64_t x) {
    Py_ssize_t lo = 0, hi = n;
    while (lo < hi) {
        Py_ssize_t m = (lo + hi) / 2;
        if (a[m] < x) lo = m + 1;
        else hi = m;
    }
    return lo < n && a[lo] == x;
}

/* Column ids of the event's stats (into cid), when they can be columns: integer, ref or no value,
   ids not in row_mids, room for their columns (created here). `prev` holds the previous event's
   stats and ids: events of a line mostly repeat one layout, which skips the hash. */
static int columnar(Table *t, const Stats *sv, int *cid, const Stats *prev, const int *prev_cid, const int64_t *row_mids,
                    Py_ssize_t n_row_mids) {
    for (Py_ssize_t j = 0; j < sv->n; j++) {
        const Stat *s = &sv->s[j];
        if (s->kind == KIND_DOUBLE || s->kind == KIND_STR || s->kind == KIND_BYTES) return 0;
        if (n_row_mids && in_sorted(row_mids, n_row_mids, (int64_t)s->mid)) return 0;
    }
    for (Py_ssize_t j = 0; j < sv->n; j++) {
        const Stat *s = &sv->s[j];
        if (j < prev->n && prev->s[j].mid == s->mid && prev->s[j].kind == s->kind) cid[j] = prev_cid[j];
        else if ((cid[j] = column(t, s->mid, s->kind, 1)) < 0) return 0;
    }
    return 1;
}

/* A growable array (realloc, doubling). */
typedef struct {
    char *p;
    size_t n, cap, item;
} Vec;

static int reserve(Vec *v, size_t more) {
    if (v->n + more <= v->cap) return OK;
    size_t cap = v->cap ? v->cap : 1024;
    while (cap < v->n + more) cap *= 2;
    char *p = realloc(v->p, cap * v->item);
    if (!p) return NOMEM;
    v->p = p, v->cap = cap;
    return OK;
}

typedef struct {
    Stat s;
    int64_t event, rank;
} Row;

/* A thread's working arrays, kept between calls: a capture's lines are decoded one after the other
   in a thread, and memory freed between them would come back as fresh pages to fault in and zero.
   Each column's values, event indices (once it is not dense) and ranks, and the row stats. */
typedef struct {
    Vec vals[MAX_COLUMNS], index[MAX_COLUMNS], ranks[MAX_COLUMNS], rows;
} Scratch;

#define SCRATCH_KEEP_BYTES (64 << 20) /* more is freed after the call */

static pthread_key_t scratch_key;

static void each_vec(Scratch *s, void (*f)(Vec *)) {
    for (int c = 0; c < MAX_COLUMNS; c++) f(&s->vals[c]), f(&s->index[c]), f(&s->ranks[c]);
    f(&s->rows);
}

static void vec_free(Vec *v) { free(v->p), v->p = NULL, v->cap = v->n = 0; }
static void vec_clear(Vec *v) { v->n = 0; }

static void free_scratch(void *p) {
    if (!p) return;
    each_vec(p, vec_free);
    free(p);
}

static Scratch *get_scratch(void) {
    Scratch *s = pthread_getspecific(scratch_key);
    if (!s && (s = calloc(1, sizeof(Scratch)))) {
        for (int c = 0; c < MAX_COLUMNS; c++) s->vals[c].item = 8, s->index[c].item = 8, s->ranks[c].item = 4;
        s->rows.item = sizeof(Row);
        if (pthread_setspecific(scratch_key, s)) {
            free(s);
            return NULL;
        }
    }
    if (s) each_vec(s, vec_clear);
    return s;
}

static void trim_scratch(Scratch *s) {
    size_t bytes = s->rows.cap * s->rows.item;
    for (int c = 0; c < MAX_COLUMNS; c++)
        bytes += s->vals[c].cap * 8 + s->index[c].cap * 8 + s->ranks[c].cap * 4;
    if (bytes > SCRATCH_KEEP_BYTES) each_vec(s, vec_free);
}

/* Append stat `v` (rank j) of event i to column c. */
static inline int add_to_column(Column *col, Scratch *sc, int c, Py_ssize_t i, Py_ssize_t j, uint64_t v,
                                int want_ranks) {
    Vec *vals = &sc->vals[c], *index = &sc->index[c];
    if (col->dense && col->count != i) { /* an event without it, or one holding it twice: keep indices */
        col->dense = 0;
        if (reserve(index, (size_t)col->count + 1)) return NOMEM;
        int64_t *ix = (int64_t *)index->p;
        for (Py_ssize_t k = 0; k < col->count; k++) ix[k] = k; /* dense so far: events 0 .. count - 1 */
        index->n = (size_t)col->count;
    }
    if (reserve(vals, 1)) return NOMEM;
    ((uint64_t *)vals->p)[vals->n++] = v;
    if (!col->dense) {
        if (reserve(index, 1)) return NOMEM;
        ((int64_t *)index->p)[index->n++] = i;
    }
    if (want_ranks) {
        if (reserve(&sc->ranks[c], 1)) return NOMEM;
        ((int32_t *)sc->ranks[c].p)[sc->ranks[c].n++] = (int32_t)j;
    }
    col->count++;
    return OK;
}

PyDoc_STRVAR(decode_doc,
             "decode(buf, starts, ends, row_mids, ranks) -> (events, rows, doubles, kinds, col_keys, col_ints, "
             "col_index, col_ranks) | None\n\n"
             "Decode the XEvents buf[starts[i]:ends[i]] (starts, ends: int64; row_mids: sorted int64 stat\n"
             "metadata ids whose stats stay rows). Bytearrays, to view with numpy: events int64 (4, n):\n"
             "metadata_id, offset_ps, duration_ps, num_occurrences; rows int64 (6, m): event, metadata_id,\n"
             "int value, str/bytes position in buf (-1: none), its length, rank in the event; doubles\n"
             "float64 (m,), NaN unless a double; kinds int8 (m,); col_keys int64 (k, 4): metadata id, kind,\n"
             "start of the column's values in col_ints (and of its ranks in col_ranks), start of its event\n"
             "indices in col_index, -1 for a dense column (every event once, in order: no indices kept);\n"
             "a column ends where the next begins. col_ranks int32, rank of each value in its event, only\n"
             "with `ranks` (else empty). None: some event is not valid protobuf.");

static PyObject *decode(PyObject *self, PyObject *args) {
    PyObject *o_buf, *o_starts, *o_ends, *o_rows;
    int want_ranks;
    if (!PyArg_ParseTuple(args, "OOOOp", &o_buf, &o_starts, &o_ends, &o_rows, &want_ranks)) return NULL;
    Py_buffer b[4];
    const char *names[4] = {"buf", "starts", "ends", "row_mids"};
    PyObject *objs[4] = {o_buf, o_starts, o_ends, o_rows};
    const Py_ssize_t sizes[4] = {1, 8, 8, 8};
    int got = 0;
    for (; got < 4; got++)
        if (get_buffer(objs[got], &b[got], sizes[got], names[got]) < 0) goto fail_buffers;
    const uint8_t *buf = b[0].buf;
    const int64_t *starts = b[1].buf, *ends = b[2].buf, *row_mids = b[3].buf;
    Py_ssize_t n = b[1].len / 8, n_row_mids = b[3].len / 8, len = b[0].len;
    if (b[2].len / 8 != n) {
        PyErr_SetString(PyExc_ValueError, "starts and ends differ in length");
        goto fail_buffers;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        if (starts[i] < 0 || starts[i] > ends[i] || ends[i] > len) {
            PyErr_Format(PyExc_ValueError, "event %zd: span %lld..%lld outside the buffer", i, (long long)starts[i],
                         (long long)ends[i]);
            goto fail_buffers;
        }

    PyObject *o_ev = NULL, *o_rows_i = NULL, *o_rows_d = NULL, *o_rows_k = NULL, *o_keys = NULL, *o_ints = NULL,
             *o_index = NULL, *o_ranks = NULL, *result = NULL;
    Table *t = calloc(1, sizeof(Table));
    Scratch *sc = get_scratch();
    Stats sv = {NULL, 0, 0}, prev = {NULL, 0, 0};
    int *cid = NULL, *prev_cid = NULL;
    Py_ssize_t cid_cap = 0;
    Vec *rows = sc ? &sc->rows : NULL;
    o_ev = new_bytes(n * 32);
    if (!t || !sc || !o_ev) {
        if (!PyErr_Occurred()) PyErr_NoMemory();
        goto done;
    }
    int64_t *ev_out = I64(o_ev);
    int status = OK;
    Py_BEGIN_ALLOW_THREADS;
    for (Py_ssize_t i = 0; i < n && status == OK; i++) { /* parse, and keep each stat in its column or as a row */
        Event e;
        if ((status = parse_event(buf, buf + starts[i], buf + ends[i], &e, &sv)) != OK) break;
        ev_out[i] = (int64_t)e.mid, ev_out[n + i] = (int64_t)e.off;
        ev_out[2 * n + i] = (int64_t)e.dur, ev_out[3 * n + i] = (int64_t)e.occ;
        if (sv.n > cid_cap) {
            Py_ssize_t cap = sv.n * 2;
            int *a = realloc(cid, (size_t)cap * sizeof(int)), *b2 = a ? realloc(prev_cid, (size_t)cap * sizeof(int)) : NULL;
            if (a) cid = a;
            if (b2) prev_cid = b2;
            if (!a || !b2) {
                status = NOMEM;
                break;
            }
            cid_cap = cap;
        }
        if (columnar(t, &sv, cid, &prev, prev_cid, row_mids, n_row_mids)) {
            for (Py_ssize_t j = 0; j < sv.n && status == OK; j++)
                status = add_to_column(&t->col[cid[j]], sc, cid[j], i, j, sv.s[j].ival, want_ranks);
            Stats tmp = prev; /* this event's layout is the next one's guess */
            prev = sv, sv = tmp;
            int *tc = prev_cid;
            prev_cid = cid, cid = tc;
        } else {
            if ((status = reserve(rows, sv.n)) != OK) break;
            Row *r = (Row *)rows->p + rows->n;
            for (Py_ssize_t j = 0; j < sv.n; j++) r[j] = (Row){sv.s[j], i, j};
            rows->n += sv.n;
        }
    }
    Py_END_ALLOW_THREADS;
    if (status == NOMEM) {
        PyErr_NoMemory();
        goto done;
    }
    if (status == BAD) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    Py_ssize_t m = (Py_ssize_t)rows->n, total = 0, total_ev = 0;
    int k = 0;
    for (int c = 0; c < t->n; c++) {
        Column *col = &t->col[c];
        if (col->dense && col->count != n) { /* events at the end without it: indices after all */
            col->dense = 0;
            Vec *index = &sc->index[c];
            if (reserve(index, (size_t)col->count)) {
                PyErr_NoMemory();
                goto done;
            }
            for (Py_ssize_t q = 0; q < col->count; q++) ((int64_t *)index->p)[q] = q;
            index->n = (size_t)col->count;
        }
        k += col->count > 0;
        total += col->count;
        total_ev += col->dense ? 0 : col->count;
    }
    o_rows_i = new_bytes(m * 48), o_rows_d = new_bytes(m * 8), o_rows_k = new_bytes(m);
    o_keys = new_bytes((Py_ssize_t)k * 32), o_ints = new_bytes(total * 8), o_index = new_bytes(total_ev * 8);
    o_ranks = new_bytes(want_ranks ? total * 4 : 0);
    if (!o_rows_i || !o_rows_d || !o_rows_k || !o_keys || !o_ints || !o_index || !o_ranks) goto done;
    int64_t *ri = I64(o_rows_i), *keys = I64(o_keys);
    char *ints = PyByteArray_AS_STRING(o_ints), *index = PyByteArray_AS_STRING(o_index);
    char *ranks = PyByteArray_AS_STRING(o_ranks);
    double *rd = (double *)PyByteArray_AS_STRING(o_rows_d);
    int8_t *rk = (int8_t *)PyByteArray_AS_STRING(o_rows_k);
    Py_BEGIN_ALLOW_THREADS;
    Py_ssize_t at = 0, ev_at = 0;
    for (int c = 0, kk = 0; c < t->n; c++) { /* columns in order of first appearance; empty ones dropped */
        Column *col = &t->col[c];
        if (!col->count) continue;
        keys[4 * kk] = (int64_t)col->mid, keys[4 * kk + 1] = col->kind, keys[4 * kk + 2] = at;
        keys[4 * kk + 3] = col->dense ? -1 : ev_at;
        kk++;
        memcpy(ints + 8 * at, sc->vals[c].p, (size_t)col->count * 8);
        if (want_ranks) memcpy(ranks + 4 * at, sc->ranks[c].p, (size_t)col->count * 4);
        if (!col->dense) memcpy(index + 8 * ev_at, sc->index[c].p, (size_t)col->count * 8), ev_at += col->count;
        at += col->count;
    }
    const Row *rr = (const Row *)rows->p;
    for (Py_ssize_t r = 0; r < m; r++) {
        const Stat *s = &rr[r].s;
        ri[r] = rr[r].event, ri[m + r] = (int64_t)s->mid, ri[2 * m + r] = (int64_t)s->ival;
        ri[3 * m + r] = s->spos, ri[4 * m + r] = s->slen, ri[5 * m + r] = rr[r].rank;
        rd[r] = s->dval, rk[r] = (int8_t)s->kind;
    }
    Py_END_ALLOW_THREADS;
    result = PyTuple_Pack(8, o_ev, o_rows_i, o_rows_d, o_rows_k, o_keys, o_ints, o_index, o_ranks);
done:
    Py_XDECREF(o_ev), Py_XDECREF(o_rows_i), Py_XDECREF(o_rows_d), Py_XDECREF(o_rows_k);
    Py_XDECREF(o_keys), Py_XDECREF(o_ints), Py_XDECREF(o_index), Py_XDECREF(o_ranks);
    free(t), free(sv.s), free(prev.s), free(cid), free(prev_cid);
    if (sc) trim_scratch(sc);
    for (int i = 0; i < 4; i++) PyBuffer_Release(&b[i]);
    return result;
fail_buffers:
    for (int i = 0; i < got; i++) PyBuffer_Release(&b[i]);
    return NULL;
}

static PyMethodDef methods[] = {
    {"decode", decode, METH_VARARGS, decode_doc},
    {"plane_lines", xplane_plane_lines, METH_O, xplane_plane_lines_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_events",
                                    "The XSpace import's native event decoder.", -1, methods};

PyMODINIT_FUNC PyInit__events(void) {
    static int key_made = 0;
    if (!key_made) {
        if (pthread_key_create(&scratch_key, free_scratch)) return PyErr_NoMemory();
        key_made = 1;
    }
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    PyObject *fields = Py_BuildValue("{s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i}", "PLANE_LINES",
                                     PLANE_LINES, "LINE_EVENTS", LINE_EVENTS, "EV_METADATA_ID", EV_METADATA_ID,
                                     "EV_OFFSET_PS", EV_OFFSET_PS, "EV_DURATION_PS", EV_DURATION_PS, "EV_STATS",
                                     EV_STATS, "EV_NUM_OCC", EV_NUM_OCC, "ST_METADATA_ID", ST_METADATA_ID,
                                     "ST_DOUBLE", ST_DOUBLE, "ST_UINT64", ST_UINT64, "ST_INT64", ST_INT64, "ST_STR",
                                     ST_STR, "ST_BYTES", ST_BYTES, "ST_REF", ST_REF);
    PyObject *kinds = Py_BuildValue("{s:i,s:i,s:i,s:i,s:i,s:i}", "KIND_INT", KIND_INT, "KIND_UINT", KIND_UINT,
                                    "KIND_DOUBLE", KIND_DOUBLE, "KIND_STR", KIND_STR, "KIND_BYTES", KIND_BYTES,
                                    "KIND_REF", KIND_REF);
    if (!fields || !kinds || PyModule_AddObject(m, "FIELDS", fields) < 0 || PyModule_AddObject(m, "KINDS", kinds) < 0) {
        Py_XDECREF(fields), Py_XDECREF(kinds), Py_DECREF(m);
        return NULL;
    }
    PyModule_AddIntConstant(m, "MAX_COLUMNS", MAX_COLUMNS);
    return m;
}
