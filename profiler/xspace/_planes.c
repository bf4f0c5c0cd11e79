/* The XSpace import's plane walk (profiler/xspace/decode_native.py's parse_plane drives it).
 *
 * plane_lines(plane) splits one serialized XPlane into its lines' events (the byte span of each
 * `events` field of each `lines` field, in file order: what protobuf's parse gives as
 * plane.lines[i].events) and the rest, copied out for protobuf to parse: each line's other
 * fields, and the plane's fields but its lines. Two passes: count, then fill.
 */
#include "_wire.h"

const char xplane_plane_lines_doc[] =
             "plane_lines(plane) -> (rest, counts, spans, headers, header_ends) | None\n\n"
             "A serialized XPlane split into its lines' events and everything else, for protobuf to parse\n"
             "without the events: rest bytes: the plane's fields but its lines, as a serialized XPlane;\n"
             "counts int64 (lines,): the events of each line, in file order; spans int64 (events, 2):\n"
             "start and end of each event in `plane`; headers bytes: each line's other fields, in order,\n"
             "as a serialized XLine without events; header_ends int64 (lines,): where each line's end in\n"
             "headers. None when a field cannot be walked (a group, an invalid wire type, a field running\n"
             "past its message): protobuf's own parse of the plane then decides.";

PyObject *xplane_plane_lines(PyObject *self, PyObject *arg) {
    Py_buffer b;
    if (get_buffer(arg, &b, 1, "plane") < 0) return NULL;
    const uint8_t *base = b.buf, *end = base + b.len;
    Py_ssize_t lines = 0, events = 0, header_bytes = 0, rest_bytes = 0;
    PyObject *o_counts = NULL, *o_spans = NULL, *o_headers = NULL, *o_ends = NULL, *o_rest = NULL, *result = NULL;
    for (int pass = 0; pass < 2; pass++) { /* count, then fill */
        int64_t *counts = NULL, *spans = NULL, *ends = NULL;
        char *headers = NULL, *rest = NULL;
        if (pass) {
            o_counts = new_bytes(lines * 8), o_spans = new_bytes(events * 16), o_ends = new_bytes(lines * 8);
            o_headers = PyBytes_FromStringAndSize(NULL, header_bytes);
            o_rest = PyBytes_FromStringAndSize(NULL, rest_bytes);
            if (!o_counts || !o_spans || !o_ends || !o_headers || !o_rest) goto done;
            counts = I64(o_counts), spans = I64(o_spans), ends = I64(o_ends);
            headers = PyBytes_AS_STRING(o_headers), rest = PyBytes_AS_STRING(o_rest);
        }
        Py_ssize_t li = 0, ei = 0, hi = 0, ri = 0;
        const uint8_t *p = base;
        uint64_t key, v;
        while (p < end) {
            const uint8_t *field = p;
            if (varint(&p, end, &key) || (key >> 3) == 0) goto give_up;
            if ((key >> 3) != PLANE_LINES || (key & 7) != 2) {
                if (skip(&p, end, (int)(key & 7))) goto give_up;
                if (pass) memcpy(rest + ri, field, (size_t)(p - field));
                ri += p - field;
                continue;
            }
            if (varint(&p, end, &v) || v > (uint64_t)(end - p)) goto give_up;
            const uint8_t *q = p, *line_end = p + v;
            Py_ssize_t first = ei;
            while (q < line_end) {
                const uint8_t *field = q;
                if (varint(&q, line_end, &key) || (key >> 3) == 0) goto give_up;
                if ((key >> 3) == LINE_EVENTS && (key & 7) == 2) {
                    if (varint(&q, line_end, &v) || v > (uint64_t)(line_end - q)) goto give_up;
                    if (pass) spans[2 * ei] = q - base, spans[2 * ei + 1] = q - base + (int64_t)v;
                    ei++;
                    q += v;
                } else {
                    if (skip(&q, line_end, (int)(key & 7))) goto give_up;
                    if (pass) memcpy(headers + hi, field, (size_t)(q - field));
                    hi += q - field;
                }
            }
            if (pass) counts[li] = ei - first, ends[li] = hi;
            li++;
            p = line_end;
        }
        lines = li, events = ei, header_bytes = hi, rest_bytes = ri;
    }
    result = PyTuple_Pack(5, o_rest, o_counts, o_spans, o_headers, o_ends);
    goto done;
give_up:
    result = Py_NewRef(Py_None);
done:
    Py_XDECREF(o_counts), Py_XDECREF(o_spans), Py_XDECREF(o_headers), Py_XDECREF(o_ends), Py_XDECREF(o_rest);
    PyBuffer_Release(&b);
    return result;
}
