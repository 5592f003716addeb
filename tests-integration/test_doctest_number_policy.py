"""The policy for numbers in docstring examples (the root conftest.py): what passes and what does not."""

from __future__ import annotations

import doctest

import pytest


def _passes(doctest_runner, source: str, want: str) -> bool:
    example = f">>> {source}\n{want}\n"
    test = doctest.DocTestParser().get_doctest(example, {"np": __import__("numpy")}, "policy", None, 0)
    runner = doctest_runner()
    runner.run(test, out=lambda s: None)
    return runner.summarize(verbose=False).failed == 0


@pytest.mark.parametrize(
    ("printed", "shown", "ok"),
    [
        ("-1.2247357", "-1.224736", True),  # the same value, rounded where it is shown
        ("-1.2247362", "-1.224736", True),  # 4 float32 ulps away: a compiler's reordering
        ("-1.2247405", "-1.224736", False),  # 38 ulps: a different computation
        ("3", "4", False),  # integers are exact
        ("1.0000001e-05", "1e-05", True),  # shown with fewer digits
        ("2.5", "2.6", False),
    ],
)
def test_a_float_may_move_by_the_written_bound_only(doctest_runner, printed, shown, ok):
    assert _passes(doctest_runner, f"print({printed!r})", shown) is ok


def test_the_text_around_the_numbers_must_match(doctest_runner):
    assert _passes(doctest_runner, "print('Array([1.0000001, 2.], dtype=float32)')", "Array([1., 2.], dtype=float32)")
    assert not _passes(doctest_runner, "print('Array([1., 2.], dtype=float32)')", "Array([1., 2.], dtype=float64)")
    assert not _passes(doctest_runner, "print('[1., 2.]')", "[1., 2., 3.]")


def test_ellipsis_and_whitespace_rules_still_apply(doctest_runner):
    assert _passes(doctest_runner, "print('Array([ 1.0000001,  2.])')", "Array([1., 2.])")
    assert _passes(doctest_runner, "print('loss 0.5 after 12 steps')", "loss 0.5 after ... steps")
