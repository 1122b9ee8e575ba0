/* ONNX files: decoding and encoding with protobuf-c, and the accessors of tensors and
 * attributes (onnx/model.h). */
#include "onnx/model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vdnn/file.h"

const char *onnx_name(const char *s) { return s && *s ? s : "(unnamed)"; }

vdnn_status onnx_model_parse(const uint8_t *data, size_t len, const char *what, Onnx__ModelProto **out)
{
    *out = NULL;
    if (len == 0) return vdnn_fail(VDNN_EFORMAT, "%s: empty file, not an ONNX model", what);
    Onnx__ModelProto *m = onnx__model_proto__unpack(NULL, len, data);
    if (!m)
        return vdnn_fail(VDNN_EFORMAT, "%s: not an ONNX model (the protobuf does not decode: truncated, corrupt "
                         "or another kind of file)", what);
    if (!m->graph) {
        onnx__model_proto__free_unpacked(m, NULL);
        return vdnn_fail(VDNN_EFORMAT, "%s: the ONNX model has no graph", what);
    }
    *out = m;
    return VDNN_OK;
}

vdnn_status onnx_model_read(const char *path, Onnx__ModelProto **out)
{
    char *data = NULL;
    size_t len = 0;
    *out = NULL;
    vdnn_status st = vdnn_file_read(path, "ONNX model", ONNX_FILE_MAX, 0, &data, &len);
    if (st != VDNN_OK) return st;
    st = onnx_model_parse((const uint8_t *)data, len, path, out);
    free(data);
    return st;
}

void onnx_model_free(Onnx__ModelProto *m)
{
    if (m) onnx__model_proto__free_unpacked(m, NULL);
}

vdnn_status onnx_tensor_read(const char *path, Onnx__TensorProto **out)
{
    char *data = NULL;
    size_t len = 0;
    *out = NULL;
    vdnn_status st = vdnn_file_read(path, "ONNX tensor", ONNX_FILE_MAX, 0, &data, &len);
    if (st != VDNN_OK) return st;
    Onnx__TensorProto *t = onnx__tensor_proto__unpack(NULL, len, (const uint8_t *)data);
    free(data);
    if (!t) return vdnn_fail(VDNN_EFORMAT, "%s: not an ONNX tensor (the protobuf does not decode)", path);
    *out = t;
    return VDNN_OK;
}

void onnx_tensor_free(Onnx__TensorProto *t)
{
    if (t) onnx__tensor_proto__free_unpacked(t, NULL);
}

vdnn_status onnx_model_write(const Onnx__ModelProto *m, const char *path)
{
    size_t len = onnx__model_proto__get_packed_size(m);
    if (len > ONNX_FILE_MAX)
        return vdnn_fail(VDNN_EINVAL, "%s: the model takes %zu bytes, over protobuf's 2 GiB", path, len);
    uint8_t *buf = malloc(len ? len : 1);
    if (!buf) return vdnn_fail(VDNN_ENOMEM, "%s: out of memory encoding %zu bytes", path, len);
    onnx__model_proto__pack(m, buf);
    vdnn_status st = vdnn_file_replace(path, "ONNX model", buf, len);
    free(buf);
    return st;
}

int64_t onnx_opset(const Onnx__ModelProto *m)
{
    for (size_t i = 0; i < m->n_opset_import; i++) {
        const Onnx__OperatorSetIdProto *o = m->opset_import[i];
        if (o && (!o->domain || !*o->domain || !strcmp(o->domain, "ai.onnx"))) return o->version;
    }
    return 0;
}

vdnn_status onnx_tensor_count(const Onnx__TensorProto *t, const char *what, int64_t *count)
{
    if (t->n_dims > ONNX_MAX_RANK)
        return vdnn_fail(VDNN_EFORMAT, "%s: %zu dimensions (at most %d)", what, t->n_dims, ONNX_MAX_RANK);
    int64_t c = 1;
    for (size_t i = 0; i < t->n_dims; i++) {
        if (t->dims[i] < 0)
            return vdnn_fail(VDNN_EFORMAT, "%s: dimension %zu is %lld", what, i, (long long)t->dims[i]);
        if (t->dims[i] && c > ONNX_MAX_ELEMENTS / t->dims[i])
            return vdnn_fail(VDNN_EFORMAT, "%s: more than 2^32 elements", what);
        c *= t->dims[i];
    }
    *count = c;
    return VDNN_OK;
}

/* What both readers check: the count, data kept in the file, one of two element types
 * (`wide` of 8 bytes, `narrow` of 4; `kinds` names them), and exactly that many values
 * stored, raw or in the typed field (n_wide or n_narrow of them). *is_wide: the
 * tensor's type is the wide one. */
static vdnn_status stored(const Onnx__TensorProto *t, const char *what, int wide, int narrow, const char *kinds,
                          size_t n_wide, size_t n_narrow, int64_t *count, int *is_wide)
{
    vdnn_status st = onnx_tensor_count(t, what, count);
    if (st != VDNN_OK) return st;
    if (t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL)
        return vdnn_fail(VDNN_EINVAL, "%s: the tensor's data is in an external file, which vdnn does not read "
                         "(save the model with its data inside: onnx.save(model, path, save_as_external_data=False))",
                         what);
    int type = t->has_data_type ? t->data_type : 0;
    if (type != wide && type != narrow) return vdnn_fail(VDNN_EINVAL, "%s: of element type %d, not %s", what, type, kinds);
    *is_wide = type == wide;
    size_t size = *is_wide ? 8 : 4;
    size_t have = t->has_raw_data ? t->raw_data.len / size : *is_wide ? n_wide : n_narrow;
    if ((t->has_raw_data && t->raw_data.len % size) || have != (size_t)*count)
        return vdnn_fail(VDNN_EFORMAT, "%s: holds %zu values, its dimensions say %lld", what, have, (long long)*count);
    return VDNN_OK;
}

vdnn_status onnx_tensor_floats(const Onnx__TensorProto *t, const char *what, float **data, int64_t *count)
{
    *data = NULL;
    int64_t c;
    int dbl;
    vdnn_status st = stored(t, what, ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT,
                            "float (1) or double (11)", t->n_double_data, t->n_float_data, &c, &dbl);
    if (st != VDNN_OK) return st;
    float *d = malloc((size_t)(c ? c : 1) * sizeof *d);
    if (!d) return vdnn_fail(VDNN_ENOMEM, "%s: out of memory for %lld floats", what, (long long)c);
    for (int64_t i = 0; i < c; i++) {
        if (!dbl && t->has_raw_data) memcpy(&d[i], t->raw_data.data + 4 * i, 4);
        else if (!dbl) d[i] = t->float_data[i];
        else {
            double v;
            if (t->has_raw_data) memcpy(&v, t->raw_data.data + 8 * i, 8);
            else v = t->double_data[i];
            d[i] = (float)v;
        }
    }
    *data = d;
    *count = c;
    return VDNN_OK;
}

vdnn_status onnx_tensor_ints(const Onnx__TensorProto *t, const char *what, int64_t **data, int64_t *count)
{
    *data = NULL;
    int64_t c;
    int i64;
    vdnn_status st = stored(t, what, ONNX__TENSOR_PROTO__DATA_TYPE__INT64, ONNX__TENSOR_PROTO__DATA_TYPE__INT32,
                            "int64 (7) or int32 (6)", t->n_int64_data, t->n_int32_data, &c, &i64);
    if (st != VDNN_OK) return st;
    int64_t *d = malloc((size_t)(c ? c : 1) * sizeof *d);
    if (!d) return vdnn_fail(VDNN_ENOMEM, "%s: out of memory for %lld integers", what, (long long)c);
    for (int64_t i = 0; i < c; i++) {
        if (i64 && t->has_raw_data) memcpy(&d[i], t->raw_data.data + 8 * i, 8);
        else if (i64) d[i] = t->int64_data[i];
        else {
            int32_t v;
            if (t->has_raw_data) memcpy(&v, t->raw_data.data + 4 * i, 4);
            else v = t->int32_data[i];
            d[i] = v;
        }
    }
    *data = d;
    *count = c;
    return VDNN_OK;
}

const Onnx__AttributeProto *onnx_attr(const Onnx__NodeProto *n, const char *name)
{
    for (size_t i = 0; i < n->n_attribute; i++)
        if (n->attribute[i] && n->attribute[i]->name && !strcmp(n->attribute[i]->name, name)) return n->attribute[i];
    return NULL;
}

int64_t onnx_attr_int(const Onnx__NodeProto *n, const char *name, int64_t dflt, int *bad)
{
    const Onnx__AttributeProto *a = onnx_attr(n, name);
    if (!a) return dflt;
    if (a->has_type && a->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT) {
        *bad = 1;
        return dflt;
    }
    return a->i;
}

float onnx_attr_float(const Onnx__NodeProto *n, const char *name, float dflt, int *bad)
{
    const Onnx__AttributeProto *a = onnx_attr(n, name);
    if (!a) return dflt;
    if (a->has_type && a->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT) {
        *bad = 1;
        return dflt;
    }
    return a->f;
}

void onnx_attr_string(const Onnx__NodeProto *n, const char *name, const char *dflt, char *buf, size_t len,
                      int *bad)
{
    const Onnx__AttributeProto *a = onnx_attr(n, name);
    if (!a || (a->has_type && a->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING)) {
        if (a) *bad = 1;
        snprintf(buf, len, "%s", dflt);
        return;
    }
    size_t k = a->s.len < len - 1 ? a->s.len : len - 1;
    if (k) memcpy(buf, a->s.data, k);
    buf[k] = 0;
    if (memchr(buf, 0, k) || a->s.len >= len) *bad = 1;
}

int onnx_attr_ints(const Onnx__NodeProto *n, const char *name, int64_t *out, int max, int *bad)
{
    const Onnx__AttributeProto *a = onnx_attr(n, name);
    if (!a) return -1;
    if ((a->has_type && a->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS) || a->n_ints > (size_t)max) {
        *bad = 1;
        return -1;
    }
    for (size_t i = 0; i < a->n_ints; i++) out[i] = a->ints[i];
    return (int)a->n_ints;
}
