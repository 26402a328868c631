/* kproducer.avro._avro_encoder: Arrow column buffers to Avro binary bodies, row by row.
 *
 * The C twin of kproducer.avro.encoder.ReferenceEncoder: it reads the bound plan
 * (kproducer.avro.plan: one tuple per node, the Arrow buffers and the per-kind
 * parameters) and writes each row's body after the given prefix (the Schema
 * Registry framing) into one buffer, with an int64 offsets array. A row that
 * breaks a rule is rolled back and reported as (row, node, rule); the tests check
 * that both encoders give the same bytes and the same reports.
 *
 * The Avro binary encoding (Avro specification, "Binary Encoding"): int and long
 * as zig-zag varints, float/double little-endian IEEE 754, bytes/string as a
 * long length then the bytes, a union as the branch index (long) then the value,
 * arrays and maps as blocks (a long count, the items, and a 0 count to end),
 * records as their fields in order, fixed as its bytes. Arrow buffers are
 * little-endian on every platform this builds for (checked below).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "kproducer.avro._avro_encoder reads Arrow's little-endian buffers natively"
#endif

enum { K_NULL = 0, K_BOOL, K_INT, K_FLOAT, K_BYTES, K_FIXED, K_DECIMAL, K_STRUCT, K_LIST, K_MAP };
enum { RULE_NULL = 1, RULE_INT_RANGE, RULE_DECIMAL_RANGE, RULE_OVERFLOW, RULE_MALFORMED };

typedef __int128 i128;

typedef struct {
    int kind, null_branch, value_branch;
    const uint8_t *validity;
    Py_ssize_t offset, length;
    const uint8_t *buf1, *buf2;
    Py_ssize_t buf2_len;
    int nchildren;
    int *children;
    int64_t p1, p2, p3, p4;
    i128 limit; /* K_DECIMAL: 10**precision (0: no check) */
    Py_buffer views[3];
    int held[3];
} node_t;

typedef struct {
    node_t *nodes;
    Py_ssize_t nnodes;
    uint8_t *out;
    size_t len, cap;
    int nomem;
    int err_node, err_rule;
} enc_t;

static int reserve(enc_t *e, size_t more) {
    if (e->len + more <= e->cap) return 0;
    size_t cap = e->cap ? e->cap : 4096;
    while (cap < e->len + more) cap *= 2;
    uint8_t *p = (uint8_t *)realloc(e->out, cap);
    if (!p) {
        e->nomem = 1;
        return -1;
    }
    e->out = p;
    e->cap = cap;
    return 0;
}

static inline int put_long(enc_t *e, int64_t v) {
    if (reserve(e, 10) < 0) return -1;
    uint64_t u = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
    uint8_t *o = e->out + e->len;
    while (u >= 0x80) {
        *o++ = (uint8_t)(u | 0x80);
        u >>= 7;
    }
    *o++ = (uint8_t)u;
    e->len = (size_t)(o - e->out);
    return 0;
}

static inline int put_bytes(enc_t *e, const void *p, size_t n) {
    if (reserve(e, n) < 0) return -1;
    memcpy(e->out + e->len, p, n);
    e->len += n;
    return 0;
}

static inline int fail(enc_t *e, int node, int rule) {
    e->err_node = node;
    e->err_rule = rule;
    return -1;
}

static inline int is_null(const node_t *n, Py_ssize_t i) {
    if (n->kind == K_NULL) return 1;
    if (!n->validity) return 0;
    Py_ssize_t j = n->offset + i;
    return !((n->validity[j >> 3] >> (j & 7)) & 1);
}

static inline int64_t read_offset(const uint8_t *buf, int width, Py_ssize_t j) {
    if (width == 8) {
        int64_t v;
        memcpy(&v, buf + 8 * j, 8);
        return v;
    }
    int32_t v;
    memcpy(&v, buf + 4 * j, 4);
    return v;
}

static int write_node(enc_t *e, int ni, Py_ssize_t i) {
    const node_t *n = &e->nodes[ni];
    if (is_null(n, i)) {
        if (n->null_branch >= 0) return put_long(e, n->null_branch);
        if (n->kind == K_NULL) return 0;
        return fail(e, ni, RULE_NULL);
    }
    if (n->null_branch >= 0 && put_long(e, n->value_branch) < 0) return -1;
    Py_ssize_t j = n->offset + i;
    switch (n->kind) {
    case K_INT: {
        int64_t v;
        switch (n->p1) {
        case 1: v = ((const int8_t *)n->buf1)[j]; break;
        case 2: { int16_t x; memcpy(&x, n->buf1 + 2 * j, 2); v = x; break; }
        case 4: { int32_t x; memcpy(&x, n->buf1 + 4 * j, 4); v = x; break; }
        case 8: { int64_t x; memcpy(&x, n->buf1 + 8 * j, 8); v = x; break; }
        case -1: v = n->buf1[j]; break;
        case -2: { uint16_t x; memcpy(&x, n->buf1 + 2 * j, 2); v = x; break; }
        default: { uint32_t x; memcpy(&x, n->buf1 + 4 * j, 4); v = x; break; }
        }
        if (n->p3 != 1) {
            int64_t r;
            if (__builtin_mul_overflow(v, n->p3, &r)) return fail(e, ni, RULE_OVERFLOW);
            v = r;
        }
        if (n->p4 != 1) {
            int64_t q = v / n->p4;
            if ((v % n->p4) != 0 && v < 0) q -= 1; /* floor, as Python's // */
            v = q;
        }
        if (n->p2 == 0 && (v < INT32_MIN || v > INT32_MAX)) return fail(e, ni, RULE_INT_RANGE);
        return put_long(e, v);
    }
    case K_BYTES: {
        int64_t a = read_offset(n->buf1, (int)n->p1, j), b = read_offset(n->buf1, (int)n->p1, j + 1);
        if (a < 0 || b < a || b > n->buf2_len) return fail(e, ni, RULE_MALFORMED);
        if (put_long(e, b - a) < 0) return -1;
        return put_bytes(e, n->buf2 + a, (size_t)(b - a));
    }
    case K_STRUCT:
        for (int c = 0; c < n->nchildren; c++)
            if (write_node(e, n->children[c], i) < 0) return -1;
        return 0;
    case K_FLOAT:
        if (n->p1 == 4 && n->p2 == 4) return put_bytes(e, n->buf1 + 4 * j, 4);
        if (n->p1 == 8) return put_bytes(e, n->buf1 + 8 * j, 8);
        {
            float f;
            memcpy(&f, n->buf1 + 4 * j, 4);
            double d = (double)f;
            return put_bytes(e, &d, 8);
        }
    case K_BOOL: {
        uint8_t b = (n->buf1[j >> 3] >> (j & 7)) & 1;
        return put_bytes(e, &b, 1);
    }
    case K_LIST:
    case K_MAP: {
        int64_t a, b;
        if (n->kind == K_LIST && n->p1 == 0) {
            a = (int64_t)j * n->p2;
            b = a + n->p2;
        } else {
            int width = n->kind == K_MAP ? 4 : (int)n->p1;
            a = read_offset(n->buf1, width, j);
            b = read_offset(n->buf1, width, j + 1);
        }
        int item = n->children[0];
        if (a < 0 || b < a || b > e->nodes[item].length) return fail(e, ni, RULE_MALFORMED);
        if (b > a) {
            if (put_long(e, b - a) < 0) return -1;
            for (int64_t k = a; k < b; k++)
                if (write_node(e, item, (Py_ssize_t)k) < 0) return -1;
        }
        return put_long(e, 0);
    }
    case K_DECIMAL: {
        i128 v;
        memcpy(&v, n->buf1 + 16 * j, 16);
        if (n->limit) {
            if (v >= n->limit || v <= -n->limit) return fail(e, ni, RULE_DECIMAL_RANGE);
        }
        uint8_t be[16];
        for (int k = 0; k < 16; k++) be[k] = (uint8_t)(((unsigned __int128)v) >> (8 * (15 - k)));
        if (n->p1) { /* fixed: sign-extended to its size (the size holds the precision: checked at compile) */
            int size = (int)n->p1;
            if (reserve(e, (size_t)size) < 0) return -1;
            uint8_t fill = v < 0 ? 0xff : 0x00;
            for (int k = 0; k < size - 16; k++) e->out[e->len++] = fill;
            int from = size >= 16 ? 0 : 16 - size;
            memcpy(e->out + e->len, be + from, (size_t)(16 - from));
            e->len += (size_t)(16 - from);
            return 0;
        }
        /* bytes: the fewest bytes of the two's complement, as Java's BigInteger.toByteArray */
        int size = 1;
        while (size < 16) {
            i128 half = (i128)1 << (8 * size - 1);
            if (v >= -half && v < half) break;
            size++;
        }
        if (put_long(e, size) < 0) return -1;
        return put_bytes(e, be + 16 - size, (size_t)size);
    }
    case K_FIXED:
        return put_bytes(e, n->buf1 + n->p1 * j, (size_t)n->p1);
    case K_NULL:
        return 0;
    default:
        return fail(e, ni, RULE_MALFORMED);
    }
}

static void release_nodes(node_t *nodes, Py_ssize_t count) {
    if (!nodes) return;
    for (Py_ssize_t k = 0; k < count; k++) {
        for (int b = 0; b < 3; b++)
            if (nodes[k].held[b]) PyBuffer_Release(&nodes[k].views[b]);
        free(nodes[k].children);
    }
    free(nodes);
}

static int take_buffer(PyObject *obj, node_t *n, int slot, const uint8_t **ptr, Py_ssize_t *len) {
    if (obj == Py_None) {
        *ptr = NULL;
        if (len) *len = 0;
        return 0;
    }
    if (PyObject_GetBuffer(obj, &n->views[slot], PyBUF_SIMPLE) < 0) return -1;
    n->held[slot] = 1;
    *ptr = (const uint8_t *)n->views[slot].buf;
    if (len) *len = n->views[slot].len;
    return 0;
}

static int parse_node(PyObject *t, node_t *n, Py_ssize_t nnodes) {
    PyObject *validity, *buf1, *buf2, *children;
    long long p1, p2, p3, p4;
    if (!PyTuple_Check(t) ||
        !PyArg_ParseTuple(t, "iiiOnnOOOLLLL", &n->kind, &n->null_branch, &n->value_branch, &validity, &n->offset,
                          &n->length, &buf1, &buf2, &children, &p1, &p2, &p3, &p4)) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "each plan node must be a 13-tuple");
        return -1;
    }
    n->p1 = p1; n->p2 = p2; n->p3 = p3; n->p4 = p4;
    if ((n->kind == K_INT && (p3 < 1 || p4 < 1)) || (n->kind == K_LIST && p1 == 0 && p2 < 0)) {
        PyErr_SetString(PyExc_ValueError, "bad plan node parameters");
        return -1;
    }
    const uint8_t *unused;
    if (take_buffer(validity, n, 0, &n->validity, NULL) < 0) return -1;
    if (take_buffer(buf1, n, 1, &n->buf1, NULL) < 0) return -1;
    if (take_buffer(buf2, n, 2, &unused, &n->buf2_len) < 0) return -1;
    n->buf2 = unused;
    if (!PyTuple_Check(children)) {
        PyErr_SetString(PyExc_TypeError, "plan node children must be a tuple");
        return -1;
    }
    n->nchildren = (int)PyTuple_GET_SIZE(children);
    n->children = (int *)calloc((size_t)n->nchildren + 1, sizeof(int));
    if (!n->children) {
        PyErr_NoMemory();
        return -1;
    }
    for (int c = 0; c < n->nchildren; c++) {
        long v = PyLong_AsLong(PyTuple_GET_ITEM(children, c));
        if (v == -1 && PyErr_Occurred()) return -1;
        if (v <= 0 || v >= nnodes) {
            PyErr_SetString(PyExc_ValueError, "plan node child out of range");
            return -1;
        }
        n->children[c] = (int)v;
    }
    if ((n->kind == K_LIST || n->kind == K_MAP) && n->nchildren != 1) {
        PyErr_SetString(PyExc_ValueError, "a list or map plan node has one child");
        return -1;
    }
    if (n->kind != K_NULL && n->kind != K_STRUCT && n->kind != K_LIST && n->length > 0 && !n->buf1) {
        PyErr_SetString(PyExc_ValueError, "plan node without its values buffer");
        return -1;
    }
    if (n->kind == K_LIST && p1 != 0 && n->length > 0 && !n->buf1) {
        PyErr_SetString(PyExc_ValueError, "list plan node without its offsets buffer");
        return -1;
    }
    n->limit = 0;
    if (n->kind == K_DECIMAL && p2 > 0 && p2 <= 38) {
        i128 l = 1;
        for (long long k = 0; k < p2; k++) l *= 10;
        n->limit = l;
    }
    return 0;
}

typedef struct {
    Py_ssize_t row;
    int node, rule;
} failure_t;

static PyObject *encode(PyObject *self, PyObject *args) {
    PyObject *plan;
    Py_buffer prefix;
    if (!PyArg_ParseTuple(args, "O!y*", &PyTuple_Type, &plan, &prefix)) return NULL;
    PyObject *result = NULL;
    Py_ssize_t nnodes = PyTuple_GET_SIZE(plan);
    enc_t e = {0};
    int64_t *offsets = NULL;
    uint8_t *validity = NULL;
    failure_t *failures = NULL;
    size_t nfail = 0, capfail = 0;
    int fail_alloc = 0;
    if (nnodes < 1) {
        PyErr_SetString(PyExc_ValueError, "the plan has no nodes");
        goto done;
    }
    e.nodes = (node_t *)calloc((size_t)nnodes, sizeof(node_t));
    if (!e.nodes) {
        PyErr_NoMemory();
        goto done;
    }
    e.nnodes = nnodes;
    for (Py_ssize_t k = 0; k < nnodes; k++)
        if (parse_node(PyTuple_GET_ITEM(plan, k), &e.nodes[k], nnodes) < 0) goto done;
    Py_ssize_t n = e.nodes[0].length;
    offsets = (int64_t *)malloc(sizeof(int64_t) * ((size_t)n + 1));
    if (!offsets) {
        PyErr_NoMemory();
        goto done;
    }
    offsets[0] = 0;
    const node_t *root = &e.nodes[0];
    int root_nulls = root->validity != NULL || root->kind == K_NULL;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        if (root_nulls && is_null(root, i)) {
            if (!validity) {
                validity = (uint8_t *)malloc(((size_t)n + 7) / 8);
                if (!validity) {
                    e.nomem = 1;
                    break;
                }
                memset(validity, 0xff, ((size_t)n + 7) / 8);
            }
            validity[i >> 3] &= (uint8_t)~(1u << (i & 7));
            offsets[i + 1] = (int64_t)e.len;
            continue;
        }
        size_t start = e.len;
        if (put_bytes(&e, prefix.buf, (size_t)prefix.len) < 0 || write_node(&e, 0, i) < 0) {
            if (e.nomem) break;
            e.len = start;
            if (nfail == capfail) {
                size_t cap = capfail ? capfail * 2 : 16;
                failure_t *p = (failure_t *)realloc(failures, cap * sizeof(failure_t));
                if (!p) {
                    fail_alloc = 1;
                    break;
                }
                failures = p;
                capfail = cap;
            }
            failures[nfail].row = i;
            failures[nfail].node = e.err_node;
            failures[nfail].rule = e.err_rule;
            nfail++;
        }
        offsets[i + 1] = (int64_t)e.len;
    }
    Py_END_ALLOW_THREADS
    if (e.nomem || fail_alloc) {
        PyErr_NoMemory();
        goto done;
    }
    PyObject *off_obj = PyBytes_FromStringAndSize((const char *)offsets, (Py_ssize_t)(sizeof(int64_t) * ((size_t)n + 1)));
    PyObject *data_obj = PyByteArray_FromStringAndSize((const char *)e.out, (Py_ssize_t)e.len);
    PyObject *val_obj = validity ? PyBytes_FromStringAndSize((const char *)validity, (n + 7) / 8) : Py_NewRef(Py_None);
    PyObject *fail_list = PyList_New((Py_ssize_t)nfail);
    if (off_obj && data_obj && val_obj && fail_list) {
        int ok = 1;
        for (size_t k = 0; k < nfail && ok; k++) {
            PyObject *item = Py_BuildValue("(nii)", failures[k].row, failures[k].node, failures[k].rule);
            if (!item) ok = 0;
            else PyList_SET_ITEM(fail_list, (Py_ssize_t)k, item);
        }
        if (ok) result = PyTuple_Pack(4, off_obj, data_obj, val_obj, fail_list);
    }
    Py_XDECREF(off_obj);
    Py_XDECREF(data_obj);
    Py_XDECREF(val_obj);
    Py_XDECREF(fail_list);
done:
    release_nodes(e.nodes, nnodes);
    free(e.out);
    free(offsets);
    free(validity);
    free(failures);
    PyBuffer_Release(&prefix);
    return result;
}

static PyMethodDef methods[] = {
    {"encode", encode, METH_VARARGS,
     "encode(plan, prefix) -> (offsets, data, validity, failures): every row of a bound Avro write plan."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "kproducer.avro._avro_encoder",
                                    "Arrow column buffers to Avro binary bodies (see kproducer.avro.encoder).", -1,
                                    methods};

PyMODINIT_FUNC PyInit__avro_encoder(void) { return PyModule_Create(&module); }
