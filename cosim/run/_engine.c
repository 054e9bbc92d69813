/* The direct engine's per-step bookkeeping in C (cosim.run.direct): the same dicts, lists and values as its
 * Python form, built without the interpreter's per-item work.
 *
 * Three functions, each the exact counterpart of a Python function it stands in for (see their docstrings in
 * cosim/run/direct.py and cosim/sdk.py):
 *   collapsed_inputs(reads, collapse, held, t)   DirectEngine._collapsed_inputs (None: take DirectEngine._inputs)
 *   recorded_refs(row_plan, t)                   DirectEngine._recorded_refs
 *   data_of(sim, plan)                           CosimSim._data_of
 * Only data moves here: no arithmetic but Python's own (several sources into one input are summed by the builtin
 * sum, as the Python form sums them). What is read through a method there (a cache's output_at, an entity's
 * getter) is called here too. Any exception but the KeyError the Python form catches propagates unchanged.
 *
 * A CPython extension module loaded through ctypes (cosim.sdk.load_library checks the SHA-256 compiled in below,
 * as for every C part): cosim_engine_module() hands the module object to Python once; its functions are then
 * called as builtins. Built by make build with the headers of the Python that runs it. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#ifndef COSIM_SOURCE_SHA256
#define COSIM_SOURCE_SHA256 ""
#endif

const char *cosim_source_sha256(void) { return COSIM_SOURCE_SHA256; }

/* the Python this was built for (PY_VERSION_HEX): extension code is not for another minor version's interpreter,
 * whose objects may be laid out otherwise; cosim.sdk asks before it takes the module */
#ifndef COSIM_BUILT_FOR_HEXVERSION
#define COSIM_BUILT_FOR_HEXVERSION PY_VERSION_HEX
#endif
unsigned long cosim_python_hexversion(void) { return COSIM_BUILT_FOR_HEXVERSION; }

static PyObject *s_newest, *s_newest_t, *s_output_at, *s_out, *s_get, *sum_builtin;

/* 1 when ``obj`` is a tuple of ``n`` items, else 0 with a TypeError naming what was expected (the plans are the
 * engine's own: a shape this does not take is a bug there, reported rather than read past) */
static int is_tuple_of(PyObject *obj, Py_ssize_t n, const char *what) {
    if (PyTuple_CheckExact(obj) && PyTuple_GET_SIZE(obj) == n)
        return 1;
    PyErr_Format(PyExc_TypeError, "cosim.run._engine: %s must be a tuple of %zd", what, n);
    return 0;
}

/* src.newest if src.newest_t is not None and src.newest_t <= limit else src.output_at(limit): a new reference */
static PyObject *output_at(PyObject *src, PyObject *limit) {
    PyObject *newest_t = PyObject_GetAttr(src, s_newest_t);
    if (newest_t == NULL)
        return NULL;
    if (newest_t != Py_None) {
        int le = PyObject_RichCompareBool(newest_t, limit, Py_LE);
        Py_DECREF(newest_t);
        if (le < 0)
            return NULL;
        if (le)
            return PyObject_GetAttr(src, s_newest);
    } else {
        Py_DECREF(newest_t);
    }
    return PyObject_CallMethodOneArg(src, s_output_at, limit);
}

/* limit = t - shift, as Python computes it */
static PyObject *limit_of(PyObject *t, PyObject *shift) { return PyNumber_Subtract(t, shift); }

/* container[key] (a new reference), NULL with KeyError set when missing */
static PyObject *get_item(PyObject *container, PyObject *key) {
    if (PyDict_CheckExact(container)) {
        PyObject *value = PyDict_GetItemWithError(container, key);
        if (value == NULL) {
            if (!PyErr_Occurred())
                PyErr_SetObject(PyExc_KeyError, key);
            return NULL;
        }
        Py_INCREF(value);
        return value;
    }
    return PyObject_GetItem(container, key);
}

/* d.setdefault(key, {}): a borrowed reference */
static PyObject *setdefault_dict(PyObject *d, PyObject *key) {
    PyObject *fresh = PyDict_New();
    if (fresh == NULL)
        return NULL;
    PyObject *got = PyDict_SetDefault(d, key, fresh);
    Py_DECREF(fresh);
    return got;
}

/* 1: the value of held[(dst_eid, dst_attr)] in *value (borrowed); 0: not held; -1: an error */
static int held_value(PyObject *held, PyObject *dst_eid, PyObject *dst_attr, PyObject **value) {
    PyObject *key = PyTuple_Pack(2, dst_eid, dst_attr);
    if (key == NULL)
        return -1;
    *value = PyDict_GetItemWithError(held, key);
    Py_DECREF(key);
    if (*value == NULL)
        return PyErr_Occurred() ? -1 : 0;
    return 1;
}

static PyObject *collapsed_inputs(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "collapsed_inputs(reads, collapse, held, t)");
        return NULL;
    }
    PyObject *reads = args[0], *collapse = args[1], *held = args[2], *t = args[3];
    if (!PyList_CheckExact(reads) || !PyList_CheckExact(collapse) || !PyDict_CheckExact(held)) {
        PyErr_SetString(PyExc_TypeError, "collapsed_inputs: reads and collapse must be lists, held a dict");
        return NULL;
    }
    PyObject *flat = PyList_New(0), *inputs = NULL, *values = NULL;
    if (flat == NULL)
        return NULL;
    for (Py_ssize_t r = 0; r < PyList_GET_SIZE(reads); r++) {
        PyObject *read = PyList_GET_ITEM(reads, r);  /* (src, shift, groups) */
        if (!PyTuple_CheckExact(read) || PyTuple_GET_SIZE(read) != 3) {
            PyErr_SetString(PyExc_TypeError, "collapsed_inputs: a read is (source, shift, groups)");
            goto key_error;
        }
        PyObject *limit = limit_of(t, PyTuple_GET_ITEM(read, 1));
        if (limit == NULL)
            goto key_error;
        PyObject *data = output_at(PyTuple_GET_ITEM(read, 0), limit);
        Py_DECREF(limit);
        if (data == NULL)
            goto key_error;
        PyObject *groups = PyTuple_GET_ITEM(read, 2);
        Py_ssize_t n_groups = PyList_CheckExact(groups) ? PyList_GET_SIZE(groups) : -1;
        if (n_groups < 0) {
            Py_DECREF(data);
            PyErr_SetString(PyExc_TypeError, "collapsed_inputs: groups must be a list");
            goto key_error;
        }
        for (Py_ssize_t g = 0; g < n_groups; g++) {
            PyObject *group = PyList_GET_ITEM(groups, g);  /* (src_eid, getter, one) */
            if (!is_tuple_of(group, 3, "a group (source eid, getter, one)")) {
                Py_DECREF(data);
                goto key_error;
            }
            PyObject *entity = get_item(data, PyTuple_GET_ITEM(group, 0)), *got;
            if (entity == NULL) {
                Py_DECREF(data);
                goto key_error;
            }
            got = PyObject_CallOneArg(PyTuple_GET_ITEM(group, 1), entity);
            Py_DECREF(entity);
            if (got == NULL) {
                Py_DECREF(data);
                goto key_error;
            }
            int one = PyObject_IsTrue(PyTuple_GET_ITEM(group, 2)), bad;
            if (one < 0) {
                Py_DECREF(got);
                Py_DECREF(data);
                goto key_error;
            }
            if (one) {
                bad = PyList_Append(flat, got);
            } else {
                Py_ssize_t end = PyList_GET_SIZE(flat);
                bad = PyList_SetSlice(flat, end, end, got) < 0;  /* flat.extend(got) */
            }
            Py_DECREF(got);
            if (bad) {
                Py_DECREF(data);
                goto key_error;
            }
        }
        Py_DECREF(data);
    }
    int any_held = PyDict_GET_SIZE(held) > 0;
    inputs = PyDict_New();
    if (inputs == NULL)
        goto fail;
    for (Py_ssize_t c = 0; c < PyList_GET_SIZE(collapse); c++) {
        PyObject *entry = PyList_GET_ITEM(collapse, c);  /* (dst_eid, [(dst_attr, where), ...], single) */
        if (!is_tuple_of(entry, 3, "a collapse entry (eid, attrs, single)"))
            goto fail;
        if (!PyList_CheckExact(PyTuple_GET_ITEM(entry, 1))) {
            PyErr_SetString(PyExc_TypeError, "cosim.run._engine: a collapse entry's attrs must be a list");
            goto fail;
        }
        PyObject *dst_eid = PyTuple_GET_ITEM(entry, 0), *attrs = PyTuple_GET_ITEM(entry, 1);
        int single = PyObject_IsTrue(PyTuple_GET_ITEM(entry, 2));
        if (single < 0)
            goto fail;
        values = PyDict_New();
        if (values == NULL)
            goto fail;
        for (Py_ssize_t a = 0; a < PyList_GET_SIZE(attrs); a++) {
            PyObject *pair = PyList_GET_ITEM(attrs, a);
            if (!is_tuple_of(pair, 2, "an attribute's (name, where)"))
                goto fail;
            if (!PyLong_CheckExact(PyTuple_GET_ITEM(pair, 1)) && !PyTuple_CheckExact(PyTuple_GET_ITEM(pair, 1))) {
                PyErr_SetString(PyExc_TypeError, "cosim.run._engine: where must be an int or a tuple");
                goto fail;
            }
            PyObject *dst_attr = PyTuple_GET_ITEM(pair, 0), *where = PyTuple_GET_ITEM(pair, 1), *value;
            if (any_held) {
                int is_held = held_value(held, dst_eid, dst_attr, &value);
                if (is_held < 0)
                    goto fail;
                if (is_held) {
                    if (PyDict_SetItem(values, dst_attr, value) < 0)
                        goto fail;
                    continue;
                }
            }
            if (PyLong_CheckExact(where)) {  /* one source */
                Py_ssize_t i = PyLong_AsSsize_t(where);
                if (i == -1 && PyErr_Occurred())
                    goto fail;
                if (i < 0 || i >= PyList_GET_SIZE(flat)) {  /* (a plan _input_plan made never points past it) */
                    PyErr_SetString(PyExc_IndexError, "collapsed_inputs: a position past the values read");
                    goto fail;
                }
                value = PyList_GET_ITEM(flat, i);
                if (value != Py_None && PyDict_SetItem(values, dst_attr, value) < 0)
                    goto fail;
                continue;
            }
            /* several sources: the present ones, the one itself or their sum (the builtin's, in order) */
            PyObject *present = PyList_New(0);
            if (present == NULL)
                goto fail;
            for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(where); k++) {
                Py_ssize_t i = PyLong_AsSsize_t(PyTuple_GET_ITEM(where, k));
                if ((i == -1 && PyErr_Occurred()) || i < 0 || i >= PyList_GET_SIZE(flat)) {
                    if (!PyErr_Occurred())
                        PyErr_SetString(PyExc_IndexError, "collapsed_inputs: a position past the values read");
                    Py_DECREF(present);
                    goto fail;
                }
                PyObject *v = PyList_GET_ITEM(flat, i);
                if (v != Py_None && PyList_Append(present, v) < 0) {
                    Py_DECREF(present);
                    goto fail;
                }
            }
            Py_ssize_t n_present = PyList_GET_SIZE(present);
            if (n_present) {
                PyObject *total = n_present == 1 ? Py_NewRef(PyList_GET_ITEM(present, 0))
                                                 : PyObject_CallOneArg(sum_builtin, present);
                int bad = total == NULL || PyDict_SetItem(values, dst_attr, total) < 0;
                Py_XDECREF(total);
                if (bad) {
                    Py_DECREF(present);
                    goto fail;
                }
            }
            Py_DECREF(present);
        }
        int bad = PyDict_SetItem(inputs, dst_eid, values) < 0;
        Py_CLEAR(values);
        if (bad)
            goto fail;
    }
    /* an input held from outside that no connection feeds: after the rest, in the held order (one set in its
     * connected place above stays there, its value the same) */
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    while (PyDict_Next(held, &pos, &key, &value)) {
        PyObject *into = setdefault_dict(inputs, PyTuple_GET_ITEM(key, 0));
        if (into == NULL || PyDict_SetItem(into, PyTuple_GET_ITEM(key, 1), value) < 0)
            goto fail;
    }
    Py_DECREF(flat);
    return inputs;
key_error:
    if (!PyErr_ExceptionMatches(PyExc_KeyError))
        goto fail;
    PyErr_Clear();
    Py_DECREF(flat);
    Py_RETURN_NONE;
fail:
    Py_DECREF(flat);
    Py_XDECREF(inputs);
    Py_XDECREF(values);
    return NULL;
}

/* data.get(eid, empty): a new reference */
static PyObject *get_or(PyObject *data, PyObject *eid, PyObject *empty) {
    if (PyDict_CheckExact(data)) {
        PyObject *value = PyDict_GetItemWithError(data, eid);
        if (value == NULL) {
            if (PyErr_Occurred())
                return NULL;
            value = empty;
        }
        return Py_NewRef(value);
    }
    return PyObject_CallMethodObjArgs(data, s_get, eid, empty, NULL);
}

static PyObject *recorded_refs(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || !PyList_CheckExact(args[0])) {
        PyErr_SetString(PyExc_TypeError, "recorded_refs(row_plan: list, t)");
        return NULL;
    }
    PyObject *plan = args[0], *t = args[1];
    PyObject *refs = PyList_New(0), *empty = PyDict_New();
    if (refs == NULL || empty == NULL)
        goto fail;
    for (Py_ssize_t r = 0; r < PyList_GET_SIZE(plan); r++) {
        PyObject *entry = PyList_GET_ITEM(plan, r);  /* (src, shift, eids) */
        if (!is_tuple_of(entry, 3, "a row plan's entry (source, shift, eids)"))
            goto fail;
        if (!PyList_CheckExact(PyTuple_GET_ITEM(entry, 2))) {
            PyErr_SetString(PyExc_TypeError, "cosim.run._engine: a row plan's eids must be a list");
            goto fail;
        }
        PyObject *limit = limit_of(t, PyTuple_GET_ITEM(entry, 1));
        if (limit == NULL)
            goto fail;
        PyObject *data = output_at(PyTuple_GET_ITEM(entry, 0), limit);
        Py_DECREF(limit);
        if (data == NULL)
            goto fail;
        PyObject *eids = PyTuple_GET_ITEM(entry, 2);
        for (Py_ssize_t e = 0; e < PyList_GET_SIZE(eids); e++) {
            PyObject *ref = get_or(data, PyList_GET_ITEM(eids, e), empty);
            int bad = ref == NULL || PyList_Append(refs, ref) < 0;
            Py_XDECREF(ref);
            if (bad) {
                Py_DECREF(data);
                goto fail;
            }
        }
        Py_DECREF(data);
    }
    Py_DECREF(empty);
    return refs;
fail:
    Py_XDECREF(refs);
    Py_XDECREF(empty);
    return NULL;
}

/* values.keys() == names for a dict and a frozenset: 1, 0, or -1 on an error */
static int keys_equal(PyObject *values, PyObject *names) {
    if (PyDict_CheckExact(values) && PyAnySet_CheckExact(names)) {
        if (PyDict_GET_SIZE(values) != PySet_GET_SIZE(names))
            return 0;
        Py_ssize_t pos = 0;
        PyObject *key, *value;
        while (PyDict_Next(values, &pos, &key, &value)) {
            int in = PySet_Contains(names, key);
            if (in <= 0)
                return in;
        }
        return 1;
    }
    PyObject *keys = PyObject_CallMethod(values, "keys", NULL);
    if (keys == NULL)
        return -1;
    int equal = PyObject_RichCompareBool(keys, names, Py_EQ);
    Py_DECREF(keys);
    return equal;
}

static PyObject *data_of(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || !PyList_CheckExact(args[1])) {
        PyErr_SetString(PyExc_TypeError, "data_of(sim, plan: list)");
        return NULL;
    }
    PyObject *plan = args[1], *data = PyDict_New(), *out = NULL, *values = NULL, *got = NULL, *copy = NULL;
    if (data == NULL)
        return NULL;
    out = PyObject_GetAttr(args[0], s_out);
    if (out == NULL)
        goto fail;
    for (Py_ssize_t p = 0; p < PyList_GET_SIZE(plan); p++) {
        PyObject *entry = PyList_GET_ITEM(plan, p);  /* (eid, key, getter, names) */
        if (!is_tuple_of(entry, 4, "a request plan's entry (eid, attrs, getter, names)"))
            goto fail;
        if (!PyTuple_CheckExact(PyTuple_GET_ITEM(entry, 1))) {
            PyErr_SetString(PyExc_TypeError, "cosim.run._engine: a request's attrs must be a tuple");
            goto fail;
        }
        PyObject *eid = PyTuple_GET_ITEM(entry, 0), *key = PyTuple_GET_ITEM(entry, 1);
        values = get_item(out, eid);
        if (values == NULL)
            goto fail;
        int whole = keys_equal(values, PyTuple_GET_ITEM(entry, 3));
        if (whole < 0)
            goto fail;
        if (whole) {  /* every output of the entity asked for: one copy */
            copy = PyDict_CheckExact(values) ? PyDict_Copy(values) : PyObject_CallOneArg((PyObject *)&PyDict_Type, values);
        } else {
            got = PyObject_CallOneArg(PyTuple_GET_ITEM(entry, 2), values);
            Py_ssize_t n = PyTuple_GET_SIZE(key);
            copy = PyDict_New();
            if (copy == NULL)
                goto fail;
            if (got != NULL && PyTuple_CheckExact(got) && PyTuple_GET_SIZE(got) == n) {
                for (Py_ssize_t k = 0; k < n; k++)
                    if (PyDict_SetItem(copy, PyTuple_GET_ITEM(key, k), PyTuple_GET_ITEM(got, k)) < 0)
                        goto fail;
            } else if (got == NULL && PyErr_ExceptionMatches(PyExc_KeyError)) {
                PyErr_Clear();  /* {attr: values.get(attr) for attr in key} */
                for (Py_ssize_t k = 0; k < n; k++) {
                    PyObject *attr = PyTuple_GET_ITEM(key, k);
                    PyObject *value = get_or(values, attr, Py_None);
                    int bad = value == NULL || PyDict_SetItem(copy, attr, value) < 0;
                    Py_XDECREF(value);
                    if (bad)
                        goto fail;
                }
            } else if (got == NULL) {
                goto fail;
            } else {  /* not a tuple of their number: dict(zip(key, got)) as Python makes it */
                PyObject *zipped = PyObject_CallFunctionObjArgs((PyObject *)&PyZip_Type, key, got, NULL);
                Py_CLEAR(copy);
                if (zipped == NULL)
                    goto fail;
                copy = PyObject_CallOneArg((PyObject *)&PyDict_Type, zipped);
                Py_DECREF(zipped);
            }
            Py_CLEAR(got);
        }
        if (copy == NULL || PyDict_SetItem(data, eid, copy) < 0)
            goto fail;
        Py_CLEAR(copy);
        Py_CLEAR(values);
    }
    Py_DECREF(out);
    return data;
fail:
    Py_DECREF(data);
    Py_XDECREF(out);
    Py_XDECREF(values);
    Py_XDECREF(got);
    Py_XDECREF(copy);
    return NULL;
}

/* -- the recorder's row ------------------------------------------------------------------------------------- */
/* one cell as the recorder's float64 buffer holds it (cosim.run.recorder._put_row / _floats): PyFloat_AsDouble's
 * number (what struct's "d" and array("d") take), NaN for None, else to_float(value) (recorder._float: a string
 * parsed, NaN for what is no number); an error but a TypeError or ValueError propagates, as there. 0 or -1. */
static int cell_double(PyObject *value, PyObject *to_float, double *into) {
    if (PyFloat_CheckExact(value)) {
        *into = PyFloat_AS_DOUBLE(value);
        return 0;
    }
    double x = PyFloat_AsDouble(value);
    if (!(x == -1.0 && PyErr_Occurred())) {
        *into = x;
        return 0;
    }
    if (!PyErr_ExceptionMatches(PyExc_TypeError) && !PyErr_ExceptionMatches(PyExc_ValueError))
        return -1;
    PyErr_Clear();
    if (value == Py_None) {
        *into = Py_NAN;
        return 0;
    }
    PyObject *number = PyObject_CallOneArg(to_float, value);
    if (number == NULL)
        return -1;
    x = PyFloat_AsDouble(number);
    Py_DECREF(number);
    if (x == -1.0 && PyErr_Occurred())
        return -1;
    *into = x;
    return 0;
}

/* put_refs(view, offset, reads, refs, to_float): ParquetRecorder.append_refs's cells, written into the writable
 * buffer ``view`` from byte ``offset`` on as _put_row writes them: True, or False when a dict lacks an attribute
 * read (the Python form then takes the row cell by cell, each missing one null). */
static PyObject *put_refs(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 5 || !PyList_CheckExact(args[2]) || !PyList_CheckExact(args[3])) {
        PyErr_SetString(PyExc_TypeError, "put_refs(view, offset, reads: list, refs: list, to_float)");
        return NULL;
    }
    Py_ssize_t offset = PyLong_AsSsize_t(args[1]);
    if (offset == -1 && PyErr_Occurred())
        return NULL;
    PyObject *reads = args[2], *refs = args[3], *to_float = args[4], *result = NULL;
    Py_buffer buffer;
    if (PyObject_GetBuffer(args[0], &buffer, PyBUF_WRITABLE) < 0)
        return NULL;
    Py_ssize_t capacity = offset < 0 || offset > buffer.len ? 0 : (buffer.len - offset) / (Py_ssize_t)sizeof(double);
    double *row = (double *)((char *)buffer.buf + (offset < 0 || offset > buffer.len ? 0 : offset)), *start = row;
    for (Py_ssize_t r = 0; r < PyList_GET_SIZE(reads); r++) {
        PyObject *read = PyList_GET_ITEM(reads, r);  /* (index, names, getter) */
        if (!PyTuple_CheckExact(read) || PyTuple_GET_SIZE(read) != 3 || !PyList_CheckExact(PyTuple_GET_ITEM(read, 1))) {
            PyErr_SetString(PyExc_TypeError, "put_refs: a read is (index, names: list, getter)");
            goto done;
        }
        Py_ssize_t index = PyLong_AsSsize_t(PyTuple_GET_ITEM(read, 0));
        if (index == -1 && PyErr_Occurred())
            goto done;
        if (index < 0 || index >= PyList_GET_SIZE(refs)) {
            PyErr_SetString(PyExc_IndexError, "list index out of range");
            goto done;
        }
        PyObject *values = PyList_GET_ITEM(refs, index), *names = PyTuple_GET_ITEM(read, 1);
        Py_ssize_t n = PyList_GET_SIZE(names);
        if (row - start + n > capacity) {
            PyErr_SetString(PyExc_ValueError, "put_refs: the row runs past the buffer");
            goto done;
        }
        /* a dict of exactly these outputs in this order (list(values) == names): its values in order */
        int in_order = PyDict_CheckExact(values) && PyDict_GET_SIZE(values) == n;
        if (in_order) {
            Py_ssize_t pos = 0, k = 0;
            PyObject *key, *value;
            while (in_order && PyDict_Next(values, &pos, &key, &value)) {
                PyObject *name = PyList_GET_ITEM(names, k);
                int same = key == name ? 1 : PyObject_RichCompareBool(key, name, Py_EQ);
                if (same < 0)
                    goto done;
                in_order = same;
                if (in_order && cell_double(value, to_float, row + k) < 0)
                    goto done;
                k++;
            }
        }
        if (!in_order) {  /* getter(values): a tuple of the names' values */
            PyObject *got = PyObject_CallOneArg(PyTuple_GET_ITEM(read, 2), values);
            if (got == NULL) {
                if (!PyErr_ExceptionMatches(PyExc_KeyError))
                    goto done;
                PyErr_Clear();
                result = Py_NewRef(Py_False);
                goto done;
            }
            if (!PyTuple_CheckExact(got) || PyTuple_GET_SIZE(got) != n) {
                Py_DECREF(got);
                PyErr_SetString(PyExc_TypeError, "put_refs: a getter gave no tuple of its names' values");
                goto done;
            }
            for (Py_ssize_t k = 0; k < n; k++)
                if (cell_double(PyTuple_GET_ITEM(got, k), to_float, row + k) < 0) {
                    Py_DECREF(got);
                    goto done;
                }
            Py_DECREF(got);
        }
        row += n;
    }
    result = Py_NewRef(Py_True);
done:
    PyBuffer_Release(&buffer);
    return result;
}

/* -- stepping ----------------------------------------------------------------------------------------------- */
/* set by configure(): CosimSim.step_collapsed (stepped inline when an adapter keeps it), the Python forms this
 * falls back to, and the checks' errors (raised by Python functions, with Python's messages) */
static PyObject *base_step_collapsed, *base_seconds, *check_next, *bad_output_time, *one_int;
static PyObject *s_next_t, *s_feed, *s_tap, *s_collapsible, *s_pulls, *s_held, *s_input_plan, *s_request, *s_read,
    *s_obj, *s_cache, *s_last_t, *s_until, *s_step_sim, *s_step_collapsed, *s_time_ticks, *s_ticks_per_s,
    *s_seconds, *s_step_entities, *s_step_ticks, *s_time;

static PyObject *configure(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "configure(CosimSim.step_collapsed, CosimSim.seconds, _check_next, "
                                         "_bad_output_time)");
        return NULL;
    }
    Py_XSETREF(base_step_collapsed, Py_NewRef(args[0]));
    Py_XSETREF(base_seconds, Py_NewRef(args[1]));
    Py_XSETREF(check_next, Py_NewRef(args[2]));
    Py_XSETREF(bad_output_time, Py_NewRef(args[3]));
    Py_RETURN_NONE;
}

/* an attribute that must be there (a new reference) */
#define GET(obj, name) PyObject_GetAttr((obj), (name))

/* 1: the simulator steps the usual way (not in a worker, collapsible, no tap, its plans made), 0: not, -1: error */
static int usual(PyObject *sim) {
    PyObject *v;
    int ok;
    if ((v = GET(sim, s_feed)) == NULL)
        return -1;
    ok = v == Py_None;
    Py_DECREF(v);
    if (!ok)
        return 0;
    if ((v = GET(sim, s_tap)) == NULL)
        return -1;
    ok = v == Py_None;
    Py_DECREF(v);
    if (!ok)
        return 0;
    if ((v = GET(sim, s_collapsible)) == NULL)
        return -1;
    ok = v == Py_True;
    Py_DECREF(v);
    return ok;
}

/* CosimSim.step_collapsed(obj, t, inputs) inline when the adapter keeps it (and CosimSim.seconds): the next step
 * time (a new reference). Its attributes are read and written as the Python form does, in its order. */
/* 1 when obj.<name> is CosimSim's own method ``base`` bound to obj (not an adapter's, nor one set on the object
 * itself), 0 when not, -1 on an error */
static int is_base_method(PyObject *obj, PyObject *name, PyObject *base) {
    PyObject *bound = PyObject_GetAttr(obj, name);
    if (bound == NULL)
        return -1;
    int same = PyMethod_Check(bound) && PyMethod_GET_FUNCTION(bound) == base && PyMethod_GET_SELF(bound) == obj;
    Py_DECREF(bound);
    return same;
}

static PyObject *step_collapsed(PyObject *obj, PyObject *t, PyObject *inputs) {
    int inline_step = is_base_method(obj, s_step_collapsed, base_step_collapsed);
    if (inline_step < 0)
        return NULL;
    if (!inline_step)
        return PyObject_CallMethodObjArgs(obj, s_step_collapsed, t, inputs, NULL);
    PyObject *ticks = NULL, *per_s = NULL, *seconds = NULL, *done = NULL, *now = NULL, *step = NULL, *next = NULL;
    /* self.time_ticks = int(time) */
    if ((ticks = PyNumber_Long(t)) == NULL || PyObject_SetAttr(obj, s_time_ticks, ticks) < 0)
        goto done;
    Py_CLEAR(ticks);
    /* self.step_entities(self.seconds(self.time_ticks), inputs) */
    if ((ticks = GET(obj, s_time_ticks)) == NULL)
        goto done;
    int base = is_base_method(obj, s_seconds, base_seconds);
    if (base < 0)
        goto done;
    if (base) {  /* the ticks when ticks_per_s == 1, else the method */
        if ((per_s = GET(obj, s_ticks_per_s)) == NULL)
            goto done;
        int one = PyObject_RichCompareBool(per_s, one_int, Py_EQ);
        if (one < 0)
            goto done;
        seconds = one ? Py_NewRef(ticks) : PyObject_CallMethodOneArg(obj, s_seconds, ticks);
    } else {
        seconds = PyObject_CallMethodOneArg(obj, s_seconds, ticks);
    }
    if (seconds == NULL || (done = PyObject_CallMethodObjArgs(obj, s_step_entities, seconds, inputs, NULL)) == NULL)
        goto done;
    /* return self.time_ticks + self.step_ticks */
    if ((now = GET(obj, s_time_ticks)) != NULL && (step = GET(obj, s_step_ticks)) != NULL)
        next = PyNumber_Add(now, step);
done:
    Py_XDECREF(ticks);
    Py_XDECREF(per_s);
    Py_XDECREF(seconds);
    Py_XDECREF(done);
    Py_XDECREF(now);
    Py_XDECREF(step);
    return next;
}

/* DirectEngine._step_sim(engine, sim, t) for a simulator that steps the usual way (usual()): 0, or -1 on an error.
 * A step whose inputs cannot be collapsed (an output missing) takes the Python form, which warns as mosaik does. */
static int step_usual(PyObject *engine, PyObject *sim, PyObject *t) {
    PyObject *obj = NULL, *inputs = NULL, *nxt = NULL, *request = NULL, *data = NULL, *out_t = NULL, *cache = NULL,
             *until = NULL, *plan = NULL, *pulls = NULL, *held = NULL, *read = NULL;
    int result = -1;
    if ((request = GET(sim, s_request)) == NULL || (read = GET(sim, s_read)) == NULL)
        goto done;
    int requested = PyObject_IsTrue(request);
    if (requested < 0)
        goto done;
    if (requested && read == Py_None)
        goto python;  /* (the reader is made at the first step) */
    if ((pulls = GET(sim, s_pulls)) == NULL || (held = GET(sim, s_held)) == NULL)
        goto done;
    int pulled = PyObject_IsTrue(pulls), holds = PyObject_IsTrue(held);
    if (pulled < 0 || holds < 0)
        goto done;
    if (pulled || holds) {
        if ((plan = GET(sim, s_input_plan)) == NULL)
            goto done;
        if (plan == Py_None || !PyTuple_CheckExact(plan) || PyTuple_GET_SIZE(plan) != 2 || !PyDict_CheckExact(held))
            goto python;  /* (the plan is made at the first step) */
        PyObject *args[4] = {PyTuple_GET_ITEM(plan, 0), PyTuple_GET_ITEM(plan, 1), held, t};
        if ((inputs = collapsed_inputs(NULL, args, 4)) == NULL)
            goto done;
        if (inputs == Py_None)
            goto python;
    } else if ((inputs = PyDict_New()) == NULL) {
        goto done;
    }
    if ((obj = GET(sim, s_obj)) == NULL || (nxt = step_collapsed(obj, t, inputs)) == NULL)
        goto done;
    /* type(nxt) is not int or nxt <= t: mosaik's checks, in Python */
    int later = PyLong_CheckExact(nxt) ? PyObject_RichCompareBool(nxt, t, Py_GT) : 0;
    if (later < 0)
        goto done;
    if (!later) {
        PyObject *checked = PyObject_CallFunctionObjArgs(check_next, sim, t, nxt, NULL);
        if (checked == NULL)
            goto done;
        Py_DECREF(checked);
    }
    if (requested) {
        if ((data = PyObject_CallNoArgs(read)) == NULL)
            goto done;
        /* out_t = data.pop("time", t) */
        if (PyDict_CheckExact(data)) {
            PyObject *found = PyDict_GetItemWithError(data, s_time);
            if (found == NULL && PyErr_Occurred())
                goto done;
            out_t = Py_NewRef(found != NULL ? found : t);
            if (found != NULL && PyDict_DelItem(data, s_time) < 0)
                goto done;
        } else if ((out_t = PyObject_CallMethod(data, "pop", "OO", s_time, t)) == NULL) {
            goto done;
        }
        int early = PyObject_RichCompareBool(out_t, t, Py_LT);
        if (early < 0)
            goto done;
        if (early) {
            PyObject *raised = PyObject_CallFunctionObjArgs(bad_output_time, sim, out_t, t, NULL);
            Py_XDECREF(raised);
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_RuntimeError, "cosim.run._engine: an output time before the step's");
            goto done;
        }
        /* sim.newest_t, sim.newest = (None, None) if out_t in cache else (out_t, data); cache[out_t] = data */
        if ((cache = GET(sim, s_cache)) == NULL)
            goto done;
        int cached = PySequence_Contains(cache, out_t);
        if (cached < 0)
            goto done;
        if (PyObject_SetAttr(sim, s_newest_t, cached ? Py_None : out_t) < 0
                || PyObject_SetAttr(sim, s_newest, cached ? Py_None : data) < 0
                || PyObject_SetItem(cache, out_t, data) < 0)
            goto done;
    }
    /* sim.last_t = t; sim.next_t = nxt if nxt < self.until else None */
    if (PyObject_SetAttr(sim, s_last_t, t) < 0 || (until = GET(engine, s_until)) == NULL)
        goto done;
    int before = PyObject_RichCompareBool(nxt, until, Py_LT);
    if (before < 0 || PyObject_SetAttr(sim, s_next_t, before ? nxt : Py_None) < 0)
        goto done;
    result = 0;
    goto done;
python:
    Py_CLEAR(inputs);
    PyObject *stepped = PyObject_CallMethodObjArgs(engine, s_step_sim, sim, t, NULL);
    if (stepped != NULL) {
        Py_DECREF(stepped);
        result = 0;
    }
done:
    Py_XDECREF(obj);
    Py_XDECREF(inputs);
    Py_XDECREF(nxt);
    Py_XDECREF(request);
    Py_XDECREF(data);
    Py_XDECREF(out_t);
    Py_XDECREF(cache);
    Py_XDECREF(until);
    Py_XDECREF(plan);
    Py_XDECREF(pulls);
    Py_XDECREF(held);
    Py_XDECREF(read);
    return result;
}

/* step_due(engine, order, t): for sim in order: if sim.next_t == t: engine._step_sim(sim, t), with the usual
 * simulators' steps made here (step_usual) and the others' (a worker's feed, the recorder, a tap) by the method */
static PyObject *step_due(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3 || !PyList_CheckExact(args[1]) || base_step_collapsed == NULL) {
        PyErr_SetString(PyExc_TypeError, "step_due(engine, order: list, t), after configure()");
        return NULL;
    }
    PyObject *engine = args[0], *order = args[1], *t = args[2];
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(order); i++) {
        PyObject *sim = PyList_GET_ITEM(order, i), *next_t = GET(sim, s_next_t);
        if (next_t == NULL)
            return NULL;
        int due = PyObject_RichCompareBool(next_t, t, Py_EQ);
        Py_DECREF(next_t);
        if (due < 0)
            return NULL;
        if (!due)
            continue;
        Py_INCREF(sim);  /* (the list may change under a simulator's step) */
        int way = usual(sim), failed;
        if (way > 0) {
            failed = step_usual(engine, sim, t) < 0;
        } else if (way == 0) {
            PyObject *stepped = PyObject_CallMethodObjArgs(engine, s_step_sim, sim, t, NULL);
            failed = stepped == NULL;
            Py_XDECREF(stepped);
        } else {
            failed = 1;
        }
        Py_DECREF(sim);
        if (failed)
            return NULL;
    }
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"collapsed_inputs", (PyCFunction)(void (*)(void))collapsed_inputs, METH_FASTCALL,
     "DirectEngine._collapsed_inputs(reads, collapse, held, t) in C: the inputs, or None (take _inputs)."},
    {"recorded_refs", (PyCFunction)(void (*)(void))recorded_refs, METH_FASTCALL,
     "DirectEngine._recorded_refs(row_plan, t) in C: the recorder's row as its source entities' dicts."},
    {"data_of", (PyCFunction)(void (*)(void))data_of, METH_FASTCALL,
     "CosimSim._data_of(sim, plan) in C: {eid: {attr: value}} of the request's plan."},
    {"put_refs", (PyCFunction)(void (*)(void))put_refs, METH_FASTCALL,
     "put_refs(view, offset, reads, refs, to_float): ParquetRecorder.append_refs's row into its buffer in C."},
    {"configure", (PyCFunction)(void (*)(void))configure, METH_FASTCALL,
     "configure(CosimSim.step_collapsed, CosimSim.seconds, _check_next, _bad_output_time): what step_due needs."},
    {"step_due", (PyCFunction)(void (*)(void))step_due, METH_FASTCALL,
     "step_due(engine, order, t): step every simulator of order due at t, as DirectEngine.step's loop does."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "cosim.run._engine", NULL, -1, methods};

/* The module (a new reference), or NULL with an exception set; ctypes.PyDLL calls it with the GIL held. */
PyObject *cosim_engine_module(void) {
    static PyObject *module = NULL;
    if (module != NULL)
        return Py_NewRef(module);
    s_newest = PyUnicode_InternFromString("newest");
    s_newest_t = PyUnicode_InternFromString("newest_t");
    s_output_at = PyUnicode_InternFromString("output_at");
    s_out = PyUnicode_InternFromString("out");
    s_get = PyUnicode_InternFromString("get");
#define INTERN(var, text) if ((var = PyUnicode_InternFromString(text)) == NULL) return NULL
    INTERN(s_next_t, "next_t"); INTERN(s_feed, "feed"); INTERN(s_tap, "tap"); INTERN(s_collapsible, "collapsible");
    INTERN(s_pulls, "pulls"); INTERN(s_held, "held"); INTERN(s_input_plan, "input_plan"); INTERN(s_request, "request");
    INTERN(s_read, "read"); INTERN(s_obj, "obj"); INTERN(s_cache, "cache"); INTERN(s_last_t, "last_t");
    INTERN(s_until, "until"); INTERN(s_step_sim, "_step_sim"); INTERN(s_step_collapsed, "step_collapsed");
    INTERN(s_time_ticks, "time_ticks"); INTERN(s_ticks_per_s, "ticks_per_s"); INTERN(s_seconds, "seconds");
    INTERN(s_step_entities, "step_entities"); INTERN(s_step_ticks, "step_ticks"); INTERN(s_time, "time");
#undef INTERN
    if ((one_int = PyLong_FromLong(1)) == NULL)
        return NULL;
    PyObject *builtins = PyEval_GetBuiltins();  /* borrowed */
    sum_builtin = builtins ? PyDict_GetItemString(builtins, "sum") : NULL;
    if (!s_newest || !s_newest_t || !s_output_at || !s_out || !s_get || !sum_builtin) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_RuntimeError, "cosim.run._engine: the builtin sum not found");
        return NULL;
    }
    Py_INCREF(sum_builtin);
    module = PyModule_Create(&module_def);
    return module == NULL ? NULL : Py_NewRef(module);
}
