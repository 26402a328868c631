/*
 * kproducer.network._sockio: the Sender thread's non-blocking socket calls, made
 * without letting go of the GIL.
 *
 * CPython's socket and select methods release the GIL around every system call.
 * For a call that cannot block (a non-blocking socket, an epoll_wait with a zero
 * timeout) that buys nothing, and it costs the Sender dearly while a caller thread
 * is busy in send(): the caller takes the GIL at once, and the Sender gets it back
 * only when the caller's switch interval (sys.getswitchinterval(), 5 ms) runs out.
 * One Sender loop made five to ten such calls, so each loop waited tens of
 * milliseconds, batches piled up until buffer.memory was full and the caller
 * blocked (benchmarks/RESULTS.md, "The GIL and the Sender's system calls", has the
 * measurements). These three functions make the same calls holding the GIL: the
 * Sender then lets go of it only where it really waits, in a select() with a
 * timeout.
 *
 * Each mirrors a Python call, which is what runs without the extension (or with
 * KPRODUCER_PURE_PYTHON=1); see kproducer.network.sockio:
 * - send_iov(fd, buffers)  mirrors socket.sendmsg(buffers) on a non-blocking socket;
 * - recv(fd, size)         mirrors socket.recv(size) on a non-blocking socket;
 * - poll_ready(epfd, n)    mirrors select.epoll.poll(0, n), as (fd, event mask) pairs.
 * Errors are the same OSError subclasses (BlockingIOError for EAGAIN, and so on).
 *
 * The one call that really waits, wait_ready(epfd, n, timeout_ms) (select.epoll.poll(timeout,
 * n)), lets go of the GIL as CPython's does, and counts the threads that are back from it and
 * waiting to take the GIL again (`gil_wanted`, shared through the GIL_WANTED capsule). A caller
 * thread busy in send() would otherwise keep the GIL until its switch interval ran out, up to
 * 5 ms per Sender loop; the C send lane (kproducer._speedups) reads the count on each call and,
 * when a Sender waits, lets go of the GIL until that thread has it. Without the extension the
 * Sender waits in selectors' select() and a busy caller hands the GIL over at the interval.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <limits.h>
#ifdef __linux__
#include <sys/epoll.h>
#endif

/* Threads back from wait_ready()'s epoll_wait and not holding the GIL yet (atomic: it changes
   without the GIL). */
static int gil_wanted = 0;

#ifndef IOV_MAX
#define IOV_MAX 1024
#endif

static int as_int(PyObject *o) {
    long v = PyLong_AsLong(o);
    if (v == -1 && PyErr_Occurred()) return -1;
    if (v < INT_MIN || v > INT_MAX) {
        PyErr_SetString(PyExc_OverflowError, "value out of range for a C int");
        return -1;
    }
    return (int)v;
}

/* Checks that a call has its 2 arguments and reads the first, a file descriptor; -1 on error. */
static int fd_of_two(const char *usage, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "%s takes 2 arguments", usage);
        return -1;
    }
    int fd = as_int(args[0]);
    if (fd < 0 && !PyErr_Occurred()) PyErr_Format(PyExc_ValueError, "%s: negative file descriptor", usage);
    return fd;
}

/* send_iov(fd, buffers) -> bytes written. buffers: a list or tuple of bytes-like objects. */
static PyObject *py_send_iov(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    int fd = fd_of_two("send_iov(fd, buffers)", args, nargs);
    if (fd < 0) return NULL;
    PyObject *seq = PySequence_Fast(args[1], "send_iov: buffers must be a list or tuple");
    if (seq == NULL) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n > IOV_MAX) n = IOV_MAX;
    struct iovec iov_small[64];
    Py_buffer view_small[64];
    struct iovec *iov = iov_small;
    Py_buffer *views = view_small;
    if (n > 64) {
        iov = PyMem_Malloc(sizeof(struct iovec) * (size_t)n);
        views = PyMem_Malloc(sizeof(Py_buffer) * (size_t)n);
        if (iov == NULL || views == NULL) {
            PyMem_Free(iov == iov_small ? NULL : iov);
            PyMem_Free(views == view_small ? NULL : views);
            Py_DECREF(seq);
            return PyErr_NoMemory();
        }
    }
    PyObject *const *items = PySequence_Fast_ITEMS(seq);
    Py_ssize_t got = 0;
    PyObject *result = NULL;
    for (; got < n; got++) {
        if (PyObject_GetBuffer(items[got], &views[got], PyBUF_SIMPLE) < 0) goto done;
        iov[got].iov_base = views[got].buf;
        iov[got].iov_len = (size_t)views[got].len;
    }
    struct msghdr msg;
    memset(&msg, 0, sizeof(msg));
    msg.msg_iov = iov;
    msg.msg_iovlen = (size_t)n;
    ssize_t sent;
    do {
        sent = sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    } while (sent < 0 && errno == EINTR && !PyErr_CheckSignals());
    if (sent < 0) {
        if (!PyErr_Occurred()) PyErr_SetFromErrno(PyExc_OSError);
        goto done;
    }
    result = PyLong_FromSsize_t((Py_ssize_t)sent);
done:
    for (Py_ssize_t i = 0; i < got; i++) PyBuffer_Release(&views[i]);
    if (iov != iov_small) PyMem_Free(iov);
    if (views != view_small) PyMem_Free(views);
    Py_DECREF(seq);
    return result;
}

/* recv(fd, size) -> bytes (b"" at end of stream).
 *
 * Reads into one scratch buffer kept for the process (only ever touched with the GIL held, which
 * these calls never let go of), then copies what arrived into a bytes object of exactly that size:
 * one allocation of the right size, without resizing a bytes object in place (which only CPython's
 * private _PyBytes_Resize can do). */
static char *recv_scratch = NULL;
static size_t recv_scratch_size = 0;

static PyObject *py_recv(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    int fd = fd_of_two("recv(fd, size)", args, nargs);
    if (fd < 0) return NULL;
    Py_ssize_t size = PyLong_AsSsize_t(args[1]);
    if (size == -1 && PyErr_Occurred()) return NULL;
    if (size < 0) {
        PyErr_SetString(PyExc_ValueError, "negative buffersize in recv");
        return NULL;
    }
    if ((size_t)size > recv_scratch_size || recv_scratch == NULL) {
        char *grown = PyMem_RawRealloc(recv_scratch, size > 0 ? (size_t)size : 1);
        if (grown == NULL) return PyErr_NoMemory();
        recv_scratch = grown;
        recv_scratch_size = size > 0 ? (size_t)size : 1;
    }
    ssize_t got;
    do {
        got = recv(fd, recv_scratch, (size_t)size, MSG_DONTWAIT);
    } while (got < 0 && errno == EINTR && !PyErr_CheckSignals());
    if (got < 0) {
        if (!PyErr_Occurred()) PyErr_SetFromErrno(PyExc_OSError);
        return NULL;
    }
    return PyBytes_FromStringAndSize(recv_scratch, (Py_ssize_t)got);
}

#ifdef __linux__
#define MAX_EVENTS 1024

/* The maxevents argument of poll_ready and wait_ready, kept within 1..MAX_EVENTS; -1 with an exception. */
static int max_events_of(PyObject *arg) {
    int maxevents = as_int(arg);
    if (maxevents == -1 && PyErr_Occurred()) return -1;
    if (maxevents < 1) return 1;
    return maxevents > MAX_EVENTS ? MAX_EVENTS : maxevents;
}

/* The n events epoll_wait reported, as a list of (fd, event mask) pairs. */
static PyObject *event_pairs(const struct epoll_event *events, int n) {
    PyObject *out = PyList_New(n);
    if (out == NULL) return NULL;
    for (int i = 0; i < n; i++) {
        PyObject *pair = Py_BuildValue("(iI)", events[i].data.fd, (unsigned int)events[i].events);
        if (pair == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, i, pair);
    }
    return out;
}
#endif

/* poll_ready(epfd, maxevents) -> [(fd, events), ...]: epoll_wait with a zero timeout. */
static PyObject *py_poll_ready(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
#ifdef __linux__
    int epfd = fd_of_two("poll_ready(epfd, maxevents)", args, nargs);
    if (epfd < 0) return NULL;
    int maxevents = max_events_of(args[1]);
    if (maxevents < 0) return NULL;
    struct epoll_event events[MAX_EVENTS];
    int n;
    do {
        n = epoll_wait(epfd, events, maxevents, 0);
    } while (n < 0 && errno == EINTR && !PyErr_CheckSignals());
    if (n < 0) {
        if (!PyErr_Occurred()) PyErr_SetFromErrno(PyExc_OSError);
        return NULL;
    }
    return event_pairs(events, n);
#else
    PyErr_SetString(PyExc_OSError, "poll_ready needs epoll (Linux)");
    return NULL;
#endif
}

/* wait_ready(epfd, maxevents, timeout_ms) -> [(fd, events), ...]: epoll_wait with a timeout (-1: none),
   without the GIL; counted in gil_wanted from the wait's end until the GIL is held again. A signal
   ends the wait early with no events (after its Python handler ran), so the Sender loops again. */
static PyObject *py_wait_ready(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
#ifdef __linux__
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "wait_ready(epfd, maxevents, timeout_ms) takes 3 arguments");
        return NULL;
    }
    int epfd = as_int(args[0]);
    if (epfd == -1 && PyErr_Occurred()) return NULL;
    if (epfd < 0) {
        PyErr_SetString(PyExc_ValueError, "wait_ready: negative file descriptor");
        return NULL;
    }
    int maxevents = max_events_of(args[1]);
    if (maxevents < 0) return NULL;
    int timeout_ms = as_int(args[2]);
    if (timeout_ms == -1 && PyErr_Occurred()) return NULL;
    if (timeout_ms < -1) timeout_ms = -1;
    struct epoll_event events[MAX_EVENTS];
    int n, err;
    Py_BEGIN_ALLOW_THREADS
    n = epoll_wait(epfd, events, maxevents, timeout_ms);
    err = errno;
    __atomic_fetch_add(&gil_wanted, 1, __ATOMIC_SEQ_CST);
    Py_END_ALLOW_THREADS
    __atomic_fetch_sub(&gil_wanted, 1, __ATOMIC_SEQ_CST);
    if (n < 0) {
        if (err != EINTR) {
            errno = err;
            return PyErr_SetFromErrno(PyExc_OSError);
        }
        if (PyErr_CheckSignals()) return NULL;
        n = 0;
    }
    return event_pairs(events, n);
#else
    PyErr_SetString(PyExc_OSError, "wait_ready needs epoll (Linux)");
    return NULL;
#endif
}

/* gil_waiters() -> int: how many threads are back from wait_ready() and waiting for the GIL. */
static PyObject *py_gil_waiters(PyObject *self, PyObject *unused) {
    return PyLong_FromLong(__atomic_load_n(&gil_wanted, __ATOMIC_SEQ_CST));
}

static PyMethodDef methods[] = {
    {"send_iov", (PyCFunction)(void (*)(void))py_send_iov, METH_FASTCALL,
     "send_iov(fd, buffers) -> int: socket.sendmsg(buffers) on a non-blocking socket, holding the GIL."},
    {"recv", (PyCFunction)(void (*)(void))py_recv, METH_FASTCALL,
     "recv(fd, size) -> bytes: socket.recv(size) on a non-blocking socket, holding the GIL."},
    {"poll_ready", (PyCFunction)(void (*)(void))py_poll_ready, METH_FASTCALL,
     "poll_ready(epfd, maxevents) -> [(fd, events)]: epoll.poll(0), holding the GIL."},
    {"wait_ready", (PyCFunction)(void (*)(void))py_wait_ready, METH_FASTCALL,
     "wait_ready(epfd, maxevents, timeout_ms) -> [(fd, events)]: epoll.poll(timeout), counted in GIL_WANTED "
     "until the GIL is held again."},
    {"gil_waiters", py_gil_waiters, METH_NOARGS,
     "gil_waiters() -> int: threads back from wait_ready() that are waiting for the GIL."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "kproducer.network._sockio",
    "The Sender's non-blocking socket calls, made without releasing the GIL.", -1, methods,
};

PyMODINIT_FUNC PyInit__sockio(void) {
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    /* The counter's address, for kproducer._speedups' send lane (PyCapsule_Import-style sharing). */
    PyObject *cap = PyCapsule_New(&gil_wanted, "kproducer.network._sockio.GIL_WANTED", NULL);
    if (cap == NULL || PyModule_AddObject(m, "GIL_WANTED", cap) < 0) {
        Py_XDECREF(cap);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
