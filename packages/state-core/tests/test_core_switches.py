"""The process-wide switches (donation, eager first calls): a ``with`` block is this thread's only."""

import threading

import pytest

from state_core import (
    donation,
    donation_enabled,
    eager_first_calls,
    eager_first_calls_enabled,
    set_donation,
    set_eager_first_calls,
)

SWITCHES = [
    ("donation", donation, set_donation, donation_enabled, True),
    ("eager_first_calls", eager_first_calls, set_eager_first_calls, eager_first_calls_enabled, False),
]


def _in_thread(read):
    seen = []
    worker = threading.Thread(target=lambda: seen.append(read()))
    worker.start()
    worker.join()
    return seen[0]


@pytest.mark.parametrize(("name", "block", "set_default", "read", "default"), SWITCHES)
def test_a_block_is_seen_by_its_own_thread_only(name, block, set_default, read, default):
    assert read() is default
    with block(not default):
        assert read() is (not default)
        assert _in_thread(read) is default
        with block(default):  # blocks nest
            assert read() is default
        assert read() is (not default)
    assert read() is default


@pytest.mark.parametrize(("name", "block", "set_default", "read", "default"), SWITCHES)
def test_the_process_default_is_seen_by_every_thread_outside_a_block(name, block, set_default, read, default):
    set_default(not default)
    try:
        assert read() is (not default)
        assert _in_thread(read) is (not default)
        with block(default):
            assert read() is default
    finally:
        set_default(default)
    assert read() is default and _in_thread(read) is default


@pytest.mark.parametrize(("name", "block", "set_default", "read", "default"), SWITCHES)
def test_a_switch_takes_only_a_bool(name, block, set_default, read, default):
    with pytest.raises(TypeError, match=f"^set_{name}: enabled must be a bool, got int"):
        set_default(1)
    with pytest.raises(TypeError, match=f"^{name}: enabled must be a bool, got str"), block("no"):
        pass
    assert read() is default
