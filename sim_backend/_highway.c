/* HighwayHash-64 of 4-byte keys in C: the minibatching hash of sim_backend/highway_hash.py.
 *
 * hash_u32(ids, key, out): for each int64 ID (its low 32 bits, little-endian), the 64-bit
 * HighwayHash with the 256-bit key (four uint64 in `key`), into `out` (uint64). The same
 * steps as highway_hash.py's numpy version (reset, the remainder packet of a 4-byte input,
 * four permute-and-update rounds), one ID at a time; a test checks the two agree and the
 * algorithm's published test vector. The GIL is released.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

typedef struct {
    uint64_t v0[4], v1[4], mul0[4], mul1[4];
} State;

static const uint64_t MUL0[4] = {0xdbe6d5d5fe4cce2fULL, 0xa4093822299f31d0ULL, 0x13198a2e03707344ULL,
                                 0x243f6a8885a308d3ULL};
static const uint64_t MUL1[4] = {0x3bd39e10cb0ef593ULL, 0xc0acf169b5f18a8cULL, 0xbe5466cf34e90c6cULL,
                                 0x452821e638d01377ULL};

static uint64_t swap_halves(uint64_t x) { return (x >> 32) | (x << 32); }

static void zipper(uint64_t v1, uint64_t v0, uint64_t *add1, uint64_t *add0) {
    *add0 += (((v0 & 0xff000000ULL) | (v1 & 0xff00000000ULL)) >> 24) |
             (((v0 & 0xff0000000000ULL) | (v1 & 0xff000000000000ULL)) >> 16) | (v0 & 0xff0000ULL) |
             ((v0 & 0xff00ULL) << 32) | ((v1 & 0xff00000000000000ULL) >> 8) | (v0 << 56);
    *add1 += (((v1 & 0xff000000ULL) | (v0 & 0xff00000000ULL)) >> 24) | (v1 & 0xff0000ULL) |
             ((v1 & 0xff0000000000ULL) >> 16) | ((v1 & 0xff00ULL) << 24) | ((v0 & 0xff000000000000ULL) >> 8) |
             ((v1 & 0xffULL) << 48) | (v0 & 0xff00000000000000ULL);
}

static void update(State *s, const uint64_t lanes[4]) {
    for (int i = 0; i < 4; i++) {
        s->v1[i] += s->mul0[i] + lanes[i];
        s->mul0[i] ^= (s->v1[i] & 0xffffffffULL) * (s->v0[i] >> 32);
        s->v0[i] += s->mul1[i];
        s->mul1[i] ^= (s->v0[i] & 0xffffffffULL) * (s->v1[i] >> 32);
    }
    zipper(s->v1[1], s->v1[0], &s->v0[1], &s->v0[0]);
    zipper(s->v1[3], s->v1[2], &s->v0[3], &s->v0[2]);
    zipper(s->v0[1], s->v0[0], &s->v1[1], &s->v1[0]);
    zipper(s->v0[3], s->v0[2], &s->v1[3], &s->v1[2]);
}

static uint32_t rotl32(uint32_t x, int n) { return (x << n) | (x >> (32 - n)); }

/* The state after reset with `key` and the remainder bookkeeping of a 4-byte input (all but
 * the packet itself, which is the only part that depends on the ID). */
static void prepare(State *s, const uint64_t key[4]) {
    for (int i = 0; i < 4; i++) {
        s->mul0[i] = MUL0[i];
        s->mul1[i] = MUL1[i];
        s->v0[i] = MUL0[i] ^ key[i];
        s->v1[i] = MUL1[i] ^ swap_halves(key[i]);
        s->v0[i] += (4ULL << 32) + 4ULL;
        uint32_t lo = (uint32_t)s->v1[i], hi = (uint32_t)(s->v1[i] >> 32);
        s->v1[i] = (uint64_t)rotl32(lo, 4) | ((uint64_t)rotl32(hi, 4) << 32);
    }
}

static uint64_t hash_one(const State *base, uint32_t x) {
    State s = *base;
    uint64_t lanes[4] = {x, 0, 0, 0};
    update(&s, lanes);
    for (int r = 0; r < 4; r++) {
        uint64_t p[4] = {swap_halves(s.v0[2]), swap_halves(s.v0[3]), swap_halves(s.v0[0]), swap_halves(s.v0[1])};
        update(&s, p);
    }
    return s.v0[0] + s.v1[0] + s.mul0[0] + s.mul1[0];
}

static PyObject *hash_u32(PyObject *self, PyObject *args) {
    PyObject *ids_obj, *key_obj, *out_obj;
    if (!PyArg_ParseTuple(args, "OOO", &ids_obj, &key_obj, &out_obj)) return NULL;
    Py_buffer ids, key, out;
    if (PyObject_GetBuffer(ids_obj, &ids, PyBUF_C_CONTIGUOUS) < 0) return NULL;
    if (PyObject_GetBuffer(key_obj, &key, PyBUF_C_CONTIGUOUS) < 0) {
        PyBuffer_Release(&ids);
        return NULL;
    }
    if (PyObject_GetBuffer(out_obj, &out, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0) {
        PyBuffer_Release(&ids);
        PyBuffer_Release(&key);
        return NULL;
    }
    PyObject *result = NULL;
    if (ids.itemsize != 8 || key.len != 32 || out.itemsize != 8 || out.len != ids.len) {
        PyErr_SetString(PyExc_ValueError, "hash_u32: ids int64[n], key uint64[4], out uint64[n]");
    } else {
        const int64_t *in = ids.buf;
        uint64_t *dst = out.buf;
        Py_ssize_t n = ids.len / 8;
        State base;
        prepare(&base, key.buf);
        Py_BEGIN_ALLOW_THREADS;
        for (Py_ssize_t i = 0; i < n; i++) dst[i] = hash_one(&base, (uint32_t)in[i]);
        Py_END_ALLOW_THREADS;
        result = Py_NewRef(Py_None);
    }
    PyBuffer_Release(&ids);
    PyBuffer_Release(&key);
    PyBuffer_Release(&out);
    return result;
}

static PyMethodDef methods[] = {
    {"hash_u32", hash_u32, METH_VARARGS, "HighwayHash-64 of each int64's low 4 bytes (ids, key, out)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_highway", "HighwayHash-64 of 4-byte keys.", -1, methods};

PyMODINIT_FUNC PyInit__highway(void) { return PyModule_Create(&module); }
