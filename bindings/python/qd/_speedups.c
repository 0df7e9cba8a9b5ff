/* qd._speedups: the binding's four bookkeeping calls and Kernel.launch's packing, compiled
 * (optional).
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
 * launch() is Kernel.launch for the argument signatures the binding hands it (types and one
 * code per argument, qd._kernel._Layout.spec): it checks and packs the values on its own stack
 * and calls qd_launch (bound by bind_launch()) with the GIL released, as ctypes and cffi do, so
 * ordinary arguments cost about what a pre-packed launch does. Anything it does not take comes
 * back as None, having queued nothing, and the binding's Python path handles it.
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

#include <string.h>

typedef qd_status (*acquire_fn)(qd_context, qd_stream *);
typedef qd_status (*release_fn)(qd_stream);
typedef qd_status (*set_active_fn)(qd_context, qd_stream, qd_stream *);
typedef qd_status (*get_active_fn)(qd_context, qd_stream *);

static acquire_fn f_acquire;
static release_fn f_release;
static set_active_fn f_set_active;
static get_active_fn f_get_active;

static int bound(void) {
    if (f_acquire && f_release && f_set_active && f_get_active) return 1;
    PyErr_SetString(PyExc_RuntimeError, "qd._speedups: bind() was not called");
    return 0;
}

/* A handle argument: an int in [0, 2**64). */
static int handle(PyObject *o, uint64_t *out) {
    unsigned long long v = PyLong_AsUnsignedLongLong(o);
    if (v == (unsigned long long)-1 && PyErr_Occurred()) return 0;
    *out = (uint64_t)v;
    return 1;
}

static PyObject *result(qd_status status, uint64_t h) {
    if (status != QD_SUCCESS) return PyLong_FromLong((long)status); /* negative */
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

/* The launch of Kernel.launch for argument signatures it knows (qd._kernel._Layout): the
 * arguments' values are checked and packed here, into this call's own stack, and qd_launch is
 * called with the GIL released, as ctypes and cffi do. */
typedef qd_status (*launch_fn)(qd_stream, qd_kernel, const qd_launch_config *, const qd_arg *,
                               uint32_t);
static launch_fn f_launch;
static PyObject *s_value, *s_address, *s_freed, *s_ctx, *s_h;

/* bind_launch(qd_launch): its address. */
static PyObject *sp_bind_launch(PyObject *self, PyObject *addr) {
    (void)self;
    void *fn = PyLong_AsVoidPtr(addr);
    if (fn == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "bind_launch(): the function address is 0");
        return NULL;
    }
    if (!s_value) {
        s_value = PyUnicode_InternFromString("value");
        s_address = PyUnicode_InternFromString("_address");
        s_freed = PyUnicode_InternFromString("_freed");
        s_ctx = PyUnicode_InternFromString("_ctx");
        s_h = PyUnicode_InternFromString("_h");
        if (!s_value || !s_address || !s_freed || !s_ctx || !s_h) return NULL;
    }
    f_launch = (launch_fn)fn;
    Py_RETURN_NONE;
}

/* An attribute read as an unsigned 64-bit int: 1, 0 (not one: a miss), -1 (an error). */
static int attr_u64(PyObject *o, PyObject *name, uint64_t *out) {
    PyObject *v = PyObject_GetAttr(o, name);
    if (!v) {
        PyErr_Clear();
        return 0;
    }
    int ok = PyLong_Check(v);
    if (ok) {
        *out = (uint64_t)PyLong_AsUnsignedLongLong(v);
        if (*out == (uint64_t)-1 && PyErr_Occurred()) {
            PyErr_Clear();
            ok = 0;
        }
    }
    Py_DECREF(v);
    return ok;
}

/* The ctypes simple value of o (its .value) as the C type of struct code `code`, into *slot. */
static int ctypes_value(PyObject *o, char code, uint64_t *slot, uint64_t *size) {
    PyObject *v = PyObject_GetAttr(o, s_value);
    if (!v) {
        PyErr_Clear();
        return 0;
    }
    int ok = 1;
    long long sv = 0;
    unsigned long long uv = 0;
    double dv = 0;
    switch (code) {
    case 'b':
    case 'h':
    case 'i':
    case 'q':
        sv = PyLong_AsLongLong(v);
        ok = !(sv == -1 && PyErr_Occurred());
        break;
    case 'B':
    case 'H':
    case 'I':
    case 'Q':
        uv = PyLong_AsUnsignedLongLong(v);
        ok = !(uv == (unsigned long long)-1 && PyErr_Occurred());
        break;
    case 'f':
    case 'd':
        dv = PyFloat_AsDouble(v);
        ok = !(dv == -1.0 && PyErr_Occurred());
        break;
    case '?':
        sv = PyObject_IsTrue(v);
        ok = sv >= 0;
        break;
    default: ok = 0;
    }
    Py_DECREF(v);
    if (!ok) {
        PyErr_Clear();
        return 0;
    }
    unsigned char *p = (unsigned char *)slot;
    switch (code) {
    case 'b': {
        int8_t x = (int8_t)sv;
        memcpy(p, &x, 1);
        *size = 1;
        break;
    }
    case 'h': {
        int16_t x = (int16_t)sv;
        memcpy(p, &x, 2);
        *size = 2;
        break;
    }
    case 'i': {
        int32_t x = (int32_t)sv;
        memcpy(p, &x, 4);
        *size = 4;
        break;
    }
    case 'q': {
        int64_t x = (int64_t)sv;
        memcpy(p, &x, 8);
        *size = 8;
        break;
    }
    case 'B': {
        uint8_t x = (uint8_t)uv;
        memcpy(p, &x, 1);
        *size = 1;
        break;
    }
    case 'H': {
        uint16_t x = (uint16_t)uv;
        memcpy(p, &x, 2);
        *size = 2;
        break;
    }
    case 'I': {
        uint32_t x = (uint32_t)uv;
        memcpy(p, &x, 4);
        *size = 4;
        break;
    }
    case 'Q': {
        uint64_t x = (uint64_t)uv;
        memcpy(p, &x, 8);
        *size = 8;
        break;
    }
    case 'f': {
        float x = (float)dv;
        memcpy(p, &x, 4);
        *size = 4;
        break;
    }
    case 'd': {
        memcpy(p, &dv, 8);
        *size = 8;
        break;
    }
    default: {
        uint8_t x = (uint8_t)sv;
        memcpy(p, &x, 1);
        *size = 1;
        break;
    } /* '?' */
    }
    return 1;
}

/* Pack args by one signature: (types, codes). 1: packed; 0: they do not fit it (a miss). */
static int pack(PyObject *args, Py_ssize_t n, PyObject *spec, PyObject *ctx, uint64_t *slots,
                qd_arg *arr) {
    PyObject *types = PyTuple_GetItem(spec, 0);
    PyObject *codes = PyTuple_GetItem(spec, 1);
    if (!types || !codes || !PyTuple_Check(types) || !PyBytes_Check(codes) ||
        PyTuple_Size(types) != n || PyBytes_Size(codes) != n) {
        PyErr_Clear();
        return 0;
    }
    const char *code = PyBytes_AsString(codes);
    for (Py_ssize_t i = 0; i < n; ++i) {
        PyObject *o = PyTuple_GetItem(args, i);
        if ((PyObject *)Py_TYPE(o) != PyTuple_GetItem(types, i)) return 0;
    }
    for (Py_ssize_t i = 0; i < n; ++i) {
        PyObject *o = PyTuple_GetItem(args, i);
        uint64_t size = 8;
        slots[i] = 0;
        switch (code[i]) {
        case 'U': { /* a Python int: uint64_t */
            unsigned long long v = PyLong_AsUnsignedLongLong(o);
            if (v == (unsigned long long)-1 && PyErr_Occurred()) {
                PyErr_Clear();
                return 0;
            }
            slots[i] = (uint64_t)v;
            break;
        }
        case 'F': { /* a Python float: double */
            double v = PyFloat_AsDouble(o);
            if (v == -1.0 && PyErr_Occurred()) {
                PyErr_Clear();
                return 0;
            }
            memcpy(&slots[i], &v, 8);
            break;
        }
        case '@': { /* a DeviceBuffer: not freed, of the kernel's context; its address */
            PyObject *freed = PyObject_GetAttr(o, s_freed);
            if (!freed) {
                PyErr_Clear();
                return 0;
            }
            int is_freed = PyObject_IsTrue(freed);
            Py_DECREF(freed);
            PyObject *c = PyObject_GetAttr(o, s_ctx);
            if (!c) {
                PyErr_Clear();
                return 0;
            }
            Py_DECREF(c); /* still referenced by o: only its identity is compared */
            if (is_freed != 0 || c != ctx || attr_u64(o, s_address, &slots[i]) != 1) {
                PyErr_Clear();
                return 0;
            }
            break;
        }
        case '#': { /* a HostBuffer: not freed (address 0 once freed), its context open */
            PyObject *c = PyObject_GetAttr(o, s_ctx);
            if (!c) {
                PyErr_Clear();
                return 0;
            }
            uint64_t h = 0;
            int open = attr_u64(c, s_h, &h);
            Py_DECREF(c);
            if (open != 1 || !h || attr_u64(o, s_address, &slots[i]) != 1 || !slots[i]) return 0;
            break;
        }
        default: /* an exact ctypes simple type, by its struct code */
            if (!ctypes_value(o, code[i], &slots[i], &size)) return 0;
        }
        arr[i].data = &slots[i];
        arr[i].size = size;
    }
    return 1;
}

/* launch(stream, kernel, config_address, ctx, args, signatures) -> qd_status of qd_launch, or
 * None when args fit none of the signatures (a list of (types, codes), tried in order) or one
 * of their values is not what the signature's fast path takes (a freed buffer, a buffer of
 * another context, an int out of range): the caller then takes its general path, which names
 * any mistake. Nothing is queued on None. */
static PyObject *sp_launch(PyObject *self, PyObject *const *a, Py_ssize_t n) {
    (void)self;
    if (n != 6) {
        PyErr_SetString(PyExc_TypeError,
                        "launch() takes 6 arguments (stream, kernel, config, ctx, args, "
                        "signatures)");
        return NULL;
    }
    if (!f_launch) {
        PyErr_SetString(PyExc_RuntimeError, "qd._speedups: bind_launch() was not called");
        return NULL;
    }
    uint64_t s, k;
    if (!handle(a[0], &s) || !handle(a[1], &k)) return NULL;
    void *cfg = PyLong_AsVoidPtr(a[2]);
    if (cfg == NULL && PyErr_Occurred()) return NULL;
    PyObject *args = a[4], *specs = a[5];
    if (!PyTuple_Check(args) || !PyList_Check(specs)) {
        PyErr_SetString(PyExc_TypeError, "launch(): args must be a tuple, signatures a list");
        return NULL;
    }
    Py_ssize_t nargs = PyTuple_Size(args);
    if (nargs < 1 || nargs > (Py_ssize_t)QD_MAX_ARGS) Py_RETURN_NONE;
    uint64_t slots[QD_MAX_ARGS];
    qd_arg arr[QD_MAX_ARGS];
    Py_ssize_t nspecs = PyList_Size(specs);
    for (Py_ssize_t i = 0; i < nspecs; ++i) {
        PyObject *spec = PyList_GetItem(specs, i);
        if (!spec || !PyTuple_Check(spec)) {
            PyErr_Clear();
            continue;
        }
        Py_INCREF(spec); /* the list may change while another thread runs */
        int fits = pack(args, nargs, spec, a[3], slots, arr);
        Py_DECREF(spec);
        if (!fits) continue;
        qd_status status;
        Py_BEGIN_ALLOW_THREADS status =
            f_launch(s, k, (const qd_launch_config *)cfg, arr, (uint32_t)nargs);
        Py_END_ALLOW_THREADS return PyLong_FromLong((long)status);
    }
    Py_RETURN_NONE;
}

/* acquire(ctx) -> the leased stream's handle, or the (negative) status. */
static PyObject *sp_acquire(PyObject *self, PyObject *ctx) {
    (void)self;
    uint64_t c;
    if (!bound() || !handle(ctx, &c)) return NULL;
    qd_stream out = 0;
    qd_status status = f_acquire(c, &out);
    return result(status, out);
}

/* release(stream) -> status (0 on success). */
static PyObject *sp_release(PyObject *self, PyObject *stream) {
    (void)self;
    uint64_t s;
    if (!bound() || !handle(stream, &s)) return NULL;
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
    if (!bound() || !handle(args[0], &c) || !handle(args[1], &s)) return NULL;
    qd_stream prev = 0;
    qd_status status = f_set_active(c, s, &prev);
    return result(status, prev);
}

/* get_active(ctx) -> this thread's active stream's handle, or the status. */
static PyObject *sp_get_active(PyObject *self, PyObject *ctx) {
    (void)self;
    uint64_t c;
    if (!bound() || !handle(ctx, &c)) return NULL;
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
    {"bind_launch", sp_bind_launch, METH_O, "bind_launch(qd_launch): the function's address."},
    {"launch", (PyCFunction)(void (*)(void))sp_launch, METH_FASTCALL,
     "launch(stream, kernel, config, ctx, args, signatures) -> status, or None: no fit."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    "qd._speedups",
    "qd's stream bookkeeping calls, compiled (see the source's header comment).",
    -1,
    methods,
    NULL,
    NULL,
    NULL,
    NULL,
};

PyMODINIT_FUNC PyInit__speedups(void) { return PyModule_Create(&module); }
