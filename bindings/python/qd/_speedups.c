/* qd._speedups: the binding's four bookkeeping calls as a compiled module (optional).
 *
 * qd_stream_acquire, qd_stream_release, qd_stream_set_active and qd_stream_get_active only touch
 * qd's bookkeeping and never wait, so their cost from Python is the foreign call itself: about
 * 0.2 us through ctypes on a fast host and up to 0.7 us on a slow one, which is most of what the
 * B2 pool and active-stream bars allow. Called from here they cost a C function call.
 *
 * The module knows only qd.h: it does not link libqd. The binding loads libqd (ctypes), takes
 * the four functions' addresses and hands them to bind(); every call before bind() raises.
 * Handles go in and out as Python ints. A failed call returns its qd_status (statuses
 * are negative, handles never 0 and at most 2**64 - 1), so the binding turns it into the same
 * exception as through ctypes. The GIL stays held across these calls, as with ctypes.PyDLL: they never wait, and qd
 * allows them inside its host callbacks, so no qd thread holds what they need while it waits
 * for the GIL.
 *
 * Built against the stable ABI of Python 3.10 (one .abi3.so for every later CPython) by the
 * package's build backend when a C compiler and Python's headers are there, and by
 * bindings/python/test for the in-tree suite. Without it the binding calls libqd through ctypes
 * or cffi, with the same behaviour.
 */
#define Py_LIMITED_API 0x030A0000
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <qd/qd.h>

typedef qd_status (*acquire_fn)(qd_context, qd_stream *);
typedef qd_status (*release_fn)(qd_stream);
typedef qd_status (*set_active_fn)(qd_context, qd_stream, qd_stream *);
typedef qd_status (*get_active_fn)(qd_context, qd_stream *);

static acquire_fn f_acquire;
static release_fn f_release;
static set_active_fn f_set_active;
static get_active_fn f_get_active;

static int bound(void) {
    if (f_acquire && f_release && f_set_active && f_get_active)
        return 1;
    PyErr_SetString(PyExc_RuntimeError, "qd._speedups: bind() was not called");
    return 0;
}

/* A handle argument: an int in [0, 2**64). */
static int handle(PyObject *o, uint64_t *out) {
    unsigned long long v = PyLong_AsUnsignedLongLong(o);
    if (v == (unsigned long long)-1 && PyErr_Occurred())
        return 0;
    *out = (uint64_t)v;
    return 1;
}

static PyObject *result(qd_status status, uint64_t h) {
    if (status != QD_SUCCESS)
        return PyLong_FromLong((long)status); /* negative */
    return PyLong_FromUnsignedLongLong((unsigned long long)h);
}

/* bind(acquire, release, set_active, get_active): the addresses of the four functions. */
static PyObject *sp_bind(PyObject *self, PyObject *const *args, Py_ssize_t n) {
    (void)self;
    if (n != 4) {
        PyErr_SetString(PyExc_TypeError, "bind() takes 4 function addresses");
        return NULL;
    }
    void *fns[4];
    for (Py_ssize_t i = 0; i < 4; ++i) {
        fns[i] = PyLong_AsVoidPtr(args[i]);
        if (fns[i] == NULL) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_ValueError, "bind(): a function address is 0");
            return NULL;
        }
    }
    f_acquire = (acquire_fn)fns[0];
    f_release = (release_fn)fns[1];
    f_set_active = (set_active_fn)fns[2];
    f_get_active = (get_active_fn)fns[3];
    Py_RETURN_NONE;
}

/* acquire(ctx) -> the leased stream's handle, or the (negative) status. */
static PyObject *sp_acquire(PyObject *self, PyObject *ctx) {
    (void)self;
    uint64_t c;
    if (!bound() || !handle(ctx, &c))
        return NULL;
    qd_stream out = 0;
    qd_status status = f_acquire(c, &out);
    return result(status, out);
}

/* release(stream) -> status (0 on success). */
static PyObject *sp_release(PyObject *self, PyObject *stream) {
    (void)self;
    uint64_t s;
    if (!bound() || !handle(stream, &s))
        return NULL;
    return PyLong_FromLong((long)f_release(s));
}

/* set_active(ctx, stream) -> the previous active stream's handle, or the status. */
static PyObject *sp_set_active(PyObject *self, PyObject *const *args, Py_ssize_t n) {
    (void)self;
    if (n != 2) {
        PyErr_SetString(PyExc_TypeError, "set_active() takes 2 arguments (ctx, stream)");
        return NULL;
    }
    uint64_t c, s;
    if (!bound() || !handle(args[0], &c) || !handle(args[1], &s))
        return NULL;
    qd_stream prev = 0;
    qd_status status = f_set_active(c, s, &prev);
    return result(status, prev);
}

/* get_active(ctx) -> this thread's active stream's handle, or the status. */
static PyObject *sp_get_active(PyObject *self, PyObject *ctx) {
    (void)self;
    uint64_t c;
    if (!bound() || !handle(ctx, &c))
        return NULL;
    qd_stream out = 0;
    qd_status status = f_get_active(c, &out);
    return result(status, out);
}

static PyMethodDef methods[] = {
    {"bind", (PyCFunction)(void (*)(void))sp_bind, METH_FASTCALL,
     "bind(acquire, release, set_active, get_active): the libqd functions' addresses."},
    {"acquire", sp_acquire, METH_O, "acquire(ctx) -> stream handle, or the status."},
    {"release", sp_release, METH_O, "release(stream) -> status."},
    {"set_active", (PyCFunction)(void (*)(void))sp_set_active, METH_FASTCALL,
     "set_active(ctx, stream) -> previous stream handle, or the status."},
    {"get_active", sp_get_active, METH_O, "get_active(ctx) -> stream handle, or the status."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "qd._speedups",
    "qd's stream bookkeeping calls, compiled (see the source's header comment).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__speedups(void) { return PyModule_Create(&module); }
