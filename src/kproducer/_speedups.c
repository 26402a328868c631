/*
 * kproducer._speedups: the per-record hot path in C.
 *
 * - murmur2: Kafka's Utils.murmur2 (signed 32-bit result).
 * - append_record: one v2 record appended into the batch bytearray, with the
 *   builder's has_room_for check fused in (returns -1 when it does not fit).
 * - append_seq / append_arrow: as many records as fit from a Python sequence of
 *   bytes, or from an Arrow binary/string column's offsets and data buffers,
 *   without a Python object per record.
 * - partition_seq / partition_arrow: murmur2 partition of every key, grouped into
 *   per-partition index arrays (int64), keeping record order within a partition.
 * - largest_record: the size of a batch's largest record, read from its bytes.
 *
 * Each function mirrors a pure-Python reference, which is what runs when the
 * extension is not built (or KPRODUCER_PURE_PYTHON=1):
 * - append_record / append_one / record_size / has_room mirror
 *   kproducer.record.default_record.append_record (encode_record, record_size,
 *   has_room);
 * - murmur2_raw and the partition formula in partition_many mirror
 *   kproducer.murmur2.murmur2 and partition_for_key;
 * - lane_key_partition's CRC32 (zlib's) and fnv1a_raw mirror the keyed rules of
 *   kproducer.librdkafka_partitioners (ConsistentPartitioner, Fnv1aPartitioner);
 * - column_from_arrow / column_get mirror kproducer.record.arrow_column.column_reader;
 * - largest_record mirrors kproducer.record.default_record.largest_record;
 * - append_seq / append_arrow / partition_* / sizes_* mirror the functions of the
 *   same names on kproducer.record.native.py, built on those references;
 * - settle_group mirrors kproducer.aio._settle_group_py.
 * The types that hold the record path's fields (FutureRecordMetadata, MemoryRecordsBuilderCore,
 * ProducerBatchCore, StickyPartitionInfo, BuiltInPartitionerCore, PartitionDequeCore,
 * RecordMetadata) each have a Python twin, named in its section.
 * The tests compare each pair, and whole batches built both ways (hypothesis).
 *
 * One extension module: its parts share the varint/record encoder and murmur2 as
 * static inline functions, and each section below names the Python it mirrors.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <sched.h>
#include <math.h>
#include <structmember.h>
#include <zlib.h>

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

/* ------------------------------------------------------------------ murmur2 (mirrors kproducer.murmur2.murmur2) */
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

/* ------------------------------------------------------------------ FNV-1a (mirrors kproducer.librdkafka_partitioners.fnv1a) */
static uint32_t fnv1a_raw(const uint8_t *data, Py_ssize_t length) {
    uint32_t h = 0x811C9DC5u;
    for (Py_ssize_t i = 0; i < length; i++) {
        h ^= data[i];
        h *= 0x01000193u;
    }
    if (h & 0x80000000u) h = (uint32_t)0 - h;  /* librdkafka: negative as int32 -> negated (Sarama's rule) */
    return h;
}

static PyObject *py_murmur2(PyObject *self, PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    int32_t h = murmur2_raw((const uint8_t *)view.buf, view.len);
    PyBuffer_Release(&view);
    return PyLong_FromLong((long)h);
}

/* largest_record(buf, start, end) -> int: the size of the largest v2 record in buf[start:end]
   (each record: its length as a zigzag varint, then that many bytes); 0 when there is none.
   Mirrors kproducer.record.default_record.largest_record. */
static PyObject *py_largest_record(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "largest_record(buf, start, end) takes 3 arguments");
        return NULL;
    }
    Py_ssize_t start = PyLong_AsSsize_t(args[1]);
    if (start == -1 && PyErr_Occurred()) return NULL;
    Py_ssize_t end = PyLong_AsSsize_t(args[2]);
    if (end == -1 && PyErr_Occurred()) return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) return NULL;
    if (start < 0 || end > view.len || start > end) {
        PyBuffer_Release(&view);
        PyErr_Format(PyExc_ValueError, "largest_record: range %zd..%zd is outside the buffer (%zd bytes)",
                     start, end, view.len);
        return NULL;
    }
    const uint8_t *b = (const uint8_t *)view.buf;
    Py_ssize_t pos = start, largest = 0;
    while (pos < end) {
        Py_ssize_t first = pos;
        uint64_t u = 0;
        int shift = 0;
        for (;;) {
            if (pos >= view.len || shift > 63) {
                PyBuffer_Release(&view);
                PyErr_Format(PyExc_ValueError, "corrupt record at byte %zd: its length runs past the buffer", first);
                return NULL;
            }
            uint8_t byte = b[pos++];
            u |= (uint64_t)(byte & 0x7F) << shift;
            if (!(byte & 0x80)) break;
            shift += 7;
        }
        int64_t length = (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
        if (length < 0 || length > end - pos) {
            PyBuffer_Release(&view);
            PyErr_Format(PyExc_ValueError, "corrupt record at byte %zd: length %lld past the end of the records (%zd)",
                         first, (long long)length, end);
            return NULL;
        }
        Py_ssize_t size = pos - first + (Py_ssize_t)length;
        if (size > largest) largest = size;
        pos += (Py_ssize_t)length;
    }
    PyBuffer_Release(&view);
    return PyLong_FromSsize_t(largest);
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

/* An Arrow column is (offsets, data, validity_or_None, array_offset, length, offset_width); this and
   column_get mirror kproducer.record.arrow_column.column_reader. */
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

/* ------------------------------------------------------------------ record encoding
 * Mirrors kproducer.record.default_record: record_size, has_room and append_one do in place what
 * record_size, has_room and encode_record (joined by append_record) do there. */
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

/* The estimated size of the batch's records up to `pos` (MemoryRecordsBuilder.estimated_size_in_bytes). */
static inline Py_ssize_t estimated_size(const batch_t *b) {
    return b->ratio > 0
        ? b->records_start + (Py_ssize_t)((double)(b->pos - b->records_start) * b->ratio * COMPRESSION_RATE_ESTIMATION_FACTOR)
        : b->pos;
}

/* The builder's has_room_for: always true for an empty batch. */
static inline int has_room(batch_t *b, Py_ssize_t size) {
    if (b->num_records == 0) return 1;
    Py_ssize_t written = estimated_size(b);
    if (b->ratio > 0) size = (Py_ssize_t)((double)size * b->ratio * COMPRESSION_RATE_ESTIMATION_FACTOR);
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
    Py_ssize_t have = PyByteArray_GET_SIZE(b->buf);
    if (end > have) {
        /* A compressed batch stages its records past its pool buffer (up to the staging floor's
           bound): grow by doubling, not record by record, which reallocated (and often copied)
           the whole buffer ~24 times per 16 KB -> 256 KB batch and tripled the cost of a 1 KB
           append. Capacity never touched costs no resident memory, and close() or the seal cuts
           the buffer back. */
        Py_ssize_t want = have * 2;
        if (want < end) want = end;
        if (PyByteArray_Resize(b->buf, want) < 0) return -1;
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

/* Group record indices start..end by the murmur2 partition of their key (the formula of
   kproducer.murmur2.partition_for_key); null keys go to the last group. */
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


/* ------------------------------------------------------------------ FutureRecordMetadata
 *
 * The fields of one record's future, as Java's FutureRecordMetadata holds them: the result of the
 * batch the record was appended to, its offset in that batch, its create time, its serialized key
 * and value sizes, and the future it moved to when its batch was split. The Python class
 * kproducer.accumulator.futures.RecordFuture adds the concurrent.futures.Future interface on top
 * and builds on whichever of this type and its Python twin
 * (kproducer.accumulator.futures.PyFutureRecordMetadata) runs; tests/unit/accumulator/
 * test_future_record_metadata.py drives both through the same operations.
 *
 * The send lane and settle_group reach these fields only through the functions below, which
 * belong to this type. The ints are C integers: a record's future costs no int objects.
 */
typedef struct {
    PyObject_HEAD
    PyObject *batch_result;  /* ProduceRequestResult (or a parked record's stand-in) */
    PyObject *next;          /* the future this record moved to (a split), or None */
    long long relative_offset;
    long long create_timestamp;
    long long serialized_key_size;
    long long serialized_value_size;
} FutureRecordMetadataObject;

static PyTypeObject FutureRecordMetadataType;

/* The cyclic-GC functions of a type whose PyObject fields are listed by FIELDS(X) (an X-macro):
   traverse visits each, clear clears each, dealloc untracks, clears and frees. The types below
   that own the send lane's fields share them. */
#define VISIT_FIELD(f) Py_VISIT(self->f);
#define CLEAR_FIELD(f) Py_CLEAR(self->f);
#define FIELDS_GC_FUNCTIONS(prefix, Type, FIELDS)                                      \
    static int prefix##_traverse(Type *self, visitproc visit, void *arg) {             \
        FIELDS(VISIT_FIELD)                                                            \
        return 0;                                                                      \
    }                                                                                  \
    static int prefix##_clear(Type *self) {                                            \
        FIELDS(CLEAR_FIELD)                                                            \
        return 0;                                                                      \
    }                                                                                  \
    static void prefix##_dealloc(Type *self) {                                         \
        PyObject_GC_UnTrack(self);                                                     \
        prefix##_clear(self);                                                          \
        Py_TYPE(self)->tp_free((PyObject *)self);                                      \
    }

#define FRM_FIELDS(X) X(batch_result) X(next)
FIELDS_GC_FUNCTIONS(frm, FutureRecordMetadataObject, FRM_FIELDS)

/* Sets every field (the type's constructor, shared by __init__ and the send lane). */
static void frm_set(FutureRecordMetadataObject *self, PyObject *result, long long relative_offset,
                    long long create_timestamp, long long key_size, long long value_size) {
    Py_INCREF(result);
    Py_XSETREF(self->batch_result, result);
    Py_INCREF(Py_None);
    Py_XSETREF(self->next, Py_None);
    self->relative_offset = relative_offset;
    self->create_timestamp = create_timestamp;
    self->serialized_key_size = key_size;
    self->serialized_value_size = value_size;
}

static int frm_init(FutureRecordMetadataObject *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {
        "result", "relative_offset", "create_timestamp", "serialized_key_size", "serialized_value_size", NULL,
    };
    PyObject *result;
    long long rel, ts, ks, vs;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OLLLL:FutureRecordMetadata", kwlist, &result, &rel, &ts, &ks, &vs))
        return -1;
    frm_set(self, result, rel, ts, ks, vs);
    return 0;
}

/* A new future of `type` (this type or a subclass) whose fields are set later by frm_set or
   __init__: the send lane makes it before it takes a partition's lock, so that an allocation
   (which may start a collection and run Python code) never happens under it. It is kept out of
   the cyclic GC: it refers to its batch's result and, after a split, to another future, neither
   of which refers back to it, and millions are alive at once under load. Every future is made
   here, the send lane's and the Python send()'s alike (the type's tp_new). */
static PyObject *frm_alloc_untracked(PyTypeObject *type) {
    PyObject *f = type->tp_alloc(type, 0);
    if (f != NULL && PyObject_GC_IsTracked(f)) PyObject_GC_UnTrack(f);
    return f;
}

static PyObject *frm_new(PyTypeObject *type, PyObject *args, PyObject *kwds) { return frm_alloc_untracked(type); }

/* The fields settle_group needs; -1 (TypeError) when `o` is not of this type. *next is borrowed. */
static int frm_fields(PyObject *o, PyObject **next, long long *relative_offset, long long *create_timestamp,
                      long long *key_size, long long *value_size) {
    if (!PyObject_TypeCheck(o, &FutureRecordMetadataType)) {
        PyErr_Format(PyExc_TypeError, "expected a RecordFuture built on kproducer._speedups.FutureRecordMetadata, got %.80s", Py_TYPE(o)->tp_name);
        return -1;
    }
    FutureRecordMetadataObject *f = (FutureRecordMetadataObject *)o;
    if (f->batch_result == NULL) {
        PyErr_SetString(PyExc_AttributeError, "a RecordFuture of the group is not initialised");
        return -1;
    }
    *next = f->next;
    *relative_offset = f->relative_offset;
    *create_timestamp = f->create_timestamp;
    *key_size = f->serialized_key_size;
    *value_size = f->serialized_value_size;
    return 0;
}

static PyMemberDef frm_members[] = {
    {"_batch_result", T_OBJECT_EX, offsetof(FutureRecordMetadataObject, batch_result), 0,
     "the result of the batch the record was appended to"},
    {"_next", T_OBJECT_EX, offsetof(FutureRecordMetadataObject, next), 0,
     "the future of this record in the batch it moved to, or None"},
    {"relative_offset", T_LONGLONG, offsetof(FutureRecordMetadataObject, relative_offset), 0,
     "the record's offset within its batch"},
    {"create_timestamp", T_LONGLONG, offsetof(FutureRecordMetadataObject, create_timestamp), 0,
     "the record's create time (ms), or -1"},
    {"serialized_key_size", T_LONGLONG, offsetof(FutureRecordMetadataObject, serialized_key_size), 0,
     "the serialized key's size in bytes, or -1 for no key"},
    {"serialized_value_size", T_LONGLONG, offsetof(FutureRecordMetadataObject, serialized_value_size), 0,
     "the serialized value's size in bytes, or -1 for no value"},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject FutureRecordMetadataType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kproducer._speedups.FutureRecordMetadata",
    .tp_basicsize = sizeof(FutureRecordMetadataObject),
    .tp_dealloc = (destructor)frm_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "FutureRecordMetadata(result, relative_offset, create_timestamp, serialized_key_size, "
              "serialized_value_size): the fields of one record's future (Java's FutureRecordMetadata).",
    .tp_traverse = (traverseproc)frm_traverse,
    .tp_clear = (inquiry)frm_clear,
    .tp_members = frm_members,
    .tp_init = (initproc)frm_init,
    .tp_new = frm_new,
};


/* ------------------------------------------------------------------ the builder's and the batch's own fields
 *
 * MemoryRecordsBuilderCore and ProducerBatchCore declare the fields of
 * kproducer.record.builder.MemoryRecordsBuilder and kproducer.accumulator.batch.ProducerBatch that
 * the send lane reads and writes; the Python classes build on them (on their Python twins,
 * PyMemoryRecordsBuilderCore and PyProducerBatchCore, in the pure-Python pass) and keep every
 * method. The attribute names are the Python classes' own, so their code reads and writes the
 * fields as before. From C, only the functions of each type below touch its fields: the lane asks
 * the batch to take a record (producer_batch_lane_append), and the batch asks its builder
 * (builder_lane_append); the Python builder's close asks its type for the batch header
 * (builder_write_default_batch_header, whose twin is PyMemoryRecordsBuilderCore's method). Both leave everything unchanged when they decline or fail, so the Python
 * send() can take the record as it came; tests/unit/producer/test_send_lane_twin.py compares the
 * two paths. The fields hold Python objects, as the Python classes' slots did.
 */
typedef struct {
    PyObject_HEAD
    PyObject *buf, *magic, *compression, *write_limit, *records_start, *pos, *num_records, *base_timestamp,
        *max_timestamp, *closed, *estimated_ratio, *sealed, *timestamp_type, *base_offset, *producer_id,
        *producer_epoch, *base_sequence, *is_transactional, *partition_leader_epoch, *is_control, *size,
        *compressed_records_size;
} BuilderCoreObject;

#define BUILDER_CORE_FIELDS(X) \
    X(buf) X(magic) X(compression) X(write_limit) X(records_start) X(pos) X(num_records) X(base_timestamp) \
    X(max_timestamp) X(closed) X(estimated_ratio) X(sealed) X(timestamp_type) X(base_offset) X(producer_id) \
    X(producer_epoch) X(base_sequence) X(is_transactional) X(partition_leader_epoch) X(is_control) X(size) \
    X(compressed_records_size)

FIELDS_GC_FUNCTIONS(builder_core, BuilderCoreObject, BUILDER_CORE_FIELDS)

#define FIELD_MEMBER(type, f, name, doc) {name, T_OBJECT_EX, offsetof(type, f), 0, doc}

static PyMemberDef builder_core_members[] = {
    FIELD_MEMBER(BuilderCoreObject, buf, "_buf", "the batch's bytearray"),
    FIELD_MEMBER(BuilderCoreObject, magic, "_magic", "the record format: 0, 1 or 2"),
    FIELD_MEMBER(BuilderCoreObject, compression, "_compression", "the CompressionType"),
    FIELD_MEMBER(BuilderCoreObject, write_limit, "_write_limit", "the estimated size appends stop at"),
    FIELD_MEMBER(BuilderCoreObject, records_start, "_records_start", "where the first record goes"),
    FIELD_MEMBER(BuilderCoreObject, pos, "_pos", "where the next record goes"),
    FIELD_MEMBER(BuilderCoreObject, num_records, "_num_records", "the records appended"),
    FIELD_MEMBER(BuilderCoreObject, base_timestamp, "_base_timestamp", "the first record's timestamp (v2)"),
    FIELD_MEMBER(BuilderCoreObject, max_timestamp, "_max_timestamp", "the largest timestamp appended"),
    FIELD_MEMBER(BuilderCoreObject, closed, "_closed", "no more appends: the batch is built"),
    FIELD_MEMBER(BuilderCoreObject, estimated_ratio, "_estimated_ratio", "the compression-ratio estimate"),
    FIELD_MEMBER(BuilderCoreObject, sealed, "_sealed", "the records are compressed already"),
    FIELD_MEMBER(BuilderCoreObject, timestamp_type, "_timestamp_type", "0 create time, 1 log-append time"),
    FIELD_MEMBER(BuilderCoreObject, base_offset, "_base_offset", "the batch's first offset"),
    FIELD_MEMBER(BuilderCoreObject, producer_id, "_producer_id", "the idempotent producer's id, or -1"),
    FIELD_MEMBER(BuilderCoreObject, producer_epoch, "_producer_epoch", "the producer's epoch, or -1"),
    FIELD_MEMBER(BuilderCoreObject, base_sequence, "_base_sequence", "the first record's sequence, or -1"),
    FIELD_MEMBER(BuilderCoreObject, is_transactional, "_is_transactional", "written inside a transaction"),
    FIELD_MEMBER(BuilderCoreObject, partition_leader_epoch, "_partition_leader_epoch", "the leader epoch, or -1"),
    FIELD_MEMBER(BuilderCoreObject, is_control, "_is_control", "a control batch (a transaction marker)"),
    FIELD_MEMBER(BuilderCoreObject, size, "_size", "the finished batch's size, 0 before close"),
    FIELD_MEMBER(BuilderCoreObject, compressed_records_size, "_compressed_records_size",
                 "the bytes of the records once final (compressed or not)"),
    {NULL, 0, 0, 0, NULL},
};

/* struct.error: what struct.pack_into raises for a header field out of range, as the twin does. */
static PyObject *struct_error;
static PyObject *s_zero;               /* 0: crc32c's initial value, and its gil_release_mode (keep the GIL) */
#define RECORD_BATCH_OVERHEAD 61       /* the v2 batch header's size */

/* A header field's value, checked as struct.pack_into checks it for the twin. */
static int header_field(PyObject *v, const char *name, int64_t lo, int64_t hi, int64_t *out) {
    if (v == NULL) {
        PyErr_Format(PyExc_AttributeError, "the builder's %s is not set", name);
        return -1;
    }
    if (!PyLong_Check(v)) {
        PyErr_Format(struct_error, "required argument is not an integer (the batch header's %s)", name);
        return -1;
    }
    int overflow;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (x == -1 && PyErr_Occurred()) return -1;
    if (overflow || x < lo || x > hi) {
        PyErr_Format(struct_error, "the batch header's %s (%R) is out of range %lld..%lld", name, v, (long long)lo,
                     (long long)hi);
        return -1;
    }
    *out = x;
    return 0;
}

static inline uint8_t *put_be(uint8_t *p, uint64_t v, int bytes) {
    for (int i = bytes - 1; i >= 0; i--) { p[i] = (uint8_t)(v & 0xff); v >>= 8; }
    return p + bytes;
}

/* MemoryRecordsBuilderCore.write_default_batch_header(crc32c): the v2 batch header and its CRC, once
 * the records are final (Java's MemoryRecordsBuilder.writeDefaultBatchHeader). Mirrors
 * kproducer.record.builder.PyMemoryRecordsBuilderCore.write_default_batch_header field for field:
 * the same checks in the same order, the header written, crc32c(records view, gil_release_mode=0)
 * called for the checksum, and _size set last. */
static PyObject *builder_write_default_batch_header(BuilderCoreObject *self, PyObject *crc32c) {
    int64_t start, records, compression, ts_type, base_offset, ple, num, base_ts, max_ts, pid, epoch, seq;
    if (self->buf == NULL) {
        PyErr_SetString(PyExc_AttributeError, "the builder's _buf is not set");
        return NULL;
    }
    if (header_field(self->records_start, "_records_start", INT64_MIN, INT64_MAX, &start) < 0 ||
        header_field(self->compressed_records_size, "_compressed_records_size", INT64_MIN, INT64_MAX, &records) < 0)
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(self->buf, &view, PyBUF_WRITABLE) < 0) return NULL;
    int64_t end = records > INT64_MAX - start ? INT64_MAX : start + records;
    if (start < RECORD_BATCH_OVERHEAD || end < start || end > view.len || end - 12 > INT32_MAX) {
        PyErr_Format(PyExc_ValueError,
                     "the batch's records (bytes %lld..%lld) do not fit its buffer of %zd bytes after the header",
                     (long long)start, (long long)end, view.len);
        PyBuffer_Release(&view);
        return NULL;
    }
    int transactional = self->is_transactional == NULL ? -2 : PyObject_IsTrue(self->is_transactional);
    int control = transactional < 0 ? -1 : self->is_control == NULL ? -2 : PyObject_IsTrue(self->is_control);
    if (transactional == -2 || control == -2)
        PyErr_SetString(PyExc_AttributeError, "the builder's _is_transactional or _is_control is not set");
    if (transactional < 0 || control < 0 ||
        header_field(self->compression, "_compression", INT16_MIN, INT16_MAX, &compression) < 0 ||
        header_field(self->timestamp_type, "_timestamp_type", INT16_MIN, INT16_MAX, &ts_type) < 0 ||
        header_field(self->num_records, "_num_records", 1, INT32_MAX, &num) < 0 ||
        header_field(self->base_offset, "_base_offset", INT64_MIN, INT64_MAX, &base_offset) < 0 ||
        header_field(self->partition_leader_epoch, "_partition_leader_epoch", INT32_MIN, INT32_MAX, &ple) < 0 ||
        header_field(self->base_timestamp, "_base_timestamp", INT64_MIN, INT64_MAX, &base_ts) < 0 ||
        header_field(self->max_timestamp, "_max_timestamp", INT64_MIN, INT64_MAX, &max_ts) < 0 ||
        header_field(self->producer_id, "_producer_id", INT64_MIN, INT64_MAX, &pid) < 0 ||
        header_field(self->producer_epoch, "_producer_epoch", INT16_MIN, INT16_MAX, &epoch) < 0 ||
        header_field(self->base_sequence, "_base_sequence", INT32_MIN, INT32_MAX, &seq) < 0) {
        PyBuffer_Release(&view);
        return NULL;
    }
    int64_t attributes = compression | (ts_type * 8) | (transactional ? 0x10 : 0) | (control ? 0x20 : 0);
    if (attributes < INT16_MIN || attributes > INT16_MAX) {
        PyErr_Format(struct_error, "the batch header's attributes (%lld) are out of range", (long long)attributes);
        PyBuffer_Release(&view);
        return NULL;
    }
    uint8_t *p = (uint8_t *)view.buf;
    p = put_be(p, (uint64_t)base_offset, 8);
    p = put_be(p, (uint64_t)(end - 12), 4);
    p = put_be(p, (uint64_t)ple, 4);
    *p++ = 2;
    p = put_be(p, 0, 4); /* the CRC, below */
    p = put_be(p, (uint64_t)attributes, 2);
    p = put_be(p, (uint64_t)(num - 1), 4);
    p = put_be(p, (uint64_t)base_ts, 8);
    p = put_be(p, (uint64_t)max_ts, 8);
    p = put_be(p, (uint64_t)pid, 8);
    p = put_be(p, (uint64_t)epoch, 2);
    p = put_be(p, (uint64_t)seq, 4);
    put_be(p, (uint64_t)num, 4);
    /* The checksum from the crc32c package (hardware CRC-32C), on a view of the bytes after the CRC
       field; the GIL is kept (gil_release_mode=0), as the twin keeps it. Positional arguments:
       the package parses keywords at several times the cost of the checksum of a small batch. */
    PyObject *mv = PyMemoryView_FromMemory((char *)view.buf + 21, (Py_ssize_t)(end - 21), PyBUF_READ);
    PyObject *crc = NULL;
    if (mv != NULL) {
        PyObject *args[3] = {mv, s_zero, s_zero}; /* (data, value=0, gil_release_mode=0) */
        crc = PyObject_Vectorcall(crc32c, args, 3, NULL);
        if (Py_REFCNT(mv) > 1) {
            /* Kept by the callee: the view must not outlive this call, since the bytearray may be
               resized or freed once the export below ends. */
            PyObject *r = PyObject_CallMethod(mv, "release", NULL);
            if (r == NULL) Py_CLEAR(crc);
            Py_XDECREF(r);
        }
        Py_DECREF(mv);
    }
    int64_t value = 0;
    if (crc != NULL && header_field(crc, "CRC", 0, UINT32_MAX, &value) == 0)
        put_be((uint8_t *)view.buf + 17, (uint64_t)value, 4);
    PyBuffer_Release(&view);
    if (crc == NULL || PyErr_Occurred()) {
        Py_XDECREF(crc);
        return NULL;
    }
    Py_DECREF(crc);
    PyObject *size = PyLong_FromLongLong(end);
    if (size == NULL) return NULL;
    Py_XSETREF(self->size, size);
    Py_RETURN_NONE;
}

static PyMethodDef builder_core_methods[] = {
    {"write_default_batch_header", (PyCFunction)builder_write_default_batch_header, METH_O,
     "write_default_batch_header(crc32c): the v2 batch header and CRC once the records are final; sets _size."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject BuilderCoreType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kproducer._speedups.MemoryRecordsBuilderCore",
    .tp_basicsize = sizeof(BuilderCoreObject),
    .tp_dealloc = (destructor)builder_core_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "The fields of a MemoryRecordsBuilder the send lane appends through (set by the Python class).",
    .tp_traverse = (traverseproc)builder_core_traverse,
    .tp_clear = (inquiry)builder_core_clear,
    .tp_members = builder_core_members,
    .tp_methods = builder_core_methods,
    .tp_new = PyType_GenericNew,
};

/* An int field as int64; 0 (and no error) when it is unset or not an exact int. */
static inline int field_int(PyObject *v, int64_t *out) {
    if (v == NULL || !PyLong_CheckExact(v)) return 0;
    int overflow;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow || (x == -1 && PyErr_Occurred())) { PyErr_Clear(); return 0; }
    *out = x;
    return 1;
}

/* The builder appends one v2 record without headers, as MemoryRecordsBuilder.try_append does, when
 * it is open, holds `expected_records` records and the record fits (the first record always
 * does, and sets the base timestamp the others are written relative to): 1. Not taken: 0,
 * nothing changed. -1 with an exception, nothing changed. *before and *after are the estimated
 * sizes around the append, *write_limit the builder's. */
static int builder_lane_append(BuilderCoreObject *b, PyObject *none_compression, int64_t expected_records,
                               int64_t timestamp, const uint8_t *k, Py_ssize_t klen, const uint8_t *v,
                               Py_ssize_t vlen, Py_ssize_t *before, Py_ssize_t *after, int64_t *write_limit) {
    if (b->buf == NULL || !PyByteArray_CheckExact(b->buf) || b->closed != Py_False || b->sealed != Py_False ||
        b->compression == NULL || b->estimated_ratio == NULL || !PyFloat_CheckExact(b->estimated_ratio))
        return 0;
    int64_t magic, records_start, pos, num, base_ts, max_ts;
    if (!field_int(b->magic, &magic) || magic != 2 || !field_int(b->write_limit, write_limit) ||
        !field_int(b->records_start, &records_start) || !field_int(b->pos, &pos) ||
        !field_int(b->num_records, &num) || !field_int(b->base_timestamp, &base_ts) ||
        !field_int(b->max_timestamp, &max_ts) || num < 0 || num != expected_records)
        return 0;
    batch_t w;
    w.buf = b->buf;
    w.pos = (Py_ssize_t)pos;
    w.write_limit = (Py_ssize_t)*write_limit;
    w.records_start = (Py_ssize_t)records_start;
    w.ratio = b->compression == none_compression ? 0.0 : PyFloat_AS_DOUBLE(b->estimated_ratio);
    w.num_records = num;
    w.ts_delta = num > 0 ? timestamp - base_ts : 0;
    w.headers = NO_HEADERS;
    w.headers_len = 1;
    /* The new values before the first write, so that a failure changes nothing. */
    PyObject *n_num = PyLong_FromLongLong(num + 1);
    PyObject *n_max = timestamp > max_ts ? PyLong_FromLongLong(timestamp) : NULL;
    PyObject *n_base = num == 0 ? PyLong_FromLongLong(timestamp) : NULL;
    if (n_num == NULL || (timestamp > max_ts && n_max == NULL) || (num == 0 && n_base == NULL)) {
        Py_XDECREF(n_num);
        Py_XDECREF(n_max);
        Py_XDECREF(n_base);
        return -1;
    }
    *before = estimated_size(&w);
    /* The bytes up to the batch's capacity exist already, so this does not reallocate unless a
       compressed batch outgrows its buffer (a bytearray resize: no Python code either). */
    int ok = append_one(&w, k, klen, v, vlen, 1);
    PyObject *n_pos = ok == 1 ? PyLong_FromSsize_t(w.pos) : NULL;
    if (ok != 1 || n_pos == NULL) {  /* the bytes past the old position are ignored */
        Py_DECREF(n_num);
        Py_XDECREF(n_max);
        Py_XDECREF(n_base);
        return ok == 1 ? -1 : ok;
    }
    *after = estimated_size(&w);
    Py_SETREF(b->pos, n_pos);
    Py_SETREF(b->num_records, n_num);
    if (n_max != NULL) Py_SETREF(b->max_timestamp, n_max);
    if (n_base != NULL) Py_SETREF(b->base_timestamp, n_base);
    return 1;
}

typedef struct {
    PyObject_HEAD
    PyObject *builder, *last_append_ms, *record_count, *thunks, *result, *writable, *pinned, *ready_size;
} BatchCoreObject;

#define BATCH_CORE_FIELDS(X) \
    X(builder) X(last_append_ms) X(record_count) X(thunks) X(result) X(writable) X(pinned) X(ready_size)

FIELDS_GC_FUNCTIONS(batch_core, BatchCoreObject, BATCH_CORE_FIELDS)

static PyMemberDef batch_core_members[] = {
    FIELD_MEMBER(BatchCoreObject, builder, "builder", "the batch's MemoryRecordsBuilder"),
    FIELD_MEMBER(BatchCoreObject, last_append_ms, "last_append_ms", "when a record was last appended"),
    FIELD_MEMBER(BatchCoreObject, record_count, "record_count", "the records appended"),
    FIELD_MEMBER(BatchCoreObject, thunks, "thunks", "callback, future of each record with a callback, flat"),
    FIELD_MEMBER(BatchCoreObject, result, "result", "the batch's ProduceRequestResult"),
    FIELD_MEMBER(BatchCoreObject, writable, "_writable", "records may still be appended"),
    FIELD_MEMBER(BatchCoreObject, pinned, "pinned", "a keyed record is in it: it may not move partition"),
    FIELD_MEMBER(BatchCoreObject, ready_size, "ready_size", "the size at which the batch counts as full"),
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject BatchCoreType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kproducer._speedups.ProducerBatchCore",
    .tp_basicsize = sizeof(BatchCoreObject),
    .tp_dealloc = (destructor)batch_core_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "The fields of a ProducerBatch the send lane appends through (set by the Python class).",
    .tp_traverse = (traverseproc)batch_core_traverse,
    .tp_clear = (inquiry)batch_core_clear,
    .tp_members = batch_core_members,
    .tp_new = PyType_GenericNew,
};

/* The batch takes one record from the send lane, as ProducerBatch.try_append does: its builder
 * (of exactly `builder_type`) appends it; then the batch counts it, sets `future` (a fresh
 * FutureRecordMetadata) to it, keeps `callback` and `future` as the next pair of its flat thunks
 * list when `callback` is not NULL, and is pinned to its partition when the record is keyed.
 * 1 taken; 0 not taken and -1 with an exception, both with nothing changed (but for the list
 * failing to grow, below). *before, *after, *write_limit as builder_lane_append; *ready_size the
 * batch's. */
static int producer_batch_lane_append(BatchCoreObject *batch, PyTypeObject *builder_type, PyObject *none_compression,
                                      int64_t now, int64_t timestamp, const uint8_t *k, Py_ssize_t klen,
                                      const uint8_t *v, Py_ssize_t vlen, int keyed, PyObject *future,
                                      PyObject *callback, Py_ssize_t *before, Py_ssize_t *after,
                                      int64_t *write_limit, int64_t *ready_size) {
    /* A batch makes its thunks list with its first callback (ProducerBatch._keep), and the lane
       allocates nothing tracked by the cyclic GC under the deque lock: a record with a callback
       for a batch that has no list yet goes to the Python send(), which makes it. */
    if (batch->writable != Py_True || batch->builder == NULL || batch->thunks == NULL || batch->result == NULL ||
        !Py_IS_TYPE(batch->builder, builder_type) ||
        !(callback == NULL ? batch->thunks == Py_None || PyList_CheckExact(batch->thunks) : PyList_CheckExact(batch->thunks)))
        return 0;
    int64_t count;
    if (!field_int(batch->record_count, &count) || !field_int(batch->ready_size, ready_size)) return 0;
    PyObject *n_now = PyLong_FromLongLong(now);
    PyObject *n_count = PyLong_FromLongLong(count + 1);
    if (n_now == NULL || n_count == NULL) { Py_XDECREF(n_now); Py_XDECREF(n_count); return -1; }
    int rc = builder_lane_append((BuilderCoreObject *)batch->builder, none_compression, count, timestamp, k, klen,
                                 v, vlen, before, after, write_limit);
    if (rc != 1) { Py_DECREF(n_now); Py_DECREF(n_count); return rc; }
    Py_XSETREF(batch->last_append_ms, n_now);  /* the one field written here that was not read first */
    frm_set((FutureRecordMetadataObject *)future, batch->result, count, timestamp, klen, vlen);
    Py_SETREF(batch->record_count, n_count);
    if (callback != NULL) {
        /* Only a list resize can fail here, after the record went in: the record then stays (its
           future completes with the batch) and the error reaches the caller of send(). The list
           holds whole pairs only: a callback whose future could not follow is taken back. */
        PyObject *thunks = batch->thunks;
        if (PyList_Append(thunks, callback) < 0) return -1;
        if (PyList_Append(thunks, future) < 0) {
            /* Shortening a list by its last item cannot fail (no reallocation), so the error
               raised stays the append's. */
            Py_ssize_t n = PyList_GET_SIZE(thunks);
            PyObject *last = PyList_GET_ITEM(thunks, n - 1);
            Py_SET_SIZE(thunks, n - 1);
            Py_DECREF(last);
            return -1;
        }
    }
    if (keyed && batch->pinned != Py_True) {
        /* A keyed record keeps its partition: the batch may no longer move off it (as in Python). */
        Py_INCREF(Py_True);
        Py_XSETREF(batch->pinned, Py_True);
    }
    return 1;
}


/* ------------------------------------------------------------------ the send() fast lane
 *
 * Producer.send() for the common call shape -- send(topic, value, key, callback=... or on_delivery=...)
 * with bytes (or None) key and value, a topic whose metadata is known, the built-in
 * partitioner, and room in the partition's open batch (or, for a keyed record, no open batch)
 * -- done in one native call, after handing the GIL to a Sender thread that waits for it
 * (lane_hand_over_gil).
 * It appends to the same ProducerBatch / MemoryRecordsBuilder / RecordFuture objects
 * the Python accumulator uses, through the functions of the C types they build on
 * (each type writes only its own fields), under the same partition-deque lock. A keyed
 * record whose partition has no open batch gets one from the accumulator's own Python step
 * (RecordAccumulator.open_new_batch, called under that lock; it never waits), and the lane
 * appends the record to it as to any open batch. Whenever
 * anything else is out of the ordinary (a keyless record with no open batch, the record does
 * not fit, no memory free now, an argument the lane does not handle) it changes nothing and
 * hands the call, as it came, to the Python send(), which defines the semantics. So does every call once
 * the `gate` dict holds a value other than None under `gate_key`: the OpenTelemetry
 * API's global tracer provider (kproducer.tracing.ProducerTracing.should_trace makes
 * the same test in Python), since a traced send is made in Python. A provider that makes
 * no spans sets the gate aside (the lane's `gate = None`), as if none were set.
 */


static PyObject *s_acquire, *s_release, *s_muted, *s_cluster_view, *s_touch, *s_update_partition_info, *s_closed,
    *s_open_new_batch;

/* One topic the lane knows: the accumulator's state for it. */
typedef struct {
    PyObject_HEAD
    PyObject *deques;       /* dict partition -> _PartitionDeque (the accumulator's) */
    PyObject *partitioner;  /* the topic's BuiltInPartitioner */
    Py_ssize_t num_partitions;
    int64_t last_touch_ms;
} LaneTopic;

static void lane_topic_dealloc(LaneTopic *t) {
    Py_XDECREF(t->deques);
    Py_XDECREF(t->partitioner);
    Py_TYPE(t)->tp_free((PyObject *)t);
}

static PyTypeObject LaneTopicType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kproducer._speedups.LaneTopic",
    .tp_basicsize = sizeof(LaneTopic),
    .tp_dealloc = (destructor)lane_topic_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A topic registered with a SendLane.",
};

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *slow;          /* the Python send(), bound: every call the lane does not take */
    PyObject *metadata;      /* Metadata: .cluster is compared by identity, .touch() keeps topics alive */
    PyObject *accumulator;   /* RecordAccumulator: .closed */
    PyObject *wakeup;        /* the Sender's wakeup() */
    PyObject *wake_for_new_batch; /* RecordRouter.wake_for_new_batch(now_ms), or NULL: wakeup() for a new batch too */
    PyObject *breaker;       /* the CircuitBreakManager, or None */
    PyObject *topics;        /* dict topic -> LaneTopic, valid while metadata holds current_cluster */
    PyObject *current_cluster; /* the Cluster snapshot the topics were registered with (one, not one per topic) */
    PyObject *none_compression;
    PyObject *cluster_attr;  /* the Metadata attribute holding the current Cluster snapshot */
    PyObject *check_callback; /* kproducer.delivery.check_callback(fn, keyword): raises TypeError for a wrong shape */
    PyObject *report_type;   /* kproducer.delivery.DeliveryReport(fn, topic, key, value): on_delivery's (err, msg) */
    PyObject *checked;       /* the last callable check_callback accepted (the same one is passed again and again) */
    PyObject *checked_type;  /* a class whose every instance check_callback accepts (one callable object per record) */
    PyObject *gate;          /* a dict, or NULL: while gate[gate_key] is not None, every call takes the Python path */
    PyObject *gate_key;      /* (kproducer.tracing: the OpenTelemetry API's global tracer provider, set once) */
    PyObject *clock;         /* the producer's monotonic milliseconds, or NULL: CLOCK_MONOTONIC read here */
    PyObject *wall_clock;    /* the producer's create-time milliseconds, or NULL: CLOCK_REALTIME read here */
    PyObject *gil_wanted_capsule; /* kproducer.network._sockio.GIL_WANTED, or NULL */
    int *gil_wanted;         /* its counter: Sender threads back from their wait, wanting the GIL */
    int64_t hand_over_after_ns; /* CLOCK_MONOTONIC: no hand-over before then (one per GIL_HAND_OVER_INTERVAL_NS) */
    int64_t last_hand_over_ns;  /* CLOCK_MONOTONIC of the last hand-over */
    int64_t rate_window_ns;     /* CLOCK_MONOTONIC: since when calls_in_window counts */
    int64_t calls_in_window;    /* calls to the lane since rate_window_ns */
    int tight_loop;             /* the last window's calls came more often than GIL_HAND_OVER_TIGHT_LOOP_NS */
    PyTypeObject *batch_type, *builder_type, *future_type, *deque_type, *partitioner_type;
    Py_ssize_t max_record_size;   /* min(max.request.size, buffer.memory) */
    Py_ssize_t sticky_batch_size;
    int ignore_keys;
    int key_hash;                 /* LANE_KEY_*: the keyed partition rule (partitioner.class) */
    int empty_key_keyless;        /* librdkafka's consistent_random: an empty key goes where keyless ones do */
    int enabled;
    Py_ssize_t fast_calls;        /* sends the lane took (tests and benchmarks read it) */
} SendLane;

static int lane_traverse(SendLane *self, visitproc visit, void *arg) {
    Py_VISIT(self->slow);
    Py_VISIT(self->metadata);
    Py_VISIT(self->accumulator);
    Py_VISIT(self->wakeup);
    Py_VISIT(self->wake_for_new_batch);
    Py_VISIT(self->breaker);
    Py_VISIT(self->topics);
    Py_VISIT(self->current_cluster);
    Py_VISIT(self->check_callback);
    Py_VISIT(self->report_type);
    Py_VISIT(self->checked);
    Py_VISIT(self->checked_type);
    Py_VISIT(self->gate);
    Py_VISIT(self->clock);
    Py_VISIT(self->wall_clock);
    Py_VISIT(self->gil_wanted_capsule);
    return 0;
}

static int lane_clear(SendLane *self) {
    Py_CLEAR(self->slow);
    Py_CLEAR(self->metadata);
    Py_CLEAR(self->accumulator);
    Py_CLEAR(self->wakeup);
    Py_CLEAR(self->wake_for_new_batch);
    Py_CLEAR(self->breaker);
    Py_CLEAR(self->topics);
    Py_CLEAR(self->current_cluster);
    Py_CLEAR(self->check_callback);
    Py_CLEAR(self->report_type);
    Py_CLEAR(self->checked);
    Py_CLEAR(self->checked_type);
    Py_CLEAR(self->gate);
    Py_CLEAR(self->clock);
    Py_CLEAR(self->wall_clock);
    Py_CLEAR(self->gil_wanted_capsule);
    self->gil_wanted = NULL;
    return 0;
}

static void lane_dealloc(SendLane *self) {
    PyObject_GC_UnTrack(self);
    lane_clear(self);
    Py_CLEAR(self->none_compression);
    Py_CLEAR(self->cluster_attr);
    Py_CLEAR(self->gate_key);
    Py_CLEAR(self->batch_type);
    Py_CLEAR(self->builder_type);
    Py_CLEAR(self->future_type);
    Py_CLEAR(self->deque_type);
    Py_CLEAR(self->partitioner_type);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static inline int64_t now_ms(clockid_t clock) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Milliseconds from the producer's clock when one was injected, else read here from `id`.
   0 with *out set, or -1 with an exception. */
static int lane_clock(PyObject *clock, clockid_t id, int64_t *out) {
    if (clock == NULL) { *out = now_ms(id); return 0; }
    PyObject *r = PyObject_CallNoArgs(clock);
    if (r == NULL) return -1;
    long long x = PyLong_AsLongLong(r);
    Py_DECREF(r);
    if (x == -1 && PyErr_Occurred()) return -1;
    *out = x;
    return 0;
}

/* ---------------------------------------------------------------- Lock
 * kproducer._speedups.Lock: the threading.Lock the partition deques and the sticky partitioner
 * use when the C extension runs (kproducer.record.native.new_lock), so that the send lane takes
 * and releases it with a C call instead of looking up and calling Python methods. Its Python twin
 * is threading.Lock itself (tests/unit/record/test_native_lock.py compares the two). Like
 * threading.Lock it is not reentrant and any thread may release it. A wait is interruptible as
 * threading.Lock's is: a signal runs its Python handler, and an exception from it ends the wait. */
typedef struct {
    PyObject_HEAD
    PyThread_type_lock lock;
    char locked;  /* read by locked(); written only by the holder, under the GIL */
} LockObject;

static PyTypeObject LockType;

/* 1 when taken now, without waiting; 0 when another holder has it. */
static inline int native_lock_try(LockObject *self) {
    if (PyThread_acquire_lock_timed(self->lock, 0, 0) != PY_LOCK_ACQUIRED) return 0;
    self->locked = 1;
    return 1;
}

static inline int64_t mono_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* Waits up to `timeout_us` microseconds (-1: forever) with the GIL released; a signal in between
   runs the Python handlers. 1 taken, 0 timed out, -1 with the handler's exception. */
static int native_lock_wait(LockObject *self, PY_TIMEOUT_T timeout_us) {
    if (native_lock_try(self)) return 1;
    if (timeout_us == 0) return 0;
    int64_t deadline = timeout_us > 0 ? mono_us() + (int64_t)timeout_us : 0;
    for (;;) {
        PyLockStatus st;
        Py_BEGIN_ALLOW_THREADS
        st = PyThread_acquire_lock_timed(self->lock, timeout_us, 1);
        Py_END_ALLOW_THREADS
        if (st == PY_LOCK_ACQUIRED) { self->locked = 1; return 1; }
        if (st == PY_LOCK_FAILURE) return 0;
        /* PY_LOCK_INTR: a signal arrived; its handler may raise and end the wait. */
        if (Py_MakePendingCalls() < 0) return -1;
        if (timeout_us > 0) {
            int64_t left = deadline - mono_us();
            if (left <= 0) return native_lock_try(self);
            timeout_us = (PY_TIMEOUT_T)left;
        }
    }
}

/* A blocking acquire, as the lane's: 0, or -1 with the exception a signal handler raised. */
static inline int native_lock_acquire(LockObject *self) {
    return native_lock_wait(self, -1) < 0 ? -1 : 0;
}

/* 0, or -1 with RuntimeError when the lock is not held (threading.Lock's error). */
static inline int native_lock_release(LockObject *self) {
    if (!self->locked) {
        PyErr_SetString(PyExc_RuntimeError, "release unlocked lock");
        return -1;
    }
    self->locked = 0;
    PyThread_release_lock(self->lock);
    return 0;
}

static PyObject *Lock_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    if (PyTuple_GET_SIZE(args) != 0 || (kwds != NULL && PyDict_GET_SIZE(kwds) != 0)) {
        PyErr_SetString(PyExc_TypeError, "Lock() takes no arguments");
        return NULL;
    }
    LockObject *self = (LockObject *)type->tp_alloc(type, 0);
    if (self == NULL) return NULL;
    self->lock = PyThread_allocate_lock();
    self->locked = 0;
    if (self->lock == NULL) {
        Py_DECREF(self);
        PyErr_SetString(PyExc_MemoryError, "can't allocate lock");
        return NULL;
    }
    return (PyObject *)self;
}

static void Lock_dealloc(LockObject *self) {
    if (self->lock != NULL) {
        /* A lock dropped while held is released first, as threading.Lock's deallocator does. */
        if (self->locked) PyThread_release_lock(self->lock);
        PyThread_free_lock(self->lock);
    }
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* acquire(blocking=True, timeout=-1) with threading.Lock's argument rules and errors. */
static PyObject *Lock_acquire(LockObject *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"blocking", "timeout", NULL};
    int blocking = 1;
    PyObject *timeout_obj = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|pO:acquire", kwlist, &blocking, &timeout_obj)) return NULL;
    double timeout = -1.0;
    if (timeout_obj != NULL) {
        timeout = PyFloat_AsDouble(timeout_obj);
        if (timeout == -1.0 && PyErr_Occurred()) return NULL;
        if (isnan(timeout)) {
            PyErr_SetString(PyExc_ValueError, "Invalid value NaN (not a number)");
            return NULL;
        }
    }
    if (!blocking && timeout != -1.0) {
        PyErr_SetString(PyExc_ValueError, "can't specify a timeout for a non-blocking call");
        return NULL;
    }
    if (timeout < 0 && timeout != -1.0) {
        /* threading.Lock's wording, which CPython 3.13 changed. */
#if PY_VERSION_HEX >= 0x030D0000
        PyErr_SetString(PyExc_ValueError, "timeout value must be a non-negative number");
#else
        PyErr_SetString(PyExc_ValueError, "timeout value must be positive");
#endif
        return NULL;
    }
    PY_TIMEOUT_T us = -1;
    if (!blocking) {
        us = 0;
    } else if (timeout >= 0) {
        double t = ceil(timeout * 1e6);
        if (t > (double)PY_TIMEOUT_MAX) {
            PyErr_SetString(PyExc_OverflowError, "timeout value is too large");
            return NULL;
        }
        us = (PY_TIMEOUT_T)t;
    }
    int got = native_lock_wait(self, us);
    if (got < 0) return NULL;
    return PyBool_FromLong(got);
}

static PyObject *Lock_enter(LockObject *self, PyObject *Py_UNUSED(ignored)) {
    if (native_lock_acquire(self) < 0) return NULL;
    Py_RETURN_TRUE;
}

static PyObject *Lock_release(LockObject *self, PyObject *Py_UNUSED(ignored)) {
    if (native_lock_release(self) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *Lock_exit(LockObject *self, PyObject *Py_UNUSED(args)) {
    if (native_lock_release(self) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *Lock_locked(LockObject *self, PyObject *Py_UNUSED(ignored)) {
    return PyBool_FromLong(self->locked);
}

static PyObject *Lock_repr(LockObject *self) {
    return PyUnicode_FromFormat("<%s %s object at %p>", self->locked ? "locked" : "unlocked",
                                Py_TYPE(self)->tp_name, self);
}

static PyMethodDef Lock_methods[] = {
    {"acquire", (PyCFunction)(void (*)(void))Lock_acquire, METH_VARARGS | METH_KEYWORDS,
     "acquire(blocking=True, timeout=-1) -> bool, as threading.Lock.acquire."},
    {"release", (PyCFunction)Lock_release, METH_NOARGS, "release(), as threading.Lock.release."},
    {"locked", (PyCFunction)Lock_locked, METH_NOARGS, "locked() -> bool, as threading.Lock.locked."},
    {"__enter__", (PyCFunction)Lock_enter, METH_NOARGS, "acquire()"},
    {"__exit__", (PyCFunction)Lock_exit, METH_VARARGS, "release()"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject LockType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kproducer._speedups.Lock",
    .tp_basicsize = sizeof(LockObject),
    .tp_dealloc = (destructor)Lock_dealloc,
    .tp_repr = (reprfunc)Lock_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A non-reentrant lock with threading.Lock's interface, which the send lane takes from C.",
    .tp_methods = Lock_methods,
    .tp_new = Lock_new,
};

/* The deque's and the partitioner's locks: a kproducer._speedups.Lock is taken and released
   through the C helpers above; any other lock (a test's recording one) through its methods. */
static inline int lock_try(PyObject *lock) {
    if (Py_IS_TYPE(lock, &LockType)) return native_lock_try((LockObject *)lock);
    PyObject *args[2] = {lock, Py_False};
    PyObject *r = PyObject_VectorcallMethod(s_acquire, args, 2 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
    if (r == NULL) return -1;
    int got = (r == Py_True);
    Py_DECREF(r);
    return got;
}

/* Takes the lock: a non-blocking try first (no GIL hand-off when it is free), then a blocking
   acquire, which lets go of the GIL while it waits. 0, or -1 with an exception. */
static int lock_acquire(PyObject *lock) {
    if (Py_IS_TYPE(lock, &LockType)) return native_lock_acquire((LockObject *)lock);
    int got = lock_try(lock);
    if (got != 0) return got < 0 ? -1 : 0;
    PyObject *r = PyObject_CallMethodNoArgs(lock, s_acquire);
    if (r == NULL) return -1;
    Py_DECREF(r);
    return 0;
}

static inline int lock_release(PyObject *lock) {
    if (Py_IS_TYPE(lock, &LockType)) return native_lock_release((LockObject *)lock);
    PyObject *r = PyObject_CallMethodNoArgs(lock, s_release);
    if (r == NULL) return -1;
    Py_DECREF(r);
    return 0;
}

/* ---------------------------------------------------------------- the sticky partitioner's and the deque's own fields
 *
 * StickyPartitionInfo (Java's BuiltInPartitioner.StickyPartitionInfo: the sticky partition and the
 * bytes produced to it since it was chosen), BuiltInPartitionerCore (the partitioner's lock and its
 * current StickyPartitionInfo) and PartitionDequeCore (a partition's lock and its deque of batches)
 * own the fields the send lane reads and counts through, as the batch and builder types above do.
 * kproducer.partitioner.BuiltInPartitioner and kproducer.accumulator.deques.PartitionDeque build
 * on the last two, and the partitioner makes StickyPartitionInfo objects; each has a Python twin
 * (PyStickyPartitionInfo, PyBuiltInPartitionerCore, PyPartitionDequeCore) that the pure-Python
 * pass uses. tests/unit/accumulator/test_native_cores.py runs the same cases on both.
 */
typedef struct {
    PyObject_HEAD
    long long partition;
    long long produced_bytes;
} StickyInfoObject;

static int sticky_info_init(StickyInfoObject *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"partition", NULL};
    long long partition;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "L:StickyPartitionInfo", kwlist, &partition)) return -1;
    self->partition = partition;
    self->produced_bytes = 0;
    return 0;
}

static PyMemberDef sticky_info_members[] = {
    {"partition", T_LONGLONG, offsetof(StickyInfoObject, partition), 0, "the sticky partition"},
    {"produced_bytes", T_LONGLONG, offsetof(StickyInfoObject, produced_bytes), 0,
     "the bytes produced to it since it was chosen"},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject StickyInfoType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kproducer._speedups.StickyPartitionInfo",
    .tp_basicsize = sizeof(StickyInfoObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "StickyPartitionInfo(partition): the sticky partition and the bytes produced to it (KIP-794).",
    .tp_members = sticky_info_members,
    .tp_init = (initproc)sticky_info_init,
    .tp_new = PyType_GenericNew,
};

/* Counts `appended` bytes when the total stays below `limit`: 1. Else 0, nothing counted (the
   partitioner's own update_partition_info decides the switch). */
static inline int sticky_info_count(StickyInfoObject *info, int64_t appended, int64_t limit) {
    if (info->produced_bytes + appended >= limit) return 0;
    info->produced_bytes += appended;
    return 1;
}

typedef struct {
    PyObject_HEAD
    PyObject *lock;    /* _lock */
    PyObject *sticky;  /* _sticky: a StickyPartitionInfo, or None before the first choice */
} PartitionerCoreObject;

#define PARTITIONER_CORE_FIELDS(X) X(lock) X(sticky)
FIELDS_GC_FUNCTIONS(partitioner_core, PartitionerCoreObject, PARTITIONER_CORE_FIELDS)

static PyMemberDef partitioner_core_members[] = {
    FIELD_MEMBER(PartitionerCoreObject, lock, "_lock", "taken to count bytes and to switch"),
    FIELD_MEMBER(PartitionerCoreObject, sticky, "_sticky", "the current StickyPartitionInfo, or None"),
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject PartitionerCoreType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kproducer._speedups.BuiltInPartitionerCore",
    .tp_basicsize = sizeof(PartitionerCoreObject),
    .tp_dealloc = (destructor)partitioner_core_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "The fields of a BuiltInPartitioner the send lane counts through (set by the Python class).",
    .tp_traverse = (traverseproc)partitioner_core_traverse,
    .tp_clear = (inquiry)partitioner_core_clear,
    .tp_members = partitioner_core_members,
    .tp_new = PyType_GenericNew,
};

/* The current StickyPartitionInfo (borrowed) and its partition, read without the lock as
   BuiltInPartitioner.peek_current_partition reads it; NULL when there is none or it is not the C type. */
static inline PyObject *partitioner_sticky(PartitionerCoreObject *p, int64_t *partition) {
    PyObject *s = p->sticky;
    if (s == NULL || !Py_IS_TYPE(s, &StickyInfoType)) return NULL;
    *partition = ((StickyInfoObject *)s)->partition;
    return s;
}

/* BuiltInPartitioner.update_partition_info when no switch is due: under the partitioner's lock,
   counts `appended` bytes to `sticky` if it is still the current one and the total stays below
   `limit`. 1 counted; 0 not (the Python method then decides); -1 with an exception. */
static int partitioner_count_sticky_bytes(PartitionerCoreObject *p, PyObject *sticky, int64_t appended,
                                          int64_t limit) {
    PyObject *lock = p->lock;
    if (lock == NULL) return 0;
    Py_INCREF(lock);
    if (lock_acquire(lock) < 0) { Py_DECREF(lock); return -1; }
    int counted = p->sticky == sticky && sticky_info_count((StickyInfoObject *)sticky, appended, limit);
    int rc = lock_release(lock) < 0 ? -1 : counted;
    Py_DECREF(lock);
    return rc;
}

typedef struct {
    PyObject_HEAD
    PyObject *lock;
    PyObject *batches;
} DequeCoreObject;

#define DEQUE_CORE_FIELDS(X) X(lock) X(batches)
FIELDS_GC_FUNCTIONS(deque_core, DequeCoreObject, DEQUE_CORE_FIELDS)

static PyMemberDef deque_core_members[] = {
    FIELD_MEMBER(DequeCoreObject, lock, "lock", "taken by appends and drains"),
    FIELD_MEMBER(DequeCoreObject, batches, "batches", "the partition's batches, oldest first"),
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject DequeCoreType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kproducer._speedups.PartitionDequeCore",
    .tp_basicsize = sizeof(DequeCoreObject),
    .tp_dealloc = (destructor)deque_core_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "The fields of a PartitionDeque the send lane appends through (set by the Python class).",
    .tp_traverse = (traverseproc)deque_core_traverse,
    .tp_clear = (inquiry)deque_core_clear,
    .tp_members = deque_core_members,
    .tp_new = PyType_GenericNew,
};

/* The deque's lock and batches, new references; 0 when either is unset. */
static inline int partition_deque_parts(DequeCoreObject *dq, PyObject **lock, PyObject **batches) {
    if (dq->lock == NULL || dq->batches == NULL) return 0;
    *lock = Py_NewRef(dq->lock);
    *batches = Py_NewRef(dq->batches);
    return 1;
}

/* Whether `sticky` is still the partitioner's current StickyPartitionInfo (another thread may have
   switched it since it was read). */
static inline int partitioner_sticky_is(PartitionerCoreObject *p, PyObject *sticky) { return p->sticky == sticky; }

#define LANE_SLOW 1  /* not taken: hand to the Python send() */

/* The keyed partition rules the lane computes (kproducer.librdkafka_partitioners names them). */
#define LANE_KEY_MURMUR2 0  /* Java's, and librdkafka's murmur2/murmur2_random */
#define LANE_KEY_CRC32 1    /* librdkafka's consistent/consistent_random */
#define LANE_KEY_FNV1A 2    /* librdkafka's fnv1a/fnv1a_random */

static inline Py_ssize_t lane_key_partition(int rule, const uint8_t *k, Py_ssize_t klen, Py_ssize_t n) {
    uint32_t h;
    switch (rule) {
    case LANE_KEY_CRC32: h = (uint32_t)crc32(0L, k != NULL ? k : (const uint8_t *)"", (uInt)klen); break;
    case LANE_KEY_FNV1A: h = fnv1a_raw(k, klen); break;
    default: h = (uint32_t)murmur2_raw(k, klen) & 0x7fffffffu;
    }
    return (Py_ssize_t)(h % (uint64_t)n);
}

static int lane_try_topic(SendLane *self, LaneTopic *t, PyObject *topic, PyObject *key, PyObject *value,
                          const uint8_t *k, Py_ssize_t klen, const uint8_t *v, Py_ssize_t vlen, PyObject *callback,
                          PyObject **out);
static int lane_append_locked(SendLane *self, LaneTopic *t, PyObject *dq, PyObject *lock, PyObject *batches,
                              PyObject *sticky, PyObject *topic, PyObject *pkey, PyObject *key, PyObject *value,
                              Py_ssize_t partition, int keyed, const uint8_t *k, Py_ssize_t klen, const uint8_t *v,
                              Py_ssize_t vlen, PyObject *callback, int64_t now, int64_t timestamp, PyObject **out);

/* The fast path proper: 0 with *out set, LANE_SLOW, or -1 with an exception. */
static int lane_try(SendLane *self, PyObject *topic, PyObject *value, PyObject *key, PyObject *callback,
                    PyObject **out) {
    const uint8_t *k = NULL, *v = NULL;
    Py_ssize_t klen = -1, vlen = -1;
    if (key != Py_None) {
        if (!PyBytes_CheckExact(key)) return LANE_SLOW;
        k = (const uint8_t *)PyBytes_AS_STRING(key);
        klen = PyBytes_GET_SIZE(key);
    }
    if (value != Py_None) {
        if (!PyBytes_CheckExact(value)) return LANE_SLOW;
        v = (const uint8_t *)PyBytes_AS_STRING(value);
        vlen = PyBytes_GET_SIZE(value);
    }
    /* An upper bound of the batch this record needs (Java's estimateSizeInBytesUpperBound, no headers):
       near the limits the Python path decides, and fails the record with RecordTooLargeError. */
    if ((klen > 0 ? klen : 0) + (vlen > 0 ? vlen : 0) + 100 > self->max_record_size) return LANE_SLOW;
    PyObject *entry = PyDict_GetItemWithError(self->topics, topic);
    if (entry == NULL) return PyErr_Occurred() ? -1 : LANE_SLOW;
    /* Owned for the call: waiting for the deque lock lets other threads run, and one of them
       may register the topic again (replacing this entry). */
    Py_INCREF(entry);
    int rc = lane_try_topic(self, (LaneTopic *)entry, topic, key, value, k, klen, v, vlen, callback, out);
    Py_DECREF(entry);
    return rc;
}

static int lane_try_topic(SendLane *self, LaneTopic *t, PyObject *topic, PyObject *key, PyObject *value,
                          const uint8_t *k, Py_ssize_t klen, const uint8_t *v, Py_ssize_t vlen, PyObject *callback,
                          PyObject **out) {
    int has_key = key != Py_None;
    PyObject *cluster = PyObject_GetAttr(self->metadata, self->cluster_attr);
    if (cluster == NULL) return -1;
    Py_DECREF(cluster);  /* identity only; metadata keeps it alive */
    if (cluster != self->current_cluster) return LANE_SLOW;

    /* Read before the lock, as the Python path reads them before it appends. */
    int64_t now, timestamp;
    if (lane_clock(self->clock, CLOCK_MONOTONIC, &now) < 0 || lane_clock(self->wall_clock, CLOCK_REALTIME, &timestamp) < 0)
        return -1;
    if (now - t->last_touch_ms >= 1000) {
        /* Idle eviction (KIP-526) needs to know the topic is in use; a second's granularity is plenty. */
        PyObject *now_obj = PyLong_FromLongLong(now);
        if (now_obj == NULL) return -1;
        PyObject *args[3] = {self->metadata, topic, now_obj};
        PyObject *r = PyObject_VectorcallMethod(s_touch, args, 3 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
        Py_DECREF(now_obj);
        if (r == NULL) return -1;
        Py_DECREF(r);
        t->last_touch_ms = now;
    }

    Py_ssize_t partition;
    PyObject *sticky = NULL;
    int keyed = has_key && !self->ignore_keys && !(self->empty_key_keyless && klen == 0);
    if (keyed) {
        partition = lane_key_partition(self->key_hash, k, klen, t->num_partitions);
    } else {
        if (!Py_IS_TYPE(t->partitioner, self->partitioner_type)) return LANE_SLOW;
        int64_t p;
        sticky = partitioner_sticky((PartitionerCoreObject *)t->partitioner, &p);
        if (sticky == NULL || p < 0 || p >= t->num_partitions) return LANE_SLOW;
        partition = (Py_ssize_t)p;
    }
    PyObject *pkey = PyLong_FromSsize_t(partition);
    if (pkey == NULL) return -1;
    if (self->breaker != Py_None) {
        /* KIP-693: a partition the circuit breaker mutes (or probes) is Python's to handle (the
           sticky partition moves off it, a keyed record is rerouted). Nothing muted: no cost. */
        PyObject *muted = PyObject_GetAttr(self->breaker, s_muted);
        if (muted == NULL) { Py_DECREF(pkey); return -1; }
        int hit = 0;
        if (PyAnySet_Check(muted) && PySet_GET_SIZE(muted) > 0) {
            PyObject *tp = PyTuple_Pack(2, topic, pkey);
            hit = tp == NULL ? -1 : PySet_Contains(muted, tp);
            Py_XDECREF(tp);
        } else if (!PyAnySet_Check(muted)) {
            hit = 1;  /* not the manager we know: let Python decide */
        }
        Py_DECREF(muted);
        if (hit != 0) { Py_DECREF(pkey); return hit < 0 ? -1 : LANE_SLOW; }
    }
    PyObject *dq = PyDict_GetItemWithError(t->deques, pkey);
    if (dq == NULL || !Py_IS_TYPE(dq, self->deque_type)) {
        Py_DECREF(pkey);
        return dq == NULL && PyErr_Occurred() ? -1 : LANE_SLOW;
    }
    PyObject *lock, *batches;
    if (!partition_deque_parts((DequeCoreObject *)dq, &lock, &batches)) { Py_DECREF(pkey); return LANE_SLOW; }
    Py_INCREF(dq);  /* owned for the call, as the lock and the batches are */
    /* Owned too: other threads may run before the append (a blocking acquire, a GC pass) and
       switch the sticky partition; the object must not be freed and its address reused. */
    Py_XINCREF(sticky);
    int rc = lane_append_locked(self, t, dq, lock, batches, sticky, topic, pkey, key, value, partition, keyed, k, klen,
                                v, vlen, callback, now, timestamp, out);
    Py_XDECREF(sticky);
    Py_DECREF(batches);
    Py_DECREF(lock);
    Py_DECREF(dq);
    Py_DECREF(pkey);
    return rc;
}

/* Appends under the deque's lock, taken for real as the Python path takes it (then the sticky
 * partitioner's, to count the bytes), or declines (owned references held by the caller). Python
 * code may run while the deque lock is held (a collection started by an allocation, the sticky
 * partition switch): it is the code the Python path runs under the same lock, none of it takes
 * a deque lock. */
static int lane_append_locked(SendLane *self, LaneTopic *t, PyObject *dq, PyObject *lock, PyObject *batches,
                              PyObject *sticky, PyObject *topic, PyObject *pkey, PyObject *key, PyObject *value,
                              Py_ssize_t partition, int keyed, const uint8_t *k, Py_ssize_t klen, const uint8_t *v,
                              Py_ssize_t vlen, PyObject *callback, int64_t now, int64_t timestamp, PyObject **out) {
    int rc = LANE_SLOW;
    int opened = 0;  /* the record opened a new batch (RecordAccumulator.open_new_batch) */
    int taken = 0;  /* the deque lock acquired (and to be released) */
    PyObject *future = NULL, *batch = NULL;
    int full = 0, full_after = 0, switch_needed = 0;
    Py_ssize_t nb = 0;  /* the deque's batches */
    Py_ssize_t appended = 0;

    /* GC-tracked allocations first: a collection may run Python code (finalizers). */
    future = frm_alloc_untracked(self->future_type);
    if (future == NULL) return -1;
    /* Only a callback needs the batch to hold the future (as the Python path does); the batch's
       flat thunks list takes the callback and the future themselves, with no pair object. */

    if (lock_acquire(lock) < 0) { rc = -1; goto out; }
    taken = 1;
    /* Other threads may have run since the partition was chosen (a wait for the lock, or a GC
       pass in the allocations above): if the sticky partition moved on, start over in Python. */
    if (!keyed && !partitioner_sticky_is((PartitionerCoreObject *)t->partitioner, sticky)) goto out;

    /* ---- under the partition deque's lock ---- */
    {
        PyObject *closed = PyObject_GetAttr(self->accumulator, s_closed);
        if (closed == NULL) { rc = -1; goto out; }
        int is_closed = closed != Py_False && (closed == Py_True || PyObject_IsTrue(closed));
        Py_DECREF(closed);
        if (is_closed) goto out;  /* the Python path raises ProducerClosedError */
        nb = PyObject_Length(batches);
        if (nb < 0) { rc = -1; goto out; }
        if (nb > 0) {
            batch = PySequence_GetItem(batches, nb - 1);
            if (batch == NULL) { rc = -1; goto out; }
            if (!Py_IS_TYPE(batch, self->batch_type)) goto out;
        }
        if (batch == NULL || ((BatchCoreObject *)batch)->writable != Py_True) {
            /* No open batch to append to: for a keyed record the accumulator's own step opens and
               queues one, under this lock and without waiting (None: the Python path decides, and
               waits for memory if it must), and the record goes into it below, as into any open
               batch. A keyless record's new batch also moves the sticky partition (KIP-794), and
               that is the Python path's. */
            if (!keyed) goto out;
            PyObject *now_obj = PyLong_FromLongLong(now);
            PyObject *res = NULL;  /* the new batch, or None */
            if (now_obj != NULL) {
                PyObject *args[7] = {self->accumulator, dq, topic, key, value, callback, now_obj};
                res = PyObject_VectorcallMethod(s_open_new_batch, args, 7 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
                Py_DECREF(now_obj);
            }
            if (res == NULL) { rc = -1; goto out; }
            if (res == Py_None) { Py_DECREF(res); goto out; }
            if (!Py_IS_TYPE(res, self->batch_type)) {
                Py_DECREF(res);
                PyErr_SetString(PyExc_TypeError, "RecordAccumulator.open_new_batch must return a ProducerBatch or None");
                rc = -1;
                goto out;
            }
            Py_XSETREF(batch, res);
            nb++;
            opened = 1;
        }
        Py_ssize_t before = 0, after = 0;
        int64_t write_limit = 0, ready_size = 0;
        int taken_by_batch = producer_batch_lane_append(
            (BatchCoreObject *)batch, self->builder_type, self->none_compression, now, timestamp, k, klen, v, vlen,
            keyed, future, callback == Py_None ? NULL : callback, &before, &after, &write_limit, &ready_size);
        if (taken_by_batch < 0) { rc = -1; goto out; }
        /* No room (or not an open v2 batch): the Python path decides. A batch just opened stays
           queued and open, and that path appends the record to it (as to a batch it did not open,
           so the Sender is woken below for the new one). */
        if (taken_by_batch == 0) goto out;
        appended = after - before;
        /* ProducerBatch.is_full(), before and after (the batch is writable and holds records): its
           estimated size reached the builder's write limit or the batch's ready size (KIP-782: it
           may keep growing past that until drained). "Full" is said once, on crossing, or a grown
           batch would wake the Sender and switch the sticky partition on every record. */
        int full_before = before >= write_limit || before >= ready_size;
        full_after = after >= write_limit || after >= ready_size;
        full = !full_before && full_after;
        rc = 0;
    }
    if (!keyed) {
        /* KIP-794: count the bytes to the sticky partition under the partitioner's lock (as
           BuiltInPartitioner.update_partition_info does); switching, and anything unexpected, is
           the partitioner's own method, called with the deque lock still held as in Python. */
        /* RecordAccumulator.append: a switch is enforced when the batch is full (just now, or more
           batches are queued) and so is the deque's last batch, this one. */
        int enforce = (nb > 1 || full) && full_after;
        /* No switch due (the partitioner's rule, Java's BuiltInPartitioner.updatePartitionInfo):
           below batch.size, or below twice it while a batch of the partition has room. */
        int counted = partitioner_count_sticky_bytes((PartitionerCoreObject *)t->partitioner, sticky, appended,
                                                     enforce ? self->sticky_batch_size : 2 * self->sticky_batch_size);
        if (counted < 0) { rc = -1; goto out; }
        switch_needed = !counted;
        if (switch_needed) {
            PyObject *p = PyLong_FromSsize_t(partition);
            PyObject *a = PyLong_FromSsize_t(appended);
            PyObject *r = NULL;
            /* With a circuit breaker the next sticky partition is chosen among the unmuted ones. */
            PyObject *view = self->breaker == Py_None
                ? (Py_INCREF(self->current_cluster), self->current_cluster)
                : PyObject_CallMethodOneArg(self->breaker, s_cluster_view, self->current_cluster);
            if (p && a && view) {
                PyObject *args[5] = {t->partitioner, p, a, view, enforce ? Py_True : Py_False};
                r = PyObject_VectorcallMethod(s_update_partition_info, args, 5 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
            }
            Py_XDECREF(view);
            Py_XDECREF(p);
            Py_XDECREF(a);
            if (r == NULL) { rc = -1; goto out; }
            Py_DECREF(r);
        }
    }
out:
    if (taken && lock_release(lock) < 0 && rc != -1) rc = -1;
    Py_XDECREF(batch);
    if (rc != 0) {
        Py_DECREF(future);
        if (rc == LANE_SLOW && opened) {
            /* A batch opened here and left to the Python path (its record declined, which a new
               batch's record never is as the types stand): tell the Sender of it, as any new
               batch does, rather than leave it to the Sender's next loop. */
            PyObject *r = PyObject_CallNoArgs(self->wakeup);
            if (r == NULL) return -1;
            Py_DECREF(r);
        }
        return rc;
    }
    if (nb > 1 || full || (opened && self->wake_for_new_batch == NULL)) {
        /* A batch is sendable (this one just filled, or an older one): wake the Sender, as the
           Python path does. */
        PyObject *r = PyObject_CallNoArgs(self->wakeup);
        if (r == NULL) { Py_DECREF(future); return -1; }
        Py_DECREF(r);
    } else if (opened) {
        /* A new batch alone in its deque: the Sender needs waking only if it would look later than
           the batch becomes sendable (RecordRouter.wake_for_new_batch, as the Python path). */
        PyObject *now_obj = PyLong_FromLongLong(now);
        PyObject *r = now_obj != NULL ? PyObject_CallOneArg(self->wake_for_new_batch, now_obj) : NULL;
        Py_XDECREF(now_obj);
        if (r == NULL) { Py_DECREF(future); return -1; }
        Py_DECREF(r);
    }
    self->fast_calls++;
    *out = future;
    return 0;
}

/* A callback's shape is checked in Python once per distinct callable in a row (kept in `checked`). */
static int lane_check_callback(SendLane *self, PyObject *fn, const char *keyword) {
    if (fn == self->checked || (PyObject *)Py_TYPE(fn) == self->checked_type) return 0;
    PyObject *kw = PyUnicode_FromString(keyword);
    if (kw == NULL) return -1;
    PyObject *r = PyObject_CallFunctionObjArgs(self->check_callback, fn, kw, NULL);
    Py_DECREF(kw);
    if (r == NULL) return -1;
    if (r == Py_True) {
        Py_INCREF(Py_TYPE(fn));
        Py_XSETREF(self->checked_type, (PyObject *)Py_TYPE(fn));
    }
    Py_DECREF(r);
    Py_INCREF(fn);
    Py_XSETREF(self->checked, fn);
    return 0;
}

/* Whether the keyword name `name` (a str) spells the ASCII string `s`. The public comparison: CPython's
   faster private twin moved to an internal header in 3.13. Names differ at their first letters here. */
static inline int kw_is(PyObject *name, const char *s) {
    return PyUnicode_CompareWithASCIIString(name, s) == 0;
}

/* The longest a send() lets go of the GIL for a Sender thread that wants it, in nanoseconds. */
#define GIL_HAND_OVER_NS 500000
/* The least time between two hand-overs by one lane, in nanoseconds. Every hand-over buys the Sender
   a loop, whose cost the caller waits for; a send() loop handing over at every chance (the Sender
   wants the GIL back every few hundred microseconds while batches fill fast) spent most of its time
   in Sender loops that each carried a batch or two. A millisecond keeps the Sender's wait for the GIL
   a fifth of the switch interval, and the batches a caller fills in between go out together. */
#define GIL_HAND_OVER_INTERVAL_NS 1000000
/* A caller that called send() more often than once per GIL_HAND_OVER_TIGHT_LOOP_NS over the last
   GIL_HAND_OVER_RATE_WINDOW_NS does little else between sends: its own throughput is what a
   hand-over costs, and the batches it fills meanwhile are what makes the Sender's next loop worth
   its cost. It hands the GIL over only once GIL_HAND_OVER_TIGHT_LOOP_INTERVAL_NS have passed
   (CPython's default switch interval: as long as the Sender would wait for any thread busy in
   Python). A caller with work of its own between sends (a CPU-bound application, the case the
   hand-over is for) calls send() less often and keeps the one-millisecond interval; the window is
   long enough that its burst of sends after a pause (a garbage collection) does not count as a
   tight loop. */
#define GIL_HAND_OVER_TIGHT_LOOP_NS 5000
#define GIL_HAND_OVER_RATE_WINDOW_NS 20000000
#define GIL_HAND_OVER_TIGHT_LOOP_INTERVAL_NS 5000000

/* A Sender thread is back from waiting for its sockets (kproducer.network._sockio.wait_ready) and
 * waits for the GIL, which this caller holds. A caller busy in Python would keep it until its switch
 * interval (5 ms) ran out, and every response and every linger expiry would wait that long to be
 * handled; so the caller lets go of the GIL until the count says that thread has it (or a bounded
 * while has passed: the next send() looks again), then takes it back, waiting its turn; at most once
 * per GIL_HAND_OVER_INTERVAL_NS, or GIL_HAND_OVER_TIGHT_LOOP_INTERVAL_NS in a tight send() loop (until
 * then the Sender waits, as for any thread holding the GIL). Only the thread holding the GIL reads or
 * writes the lane's hand-over fields. This is a
 * hand-over at a point where the lane holds no lock and has read nothing yet, not a lock elided:
 * CPython's GIL stays what decides who runs. A free-threaded build has no GIL to hand over. */
static void lane_hand_over_gil(SendLane *self) {
#ifndef Py_GIL_DISABLED
    int *wanted = self->gil_wanted;
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    int64_t start_ns = start.tv_sec * 1000000000LL + start.tv_nsec;
    if (start_ns < self->hand_over_after_ns) return;
    int64_t window = start_ns - self->rate_window_ns;
    if (window >= GIL_HAND_OVER_RATE_WINDOW_NS) {
        self->tight_loop = self->calls_in_window * GIL_HAND_OVER_TIGHT_LOOP_NS < window ? 0 : 1;
        self->rate_window_ns = start_ns;
        self->calls_in_window = 0;
    }
    if (self->tight_loop && start_ns - self->last_hand_over_ns < GIL_HAND_OVER_TIGHT_LOOP_INTERVAL_NS)
        return;  /* a tight send() loop: see GIL_HAND_OVER_TIGHT_LOOP_NS */
    self->hand_over_after_ns = start_ns + GIL_HAND_OVER_INTERVAL_NS;
    self->last_hand_over_ns = start_ns;
    Py_BEGIN_ALLOW_THREADS
    while (__atomic_load_n(wanted, __ATOMIC_SEQ_CST) > 0) {
        sched_yield();
        clock_gettime(CLOCK_MONOTONIC, &now);
        if ((now.tv_sec - start.tv_sec) * 1000000000LL + (now.tv_nsec - start.tv_nsec) > GIL_HAND_OVER_NS) break;
    }
    Py_END_ALLOW_THREADS
#endif
}

static PyObject *lane_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    SendLane *self = (SendLane *)callable;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    self->calls_in_window++;
    if (self->gil_wanted != NULL && __atomic_load_n(self->gil_wanted, __ATOMIC_RELAXED) > 0)
        lane_hand_over_gil(self);
    if (!self->enabled || nargs < 1 || nargs > 3 || !PyUnicode_CheckExact(args[0])) goto slow;
    if (self->gate != NULL) {
        /* One dict look-up: a traced send is Python's (kproducer.tracing). */
        PyObject *g = PyDict_GetItemWithError(self->gate, self->gate_key);
        if (g == NULL && PyErr_Occurred()) return NULL;
        if (g != NULL && g != Py_None) goto slow;
    }
    PyObject *value = nargs > 1 ? args[1] : Py_None;
    PyObject *key = nargs > 2 ? args[2] : Py_None;
    PyObject *callback = Py_None, *on_delivery = Py_None;
    if (kwnames != NULL) {
        Py_ssize_t nk = PyTuple_GET_SIZE(kwnames);
        for (Py_ssize_t i = 0; i < nk; i++) {
            PyObject *name = PyTuple_GET_ITEM(kwnames, i);
            PyObject *arg = args[nargs + i];
            if (kw_is(name, "value") && nargs < 2) value = arg;
            else if (kw_is(name, "key") && nargs < 3) key = arg;
            else if (kw_is(name, "callback")) callback = arg;
            else if (kw_is(name, "on_delivery")) on_delivery = arg;
            /* block=False (Producer.send's: never wait for buffer.memory) is the lane's way anyway: it
               never allocates, it declines and the Python path it calls gets the same keywords. */
            else if (kw_is(name, "block")) continue;
            else if (arg == Py_None && (kw_is(name, "partition") ||
                                        kw_is(name, "timestamp") ||
                                        kw_is(name, "headers"))) continue;
            else goto slow;
        }
    }
    {
        PyObject *report = NULL;  /* on_delivery's (err, msg) adapter: what the batch calls back */
        if (on_delivery != Py_None) {
            if (callback != Py_None) goto slow;  /* both: the Python path explains the error */
            if (lane_check_callback(self, on_delivery, "on_delivery") < 0) return NULL;
            report = PyObject_CallFunctionObjArgs(self->report_type, on_delivery, args[0], key, value, NULL);
            if (report == NULL) return NULL;
            callback = report;
        } else if (callback != Py_None && lane_check_callback(self, callback, "callback") < 0) {
            return NULL;
        }
        PyObject *out = NULL;
        int rc = lane_try(self, args[0], value, key, callback, &out);
        Py_XDECREF(report);
        if (rc == 0) return out;
        if (rc < 0) return NULL;
    }
slow:
    return PyObject_Vectorcall(self->slow, args, nargsf, kwnames);
}

static PyObject *lane_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"slow", "metadata", "cluster_attr", "accumulator", "wakeup", "none_compression",
                             "batch_type", "builder_type", "future_type", "deque_type", "sticky_type",
                             "partitioner_type", "max_record_size", "sticky_batch_size", "ignore_keys", "check_callback",
                             "report_type", "breaker", "gate", "gate_key", "key_hash", "empty_key_keyless", "clock",
                             "wall_clock", "gil_wanted", "wake_for_new_batch", NULL};
    PyObject *slow, *metadata, *cluster_attr, *accumulator, *wakeup, *none_compression, *breaker = Py_None;
    PyObject *gate = Py_None, *gate_key = Py_None, *clock = Py_None, *wall_clock = Py_None, *gil_wanted = Py_None;
    PyObject *wake_for_new_batch = Py_None;
    PyObject *check_callback, *report_type;
    PyTypeObject *bt, *bu, *ft, *dt, *st, *pt;
    Py_ssize_t max_record_size, sticky_batch_size;
    int ignore_keys, key_hash = LANE_KEY_MURMUR2, empty_key_keyless = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOUOOOO!O!O!O!O!O!nnpOO|OOOipOOOO", kwlist, &slow, &metadata,
                                     &cluster_attr, &accumulator, &wakeup, &none_compression, &PyType_Type, &bt,
                                     &PyType_Type, &bu, &PyType_Type, &ft, &PyType_Type, &dt,
                                     &PyType_Type, &st, &PyType_Type, &pt, &max_record_size, &sticky_batch_size,
                                     &ignore_keys, &check_callback, &report_type, &breaker, &gate, &gate_key,
                                     &key_hash, &empty_key_keyless, &clock, &wall_clock, &gil_wanted,
                                     &wake_for_new_batch))
        return NULL;
    int *gil_wanted_counter = NULL;
    if (gil_wanted != Py_None) {
        gil_wanted_counter = (int *)PyCapsule_GetPointer(gil_wanted, "kproducer.network._sockio.GIL_WANTED");
        if (gil_wanted_counter == NULL) return NULL;  /* not that capsule: PyCapsule_GetPointer said why */
    }
    if (gate != Py_None && (!PyDict_Check(gate) || !PyUnicode_Check(gate_key))) {
        PyErr_SetString(PyExc_TypeError, "gate must be a dict and gate_key a str (or gate None)");
        return NULL;
    }
    if (wake_for_new_batch != Py_None && !PyCallable_Check(wake_for_new_batch)) {
        PyErr_SetString(PyExc_TypeError, "wake_for_new_batch must be a callable taking the time in milliseconds, or None");
        return NULL;
    }
    if ((clock != Py_None && !PyCallable_Check(clock)) || (wall_clock != Py_None && !PyCallable_Check(wall_clock))) {
        PyErr_SetString(PyExc_TypeError, "clock and wall_clock must be callables returning milliseconds, or None");
        return NULL;
    }
    if (key_hash < LANE_KEY_MURMUR2 || key_hash > LANE_KEY_FNV1A) {
        PyErr_Format(PyExc_ValueError, "key_hash must be 0 (murmur2), 1 (crc32) or 2 (fnv1a), got %d", key_hash);
        return NULL;
    }
    SendLane *self = (SendLane *)type->tp_alloc(type, 0);
    if (self == NULL) return NULL;
    self->vectorcall = lane_vectorcall;
    Py_INCREF(slow); self->slow = slow;
    Py_INCREF(metadata); self->metadata = metadata;
    Py_INCREF(accumulator); self->accumulator = accumulator;
    Py_INCREF(wakeup); self->wakeup = wakeup;
    self->wake_for_new_batch = wake_for_new_batch != Py_None ? Py_NewRef(wake_for_new_batch) : NULL;
    Py_INCREF(breaker); self->breaker = breaker;
    Py_INCREF(none_compression); self->none_compression = none_compression;
    Py_INCREF(cluster_attr); self->cluster_attr = cluster_attr;
    Py_INCREF(check_callback); self->check_callback = check_callback;
    Py_INCREF(report_type); self->report_type = report_type;
    self->checked = NULL;
    self->checked_type = NULL;
    self->clock = clock != Py_None ? Py_NewRef(clock) : NULL;
    self->wall_clock = wall_clock != Py_None ? Py_NewRef(wall_clock) : NULL;
    self->gil_wanted_capsule = gil_wanted != Py_None ? Py_NewRef(gil_wanted) : NULL;
    self->gil_wanted = gil_wanted_counter;
    self->hand_over_after_ns = 0;
    self->last_hand_over_ns = 0;
    self->rate_window_ns = 0;
    self->calls_in_window = 0;
    self->tight_loop = 0;
    if (gate != Py_None) {
        Py_INCREF(gate); self->gate = gate;
        Py_INCREF(gate_key); self->gate_key = gate_key;
    }
    Py_INCREF(bt); self->batch_type = bt;
    Py_INCREF(bu); self->builder_type = bu;
    Py_INCREF(ft); self->future_type = ft;
    Py_INCREF(dt); self->deque_type = dt;
    Py_INCREF(pt); self->partitioner_type = pt;
    self->topics = PyDict_New();
    self->max_record_size = max_record_size;
    self->sticky_batch_size = sticky_batch_size;
    self->ignore_keys = ignore_keys;
    self->key_hash = key_hash;
    self->empty_key_keyless = empty_key_keyless;
    self->enabled = 1;
    if (self->topics == NULL) {
        Py_DECREF(self);
        return NULL;
    }
    /* The lane reaches each object only through the functions of the C type that owns its fields. */
    if (!PyType_IsSubtype(ft, &FutureRecordMetadataType) || !PyType_IsSubtype(bt, &BatchCoreType) ||
        !PyType_IsSubtype(bu, &BuilderCoreType) || !PyType_IsSubtype(dt, &DequeCoreType) ||
        !PyType_IsSubtype(pt, &PartitionerCoreType) || st != &StickyInfoType || ft->tp_itemsize != 0 ||
        bt->tp_itemsize != 0) {
        PyErr_SetString(PyExc_TypeError,
                        "future_type, batch_type, builder_type, deque_type and partitioner_type must be fixed-size "
                        "subclasses of FutureRecordMetadata, ProducerBatchCore, MemoryRecordsBuilderCore, "
                        "PartitionDequeCore and BuiltInPartitionerCore, and sticky_type StickyPartitionInfo");
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

static PyObject *lane_register(SendLane *self, PyObject *args) {
    PyObject *topic, *cluster, *deques, *partitioner;
    Py_ssize_t num_partitions;
    if (!PyArg_ParseTuple(args, "UOnO!O:register", &topic, &cluster, &num_partitions, &PyDict_Type, &deques,
                          &partitioner))
        return NULL;
    if (num_partitions < 1) {
        PyErr_Format(PyExc_ValueError, "num_partitions must be >= 1, got %zd", num_partitions);
        return NULL;
    }
    if (cluster != self->current_cluster) {
        /* New metadata: every topic registers again on its next Python send (so topics that left
           the metadata leave the lane too, and only one snapshot is kept alive). */
        PyDict_Clear(self->topics);
        Py_INCREF(cluster);
        Py_XSETREF(self->current_cluster, cluster);
    }
    LaneTopic *t = PyObject_New(LaneTopic, &LaneTopicType);
    if (t == NULL) return NULL;
    Py_INCREF(deques); t->deques = deques;
    Py_INCREF(partitioner); t->partitioner = partitioner;
    t->num_partitions = num_partitions;
    if (lane_clock(self->clock, CLOCK_MONOTONIC, &t->last_touch_ms) < 0) { Py_DECREF(t); return NULL; }
    int rc = PyDict_SetItem(self->topics, topic, (PyObject *)t);
    Py_DECREF(t);
    if (rc < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *lane_forget(SendLane *self, PyObject *topic) {
    if (PyDict_DelItem(self->topics, topic) < 0) {
        if (!PyErr_ExceptionMatches(PyExc_KeyError)) return NULL;
        PyErr_Clear();
    }
    Py_RETURN_NONE;
}

static PyObject *lane_is_registered(SendLane *self, PyObject *topic) {
    int r = PyDict_Contains(self->topics, topic);
    if (r < 0) return NULL;
    return PyBool_FromLong(r);
}

static PyObject *lane_get_enabled(SendLane *self, void *c) { return PyBool_FromLong(self->enabled); }
static int lane_set_enabled(SendLane *self, PyObject *v, void *c) {
    if (v == NULL) { PyErr_SetString(PyExc_AttributeError, "cannot delete enabled"); return -1; }
    int r = PyObject_IsTrue(v);
    if (r < 0) return -1;
    self->enabled = r;
    return 0;
}
static PyObject *lane_get_fast_calls(SendLane *self, void *c) { return PyLong_FromSsize_t(self->fast_calls); }
static PyObject *lane_get_gate(SendLane *self, void *c) { return Py_NewRef(self->gate != NULL ? self->gate : Py_None); }
/* None: the lane stops consulting the gate (the tracer provider set makes no spans, and the
   API keeps its provider for the process's life). A dict: consult it, under the same key. */
static int lane_set_gate(SendLane *self, PyObject *v, void *c) {
    if (v == NULL) { PyErr_SetString(PyExc_AttributeError, "cannot delete gate"); return -1; }
    if (v == Py_None) { Py_CLEAR(self->gate); return 0; }
    if (!PyDict_Check(v) || self->gate_key == NULL) {
        PyErr_SetString(PyExc_TypeError, "gate must be None, or a dict for a lane made with a gate_key");
        return -1;
    }
    Py_XSETREF(self->gate, Py_NewRef(v));
    return 0;
}

static PyMethodDef lane_methods[] = {
    {"register", (PyCFunction)lane_register, METH_VARARGS,
     "register(topic, cluster, num_partitions, deques, partitioner): let the lane take sends to topic "
     "while metadata holds this cluster snapshot."},
    {"forget", (PyCFunction)lane_forget, METH_O, "forget(topic): sends to topic take the Python path again."},
    {"is_registered", (PyCFunction)lane_is_registered, METH_O, "Whether the lane knows topic."},
    {NULL, NULL, 0, NULL},
};

/* The lane stands in for the bound Producer.send on the instance, so it answers introspection as that
 * method does: __wrapped__ (inspect.signature follows it), __doc__, __name__, __qualname__, and a
 * __get__ that makes pydoc's help() document it as a routine. */
static PyObject *lane_get_wrapped(SendLane *self, void *c) { return Py_NewRef(self->slow); }
static PyObject *lane_get_slow_attr(SendLane *self, void *name) {
    return PyObject_GetAttrString(self->slow, (const char *)name);
}
static PyObject *lane_descr_get(PyObject *self, PyObject *obj, PyObject *type) { return Py_NewRef(self); }

static PyGetSetDef lane_getset[] = {
    {"enabled", (getter)lane_get_enabled, (setter)lane_set_enabled, "False: every call takes the Python path.", NULL},
    {"fast_calls", (getter)lane_get_fast_calls, NULL, "How many sends the lane took.", NULL},
    {"gate", (getter)lane_get_gate, (setter)lane_set_gate,
     "The dict whose gate_key entry, when not None, sends every call the Python way; None: no gate.", NULL},
    {"__wrapped__", (getter)lane_get_wrapped, NULL, "The Python Producer.send this lane speeds up.", NULL},
    {"__doc__", (getter)lane_get_slow_attr, NULL, NULL, "__doc__"},
    {"__name__", (getter)lane_get_slow_attr, NULL, NULL, "__name__"},
    {"__qualname__", (getter)lane_get_slow_attr, NULL, NULL, "__qualname__"},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject SendLaneType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kproducer._speedups.SendLane",
    .tp_basicsize = sizeof(SendLane),
    .tp_dealloc = (destructor)lane_dealloc,
    .tp_vectorcall_offset = offsetof(SendLane, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "Producer.send() for the common call shape, in C (see the comment in _speedups.c).",
    .tp_traverse = (traverseproc)lane_traverse,
    .tp_clear = (inquiry)lane_clear,
    .tp_methods = lane_methods,
    .tp_getset = lane_getset,
    .tp_descr_get = lane_descr_get,
    .tp_new = lane_new,
};

/* ---------------------------------------------------------------- RecordMetadata's fields
 *
 * The fields of kproducer.structs.RecordMetadata (Java's RecordMetadata: what a record's future
 * resolves to), which builds on this type; in the pure-Python pass it builds on the Python twin,
 * kproducer.structs.PyRecordMetadata, and tests/unit/test_record_metadata.py runs the same cases on
 * both. The constructor is the type's own: RecordMetadata(topic, partition, offset, timestamp,
 * serialized_key_size=-1, serialized_value_size=-1). The Python class adds what a frozen dataclass
 * has (repr, equality, hashing, assignment refused, dataclasses.fields/replace/asdict); like a frozen
 * dataclass's slots, the fields stay writable through object.__setattr__, which a dataclass
 * subclass's generated __init__ uses. */
typedef struct {
    PyObject_HEAD
    PyObject *topic, *partition, *offset, *timestamp, *serialized_key_size, *serialized_value_size;
} RecordMetadataObject;

#define RECORD_METADATA_FIELDS(X) \
    X(topic) X(partition) X(offset) X(timestamp) X(serialized_key_size) X(serialized_value_size)

FIELDS_GC_FUNCTIONS(record_metadata, RecordMetadataObject, RECORD_METADATA_FIELDS)

static PyTypeObject RecordMetadataType;

static int is_atomic(PyObject *o) { return PyLong_CheckExact(o) || PyUnicode_CheckExact(o); }

/* A new `type` (this type or a subclass adding no __init__, which both callers check) holding the
   given fields (borrowed; NULL: -1). Metadata of a str and ints refers to nothing that can refer
   back, so it is kept out of the cyclic GC, which would otherwise scan every delivered record's
   metadata (held by its future) in each full collection. */
static PyObject *record_metadata_make(PyTypeObject *type, PyObject *topic, PyObject *partition, PyObject *offset,
                                      PyObject *timestamp, PyObject *key_size, PyObject *value_size) {
    PyObject *minus_one = PyLong_FromLong(-1);
    if (minus_one == NULL) return NULL;
    RecordMetadataObject *self = (RecordMetadataObject *)type->tp_alloc(type, 0);
    if (self == NULL) { Py_DECREF(minus_one); return NULL; }
    self->topic = Py_NewRef(topic);
    self->partition = Py_NewRef(partition);
    self->offset = Py_NewRef(offset);
    self->timestamp = Py_NewRef(timestamp);
    self->serialized_key_size = Py_NewRef(key_size != NULL ? key_size : minus_one);
    self->serialized_value_size = Py_NewRef(value_size != NULL ? value_size : minus_one);
    Py_DECREF(minus_one);
    if (is_atomic(self->topic) && is_atomic(self->partition) && is_atomic(self->offset) &&
        is_atomic(self->timestamp) && is_atomic(self->serialized_key_size) &&
        is_atomic(self->serialized_value_size) && PyObject_GC_IsTracked((PyObject *)self))
        PyObject_GC_UnTrack(self);
    return (PyObject *)self;
}

static PyObject *record_metadata_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    /* As object.__new__ does: a class with an __init__ of its own (a dataclass subclass adding fields)
       takes its arguments there, and that __init__ sets these fields too (until then they are unset). */
    if (type->tp_init != PyBaseObject_Type.tp_init) return type->tp_alloc(type, 0);
    static char *kwlist[] = {
        "topic", "partition", "offset", "timestamp", "serialized_key_size", "serialized_value_size", NULL,
    };
    PyObject *topic, *partition, *offset, *timestamp, *key_size = NULL, *value_size = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOO|OO:RecordMetadata", kwlist, &topic, &partition, &offset,
                                     &timestamp, &key_size, &value_size))
        return NULL;
    return record_metadata_make(type, topic, partition, offset, timestamp, key_size, value_size);
}

static PyMemberDef record_metadata_members[] = {
    FIELD_MEMBER(RecordMetadataObject, topic, "topic", "the topic"),
    FIELD_MEMBER(RecordMetadataObject, partition, "partition", "the partition"),
    FIELD_MEMBER(RecordMetadataObject, offset, "offset", "the record's offset, or -1 (acks=0)"),
    FIELD_MEMBER(RecordMetadataObject, timestamp, "timestamp", "the create time, or the broker's log-append time"),
    FIELD_MEMBER(RecordMetadataObject, serialized_key_size, "serialized_key_size", "the key's size in bytes, or -1"),
    FIELD_MEMBER(RecordMetadataObject, serialized_value_size, "serialized_value_size",
                 "the value's size in bytes, or -1"),
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject RecordMetadataType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kproducer._speedups.RecordMetadata",
    .tp_basicsize = sizeof(RecordMetadataObject),
    .tp_dealloc = (destructor)record_metadata_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "RecordMetadata(topic, partition, offset, timestamp, serialized_key_size=-1, "
              "serialized_value_size=-1): the fields of kproducer.structs.RecordMetadata.",
    .tp_traverse = (traverseproc)record_metadata_traverse,
    .tp_clear = (inquiry)record_metadata_clear,
    .tp_members = record_metadata_members,
    .tp_new = record_metadata_new,
};


/* ---------------------------------------------------------------- asyncio completions
 * settle_group(group, metadata_type, topic, partition, base_offset, log_append_time) -> list of indices
 *
 * The loop side of kproducer.aio for one batch acknowledged as a whole: ``group`` is the flat list
 * [loop future, RecordFuture, ...] of the records sent into it without a callback. Each future not
 * done yet (a cancelled one is done) gets the RecordMetadata its RecordFuture would give, built from
 * the batch's base offset and log-append time, made by ``metadata_type`` as the Python reference
 * does (the class builds its own fields). Records that moved to another batch (``_next``
 * set) are left alone and their indices returned, for the Python path to follow. The Python reference
 * is kproducer.aio._settle_group_py; this does the same without a Python frame per record. */
static PyObject *s_done, *s_set_result;
#if PY_VERSION_HEX >= 0x030D0000
static int count_visited(PyObject *o, void *arg) {
    (void)o;
    ++*(int *)arg;
    return 0;
}
#endif

/* Whether `obj` has attributes of its own (an instance __dict__ or inline values), from public API
   alone: no dict slot means none; a slot at a fixed offset is read; a dict the interpreter manages
   (asyncio's C Future from 3.13, Python subclasses) is visited with PyObject_VisitManagedDict where
   that exists (3.13+) and otherwise counted as present, which only keeps the object GC-tracked. */
static int has_instance_dict(PyObject *obj) {
    PyTypeObject *tp = Py_TYPE(obj);
#ifdef Py_TPFLAGS_MANAGED_DICT
    if (tp->tp_flags & Py_TPFLAGS_MANAGED_DICT) {
#if PY_VERSION_HEX >= 0x030D0000
        int visited = 0;
        PyObject_VisitManagedDict(obj, count_visited, &visited);
        return visited > 0;
#else
        return 1;
#endif
    }
#endif
    if (tp->tp_dictoffset == 0) return 0;
    if (tp->tp_dictoffset < 0) return 1;
    return *(PyObject **)((char *)obj + tp->tp_dictoffset) != NULL;
}

static PyObject *py_settle_group(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 6 || !PyList_CheckExact(args[0]) || !PyType_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "settle_group(group, metadata_type, topic, partition, base_offset, log_append_time)");
        return NULL;
    }
    PyObject *group = args[0], *topic = args[2], *partition = args[3];
    PyTypeObject *md_type = (PyTypeObject *)args[1];
    long long base = PyLong_AsLongLong(args[4]);
    if (base == -1 && PyErr_Occurred()) return NULL;
    long long append_time = PyLong_AsLongLong(args[5]);
    if (append_time == -1 && PyErr_Occurred()) return NULL;
    /* A class built on RecordMetadataType that adds no __new__ or __init__ of its own is made by the
       type's constructor directly (what calling it would do, without an argument tuple per record). */
    int plain_md = PyType_IsSubtype(md_type, &RecordMetadataType) && md_type->tp_new == record_metadata_new &&
                   md_type->tp_init == PyBaseObject_Type.tp_init;
    PyObject *moved = PyList_New(0);
    if (moved == NULL) return NULL;
    Py_ssize_t n = PyList_GET_SIZE(group);
    for (Py_ssize_t i = 0; i + 1 < n; i += 2) {
        PyObject *fut = PyList_GET_ITEM(group, i);
        PyObject *rf = PyList_GET_ITEM(group, i + 1);
        PyObject *next;
        long long r_off, create_ts, key_size, value_size;
        if (frm_fields(rf, &next, &r_off, &create_ts, &key_size, &value_size) < 0) goto fail;
        PyObject *r = PyObject_CallMethodNoArgs(fut, s_done);
        if (r == NULL) goto fail;
        int done = PyObject_IsTrue(r);
        Py_DECREF(r);
        if (done < 0) goto fail;
        if (done) continue;  /* cancelled: the record was delivered, nobody waits for it */
        if (next != NULL && next != Py_None) {
            PyObject *idx = PyLong_FromSsize_t(i);
            if (idx == NULL || PyList_Append(moved, idx) < 0) { Py_XDECREF(idx); goto fail; }
            Py_DECREF(idx);
            continue;
        }
        PyObject *offset = PyLong_FromLongLong(base == -1 ? -1 : base + r_off);
        PyObject *timestamp = PyLong_FromLongLong(append_time == -1 ? create_ts : append_time);
        PyObject *ks = PyLong_FromLongLong(key_size);
        PyObject *vs = PyLong_FromLongLong(value_size);
        PyObject *md = NULL;
        if (offset && timestamp && ks && vs) {
            if (plain_md) {
                md = record_metadata_make(md_type, topic, partition, offset, timestamp, ks, vs);
            } else {
                PyObject *md_args[6] = {topic, partition, offset, timestamp, ks, vs};
                md = PyObject_Vectorcall((PyObject *)md_type, md_args, 6, NULL);
            }
        }
        Py_XDECREF(offset); Py_XDECREF(timestamp); Py_XDECREF(ks); Py_XDECREF(vs);
        if (md == NULL) goto fail;
        r = PyObject_CallMethodOneArg(fut, s_set_result, md);
        Py_DECREF(md);
        if (r == NULL) goto fail;
        Py_DECREF(r);
        /* A future settled with a result keeps only its loop and that metadata (set_result scheduled
           and dropped its callbacks; later ones are scheduled at once, never stored), so it cannot be
           part of a reference cycle unless its owner gives it attributes. Thousands of them are held
           until gathered: keeping them out of the cyclic GC spares every full collection a scan of
           each, which held the event loop for tens of milliseconds. */
        if (PyObject_GC_IsTracked(fut) && !has_instance_dict(fut)) PyObject_GC_UnTrack(fut);
    }
    return moved;
fail:
    Py_DECREF(moved);
    return NULL;
}

static PyMethodDef methods[] = {
    {"murmur2", py_murmur2, METH_O, "Kafka's murmur2 of a bytes-like object (signed 32-bit)."},
    {"largest_record", (PyCFunction)(void (*)(void))py_largest_record, METH_FASTCALL,
     "largest_record(buf, start, end) -> the size of the largest v2 record in buf[start:end] (0: none)."},
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
    {"settle_group", (PyCFunction)(void (*)(void))py_settle_group, METH_FASTCALL,
     "settle_group(group, metadata_type, topic, partition, base_offset, log_append_time) -> indices of moved"
     " records (see kproducer.aio._settle_group_py)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "kproducer._speedups", "kproducer's native hot path.", -1, methods,
};

PyMODINIT_FUNC PyInit__speedups(void) {
    if (PyType_Ready(&LaneTopicType) < 0 || PyType_Ready(&SendLaneType) < 0 || PyType_Ready(&LockType) < 0 ||
        PyType_Ready(&FutureRecordMetadataType) < 0 || PyType_Ready(&BuilderCoreType) < 0 ||
        PyType_Ready(&BatchCoreType) < 0 || PyType_Ready(&StickyInfoType) < 0 ||
        PyType_Ready(&PartitionerCoreType) < 0 || PyType_Ready(&DequeCoreType) < 0 ||
        PyType_Ready(&RecordMetadataType) < 0)
        return NULL;
    s_acquire = PyUnicode_InternFromString("acquire");
    s_release = PyUnicode_InternFromString("release");
    s_muted = PyUnicode_InternFromString("_muted");
    s_cluster_view = PyUnicode_InternFromString("cluster_view");
    s_touch = PyUnicode_InternFromString("touch");
    s_update_partition_info = PyUnicode_InternFromString("update_partition_info");
    s_closed = PyUnicode_InternFromString("closed");
    s_open_new_batch = PyUnicode_InternFromString("open_new_batch");
    s_done = PyUnicode_InternFromString("done");
    s_set_result = PyUnicode_InternFromString("set_result");
    if (!s_done || !s_set_result) return NULL;
    s_zero = PyLong_FromLong(0);
    PyObject *struct_module = PyImport_ImportModule("struct");
    if (struct_module == NULL || s_zero == NULL) return NULL;
    struct_error = PyObject_GetAttrString(struct_module, "error");
    Py_DECREF(struct_module);
    if (struct_error == NULL) return NULL;
    if (!s_acquire || !s_release || !s_muted || !s_cluster_view || !s_touch || !s_update_partition_info || !s_closed ||
        !s_open_new_batch) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    if (PyModule_AddType(m, &LockType) < 0 || PyModule_AddType(m, &FutureRecordMetadataType) < 0 ||
        PyModule_AddType(m, &BuilderCoreType) < 0 || PyModule_AddType(m, &BatchCoreType) < 0 ||
        PyModule_AddType(m, &StickyInfoType) < 0 || PyModule_AddType(m, &PartitionerCoreType) < 0 ||
        PyModule_AddType(m, &DequeCoreType) < 0 || PyModule_AddType(m, &RecordMetadataType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&SendLaneType);
    if (PyModule_AddObject(m, "SendLane", (PyObject *)&SendLaneType) < 0) {
        Py_DECREF(&SendLaneType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
