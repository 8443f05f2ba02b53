"""Repository-level tasks: pinned sdists of small Python packages, bugs injected by AST mutation,
their own pytest suites (FAIL_TO_PASS / PASS_TO_PASS) as the verifier, run in a bubblewrap view.

Below ``evolve.env`` (the ``repo-fix`` environment uses it) and beside ``evolve.verification``;
it imports neither torch, the policy nor the prompt package.
"""
