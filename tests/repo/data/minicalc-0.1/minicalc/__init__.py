"""minicalc: a few small functions with tests, test data for evolve's repo-fix environment."""


def clamp(x, lo, hi):
    """x limited to [lo, hi]."""
    if x < lo:
        return lo
    if x > hi:
        return hi
    return x


def mean(xs):
    """Arithmetic mean; 0.0 for an empty list."""
    if not xs:
        return 0.0
    return sum(xs) / len(xs)


def span(xs):
    """max - min of a non-empty list."""
    return max(xs) - min(xs)


def initials(name):
    """'ada lovelace' -> 'AL'."""
    return "".join(part[0].upper() for part in name.split())


def pad(text, width):
    """text right-aligned in ``width`` columns, filled with '*'."""
    return text.rjust(width, "*")
