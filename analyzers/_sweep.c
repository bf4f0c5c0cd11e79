/* The wall-time split's sweep line in C (analyzers/timeline.py).
 *
 * owned() walks one chip's events in start order, merging the runs it is given (the
 * chip's tracks, each already sorted by start), and credits every instant of every
 * step window to a label:
 *   priority mode  the lowest active kind (kinds are priorities, 0 first), else
 *                  n_cat - 1 ("nothing");
 *   sets mode      the bitmask of the active kinds (0: nothing), n_cat = 2**kinds.
 * Kind k is active at instant x when an event of kind k with start <= x has end > x,
 * i.e. when the furthest end of kind k's events started so far (its reach) is > x:
 * intervals are half-open, so touching events leave no gap and zero-length events
 * take no time. Between two event starts the label changes only where a reach runs
 * out or a window begins or ends, so the walk costs O(events x kinds).
 * The GIL is released: chips and views split in parallel threads.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define MAX_KINDS 62 /* kinds are bits of a uint64_t (and, in sets mode, of the int label) */

typedef struct {
    const int64_t *w_start, *w_end;
    Py_ssize_t m, j; /* windows, and the first that has not ended */
    int64_t t;       /* instants before t are credited */
    int64_t reach[MAX_KINDS];
    uint64_t live; /* bit k: reach[k] > t */
    int n_cat, sets;
    int64_t *out; /* [window][label] */
} Sweep;

/* Credit every instant in [s->t, to) that lies inside a window. */
static void advance(Sweep *s, int64_t to) {
    while (s->t < to) {
        while (s->j < s->m && s->w_end[s->j] <= s->t) s->j++;
        if (s->j >= s->m) { /* after the last window: nothing left to credit */
            s->t = to;
            break;
        }
        int64_t nxt = to;
        if (s->t < s->w_start[s->j]) { /* between windows: skip to the next one */
            if (s->w_start[s->j] < nxt) nxt = s->w_start[s->j];
            s->t = nxt;
        } else {
            if (s->w_end[s->j] < nxt) nxt = s->w_end[s->j];
            for (uint64_t bits = s->live; bits; bits &= bits - 1) {
                int64_t r = s->reach[__builtin_ctzll(bits)];
                if (r < nxt) nxt = r;
            }
            int label = s->sets ? (int)s->live : (s->live ? __builtin_ctzll(s->live) : s->n_cat - 1);
            s->out[s->j * s->n_cat + label] += nxt - s->t;
            s->t = nxt;
        }
        for (uint64_t bits = s->live; bits; bits &= bits - 1) { /* kinds whose work has all ended by t */
            int k = __builtin_ctzll(bits);
            if (s->reach[k] <= s->t) s->live &= ~(1ULL << k);
        }
    }
}

/* Window j ends before it starts, or starts before window j - 1 ends. */
static int window_misplaced(const Py_buffer *b, Py_ssize_t j) {
    const int64_t *ws = b[4].buf, *we = b[5].buf;
    return we[j] < ws[j] || (j > 0 && ws[j] < we[j - 1]);
}

static int get_buffer(PyObject *obj, Py_buffer *view, Py_ssize_t itemsize, int writable, const char *what) {
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0)) < 0) return -1;
    if (view->itemsize != itemsize) {
        PyErr_Format(PyExc_TypeError, "%s: expected items of %zd bytes, got %zd", what, itemsize, view->itemsize);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

PyDoc_STRVAR(owned_doc,
             "owned(start, end, kind, runs, w_start, w_end, n_cat, sets, out)\n\n"
             "Add to out (int64, windows x n_cat, zeroed by the caller) the ps each label owns in each window.\n"
             "start, end: int64 per event; kind: int8 per event (negative: not part of this split);\n"
             "runs: int64 (lo, hi) pairs, the event ranges to merge, each sorted by start;\n"
             "w_start, w_end: int64 windows, sorted and not overlapping.");

static PyObject *owned(PyObject *self, PyObject *args) {
    PyObject *o[7];
    int n_cat, sets;
    if (!PyArg_ParseTuple(args, "OOOOOOipO", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &n_cat, &sets, &o[6]))
        return NULL;
    static const char *names[7] = {"start", "end", "kind", "runs", "w_start", "w_end", "out"};
    static const Py_ssize_t sizes[7] = {8, 8, 1, 8, 8, 8, 8};
    Py_buffer b[7];
    int got = 0;
    for (; got < 7; got++)
        if (get_buffer(o[got], &b[got], sizes[got], got == 6, names[got]) < 0) goto fail;
    Py_ssize_t n = b[0].len / 8, m = b[4].len / 8, n_runs = b[3].len / 16;
    int n_kinds = sets ? 0 : n_cat - 1;
    if (sets)
        while ((1LL << n_kinds) < n_cat) n_kinds++;
    if (b[1].len / 8 != n || b[2].len != n || b[5].len / 8 != m || b[6].len / 8 != m * n_cat ||
        n_kinds > MAX_KINDS || (sets && (1LL << n_kinds) != n_cat) || n_cat < 1) {
        PyErr_SetString(PyExc_ValueError, "owned: inconsistent array sizes or label count");
        goto fail;
    }
    const int64_t *start = b[0].buf, *end = b[1].buf, *runs = b[3].buf;
    const int8_t *kind = b[2].buf;
    for (Py_ssize_t r = 0; r < 2 * n_runs; r++)
        if (runs[r] < 0 || runs[r] > n || (r % 2 && runs[r] < runs[r - 1])) {
            PyErr_SetString(PyExc_ValueError, "owned: a run lies outside the events");
            goto fail;
        }
    for (Py_ssize_t j = 0; j < m; j++)
        if (window_misplaced(b, j)) {
            PyErr_SetString(PyExc_ValueError, "owned: windows must be sorted and not overlap");
            goto fail;
        }
    Py_ssize_t *head = PyMem_Malloc(sizeof(Py_ssize_t) * (n_runs ? n_runs : 1));
    int64_t *hs = PyMem_Malloc(sizeof(int64_t) * (n_runs ? n_runs : 1));
    if (!head || !hs) {
        PyMem_Free(head);
        PyMem_Free(hs);
        PyErr_NoMemory();
        goto fail;
    }
    Sweep s = {.w_start = b[4].buf, .w_end = b[5].buf, .m = m, .j = 0, .t = INT64_MIN, .live = 0,
               .n_cat = n_cat, .sets = sets, .out = b[6].buf};
    const char *error = NULL;
    int64_t last = INT64_MIN;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t r = 0; r < n_runs; r++) { /* each run's head and its start (INT64_MAX: done) */
        head[r] = runs[2 * r];
        hs[r] = head[r] < runs[2 * r + 1] ? start[head[r]] : INT64_MAX;
    }
    for (;;) { /* the next event by start among the runs' heads */
        Py_ssize_t best = 0;
        for (Py_ssize_t r = 1; r < n_runs; r++)
            if (hs[r] < hs[best]) best = r;
        if (n_runs == 0 || hs[best] == INT64_MAX) break;
        Py_ssize_t i = head[best]++;
        hs[best] = head[best] < runs[2 * best + 1] ? start[head[best]] : INT64_MAX;
        if (start[i] < last) {
            error = "owned: a run is not sorted by start";
            break;
        }
        last = start[i];
        int k = kind[i];
        if (k >= n_kinds) {
            error = "owned: a kind has no label";
            break;
        }
        if (k < 0 || end[i] <= start[i]) continue;
        advance(&s, start[i]);
        if (!(s.live >> k & 1) || end[i] > s.reach[k]) s.reach[k] = end[i];
        s.live |= 1ULL << k; /* advance() left t = start[i] < end[i] */
    }
    if (m && !error) advance(&s, s.w_end[m - 1]);
    Py_END_ALLOW_THREADS
    PyMem_Free(head);
    PyMem_Free(hs);
    if (error) {
        PyErr_SetString(PyExc_ValueError, error);
        goto fail;
    }
    for (int k = 0; k < 7; k++) PyBuffer_Release(&b[k]);
    Py_RETURN_NONE;
fail:
    for (int k = 0; k < got; k++) PyBuffer_Release(&b[k]);
    return NULL;
}

static PyMethodDef methods[] = {
    {"owned", owned, METH_VARARGS, owned_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_sweep", "The wall-time split's sweep line.", -1, methods};

PyMODINIT_FUNC PyInit__sweep(void) { return PyModule_Create(&module); }
