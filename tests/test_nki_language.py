"""The static check of kernel source against NKI 0.7's documented rules (frontier/kernels/interpreter/subset.py).

One kernel per rule that breaks it and is refused before it runs (naming the rule, the function and the line); a
kernel using everything the language guide shows, and one using the Python meta-programming NKI 0.7 allows (`is`,
comprehensions, generators, lambda, try, class inheritance), which pass (the check is never stricter than the docs);
the rule reaching into the helpers a kernel calls; and every kernel of the package passing it.
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

def k_dynamic_range(x):
    t = nl.load(x)
    for _ in nl.dynamic_range(1):
        nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=2.0)
    return _store(x, t)


def k_keyword_only(x, *, scale=2.0):
    t = nl.load(x)
    nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=scale)
    return _store(x, t)


def k_dict_key(x):
    tiles = {}
    for i in range(2):
        tiles[i] = nl.load(x)
    return _store(x, tiles[0])


def k_nki_object(x):
    class Scale:  # not derived from NKIObject
        factor = 2.0

    t = nl.load(x)
    nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=Scale().factor)
    return _store(x, t)


BREAKING = {rule: globals()[f"k_{rule.replace('-', '_')}"] for rule in RULES}


@pytest.mark.parametrize("rule", RULES)
def test_each_rule_refuses_a_kernel_before_it_runs(rule):
    kernel = BREAKING[rule]
    found = violations(kernel)
    assert found and {v.rule for v in found} == {rule}, found
    with pytest.raises(LanguageError, match=rf"{kernel.__name__}|{rule}") as e:
        run(kernel, _x(8, 8))
    assert f": {rule}: " in str(e.value) and "outside the NKI language" in str(e.value)


class Plain:  # a module-level class a kernel instantiates, not derived from NKIObject
    def __init__(self, scale):
        self.scale = scale


def test_a_class_a_kernel_instantiates_must_derive_from_nki_object():
    def kernel(x):
        cfg = Plain(2.0)
        t = nl.load(x)
        nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=cfg.scale)
        return _store(x, t)

    assert [(v.rule, v.function) for v in violations(kernel)] == [("nki-object", "Plain")]


# what the docs allow ----------------------------------------------------------------------------------------------

class Config(nl.NKIObject):  # a simple class, as the language guide's
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
        t = nl.load(x)
        for _ in nl.dynamic_range(1):
            nisa.memset(dst=t, value=0.0)
        return t

    def kernel(x):
        return _store(x, helper(x))

    found = violations(kernel)
    assert [(v.rule, v.function.split(".")[-1]) for v in found] == [("dynamic-range", "helper")]


class ShapeError(ValueError):  # a Python exception: meta-programming, not an NKI class
    pass


class Base(nl.NKIObject):
    scale = 1.0


class Doubling(Base):  # inheritance between NKIObject classes (NKI 0.7)
    scale = 2.0


def _tiles(x):
    yield nl.load(x)


def k_python(x, bias=None):
    """Python meta-programming, which NKI 0.7 specializes by tracing (release notes 0.7.0): `is` / `is not`,
    comprehensions, a generator function and expression, lambda, try / except, raise, del, a set, class inheritance."""
    if bias is not None:
        raise ShapeError("no bias here")
    widths = [w for w in range(3)]
    assert sum(w for w in widths) == 3 and len({1, 2}) == 2
    scale = (lambda s: s)(Doubling().scale)
    try:
        t = next(_tiles(x))
    except StopIteration:
        t = nl.load(x)
    junk = widths
    del junk
    nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=scale)
    return _store(x, t)


def test_python_meta_programming_is_not_refused():
    assert violations(k_python) == []
    x = _x(8, 8)
    out, _ = run(k_python, x)
    np.testing.assert_array_equal(out, 2 * x)


@pytest.mark.parametrize("module", KERNELS)
def test_every_kernel_of_the_package_is_in_the_language(module):
    for name, found in check_module(load(module)).items():
        assert found == [], f"{module}.{name}:\n" + "\n".join(map(str, found))


def _calls_a_library(x):
    return np.linspace(0.0, 1.0, 3)


def test_a_library_module_s_functions_are_not_checked_as_kernel_code():
    from frontier.kernels.interpreter.subset import _helpers
    assert _helpers(_calls_a_library, {"np.linspace"}) == []  # only modules `load` ran as kernel source are followed
