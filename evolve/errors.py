"""User-facing errors.

An :class:`EvolveError` is bad input or an unusable environment (a malformed
config, a missing database, an unknown generation). The CLI prints its message
as one line and exits with code 2, with no traceback. A failed *sample* is never
an exception: verifiers return results. Anything else that raises is a bug.
"""


class EvolveError(Exception):
    """A problem the user can fix; its message is one line naming the problem."""

    exit_code = 2


class ConfigError(EvolveError):
    """A config, spec, task or pipeline file is malformed."""


class LineageError(EvolveError):
    """The lineage database is missing, corrupt, too new, or lacks a named object."""
