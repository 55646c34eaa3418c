"""The operators kernels name (`nl.add`, `nl.exp`, ...): values for the `op=` fields of `nki.isa` instructions.

Each one knows whether it is an ALU operator (VectorE/GpSimd `tensor_tensor`, `tensor_scalar`...), a ScalarE
activation function, a legal reduction, and whether it exists on the hardware at all (`nl.divide`, `nl.mod`,
`nl.fmod` do not: they are refused wherever they appear). `apply` computes on float32 arrays, as the engines do for
arithmetic; `apply_int` on int64, for GpSimd's native integer arithmetic on all-int32 operands (isa.tensor_tensor).
This module knows nothing of the language: `nki.language` makes the operators callable as its high-level elementwise
functions (`nl.add(a, b)`) by building the same table with its own subclass (`make_ops`).
"""

from __future__ import annotations

import math

import numpy as np

from .errors import UnsupportedError

f32 = np.float32


TRN3_ONLY = "available only on NeuronCore-v4 (Trn3); the interpreter models Trn2 (NeuronCore-v3)"


class Op:
    def __init__(self, name, fn, arity, *, alu=False, act=False, reduce=None, hardware=True, hint=""):
        self.name, self.fn, self.arity = name, fn, arity
        self.alu, self.act, self.reduce = alu, act, reduce
        self.hardware, self.hint = hardware, hint

    def __repr__(self) -> str:
        return f"nl.{self.name}"

    def check_hardware(self) -> "Op":
        if not self.hardware:
            where = "on Trn2" if self.hint.startswith(TRN3_ONLY) else "on the hardware (no engine has it)"
            raise UnsupportedError(f"nl.{self.name} does not exist {where}: {self.hint}")
        return self

    def apply(self, *args: np.ndarray) -> np.ndarray:
        with np.errstate(all="ignore"):
            return np.asarray(self.fn(*args), dtype=f32)

    def apply_int(self, *args: np.ndarray) -> np.ndarray:
        """Exact integer arithmetic on int64 (32-bit operands cannot overflow it except in power)."""
        with np.errstate(all="ignore"):
            return np.asarray(self.fn(*(np.asarray(a, np.int64) for a in args))).astype(np.int64)


def _cmp(f):
    return lambda a, b: f(a, b).astype(np.result_type(a, b) if np.result_type(a, b).kind in "iu" else f32)


def _sigmoid(x):
    return f32(1) / (f32(1) + np.exp(-x))


def _gelu_tanh(x):
    return f32(0.5) * x * (f32(1) + np.tanh(f32(0.7978845608028654) * (x + f32(0.044715) * x * x * x)))


def _gelu_sigmoid(x):
    """x sigmoid(1.702 x): the sigmoid approximation of GELU (the NKI pages name it only; the constant is the GELU
    paper's, Hendrycks and Gimpel, arXiv 1606.08415)."""
    return x * _sigmoid(f32(1.702) * x)


def _silu_dx(x):
    """d/dx x sigmoid(x) = sigmoid(x) (1 + x (1 - sigmoid(x)))."""
    s = _sigmoid(x)
    return s * (f32(1) + x * (f32(1) - s))


_NO_DIVIDE = "multiply by a reciprocal (nisa.reciprocal on VectorE, or nisa.activation(op=nl.reciprocal) on ScalarE)"


def make_ops(cls=None) -> dict:
    """name -> operator, each an instance of `cls` (an Op subclass; Op itself by default)."""
    cls = cls or Op
    return {op.name: cls(op.name, op.fn, op.arity, alu=op.alu, act=op.act, reduce=op.reduce, hardware=op.hardware,
                         hint=op.hint) for op in _TABLE}


def _erf(x):
    """erf in float64 through math.erf, elementwise (NumPy has none)."""
    return np.vectorize(math.erf, otypes=[np.float64])(np.asarray(x, np.float64))


_TABLE = [
    # binary ALU operators (VectorE; power runs on GpSimd)
    Op("add", np.add, 2, alu=True, reduce=np.sum),
    Op("subtract", np.subtract, 2, alu=True),
    Op("multiply", np.multiply, 2, alu=True, reduce=np.prod),
    Op("maximum", np.maximum, 2, alu=True, reduce=np.max),
    Op("minimum", np.minimum, 2, alu=True, reduce=np.min),
    Op("equal", _cmp(np.equal), 2, alu=True),
    Op("not_equal", _cmp(np.not_equal), 2, alu=True),
    Op("greater", _cmp(np.greater), 2, alu=True),
    Op("greater_equal", _cmp(np.greater_equal), 2, alu=True),
    Op("less", _cmp(np.less), 2, alu=True),
    Op("less_equal", _cmp(np.less_equal), 2, alu=True),
    Op("power", np.power, 2, alu=True),
    # the signed value of the larger (smaller) magnitude, NeuronCore-v4 only (nki.language.abs_max / abs_min)
    Op("abs_max", lambda a, b: np.where(np.abs(a) >= np.abs(b), a, b), 2, alu=True, hardware=False,
       hint=TRN3_ONLY + " (nki.language.abs_max)"),
    Op("abs_min", lambda a, b: np.where(np.abs(a) <= np.abs(b), a, b), 2, alu=True, hardware=False,
       hint=TRN3_ONLY + " (nki.language.abs_min)"),
    # unary: ALU operators and/or ScalarE activation functions
    Op("abs", np.abs, 1, alu=True, act=True),
    Op("square", np.square, 1, alu=True, act=True),
    Op("relu", lambda x: np.maximum(x, f32(0)), 1, alu=True, act=True),
    Op("rsqrt", lambda x: f32(1) / np.sqrt(x), 1, alu=True, act=True),
    Op("reciprocal", lambda x: f32(1) / x, 1, alu=True, act=True),
    Op("copy", lambda x: x, 1, act=True),
    Op("sigmoid", _sigmoid, 1, act=True),
    Op("tanh", np.tanh, 1, act=True),
    Op("exp", np.exp, 1, act=True),
    Op("log", np.log, 1, act=True),
    Op("sqrt", np.sqrt, 1, act=True),
    Op("sign", np.sign, 1, act=True),
    Op("silu", lambda x: x * _sigmoid(x), 1, act=True),
    Op("gelu", lambda x: (0.5 * x * (1.0 + _erf(x / np.sqrt(2.0)))).astype(f32), 1, act=True),
    Op("gelu_apprx_tanh", _gelu_tanh, 1, act=True),
    Op("gelu_apprx_sigmoid", _gelu_sigmoid, 1, act=True),
    Op("silu_dx", _silu_dx, 1, act=True),
    Op("sin", np.sin, 1, act=True),
    # not on the hardware
    Op("divide", np.divide, 2, hardware=False, hint=_NO_DIVIDE),
    Op("mod", np.mod, 2, hardware=False, hint="no modulo operator on any engine"),
    Op("fmod", np.fmod, 2, hardware=False, hint="no modulo operator on any engine"),
]

OPS = make_ops()
