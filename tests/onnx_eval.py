#!/usr/bin/python3
"""An ONNX evaluator written with NumPy only, independent of vdnn's, that checks ONNX
files against reference data in the layout of ONNX's backend tests.

    /usr/bin/python3 tests/onnx_eval.py DIR...

Each DIR holds model.onnx and test_data_set_*/input_<k>.pb, output_<k>.pb (serialized
TensorProto). For each DIR the model goes through onnx.checker.check_model(full_check=
True); input_<k>.pb feeds the k-th graph input that is not an initializer (initializers
are constants); the graph is evaluated node by node in float64 and every graph output,
cast to the reference's type, must satisfy |got - want| <= 1e-5 + 1e-3 * |want|
elementwise (numpy.allclose(rtol=1e-3, atol=1e-5)). Prints one line per DIR:

    PASS DIR
    FAIL DIR: <reason>
    UNSUPPORTED DIR: node <name> (<op_type>): <reason>

(a node without a name is named #<its index in the graph>), then
"N passed, N failed, N unsupported". Exits 1 when any DIR failed or was unsupported.

Operators (default domain, opsets 7 to 17; the few older models whose operators mean
the same, such as ONNX's own GlobalAveragePool tests at opset 1, are evaluated too):
Conv, MaxPool, AveragePool (2-D only), GlobalAveragePool, GlobalMaxPool, Relu,
LeakyRelu, Clip, Sigmoid, Tanh, BatchNormalization (inference), LRN, Dropout
(inference), Gemm, MatMul (2-D), Flatten, Reshape, Add, Sum, Concat, Softmax, Identity,
Constant. Pooling in ceil mode follows PyTorch/Caffe: a last window that would start in
the end padding is dropped.

Needs numpy and onnx (Debian's python3-onnx 1.12, which has no onnx.reference).
"""
import glob
import os
import re
import sys

import numpy as np
import onnx
from onnx import helper, mapping, numpy_helper

RTOL = 1e-3
ATOL = 1e-5
MAX_OPSET = 17
FLOAT_TYPES = (np.float16, np.float32, np.float64)


class Unsupported(Exception):
    """An operator, attribute value or input kind this evaluator does not implement."""


class NodeUnsupported(Exception):
    """Unsupported, with what it was raised for: "node <name> (<op_type>)"."""

    def __init__(self, who, reason):
        super().__init__(f"{who}: {reason}")


class Failure(Exception):
    """A check that failed; the message is the reason printed after FAIL."""


def internal(array):
    """The array as it is held during evaluation: floating point as float64."""
    array = np.asarray(array)
    if array.dtype.type in FLOAT_TYPES:
        return array.astype(np.float64)
    return array


# ---------------------------------------------------------------------------------------
# Helpers shared by convolution and pooling
# ---------------------------------------------------------------------------------------

def ints(attrs, name, default):
    value = attrs.get(name)
    return list(default) if value is None else [int(v) for v in value]


def require_2d(x, what):
    if x.ndim != 4:
        raise Unsupported(f"{x.ndim - 2}-D {what}: only 2-D (NCHW) is implemented")


def window_geometry(attrs, in_hw, kernel, strides, dilations, ceil_mode):
    """Output size and (begin, end) padding per spatial axis for Conv and pooling."""
    auto_pad = attrs.get("auto_pad", "NOTSET")
    if auto_pad not in ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"):
        raise Unsupported(f"auto_pad={auto_pad}")
    pads = ints(attrs, "pads", [0] * 4)
    if len(pads) != 4:
        raise Failure(f"pads has {len(pads)} values, expected 4")
    if min(pads) < 0:
        raise Unsupported("negative pads")
    out_hw, pad_pairs = [], []
    for axis in range(2):
        size, k, s, d = in_hw[axis], kernel[axis], strides[axis], dilations[axis]
        span = (k - 1) * d + 1
        if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            out = -(-size // s)
            total = max(0, (out - 1) * s + span - size)
            small, large = total // 2, total - total // 2
            begin, end = (small, large) if auto_pad == "SAME_UPPER" else (large, small)
        elif auto_pad == "VALID":
            begin = end = 0
            out = (size - span) // s + 1
        else:
            begin, end = pads[axis], pads[axis + 2]
            room = size + begin + end - span
            if ceil_mode:
                out = -(-room // s) + 1
                # PyTorch/Caffe: drop a last window that starts in the end padding
                if (out - 1) * s >= size + begin:
                    out -= 1
            else:
                out = room // s + 1
        if out <= 0:
            raise Failure(f"window of {span} does not fit input of {size} "
                          f"with pads {begin},{end}")
        out_hw.append(out)
        pad_pairs.append((begin, end))
    return out_hw, pad_pairs


def strided_window(array, i, j, out_hw, strides, dilations):
    """array[..., h*sh + i*dh, w*sw + j*dw] for every output position (h, w)."""
    h0, w0 = i * dilations[0], j * dilations[1]
    return array[..., h0:h0 + (out_hw[0] - 1) * strides[0] + 1:strides[0],
                 w0:w0 + (out_hw[1] - 1) * strides[1] + 1:strides[1]]


# ---------------------------------------------------------------------------------------
# Operators. Each takes (inputs, attrs, opset, n_outputs) and returns a list of outputs;
# an omitted optional input is None.
# ---------------------------------------------------------------------------------------

def op_conv(ins, attrs, opset, nout):
    x, w = ins[0], ins[1]
    b = ins[2] if len(ins) > 2 else None
    require_2d(x, "convolution")
    if w.ndim != 4:
        raise Failure(f"weight has rank {w.ndim}, input has rank 4")
    n, c, h, wd = x.shape
    m, cg, kh, kw = w.shape
    group = int(attrs.get("group", 1))
    kernel = ints(attrs, "kernel_shape", [kh, kw])
    if kernel != [kh, kw]:
        raise Failure(f"kernel_shape {kernel} but weight is {list(w.shape)}")
    if c != cg * group or m % group:
        raise Failure(f"{c} input channels, weight {list(w.shape)}, group {group}")
    strides = ints(attrs, "strides", [1, 1])
    dilations = ints(attrs, "dilations", [1, 1])
    out_hw, (ph, pw) = window_geometry(attrs, (h, wd), kernel, strides, dilations, False)
    xp = np.pad(x, ((0, 0), (0, 0), ph, pw))
    # im2col: columns (N, C, kh*kw, OH*OW), then one matrix product per group
    cols = np.empty((n, c, kh * kw, out_hw[0] * out_hw[1]), dtype=np.float64)
    for i in range(kh):
        for j in range(kw):
            win = strided_window(xp, i, j, out_hw, strides, dilations)
            cols[:, :, i * kw + j, :] = win.reshape(n, c, -1)
    cols = cols.reshape(n, group, cg * kh * kw, -1)
    wmat = w.reshape(group, m // group, cg * kh * kw)
    y = np.matmul(wmat[None], cols).reshape(n, m, out_hw[0], out_hw[1])
    if b is not None:
        y = y + b.reshape(1, m, 1, 1)
    return [y]


def pool(ins, attrs, kind, want_indices):
    """MaxPool (kind 'max') or AveragePool (kind 'avg') over NCHW input."""
    x = ins[0]
    require_2d(x, "pooling")
    n, c, h, w = x.shape
    kernel = ints(attrs, "kernel_shape", [])
    if len(kernel) != 2:
        raise Failure(f"kernel_shape {kernel} for a 2-D input")
    strides = ints(attrs, "strides", [1, 1])
    dilations = ints(attrs, "dilations", [1, 1])
    ceil_mode = int(attrs.get("ceil_mode", 0))
    out_hw, pads = window_geometry(attrs, (h, w), kernel, strides, dilations, ceil_mode)
    # the padded plane: big enough for every window, including one hanging past the end
    # padding in ceil mode; padded cells are -inf for max, 0 for average
    (pt, pb), (pl, pr) = pads
    spans = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]
    total_h = max(h + pt + pb, (out_hw[0] - 1) * strides[0] + spans[0])
    total_w = max(w + pl + pr, (out_hw[1] - 1) * strides[1] + spans[1])
    xf = x.astype(np.float64)
    fill = -np.inf if kind == "max" else 0.0
    xp = np.full((n, c, total_h, total_w), fill)
    xp[:, :, pt:pt + h, pl:pl + w] = xf
    positions = [(i, j) for i in range(kernel[0]) for j in range(kernel[1])]
    windows = [strided_window(xp, i, j, out_hw, strides, dilations)
               for i, j in positions]
    if kind == "avg":
        # count_include_pad: the cells inside input + pads; otherwise the real cells
        cells = np.zeros((total_h, total_w))
        if int(attrs.get("count_include_pad", 0)):
            cells[:h + pt + pb, :w + pl + pr] = 1
        else:
            cells[pt:pt + h, pl:pl + w] = 1
        count = sum(strided_window(cells, i, j, out_hw, strides, dilations)
                    for i, j in positions)
        return [sum(windows) / count]
    stack = np.stack(windows)
    y = stack.max(axis=0)
    if x.dtype.type not in FLOAT_TYPES:
        y = y.astype(x.dtype)
    if not want_indices:
        return [y]
    # Indices: the first maximum in row-major window order, as a flat index into the
    # input (N, C, H, W): row-major, or with storage_order 1 column-major within a plane
    best = stack.argmax(axis=0)
    oh = np.arange(out_hw[0]).reshape(-1, 1)
    ow = np.arange(out_hw[1]).reshape(1, -1)
    ki = np.array([p[0] for p in positions])[best]
    kj = np.array([p[1] for p in positions])[best]
    row = oh * strides[0] + ki * dilations[0] - pt
    col = ow * strides[1] + kj * dilations[1] - pl
    plane = (np.arange(n).reshape(-1, 1, 1, 1) * c + np.arange(c).reshape(1, -1, 1, 1))
    if int(attrs.get("storage_order", 0)):
        flat = row + col * h
    else:
        flat = row * w + col
    return [y, (plane * h * w + flat).astype(np.int64)]


def op_maxpool(ins, attrs, opset, nout):
    return pool(ins, attrs, "max", nout > 1)


def op_averagepool(ins, attrs, opset, nout):
    return pool(ins, attrs, "avg", False)


def op_global_average_pool(ins, attrs, opset, nout):
    require_2d(ins[0], "global pooling")
    return [ins[0].mean(axis=(2, 3), keepdims=True)]


def op_global_max_pool(ins, attrs, opset, nout):
    require_2d(ins[0], "global pooling")
    return [ins[0].max(axis=(2, 3), keepdims=True)]


def op_relu(ins, attrs, opset, nout):
    return [np.maximum(ins[0], ins[0].dtype.type(0))]


def op_leaky_relu(ins, attrs, opset, nout):
    x = ins[0]
    return [np.where(x >= 0, x, float(attrs.get("alpha", 0.01)) * x)]


def op_clip(ins, attrs, opset, nout):
    x = ins[0]
    if opset < 11:
        # float's lowest and highest, the defaults of Clip-6
        low = float(attrs.get("min", -3.4028234663852886e38))
        high = float(attrs.get("max", 3.4028234663852886e38))
    else:
        bounds = []
        for k in (1, 2):
            value = ins[k] if len(ins) > k else None
            if value is not None and value.size != 1:
                raise Failure(f"Clip bound of shape {list(value.shape)}, not a scalar")
            bounds.append(None if value is None else value.reshape(()))
        low, high = bounds
    y = x
    if low is not None:
        y = np.maximum(y, low)
    if high is not None:
        y = np.minimum(y, high)
    return [y.astype(x.dtype)]


def op_sigmoid(ins, attrs, opset, nout):
    # 1 / (1 + exp(-x)) without overflowing for large |x|
    return [np.exp(-np.logaddexp(0.0, -ins[0]))]


def op_tanh(ins, attrs, opset, nout):
    return [np.tanh(ins[0])]


def op_batch_normalization(ins, attrs, opset, nout):
    if opset < 7:
        raise Unsupported(f"opset {opset} (is_test defaults to training)")
    if int(attrs.get("spatial", 1)) != 1:
        raise Unsupported("spatial=0")
    if int(attrs.get("training_mode", 0)) != 0:
        raise Unsupported("training_mode=1 (only inference is implemented)")
    if nout > 1:
        raise Unsupported("the statistics outputs of training")
    x, scale, bias, mean, var = ins[:5]
    shape = (1, -1) + (1,) * (x.ndim - 2)
    eps = float(attrs.get("epsilon", 1e-5))
    y = (scale.reshape(shape) * (x - mean.reshape(shape))
         / np.sqrt(var.reshape(shape) + eps) + bias.reshape(shape))
    return [y]


def op_lrn(ins, attrs, opset, nout):
    x = ins[0]
    size = int(attrs["size"])
    alpha = float(attrs.get("alpha", 1e-4))
    beta = float(attrs.get("beta", 0.75))
    bias = float(attrs.get("bias", 1.0))
    # channels c - floor((size-1)/2) .. c + ceil((size-1)/2), zero outside
    before, after = (size - 1) // 2, size - 1 - (size - 1) // 2
    widths = [(0, 0)] * x.ndim
    widths[1] = (before, after)
    squares = np.pad(x * x, widths)
    channels = x.shape[1]
    square_sum = sum(squares[:, k:k + channels] for k in range(size))
    return [x / (bias + alpha / size * square_sum) ** beta]


def op_dropout(ins, attrs, opset, nout):
    if opset < 7:
        raise Unsupported(f"opset {opset} (is_test defaults to training)")
    x = ins[0]
    ratio = float(attrs.get("ratio", 0.5))
    if len(ins) > 1 and ins[1] is not None:
        ratio = float(ins[1].reshape(()))
    training = len(ins) > 2 and ins[2] is not None and bool(ins[2].reshape(()))
    if training and ratio != 0:
        raise Unsupported("training_mode=true (random dropout)")
    outs = [x.copy()]
    if nout > 1:
        # the mask is bool from opset 10, the input's type before
        outs.append(np.ones(x.shape, dtype=bool if opset >= 10 else x.dtype))
    return outs


def op_gemm(ins, attrs, opset, nout):
    a, b = ins[0], ins[1]
    c = ins[2] if len(ins) > 2 else None
    if a.ndim != 2 or b.ndim != 2:
        raise Failure(f"Gemm of ranks {a.ndim} and {b.ndim}")
    if int(attrs.get("transA", 0)):
        a = a.T
    if int(attrs.get("transB", 0)):
        b = b.T
    y = float(attrs.get("alpha", 1.0)) * (a @ b)
    if c is not None:
        # unidirectional broadcast: C must broadcast to (M, N), never the reverse
        y = y + float(attrs.get("beta", 1.0)) * np.broadcast_to(c, y.shape)
    return [y]


def op_matmul(ins, attrs, opset, nout):
    a, b = ins[0], ins[1]
    if a.ndim != 2 or b.ndim != 2:
        raise Unsupported(f"MatMul of ranks {a.ndim} and {b.ndim} (only 2-D)")
    return [a @ b]


def op_flatten(ins, attrs, opset, nout):
    x = ins[0]
    axis = int(attrs.get("axis", 1))
    if axis < 0:
        axis += x.ndim
    if not 0 <= axis <= x.ndim:
        raise Failure(f"Flatten axis {attrs.get('axis')} for rank {x.ndim}")
    outer = int(np.prod(x.shape[:axis], dtype=np.int64))
    inner = int(np.prod(x.shape[axis:], dtype=np.int64))
    return [x.reshape(outer, inner)]


def op_reshape(ins, attrs, opset, nout):
    x, shape = ins[0], [int(v) for v in ins[1].reshape(-1)]
    allowzero = int(attrs.get("allowzero", 0))
    dims = []
    for i, v in enumerate(shape):
        if v == 0 and not allowzero:
            if i >= x.ndim:
                raise Failure(f"Reshape copies dim {i} of a rank-{x.ndim} input")
            v = x.shape[i]
        dims.append(v)
    if dims.count(-1) > 1 or any(v < -1 for v in dims):
        raise Failure(f"Reshape to {shape}")
    if -1 in dims:
        known = int(np.prod([v for v in dims if v != -1], dtype=np.int64))
        if known == 0 or x.size % known:
            raise Failure(f"Reshape of {list(x.shape)} to {shape}")
        dims[dims.index(-1)] = x.size // known
    return [x.reshape(dims)]


def op_add(ins, attrs, opset, nout):
    return [np.add(ins[0], ins[1])]


def op_sum(ins, attrs, opset, nout):
    y = ins[0]
    for value in ins[1:]:
        y = y + value
    return [np.array(y, copy=True)]


def op_concat(ins, attrs, opset, nout):
    # axis is required from opset 4; before, it defaulted to 1
    axis = int(attrs.get("axis", 1))
    return [np.concatenate(ins, axis=axis)]


def op_softmax(ins, attrs, opset, nout):
    x = ins[0]
    if opset < 13:
        # coerce to 2-D at axis and normalise each row of the flattened trailing part
        axis = int(attrs.get("axis", 1))
        if axis < 0:
            axis += x.ndim
        rows = x.reshape(int(np.prod(x.shape[:axis], dtype=np.int64)), -1)
        e = np.exp(rows - rows.max(axis=1, keepdims=True))
        return [(e / e.sum(axis=1, keepdims=True)).reshape(x.shape)]
    axis = int(attrs.get("axis", -1))
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return [e / e.sum(axis=axis, keepdims=True)]


def op_identity(ins, attrs, opset, nout):
    return [ins[0].copy()]


def op_constant(ins, attrs, opset, nout):
    if len(attrs) != 1:
        raise Failure(f"Constant with attributes {sorted(attrs)}")
    name, value = next(iter(attrs.items()))
    if name == "value":
        return [internal(numpy_helper.to_array(value))]
    if name == "value_float":
        return [np.array(value, dtype=np.float64)]
    if name == "value_floats":
        return [np.array(value, dtype=np.float64).reshape(-1)]
    if name == "value_int":
        return [np.array(value, dtype=np.int64)]
    if name == "value_ints":
        return [np.array(value, dtype=np.int64).reshape(-1)]
    raise Unsupported(f"attribute {name}")


# op_type: (function, the attributes it knows)
OPERATORS = {
    "Conv": (op_conv, {"auto_pad", "dilations", "group", "kernel_shape", "pads",
                       "strides"}),
    "MaxPool": (op_maxpool, {"auto_pad", "ceil_mode", "dilations", "kernel_shape",
                             "pads", "storage_order", "strides"}),
    "AveragePool": (op_averagepool, {"auto_pad", "ceil_mode", "count_include_pad",
                                     "kernel_shape", "pads", "strides"}),
    "GlobalAveragePool": (op_global_average_pool, set()),
    "GlobalMaxPool": (op_global_max_pool, set()),
    "Relu": (op_relu, set()),
    "LeakyRelu": (op_leaky_relu, {"alpha"}),
    "Clip": (op_clip, {"min", "max"}),
    "Sigmoid": (op_sigmoid, set()),
    "Tanh": (op_tanh, set()),
    "BatchNormalization": (op_batch_normalization, {"epsilon", "momentum", "spatial",
                                                    "training_mode"}),
    "LRN": (op_lrn, {"alpha", "beta", "bias", "size"}),
    "Dropout": (op_dropout, {"ratio", "seed"}),
    "Gemm": (op_gemm, {"alpha", "beta", "transA", "transB"}),
    "MatMul": (op_matmul, set()),
    "Flatten": (op_flatten, {"axis"}),
    "Reshape": (op_reshape, {"allowzero"}),
    "Add": (op_add, set()),
    "Sum": (op_sum, set()),
    "Concat": (op_concat, {"axis"}),
    "Softmax": (op_softmax, {"axis"}),
    "Identity": (op_identity, set()),
    "Constant": (op_constant, {"value", "value_float", "value_floats", "value_int",
                               "value_ints", "value_string", "value_strings",
                               "sparse_value"}),
}


# ---------------------------------------------------------------------------------------
# The graph
# ---------------------------------------------------------------------------------------

def node_label(node, index):
    name = node.name if node.name else f"#{index}"
    return f"node {name} ({node.op_type})"


def node_attrs(node):
    attrs = {}
    for a in node.attribute:
        value = helper.get_attribute_value(a)
        attrs[a.name] = value.decode() if isinstance(value, bytes) else value
    return attrs


def default_opset(model):
    """The model's opset of the default domain, None if it imports none."""
    for entry in model.opset_import:
        if entry.domain in ("", "ai.onnx"):
            return entry.version
    return None


def check_supported(graph, opset):
    """Raises NodeUnsupported for what can be seen without evaluating the graph."""
    for index, node in enumerate(graph.node):
        label = node_label(node, index)
        if node.domain not in ("", "ai.onnx"):
            raise NodeUnsupported(label, f"domain '{node.domain}'")
        if node.op_type not in OPERATORS:
            raise NodeUnsupported(label, "operator not implemented")
        if opset is None:
            raise Failure("no opset_import for the default domain")
        if opset > MAX_OPSET:
            raise NodeUnsupported(label, f"opset {opset} is newer than {MAX_OPSET}")
        known = OPERATORS[node.op_type][1]
        for a in node.attribute:
            if a.name not in known:
                raise NodeUnsupported(label, f"attribute {a.name} not implemented")
    # only tensors flow through the graph: name the node using a value of another kind
    for value in list(graph.input) + list(graph.output):
        kind = value.type.WhichOneof("value")
        if kind == "tensor_type":
            continue
        for index, node in enumerate(graph.node):
            if value.name in node.input or value.name in node.output:
                raise NodeUnsupported(node_label(node, index),
                                      f"'{value.name}' has {kind}, not tensor_type")
        raise NodeUnsupported(f"graph value '{value.name}'", f"{kind}, not tensor_type")


def check_declared(what, array, type_proto, check_type=True):
    """Fails when an array's element type (if check_type) or static dims differ from
    its declaration."""
    if type_proto.WhichOneof("value") != "tensor_type":
        return
    tensor_type = type_proto.tensor_type
    if check_type and tensor_type.elem_type:
        declared = mapping.TENSOR_TYPE_TO_NP_TYPE.get(tensor_type.elem_type)
        if declared is None or np.dtype(declared) != array.dtype:
            raise Failure(f"{what} is declared {declared and np.dtype(declared)}, "
                          f"the data is {array.dtype}")
    if tensor_type.HasField("shape"):
        dims = tensor_type.shape.dim
        declared = [d.dim_value if d.HasField("dim_value") else "?" for d in dims]
        if len(dims) != array.ndim or any(
                want != "?" and want != got for want, got in zip(declared, array.shape)):
            raise Failure(f"{what} is declared of shape {declared}, "
                          f"the data is {list(array.shape)}")


def evaluate(graph, opset, feeds):
    """Runs the graph on feeds ({name: array}); returns {name: array} of every value."""
    values = {init.name: internal(numpy_helper.to_array(init))
              for init in graph.initializer}
    values.update({name: internal(array) for name, array in feeds.items()})
    declared = {v.name: v.type for v in graph.value_info}
    for index, node in enumerate(graph.node):
        label = node_label(node, index)
        ins = []
        for name in node.input:
            if name == "":
                ins.append(None)
            elif name in values:
                ins.append(values[name])
            else:
                produced = any(name in later.output for later in graph.node[index:])
                raise Failure(f"{label} reads '{name}' "
                              + ("before the node that produces it (the graph is not "
                                 "topologically sorted)" if produced
                                 else "which nothing produces"))
        while ins and ins[-1] is None:
            ins.pop()
        nout = len(node.output)
        while nout and node.output[nout - 1] == "":
            nout -= 1
        function = OPERATORS[node.op_type][0]
        try:
            outs = function(ins, node_attrs(node), opset, nout)
        except Unsupported as e:
            raise NodeUnsupported(label, str(e)) from None
        except Failure as e:
            raise Failure(f"{label}: {e}") from None
        except Exception as e:
            raise Failure(f"{label}: {type(e).__name__}: {e}") from None
        if len(outs) < nout:
            raise NodeUnsupported(label, f"output {len(outs)} not implemented")
        for name, array in zip(node.output, outs):
            if name:
                array = np.asarray(array)
                if name in declared:
                    # values are held in float64: check the declared shape only
                    check_declared(f"'{name}' (output of {label})", array,
                                   declared[name], check_type=False)
                values[name] = array
    return values


# ---------------------------------------------------------------------------------------
# One test directory
# ---------------------------------------------------------------------------------------

def read_tensor(path):
    try:
        tensor = onnx.TensorProto()
        with open(path, "rb") as f:
            tensor.ParseFromString(f.read())
        return numpy_helper.to_array(tensor)
    except Exception as e:
        raise Failure(f"cannot read {path}: {type(e).__name__}: {e}") from None


def numbered(directory, prefix):
    """directory/prefix<k>.pb in order of k, checking that k runs 0, 1, 2, ..."""
    found = {}
    for path in glob.glob(os.path.join(directory, prefix + "*.pb")):
        match = re.fullmatch(re.escape(prefix) + r"(\d+)\.pb", os.path.basename(path))
        if match:
            found[int(match.group(1))] = path
    if sorted(found) != list(range(len(found))):
        raise Failure(f"{directory}: {prefix}*.pb are numbered {sorted(found)}")
    return [found[k] for k in range(len(found))]


def compare(name, got, want, data_set):
    """Fails unless got (cast to want's type) is close to want."""
    where = f"output '{name}' ({data_set})"
    if got.shape != want.shape:
        raise Failure(f"{where}: shape {list(got.shape)}, want {list(want.shape)}")
    got_f = got.astype(want.dtype).astype(np.float64)
    want_f = want.astype(np.float64)
    nan_mismatch = np.isnan(got_f) != np.isnan(want_f)
    with np.errstate(invalid="ignore"):
        error = np.abs(got_f - want_f)
        error = np.where(np.isnan(got_f) & np.isnan(want_f), 0.0, error)
        error = np.where(got_f == want_f, 0.0, error)   # equal infinities
        error = np.where(nan_mismatch, np.inf, error)
        bad = ~(error <= ATOL + RTOL * np.abs(np.nan_to_num(want_f)))
    if bad.any():
        worst = np.unravel_index(np.argmax(np.where(np.isnan(error), np.inf, error)),
                                 error.shape)
        raise Failure(f"{where}: largest absolute error {error[worst]:.6g} at "
                      f"{list(map(int, worst))} (got {got_f[worst]:.8g}, want "
                      f"{want_f[worst]:.8g}); {int(bad.sum())} of {bad.size} elements "
                      f"exceed {ATOL:g} + {RTOL:g}*|want|")


def check_directory(directory):
    """Raises Failure or NodeUnsupported; returns normally when the directory passes."""
    path = os.path.join(directory, "model.onnx")
    if not os.path.isfile(path):
        raise Failure("no model.onnx")
    try:
        model = onnx.load(path)
    except Exception as e:
        raise Failure(f"cannot load model.onnx: {type(e).__name__}: {e}") from None
    try:
        onnx.checker.check_model(model, full_check=True)
    except Exception as e:
        message = " ".join(str(e).split())
        raise Failure(f"onnx.checker: {message}") from None
    graph = model.graph
    opset = default_opset(model)
    check_supported(graph, opset)
    initialized = {init.name for init in graph.initializer}
    inputs = [v for v in graph.input if v.name not in initialized]
    data_sets = sorted(glob.glob(os.path.join(directory, "test_data_set_*")),
                       key=lambda p: [int(t) if t.isdigit() else t
                                      for t in re.split(r"(\d+)", p)])
    if not data_sets:
        raise Failure("no test_data_set_*")
    for data_set in data_sets:
        label = os.path.basename(data_set)
        input_files = numbered(data_set, "input_")
        output_files = numbered(data_set, "output_")
        if len(input_files) != len(inputs):
            raise Failure(f"{label}: {len(input_files)} input files for "
                          f"{len(inputs)} graph inputs")
        if len(output_files) != len(graph.output):
            raise Failure(f"{label}: {len(output_files)} output files for "
                          f"{len(graph.output)} graph outputs")
        feeds = {}
        for value, file in zip(inputs, input_files):
            array = read_tensor(file)
            check_declared(f"input '{value.name}' ({label})", array, value.type)
            feeds[value.name] = array
        with np.errstate(all="ignore"):
            values = evaluate(graph, opset, feeds)
        for value, file in zip(graph.output, output_files):
            want = read_tensor(file)
            if value.name not in values:
                raise Failure(f"output '{value.name}' is never produced")
            got = values[value.name]
            check_declared(f"output '{value.name}' ({label})", want, value.type)
            compare(value.name, got, want, label)


def main(argv):
    if not argv:
        print(f"usage: {sys.argv[0]} DIR...", file=sys.stderr)
        return 2
    passed = failed = unsupported = 0
    for directory in argv:
        try:
            check_directory(directory)
        except NodeUnsupported as e:
            unsupported += 1
            print(f"UNSUPPORTED {directory}: {e}", flush=True)
        except Failure as e:
            failed += 1
            print(f"FAIL {directory}: {e}", flush=True)
        except Exception as e:
            failed += 1
            message = " ".join(str(e).split())
            print(f"FAIL {directory}: {type(e).__name__}: {message}", flush=True)
        else:
            passed += 1
            print(f"PASS {directory}", flush=True)
    print(f"{passed} passed, {failed} failed, {unsupported} unsupported")
    return 1 if failed or unsupported else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
