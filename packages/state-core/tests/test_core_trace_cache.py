"""TraceCache: least-recently-used order, replacement, copies (the engine's bounded cache)."""

from types import SimpleNamespace

import pytest

from state_core._cache import TraceCache


def _entry() -> SimpleNamespace:
    return SimpleNamespace(last_used=0)  # what the cache reads of a CacheEntry


def test_get_returns_the_stored_entry_or_none():
    cache, entry = TraceCache(), _entry()
    cache.put("k", entry)
    assert cache.get("k") is entry and cache.get("other") is None
    assert "k" in cache and cache["k"] is entry and len(cache) == 1


def test_put_beyond_maxsize_drops_the_least_recently_used():
    cache = TraceCache(maxsize=2)
    for key in "abc":
        cache.put(key, _entry())
    assert cache.keys() == ["b", "c"]


def test_a_touched_entry_is_kept_over_older_ones():
    cache = TraceCache(maxsize=2)
    a, b = _entry(), _entry()
    cache.put("a", a)
    cache.put("b", b)
    cache.touch(a)  # 'b' is now the least recently used
    cache.put("c", _entry())
    assert cache.keys() == ["a", "c"]
    cache.get("a")  # a hit stamps the entry too
    cache.put("d", _entry())
    assert cache.keys() == ["a", "d"]


def test_put_under_an_existing_key_replaces_it():
    cache, old, new = TraceCache(), _entry(), _entry()
    cache.put("k", old)
    cache.put("k", new)
    assert cache.values() == [new] and cache.items() == [("k", new)]


def test_pop_and_clear_forget_entries():
    cache = TraceCache()
    cache.put("a", _entry())
    cache.put("b", _entry())
    cache.pop("a")
    cache.pop("never stored")
    assert cache.keys() == ["b"]
    cache.clear()
    assert len(cache) == 0 and cache.get("b") is None


def test_keys_values_items_are_copies():
    cache = TraceCache()
    cache.put("a", _entry())
    keys = cache.keys()
    for key in cache:  # iterating while the cache changes is safe
        cache.put(key + "!", _entry())
    assert keys == ["a"] and sorted(cache.keys()) == ["a", "a!"]


@pytest.mark.parametrize("bad", [0, -1, 2.0, True, "8"])
def test_maxsize_must_be_a_positive_int(bad):
    with pytest.raises(ValueError, match=r"cache_size must be a positive int, got"):
        TraceCache(maxsize=bad)
