/* qd._speedups: the binding's four bookkeeping calls, Kernel.launch's packing and
 * Stream.record, compiled (optional).
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
 * StreamBase and EventBase are the bases of qd.Stream and qd.Event when the module is there:
 * they keep the fields those classes keep in __slots__ without it, StreamBase.record is
 * Stream.record (a pooled event popped, qd_event_record called with the GIL released, the Event
 * filled in C; bound by bind_record()), and EventBase's finalizer is Event.__del__ (a dropped
 * record event goes back to its pool). So s.record() runs no Python code; whatever it does not
 * take goes to the Python functions the binding uses without the module, before anything was
 * taken or queued.
 *
 * Built against the stable ABI of Python 3.10 (one .abi3.so for every later CPython) by the
 * package's build backend when a C compiler and Python's headers are there, and by
 * bindings/python/test for the in-tree suite. Without it the binding calls libqd through ctypes
 * or cffi, with the same behaviour.
 */
#define Py_LIMITED_API 0x030A0000
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <structmember.h>

#include <qd/qd.h>

#include <limits.h>
#include <stddef.h>
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

/* Stream.record and the qd.Event it makes.
 *
 * EventBase is qd.Event's base class when this module is there (qd._stream): it keeps the
 * fields that qd.Event keeps in __slots__ without it (_h, _key, _c, _ctx, _timing, _pooled) in
 * its own struct, so that record() fills them with no attribute lookup, and its finalizer does
 * what Event.__del__ does without it (a record event goes back to its context's pool, any other
 * is destroyed), in C: a dropped Event runs no Python code. */
typedef qd_status (*record_fn)(qd_stream, qd_event);
typedef qd_status (*event_destroy_fn)(qd_event);
static record_fn f_record;
static event_destroy_fn f_event_destroy;
static PyTypeObject *event_base, *event_type; /* EventBase; qd.Event, once bound */
static PyTypeObject *stream_base;             /* StreamBase */
static allocfunc event_alloc;
static PyObject *o_record_method, *o_record_slow, *o_record_failed, *o_zero;
static PyObject *s_timing;
static Py_ssize_t record_pool_max;
static PyObject *s_record_events;

/* What EventBase and StreamBase keep: the fields qd.Event and qd.Stream keep in __slots__
 * without this module. _h, _c, _key, _ctx are both's; F_A and F_B each kind's own (an Event's
 * _timing and _pooled, a Stream's _kind and _owner). Two more have no attribute: an Event's
 * F_PAIR is the (handle, c) tuple record() took it from the pool as, which its finalizer gives
 * back as it is; a Stream's F_POOLS_OF and F_POOLS are the context whose _record_events record()
 * read last and that tuple of pools (a context's pools are the same lists for its life). */
enum { F_H, F_C, F_KEY, F_CTX, F_A, F_B, F_PAIR, F_POOLS = F_PAIR, F_POOLS_OF, F_N };
typedef struct {
    PyObject_HEAD PyObject *f[F_N];
} FieldsObject;
#define FIELD(i) ((Py_ssize_t)(offsetof(FieldsObject, f) + (i) * sizeof(PyObject *)))

/* A handle's value from a Python int (unsigned long is the fast conversion where it has 64
 * bits): 1, or 0 when it is not one (no error set). */
static int u64_of(PyObject *o, uint64_t *out) {
#if ULONG_MAX == UINT64_MAX
    unsigned long v = PyLong_AsUnsignedLong(o);
    if (v == (unsigned long)-1 && PyErr_Occurred()) {
#else
    unsigned long long v = PyLong_AsUnsignedLongLong(o);
    if (v == (unsigned long long)-1 && PyErr_Occurred()) {
#endif
        PyErr_Clear();
        return 0;
    }
    *out = (uint64_t)v;
    return 1;
}

/* Whether o's int attribute `name` (a handle) is set and not 0, as Python's ``if o.name:``
 * (absent or not an int: 0). */
static int attr_open(PyObject *o, PyObject *name) {
    PyObject *v = PyObject_GetAttr(o, name);
    if (!v) {
        PyErr_Clear();
        return 0;
    }
    int open = PyLong_Check(v) && PyObject_IsTrue(v) == 1;
    Py_DECREF(v);
    return open;
}

static int fields_traverse(PyObject *self, visitproc visit, void *arg) {
    FieldsObject *o = (FieldsObject *)self;
    for (int i = 0; i < F_N; ++i) Py_VISIT(o->f[i]);
    Py_VISIT((PyObject *)Py_TYPE(self)); /* a heap type's instance refers to its type */
    return 0;
}

static int fields_clear(PyObject *self) {
    FieldsObject *o = (FieldsObject *)self;
    for (int i = 0; i < F_N; ++i) Py_CLEAR(o->f[i]);
    return 0;
}

static void fields_dealloc(PyObject *self) {
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    fields_clear(self);
    freefunc free_fn = (freefunc)PyType_GetSlot(tp, Py_tp_free);
    free_fn(self);
    Py_DECREF(tp);
}

static void event_destroy(PyObject *h) {
    uint64_t e;
    if (!f_event_destroy || !u64_of(h, &e)) return;
    Py_BEGIN_ALLOW_THREADS(void) f_event_destroy(e);
    Py_END_ALLOW_THREADS
}

/* Event.__del__: a live event of a closed context is only forgotten (the context's destroy
 * destroyed it); a live record event goes back to its context's pool while the pool has room;
 * any other live event is destroyed. Never raises (as __del__, which
 * ignores every error: a field missing stops it where the Python one would stop). */
static void event_finalize(PyObject *self) {
    FieldsObject *e = (FieldsObject *)self;
    PyObject *h = e->f[F_H];
    if (!h) return;
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#endif
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    if (PyObject_IsTrue(h) == 1 && o_zero) {
        Py_INCREF(o_zero);
        e->f[F_H] = o_zero; /* h: now this function's reference */
        PyObject *pool = e->f[F_B], *ctx = e->f[F_CTX], *c = e->f[F_C];
        if (!ctx || !attr_open(ctx, s_h)) {
            /* destroyed with its context: no C call (or a field missing, as in Python) */
        } else if (pool == Py_None) {
            event_destroy(h);
        } else if (!pool) {
            /* a field missing: the Python one stops here too */
        } else if (!PyList_Check(pool) || PyList_Size(pool) >= record_pool_max) {
            event_destroy(h);
        } else if (c) {
            PyObject *pair = e->f[F_PAIR]; /* as record() took it, if it still says h and c */
            if (pair && PyTuple_GetItem(pair, 0) == h && PyTuple_GetItem(pair, 1) == c) {
                e->f[F_PAIR] = NULL;
            } else {
                PyErr_Clear();
                pair = PyTuple_New(2);
                if (pair) {
                    Py_INCREF(h);
                    Py_INCREF(c);
                    PyTuple_SetItem(pair, 0, h);
                    PyTuple_SetItem(pair, 1, c);
                }
            }
            if (pair) {
                (void)PyList_Append(pool, pair);
                Py_DECREF(pair);
            }
        }
        Py_DECREF(h);
    }
    PyErr_Clear();
    PyErr_Restore(et, ev, tb);
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif
}

static PyMemberDef event_members[] = {
    {"_h", T_OBJECT_EX, FIELD(F_H), 0, NULL},
    {"_c", T_OBJECT_EX, FIELD(F_C), 0, NULL},
    {"_key", T_OBJECT_EX, FIELD(F_KEY), 0, NULL},
    {"_ctx", T_OBJECT_EX, FIELD(F_CTX), 0, NULL},
    {"_timing", T_OBJECT_EX, FIELD(F_A), 0, NULL},
    {"_pooled", T_OBJECT_EX, FIELD(F_B), 0, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyType_Slot event_slots[] = {
    {Py_tp_doc, "qd.Event's fields and finalizer, compiled (qd/_speedups.c)."},
    {Py_tp_members, event_members},
    {Py_tp_traverse, fields_traverse},
    {Py_tp_clear, fields_clear},
    {Py_tp_dealloc, fields_dealloc},
    {Py_tp_finalize, event_finalize},
    {0, NULL},
};

static PyType_Spec event_spec = {
    "qd._speedups.EventBase",
    sizeof(FieldsObject),
    0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    event_slots,
};

/* bind_record(qd_event_record, qd_event_destroy, Event, method, slow, failed, pool_max): the two
 * functions' addresses; qd.Event (a subclass of EventBase); the Python Stream.record (method:
 * called as it was for a call of another shape, so that its errors are Python's own); the
 * Python path (slow(stream, timing) -> Event: every case record() does not take); failed(event,
 * status), which gives the event back and raises the status's exception; how many events a
 * pool keeps. */
static PyObject *sp_bind_record(PyObject *self, PyObject *const *args, Py_ssize_t n) {
    (void)self;
    if (n != 7) {
        PyErr_SetString(PyExc_TypeError,
                        "bind_record() takes 7 arguments (qd_event_record, "
                        "qd_event_destroy, Event, method, slow, failed, "
                        "pool_max)");
        return NULL;
    }
    void *fns[2];
    for (int i = 0; i < 2; ++i) {
        fns[i] = PyLong_AsVoidPtr(args[i]);
        if (fns[i] == NULL) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_ValueError, "bind_record(): a function address is 0");
            return NULL;
        }
    }
    if (!PyType_Check(args[2]) || !PyType_IsSubtype((PyTypeObject *)args[2], event_base) ||
        !PyCallable_Check(args[3]) || !PyCallable_Check(args[4]) || !PyCallable_Check(args[5])) {
        PyErr_SetString(PyExc_TypeError,
                        "bind_record(): Event must be a subclass of "
                        "EventBase; method, slow and failed callables");
        return NULL;
    }
    Py_ssize_t pool_max = PyLong_AsSsize_t(args[6]);
    if (pool_max == -1 && PyErr_Occurred()) return NULL;
    allocfunc alloc = (allocfunc)PyType_GetSlot((PyTypeObject *)args[2], Py_tp_alloc);
    if (!alloc) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "bind_record(): no allocator");
        return NULL;
    }
    PyObject *old[4] = {(PyObject *)event_type, o_record_method, o_record_slow, o_record_failed};
    for (int i = 2; i < 6; ++i) Py_INCREF(args[i]);
    event_type = (PyTypeObject *)args[2];
    o_record_method = args[3];
    o_record_slow = args[4];
    o_record_failed = args[5];
    for (int i = 0; i < 4; ++i) Py_XDECREF(old[i]);
    event_alloc = alloc;
    record_pool_max = pool_max;
    f_record = (record_fn)fns[0];
    f_event_destroy = (event_destroy_fn)fns[1];
    Py_RETURN_NONE;
}

/* The pooled (handle, c) pair of the context's pool `pool`, taken from its end (pool.pop(): the
 * GIL is held, so no two calls take one event), or NULL when it is empty or not a list. */
static PyObject *pool_pop(PyObject *pool) {
    if (!PyList_Check(pool)) return NULL;
    Py_ssize_t size = PyList_Size(pool);
    if (size < 1) return NULL;
    PyObject *item = PyList_GetItem(pool, size - 1);
    if (!item) {
        PyErr_Clear();
        return NULL;
    }
    Py_INCREF(item);
    if (PyList_SetSlice(pool, size - 1, size, NULL) != 0) {
        PyErr_Clear();
        Py_DECREF(item);
        return NULL;
    }
    return item;
}

/* Stream.record(timing=timing) of `stream`. The hot case (an open stream of an open context,
 * timing a bool, an event in the pool of that kind) is done here; everything else is handed to
 * the Python path as it is, before anything was taken or queued, so each error is the Python
 * path's own. A failing qd_event_record goes to failed(). */
static PyObject *record(PyObject *stream, PyObject *timing) {
    if (timing != Py_False && timing != Py_True) goto slow;
    uint64_t s = 0, e = 0;
    FieldsObject *so = (FieldsObject *)stream; /* a StreamBase: stream_record's self */
    PyObject *sh = so->f[F_H], *ctx = so->f[F_CTX];
    if (!sh || !ctx || !PyLong_Check(sh) || !u64_of(sh, &s) || !s) goto slow;
    Py_INCREF(ctx);
    /* The context's open check is its pools': Context.close empties them in the same step
     * (no other thread runs between) as it sets _h to 0, and no event goes back to a closed
     * context's pool, so a pool that is not empty is an open context's. */
    PyObject *pools = NULL, *item = NULL;
    if (so->f[F_POOLS_OF] == ctx && so->f[F_POOLS]) {
        pools = so->f[F_POOLS];
        Py_INCREF(pools);
    } else {
        pools = PyObject_GetAttr(ctx, s_record_events);
        if (!pools) {
            PyErr_Clear();
            goto slow_ctx;
        }
        PyObject *old_of = so->f[F_POOLS_OF], *old = so->f[F_POOLS];
        Py_INCREF(ctx);
        Py_INCREF(pools);
        so->f[F_POOLS_OF] = ctx;
        so->f[F_POOLS] = pools;
        Py_XDECREF(old_of);
        Py_XDECREF(old);
    }
    PyObject *pool = PyTuple_Check(pools) && PyTuple_Size(pools) == 2
                         ? PyTuple_GetItem(pools, timing == Py_True)
                         : NULL;
    if (!pool || !(item = pool_pop(pool))) goto slow_ctx;
    PyObject *eh = PyTuple_Check(item) && PyTuple_Size(item) == 2 ? PyTuple_GetItem(item, 0) : NULL;
    PyObject *ec = eh ? PyTuple_GetItem(item, 1) : NULL;
    if (!ec || !PyLong_Check(eh) || !u64_of(eh, &e)) {
        PyErr_Clear();
        if (PyList_Append(pool, item) != 0) PyErr_Clear(); /* not ours to judge: give it back */
        goto slow_ctx;
    }
    FieldsObject *ev = (FieldsObject *)event_alloc(event_type, 0);
    if (!ev) {                           /* (a MemoryError): the event goes back to the pool */
        (void)PyList_Append(pool, item); /* which can only fail with another MemoryError */
        Py_DECREF(item);
        Py_DECREF(pools);
        Py_DECREF(ctx);
        return NULL;
    }
    Py_INCREF(eh);
    ev->f[F_KEY] = eh;
    Py_INCREF(ec);
    ev->f[F_C] = ec;
    ev->f[F_CTX] = ctx; /* the reference taken above */
    Py_INCREF(timing);
    ev->f[F_A] = timing;
    Py_INCREF(pool);
    ev->f[F_B] = pool;
    ev->f[F_PAIR] = item; /* the pool's reference: given back as it is */
    Py_INCREF(eh);
    ev->f[F_H] = eh;
    Py_DECREF(pools);
    qd_status status;
    Py_BEGIN_ALLOW_THREADS status = f_record(s, e);
    Py_END_ALLOW_THREADS if (status == QD_SUCCESS) return (PyObject *)ev;
    PyObject *st = PyLong_FromLong((long)status);
    PyObject *r = st ? PyObject_CallFunctionObjArgs(o_record_failed, ev, st, NULL) : NULL;
    Py_XDECREF(st);
    Py_DECREF(ev);
    return r;
slow_ctx:
    Py_XDECREF(pools);
    Py_DECREF(ctx);
slow:
    return PyObject_CallFunctionObjArgs(o_record_slow, stream, timing, NULL);
}

/* StreamBase.record, which qd._stream makes qd.Stream.record: record(self, *, timing=False).
 * A call of another shape goes to the Python method as it came, which says what is wrong. */
static PyObject *stream_record(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                               PyObject *kwnames) {
    if (!f_record) {
        PyErr_SetString(PyExc_RuntimeError, "qd._speedups: bind_record() was not called");
        return NULL;
    }
    Py_ssize_t nkw = kwnames ? PyTuple_Size(kwnames) : 0;
    if (nargs == 0 && nkw == 0) return record(self, Py_False);
    if (nargs == 0 && nkw == 1) {
        PyObject *k = PyTuple_GetItem(kwnames, 0);
        if (k == s_timing || (k && PyUnicode_Check(k) && PyUnicode_Compare(k, s_timing) == 0))
            return record(self, args[0]);
        PyErr_Clear();
    }
    PyObject *pos = PyTuple_New(nargs + 1), *kw = nkw ? PyDict_New() : NULL;
    if (!pos || (nkw && !kw)) goto done;
    Py_INCREF(self);
    PyTuple_SetItem(pos, 0, self);
    for (Py_ssize_t i = 0; i < nargs; ++i) {
        Py_INCREF(args[i]);
        PyTuple_SetItem(pos, i + 1, args[i]);
    }
    for (Py_ssize_t i = 0; i < nkw; ++i)
        if (PyDict_SetItem(kw, PyTuple_GetItem(kwnames, i), args[nargs + i]) != 0) goto done;
    PyObject *r = PyObject_Call(o_record_method, pos, kw);
    Py_DECREF(pos);
    Py_XDECREF(kw);
    return r;
done:
    Py_XDECREF(pos);
    Py_XDECREF(kw);
    return NULL;
}

static PyMethodDef stream_methods[] = {
    {"record", (PyCFunction)(void (*)(void))stream_record, METH_FASTCALL | METH_KEYWORDS,
     "record($self, /, *, timing=False)\n--\n\n"
     "A new Event recorded on this stream (``qd_event_record``): it completes when all\n"
     "work queued here so far has completed (cuda.core's and CuPy's ``record``).\n"
     "``timing=True`` makes it usable with ``Event.elapsed_ms``.\n\n"
     "The event comes from the context's pool of record events (``qd_event_create`` only\n"
     "when it is empty), and goes back to it, instead of being destroyed, when it is closed\n"
     "or collected: a wait already queued on it keeps the record it saw (qd.h)."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef stream_members[] = {
    {"_h", T_OBJECT_EX, FIELD(F_H), 0, NULL},
    {"_c", T_OBJECT_EX, FIELD(F_C), 0, NULL},
    {"_key", T_OBJECT_EX, FIELD(F_KEY), 0, NULL},
    {"_ctx", T_OBJECT_EX, FIELD(F_CTX), 0, NULL},
    {"_kind", T_OBJECT_EX, FIELD(F_A), 0, NULL},
    {"_owner", T_OBJECT_EX, FIELD(F_B), 0, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyType_Slot stream_slots[] = {
    {Py_tp_doc, "qd.Stream's fields and record method, compiled (qd/_speedups.c)."},
    {Py_tp_methods, stream_methods},
    {Py_tp_members, stream_members},
    {Py_tp_traverse, fields_traverse},
    {Py_tp_clear, fields_clear},
    {Py_tp_dealloc, fields_dealloc},
    {0, NULL},
};

static PyType_Spec stream_spec = {
    "qd._speedups.StreamBase",
    sizeof(FieldsObject),
    0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    stream_slots,
};

/* event_record(stream, event, n=1) -> 0, or the status of the first of n qd_event_record calls
 * that failed; the GIL is released once around them all. The bare call's cost as the compiled
 * module sees it (a benchmark's floor: one call from Python, or n in a C loop); not used by
 * the binding. */
static PyObject *sp_event_record(PyObject *self, PyObject *const *a, Py_ssize_t n) {
    (void)self;
    if (n != 2 && n != 3) {
        PyErr_SetString(PyExc_TypeError,
                        "event_record() takes 2 or 3 arguments (stream, "
                        "event, n=1)");
        return NULL;
    }
    if (!f_record) {
        PyErr_SetString(PyExc_RuntimeError, "qd._speedups: bind_record() was not called");
        return NULL;
    }
    uint64_t s, e;
    if (!handle(a[0], &s) || !handle(a[1], &e)) return NULL;
    long count = n == 3 ? PyLong_AsLong(a[2]) : 1;
    if (count == -1 && PyErr_Occurred()) return NULL;
    qd_status status = QD_SUCCESS;
    Py_BEGIN_ALLOW_THREADS for (long i = 0; i < count && status == QD_SUCCESS; ++i) status =
        f_record(s, e);
    Py_END_ALLOW_THREADS return PyLong_FromLong((long)status);
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
    {"bind_record", (PyCFunction)(void (*)(void))sp_bind_record, METH_FASTCALL,
     "bind_record(qd_event_record, qd_event_destroy, Event, method, slow, failed, pool_max)."},
    {"event_record", (PyCFunction)(void (*)(void))sp_event_record, METH_FASTCALL,
     "event_record(stream, event, n=1) -> status: n bare qd_event_record calls."},
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

PyMODINIT_FUNC PyInit__speedups(void) {
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    if (!s_h) s_h = PyUnicode_InternFromString("_h");
    if (!s_ctx) s_ctx = PyUnicode_InternFromString("_ctx");
    if (!s_record_events) s_record_events = PyUnicode_InternFromString("_record_events");
    if (!s_timing) s_timing = PyUnicode_InternFromString("timing");
    if (!o_zero) o_zero = PyLong_FromLong(0);
    if (!event_base) event_base = (PyTypeObject *)PyType_FromSpec(&event_spec);
    if (!stream_base) stream_base = (PyTypeObject *)PyType_FromSpec(&stream_spec);
    if (!s_h || !s_ctx || !s_record_events || !s_timing || !o_zero || !event_base || !stream_base) {
        Py_DECREF(m);
        return NULL;
    }
    PyTypeObject *types[2] = {event_base, stream_base};
    const char *names[2] = {"EventBase", "StreamBase"};
    for (int i = 0; i < 2; ++i) {
        Py_INCREF(types[i]);
        if (PyModule_AddObject(m, names[i], (PyObject *)types[i]) != 0) {
            Py_DECREF(types[i]);
            Py_DECREF(m);
            return NULL;
        }
    }
    return m;
}
