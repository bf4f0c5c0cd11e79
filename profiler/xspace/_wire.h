/* What the XSpace import's C walks share (profiler/xspace/_events.c, profiler/xspace/_planes.c): the
 * protobuf wire format (field numbers, value kinds, varints) and buffer helpers. */
#ifndef SCPROF_XPLANE_WIRE_H
#define SCPROF_XPLANE_WIRE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* Field numbers and value kinds: profiler/xspace/wire.py's (checked against FIELDS and KINDS at import). */
#define PLANE_LINES 3
#define LINE_EVENTS 4
#define EV_METADATA_ID 1
#define EV_OFFSET_PS 2
#define EV_DURATION_PS 3
#define EV_STATS 4
#define EV_NUM_OCC 5
#define ST_METADATA_ID 1
#define ST_DOUBLE 2
#define ST_UINT64 3
#define ST_INT64 4
#define ST_STR 5
#define ST_BYTES 6
#define ST_REF 7
#define KIND_INT 1
#define KIND_UINT 2
#define KIND_DOUBLE 3
#define KIND_STR 4
#define KIND_BYTES 5
#define KIND_REF 6

enum { OK = 0, BAD = -1, NOMEM = -2 };

/* One varint at p (< end); BAD when it runs to `end` or past 10 bytes. Bits past 64 are dropped. */
static inline int varint(const uint8_t **p, const uint8_t *end, uint64_t *out) {
    const uint8_t *q = *p;
    if (q < end && *q < 0x80) {
        *out = *q;
        *p = q + 1;
        return OK;
    }
    uint64_t v = 0;
    for (int k = 0; k < 10; k++) {
        if (q >= end) return BAD;
        uint8_t b = *q++;
        v |= (uint64_t)(b & 0x7F) << (7 * k);
        if (b < 0x80) {
            *out = v;
            *p = q;
            return OK;
        }
    }
    return BAD;
}

/* Skip the value of a field of wire type `wire` (0, 1, 2, 5); BAD for others or past `end`. */
static inline int skip(const uint8_t **p, const uint8_t *end, int wire) {
    uint64_t v;
    switch (wire) {
    case 0:
        return varint(p, end, &v);
    case 1:
        if (end - *p < 8) return BAD;
        *p += 8;
        return OK;
    case 2:
        if (varint(p, end, &v) || v > (uint64_t)(end - *p)) return BAD;
        *p += v;
        return OK;
    case 5:
        if (end - *p < 4) return BAD;
        *p += 4;
        return OK;
    default:
        return BAD;
    }
}

static inline int get_buffer(PyObject *obj, Py_buffer *view, Py_ssize_t itemsize, const char *what) {
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS) < 0) return -1;
    if (view->itemsize != itemsize) {
        PyErr_Format(PyExc_TypeError, "%s: expected items of %zd bytes, got %zd", what, itemsize, view->itemsize);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

static inline PyObject *new_bytes(Py_ssize_t n) { return PyByteArray_FromStringAndSize(NULL, n); }

#define I64(o) ((int64_t *)PyByteArray_AS_STRING(o))

/* profiler/xspace/_planes.c */
PyObject *xplane_plane_lines(PyObject *self, PyObject *arg);
extern const char xplane_plane_lines_doc[];

#endif
