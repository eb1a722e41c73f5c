/* Native scanner for the records of a record batch v2 (uncompressed, or already inflated).
 *
 * scan(buf, start, count) -> tuple | None
 *
 * Walks `count` records from buf[start:] to the end of the buffer with the GIL released, following
 * Kafka's DefaultRecord.readFrom framing rules (length varint, attributes int8, timestampDelta varlong,
 * offsetDelta varint, keyLength varint + key, valueLength varint + value, header count varint, headers;
 * every record consumes exactly its length; exactly `count` records and no trailing bytes; 32-bit
 * varints at most 5 bytes, varlongs at most 10; zig-zag).
 *
 * Returns None when anything is malformed OR merely unusual (negative lengths other than -1, a 10th
 * varlong byte carrying bits beyond 64, a negative count): the caller then runs the exact Python parser
 * for Kafka's precise verdict. A tuple is returned only for batches the exact parser accepts:
 *
 *   (min_ts_delta, max_ts_delta, first_null_key_index (-1: none), offsets_are_0_to_n_minus_1,
 *    min_offset_delta, max_offset_delta)
 *
 * With count == 0 (and no bytes) the min/max values are 0.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

/* Reads a zig-zag 32-bit varint (at most 5 bytes) from p[*pos..end). 0 on success, -1 otherwise. */
static inline int
read_varint32(const uint8_t *p, int64_t *pos, int64_t end, int32_t *out)
{
    uint32_t v = 0;
    int64_t i = *pos;
    for (int n = 0; n < 5; n++) {
        if (i >= end)
            return -1;
        uint8_t b = p[i++];
        v |= (uint32_t)(b & 0x7F) << (7 * n); /* bits beyond 32 are dropped, as in Java */
        if (!(b & 0x80)) {
            int32_t r = (int32_t)(v >> 1); /* v >> 1 < 2^31: fits */
            if (v & 1)
                r = ~r;
            *out = r;
            *pos = i;
            return 0;
        }
    }
    return -1; /* 5th byte had its MSB set */
}

/* Reads a zig-zag 64-bit varlong (at most 10 bytes). A 10th byte with bits beyond bit 63 is refused
 * (unusual: left to the exact parser). 0 on success, -1 otherwise. */
static inline int
read_varint64(const uint8_t *p, int64_t *pos, int64_t end, int64_t *out)
{
    uint64_t v = 0;
    int64_t i = *pos;
    for (int n = 0; n < 10; n++) {
        if (i >= end)
            return -1;
        uint8_t b = p[i++];
        if (n == 9 && (b & 0x7E))
            return -1;
        v |= (uint64_t)(b & 0x7F) << (7 * n);
        if (!(b & 0x80)) {
            int64_t r = (int64_t)(v >> 1); /* v >> 1 < 2^63: fits */
            if (v & 1)
                r = ~r;
            *out = r;
            *pos = i;
            return 0;
        }
    }
    return -1;
}

/* Skips a length-prefixed field: len -1 is null (when allow_null), other negatives are refused. */
static inline int
skip_bytes(const uint8_t *p, int64_t *pos, int64_t end, int allow_null, int32_t *len_out)
{
    int32_t len;
    if (read_varint32(p, pos, end, &len) < 0)
        return -1;
    if (len < 0) {
        if (len == -1 && allow_null) {
            *len_out = -1;
            return 0;
        }
        return -1;
    }
    if ((int64_t)len > end - *pos)
        return -1;
    *pos += len;
    *len_out = len;
    return 0;
}

typedef struct {
    int64_t min_ts, max_ts;
    int64_t first_null_key;
    int sequential;
    int32_t min_off, max_off;
} summary_t;

/* 0: all records well-formed (summary filled); -1: malformed or unusual. */
static int
scan_records(const uint8_t *p, int64_t pos, int64_t end, int64_t count, summary_t *s)
{
    s->min_ts = s->max_ts = 0;
    s->first_null_key = -1;
    s->sequential = 1;
    s->min_off = s->max_off = 0;
    for (int64_t i = 0; i < count; i++) {
        int32_t size, off_delta, klen, vlen, nheaders, hk, hv;
        int64_t ts_delta;
        if (pos >= end)
            return -1;
        if (read_varint32(p, &pos, end, &size) < 0)
            return -1;
        if (size <= 0 || (int64_t)size > end - pos)
            return -1;
        int64_t rec_end = pos + size;
        pos += 1; /* attributes (size >= 1) */
        if (read_varint64(p, &pos, rec_end, &ts_delta) < 0)
            return -1;
        if (read_varint32(p, &pos, rec_end, &off_delta) < 0)
            return -1;
        if (skip_bytes(p, &pos, rec_end, 1, &klen) < 0)
            return -1;
        if (skip_bytes(p, &pos, rec_end, 1, &vlen) < 0)
            return -1;
        if (read_varint32(p, &pos, rec_end, &nheaders) < 0 || nheaders < 0)
            return -1;
        for (int32_t h = 0; h < nheaders; h++) {
            if (skip_bytes(p, &pos, rec_end, 0, &hk) < 0)
                return -1;
            if (skip_bytes(p, &pos, rec_end, 1, &hv) < 0)
                return -1;
        }
        if (pos != rec_end)
            return -1;
        if (i == 0) {
            s->min_ts = s->max_ts = ts_delta;
            s->min_off = s->max_off = off_delta;
        } else {
            if (ts_delta < s->min_ts) s->min_ts = ts_delta;
            if (ts_delta > s->max_ts) s->max_ts = ts_delta;
            if (off_delta < s->min_off) s->min_off = off_delta;
            if (off_delta > s->max_off) s->max_off = off_delta;
        }
        if ((int64_t)off_delta != i)
            s->sequential = 0;
        if (klen < 0 && s->first_null_key < 0)
            s->first_null_key = i;
    }
    return pos == end ? 0 : -1;
}

static PyObject *
recordscan_scan(PyObject *self, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t start;
    long long count;
    if (!PyArg_ParseTuple(args, "y*nL:scan", &view, &start, &count))
        return NULL;
    if (start < 0 || start > view.len) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "start is outside the buffer");
        return NULL;
    }
    if (count < 0) {
        PyBuffer_Release(&view);
        Py_RETURN_NONE;
    }
    summary_t s;
    int rc;
    const uint8_t *p = (const uint8_t *)view.buf;
    int64_t end = (int64_t)view.len;
    Py_BEGIN_ALLOW_THREADS
    rc = scan_records(p, (int64_t)start, end, (int64_t)count, &s);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    if (rc < 0)
        Py_RETURN_NONE;
    return Py_BuildValue("(LLLNll)", (long long)s.min_ts, (long long)s.max_ts, (long long)s.first_null_key,
                         PyBool_FromLong(s.sequential), (long)s.min_off, (long)s.max_off);
}

static PyMethodDef recordscan_methods[] = {
    {"scan", recordscan_scan, METH_VARARGS,
     "scan(buf, start, count) -> (min_ts_delta, max_ts_delta, first_null_key_index, offsets_are_0_to_n_minus_1, "
     "min_offset_delta, max_offset_delta) | None\n\n"
     "Scan `count` records of a record batch v2 from buf[start:] to its end (GIL released). None when "
     "anything is malformed or unusual: run the exact parser for the verdict."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef recordscan_module = {
    PyModuleDef_HEAD_INIT, "_recordscan", "Native record batch v2 record scanner.", -1, recordscan_methods,
};

PyMODINIT_FUNC
PyInit__recordscan(void)
{
    return PyModule_Create(&recordscan_module);
}
