from minicalc import clamp, initials, mean, pad, span


def test_clamp_inside():
    assert clamp(5, 0, 10) == 5


def test_clamp_low():
    assert clamp(-3, 0, 10) == 0


def test_clamp_high():
    assert clamp(42, 0, 10) == 10


def test_mean():
    assert mean([1, 2, 3, 6]) == 3.0


def test_mean_empty():
    assert mean([]) == 0.0


def test_span():
    assert span([4, 9, 1]) == 8


def test_initials():
    assert initials("ada lovelace") == "AL"


def test_pad():
    assert pad("ab", 4) == "**ab"
