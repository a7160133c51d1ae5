"""Graphs for Python: build once, run on any actual size inside the bounds.

    import numpy as np, clbound
    ctx = clbound.Context()
    g = clbound.Graph(ctx, policy="dynamic")
    x = g.input("x", np.float32, bounds=(256, 3), dynamic=(True, False))
    t = g.input("t", np.float32, bounds=(256, 1), dynamic=(True, False))
    w = g.param("w", np.zeros((1, 3), np.float32))
    y = g.linear(x, w)
    loss = g.loss("mse", y, t)
    g.train(loss, lr=0.1)
    g.feed(x, xs); g.feed(t, ts); g.run()   # one training step, no host sync
    print(g.value(loss))                      # a host sync, counted

Nodes are ints. See include/clbound/graph.h and docs/graph.md.
"""

import ctypes

import numpy as np

from . import _BINARY, _DTYPES, _REDUCE, _UNARY, ClboundError, Tensor, _dims, _fn, _i64p, _p

__all__ = ["Graph", "POLICIES", "LOSSES"]

POLICIES = {"static": 0, "automatic": 1, "dynamic": 2, "bucketed": 3}
LOSSES = {"mse": 0, "bce": 1, "bce_with_logits": 2, "cross_entropy": 3}


class _Options(ctypes.Structure):
    # clb_graph_options in full: clb_graph_options_init writes all of it
    _fields_ = [("struct_size", ctypes.c_size_t), ("policy", ctypes.c_int), ("name", ctypes.c_char_p),
                ("free_intermediates", ctypes.c_int)]


class _Stats(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("runs", ctypes.c_uint64), ("plans_compiled", ctypes.c_uint64),
                ("plan_switches", ctypes.c_uint64), ("host_syncs", ctypes.c_uint64), ("nodes", ctypes.c_uint64),
                ("deferred_checks", ctypes.c_uint64), ("current_plan", ctypes.c_int64)]


_i = ctypes.c_int
_np = ctypes.POINTER(ctypes.c_int)
_u8p = ctypes.POINTER(ctypes.c_uint8)
_g_opts_init = _fn("clb_graph_options_init", None, ctypes.POINTER(_Options))
_g_new = _fn("clb_graph_new", _i, _p, ctypes.POINTER(_Options), ctypes.POINTER(_p))
_g_free = _fn("clb_graph_free", None, _p)
_g_input = _fn("clb_graph_input", _i, _p, ctypes.c_char_p, _i, _i, _i64p, _u8p, _np)
_g_param = _fn("clb_graph_param", _i, _p, ctypes.c_char_p, _i, _i, _i64p, _p, ctypes.c_size_t, _i, _np)
_g_scalar = _fn("clb_graph_scalar", _i, _p, _i, ctypes.c_double, _np)
_g_unary = _fn("clb_graph_unary", _i, _p, _i, _i, _np)
_g_binary = _fn("clb_graph_binary", _i, _p, _i, _i, _i, _np)
_g_cast = _fn("clb_graph_cast", _i, _p, _i, _i, _np)
_g_reshape = _fn("clb_graph_reshape", _i, _p, _i, _i, _i64p, _np)
_g_reduce = _fn("clb_graph_reduce", _i, _p, _i, _i, _np)
_g_softmax = _fn("clb_graph_softmax", _i, _p, _i, _i, _np)
_g_nonzero = _fn("clb_graph_nonzero", _i, _p, _i, _np)
_g_masked_select = _fn("clb_graph_masked_select", _i, _p, _i, _i, _np)
_g_linear = _fn("clb_graph_linear", _i, _p, _i, _i, _i, _np)
_g_loss = _fn("clb_graph_loss", _i, _p, _i, _i, _i, _np)
_g_train = _fn("clb_graph_train", _i, _p, _i, ctypes.c_double, ctypes.c_double)
_g_set_lr = _fn("clb_graph_set_lr", _i, _p, ctypes.c_double)
_g_feed = _fn("clb_graph_feed", _i, _p, _i, _i64p, _p, ctypes.c_size_t)
_g_run = _fn("clb_graph_run", _i, _p)
_g_tensor = _fn("clb_graph_tensor", _p, _p, _i)
_g_keep = _fn("clb_graph_keep", ctypes.c_int, _p, _i)
_g_stats = _fn("clb_graph_stats_get", _i, _p, ctypes.POINTER(_Stats))
_g_reason = _fn("clb_graph_last_reason", ctypes.c_char_p, _p)
_g_describe = _fn("clb_graph_describe", _i, _p, ctypes.c_char_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t))


class Graph:
    """A graph on `ctx` under a policy: "dynamic", "automatic" (default), "static"
    or "bucketed". Close it (or let the context close it) before the context."""

    def __init__(self, ctx, policy="automatic", name="graph", free_intermediates=False):
        if policy not in POLICIES:
            raise ValueError(f"policy {policy!r} is not one of {sorted(POLICIES)}")
        self.ctx = ctx
        self._h = _p()
        o = _Options()
        _g_opts_init(ctypes.byref(o))
        o.policy = POLICIES[policy]
        o.free_intermediates = int(bool(free_intermediates))
        self._name = name.encode()
        o.name = self._name
        self.ctx._check(_g_new(ctx._h, ctypes.byref(o), ctypes.byref(self._h)))
        self._inputs = {}
        self._borrowed = []  # Tensors from tensor(): valid until the next run or close
        graphs = getattr(ctx, "_graphs", None)
        if graphs is None:
            graphs = ctx._graphs = []
        graphs.append(self)

    def close(self):
        """Frees the graph (its plans and tensors); the context stays."""
        self._drop_borrowed()
        if self._h:
            _g_free(self._h)
            self._h = None
        graphs = getattr(self.ctx, "_graphs", [])
        if self in graphs:
            graphs.remove(self)

    def _drop_borrowed(self):
        for t in getattr(self, "_borrowed", ()):
            t._h = None  # Tensor raises ClboundError rather than reading a stale handle
        self._borrowed = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _node(self, call):
        n = ctypes.c_int(-1)
        self.ctx._check(call(ctypes.byref(n)))
        return n.value

    # ---- building ----

    def input(self, name, dtype, bounds, dynamic=None):
        dt = _DTYPES[np.dtype(dtype)]
        rank = len(bounds)
        dyn = (ctypes.c_uint8 * max(rank, 1))(*[1 if d else 0 for d in (dynamic or [False] * rank)])
        node = self._node(lambda o: _g_input(self._h, name.encode(), dt, rank, _dims(bounds), dyn, o))
        self._inputs[node] = np.dtype(dtype)
        return node

    def param(self, name, array, trainable=True):
        array = np.ascontiguousarray(array)
        dt = _DTYPES[array.dtype]
        return self._node(lambda o: _g_param(self._h, name.encode(), dt, array.ndim, _dims(array.shape),
                                             array.ctypes.data_as(_p), array.nbytes, int(bool(trainable)), o))

    def scalar(self, dtype, value):
        return self._node(lambda o: _g_scalar(self._h, _DTYPES[np.dtype(dtype)], float(value), o))

    def unary(self, op, x):
        return self._node(lambda o: _g_unary(self._h, _UNARY[op], x, o))

    def binary(self, op, a, b):
        return self._node(lambda o: _g_binary(self._h, _BINARY[op], a, b, o))

    def cast(self, x, dtype):
        return self._node(lambda o: _g_cast(self._h, x, _DTYPES[np.dtype(dtype)], o))

    def reshape(self, x, spec):
        return self._node(lambda o: _g_reshape(self._h, x, len(spec), _dims(spec), o))

    def reduce(self, op, x):
        return self._node(lambda o: _g_reduce(self._h, _REDUCE[op], x, o))

    def softmax(self, x, log=False):
        return self._node(lambda o: _g_softmax(self._h, x, int(bool(log)), o))

    def nonzero(self, x):
        return self._node(lambda o: _g_nonzero(self._h, x, o))

    def masked_select(self, x, mask):
        return self._node(lambda o: _g_masked_select(self._h, x, mask, o))

    def linear(self, x, w, bias=None):
        return self._node(lambda o: _g_linear(self._h, x, w, -1 if bias is None else bias, o))

    def loss(self, kind, pred, target):
        return self._node(lambda o: _g_loss(self._h, LOSSES[kind], pred, target, o))

    def train(self, loss, lr, momentum=0.0):
        self.ctx._check(_g_train(self._h, loss, float(lr), float(momentum)))

    def set_lr(self, lr):
        self.ctx._check(_g_set_lr(self._h, float(lr)))

    # ---- running ----

    def feed(self, node, array):
        array = np.ascontiguousarray(array, dtype=self._inputs.get(node))
        self.ctx._check(_g_feed(self._h, node, _dims(array.shape), array.ctypes.data_as(_p), array.nbytes))

    def run(self):
        self._drop_borrowed()
        self.ctx._check(_g_run(self._h))

    def keep(self, node):
        """Keeps node's output readable after runs of a free_intermediates graph."""
        self.ctx._check(_g_keep(self._h, node))

    def tensor(self, node):
        """The node's output after the last run (borrowed: valid until the next run or
        close, after which the Tensor raises ClboundError; copy it out with numpy())."""
        h = _g_tensor(self._h, node)
        if not h:
            raise ClboundError("ERR_INVALID_ARG", f"node {node} has no tensor (not run yet?)")
        t = Tensor(self.ctx, _p(h))
        self._borrowed.append(t)
        return t

    def value(self, node):
        """The node's output as a numpy array (a host sync)."""
        return self.tensor(node).numpy()

    def stats(self):
        s = _Stats()
        s.struct_size = ctypes.sizeof(_Stats)
        self.ctx._check(_g_stats(self._h, ctypes.byref(s)))
        return {f: getattr(s, f) for f, _ in _Stats._fields_ if f != "struct_size"}

    @property
    def last_reason(self):
        return _g_reason(self._h).decode()

    def describe(self):
        n = ctypes.c_size_t()
        _g_describe(self._h, None, 0, ctypes.byref(n))
        buf = ctypes.create_string_buffer(n.value + 1)
        self.ctx._check(_g_describe(self._h, buf, n.value + 1, None))
        return buf.value.decode()
