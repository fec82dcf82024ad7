"""What the tests share and that is not a test: the bridge harness, the SSE reader, fakes, checks and probes.

No test module imports another: anything two test modules need lives here (enforced by
tests/unit/test_test_imports.py).
"""
