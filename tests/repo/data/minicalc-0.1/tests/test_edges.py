from minicalc import clamp, mean


def test_clamp_edges():
    assert clamp(0, 0, 10) == 0
    assert clamp(10, 0, 10) == 10


def test_mean_single():
    assert mean([7]) == 7.0
