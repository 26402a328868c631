/*
 * kproducer.record._compression_worker: a native thread that compresses full
 * batches while no thread of the producer waits for it.
 *
 * Why: cramjam and lz4 release the GIL while they compress, and the thread that
 * called them then waits for the GIL to come back. With a caller thread busy in
 * send(), that wait is most of the cost: several times the codec's own CPU time
 * per batch (benchmarks/RESULTS.md, "Compression off the GIL"). librdkafka
 * compresses on its own threads,
 * which never need a GIL; this does the same. A thread appending records hands a
 * full batch's buffer to the worker (a mutex and a condition variable, no GIL
 * release), the worker compresses it into the same buffer, and the Sender picks
 * the result up when it drains the batch; if it looks before the job is done it
 * asks to be woken (a byte on its selector's wakeup socket) and moves on.
 *
 * The codecs are the system's reference libraries, liblz4 and libzstd, opened
 * with dlopen: only their stable public functions are used (declared below, as
 * in lz4.h, lz4hc.h and zstd.h), so no headers are needed to build this, and a
 * machine without them keeps the Python path (kproducer.record.codecs, which
 * this mirrors byte layout for byte layout: docs/architecture.md).
 *
 * Output layouts (Kafka's "Message Format" documentation, attributes bits 0-2):
 *   lz4:  the frame header given by the caller, then 64 KiB independent blocks,
 *         each [uint32 LE size][data], the high bit of the size set for a block
 *         stored uncompressed, then a zero end mark (Java's
 *         KafkaLZ4BlockOutputStream; no block or content checksum).
 *   zstd: one standard zstd frame.
 *
 * The worker never touches a Python object: a job holds a Py_buffer export of
 * the batch's bytearray (taken with the GIL by submit()), which keeps its memory
 * in place until the job's owner releases it, with the GIL, in result() or when
 * the job object is freed (which first waits for a running job to finish).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define CODEC_LZ4 3
#define CODEC_ZSTD 4
#define LZ4_BLOCK (64 * 1024)
#define MAX_HEADER 32

typedef int (*lz4_fast_fn)(const char *, char *, int, int);
typedef int (*lz4_hc_fn)(const char *, char *, int, int, int);
typedef int (*lz4_bound_fn)(int);
typedef void *(*zstd_create_fn)(void);
typedef size_t (*zstd_free_fn)(void *);
typedef size_t (*zstd_compress_fn)(void *, void *, size_t, const void *, size_t, int);
typedef size_t (*zstd_bound_fn)(size_t);
typedef unsigned (*zstd_is_error_fn)(size_t);
typedef const char *(*zstd_error_name_fn)(size_t);

enum { JOB_QUEUED = 0, JOB_RUNNING = 1, JOB_DONE = 2 };

typedef struct WorkerObject WorkerObject;

typedef struct JobObject {
    PyObject_HEAD
    WorkerObject *worker; /* strong reference: the worker outlives its jobs */
    struct JobObject *next; /* queue link, under worker->lock */
    Py_buffer view;
    int has_view;
    int codec;
    int level;
    unsigned char header[MAX_HEADER];
    int header_len;
    Py_ssize_t start, end;
    /* Written by the worker, read after state == JOB_DONE (under the lock). */
    int state;
    int wake; /* the Sender asked for a wakeup byte when this job is done */
    Py_ssize_t out_len;
    char *overflow; /* the compressed bytes when they did not fit in the buffer */
    const char *error;
} JobObject;

struct WorkerObject {
    PyObject_HEAD
    pthread_mutex_t lock;
    pthread_cond_t work;
    pthread_cond_t done;
    pthread_t thread;
    int started;
    int stopping;
    pid_t owner;
    int wake_fd;
    JobObject *head, *tail;
    /* codecs: resolved once, read-only afterwards */
    void *lz4_lib, *zstd_lib;
    lz4_fast_fn lz4_fast;
    lz4_hc_fn lz4_hc;
    lz4_bound_fn lz4_bound;
    zstd_create_fn zstd_create;
    zstd_free_fn zstd_free;
    zstd_compress_fn zstd_compress;
    zstd_bound_fn zstd_bound;
    zstd_is_error_fn zstd_is_error;
    zstd_error_name_fn zstd_error_name;
    /* the worker thread's own */
    void *zstd_cctx;
    char *scratch;
    size_t scratch_len;
};

static PyTypeObject JobType;
static PyTypeObject WorkerType;

/* ------------------------------------------------------------------ codecs (worker thread, no GIL) */

static int ensure_scratch(WorkerObject *w, size_t need) {
    if (w->scratch_len >= need)
        return 0;
    char *p = realloc(w->scratch, need);
    if (p == NULL)
        return -1;
    w->scratch = p;
    w->scratch_len = need;
    return 0;
}

static void put_le32(char *p, uint32_t v) {
    p[0] = (char)(v & 0xff);
    p[1] = (char)((v >> 8) & 0xff);
    p[2] = (char)((v >> 16) & 0xff);
    p[3] = (char)((v >> 24) & 0xff);
}

/* Returns the compressed length in w->scratch, or -1 with job->error set. */
static Py_ssize_t compress_lz4(WorkerObject *w, JobObject *job, const char *src, Py_ssize_t n) {
    Py_ssize_t blocks = (n + LZ4_BLOCK - 1) / LZ4_BLOCK;
    int block_bound = w->lz4_bound(LZ4_BLOCK);
    size_t cap = (size_t)job->header_len + (size_t)blocks * (4 + (size_t)block_bound) + 4;
    if (ensure_scratch(w, cap) < 0) {
        job->error = "out of memory for the compressed batch";
        return -1;
    }
    char *out = w->scratch;
    memcpy(out, job->header, (size_t)job->header_len);
    Py_ssize_t pos = job->header_len;
    for (Py_ssize_t off = 0; off < n; off += LZ4_BLOCK) {
        int len = (int)((n - off) < LZ4_BLOCK ? (n - off) : LZ4_BLOCK);
        int c;
        if (job->level > 0)
            c = w->lz4_hc(src + off, out + pos + 4, len, block_bound, job->level);
        else
            c = w->lz4_fast(src + off, out + pos + 4, len, block_bound);
        if (c > 0 && c < len) {
            put_le32(out + pos, (uint32_t)c);
            pos += 4 + c;
        } else {
            /* Incompressible (or a codec refusal): stored as is, flagged in the size's high bit. */
            put_le32(out + pos, (uint32_t)len | 0x80000000u);
            memcpy(out + pos + 4, src + off, (size_t)len);
            pos += 4 + len;
        }
    }
    put_le32(out + pos, 0);
    return pos + 4;
}

static Py_ssize_t compress_zstd(WorkerObject *w, JobObject *job, const char *src, Py_ssize_t n) {
    if (w->zstd_cctx == NULL) {
        w->zstd_cctx = w->zstd_create();
        if (w->zstd_cctx == NULL) {
            job->error = "ZSTD_createCCtx failed";
            return -1;
        }
    }
    size_t cap = w->zstd_bound((size_t)n);
    if (ensure_scratch(w, cap) < 0) {
        job->error = "out of memory for the compressed batch";
        return -1;
    }
    size_t c = w->zstd_compress(w->zstd_cctx, w->scratch, cap, src, (size_t)n, job->level);
    if (w->zstd_is_error(c)) {
        job->error = w->zstd_error_name(c);
        return -1;
    }
    return (Py_ssize_t)c;
}

static void run_job(WorkerObject *w, JobObject *job) {
    char *base = (char *)job->view.buf;
    Py_ssize_t n = job->end - job->start;
    Py_ssize_t c = job->codec == CODEC_LZ4 ? compress_lz4(w, job, base + job->start, n)
                                           : compress_zstd(w, job, base + job->start, n);
    if (c < 0)
        return;
    if (c <= job->view.len - job->start) {
        /* In place: the records are no longer needed once compressed. */
        memcpy(base + job->start, w->scratch, (size_t)c);
    } else {
        job->overflow = malloc((size_t)c);
        if (job->overflow == NULL) {
            job->error = "out of memory for the compressed batch";
            return;
        }
        memcpy(job->overflow, w->scratch, (size_t)c);
    }
    job->out_len = c;
}

static void *worker_main(void *arg) {
    WorkerObject *w = (WorkerObject *)arg;
    /* Signals stay with the interpreter's threads. */
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    pthread_mutex_lock(&w->lock);
    for (;;) {
        while (w->head == NULL && !w->stopping)
            pthread_cond_wait(&w->work, &w->lock);
        JobObject *job = w->head;
        if (job == NULL)
            break; /* stopping, and every queued job is done */
        w->head = job->next;
        if (w->head == NULL)
            w->tail = NULL;
        job->next = NULL;
        job->state = JOB_RUNNING;
        pthread_mutex_unlock(&w->lock);
        run_job(w, job);
        pthread_mutex_lock(&w->lock);
        job->state = JOB_DONE;
        pthread_cond_broadcast(&w->done);
        if (job->wake && w->wake_fd >= 0) {
            char byte = 0;
            (void)send(w->wake_fd, &byte, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
        }
    }
    pthread_mutex_unlock(&w->lock);
    if (w->zstd_cctx != NULL)
        w->zstd_free(w->zstd_cctx);
    w->zstd_cctx = NULL;
    free(w->scratch);
    w->scratch = NULL;
    w->scratch_len = 0;
    return NULL;
}

/* ------------------------------------------------------------------ CompressionJob */

static void job_wait_done_locked(JobObject *job) {
    /* worker->lock held; the GIL may be held too: the worker never needs it. */
    while (job->state != JOB_DONE)
        pthread_cond_wait(&job->worker->done, &job->worker->lock);
}

static void job_dealloc(JobObject *job) {
    WorkerObject *w = job->worker;
    if (w != NULL) {
        pthread_mutex_lock(&w->lock);
        if (job->state == JOB_QUEUED && job->has_view) {
            /* Never started: take it off the queue. */
            JobObject **link = &w->head;
            JobObject *prev = NULL;
            while (*link != NULL && *link != job) {
                prev = *link;
                link = &(*link)->next;
            }
            if (*link == job) {
                *link = job->next;
                if (w->tail == job)
                    w->tail = prev;
            }
            job->state = JOB_DONE;
        } else if (job->state == JOB_RUNNING) {
            job_wait_done_locked(job);
        }
        pthread_mutex_unlock(&w->lock);
    }
    if (job->has_view)
        PyBuffer_Release(&job->view);
    free(job->overflow);
    Py_XDECREF(w);
    Py_TYPE(job)->tp_free((PyObject *)job);
}

static PyObject *job_done(JobObject *job, PyObject *Py_UNUSED(ignored)) {
    pthread_mutex_lock(&job->worker->lock);
    int done = job->state == JOB_DONE;
    pthread_mutex_unlock(&job->worker->lock);
    return PyBool_FromLong(done);
}

static PyObject *job_wake_when_done(JobObject *job, PyObject *Py_UNUSED(ignored)) {
    pthread_mutex_lock(&job->worker->lock);
    int done = job->state == JOB_DONE;
    if (!done)
        job->wake = 1;
    pthread_mutex_unlock(&job->worker->lock);
    return PyBool_FromLong(done);
}

static PyObject *job_wait(JobObject *job, PyObject *Py_UNUSED(ignored)) {
    WorkerObject *w = job->worker;
    pthread_mutex_lock(&w->lock);
    int done = job->state == JOB_DONE;
    pthread_mutex_unlock(&w->lock);
    if (!done) {
        Py_BEGIN_ALLOW_THREADS
        pthread_mutex_lock(&w->lock);
        job_wait_done_locked(job);
        pthread_mutex_unlock(&w->lock);
        Py_END_ALLOW_THREADS
    }
    Py_RETURN_NONE;
}

static PyObject *job_result(JobObject *job, PyObject *Py_UNUSED(ignored)) {
    if (!job->has_view) {
        PyErr_SetString(PyExc_RuntimeError, "this compression job's result was already taken");
        return NULL;
    }
    PyObject *waited = job_wait(job, NULL);
    if (waited == NULL)
        return NULL;
    Py_DECREF(waited);
    PyObject *res;
    if (job->error != NULL) {
        PyErr_Format(PyExc_ValueError, "compressing a batch of %zd bytes failed: %s",
                     job->end - job->start, job->error);
        res = NULL;
    } else if (job->overflow != NULL) {
        res = PyBytes_FromStringAndSize(job->overflow, job->out_len);
        free(job->overflow);
        job->overflow = NULL;
    } else {
        res = PyLong_FromSsize_t(job->out_len);
    }
    PyBuffer_Release(&job->view);
    job->has_view = 0;
    return res;
}

static PyMethodDef job_methods[] = {
    {"done", (PyCFunction)job_done, METH_NOARGS, "Whether the worker has finished this job (never blocks)."},
    {"wake_when_done", (PyCFunction)job_wake_when_done, METH_NOARGS,
     "True when done; otherwise the worker writes a byte to its wakeup fd when it finishes, and False."},
    {"wait", (PyCFunction)job_wait, METH_NOARGS,
     "Block until the worker has finished this job (the GIL is released only if it has not)."},
    {"result", (PyCFunction)job_result, METH_NOARGS,
     "Wait for the job: the compressed length, written at buffer[start:] (an int), or the compressed bytes "
     "(bytes) when they did not fit in the buffer. Releases the buffer. ValueError if the codec failed."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject JobType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kproducer.record._compression_worker.CompressionJob",
    .tp_basicsize = sizeof(JobObject),
    .tp_dealloc = (destructor)job_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "One batch's compression, queued on a CompressionWorker (made by CompressionWorker.submit).",
    .tp_methods = job_methods,
};

/* ------------------------------------------------------------------ CompressionWorker */

static int load_lz4(WorkerObject *w, const char *path) {
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL)
        return -1;
    w->lz4_fast = (lz4_fast_fn)dlsym(lib, "LZ4_compress_default");
    w->lz4_hc = (lz4_hc_fn)dlsym(lib, "LZ4_compress_HC");
    w->lz4_bound = (lz4_bound_fn)dlsym(lib, "LZ4_compressBound");
    if (w->lz4_fast == NULL || w->lz4_hc == NULL || w->lz4_bound == NULL) {
        dlclose(lib);
        w->lz4_fast = NULL;
        return -1;
    }
    w->lz4_lib = lib;
    return 0;
}

static int load_zstd(WorkerObject *w, const char *path) {
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL)
        return -1;
    w->zstd_create = (zstd_create_fn)dlsym(lib, "ZSTD_createCCtx");
    w->zstd_free = (zstd_free_fn)dlsym(lib, "ZSTD_freeCCtx");
    w->zstd_compress = (zstd_compress_fn)dlsym(lib, "ZSTD_compressCCtx");
    w->zstd_bound = (zstd_bound_fn)dlsym(lib, "ZSTD_compressBound");
    w->zstd_is_error = (zstd_is_error_fn)dlsym(lib, "ZSTD_isError");
    w->zstd_error_name = (zstd_error_name_fn)dlsym(lib, "ZSTD_getErrorName");
    if (!w->zstd_create || !w->zstd_free || !w->zstd_compress || !w->zstd_bound || !w->zstd_is_error ||
        !w->zstd_error_name) {
        dlclose(lib);
        w->zstd_compress = NULL;
        return -1;
    }
    w->zstd_lib = lib;
    return 0;
}

static int worker_init(WorkerObject *w, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"lz4_library", "zstd_library", NULL};
    const char *lz4_path = NULL, *zstd_path = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|zz", kwlist, &lz4_path, &zstd_path))
        return -1;
    if (w->started) {
        PyErr_SetString(PyExc_RuntimeError, "CompressionWorker is already initialised");
        return -1;
    }
    w->wake_fd = -1;
    w->owner = getpid();
    if (lz4_path != NULL)
        load_lz4(w, lz4_path);
    if (zstd_path != NULL)
        load_zstd(w, zstd_path);
    if (w->lz4_fast == NULL && w->zstd_compress == NULL) {
        const char *why = dlerror();
        PyErr_Format(PyExc_OSError, "neither %s nor %s could be loaded (%s)", lz4_path ? lz4_path : "no lz4 library",
                     zstd_path ? zstd_path : "no zstd library", why ? why : "missing functions");
        return -1;
    }
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->work, NULL);
    pthread_cond_init(&w->done, NULL);
    int rc = pthread_create(&w->thread, NULL, worker_main, w);
    if (rc != 0) {
        errno = rc;
        PyErr_SetFromErrno(PyExc_OSError);
        return -1;
    }
    w->started = 1;
    return 0;
}

static void worker_stop(WorkerObject *w) {
    if (!w->started)
        return;
    pthread_mutex_lock(&w->lock);
    int already = w->stopping;
    w->stopping = 1;
    pthread_cond_signal(&w->work);
    pthread_mutex_unlock(&w->lock);
    if (already)
        return;
    if (getpid() != w->owner)
        return; /* a forked child has no worker thread to join */
    Py_BEGIN_ALLOW_THREADS
    pthread_join(w->thread, NULL);
    Py_END_ALLOW_THREADS
}

static void worker_dealloc(WorkerObject *w) {
    worker_stop(w);
    if (w->started) {
        pthread_mutex_destroy(&w->lock);
        pthread_cond_destroy(&w->work);
        pthread_cond_destroy(&w->done);
    }
    if (w->lz4_lib != NULL)
        dlclose(w->lz4_lib);
    if (w->zstd_lib != NULL)
        dlclose(w->zstd_lib);
    Py_TYPE(w)->tp_free((PyObject *)w);
}

static PyObject *worker_close(WorkerObject *w, PyObject *Py_UNUSED(ignored)) {
    worker_stop(w);
    Py_RETURN_NONE;
}

static PyObject *worker_supports(WorkerObject *w, PyObject *arg) {
    long codec = PyLong_AsLong(arg);
    if (codec == -1 && PyErr_Occurred())
        return NULL;
    return PyBool_FromLong((codec == CODEC_LZ4 && w->lz4_fast != NULL) ||
                           (codec == CODEC_ZSTD && w->zstd_compress != NULL));
}

static PyObject *worker_set_wakeup_fd(WorkerObject *w, PyObject *arg) {
    long fd = PyLong_AsLong(arg);
    if (fd == -1 && PyErr_Occurred())
        return NULL;
    if (!w->started) {
        PyErr_SetString(PyExc_RuntimeError, "CompressionWorker is not initialised");
        return NULL;
    }
    pthread_mutex_lock(&w->lock);
    w->wake_fd = fd < 0 ? -1 : (int)fd;
    pthread_mutex_unlock(&w->lock);
    Py_RETURN_NONE;
}

static PyObject *worker_submit(WorkerObject *w, PyObject *args) {
    int codec, level;
    Py_buffer header;
    PyObject *buffer;
    Py_ssize_t start, end;
    if (!PyArg_ParseTuple(args, "iiy*Onn:submit", &codec, &level, &header, &buffer, &start, &end))
        return NULL;
    JobObject *job = NULL;
    if (!w->started || w->stopping) {
        PyErr_SetString(PyExc_RuntimeError, "the compression worker is closed");
        goto fail;
    }
    if (getpid() != w->owner) {
        PyErr_SetString(PyExc_RuntimeError, "the compression worker belongs to the process this one was forked from");
        goto fail;
    }
    if (!((codec == CODEC_LZ4 && w->lz4_fast != NULL) || (codec == CODEC_ZSTD && w->zstd_compress != NULL))) {
        PyErr_Format(PyExc_ValueError, "codec %d is not available in this compression worker (lz4 is 3, zstd 4)",
                     codec);
        goto fail;
    }
    if (codec == CODEC_LZ4 && (header.len < 1 || header.len > MAX_HEADER)) {
        PyErr_Format(PyExc_ValueError, "an lz4 frame header of 1..%d bytes is needed, got %zd", MAX_HEADER,
                     header.len);
        goto fail;
    }
    job = PyObject_New(JobObject, &JobType);
    if (job == NULL)
        goto fail;
    job->worker = NULL;
    job->next = NULL;
    job->has_view = 0;
    job->overflow = NULL;
    job->error = NULL;
    job->out_len = 0;
    job->wake = 0;
    job->state = JOB_DONE; /* until queued: job_dealloc then has nothing to wait for */
    if (PyObject_GetBuffer(buffer, &job->view, PyBUF_WRITABLE) < 0)
        goto fail;
    job->has_view = 1;
    if (start < 0 || end < start || end > job->view.len) {
        PyErr_Format(PyExc_ValueError, "records at [%zd, %zd) are outside the buffer of %zd bytes", start, end,
                     job->view.len);
        goto fail;
    }
    if (end - start > INT32_MAX - 65536) {
        PyErr_Format(PyExc_ValueError, "a batch's records are at most 2 GiB, got %zd bytes", end - start);
        goto fail;
    }
    job->codec = codec;
    job->level = level;
    job->header_len = (int)header.len;
    if (header.len > 0 && header.len <= MAX_HEADER)
        memcpy(job->header, header.buf, (size_t)header.len);
    job->start = start;
    job->end = end;
    Py_INCREF(w);
    job->worker = w;
    PyBuffer_Release(&header);
    pthread_mutex_lock(&w->lock);
    job->state = JOB_QUEUED;
    if (w->tail != NULL)
        w->tail->next = job;
    else
        w->head = job;
    w->tail = job;
    pthread_cond_signal(&w->work);
    pthread_mutex_unlock(&w->lock);
    return (PyObject *)job;
fail:
    PyBuffer_Release(&header);
    Py_XDECREF(job);
    return NULL;
}

static PyMethodDef worker_methods[] = {
    {"submit", (PyCFunction)worker_submit, METH_VARARGS,
     "submit(codec, level, lz4_header, buffer, start, end) -> CompressionJob: compress buffer[start:end] "
     "(codec 3 = lz4, whose level > 0 means LZ4 HC at that level; codec 4 = zstd at level) on the worker thread."},
    {"supports", (PyCFunction)worker_supports, METH_O, "Whether codec id (3 lz4, 4 zstd) was loaded."},
    {"set_wakeup_fd", (PyCFunction)worker_set_wakeup_fd, METH_O,
     "A socket to write one byte to when a job someone asked to be woken for is done (-1: none)."},
    {"close", (PyCFunction)worker_close, METH_NOARGS, "Finish the queued jobs and stop the thread; idempotent."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject WorkerType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kproducer.record._compression_worker.CompressionWorker",
    .tp_basicsize = sizeof(WorkerObject),
    .tp_dealloc = (destructor)worker_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "CompressionWorker(lz4_library=None, zstd_library=None): one thread compressing batches "
              "with the given shared libraries, without the GIL.",
    .tp_methods = worker_methods,
    .tp_init = (initproc)worker_init,
    .tp_new = PyType_GenericNew,
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_compression_worker",
    "Batches compressed on a native thread with the system's liblz4 and libzstd, without the GIL.", -1, NULL,
};

PyMODINIT_FUNC PyInit__compression_worker(void) {
    if (PyType_Ready(&JobType) < 0 || PyType_Ready(&WorkerType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    Py_INCREF(&WorkerType);
    if (PyModule_AddObject(m, "CompressionWorker", (PyObject *)&WorkerType) < 0) {
        Py_DECREF(&WorkerType);
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&JobType);
    if (PyModule_AddObject(m, "CompressionJob", (PyObject *)&JobType) < 0) {
        Py_DECREF(&JobType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
