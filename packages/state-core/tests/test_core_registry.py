"""The shared-program registry: what keeps a record alive, and when it is forgotten."""

import gc
import weakref

import jax.numpy as jnp
import numpy as np
from numpy.testing import assert_allclose

import state_core
from state_core import State, StatefulFunction, _registry
from state_core._identity import IdentityRef, callable_identity, weak_referents


class Box:
    pass


def test_identity_ref_holds_weakly_and_equals_nothing_once_collected():
    box = Box()
    ref, again = IdentityRef(box), IdentityRef(box)
    assert ref == again and hash(ref) == hash(again) and ref.weak
    del box
    gc.collect()
    assert ref.obj is None and ref != again and ref == ref
    held = IdentityRef([1])  # a list cannot be weakly referenced: held
    assert not held.weak and held.obj == [1]


def test_weak_referents_lists_captured_objects_once():
    w, box = State(1.0, name="w"), Box()
    found = list(weak_referents(callable_identity(lambda: (w.value, box, w))))
    assert sorted(type(x).__name__ for x in found) == ["Box", "State"]  # w once


def _record_of_a_function_reading(w):
    def read():
        return w.value.sum()

    f = StatefulFunction(read)
    assert_allclose(np.asarray(f()), 2.0)
    return read, weakref.ref(f._record)


def test_a_record_used_with_states_lives_as_long_as_they_do():
    w = State(jnp.ones(2))
    read, record = _record_of_a_function_reading(w)
    gc.collect()
    assert record() is not None  # w keeps it for the next object ...
    f = StatefulFunction(read)
    f._adopt_shared_record()
    assert f._record is record()  # ... which finds it
    del f, read, w
    gc.collect()
    assert record() is None


def _record_slot_of_a_function_capturing(box):
    f = StatefulFunction(lambda x: x * box.scale)
    assert_allclose(np.asarray(f(2.0)), 6.0)
    return weakref.ref(f._record.slot)


def test_a_collected_captured_object_forgets_its_record_at_once():
    box = Box()
    box.scale = 3.0
    before = len(_registry._REGISTRY)
    slot = _record_slot_of_a_function_capturing(box)
    assert slot() is not None and len(_registry._REGISTRY) == before + 1
    del box
    gc.collect()
    assert slot() is None and len(_registry._REGISTRY) == before


def test_eviction_and_clear_caches_release_the_states_hold_on_records(monkeypatch):
    monkeypatch.setattr(_registry, "MAX_SHARED_FUNCTIONS", 2)
    w = State(jnp.ones(2))
    fns = [StatefulFunction(lambda k=k: w.value * k) for k in range(3)]
    for f in fns:
        f()
    assert len(w._kept_records) == 2  # the first function's record was evicted
    state_core.clear_caches()
    assert len(w._kept_records) == 0
    assert_allclose(np.asarray(fns[0]()), [0.0, 0.0])  # objects keep working


def test_copies_of_a_state_do_not_keep_its_records():
    import copy

    w = State(jnp.ones(2))
    StatefulFunction(lambda: w.value * 2)()
    assert w._kept_records
    assert "_kept_records" not in copy.copy(w).__dict__
    assert "_kept_records" not in copy.deepcopy(w).__dict__


def test_an_object_makes_no_record_before_its_first_call_and_clear_caches_reaches_what_it_traced():
    w = State(jnp.ones(2))

    def read(x):
        return w.value.sum() + x

    unused, other = StatefulFunction(read), StatefulFunction(read)
    # Until a call looks for the shared record, every object holds the same empty one.
    assert unused._record is other._record and len(unused._cache) == 0
    assert StatefulFunction(read, cache_size=3)._record is not unused._record  # its own size: its own record
    assert_allclose(np.asarray(other(1.0)), 3.0)
    assert other._record is not unused._record and len(unused._cache) == 0  # nothing was stored in it
    inline = StatefulFunction(read)
    assert_allclose(np.asarray(inline(2.0)), 4.0)  # the steady path finds other's program ...
    assert inline._record is other._record
    assert other._last is not None  # ... and clear_caches() empties what the tracing object kept
    state_core.clear_caches()
    assert other._last is None and len(other._cache) == 0


def test_an_unshareable_function_gets_a_record_of_its_own_at_its_first_call():
    f = StatefulFunction(lambda x: x + 1)
    empty = f._record
    f.__engine_identity__ = lambda: None  # (as a transformation with options no key can name)
    assert_allclose(np.asarray(f(1.0)), 2.0)
    assert f._record is not empty and len(f._cache) == 1 and len(empty.cache) == 0


def test_callable_identity_compares_code_captured_values_and_defaults():
    def make(k, scale=2.0, *, shift=1.0):
        def f(x, a=scale, *, b=shift):
            return x * k * a + b

        return f

    assert callable_identity(make(3)) == callable_identity(make(3))
    assert callable_identity(make(3)) != callable_identity(make(4))  # a captured value
    assert callable_identity(make(3)) != callable_identity(make(3, scale=5.0))  # a default
    assert callable_identity(make(3)) != callable_identity(make(3, shift=0.0))  # a keyword default
    no_defaults = lambda x: x
    assert callable_identity(no_defaults)[4:] == (None, None)

    def outer(g):
        def h(x):
            return g(x) + late

        return h

    # A captured function is named by what it computes; a cell bound later counts once bound.
    assert callable_identity(outer(make(3))) == callable_identity(outer(make(3)))
    assert callable_identity(outer(make(3))) != callable_identity(outer(make(4)))
    unbound = outer(make(3))
    before = callable_identity(unbound)
    late = 1.0
    assert callable_identity(unbound) != before
