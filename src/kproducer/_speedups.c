/*
 * kproducer._speedups: the per-record hot path in C (issue 8).
 *
 * - murmur2: Kafka's Utils.murmur2 (signed 32-bit result).
 * - append_record: one v2 record appended into the batch bytearray, with the
 *   builder's has_room_for check fused in (returns -1 when it does not fit).
 * - append_seq / append_arrow: as many records as fit from a Python sequence of
 *   bytes, or from an Arrow binary/string column's offsets and data buffers,
 *   without a Python object per record.
 * - partition_seq / partition_arrow: murmur2 partition of every key, grouped into
 *   per-partition index arrays (int64), keeping record order within a partition.
 *
 * The pure-Python implementations in kproducer.record.builder and
 * kproducer.partitioner define the semantics; tests check both agree.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define COMPRESSION_RATE_ESTIMATION_FACTOR 1.05

/* ------------------------------------------------------------------ varints */
static inline Py_ssize_t uvarint_size(uint64_t u) {
    Py_ssize_t n = 1;
    while (u >= 0x80) { u >>= 7; n++; }
    return n;
}

static inline uint64_t zigzag64(int64_t n) {
    return ((uint64_t)n << 1) ^ (uint64_t)(n >> 63);
}

static inline Py_ssize_t varint_size(int64_t n) { return uvarint_size(zigzag64(n)); }

static inline uint8_t *put_uvarint(uint8_t *p, uint64_t u) {
    while (u >= 0x80) { *p++ = (uint8_t)((u & 0x7F) | 0x80); u >>= 7; }
    *p++ = (uint8_t)u;
    return p;
}

static inline uint8_t *put_varint(uint8_t *p, int64_t n) { return put_uvarint(p, zigzag64(n)); }

/* ------------------------------------------------------------------ murmur2 */
static int32_t murmur2_raw(const uint8_t *data, Py_ssize_t length) {
    const uint32_t m = 0x5bd1e995u;
    const int r = 24;
    uint32_t h = 0x9747b28cu ^ (uint32_t)length;
    Py_ssize_t n4 = length >> 2;
    for (Py_ssize_t i = 0; i < n4; i++) {
        const uint8_t *q = data + 4 * i;
        uint32_t k = (uint32_t)q[0] | ((uint32_t)q[1] << 8) | ((uint32_t)q[2] << 16) | ((uint32_t)q[3] << 24);
        k *= m;
        k ^= k >> r;
        k *= m;
        h *= m;
        h ^= k;
    }
    Py_ssize_t tail = length & ~(Py_ssize_t)3;
    switch (length & 3) {
    case 3: h ^= (uint32_t)data[tail + 2] << 16; /* fall through */
    case 2: h ^= (uint32_t)data[tail + 1] << 8;  /* fall through */
    case 1: h ^= (uint32_t)data[tail]; h *= m;
    }
    h ^= h >> 13;
    h *= m;
    h ^= h >> 15;
    return (int32_t)h;
}

static PyObject *py_murmur2(PyObject *self, PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    int32_t h = murmur2_raw((const uint8_t *)view.buf, view.len);
    PyBuffer_Release(&view);
    return PyLong_FromLong((long)h);
}

/* ------------------------------------------------------------------ columns */
enum { COL_NONE = 0, COL_SEQ = 1, COL_ARROW = 2 };

typedef struct {
    int kind;
    const char *name;        /* "key" / "value", for error messages */
    PyObject *fast;          /* COL_SEQ: PySequence_Fast result (owned) */
    PyObject **items;
    Py_ssize_t length;
    Py_buffer offsets, data, validity;
    int has_offsets, has_data, has_validity;
    Py_ssize_t array_offset;
    int width;               /* 4 (binary/string) or 8 (large_binary/large_string) */
} column_t;

static void column_release(column_t *c) {
    Py_CLEAR(c->fast);
    if (c->has_offsets) PyBuffer_Release(&c->offsets);
    if (c->has_data) PyBuffer_Release(&c->data);
    if (c->has_validity) PyBuffer_Release(&c->validity);
    c->has_offsets = c->has_data = c->has_validity = 0;
}

static int column_from_seq(column_t *c, PyObject *obj, const char *name) {
    memset(c, 0, sizeof(*c));
    c->name = name;
    if (obj == Py_None) { c->kind = COL_NONE; return 0; }
    c->fast = PySequence_Fast(obj, "");
    if (c->fast == NULL) {
        PyErr_Format(PyExc_TypeError, "%ss must be a sequence of bytes (or None), got %.80s", name, Py_TYPE(obj)->tp_name);
        return -1;
    }
    c->kind = COL_SEQ;
    c->items = PySequence_Fast_ITEMS(c->fast);
    c->length = PySequence_Fast_GET_SIZE(c->fast);
    return 0;
}

/* An Arrow column is (offsets, data, validity_or_None, array_offset, length, offset_width). */
static int column_from_arrow(column_t *c, PyObject *obj, const char *name) {
    memset(c, 0, sizeof(*c));
    c->name = name;
    if (obj == Py_None) { c->kind = COL_NONE; return 0; }
    PyObject *offsets, *data, *validity;
    Py_ssize_t array_offset, length;
    int width;
    if (!PyTuple_Check(obj) || !PyArg_ParseTuple(obj, "OOOnni", &offsets, &data, &validity, &array_offset, &length, &width)) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError,
                     "%s column must be (offsets, data, validity, array_offset, length, offset_width), got %.80s",
                     name, Py_TYPE(obj)->tp_name);
        return -1;
    }
    if (width != 4 && width != 8) {
        PyErr_Format(PyExc_ValueError, "%s column offset width must be 4 or 8, got %d", name, width);
        return -1;
    }
    if (array_offset < 0 || length < 0) {
        PyErr_Format(PyExc_ValueError, "%s column offset and length must be >= 0", name);
        return -1;
    }
    c->kind = COL_ARROW;
    c->width = width;
    c->array_offset = array_offset;
    c->length = length;
    if (PyObject_GetBuffer(offsets, &c->offsets, PyBUF_SIMPLE) < 0) return -1;
    c->has_offsets = 1;
    if (data == Py_None) {
        /* An all-null or all-empty column may come without a data buffer. */
        static const char empty[1] = {0};
        if (PyBuffer_FillInfo(&c->data, NULL, (void *)empty, 0, 1, PyBUF_SIMPLE) < 0) return -1;
    } else if (PyObject_GetBuffer(data, &c->data, PyBUF_SIMPLE) < 0) {
        return -1;
    }
    c->has_data = 1;
    if (validity != Py_None) {
        if (PyObject_GetBuffer(validity, &c->validity, PyBUF_SIMPLE) < 0) return -1;
        c->has_validity = 1;
        if ((array_offset + length + 7) / 8 > c->validity.len) {
            PyErr_Format(PyExc_ValueError, "%s column validity buffer is too short", name);
            return -1;
        }
    }
    if ((array_offset + length + 1) * (Py_ssize_t)width > c->offsets.len) {
        PyErr_Format(PyExc_ValueError, "%s column offsets buffer is too short for %zd values", name, length);
        return -1;
    }
    return 0;
}

/* Pointer and length of item i; *len = -1 for null. */
static inline int column_get(column_t *c, Py_ssize_t i, const uint8_t **ptr, Py_ssize_t *len) {
    if (c->kind == COL_NONE) { *ptr = NULL; *len = -1; return 0; }
    if (c->kind == COL_SEQ) {
        PyObject *o = c->items[i];
        if (PyBytes_CheckExact(o)) {
            *ptr = (const uint8_t *)PyBytes_AS_STRING(o);
            *len = PyBytes_GET_SIZE(o);
            return 0;
        }
        if (o == Py_None) { *ptr = NULL; *len = -1; return 0; }
        if (PyByteArray_Check(o)) {
            *ptr = (const uint8_t *)PyByteArray_AS_STRING(o);
            *len = PyByteArray_GET_SIZE(o);
            return 0;
        }
        if (PyBytes_Check(o)) {
            *ptr = (const uint8_t *)PyBytes_AS_STRING(o);
            *len = PyBytes_GET_SIZE(o);
            return 0;
        }
        if (PyMemoryView_Check(o)) {
            Py_buffer *b = PyMemoryView_GET_BUFFER(o);
            if (PyBuffer_IsContiguous(b, 'C')) {
                *ptr = (const uint8_t *)b->buf;
                *len = b->len;
                return 0;
            }
        }
        PyErr_Format(PyExc_TypeError, "%ss[%zd] must be bytes, bytearray, memoryview or None, got %.80s",
                     c->name, i, Py_TYPE(o)->tp_name);
        return -1;
    }
    Py_ssize_t j = c->array_offset + i;
    if (c->has_validity) {
        const uint8_t *v = (const uint8_t *)c->validity.buf;
        if (!((v[j >> 3] >> (j & 7)) & 1)) { *ptr = NULL; *len = -1; return 0; }
    }
    int64_t a, b;
    if (c->width == 4) {
        const int32_t *o = (const int32_t *)c->offsets.buf;
        a = o[j]; b = o[j + 1];
    } else {
        const int64_t *o = (const int64_t *)c->offsets.buf;
        a = o[j]; b = o[j + 1];
    }
    if (a < 0 || b < a || b > (int64_t)c->data.len) {
        PyErr_Format(PyExc_ValueError, "%s column offsets [%lld, %lld) at row %zd are outside the data buffer",
                     c->name, (long long)a, (long long)b, i);
        return -1;
    }
    *ptr = (const uint8_t *)c->data.buf + a;
    *len = (Py_ssize_t)(b - a);
    return 0;
}

/* ------------------------------------------------------------------ record encoding */
typedef struct {
    PyObject *buf;           /* bytearray */
    Py_ssize_t pos;
    Py_ssize_t write_limit;
    Py_ssize_t records_start;
    double ratio;            /* <= 0: uncompressed (exact sizes) */
    int64_t num_records;     /* records already in the batch */
    int64_t ts_delta;
    const uint8_t *headers;  /* encoded headers block (count + entries) */
    Py_ssize_t headers_len;
} batch_t;

/* Size of the record (length prefix included) and its body. */
static inline Py_ssize_t record_size(int64_t offset_delta, int64_t ts_delta, Py_ssize_t klen, Py_ssize_t vlen,
                                     Py_ssize_t hlen, Py_ssize_t *body_out) {
    Py_ssize_t body = 1 + varint_size(ts_delta) + varint_size(offset_delta);
    body += varint_size(klen) + (klen > 0 ? klen : 0);
    body += varint_size(vlen) + (vlen > 0 ? vlen : 0);
    body += hlen;
    *body_out = body;
    return varint_size(body) + body;
}

/* The builder's has_room_for: always true for an empty batch. */
static inline int has_room(batch_t *b, Py_ssize_t size) {
    if (b->num_records == 0) return 1;
    Py_ssize_t written;
    if (b->ratio > 0) {
        written = b->records_start + (Py_ssize_t)((double)(b->pos - b->records_start) * b->ratio * COMPRESSION_RATE_ESTIMATION_FACTOR);
        size = (Py_ssize_t)((double)size * b->ratio * COMPRESSION_RATE_ESTIMATION_FACTOR);
    } else {
        written = b->pos;
    }
    if (b->write_limit <= written) return 0;
    return b->write_limit >= written + size;
}

/* Append one record if it fits: 1 appended, 0 no room, -1 error. */
static int append_one(batch_t *b, const uint8_t *k, Py_ssize_t klen, const uint8_t *v, Py_ssize_t vlen, int check_room) {
    Py_ssize_t body;
    int64_t od = b->num_records;
    Py_ssize_t size = record_size(od, b->ts_delta, klen, vlen, b->headers_len, &body);
    if (check_room && !has_room(b, size)) return 0;
    Py_ssize_t end = b->pos + size;
    if (end > PyByteArray_GET_SIZE(b->buf)) {
        if (PyByteArray_Resize(b->buf, end) < 0) return -1;
    }
    uint8_t *p = (uint8_t *)PyByteArray_AS_STRING(b->buf) + b->pos;
    p = put_varint(p, body);
    *p++ = 0; /* attributes */
    p = put_varint(p, b->ts_delta);
    p = put_varint(p, od);
    p = put_varint(p, klen);
    if (klen > 0) { memcpy(p, k, klen); p += klen; }
    p = put_varint(p, vlen);
    if (vlen > 0) { memcpy(p, v, vlen); p += vlen; }
    memcpy(p, b->headers, b->headers_len);
    b->pos = end;
    b->num_records++;
    return 1;
}

static const uint8_t NO_HEADERS[1] = {0};

static int parse_headers(PyObject *headers, Py_buffer *view, batch_t *b) {
    if (headers == Py_None) {
        b->headers = NO_HEADERS;
        b->headers_len = 1;
        return 0;
    }
    if (PyObject_GetBuffer(headers, view, PyBUF_SIMPLE) < 0) return -1;
    if (view->len < 1) {
        PyBuffer_Release(view);
        PyErr_SetString(PyExc_ValueError, "encoded headers must hold at least the count varint");
        return -1;
    }
    b->headers = (const uint8_t *)view->buf;
    b->headers_len = view->len;
    return 1;
}

static int check_bytearray(PyObject *buf) {
    if (!PyByteArray_CheckExact(buf)) {
        PyErr_Format(PyExc_TypeError, "buffer must be a bytearray, got %.80s", Py_TYPE(buf)->tp_name);
        return -1;
    }
    return 0;
}

static int bytes_like(PyObject *o, Py_buffer *view, const uint8_t **ptr, Py_ssize_t *len, const char *name) {
    if (o == Py_None) { *ptr = NULL; *len = -1; return 0; }
    if (PyBytes_CheckExact(o)) {
        *ptr = (const uint8_t *)PyBytes_AS_STRING(o);
        *len = PyBytes_GET_SIZE(o);
        return 0;
    }
    if (PyByteArray_Check(o) || PyMemoryView_Check(o) || PyBytes_Check(o)) {
        if (PyObject_GetBuffer(o, view, PyBUF_SIMPLE) < 0) return -1;
        *ptr = (const uint8_t *)view->buf;
        *len = view->len;
        return 1;
    }
    PyErr_Format(PyExc_TypeError, "%s must be bytes, bytearray, memoryview or None, got %.80s", name, Py_TYPE(o)->tp_name);
    return -1;
}

/* append_record(buf, pos, write_limit, records_start, ratio, num_records, ts_delta, key, value, headers) -> new pos or -1 */
static PyObject *py_append_record(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 10) {
        PyErr_Format(PyExc_TypeError, "append_record takes 10 arguments, got %zd", nargs);
        return NULL;
    }
    batch_t b;
    b.buf = args[0];
    if (check_bytearray(b.buf) < 0) return NULL;
    b.pos = PyLong_AsSsize_t(args[1]);
    b.write_limit = PyLong_AsSsize_t(args[2]);
    b.records_start = PyLong_AsSsize_t(args[3]);
    b.ratio = PyFloat_AsDouble(args[4]);
    b.num_records = PyLong_AsLongLong(args[5]);
    b.ts_delta = PyLong_AsLongLong(args[6]);
    if (PyErr_Occurred()) return NULL;
    Py_buffer kv, vv, hv;
    const uint8_t *k, *v;
    Py_ssize_t klen, vlen;
    int kown = bytes_like(args[7], &kv, &k, &klen, "key");
    if (kown < 0) return NULL;
    int vown = bytes_like(args[8], &vv, &v, &vlen, "value");
    if (vown < 0) { if (kown) PyBuffer_Release(&kv); return NULL; }
    int hown = parse_headers(args[9], &hv, &b);
    int rc = -1;
    if (hown >= 0) rc = append_one(&b, k, klen, v, vlen, 1);
    if (kown) PyBuffer_Release(&kv);
    if (vown) PyBuffer_Release(&vv);
    if (hown > 0) PyBuffer_Release(&hv);
    if (rc < 0) return NULL;
    return PyLong_FromSsize_t(rc ? b.pos : -1);
}

/* Shared body of append_seq / append_arrow. */
static PyObject *append_many(PyObject *args, int arrow) {
    batch_t b;
    PyObject *values_obj, *keys_obj, *indices_obj, *headers_obj;
    Py_ssize_t start, end;
    if (!PyArg_ParseTuple(args, "O!nnndLLOOOnnO", &PyByteArray_Type, &b.buf, &b.pos, &b.write_limit, &b.records_start,
                          &b.ratio, &b.num_records, &b.ts_delta, &values_obj, &keys_obj, &indices_obj, &start, &end,
                          &headers_obj))
        return NULL;
    column_t values, keys;
    Py_buffer idx_view, hv;
    int have_idx = 0, hown = 0;
    Py_ssize_t count = 0;
    PyObject *result = NULL;
    int rc = arrow ? column_from_arrow(&values, values_obj, "value") : column_from_seq(&values, values_obj, "value");
    if (rc < 0) { column_release(&values); return NULL; }
    rc = arrow ? column_from_arrow(&keys, keys_obj, "key") : column_from_seq(&keys, keys_obj, "key");
    if (rc < 0) goto done;
    if (values.kind == COL_NONE) {
        PyErr_SetString(PyExc_TypeError, "values must not be None");
        goto done;
    }
    if (keys.kind != COL_NONE && keys.length != values.length) {
        PyErr_Format(PyExc_ValueError, "keys has %zd entries but values has %zd; they must be the same length",
                     keys.length, values.length);
        goto done;
    }
    const int64_t *idx = NULL;
    Py_ssize_t limit = values.length;
    if (indices_obj != Py_None) {
        if (PyObject_GetBuffer(indices_obj, &idx_view, PyBUF_SIMPLE) < 0) goto done;
        have_idx = 1;
        idx = (const int64_t *)idx_view.buf;
        limit = idx_view.len / (Py_ssize_t)sizeof(int64_t);
    }
    if (start < 0 || end < start || end > limit) {
        PyErr_Format(PyExc_ValueError, "start/end [%zd, %zd) out of range 0..%zd", start, end, limit);
        goto done;
    }
    hown = parse_headers(headers_obj, &hv, &b);
    if (hown < 0) { hown = 0; goto done; }
    for (Py_ssize_t j = start; j < end; j++) {
        Py_ssize_t i = idx ? (Py_ssize_t)idx[j] : j;
        if (i < 0 || i >= values.length) {
            PyErr_Format(PyExc_ValueError, "record index %zd out of range 0..%zd", i, values.length);
            goto done;
        }
        const uint8_t *k, *v;
        Py_ssize_t klen, vlen;
        if (column_get(&keys, i, &k, &klen) < 0 || column_get(&values, i, &v, &vlen) < 0) goto done;
        int r = append_one(&b, k, klen, v, vlen, 1);
        if (r < 0) goto done;
        if (r == 0) break;
        count++;
    }
    result = Py_BuildValue("(nn)", b.pos, count);
done:
    if (hown > 0) PyBuffer_Release(&hv);
    if (have_idx) PyBuffer_Release(&idx_view);
    column_release(&values);
    column_release(&keys);
    return result;
}

static PyObject *py_append_seq(PyObject *self, PyObject *args) { return append_many(args, 0); }
static PyObject *py_append_arrow(PyObject *self, PyObject *args) { return append_many(args, 1); }

/* Group record indices start..end by the murmur2 partition of their key; null keys go to the last group. */
static PyObject *partition_many(PyObject *args, int arrow) {
    PyObject *keys_obj;
    Py_ssize_t start, end, num_partitions;
    if (!PyArg_ParseTuple(args, "Onnn", &keys_obj, &start, &end, &num_partitions)) return NULL;
    if (num_partitions < 1) {
        PyErr_Format(PyExc_ValueError, "num_partitions must be >= 1, got %zd", num_partitions);
        return NULL;
    }
    column_t keys;
    int rc = arrow ? column_from_arrow(&keys, keys_obj, "key") : column_from_seq(&keys, keys_obj, "key");
    if (rc < 0) { column_release(&keys); return NULL; }
    PyObject *result = NULL;
    int32_t *parts = NULL;
    Py_ssize_t *counts = NULL;
    PyObject **outs = NULL;
    Py_ssize_t groups = num_partitions + 1;
    if (keys.kind == COL_NONE) {
        PyErr_SetString(PyExc_TypeError, "keys must not be None");
        goto done;
    }
    if (start < 0 || end < start || end > keys.length) {
        PyErr_Format(PyExc_ValueError, "start/end [%zd, %zd) out of range 0..%zd", start, end, keys.length);
        goto done;
    }
    Py_ssize_t n = end - start;
    parts = PyMem_Malloc(sizeof(int32_t) * (n ? n : 1));
    counts = PyMem_Calloc(groups, sizeof(Py_ssize_t));
    outs = PyMem_Calloc(groups, sizeof(PyObject *));
    if (!parts || !counts || !outs) { PyErr_NoMemory(); goto done; }
    for (Py_ssize_t j = 0; j < n; j++) {
        const uint8_t *k;
        Py_ssize_t klen;
        if (column_get(&keys, start + j, &k, &klen) < 0) goto done;
        int32_t p = klen < 0 ? (int32_t)num_partitions
                             : (int32_t)((uint32_t)(murmur2_raw(k, klen) & 0x7fffffff) % (uint32_t)num_partitions);
        parts[j] = p;
        counts[p]++;
    }
    result = PyList_New(groups);
    if (!result) goto done;
    for (Py_ssize_t g = 0; g < groups; g++) {
        outs[g] = PyBytes_FromStringAndSize(NULL, counts[g] * (Py_ssize_t)sizeof(int64_t));
        if (!outs[g]) { Py_CLEAR(result); goto done; }
        PyList_SET_ITEM(result, g, outs[g]);
        counts[g] = 0;
    }
    for (Py_ssize_t j = 0; j < n; j++) {
        int32_t p = parts[j];
        int64_t *dst = (int64_t *)PyBytes_AS_STRING(outs[p]);
        dst[counts[p]++] = (int64_t)(start + j);
    }
done:
    PyMem_Free(parts);
    PyMem_Free(counts);
    PyMem_Free(outs);
    column_release(&keys);
    return result;
}

static PyObject *py_partition_seq(PyObject *self, PyObject *args) { return partition_many(args, 0); }
static PyObject *py_partition_arrow(PyObject *self, PyObject *args) { return partition_many(args, 1); }

/* Total value/key bytes of rows start..end (for size checks and metrics) and the largest record's. */
static PyObject *column_sizes(PyObject *args, int arrow) {
    PyObject *obj;
    Py_ssize_t start, end;
    if (!PyArg_ParseTuple(args, "Onn", &obj, &start, &end)) return NULL;
    column_t c;
    int rc = arrow ? column_from_arrow(&c, obj, "value") : column_from_seq(&c, obj, "value");
    if (rc < 0) { column_release(&c); return NULL; }
    PyObject *result = NULL;
    long long total = 0, largest = -1;
    if (c.kind == COL_NONE) { result = Py_BuildValue("(LL)", total, largest); goto done; }
    if (start < 0 || end < start || end > c.length) {
        PyErr_Format(PyExc_ValueError, "start/end [%zd, %zd) out of range 0..%zd", start, end, c.length);
        goto done;
    }
    for (Py_ssize_t i = start; i < end; i++) {
        const uint8_t *p;
        Py_ssize_t len;
        if (column_get(&c, i, &p, &len) < 0) goto done;
        if (len > 0) total += len;
        if (len > largest) largest = len;
    }
    result = Py_BuildValue("(LL)", total, largest);
done:
    column_release(&c);
    return result;
}

static PyObject *py_sizes_seq(PyObject *self, PyObject *args) { return column_sizes(args, 0); }
static PyObject *py_sizes_arrow(PyObject *self, PyObject *args) { return column_sizes(args, 1); }

static PyMethodDef methods[] = {
    {"murmur2", py_murmur2, METH_O, "Kafka's murmur2 of a bytes-like object (signed 32-bit)."},
    {"append_record", (PyCFunction)(void (*)(void))py_append_record, METH_FASTCALL,
     "append_record(buf, pos, write_limit, records_start, ratio, num_records, ts_delta, key, value, headers)"
     " -> new position, or -1 when the record does not fit."},
    {"append_seq", py_append_seq, METH_VARARGS,
     "append_seq(buf, pos, write_limit, records_start, ratio, num_records, ts_delta, values, keys, indices,"
     " start, end, headers) -> (new position, records appended)."},
    {"append_arrow", py_append_arrow, METH_VARARGS,
     "append_arrow(...) like append_seq with Arrow columns (offsets, data, validity, offset, length, width)."},
    {"partition_seq", py_partition_seq, METH_VARARGS,
     "partition_seq(keys, start, end, num_partitions) -> per-partition int64 index arrays, null keys last."},
    {"partition_arrow", py_partition_arrow, METH_VARARGS, "partition_seq for an Arrow key column."},
    {"sizes_seq", py_sizes_seq, METH_VARARGS, "sizes_seq(values, start, end) -> (total bytes, largest or -1)."},
    {"sizes_arrow", py_sizes_arrow, METH_VARARGS, "sizes_seq for an Arrow column."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "kproducer._speedups", "kproducer's native hot path (issue 8).", -1, methods,
};

PyMODINIT_FUNC PyInit__speedups(void) { return PyModule_Create(&module); }
