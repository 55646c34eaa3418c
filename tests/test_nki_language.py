"""The static check of kernel source against the documented NKI language (frontier/kernels/interpreter/subset.py).

One kernel per rule that breaks it and is refused before it runs (naming the rule, the function and the line); a
kernel using everything the language guide shows, which passes (the check is never stricter than the docs); the rule
reaching into the helpers a kernel calls; and every kernel of the package passing it.
"""

from __future__ import annotations

import numpy as np
import pytest

from frontier.kernels.interpreter import LanguageError, RULES, check_module, load, run, violations
from frontier.kernels.interpreter import isa as nisa
from frontier.kernels.interpreter import language as nl
from frontier.kernels.nki import KERNELS


def _x(*shape):
    return np.random.default_rng(0).standard_normal(shape).astype(np.float32)


def _store(x, t):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, t)
    return out


# one kernel per rule, each otherwise a working copy kernel ------------------------------------------------------------

def k_identity(x, bias=None):
    t = nl.load(x)
    if bias is None:
        return _store(x, t)
    return _store(x, t)


def k_dict_key(x):
    tiles = {}
    for i in range(2):
        tiles[i] = nl.load(x)
    return _store(x, tiles[0])


def k_comprehension(x):
    widths = [w for w in range(3)]
    return _store(x, nl.load(x[:, 0:x.shape[1] - len(widths) + 3]))


def k_generator(x):
    rows = max(r for r in range(x.shape[0]))
    return _store(x, nl.load(x[0:rows + 1, :]))


def k_del(x):
    t = nl.load(x)
    u = nl.load(x)
    del u
    return _store(x, t)


def k_raise(x):
    if x.shape[0] > 128:
        raise ValueError("too many rows")
    return _store(x, nl.load(x))


def k_try(x):
    try:
        t = nl.load(x)
    except ValueError:
        t = nl.load(x)
    return _store(x, t)


def k_lambda(x):
    double = lambda t: nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=2.0)  # noqa: E731
    t = nl.load(x)
    double(t)
    return _store(x, t)


def _rows():
    yield 0


def k_yield(x):
    for r in _rows():
        t = nl.load(x[r:r + x.shape[0], :])
    return _store(x, t)


COUNTER = 0


def k_scope(x):
    global COUNTER
    COUNTER = COUNTER + 1
    return _store(x, nl.load(x))


def k_set(x):
    seen = {1, 2}
    return _store(x, nl.load(x[:, 0:x.shape[1] - len(seen) + 2]))


def k_keyword_only(x, *, scale=2.0):
    t = nl.load(x)
    nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=scale)
    return _store(x, t)


BREAKING = {rule: globals()[f"k_{rule.replace('-', '_')}"] for rule in RULES}


@pytest.mark.parametrize("rule", RULES)
def test_each_rule_refuses_a_kernel_before_it_runs(rule):
    kernel = BREAKING[rule]
    found = violations(kernel)
    assert found and {v.rule for v in found} == {rule}, found
    with pytest.raises(LanguageError, match=rf"{kernel.__name__}|_rows|{rule}") as e:
        run(kernel, _x(8, 8))
    assert f": {rule}: " in str(e.value) and "outside the NKI language" in str(e.value)


# what the docs allow ----------------------------------------------------------------------------------------------

class Config:  # a simple class, as the language guide's
    def __init__(self, scale):
        self.scale = scale


def _scale_into(dst, src, scale):
    nisa.tensor_scalar(dst=dst, data=src, op0=nl.multiply, operand0=scale)


def k_documented(x, mode="double", bias=None):
    """Everything the language guide shows: print, assert with an f-string, None compared with ==, a dict with string
    keys (also f-string and variable string keys), lists with append/extend/len, tuples, while, for over a list, if on
    compile-time values, a conditional expression, a nested function, a function passed as a value, a class."""
    n, d = x.shape
    assert n <= nl.tile_size.pmax, f"{n} rows do not fit the partitions"
    print(f"kernel on {x.shape}")
    scales = {"double": 2.0, "triple": 3.0}
    name = "half"
    scales[name] = 0.5
    scales[f"x{n}"] = 1.0
    parts = []
    parts.append(1)
    parts.extend((2, 3))
    k = 0
    while k < len(parts):
        k += 1
    cfg = Config(scales[mode] if bias == None else 1.0)  # noqa: E711  (== None: the documented spelling)

    def apply(fn, t):
        fn(t, t, cfg.scale)

    t = nl.load(x)
    for step in [0]:
        if step == 0:
            apply(_scale_into, t)
    return _store(x, t)


def test_the_documented_language_passes():
    assert violations(k_documented) == []
    x = _x(8, 8)
    out, _ = run(k_documented, x)
    np.testing.assert_array_equal(out, 2 * x)


def test_a_key_of_unknown_type_is_not_refused():
    """Never stricter than the docs: a key the source does not show to be a non-string passes."""

    def k(x, key="a"):
        d = {}
        d[key] = nl.load(x)
        return _store(x, d[key])

    assert violations(k) == []


def test_helpers_a_kernel_calls_are_checked_too():
    def helper(x):
        return [nl.load(x) for _ in range(1)][0]

    def kernel(x):
        return _store(x, helper(x))

    found = violations(kernel)
    assert [(v.rule, v.function.split(".")[-1]) for v in found] == [("comprehension", "helper")]


@pytest.mark.parametrize("module", KERNELS)
def test_every_kernel_of_the_package_is_in_the_language(module):
    for name, found in check_module(load(module)).items():
        assert found == [], f"{module}.{name}:\n" + "\n".join(map(str, found))
